"""The run's own log, kept in its run directory: ``logs/run.jsonl``, one JSON object per line.

Why: what a run prints (its nodes' progress, Ray's worker lines, the error that ended it) lived
only in a terminal or in Ray's job logs, which go with the cluster's workers; a service page and
``GET /v1/runs/{id}/logs`` must read it after the job is gone.  The supervisor, which already
passes the run's streams through, appends each line here with its time, stream and the node it
names (``node``, or null), so a reader can page it by byte offset and filter it by node without
loading it whole.
"""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path
from typing import Any, Iterable

LOG_DIR = "logs"
LOG_FILE = "run.jsonl"
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
# A line that starts with a node's id: the runner's "▶ id (op)", "✓ id: ...", "↷ id: ...", "  id: ..."
_LEADING_ID = re.compile(r"^[\s▶✓⚠↷↻]*([^\s:(]+)(?::|\s\()")
_QUOTED_NODE = re.compile(r"node '([^']+)'")


def log_path(run_dir: str | Path) -> Path:
    return Path(run_dir) / LOG_DIR / LOG_FILE


def node_named(line: str, node_ids: set[str]) -> str | None:
    """The node a log line is about: the id it starts with (the runner's own lines) or a quoted
    ``node 'id'`` in it (errors, warnings, Ray's lines that quote a node); None for the rest."""
    lead = _LEADING_ID.match(line)
    if lead and lead.group(1) in node_ids:
        return lead.group(1)
    for match in _QUOTED_NODE.finditer(line):
        if match.group(1) in node_ids:
            return match.group(1)
    return None


def clean_line(raw: str) -> str:
    """One printed line as a reader wants it: colours gone, a progress bar's last state only."""
    states = [part for part in raw.split("\r") if part.strip()]
    return _ANSI.sub("", states[-1]).rstrip() if states else ""


class RunLog:
    """Appends lines to ``logs/run.jsonl`` from several threads (stdout and stderr readers); a line
    is written whole and flushed, so a reader never sees half a record it cannot skip."""

    def __init__(self, run_dir: str | Path, node_ids: Iterable[str]) -> None:
        self.path = log_path(run_dir)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.node_ids = set(node_ids)
        self._lock = threading.Lock()
        self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - closed by close()

    def write(self, raw: str, stream: str) -> None:
        text = clean_line(raw)
        if not text.strip():
            return
        record: dict[str, Any] = {"ts": round(time.time(), 3), "stream": stream,
                                  "node": node_named(text, self.node_ids), "text": text}
        line = json.dumps(record, ensure_ascii=False) + "\n"
        with self._lock:
            if not self._file.closed:
                self._file.write(line)
                self._file.flush()

    def close(self) -> None:
        with self._lock:
            self._file.close()
