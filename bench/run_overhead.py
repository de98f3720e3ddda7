"""Per-run overhead: a small pipeline run many times in one process, raypress against hand-written
Ray Data doing the same work.

What it shows: the fixed cost of a raypress run once Ray is up (validation, the plan, the ledger,
the sink's tallies, the service actors) -- what a notebook, the pipelines service or the test suite
pays per run.  Both sides read the same JSON Lines file (100 rows), drop rows of fewer than three
words and write JSON Lines, in one embedded Ray session; runs alternate after one warm-up of each.

    python bench/run_overhead.py            # 10 timed runs each
    python bench/run_overhead.py --runs 20

The last line printed is ``ratio N.NN``: raypress median / hand-written median.  Measured here
(2 cores, one sitting): stop 49's engine (9378a10), which started an op timer, a reader tally and a
CPU probe actor per run and waited for two of them, 1.762 s a run against 0.258 s (ratio 6.82);
with the actors kept per driver (fdac82c), 0.116 s against 0.237 s (ratio 0.49).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import textwrap
import time
from pathlib import Path


def write_inputs(folder: Path, rows: int) -> tuple[Path, Path]:
    data = folder / "in.jsonl"
    data.write_text("".join(json.dumps({"id": f"d{i}", "text": " ".join(["word"] * (i % 6))}) + "\n"
                            for i in range(rows)))
    pipeline = folder / "p.yaml"
    pipeline.write_text(textwrap.dedent(f"""\
        name: run-overhead
        nodes:
          - {{id: docs, op: read_jsonl, with: {{paths: ["{data}"]}}}}
          - {{id: words, op: words_num_filter, input: docs, with: {{min_num: 3}}}}
          - {{id: out, op: write_jsonl, input: words, with: {{path: "{{run_dir}}/out"}}}}
        """))
    return data, pipeline


def raypress_run(pipeline: Path, run_dir: Path) -> int:
    from raypress.dag.runner import run_pipeline

    ledger = run_pipeline(str(pipeline), run_dir=str(run_dir))
    assert ledger["adds_up"], ledger["problems"]
    return ledger["nodes"]["out"]["rows_out"]


def hand_written_run(data: Path, out_dir: Path) -> int:
    import ray.data

    ds = ray.data.read_json(str(data), lines=True).filter(lambda row: len(row["text"].split()) >= 3)
    ds.write_json(str(out_dir))
    return sum(1 for f in out_dir.glob("*.json") for _ in f.open())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--rows", type=int, default=100)
    args = parser.parse_args()

    from raypress.dag.ray_session import ensure_ray

    ensure_ray(num_cpus=2)
    folder = Path(tempfile.mkdtemp(prefix="run-overhead-"))
    data, pipeline = write_inputs(folder, args.rows)
    times: dict[str, list[float]] = {"raypress": [], "hand-written": []}
    kept: dict[str, set[int]] = {"raypress": set(), "hand-written": set()}
    for i in range(args.runs + 1):  # the first of each is the warm-up
        for side in times:
            start = time.perf_counter()
            if side == "raypress":
                n = raypress_run(pipeline, folder / f"raypress-{i}")
            else:
                n = hand_written_run(data, folder / f"hand-{i}")
            if i:
                times[side].append(time.perf_counter() - start)
            kept[side].add(n)
    assert kept["raypress"] == kept["hand-written"] and len(kept["raypress"]) == 1, kept
    for side, values in times.items():
        print(f"{side:13s} median {statistics.median(values):.3f} s  (min {min(values):.3f}, max {max(values):.3f}, "
              f"{len(values)} runs, {kept[side].pop()} rows kept)")
    print(f"ratio {statistics.median(times['raypress']) / statistics.median(times['hand-written']):.2f}")


if __name__ == "__main__":
    main()
