"""Real text for the analyzer's tests: the package descriptions every Python install carries (the
quickstart's input), whole or cut into many short rows, with the quickstart's filters' stats."""

from __future__ import annotations

import glob
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa

from raypress.dag.analyze.collect import make_plan
from raypress.dag.analyze.block import OutputPlan
from raypress.dag.batch_exec import merge_stats
from raypress.dag.validate import ValidatedPipeline, load_pipeline
from raypress.operators.io.read_package_metadata import parse_metadata

QUICKSTART = Path(__file__).resolve().parents[1] / "pipelines" / "quickstart.yaml"


def descriptions() -> list[tuple[str, str]]:
    """(path, description) of every installed package that has one."""
    site = Path(sys.prefix) / "lib"
    out = []
    for path in sorted(glob.glob(str(site / "python*" / "site-packages" / "*.dist-info" / "METADATA"))):
        text = parse_metadata(Path(path).read_text(errors="replace")).get("text")
        if text and text.strip():
            out.append((path, text))
    return out


def short_rows(n: int) -> list[tuple[str, str]]:
    """``n`` rows of 1-6 consecutive real lines each (ids ``file:line``), cycling over the texts."""
    lines = [(f"{path}:{i}", line) for path, text in descriptions() for i, line in enumerate(text.splitlines())]
    rows = []
    for k in range(n):
        start = (k * 37) % len(lines)
        width = 1 + (k * 7) % 6
        rows.append((lines[start][0], "\n".join(t for _, t in lines[start:start + width])))
    return rows


def quickstart_pipeline() -> ValidatedPipeline:
    return load_pipeline(str(QUICKSTART), [])


def with_stats(rows: list[tuple[str, str]], vp: ValidatedPipeline) -> pa.Table:
    """The rows with every quickstart filter's stats in ``stats`` (computed here, no Ray)."""
    table = pa.table({"id": [r[0] for r in rows], "text": [r[1] for r in rows]})
    for nid in vp.order:
        node = vp.nodes[nid]
        if node.kind.value == "filter":
            table = merge_stats(table, node.op_cls(node.params, None).compute_stats(table))
    return table


def plan_for(vp: ValidatedPipeline, table: pa.Table) -> OutputPlan:
    return make_plan(vp, "output", table.column_names)


def range_drops(vp: ValidatedPipeline, table: pa.Table) -> dict[str, np.ndarray]:
    """Per filter, the rows outside its closed [min, max] interval on its one stat: the brute-force
    verdicts, from the params alone (not the ops' code)."""
    out = {}
    for nid in vp.order:
        node = vp.nodes[nid]
        if node.kind.value != "filter":
            continue
        (stat,) = node.op_cls.stat_names
        values = np.asarray(table["stats"].combine_chunks().field(stat).to_pylist(), dtype=float)
        params = node.params.model_dump()
        (lo,) = [v for k, v in params.items() if k.startswith("min") and isinstance(v, (int, float))]
        (hi,) = [v for k, v in params.items() if k.startswith("max") and isinstance(v, (int, float))]
        out[nid] = (values < lo) | (values > hi)
    return out
