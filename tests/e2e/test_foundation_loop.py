"""pipelines/foundation_loop.yaml end to end at its `reduced` profile: one DAG from a WARC, EDGAR
filings, a text dump of the same site and package descriptions to a served, searched and improved
model.  The run is killed while the model trains (`kill -9` of the run and its CLI), started again (curation
is skipped, the served model comes back up) and checked: cross-source duplicates removed once and
attributed to the source that lost them, the served endpoint answered the search's calls (counted
by the search and by the server), the SFT consumed the search's paths, the report's links resolve;
then an input file changes and the resume plan re-runs exactly the nodes downstream of it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pyarrow.parquet as pq
import pytest

from raypress.dag.resolve import resolve_pipeline
from raypress.dag.resume_plan import resume_plan
from raypress.dag.runner import Runner, run_pipeline

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]
REPO = Path(__file__).resolve().parents[2]
PIPELINE = REPO / "pipelines" / "foundation_loop.yaml"
CURATION = ("warc", "web_tagged", "web_urls", "web_extract", "web_language", "web_quality", "web", "dump_read",
            "dump", "filings", "sec_tagged", "sec_text", "sec_select", "sec_copies", "sec", "metadata", "pkg_tagged",
            "exact", "near", "classifier", "quality", "tokens", "train_text", "validation_text")


def _events(run_dir: Path) -> list[dict]:
    path = run_dir / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def _kill_during_training(run_dir: Path, edgar: Path) -> None:
    """`raypress run --profile reduced` on the shared Ray, `kill -9` of the run and its CLI once the
    model trains."""
    import ray

    address = ray.get_runtime_context().gcs_address
    proc = subprocess.Popen([sys.executable, "-m", "raypress.cli", "run", str(PIPELINE), "--profile", "reduced",
                             "--run-dir", str(run_dir), "--address", address, "--set", f"filings.paths=['{edgar}/*']"],
                            cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "RAYPRESS_PROGRESS_S": "60"})
    deadline = time.monotonic() + 300
    # its tokenizer is trained: the model's training loop starts now
    while not any(e.get("event") == "tokenizer_trained" and e.get("node") == "model" for e in _events(run_dir)):
        assert proc.poll() is None and time.monotonic() < deadline, "the run ended before its model trained"
        time.sleep(0.2)
    run = psutil.Process(proc.pid).children(recursive=True)
    for process in run:  # `kill -9` of the run itself, then of its CLI: no handler gets to run
        process.kill()
    proc.kill()
    proc.wait()
    psutil.wait_procs(run, timeout=60)
    ledger = json.loads((run_dir / "ledger.json").read_text())
    assert ledger["status"] == "running"  # killed: the ledger never said how it ended


def _downstream(vp, start: str) -> set[str]:
    below, todo = {start}, [start]
    while todo:
        n = todo.pop()
        for consumer in vp.nodes[n].consumers:
            if consumer not in below:
                below.add(consumer)
                todo.append(consumer)
    return below


@pytest.fixture
def serve_down_after(ray_session):
    """Serve is one per cluster: the run deletes its apps, this test takes Serve itself down (the
    next test that serves starts its own)."""
    yield
    from ray import serve

    serve.shutdown()


def test_foundation_loop_reduced(ray_session, serve_down_after, tmp_path):
    pytest.importorskip("reasoning_gym")
    edgar = tmp_path / "edgar"  # the filings of this run: one of them changes at the end
    shutil.copytree(REPO / "samples" / "edgar", edgar)
    run_dir = tmp_path / "run"
    _kill_during_training(run_dir, edgar)
    killed = {e["node"] for e in _events(run_dir) if e.get("event") == "node_finished"}
    assert set(CURATION) <= killed  # curation was done before the model trained

    events: list[dict] = []
    ledger = run_pipeline(str(run_dir / "pipeline.yaml"), on_event=events.append)
    assert ledger["status"] == "succeeded" and ledger["adds_up"], ledger["problems"]
    skipped = {e["node"] for e in events if e.get("event") == "node_skipped"}
    assert set(CURATION) <= skipped and "model" not in skipped
    assert any(e.get("event") == "endpoint_ready" and e.get("node") == "endpoint" for e in events)

    nodes = ledger["nodes"]
    # cross-source duplicates: the WARC's pages that the text dump also holds are removed once, as web's loss
    near = nodes["near"]["by_source"]
    assert near["web"]["lost_to"].get("dump", 0) > 0
    rejected = pq.read_table(run_dir / "rejects" / "near").to_pylist()
    kept = {r["id"] for r in pq.read_table(run_dir / "nodes" / "tokens").select(["id"]).to_pylist()} | {
        r["_rp_reason"] for r in rejected}
    web_lost = [r for r in rejected if r["id"].startswith("web/") and r["_rp_reason"].startswith("dump/")]
    assert len(web_lost) == near["web"]["lost_to"]["dump"]
    assert not {r["_rp_reason"] for r in web_lost} & {r["id"] for r in rejected}  # every kept twin stayed
    assert all(r["_rp_reason"] in kept for r in web_lost)

    # the served model answered the search's calls: counted by the search and by the server
    counts = nodes["search"]["counts"]
    assert counts["calls.endpoint"] > 0 and counts["served_requests.endpoint"] == counts["calls.endpoint"]
    # the SFT consumed the search's paths
    corpus = [e for e in events if e.get("event") == "sft_corpus" and e.get("node") == "sft"]
    assert corpus and corpus[0]["records"] > 0 and corpus[0]["correct"] > 0

    report = json.loads(Path(nodes["report"]["artifact"]).read_text())
    assert all(report["links_resolve"].values()), report["links_resolve"]
    assert {"web", "dump", "sec", "packages"} <= set(report["sources"])
    assert all(s["adds_up"] for s in report["sources"].values()), report["sources"]
    assert report["search"]["served_calls_match"] == {"endpoint": True}
    assert [c["verdict"] in ("holds", "fails", "inconclusive") for c in report["sft"]["claims"]] == [True] * 3
    assert set(report["cap"]) == {"first", "final"}

    # one filing changes: a resume would run exactly what lies downstream of its reader again
    target = sorted(edgar.iterdir())[0]
    target.write_bytes(target.read_bytes() + b"\n")
    runner = Runner(resolve_pipeline(run_dir / "pipeline.yaml"))
    fates = resume_plan(runner)
    rerun = {n for n, f in fates.items() if f["action"] == "run"}
    assert rerun == _downstream(runner.vp, "filings"), sorted(rerun ^ _downstream(runner.vp, "filings"))
