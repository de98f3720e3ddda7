"""`raypress analyze`: run a pipeline with every filter in stats mode and summarize the stats.

Data-Juicer's analyzer, on the same ops: nothing is dropped, each filter's stats land in the
`stats` column of the outputs, and the summary shows their distributions so thresholds can be
chosen from data rather than guessed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.dataset as pads


QUANTILES = (0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0)


def read_output(path: str) -> pa.Table | None:
    """A writer's output folder or file, as parquet or JSON Lines."""
    p = Path(path)
    files = [p] if p.is_file() else sorted(x for x in p.rglob("*") if x.is_file() and not x.name.startswith("."))
    for fmt, suffix in (("parquet", ".parquet"), ("json", ".jsonl")):
        chosen = [str(f) for f in files if f.name.endswith(suffix)]
        if chosen:
            return pads.dataset(chosen, format=fmt).to_table()
    return None


def summarize(table: pa.Table) -> list[dict]:
    """One row per numeric stat: count and quantiles."""
    if "stats" not in table.column_names:
        return []
    stats = table.column("stats").combine_chunks()
    rows = []
    for i in range(stats.type.num_fields):
        name = stats.type.field(i).name
        values = stats.field(i)
        if not (pa.types.is_floating(values.type) or pa.types.is_integer(values.type)):
            continue
        arr = values.drop_null().to_numpy(zero_copy_only=False).astype(float)
        if not len(arr):
            continue
        qs = np.quantile(arr, QUANTILES)
        rows.append({"stat": name, "count": int(len(arr)), "mean": float(arr.mean()),
                     **{f"q{int(q * 100)}": float(v) for q, v in zip(QUANTILES, qs)}})
    return rows
