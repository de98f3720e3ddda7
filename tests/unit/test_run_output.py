"""What a supervised run's output becomes: its events are drawn, Ray's lines go to
RUN_DIR/logs/ray.log (and to the terminal only with --verbose), its own lines pass through."""

from __future__ import annotations

import io
import json
import signal
from collections import deque

from raypress.dag.event_lines import EventLines, decode, encode
from raypress.dag.ray_logs import RayLines, RayLog, is_ray_line, ray_log_path
from raypress.dag.run_log import RunLog, log_path
from raypress.dag.supervisor import Relay, _settle

RAY_LINES = [
    "2026-12-07 11:49:13,470\tWARNING authentication_token_setup.py:85 -- Token authentication is enabled for "
    "this Ray cluster. Set RAY_AUTH_MODE=disabled to opt out.",
    "2026-12-07 11:49:17,956\tINFO __init__.py:56 -- Progress will be logged because stdout is a non-interactive "
    "terminal.",
    "2026-12-07 11:49:18,056\tINFO logging_progress.py:231 -- MapBatches(read_files)->MapBatches(SegmentSink): 0/1",
    "[2026-12-07 11:52:12,881 E 6681 6681] logging.cc:474: *** SIGTERM received at time=1796644332 on cpu 0 ***",
    "*** SIGTERM received at time=1796644332 on cpu 0 ***",
    "PC: @     0x7fd3de728974  (unknown)  __recv",
    "    @     0x7fd3de65a050  (unknown)  (unknown)",
    "\x1b[36m(MapBatches(read_files)->MapBatches(Sliced) pid=1234)\x1b[0m some worker output",
    "(_MapWorker pid=77, ip=10.0.0.2) a worker's warning [repeated 3x across cluster]",
    "\x1b[33m(raylet)\x1b[0m Raylet is terminated. Termination is unexpected.",
    "INFO 2026-12-07 11:49:18,056 serve 4242 -- Started Serve in namespace \"serve\".",
    "/x/site-packages/ray/data/_internal/util.py:12: DeprecationWarning: something old",
]
OWN_LINES = [
    "quickstart: 15 nodes → /tmp/run", "▶ docs (read_jsonl)", "  docs: 1,000 in → 900 out · 100 dropped",
    "✓ docs: 10 in → 10 out (0.1s)", "run cancelled by SIGTERM (ledger: /tmp/run/ledger.json)",
    "run failed: node 'docs' (read_jsonl): ValueError: boom", "┃ node ┃ op ┃", "ledger adds up",
    "Traceback (most recent call last):", "ValueError: boom",
    "/home/ray/project/my_ops.py:3: UserWarning: the user's own code, in a folder named ray",
]


def test_rays_lines_are_told_from_the_runs_own():
    assert [line for line in RAY_LINES if not is_ray_line(line)] == []
    assert [line for line in OWN_LINES if is_ray_line(line)] == []


def test_an_indented_line_after_one_of_rays_is_rays_too():
    is_ray = RayLines()
    lines = ["/x/site-packages/ray/util.py:3: FutureWarning: old", "  warnings.warn(...)", "", "▶ docs (read_jsonl)",
             "  docs: 1 in → 1 out"]
    assert [is_ray(line) for line in lines] == [True, True, True, False, False]


def test_events_cross_as_marked_lines():
    event = {"event": "node_progress", "node": "docs", "rows_in": 3, "note": "é"}
    assert decode(encode(event)) == event
    assert decode("▶ docs (read_jsonl)") is None and decode(encode(event)[:-3]) is None
    stream = io.StringIO()
    EventLines(stream)(event)
    assert stream.getvalue().endswith("\n") and decode(stream.getvalue().rstrip("\n")) == event
    stream.close()  # the supervisor is gone: the run goes on ending as it should, silently
    EventLines(stream)(event)


class Output:
    def __init__(self) -> None:
        self.events: list[dict] = []
        self.lines: list[tuple[str, str]] = []

    def event(self, event: dict) -> None:
        self.events.append(event)

    def line(self, text: str, stream: str = "stderr") -> None:
        self.lines.append((text, stream))


def relay(tmp_path, verbose: bool) -> tuple[Output, Relay]:
    output = Output()
    relay = Relay(output, deque(maxlen=50), RunLog(tmp_path, ["docs"]), RayLog(tmp_path), verbose)
    stderr = "\n".join([encode({"event": "node_started", "node": "docs", "op": "read_jsonl"}), RAY_LINES[0],
                        "run failed: boom", RAY_LINES[3],
                        encode({"event": "run_failed", "error": "boom"})]) + "\n"
    relay.stream(io.BytesIO(stderr.encode()), "stderr")
    relay.stream(io.BytesIO(f"{RAY_LINES[7]}\nledger adds up".encode()), "stdout")  # no final newline
    relay.log.close()
    relay.ray_log.close()
    return output, relay


def test_the_supervisor_draws_events_files_rays_lines_and_shows_the_rest(tmp_path):
    output, r = relay(tmp_path, verbose=False)
    assert [e["event"] for e in output.events] == ["node_started", "run_failed"] and r.ended.is_set()
    assert output.lines == [("run failed: boom", "stderr"), ("ledger adds up", "stdout")]
    ray_log = ray_log_path(tmp_path).read_text().splitlines()
    assert ray_log == [RAY_LINES[0], RAY_LINES[3], "(MapBatches(read_files)->MapBatches(Sliced) pid=1234) some "
                       "worker output"]
    logged = [json.loads(line)["text"] for line in log_path(tmp_path).read_text().splitlines()]
    assert logged[0] == "▶ docs (read_jsonl)" and "run failed: boom" in logged and RAY_LINES[0] in logged
    assert "boom" in r.tail[-1] or "ledger adds up" in r.tail


def test_verbose_shows_rays_lines_too(tmp_path):
    output, _ = relay(tmp_path, verbose=True)
    shown = [text for text, _ in output.lines]
    assert RAY_LINES[0] in shown and RAY_LINES[3] in shown and "ledger adds up" in shown
    assert len(ray_log_path(tmp_path).read_text().splitlines()) == 3  # the file has them either way


def test_a_run_a_signal_ended_before_its_handlers_were_set_is_cancelled(tmp_path):
    said: list[str] = []
    for rc, code in ((-signal.SIGTERM, 143), (128 + signal.SIGINT, 130)):  # killed by it, or its early handler
        (tmp_path / "ledger.json").write_text(json.dumps({"status": "running", "nodes": {}}))
        assert _settle(tmp_path, rc, [], ["docs", "out"], said.append) == code
    ledger = json.loads((tmp_path / "ledger.json").read_text())
    assert ledger["status"] == "cancelled" and ledger["error"] == "cancelled by SIGINT"
    assert ledger["unfinished"] == ["docs", "out"]
    assert said == [f"run cancelled by SIGTERM (ledger: {tmp_path / 'ledger.json'})",
                    f"run cancelled by SIGINT (ledger: {tmp_path / 'ledger.json'})"]
