"""Engine overhead: raypress's runner against hand-written Ray Data running the very same ops.

Both sides read the same parquet files, run the same six text-op objects (three mappers, three
filters) with the same batch size, and write parquet.  What raypress adds on top -- tombstones
instead of dropping, the ``stats`` struct column, per-batch timing, quarantine-ready wrappers,
the sink's tallies and the ledger -- is the difference between the two medians.

    python bench/engine_overhead.py              # 200,000 rows, 3 timed runs each
    python bench/engine_overhead.py --rows 20000 # a quick look

Runs alternate (raypress, hand-written, raypress, ...) after one warm-up of each, so both see the
same machine load; each run checks that the ledger adds up and that both kept the same ids.
Ray Data's ``read_parquet`` is given one footer-reading actor (``--footer-actors``) instead of its
default 32, whose start-up per run would otherwise dominate the hand-written side.

The last line printed is ``ratio N.NN``: raypress median / hand-written median.
"""

from __future__ import annotations

import argparse
import glob
import os
import statistics
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from raypress.operators.base import Filter, Mapper, Operator  # noqa: E402
from raypress.operators.registry import get_op  # noqa: E402

# (node id, op, params): filters with bounds that drop part of a corpus of package docs and code
OPS: list[tuple[str, str, dict[str, Any]]] = [
    ("no_email", "clean_email_mapper", {}),
    ("whitespace", "whitespace_normalization_mapper", {}),
    ("punctuation", "punctuation_normalization_mapper", {}),
    ("enough_words", "words_num_filter", {"min_num": 30}),
    ("alphanumeric", "alphanumeric_filter", {"min_ratio": 0.55}),
    ("special_chars", "special_characters_filter", {"max_ratio": 0.4}),
]
N_FILES = 4
MIN_CHARS, CHUNK_CHARS = 250, 600  # rows are a few hundred characters of text
WARMUP_ROWS = 4_000


# -- corpus (not timed) ---------------------------------------------------------------------------
def source_paragraphs() -> list[str]:
    """Pieces of real text found on every Python install (package descriptions, stdlib sources):
    consecutive paragraphs of a file joined up to MIN_CHARS, long ones cut near CHUNK_CHARS."""
    paths = sorted(glob.glob(os.path.join(sysconfig.get_paths()["purelib"], "*.dist-info", "METADATA")))
    paths += sorted(glob.glob(os.path.join(sysconfig.get_paths()["stdlib"], "*.py")))
    out: list[str] = []
    for path in paths:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
        piece = ""
        for para in text.split("\n\n"):
            piece = f"{piece}\n\n{para.strip()}" if piece else para.strip()
            while len(piece) > CHUNK_CHARS:
                cut = piece.rfind(" ", CHUNK_CHARS // 2, CHUNK_CHARS)
                cut = cut if cut > 0 else CHUNK_CHARS
                out.append(piece[:cut])
                piece = piece[cut:].strip()
            if len(piece) >= MIN_CHARS:
                out.append(piece)
                piece = ""
    return out


def build_corpus(rows: int, folder: Path, paragraphs: list[str]) -> list[str]:
    """`rows` rows (id, text) over N_FILES parquet files; paragraphs cycle, a row tag keeps rows distinct."""
    folder.mkdir(parents=True, exist_ok=True)
    per_file = -(-rows // N_FILES)
    files = []
    for f in range(N_FILES):
        lo, hi = f * per_file, min(rows, (f + 1) * per_file)
        if lo >= hi:
            break
        ids = [f"r{i:08d}" for i in range(lo, hi)]
        texts = [f"{paragraphs[i % len(paragraphs)]} (row {i})" for i in range(lo, hi)]
        path = folder / f"part-{f}.parquet"
        pq.write_table(pa.table({"id": ids, "text": texts}), path, row_group_size=16_384)
        files.append(str(path))
    return files


# -- (a) raypress ---------------------------------------------------------------------------------
def pipeline_yaml(files: list[str]) -> str:
    lines = ["name: engine-overhead", "settings: {seed: 0, max_error_ratio: 0.0}", "nodes:",
             "  - id: read", "    op: read_parquet", f"    with: {{paths: {files!r}, id_key: id}}"]
    prev = "read"
    for nid, op, params in OPS:
        lines += [f"  - id: {nid}", f"    op: {op}", f"    input: {prev}"]
        if params:
            lines.append("    with: {" + ", ".join(f"{k}: {v!r}" for k, v in params.items()) + "}")
        prev = nid
    lines += ["  - id: out", "    op: write_parquet", f"    input: {prev}",
              '    with: {path: "{run_dir}/output", compression: snappy}']
    return "\n".join(lines) + "\n"


def run_raypress(yaml_path: Path, run_dir: Path) -> tuple[float, Path, dict]:
    from raypress.dag.runner import run_pipeline

    start = time.perf_counter()
    ledger = run_pipeline(str(yaml_path), run_dir=str(run_dir))
    seconds = time.perf_counter() - start
    if not ledger["adds_up"]:
        raise AssertionError(f"raypress ledger does not add up: {ledger.get('problems')}")
    return seconds, run_dir / "output", ledger


# -- (b) hand-written Ray Data --------------------------------------------------------------------
def make_ops() -> list[Operator]:
    ops = []
    for _, name, params in OPS:
        cls = get_op(name)
        ops.append(cls(cls.Params(**params)))
    return ops


def batch_fn(op: Operator) -> Callable[[pa.Table], pa.Table]:
    """The op's own methods, nothing else: mappers rewrite, filters keep rows without a reason."""
    if isinstance(op, Mapper):
        return op.process_batch
    assert isinstance(op, Filter)

    def keep(table: pa.Table) -> pa.Table:
        reasons = op.drop_reasons(op.compute_stats(table))
        return table.filter(pa.array([r is None for r in reasons], pa.bool_()))

    return keep


def run_ray_data(files: list[str], out_dir: Path) -> tuple[float, Path]:
    import ray.data

    start = time.perf_counter()
    ds = ray.data.read_parquet(files)
    for op in make_ops():
        ds = ds.map_batches(batch_fn(op), batch_format="pyarrow", batch_size=type(op).batch_size)
    ds.write_parquet(str(out_dir), compression="snappy")
    return time.perf_counter() - start, out_dir


# -- measuring ------------------------------------------------------------------------------------
def kept_ids(folder: Path) -> set[str]:
    files = sorted(folder.glob("**/*.parquet"))
    return {i for f in files for i in pq.read_table(f, columns=["id"]).column("id").to_pylist()}


def check_same(rp_out: Path, rd_out: Path, ledger: dict, rows: int) -> int:
    a, b = kept_ids(rp_out), kept_ids(rd_out)
    if a != b:
        raise AssertionError(f"kept ids differ: raypress {len(a)}, hand-written {len(b)}, "
                             f"{len(a ^ b)} in only one")
    nodes = ledger["nodes"]
    if nodes["read"]["rows_out"] != rows or nodes["out"]["rows_out"] != len(a):
        raise AssertionError(f"ledger counts {nodes['read']['rows_out']} read / {nodes['out']['rows_out']} "
                             f"written, expected {rows} / {len(a)}")
    untimed = [nid for nid, _, _ in OPS if not nodes[nid]["seconds"] > 0]
    if untimed:
        raise AssertionError(f"the ledger has no time for {untimed}")
    return len(a)


def start_ray(num_cpus: int, attempts: int = 4) -> None:
    """ensure_ray, retried: on a loaded machine the raylet can give up waiting for its agents."""
    import ray

    from raypress.dag.ray_session import ensure_ray

    for attempt in range(1, attempts + 1):
        t0 = time.perf_counter()
        try:
            ensure_ray(num_cpus=num_cpus)
        except Exception as exc:  # noqa: BLE001 - Ray raises a bare Exception on a startup timeout
            ray.shutdown()
            if attempt == attempts:
                raise
            print(f"ray start failed after {time.perf_counter() - t0:.0f}s ({exc}); retrying", flush=True)
            continue
        print(f"ray started in {time.perf_counter() - t0:.1f}s", flush=True)
        return


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=200_000, help="rows in the corpus")
    ap.add_argument("--repeats", type=int, default=3, help="timed runs of each side (alternating)")
    ap.add_argument("--num-cpus", type=int, default=2, help="CPUs of the embedded Ray")
    ap.add_argument("--footer-actors", type=int, default=1,
                    help="FooterReader actors Ray Data's read_parquet starts per run (Ray's default: 32)")
    args = ap.parse_args(argv)
    os.environ.setdefault("RAYPRESS_PROGRESS", "0")
    # Ray Data 2.60's read_parquet starts RAY_DATA_PARQUET_FOOTER_NUM_ACTORS (default 32) new
    # actor processes per execution to read footers: ~40 s on a loaded 2-core machine, which
    # would swamp what this measures.  Workers inherit the variable from ray.init.
    os.environ.setdefault("RAY_DATA_PARQUET_FOOTER_NUM_ACTORS", str(args.footer_actors))

    with tempfile.TemporaryDirectory(prefix="rp-bench-") as tmp:
        root = Path(tmp)
        paragraphs = source_paragraphs()
        files = build_corpus(args.rows, root / "corpus", paragraphs)
        warm_files = build_corpus(min(WARMUP_ROWS, args.rows), root / "warm", paragraphs)
        yaml_path, warm_yaml = root / "pipeline.yaml", root / "warm.yaml"
        yaml_path.write_text(pipeline_yaml(files))
        warm_yaml.write_text(pipeline_yaml(warm_files))
        print(f"corpus: {args.rows} rows in {len(files)} files from {len(paragraphs)} paragraphs; "
              f"load average {os.getloadavg()[0]:.1f}", flush=True)

        start_ray(args.num_cpus)
        _, warm_a, warm_ledger = run_raypress(warm_yaml, root / "warm-rp")
        _, warm_b = run_ray_data(warm_files, root / "warm-rd")
        check_same(warm_a, warm_b, warm_ledger, min(WARMUP_ROWS, args.rows))

        times: dict[str, list[float]] = {"raypress": [], "ray_data": []}
        kept, ledger = -1, warm_ledger
        for i in range(args.repeats):
            sa, out_a, ledger = run_raypress(yaml_path, root / f"rp-{i}")
            sb, out_b = run_ray_data(files, root / f"rd-{i}")
            kept = check_same(out_a, out_b, ledger, args.rows)
            times["raypress"].append(sa)
            times["ray_data"].append(sb)
            print(f"run {i + 1}: raypress {sa:.2f}s  hand-written {sb:.2f}s  "
                  f"load average {os.getloadavg()[0]:.1f}", flush=True)

    import ray

    ray.shutdown()
    med = {k: statistics.median(v) for k, v in times.items()}
    print()
    print(f"{'':<22}{'median s':>10}{'rows/s':>12}   runs")
    for label, key in (("raypress run_pipeline", "raypress"), ("hand-written Ray Data", "ray_data")):
        runs = " ".join(f"{t:.2f}" for t in times[key])
        print(f"{label:<22}{med[key]:>10.2f}{args.rows / med[key]:>12,.0f}   {runs}")
    print(f"rows {args.rows}, kept {kept} ({kept / args.rows:.1%}), ops {len(OPS)}, "
          f"load average {os.getloadavg()[0]:.1f}")
    print("raypress op seconds (ledger, last run): "
          + ", ".join(f"{nid} {ledger['nodes'][nid]['seconds']:.2f}" for nid, _, _ in OPS))
    print(f"ratio {med['raypress'] / med['ray_data']:.2f}", flush=True)


if __name__ == "__main__":
    main()
