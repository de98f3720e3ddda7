"""The pipelines API, driven with httpx against a real `raypress server` attached to a real local Ray
cluster (tests/pipelines_server.py): validate, submit, events, ledger, logs, rejects, artifacts,
cancel, resume, restart recovery, and every refusal a user can run into."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from pipelines_server import SMALL_PIPELINE, Server, running_server, wait_for_state, write_slow_inputs

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[Server]:
    with running_server(tmp_path_factory.mktemp("pipelines-api")) as srv:
        yield srv


@pytest.fixture(scope="module")
def api(server) -> Iterator[httpx.Client]:
    with server.client() as client:
        yield client


@pytest.fixture(scope="module")
def small_run(api) -> dict:
    """The small pipeline, submitted once and finished (shared by the read-only tests)."""
    response = api.post("/v1/runs", json={"yaml": SMALL_PIPELINE}, headers={"Idempotency-Key": "small-1"})
    assert response.status_code == 202, response.text
    return wait_for_state(api, response.json()["id"], ("succeeded", "failed", "crashed", "cancelled"))


def sse_events(api: httpx.Client, run_id: str, timeout_s: float = 300) -> list[tuple[str | None, dict]]:
    """(event name, data) of the run's event stream until its `end` event."""
    out: list[tuple[str | None, dict]] = []
    name = None
    with api.stream("GET", f"/v1/runs/{run_id}/events", timeout=timeout_s) as stream:
        assert stream.status_code == 200
        assert stream.headers["content-type"].startswith("text/event-stream")
        for line in stream.iter_lines():
            if line.startswith("event: "):
                name = line[len("event: "):]
            elif line.startswith("data: "):
                out.append((name, json.loads(line[len("data: "):])))
                if name == "end":
                    return out
                name = None
    return out


def test_token_is_required_and_health_is_open(server):
    with server.client(token=None) as anonymous:
        assert anonymous.get("/health").status_code == 200
        response = anonymous.get("/v1/runs")
        assert response.status_code == 401
        assert response.json()["error"]["type"] == "authentication_error"
    with server.client(token="wrong") as wrong:
        assert wrong.post("/v1/validate", json={"yaml": SMALL_PIPELINE}).status_code == 401
    assert "/v1/runs" in httpx.get(f"{server.url}/openapi.json").json()["paths"]


def test_validate_names_each_problem_at_its_line(api):
    text = SMALL_PIPELINE.replace("min_num: 3", "min_nun: 3").replace("op: write_jsonl", "op: write_jsonll")
    body = api.post("/v1/validate", json={"yaml": text, "filename": "mine.yaml"}).json()
    assert body["ok"] is False
    by_key = {p["key"]: p for p in body["problems"] if p["key"]}
    lines = text.splitlines()
    assert "min_nun" in lines[by_key["min_nun"]["line"] - 1]
    assert by_key["min_nun"]["node"] == "long_enough" and by_key["min_nun"]["column"] >= 1
    assert "did you mean 'min_num'" in by_key["min_nun"]["message"]
    assert any("write_jsonl" in p["message"] and "mine.yaml:" in p["text"] for p in body["problems"])
    assert api.post("/v1/validate", json={"yaml": SMALL_PIPELINE}).json() == {"ok": True, "problems": []}


def test_malformed_yaml_is_a_problem_with_a_line(api):
    body = api.post("/v1/validate", json={"yaml": "name: x\nnodes:\n  - id: a\n    op: [unclosed\n"}).json()
    assert body["ok"] is False and body["problems"][0]["line"] is not None
    response = api.post("/v1/runs", json={"yaml": "nodes: {"})
    assert response.status_code == 422
    assert response.json()["problems"] and response.json()["error"]["param"] == "yaml"


def test_a_body_over_the_limit_is_413(api):
    response = api.post("/v1/validate", content=b'{"yaml": "' + b"x" * (10 * 1024 * 1024) + b'"}',
                        headers={"Content-Type": "application/json"})
    assert response.status_code == 413
    assert api.get("/health").status_code == 200


def test_allow_code_is_refused(api):
    text = SMALL_PIPELINE.replace("settings: {keep_rejects: true}", "settings: {keep_rejects: true, allow_code: true}")
    problems = api.post("/v1/validate", json={"yaml": text}).json()["problems"]
    assert [p["key"] for p in problems] == ["settings.allow_code"] and problems[0]["line"] == 2
    response = api.post("/v1/runs", json={"yaml": text})
    assert response.status_code == 422
    assert response.json()["problems"][0]["key"] == "settings.allow_code"


def test_a_writer_outside_the_runs_root_is_refused(api, tmp_path):
    text = SMALL_PIPELINE.replace('"{run_dir}/out"', json.dumps(str(tmp_path / "elsewhere")))
    response = api.post("/v1/runs", json={"yaml": text})
    assert response.status_code == 422
    problem = response.json()["problems"][0]
    assert problem["node"] == "out" and "outside this server's runs root" in problem["message"]
    assert not (tmp_path / "elsewhere").exists()


def test_one_idempotency_key_makes_one_run(api, small_run):
    again = api.post("/v1/runs", json={"yaml": SMALL_PIPELINE}, headers={"Idempotency-Key": "small-1"})
    assert again.status_code == 200 and again.json()["id"] == small_run["id"]
    other = api.post("/v1/runs", json={"yaml": SMALL_PIPELINE + "\n# changed\n"},
                     headers={"Idempotency-Key": "small-1"})
    assert other.status_code == 409
    runs = api.get("/v1/runs", params={"name": "api-small", "limit": 500}).json()["runs"]
    assert [r["id"] for r in runs].count(small_run["id"]) == 1


def test_a_run_streams_its_events_and_ends_with_an_adding_ledger(api):
    run_id = api.post("/v1/runs", json={"yaml": SMALL_PIPELINE}).json()["id"]
    events = sse_events(api, run_id)
    assert events[-1] == ("end", {"state": "succeeded", "reason": None})
    assert ("state", {"state": "running", "reason": None}) in events or \
        any(e.get("event") == "run_started" for _, e in events)
    finished = {e["node"]: e for name, e in events if name is None and e.get("event") == "node_finished"}
    assert set(finished) == {"docs", "long_enough", "out"}
    run = api.get(f"/v1/runs/{run_id}").json()
    assert run["state"] == "succeeded" and run["ledger"]["adds_up"] is True
    nodes = {n["id"]: n for n in run["nodes"]}
    assert nodes["long_enough"]["counts"]["dropped"] == {"num_words < min": 2}
    assert nodes["long_enough"]["counts"]["rows_out"] == 2 and nodes["long_enough"]["counts"]["adds_up"]
    assert all(n["state"] == "succeeded" and n["started"] and n["finished"] for n in run["nodes"])
    assert nodes["long_enough"]["inputs"] == ["docs"]
    # an event stream picked up again from an event's id sends only what came after it
    with api.stream("GET", f"/v1/runs/{run_id}/events", headers={"Last-Event-ID": "0"}) as stream:
        assert stream.status_code == 200


def test_logs_are_kept_in_the_run_directory_and_page_by_node(api, small_run):
    run_id = small_run["id"]
    page = api.get(f"/v1/runs/{run_id}/logs", params={"limit": 1000}).json()
    texts = [line["text"] for line in page["lines"]]
    assert any("ledger adds up" in t for t in texts)
    assert Path(small_run["run_dir"], "logs", "run.jsonl").is_file()
    mine = api.get(f"/v1/runs/{run_id}/logs", params={"node": "long_enough"}).json()["lines"]
    assert mine and all(line["node"] == "long_enough" for line in mine)
    first = api.get(f"/v1/runs/{run_id}/logs", params={"limit": 2}).json()
    rest = api.get(f"/v1/runs/{run_id}/logs", params={"cursor": first["next_cursor"], "limit": 1000}).json()
    assert [x["text"] for x in first["lines"] + rest["lines"]] == texts
    assert api.get(f"/v1/runs/{run_id}/logs", params={"cursor": "garbage!"}).status_code == 400


def test_rejects_page_with_reasons_values_and_sources(api, small_run):
    run_id = small_run["id"]
    url = f"/v1/runs/{run_id}/nodes/long_enough/rejects"
    first = api.get(url, params={"reason": "num_words < min", "limit": 1}).json()
    assert len(first["rows"]) == 1 and first["next_cursor"]
    second = api.get(url, params={"reason": "num_words < min", "cursor": first["next_cursor"]}).json()
    rows = first["rows"] + second["rows"]
    assert second["next_cursor"] is None and len(rows) == 2
    for row in rows:
        assert row["reason"] == "num_words < min" and row["kind"] == "filtered"
        assert row["threshold"] == {"param": "min_num", "value": 3, "side": "min"}
        assert row["source"]["file"].endswith("docs.jsonl") and row["source"]["offset"] in (1, 2)  # the reader's line numbers
        assert row["row"]["text"] in ("hello", "hello world")  # keep_rejects: the whole row
    assert api.get(url, params={"reason": "no such reason"}).json() == {"rows": [], "next_cursor": None}
    assert api.get(f"/v1/runs/{run_id}/nodes/nope/rejects").status_code == 404


def test_artifacts_are_served_and_nothing_outside_the_run(api, small_run, server, tmp_path):
    run_id, run_dir = small_run["id"], Path(small_run["run_dir"])
    listed = {a["path"] for a in api.get(f"/v1/runs/{run_id}/artifacts").json()["artifacts"]}
    assert {"pipeline.yaml", "ledger.json", "events.jsonl"} <= listed
    assert api.get(f"/v1/runs/{run_id}/artifacts/ledger.json").json()["adds_up"] is True
    secret = tmp_path / "secret.txt"
    secret.write_text("not yours")
    os.symlink(secret, run_dir / "reports-link.txt")
    for path in ("..%2F..%2F..%2Fserver.log", "%2Fetc%2Fpasswd", "reports-link.txt", "nodes", "missing.txt"):
        response = api.get(f"/v1/runs/{run_id}/artifacts/{path}")
        assert response.status_code == 404, path
    raw = httpx.get(f"{server.url}/v1/runs/{run_id}/artifacts/../../../server.log",
                    headers={"Authorization": f"Bearer {api.headers['Authorization'].split()[1]}"})
    assert raw.status_code == 404


def test_an_analyze_run_writes_and_serves_its_report(api):
    response = api.post("/v1/runs", json={"yaml": SMALL_PIPELINE, "analyze": True})
    assert response.status_code == 202, response.text
    assert response.json()["mode"] == "analyze"
    run = wait_for_state(api, response.json()["id"], ("succeeded", "failed", "crashed", "cancelled"))
    assert run["state"] == "succeeded", run
    detail = api.get(f"/v1/runs/{run['id']}").json()
    nodes = {n["id"]: n for n in detail["nodes"]}
    assert nodes["long_enough"]["counts"]["dropped"] == {}  # stats mode: the filter drops nothing
    listed = {a["path"] for a in api.get(f"/v1/runs/{run['id']}/artifacts").json()["artifacts"]}
    assert {"reports/analysis/report.html", "reports/analysis/analysis.json"} <= listed
    page = api.get(f"/v1/runs/{run['id']}/artifacts/reports/analysis/report.html")
    assert page.headers["content-type"].startswith("text/html") and "num_words" in page.text
    analysis = api.get(f"/v1/runs/{run['id']}/artifacts/reports/analysis/analysis.json").json()
    assert analysis["outputs"][0]["filters"][0]["drops"] == 2  # what the plain run drops


def test_unknown_runs_and_finished_runs_answer_404_and_409(api, small_run):
    assert api.get("/v1/runs/20990101-000000-deadbeef").status_code == 404
    assert api.get("/v1/runs/not-a-run").status_code == 404
    assert api.post("/v1/runs/20990101-000000-deadbeef/cancel").status_code == 404
    response = api.post(f"/v1/runs/{small_run['id']}/cancel")
    assert response.status_code == 409 and response.json()["error"]["code"] == "run_finished"
    assert api.post(f"/v1/runs/{small_run['id']}/resume").status_code == 409


def test_runs_list_with_filters_and_cursor(api, small_run):
    everything = api.get("/v1/runs", params={"limit": 500}).json()["runs"]
    first = api.get("/v1/runs", params={"limit": 1}).json()
    assert first["runs"][0]["id"] == everything[0]["id"] and first["next_cursor"]
    rest = api.get("/v1/runs", params={"limit": 500, "cursor": first["next_cursor"]}).json()["runs"]
    assert [r["id"] for r in first["runs"] + rest] == [r["id"] for r in everything]
    done = api.get("/v1/runs", params={"state": "succeeded"}).json()["runs"]
    assert done and all(r["state"] == "succeeded" for r in done)
    assert api.get("/v1/runs", params={"state": "bogus"}).status_code == 400


def test_ops_are_listed_with_json_schema(api):
    ops = {op["name"]: op for op in api.get("/v1/ops").json()["ops"]}
    schema = ops["words_num_filter"]["params_schema"]
    assert {"min_num", "max_num"} <= set(schema["properties"])
    one = api.get("/v1/ops/words_num_filter").json()
    assert one["kind"] == "filter"
    missing = api.get("/v1/ops/words_num_filtr")
    assert missing.status_code == 404 and "words_num_filter" in missing.json()["error"]["message"]


def test_cancel_a_long_run_resume_it_and_recover_after_a_restart(api, server):
    slow = write_slow_inputs(server.base_dir, rows=80_000)
    run_id = api.post("/v1/runs", json={"yaml": slow}).json()["id"]
    wait_for_state(api, run_id, ("running",), timeout_s=120)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # the run is working, not just starting
        if any(n["state"] == "running" for n in api.get(f"/v1/runs/{run_id}").json()["nodes"]):
            break
        time.sleep(0.5)
    response = api.post(f"/v1/runs/{run_id}/cancel")
    assert response.status_code == 202, response.text
    run = wait_for_state(api, run_id, ("cancelled", "failed", "crashed", "succeeded"), timeout_s=120)
    assert run["state"] == "cancelled", run
    ledger = json.loads(Path(run["run_dir"], "ledger.json").read_text())
    assert ledger["status"] == "cancelled", "the run stopped cleanly within the grace period"
    assert api.post(f"/v1/runs/{run_id}/cancel").status_code == 409

    resumed = api.post(f"/v1/runs/{run_id}/resume")
    assert resumed.status_code == 202 and resumed.json()["attempts"] == 2
    wait_for_state(api, run_id, ("running",), timeout_s=120)
    before = {r["id"]: r["state"] for r in api.get("/v1/runs", params={"limit": 500}).json()["runs"]}

    server.stop()  # the run goes on: it is a job on the cluster, not a child of the server
    server.start()
    after = {r["id"]: r["state"] for r in api.get("/v1/runs", params={"limit": 500}).json()["runs"]}
    assert set(after) == set(before)
    assert {k: v for k, v in after.items() if k != run_id} == {k: v for k, v in before.items() if k != run_id}
    run = wait_for_state(api, run_id, ("succeeded", "failed", "crashed", "cancelled"), timeout_s=600)
    assert run["state"] == "succeeded" and run["ledger"]["adds_up"], run
    assert [a["kind"] for a in run["attempt_history"]] == ["run", "resume"]
