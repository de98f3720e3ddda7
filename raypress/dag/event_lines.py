"""The run's events as lines on its stderr, for the supervisor that renders them.

Why: a supervised run's terminal belongs to the supervisor (the run writes to pipes), so the run
cannot draw live lines there; it sends each event as one marked JSON line instead, in order with
everything else it prints on stderr, and the supervisor's view draws them.  The marker starts with
an ASCII record separator, which no printed text of raypress's or Ray's starts with.
"""

from __future__ import annotations

import json
import sys
import threading
from typing import Any, TextIO

MARKER = "\x1eraypress-event "


def encode(event: dict[str, Any]) -> str:
    return MARKER + json.dumps(event, default=str, ensure_ascii=False)


def decode(line: str) -> dict[str, Any] | None:
    """The event a line carries, or None for an ordinary printed line."""
    if not line.startswith(MARKER):
        return None
    try:
        event = json.loads(line[len(MARKER):])
    except ValueError:
        return None
    return event if isinstance(event, dict) else None


class EventLines:
    """A runner's ``on_event`` that writes each event as one line (whole, from any thread)."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream
        self._lock = threading.Lock()

    def __call__(self, event: dict[str, Any]) -> None:
        """Never raises: with the supervisor gone (its pipe broken) the run must still end as it
        should (a SIGHUP's quick exit); every event is in events.jsonl anyway."""
        stream = self.stream or sys.stderr
        with self._lock:
            try:
                stream.write(encode(event) + "\n")
                stream.flush()
            except (OSError, ValueError):
                return
