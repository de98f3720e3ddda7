"""The run's error budget (``settings.max_error_ratio``) and the exception a run stops with."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from raypress.dag.validate import VNode


class RunFailed(Exception):
    """The run stopped on purpose (error budget exceeded, a stage failed); the message says why.
    ``entries``: ledger entries counted before it stopped (a segment over its budget has them)."""

    def __init__(self, message: str, entries: dict[str, dict[str, Any]] | None = None):
        super().__init__(message)
        self.entries = entries or {}


def check_error_budget(nodes: list[VNode], entries: dict[str, dict], limit: float, quarantine: Path) -> None:
    """RunFailed naming the first node whose quarantined share of its input is over ``limit``."""
    for n in nodes:
        e = entries[n.id]
        if e["rows_in"] and e["quarantined"] / e["rows_in"] > limit:
            raise RunFailed(
                f"node '{n.id}' ({n.op_cls.name}): {e['quarantined']} of {e['rows_in']} rows "
                f"({e['quarantined'] / e['rows_in']:.1%}) raised errors, over max_error_ratio {limit}. "
                f"First: {first_error(quarantine, n.id)}. All of them are in {quarantine}/", entries)


def first_error(qdir: Path, node_id: str) -> str:
    import pyarrow.parquet as pq

    from raypress.schema import DETAIL_COL, ID_COL, NODE_COL

    for f in sorted(qdir.glob("*.parquet")):
        t = pq.read_table(f)
        for row in t.select([c for c in (ID_COL, NODE_COL, DETAIL_COL) if c in t.column_names]).to_pylist():
            if row.get(NODE_COL) == node_id:
                return f"row {row.get(ID_COL)!r}: {row.get(DETAIL_COL)}"
    return "(see quarantine)"


def describe_error(exc: BaseException) -> str:
    """One line for the ledger and the CLI: what stopped the run."""
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted (Ctrl-C / SIGINT)"
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    name = type(exc).__name__
    return text if isinstance(exc, RunFailed) else f"{name}: {text}" if text else name
