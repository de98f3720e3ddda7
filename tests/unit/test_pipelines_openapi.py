"""The pipelines API's OpenAPI document is its contract: ``schemathesis run --checks all`` against the
real app over real HTTP finds no 5xx and no answer the document does not describe.

No Ray: the service's Jobs client has no cluster (``Jobs(None)``), so every run posted here fails
in its submitting thread and reads as ``failed``. The runs root is seeded with two finished runs
built here (a real resolved ``pipeline.yaml``, ``events.jsonl``, ``ledger.json``, a run log, a
rejects part and an output file), so the GET routes on a real id answer 200 with full bodies, and a
queued one (no job yet) that cancel answers 202 for; the contract file
(tests/contract/pipelines_api.toml) steers most generated ids, nodes and paths to them.

The tests after the schemathesis run pin what it found (each a 5xx or an answer the document did
not describe when this file was written) and the document's own promises.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("uvicorn")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from raypress.serving.pipelines.api import create_pipelines_app  # noqa: E402
from raypress.serving.pipelines.jobs import Jobs  # noqa: E402
from raypress.serving.pipelines.records import Attempt, RunRecord, RunRecords  # noqa: E402
from raypress.serving.pipelines.run_view import JobState  # noqa: E402
from raypress.serving.pipelines.service import PipelinesService, ServiceSettings  # noqa: E402
from raypress.serving.uvicorn_thread import serve_in_thread  # noqa: E402
from pipelines_server import SMALL_PIPELINE, SMALL_ROWS  # noqa: E402

KEY = "contract-key"
SETTINGS = Path(__file__).resolve().parents[1] / "contract" / "pipelines_api.toml"
pytestmark = pytest.mark.timeout(240)

# The ids tests/contract/pipelines_api.toml names (its dictionaries are static text).
SUCCEEDED_RUN = "20260101-000000-5eed0001"
FAILED_RUN = "20260101-000001-5eed0002"
QUEUED_RUN = "20260101-000002-5eed0003"  # live: no job id yet, as while its submit is under way
SUCCEEDED_JOB = "raysubmit_contract_succeeded"
# the integration tests' small pipeline, named for this test
PIPELINE = SMALL_PIPELINE.replace("name: api-small", "name: contract")
ROWS = SMALL_ROWS


class OfflineJobs(Jobs):
    """``Jobs(None)`` (no cluster: submits fail, live lookups raise), except that the seeded
    succeeded run's job is known as SUCCEEDED, as the Jobs API would answer after it ended."""

    def state(self, job_id: str | None) -> JobState:
        if job_id == SUCCEEDED_JOB:
            return JobState("SUCCEEDED")
        return super().state(job_id)


def _seed_run(runs_root: Path, base: Path, run_id: str, job_id: str | None, error: str | None) -> None:
    """A finished run of PIPELINE as a cluster would have left it: resolved ``pipeline.yaml``,
    events, ledger, run log, a rejects part and the writer's output, plus the service's record."""
    from raypress.dag.resolve import resolve_pipeline

    source = base / f"{run_id}.yaml"
    source.write_text(PIPELINE)
    run_dir = runs_root / "contract" / run_id
    resolved = resolve_pipeline(source, (), str(run_dir), base_dir=str(base), cluster_address="auto")
    resolved.write()
    start = time.time() - 120
    kept = [t for t in ROWS if len(t.split()) >= 3]
    events = [{"ts": start, "event": "run_started", "pipeline": "contract", "run_dir": str(run_dir), "steps": 1}]
    nodes = {}
    for offset, (node, op, rows_in, rows_out) in enumerate(
            [("docs", "read_jsonl", 4, 4), ("long_enough", "words_num_filter", 4, 2), ("out", "write_jsonl", 2, 2)]):
        dropped = {"num_words < min": rows_in - rows_out} if rows_in != rows_out else {}
        entry = {"rows_in": rows_in, "rows_out": rows_out, "dropped": dropped, "duplicates": 0,
                 "quarantined": 0, "seconds": 0.1}
        events.append({"ts": start + offset, "event": "node_started", "node": node, "op": op})
        events.append({"ts": start + offset + 0.5, "event": "node_finished", "node": node, **entry})
        nodes[node] = {"op": op, **entry}
    events.append({"ts": start + 5, "event": "warning", "node": "docs", "message": "a warning, for the page"})
    events.append({"ts": start + 6, "event": "run_finished", "seconds": 6.0, "adds_up": True})
    (run_dir / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    (run_dir / "ledger.json").write_text(json.dumps({"status": "succeeded", "nodes": nodes, "adds_up": True,
                                                     "problems": []}, indent=2))
    (run_dir / "logs").mkdir()
    log = [{"ts": start + i, "stream": "stdout", "node": node, "line": f"{node}: line {i}"}
           for i, node in enumerate(["docs", "long_enough", None, "out"])]
    (run_dir / "logs" / "run.jsonl").write_text("".join(json.dumps(r) + "\n" for r in log))
    (run_dir / "rejects" / "long_enough").mkdir(parents=True)
    rejected = [t for t in ROWS if t not in kept]
    pq.write_table(pa.table({
        "id": [f"{base}/docs.jsonl:{ROWS.index(t)}" for t in rejected],
        "_rp_node": ["long_enough"] * len(rejected),
        "_rp_kind": ["filtered"] * len(rejected),
        "_rp_reason": ["num_words < min"] * len(rejected),
        "_rp_detail": [json.dumps({"num_words": len(t.split())}) for t in rejected],
        "text": rejected,
    }), run_dir / "rejects" / "long_enough" / "part-00000000-contract.parquet")
    (run_dir / "out").mkdir()
    (run_dir / "out" / "part-00000000.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in kept))
    (run_dir / "report.md").write_text("# contract\n\n2 of 4 rows kept.\n")
    attempt = Attempt("run", start - 1, job_id=job_id, error=error)
    RunRecords(runs_root).put(RunRecord(id=run_id, name="contract", run_dir=str(run_dir), created=start - 1,
                                        attempts=[attempt]))


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pipelines-contract")
    runs_root, base = tmp / "runs", tmp / "work"
    base.mkdir()
    (base / "docs.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in ROWS))
    _seed_run(runs_root, base, SUCCEEDED_RUN, SUCCEEDED_JOB, None)
    _seed_run(runs_root, base, FAILED_RUN, None, "cannot reach the cluster (seeded)")
    now = time.time()
    RunRecords(runs_root).put(RunRecord(id=QUEUED_RUN, name="contract", run_dir=str(runs_root / "contract" / QUEUED_RUN),
                                        created=now, attempts=[Attempt("run", now)]))
    service = PipelinesService(ServiceSettings(runs_root=runs_root, base_dir=base, max_active_runs=4),
                               OfflineJobs(None))
    app = create_pipelines_app(service, api_key=KEY)  # the server's own body limit (1 MiB)
    mp = pytest.MonkeyPatch()
    for name in ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS"):  # Jobs(None) must find no cluster
        mp.delenv(name, raising=False)
    try:
        with serve_in_thread(app) as srv:
            yield srv
    finally:
        mp.undo()


def _get(server, path: str, headers_extra: dict | None = None, **kwargs) -> httpx.Response:
    headers = {"Authorization": f"Bearer {KEY}", **(headers_extra or {})}
    return httpx.get(f"{server.url}{path}", headers=headers, timeout=30, **kwargs)


def test_the_seeded_runs_answer_full_bodies(server):
    """The data schemathesis is steered to is what the contract file says it is."""
    run = _get(server, f"/v1/runs/{SUCCEEDED_RUN}").json()
    assert run["state"] == "succeeded" and run["adds_up"] is True, run
    assert [n["state"] for n in run["nodes"]] == ["succeeded"] * 3 and run["ledger"]["status"] == "succeeded"
    assert _get(server, f"/v1/runs/{FAILED_RUN}").json()["state"] == "failed"
    assert _get(server, f"/v1/runs/{QUEUED_RUN}").json()["state"] == "queued"
    rejects = _get(server, f"/v1/runs/{SUCCEEDED_RUN}/nodes/long_enough/rejects").json()["rows"]
    assert {r["reason"] for r in rejects} == {"num_words < min"} and len(rejects) == 2
    assert rejects[0]["threshold"] == {"param": "min_num", "value": 3, "side": "min"}
    assert len(_get(server, f"/v1/runs/{SUCCEEDED_RUN}/logs").json()["lines"]) == 4
    paths = {a["path"] for a in _get(server, f"/v1/runs/{SUCCEEDED_RUN}/artifacts").json()["artifacts"]}
    assert {"report.md", "out/part-00000000.jsonl", "pipeline.yaml"} <= paths
    events = _get(server, f"/v1/runs/{SUCCEEDED_RUN}/events").text
    assert "event: end" in events and '"run_finished"' in events


def test_schemathesis_finds_nothing(server, tmp_path):
    """Every check schemathesis has (status codes, content types, headers, body schemas, valid data
    accepted, invalid data refused, auth not ignored, 405 with ``Allow``) on generated requests to
    every route. The seed is fixed so a failure reproduces."""
    st = Path(sys.executable).with_name("st")
    if not st.exists():
        pytest.skip("schemathesis is not installed (the dev extra has it)")
    command = [str(st), "--config-file", str(SETTINGS), "run", f"{server.url}/openapi.json",
               "--checks", "all", "-H", f"Authorization: Bearer {KEY}", "--max-examples", "25",
               "--seed", "20261207", "--request-timeout", "30", "--no-color", "--workers", "2",
               "--phases", "examples,coverage,fuzzing,stateful"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=200, cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-8000:] + result.stderr[-2000:]
    assert "Failures:" not in result.stdout and "Errors:" not in result.stdout, result.stdout[-8000:]
    # the seeded ids reach the routes (a warning, not a failure, when every request is a 404); the one
    # warning left is POST /v1/runs refusing most generated YAML with 422: a JSON Schema cannot say
    # what a pipeline is
    assert "Missing test data" not in result.stdout, result.stdout[-4000:]


def test_every_route_documents_its_errors(server):
    spec = _get(server, "/openapi.json").json()
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            codes = set(operation["responses"])
            assert "422" not in codes or (path, method) in {("/v1/runs", "post")}, (path, method, codes)
            if path.startswith("/v1/"):
                assert operation["security"] == [{"bearer": []}] and "401" in codes, (path, method)
            if "{run_id}" in path:
                assert "404" in codes, (path, method)
    assert "HTTPValidationError" not in spec["components"]["schemas"]


def _cursor(data: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")


PART = "rejects/long_enough/part-00000000-contract.parquet"


@pytest.mark.parametrize("path, params, headers, status", [
    # a file name longer than the file system's limit: os.stat raised ENAMETOOLONG (a 500)
    (f"/v1/runs/{SUCCEEDED_RUN}/artifacts/{'a' * 300}", {}, {}, 404),
    (f"/v1/runs/{SUCCEEDED_RUN}/artifacts/out/{'b' * 300}/x", {}, {}, 404),
    # an offset past what a file offset holds: seek() raised inside the stream (a broken chunked body)
    (f"/v1/runs/{SUCCEEDED_RUN}/events", {"cursor": str(10**20)}, {}, 400),
    # cursors that decode but hold no offset this server gave out (int() / seek() raised: 500s)
    (f"/v1/runs/{SUCCEEDED_RUN}/logs", {"cursor": _cursor({"o": 10**30})}, {}, 400),
    (f"/v1/runs/{SUCCEEDED_RUN}/logs", {"cursor": _cursor({"o": "x"})}, {}, 400),
    (f"/v1/runs/{SUCCEEDED_RUN}/logs", {"cursor": _cursor({"o": [1]})}, {}, 400),
    (f"/v1/runs/{SUCCEEDED_RUN}/nodes/long_enough/rejects", {"cursor": _cursor({"p": PART, "r": "x"})}, {}, 400),
    (f"/v1/runs/{SUCCEEDED_RUN}/nodes/long_enough/rejects", {"cursor": _cursor({"p": PART, "r": 10**30})}, {}, 400),
    # an empty Last-Event-ID means "from the start", as no header does
    (f"/v1/runs/{SUCCEEDED_RUN}/events", {}, {"Last-Event-ID": ""}, 200),
])
def test_what_schemathesis_found_is_answered_not_a_5xx(server, path, params, headers, status):
    response = _get(server, path, params=params, headers_extra=headers)
    assert response.status_code == status, response.text[:500]
    if status == 400:
        assert response.json()["error"]["param"] in ("cursor", "query.cursor"), response.text


def test_405_names_every_method_of_the_path(server):
    """/v1/runs answers GET and POST: Starlette named only the first route's method (``Allow: POST``)."""
    response = httpx.request("OPTIONS", f"{server.url}/v1/runs", headers={"Authorization": f"Bearer {KEY}"})
    assert response.status_code == 405
    assert {m.strip() for m in response.headers["allow"].split(",")} >= {"GET", "POST"}


def test_the_documented_answers_are_the_ones_given(server):
    spec = _get(server, "/openapi.json").json()
    submit = spec["paths"]["/v1/runs"]["post"]["responses"]
    assert "422" in submit and "problems" in submit["422"]["description"]  # the route documents it
    events = spec["paths"]["/v1/runs/{run_id}/events"]["get"]
    stream = events["responses"]["200"]["content"]["text/event-stream"]["schema"]
    assert stream.get("type") == "object" and "data" in stream.get("properties", {})  # each event, not the text
    header = next(p for p in events["parameters"] if p["in"] == "header")
    assert "null" not in json.dumps(header["schema"])  # a header is text or absent, never JSON null
    content = spec["paths"]["/v1/runs/{run_id}/artifacts/{path}"]["get"]["responses"]["200"]["content"]
    assert "*/*" in content  # a report.md is text/markdown, a figure image/png: the type its name suggests
