"""What a run shows while it works (``dag.progress_view``): events in, text out, on a fake clock."""

from __future__ import annotations

import io
import re

from rich.console import Console

from raypress.dag.progress_view import PlainLines, ProgressView, counts_text, duration


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def started(node: str, op: str = "words_num_filter") -> dict:
    return {"event": "node_started", "node": node, "op": op}


def progress(node: str, rows_in: int, rows_out: int, elapsed: float, **extra) -> dict:
    return {"event": "node_progress", "node": node, "rows_in": rows_in, "rows_out": rows_out,
            "dropped": rows_in - rows_out, "elapsed": elapsed, **extra}


def finished(node: str, rows_in: int, rows_out: int, seconds: float) -> dict:
    return {"event": "node_finished", "node": node, "rows_in": rows_in, "rows_out": rows_out, "dropped": {},
            "duplicates": 0, "quarantined": 0, "seconds": seconds}


def plain(lines) -> list[str]:
    return [t.plain for t in lines]


def test_counts_say_rows_rate_drops_and_eta():
    assert counts_text(progress("f", 12_000, 11_000, 4.0)) == "12,000 in → 11,000 out · 1,000 dropped · 3,000 rows/s"
    assert counts_text(progress("f", 10, 10, 2.0, eta_s=125)).endswith("· 5 rows/s · ETA 2m05s")
    assert counts_text({"event": "train_progress", "node": "t", "epoch": 2, "loss": 0.5}) == "epoch=2, loss=0.5"
    assert [duration(s) for s in (0.4, 9, 64, 7500)] == ["0s", "9s", "1m04s", "2h05m"]


def test_off_a_terminal_a_nodes_progress_line_comes_at_most_every_few_seconds():
    clock = Clock()
    lines = PlainLines(every_s=5.0, clock=clock)
    assert plain(lines.lines(started("f"))) == ["▶ f (words_num_filter)"]
    clock.now += 2
    assert lines.lines(progress("f", 100, 90, 2.0)) == []  # too soon after its start line
    clock.now += 4
    assert plain(lines.lines(progress("f", 300, 270, 6.0))) == ["  f: 300 in → 270 out · 30 dropped · 50 rows/s"]
    clock.now += 1
    assert lines.lines(progress("f", 350, 300, 7.0)) == []
    clock.now += 100  # an old node: a line per tenth of its age (10.7 s here), not per 5 s
    assert len(lines.lines(progress("f", 9000, 8000, 107.0))) == 1
    clock.now += 6
    assert lines.lines(progress("f", 9500, 8500, 113.0)) == []
    assert plain(lines.lines(finished("f", 10_000, 9_000, 115.0))) == ["✓ f: 10000 in → 9000 out (115.0s)"]


def test_a_stages_last_unshown_progress_comes_before_its_end():
    clock = Clock()
    lines = PlainLines(every_s=5.0, clock=clock)
    lines.lines(started("train", "train_quality_classifier"))
    clock.now += 1
    assert lines.lines({"event": "train_progress", "node": "train", "epoch": 1, "loss": 0.9}) == []
    shown = plain(lines.lines({"event": "node_finished", "node": "train", "artifact": "/m", "seconds": 1.5}))
    assert shown == ["  train: epoch=1, loss=0.9", "✓ train: /m (1.5s)"]


def test_notes_keep_their_lines():
    lines = PlainLines(every_s=5.0, clock=Clock())
    assert plain(lines.lines({"event": "warning", "node": "n", "message": "read 0 rows"})) == ["⚠ n: read 0 rows"]
    assert plain(lines.lines({"event": "node_skipped", "node": "n", "reason": "output on disk"})) == [
        "↷ n: skipped (output on disk)"]
    assert plain(lines.lines({"event": "node_rerun", "node": "n", "reason": "configuration changed"})) == [
        "↻ n: running again: configuration changed"]
    assert lines.lines({"event": "run_started", "pipeline": "p"}) == []


def test_a_plain_view_prints_each_line_once(capsys):
    buffer = io.StringIO()
    clock = Clock()
    view = ProgressView(Console(file=buffer, width=200), live=False, every_s=0, clock=clock)
    view.event(started("docs", "read_jsonl"))
    clock.now += 1
    view.event(progress("docs", 5, 5, 1.0))
    view.event(finished("docs", 10, 10, 1.5))
    view.line("a line the run printed", "stdout")
    view.close()
    assert buffer.getvalue().splitlines() == [
        "▶ docs (read_jsonl)", "  docs: 5 in → 5 out · 0 dropped · 5 rows/s", "✓ docs: 10 in → 10 out (1.5s)"]
    assert capsys.readouterr().out == "a line the run printed\n"


def test_on_a_terminal_running_nodes_are_drawn_in_place_and_end_as_their_result():
    buffer = io.StringIO()
    clock = Clock()
    view = ProgressView(Console(file=buffer, width=120, force_terminal=True), live=True, clock=clock,
                        refresh_per_second=20)
    try:
        view.event(started("docs", "read_jsonl"))
        view.event(started("long_enough"))
        clock.now += 3
        view.event(progress("docs", 3000, 3000, 3.0, eta_s=9.0))
        view.event(progress("long_enough", 3000, 2500, 3.0, eta_s=9.0))
        clock.now += 2
        drawn = [line.plain for line in view.render().renderables]
        assert len(drawn) == 2
        assert "docs (read_jsonl)  3,000 in → 3,000 out · 0 dropped · 1,000 rows/s · ETA 7s  5s" in drawn[0]
        assert "long_enough (words_num_filter)  3,000 in → 2,500 out · 500 dropped" in drawn[1]
        view.event(finished("docs", 6000, 6000, 6.0))
        assert [line.plain[2:].split("  ")[0] for line in view.render().renderables] == [
            "long_enough (words_num_filter)"]
        view.event(finished("long_enough", 6000, 5000, 6.0))
        assert view._live is None  # nothing runs: nothing drawn, the ledger prints below plainly
    finally:
        view.close()
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", buffer.getvalue())
    assert "✓ docs: 6000 in → 6000 out (6.0s)" in text and "✓ long_enough: 6000 in → 5000 out (6.0s)" in text
    assert "▶" not in text  # a running node is its live line, not a start line
