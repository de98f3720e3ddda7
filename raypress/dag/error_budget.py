"""The run's error budget (``settings.max_error_ratio``) and the exception a run stops with."""

from __future__ import annotations

import errno
import re
from pathlib import Path
from typing import Any

from raypress.dag.cancel import RunCancelled
from raypress.dag.validate import VNode


class RunFailed(Exception):
    """The run stopped on purpose (error budget exceeded, a stage failed); the message says why.
    ``entries``: ledger entries counted before it stopped (a segment over its budget has them)."""

    def __init__(self, message: str, entries: dict[str, dict[str, Any]] | None = None):
        super().__init__(message)
        self.entries = entries or {}


def check_error_budget(nodes: list[VNode], entries: dict[str, dict], limit: float, quarantine: Path) -> None:
    """RunFailed naming the first node whose quarantined share of its input is over ``limit``;
    ``quarantine``: the run's quarantine root, which holds a folder per node."""
    for n in nodes:
        e = entries[n.id]
        if e["rows_in"] and e["quarantined"] / e["rows_in"] > limit:
            raise RunFailed(
                f"node '{n.id}' ({n.op_cls.name}): {e['quarantined']} of {e['rows_in']} rows "
                f"({e['quarantined'] / e['rows_in']:.1%}) raised errors, over max_error_ratio {limit}. "
                f"First: {first_error(quarantine, n.id)}. All of them are in {quarantine / n.id}/", entries)


def first_error(quarantine: Path, node_id: str) -> str:
    """The first failed row of ``node_id`` in ``quarantine/<node_id>/`` (the sink files a row under
    the node that failed on it), quoted for the error-budget message."""
    import pyarrow.parquet as pq

    from raypress.schema import DETAIL_COL, ID_COL, NODE_COL

    for f in sorted((quarantine / node_id).glob("*.parquet")):
        t = pq.read_table(f)
        for row in t.select([c for c in (ID_COL, NODE_COL, DETAIL_COL) if c in t.column_names]).to_pylist():
            if row.get(NODE_COL) == node_id:
                return f"row {row.get(ID_COL)!r}: {row.get(DETAIL_COL)}"
    return "(see quarantine)"


def describe_error(exc: BaseException) -> str:
    """One line for the ledger and the CLI: what stopped the run (no terminal colour codes: Ray's
    task errors carry them; a full disk said first, wherever in the chain it was)."""
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted (Ctrl-C / SIGINT)"
    if isinstance(exc, RunCancelled):
        return str(exc)  # "cancelled by SIGTERM"
    full = without_ansi(str(exc)).strip()
    no_space = no_space_left(exc, full)
    if no_space is not None:
        return no_space
    text = full.splitlines()[0] if full else ""
    name = type(exc).__name__
    return text if isinstance(exc, RunFailed) else f"{name}: {text}" if text else name


_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")
_NO_SPACE = re.compile(r"No space left on device(?:: '([^']+)')?", re.IGNORECASE)


def without_ansi(text: str) -> str:
    return _ANSI.sub("", text)


def no_space_left(exc: BaseException, text: str) -> str | None:
    """``no space left on device at PATH`` when a disk filled anywhere in ``exc``'s chain (Ray wraps a
    worker's OSError in a task error whose first line names the task, and says the cause later)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno == errno.ENOSPC:
            return f"no space left on device at {current.filename}" if current.filename else _from_text(text)
        cause = getattr(current, "cause", None)  # ray.exceptions.RayTaskError keeps the worker's exception here
        current = cause if isinstance(cause, BaseException) else (current.__cause__ or current.__context__)
    return _from_text(text) if _NO_SPACE.search(text) else None


def _from_text(text: str) -> str:
    """The first path a "No space left on device: 'PATH'" in ``text`` names (Ray's text of a
    worker's error chain lists the bare OSError first, then the one the sink named)."""
    path = next((m.group(1) for m in _NO_SPACE.finditer(text) if m.group(1)), None)
    return f"no space left on device at {path}" if path else "no space left on device (the error names no path)"
