"""What a run shows while it works: one line per running node, then each node's result.

Why: the terminal showed a node only when it started and when its segment ended, with Ray's own
log lines in between; a long segment said nothing for minutes.  On a terminal the running nodes'
lines are drawn in place (rows in and out, rows/s, rows dropped, time, ETA when the input's size is
known) and each turns into its ``✓`` line when it finishes.  Elsewhere (CI, a pipe, a log) nothing is
redrawn: ``▶`` when a node starts, a progress line now and then (at most every ``PLAIN_EVERY_S``, and
less often as the node ages: a tenth of its age), ``✓`` when it ends; :class:`PlainLines` is that
text, which the supervisor also keeps in ``logs/run.jsonl``.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any, Callable

from rich.console import Console, Group
from rich.live import Live
from rich.text import Text

PLAIN_EVERY_S = 5.0
EVERY_ENV = "RAYPRESS_PROGRESS_S"  # seconds between a node's progress lines off a terminal
AGE_SHARE = 0.1
SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


def plain_every_s() -> float:
    """The gap between a node's progress lines off a terminal: ``$RAYPRESS_PROGRESS_S`` or 5 s."""
    try:
        return max(0.0, float(os.environ.get(EVERY_ENV, PLAIN_EVERY_S)))
    except ValueError:
        return PLAIN_EVERY_S


def duration(seconds: float) -> str:
    """``9s``, ``3m04s``, ``2h05m``: short, and wide enough to read at a glance."""
    s = int(round(max(0.0, seconds)))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def counts_text(event: dict[str, Any]) -> str:
    """A progress event's numbers: ``1,234 in → 1,200 out · 34 dropped · 410 rows/s · ETA 12s``."""
    if event.get("event") != "node_progress":  # a stage's own progress (steps, loss, ...)
        return ", ".join(f"{k}={v}" for k, v in event.items() if k not in ("event", "node", "ts"))
    rows_in, rows_out = int(event.get("rows_in", 0)), int(event.get("rows_out", 0))
    parts = [f"{rows_in:,} in → {rows_out:,} out", f"{int(event.get('dropped', rows_in - rows_out)):,} dropped"]
    elapsed = float(event.get("elapsed") or 0.0)
    if elapsed > 0:
        parts.append(f"{rows_in / elapsed:,.0f} rows/s")
    if event.get("eta_s") is not None:
        parts.append(f"ETA {duration(float(event['eta_s']))}")
    return " · ".join(parts)


def started_text(event: dict[str, Any]) -> Text:
    return Text.assemble(("▶", "cyan"), f" {event.get('node')} ({event.get('op')})")


def progress_text(event: dict[str, Any]) -> Text:
    return Text(f"  {event.get('node')}: {counts_text(event)}")


def finished_text(event: dict[str, Any]) -> Text:
    node = event.get("node")
    if "rows_out" in event:
        body = f" {node}: {event['rows_in']} in → {event['rows_out']} out ({float(event.get('seconds', 0)):.1f}s)"
    else:
        body = f" {node}: {event.get('artifact')} ({float(event.get('seconds', 0)):.1f}s)"
    return Text.assemble(("✓", "green"), body)


def note_text(event: dict[str, Any]) -> Text | None:
    """The line of an event that is neither a start, an end nor progress (None: not shown)."""
    kind, node = event.get("event"), event.get("node")
    if kind == "warning":
        return Text(f"⚠ {node}: {event.get('message')}", style="bold yellow")
    if kind == "node_skipped":
        return Text.assemble(("↷", "yellow"), f" {node}: skipped ({event.get('reason')})")
    if kind == "node_rerun":
        return Text.assemble(("↻", "yellow"), f" {node}: running again: {event.get('reason')}")
    return None


def is_progress(event: dict[str, Any]) -> bool:
    return str(event.get("event") or "").endswith("_progress") and event.get("node") is not None


class PlainLines:
    """The lines of a run's events where nothing is redrawn: every start, end and note, and a
    node's progress when its last line is ``every_s`` old (or a tenth of the node's age, when more).
    A stage's latest unshown progress is shown before its end (a segment's end line has the counts)."""

    def __init__(self, every_s: float | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.every_s = plain_every_s() if every_s is None else every_s
        self.clock = clock
        self.started: dict[str, float] = {}
        self.last: dict[str, float] = {}
        self.pending: dict[str, dict[str, Any]] = {}

    def lines(self, event: dict[str, Any]) -> list[Text]:
        kind, node = event.get("event"), str(event.get("node"))
        now = self.clock()
        if kind == "node_started":
            self.started[node] = self.last[node] = now
            return [started_text(event)]
        if kind == "node_finished":
            pending = self.pending.pop(node, None)
            self.started.pop(node, None)
            self.last.pop(node, None)
            return [*([progress_text(pending)] if pending else []), finished_text(event)]
        if is_progress(event):
            started = self.started.setdefault(node, now)
            last = self.last.setdefault(node, now)
            if now - last >= max(self.every_s, (now - started) * AGE_SHARE):
                self.last[node] = now
                self.pending.pop(node, None)
                return [progress_text(event)]
            if kind != "node_progress":
                self.pending[node] = event
            return []
        note = note_text(event)
        return [note] if note is not None else []


class ProgressView:
    """Renders a run's events and passes its other printed lines through.

    ``live``: redraw the running nodes' lines in place (default: when ``console`` writes to a terminal).
    Thread-safe: a supervisor feeds it from its stdout and stderr readers."""

    def __init__(self, console: Console, live: bool | None = None, every_s: float | None = None,
                 clock: Callable[[], float] = time.monotonic, refresh_per_second: float = 4) -> None:
        self.console = console
        self.live = _draws_in_place(console) if live is None else live
        self.plain = PlainLines(every_s, clock)
        self.clock = clock
        self.refresh_per_second = refresh_per_second
        self.running: dict[str, dict[str, Any]] = {}  # node -> its op, start, latest progress
        self._live: Live | None = None
        self._lock = threading.RLock()

    def __call__(self, event: dict[str, Any]) -> None:
        self.event(event)

    def event(self, event: dict[str, Any]) -> None:
        with self._lock:
            if not self.live:
                for text in self.plain.lines(event):
                    self.console.print(text, soft_wrap=True)
                return
            kind, node = event.get("event"), str(event.get("node"))
            now = self.clock()
            if kind == "node_started":
                self.running[node] = {"op": event.get("op"), "started": now, "progress": None, "at": now}
                self._start_live()
            elif is_progress(event):
                if node in self.running:  # a late event of a node already finished is not news
                    self.running[node].update(progress=event, at=now)
            elif kind == "node_finished":
                self.running.pop(node, None)
                if not self.running:
                    self._stop_live()
                elif self._live is not None:  # drawn without it before the line goes above
                    self._live.refresh()
                self.console.print(finished_text(event), soft_wrap=True)
            else:
                note = note_text(event)
                if note is not None:
                    self.console.print(note, soft_wrap=True)

    def line(self, text: str, stream: str = "stderr") -> None:
        """A line the run printed itself (colours kept): above the running nodes' lines."""
        with self._lock:
            target = sys.stdout if stream == "stdout" else sys.stderr
            if self._live is not None and (stream != "stdout" or target.isatty()):
                self.console.print(Text.from_ansi(text), soft_wrap=True)
                return
            target.write(text + "\n")
            target.flush()

    def close(self) -> None:
        """Stop drawing (the running nodes' lines go: a run that stopped says why in its own line)."""
        with self._lock:
            self._stop_live()
            self.running.clear()

    def render(self) -> Group:
        """The running nodes' lines as they are drawn now."""
        now = self.clock()
        frame = SPINNER[int(now * 10) % len(SPINNER)]
        lines = []
        for node, state in list(self.running.items()):
            text = Text.assemble((frame, "cyan"), f" {node}", no_wrap=True, overflow="ellipsis")
            if state["op"]:
                text.append(f" ({state['op']})", style="dim")
            event = state["progress"]
            if event is not None:
                if event.get("eta_s") is not None:  # the ETA counts down between events
                    event = {**event, "eta_s": max(0.0, float(event["eta_s"]) - (now - state["at"]))}
                text.append(f"  {counts_text(event)}")
            text.append(f"  {duration(now - state['started'])}", style="dim")
            lines.append(text)
        return Group(*lines)

    def _start_live(self) -> None:
        if self._live is None:
            self._live = Live(console=self.console, get_renderable=self.render, transient=True,
                              auto_refresh=True, refresh_per_second=self.refresh_per_second,
                              redirect_stdout=False, redirect_stderr=False)
            self._live.start()

    def _stop_live(self) -> None:
        if self._live is not None:
            live, self._live = self._live, None
            live.stop()


def _draws_in_place(console: Console) -> bool:
    """Whether ``console`` writes to a terminal (``FORCE_COLOR``, which makes rich treat a pipe as
    one for colours, does not make a CI log able to redraw lines)."""
    try:
        return console.is_terminal and not console.is_dumb_terminal and console.file.isatty()
    except (AttributeError, ValueError):
        return False
