"""Plans of any size: `raypress validate` and `raypress plan` on chains of 2,000 / 10,000 / 65,000 nodes.

Each pipeline is what a generated file looks like: a reader, then a repeating run of a mapper and
two filters with parameters, and every 1,000th node a branch to a writer of its own (so the plan
has many segments and materialized outputs, not one).  Each command runs in a fresh process, as a
user runs it; the bench prints its wall time and peak RSS (``wait4``'s ``ru_maxrss`` of that
process alone), the time per node, and the growth exponent between sizes (1.0 is linear, 2.0
quadratic).  Target (issue 32): validate + plan of 65,000 nodes under 30 s and 1 GB.

    python bench/plan_scale.py                      # 2,000 / 10,000 / 65,000
    python bench/plan_scale.py --sizes 1000 4000
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_S = 30.0
TARGET_MB = 1024.0


def chain_yaml(n: int, folder: Path) -> str:
    """A pipeline of ``n`` nodes: reader, mapper/filter chain, a writer per 1,000 nodes and at the end."""
    lines = ["name: chain", "nodes:", "  - id: n0", "    op: read_jsonl",
             f"    with: {{paths: ['{folder}/in.jsonl']}}"]
    pattern = [("whitespace_normalization_mapper", ""),
               ("words_num_filter", "{min_num: 1, max_num: 100000}"),
               ("special_characters_filter", "{min_ratio: 0.0, max_ratio: 0.9}")]
    i, prev = 1, "n0"
    while i < n - 1:
        if i % 1000 == 0 and i < n - 2:
            lines += [f"  - id: n{i}", "    op: write_jsonl", f"    input: {prev}",
                      f"    with: {{path: '{folder}/out/branch{i}'}}"]
            i += 1
            continue
        op, params = pattern[i % len(pattern)]
        lines += [f"  - id: n{i}", f"    op: {op}", f"    input: {prev}"] + ([f"    with: {params}"] if params else [])
        prev = f"n{i}"
        i += 1
    lines += [f"  - id: n{n - 1}", "    op: write_jsonl", f"    input: {prev}", f"    with: {{path: '{folder}/out/end'}}"]
    return "\n".join(lines) + "\n"


def timed(command: list[str]) -> tuple[float, float]:
    """(wall seconds, peak RSS in MB) of one process running ``command``; it must exit 0."""
    start = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({proc.returncode}): {proc.stderr.read().decode()[-2000:]}")
    return wall, usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[2000, 10000, 65000])
    args = parser.parse_args()
    cli = [sys.executable, "-m", "raypress.cli"]
    results: dict[int, dict[str, tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "in.jsonl").write_text('{"text": "a b c"}\n')
        print(f"{'nodes':>7}  {'command':<8} {'wall s':>7} {'peak MB':>8} {'us/node':>8}")
        for n in args.sizes:
            path = folder / f"chain{n}.yaml"
            path.write_text(chain_yaml(n, folder))
            results[n] = {cmd: timed([*cli, cmd, str(path)]) for cmd in ("validate", "plan")}
            for cmd, (wall, mb) in results[n].items():
                print(f"{n:>7,}  {cmd:<8} {wall:>7.2f} {mb:>8.0f} {wall / n * 1e6:>8.0f}")
    sizes = sorted(results)
    for small, large in zip(sizes, sizes[1:]):
        for cmd in ("validate", "plan"):
            exponent = math.log(results[large][cmd][0] / results[small][cmd][0]) / math.log(large / small)
            print(f"growth {cmd} {small:,} -> {large:,}: exponent {exponent:.2f} (1.0 linear, 2.0 quadratic)")
    top = sizes[-1]
    wall = results[top]["validate"][0] + results[top]["plan"][0]
    mb = max(results[top]["validate"][1], results[top]["plan"][1])
    verdict = "holds" if wall < TARGET_S and mb < TARGET_MB else "does not hold"
    print(f"validate + plan of {top:,} nodes: {wall:.1f} s (target < {TARGET_S:.0f}), peak {mb:.0f} MB "
          f"(target < {TARGET_MB:.0f}): {verdict}")


if __name__ == "__main__":
    main()
