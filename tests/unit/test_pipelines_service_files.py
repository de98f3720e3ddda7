"""The pipelines service's readers and records, without Ray: paging, states, refusals, keys."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from raypress.dag.run_log import RunLog, clean_line, node_named
from raypress.serving.pipelines.records import Attempt, IdempotencyConflict, RunRecord, RunRecords, new_run_id
from raypress.serving.pipelines.run_files import (
    BadCursor,
    NotInRun,
    RejectQuery,
    artifact_file,
    logs_page,
    read_lines,
    rejects_page,
    source_of,
    threshold_for,
)
from raypress.serving.pipelines.run_view import JobState, node_views, run_state


def _record(run_dir: Path, attempts: list[Attempt], cancel: float | None = None) -> RunRecord:
    return RunRecord(id=new_run_id(), name="p", run_dir=str(run_dir), created=time.time(), attempts=attempts,
                     cancel_requested=cancel)


def test_read_lines_leaves_a_line_being_written_and_skips_a_torn_one(tmp_path):
    path = tmp_path / "events.jsonl"
    path.write_bytes(b'{"a": 1}\n{torn\n{"b": 2}\n{"c": 3')
    records, offset = read_lines(path, 0)
    assert [r for _, r in records] == [{"a": 1}, {"b": 2}]
    assert offset == len(b'{"a": 1}\n{torn\n{"b": 2}\n')
    with open(path, "ab") as fh:
        fh.write(b"}\n")
    assert [r for _, r in read_lines(path, offset)[0]] == [{"c": 3}]


def test_run_log_tags_lines_with_the_node_they_name_and_logs_page_by_node(tmp_path):
    log = RunLog(tmp_path, ["docs", "long_enough", "out"])
    for line in ["quickstart: 3 nodes", "\x1b[36m▶\x1b[0m docs (read_jsonl)", "✓ long_enough: 4 in → 2 out (0.1s)",
                 "warning: node 'out' wrote nothing", "progress 10%\rprogress 100%", "   "]:
        log.write(line, "stderr")
    log.close()
    page = logs_page(tmp_path, None, None, 100)
    assert [(x["node"], x["text"]) for x in page["lines"]] == [
        (None, "quickstart: 3 nodes"), ("docs", "▶ docs (read_jsonl)"), ("long_enough", "✓ long_enough: 4 in → 2 out (0.1s)"),
        ("out", "warning: node 'out' wrote nothing"), (None, "progress 100%")]
    assert [x["text"] for x in logs_page(tmp_path, None, "out", 100)["lines"]] == ["warning: node 'out' wrote nothing"]
    first = logs_page(tmp_path, None, None, 2)
    rest = logs_page(tmp_path, first["next_cursor"], None, 100)
    assert len(first["lines"]) == 2 and len(rest["lines"]) == 3
    with pytest.raises(BadCursor):
        logs_page(tmp_path, "not-a-cursor", None, 10)
    assert node_named("output: done", {"out"}) is None and clean_line("a\r") == "a"


def _reject_part(path: Path, rows: list[tuple[str, str, str, str, str]], row_group_size: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    columns = list(zip(*rows))
    table = pa.table({"id": columns[0], "_rp_node": columns[1], "_rp_kind": columns[2], "_rp_reason": columns[3],
                      "_rp_detail": columns[4]})
    pq.write_table(table, path, row_group_size=row_group_size)


def test_rejects_page_through_parts_and_row_groups_with_values_and_thresholds(tmp_path):
    low = ("f", "filtered", "num_words < min", json.dumps({"num_words": 1}))
    other = ("f", "filtered", "other", "{}")
    for part, ids in (("part-00000000-a", range(6)), ("part-00000001-b", range(6, 10))):  # the sink's folders
        _reject_part(tmp_path / "rejects" / "f" / f"{part}.parquet",
                     [(f"docs.jsonl:{i}", *(low if i % 2 else other)) for i in ids], 3)
    _reject_part(tmp_path / "rejects" / "g" / "part-00000000-a.parquet",
                 [("docs.jsonl:1", "g", "filtered", "num_words < min", "{}")], 3)
    _reject_part(tmp_path / "quarantine" / "f" / "part-00000000-a.parquet",
                 [("x.jsonl:99", "f", "error", "ValueError", "boom")], 2)
    params = {"min_num": 3, "max_num": 100, "lang": "en"}
    seen, cursor = [], None
    while True:
        page = rejects_page(tmp_path, RejectQuery("f", "num_words < min", None, 2), cursor, params)
        seen += page["rows"]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert [r["id"] for r in seen] == [f"docs.jsonl:{i}" for i in (1, 3, 5, 7, 9)]
    assert seen[0]["detail"] == {"num_words": 1}
    assert seen[0]["threshold"] == {"param": "min_num", "value": 3, "side": "min"}
    assert seen[0]["source"] == {"file": "docs.jsonl", "offset": 1}
    errors = rejects_page(tmp_path, RejectQuery("f", None, "error", 10), None, params)["rows"]
    assert [(r["id"], r["detail"]) for r in errors] == [("x.jsonl:99", "boom")]
    with pytest.raises(BadCursor):
        rejects_page(tmp_path, RejectQuery("f", None, None, 2), "eyJwIjoibm8iLCJyIjowfQ", params)


def test_thresholds_and_sources_are_found_only_where_unambiguous():
    assert threshold_for("alnum_ratio < min", {"min_ratio": 0.5, "max_ratio": 1.0}) == \
        {"param": "min_ratio", "value": 0.5, "side": "min"}
    assert threshold_for("x > max", {"max_a_len": 1, "max_b_len": 2}) is None  # two, neither named after x
    assert threshold_for("duplicate of doc-1", {"min_num": 3}) is None
    assert source_of("/data/a.warc.gz@1234") == {"file": "/data/a.warc.gz", "offset": 1234}
    assert source_of("doc-17") is None


def test_artifacts_refuse_everything_outside_the_run(tmp_path):
    run = tmp_path / "run"
    (run / "reports").mkdir(parents=True)
    (run / "reports" / "a.html").write_text("<p>ok</p>")
    (tmp_path / "secret").write_text("no")
    os.symlink(tmp_path / "secret", run / "reports" / "link")
    assert artifact_file(run, "reports/a.html").read_text() == "<p>ok</p>"
    for bad in ("../secret", "/etc/passwd", "reports/link", "reports", "reports/../../secret", "", "a\x00b"):
        with pytest.raises(NotInRun):
            artifact_file(run, bad)


def test_run_states_from_job_and_ledger(tmp_path):
    now = time.time()
    fresh = _record(tmp_path, [Attempt("run", now)])
    assert run_state(fresh, JobState(None), None, now) == ("queued", None)
    lost = _record(tmp_path, [Attempt("run", now - 3600)])
    assert run_state(lost, JobState(None), None, now)[0] == "crashed"
    job = _record(tmp_path, [Attempt("run", now, job_id="j")])
    assert run_state(job, JobState("PENDING"), None)[0] == "queued"
    assert run_state(job, JobState("RUNNING"), None)[0] == "running"
    assert run_state(job, JobState("SUCCEEDED"), {"status": "succeeded"})[0] == "succeeded"
    assert run_state(job, JobState("FAILED"), {"status": "failed", "error": "boom"}) == ("failed", "boom")
    assert run_state(job, JobState("STOPPED"), {"status": "running"})[0] == "cancelled"
    died = run_state(job, JobState("FAILED", "Job entrypoint command failed with exit code 1, last available logs "
                                             "(truncated):\nTraceback\nMemoryError: out"), None)
    assert died == ("crashed", "Job entrypoint command failed with exit code 1: MemoryError: out")
    assert run_state(job, JobState(None), None)[0] == "crashed"
    refused = _record(tmp_path, [Attempt("run", now, error="cannot reach the cluster")])
    assert run_state(refused, JobState(None), None) == ("failed", "cannot reach the cluster")


def test_node_views_follow_events_then_the_ledger():
    dag = [{"id": "a", "op": "read", "inputs": []}, {"id": "b", "op": "f", "inputs": ["a"]}]
    events = [{"event": "node_started", "node": "a", "ts": 1.0}, {"event": "node_started", "node": "b", "ts": 1.0},
              {"event": "node_finished", "node": "a", "ts": 2.0, "rows_in": 4, "rows_out": 4, "dropped": {},
               "duplicates": 0, "quarantined": 0, "seconds": 1.0}]
    live = {v["id"]: v for v in node_views(dag, events, None, "running")}
    assert live["a"]["state"] == "succeeded" and live["a"]["counts"]["rows_per_s"] == 4.0
    assert live["b"]["state"] == "running" and live["b"]["counts"] is None
    ended = {v["id"]: v for v in node_views(dag, events, {"nodes": {}, "unfinished": ["b"]}, "cancelled")}
    assert ended["b"]["state"] == "cancelled"
    broken = {"nodes": {"b": {"rows_in": 4, "rows_out": 1, "dropped": {"r": 2}, "duplicates": 0, "quarantined": 0}}}
    assert node_views(dag, events, broken, "failed")[1]["counts"]["adds_up"] is False


def test_one_idempotency_key_one_run_across_threads(tmp_path):
    records = RunRecords(tmp_path)
    results: list[str | None] = []
    ids = [new_run_id() for _ in range(8)]

    def claim(run_id: str) -> None:
        results.append(records.claim_key("key-1", "same-request", run_id))

    threads = [threading.Thread(target=claim, args=(i,)) for i in ids]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results.count(None) == 1
    assert {r for r in results if r is not None} == {json.loads(next(records.keys.glob("*.json")).read_text())["run_id"]}
    with pytest.raises(IdempotencyConflict):
        records.claim_key("key-1", "another-request", new_run_id())
    assert records.get("../../etc/passwd") is None


class _HeldJobs:
    """The Jobs API of a cluster whose every job stays running (only the queue is under test here;
    tests/integration/test_pipelines_api.py submits to a real cluster)."""

    def __init__(self) -> None:
        self.submitted: list[str] = []

    def submit(self, resolved, run_id, env_vars, check, echo=None, command="run") -> str:
        self.submitted.append(run_id)
        return f"job-{run_id}"

    def state(self, job_id):
        return JobState("RUNNING" if job_id else None)

    def job_of_run(self, run_id):
        return None

    def client(self):
        return self


def test_a_full_queue_answers_503_with_retry_after(tmp_path):
    from fastapi.testclient import TestClient

    from raypress.serving.pipelines.api import create_pipelines_app
    from raypress.serving.pipelines.service import PipelinesService, ServiceSettings

    (tmp_path / "docs.jsonl").write_text('{"text": "a b c d"}\n')
    pipeline = ("name: q\nnodes:\n  - id: docs\n    op: read_jsonl\n    with: {paths: [docs.jsonl]}\n"
                "  - id: out\n    op: write_jsonl\n    input: docs\n    with: {path: '{run_dir}/out'}\n")
    jobs = _HeldJobs()
    service = PipelinesService(ServiceSettings(tmp_path / "runs", tmp_path, max_active_runs=2), jobs)
    client = TestClient(create_pipelines_app(service, api_key="k"), headers={"Authorization": "Bearer k"})
    assert [client.post("/v1/runs", json={"yaml": pipeline}).status_code for _ in range(2)] == [202, 202]
    full = client.post("/v1/runs", json={"yaml": pipeline})
    assert full.status_code == 503 and full.headers["Retry-After"] == "1"
    assert full.json()["error"]["code"] == "queue_full"
    assert len(client.get("/v1/runs").json()["runs"]) == 2


def test_one_feed_serves_every_stream_of_a_run_from_where_each_left_off(tmp_path):
    """Streams of one run share one watcher; a stream picked up again with Last-Event-ID gets only
    what came after it, even from a feed that read the file after the stream began."""
    import asyncio

    from raypress.serving.pipelines import event_feed
    from raypress.serving.pipelines.event_feed import RunFeeds

    lines = [json.dumps({"event": "node_started", "node": f"n{i}"}) + "\n" for i in range(4)]
    (tmp_path / "events.jsonl").write_text("".join(lines))
    ends = [sum(len(x) for x in lines[:i + 1]) for i in range(4)]
    state = {"now": ("running", None)}
    watchers = []

    async def never() -> bool:
        return False

    async def collect(feeds: RunFeeds, start: int) -> list:
        return [item async for item in feeds.stream("r", tmp_path, lambda: state["now"], start, never)]

    async def scenario() -> tuple[list, list]:
        event_feed.POLL_S = event_feed.STATE_S = 0.01
        feeds = RunFeeds()
        first = asyncio.create_task(collect(feeds, 0))
        second = asyncio.create_task(collect(feeds, ends[1]))  # a reconnect after the 2nd event
        await asyncio.sleep(0.1)
        watchers.append(len(feeds.feeds))
        with open(tmp_path / "events.jsonl", "a") as fh:
            fh.write(json.dumps({"event": "run_finished"}) + "\n")
        state["now"] = ("succeeded", None)
        return await first, await second

    try:
        first, second = asyncio.run(scenario())
    finally:
        event_feed.POLL_S, event_feed.STATE_S = 0.25, 1.0
    assert watchers == [1]
    ids = lambda items: [i for _, _, i in items if i is not None]  # noqa: E731
    assert ids(first) == ends + [ids(first)[-1]] and len(ids(first)) == 5
    assert ids(second) == ids(first)[2:]
    assert first[-1][:2] == ("end", {"state": "succeeded", "reason": None})
