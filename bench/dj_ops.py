"""Data-Juicer's own ops, one at a time on one core, for ``curation_scale.py``'s per-op table.

Runs under Data-Juicer's Python (its scratch venv), never raypress's:

    <dj venv>/bin/python bench/dj_ops.py ROWS.jsonl OUT.json op_a,op_b,...

Each op is built by Data-Juicer's ``load_ops`` with its defaults and run by its own ``run`` on a
``NestedDataset`` of the rows (``np`` 1: one process), the way ``dj-process`` runs it, after one
warm-up run on the first 200 rows.  Output: {op: seconds}.
"""

from __future__ import annotations

import json
import sys
import time


def main() -> None:
    rows_path, out_path, names = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
    from data_juicer.core.data import NestedDataset
    from data_juicer.ops import load_ops

    rows = [json.loads(line) for line in open(rows_path, encoding="utf-8") if line.strip()]
    seconds: dict[str, float] = {}
    for name in names:
        op = load_ops([{name: {"num_proc": 1}}])[0]
        op.run(NestedDataset.from_list(rows[:200]))  # warm-up: imports, word lists, compiled regexes
        data = NestedDataset.from_list(rows)
        start = time.perf_counter()
        op.run(data)
        seconds[name] = time.perf_counter() - start
        print(f"{name}: {seconds[name]:.2f} s", flush=True)
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(seconds, f)


if __name__ == "__main__":
    main()
