"""The quickstart pipeline end to end, on this machine's real package descriptions, run as `make demo`
runs it: `raypress run pipelines/quickstart.yaml` in a subprocess (supervisor and run), once; its
ledger, its output and what it printed are checked from that one run."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from raypress.dag.ray_logs import is_ray_line, ray_log_path

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]
# Ray's own log format: "2026-12-07 11:49:17,956\tINFO __init__.py:56 -- ..."
RAY_LOG_LINE = re.compile(r"\b(?:INFO|WARNING)\s+\S+\.py:\d+ -- ")


@pytest.fixture(scope="module")
def quickstart(tmp_path_factory) -> dict:
    """One `raypress run` of the quickstart: its run directory, ledger, and what it printed."""
    run_dir = tmp_path_factory.mktemp("quickstart") / "run"
    metadata_glob = f"{sys.prefix}/lib/python*/site-packages/*.dist-info/METADATA"
    # every progress event printed (off a terminal a node's line comes at most every 5 s by default:
    # the quickstart's segments are shorter than that)
    env = {**os.environ, "RAY_ADDRESS": "", "RAYPRESS_PROGRESS_S": "0"}
    proc = subprocess.run([sys.executable, "-m", "raypress.cli", "run", str(REPO / "pipelines" / "quickstart.yaml"),
                           "--run-dir", str(run_dir), "--set", f"metadata.paths=['{metadata_glob}']"],
                          capture_output=True, text=True, cwd=REPO, env=env, timeout=600)
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    return {"run_dir": run_dir, "ledger": json.loads((run_dir / "ledger.json").read_text()),
            "stdout": proc.stdout, "stderr": proc.stderr,
            "events": [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]}


def test_quickstart_runs_and_ledger_adds_up(quickstart):
    ledger, run_dir = quickstart["ledger"], quickstart["run_dir"]
    assert ledger["status"] == "succeeded" and ledger["adds_up"], ledger["problems"]
    nodes = ledger["nodes"]
    assert nodes["metadata"]["rows_in"] > 100  # one row per installed package
    assert nodes["dedup"]["rows_in"] - nodes["dedup"]["rows_out"] == nodes["dedup"]["duplicates"]
    assert sum(nodes["enough_words"]["dropped"].values()) > 0
    out = pq.read_table(run_dir / "output")
    assert out.num_rows == nodes["output"]["rows_out"] > 0
    assert len(set(out.column("id").to_pylist())) == out.num_rows
    normalized = {" ".join(t.lower().split()) for t in out.column("text").to_pylist()}
    assert len(normalized) == out.num_rows  # near dedup left one copy of each text
    # the demo shows what it says: a republished package's description collapses into the original's
    # (httpcore2, which `make setup` installs beside httpcore, carries httpcore's README)
    names = {Path(p).parent.name.split("-")[0].lower() for p in out.column("id").to_pylist()}
    assert nodes["dedup"]["duplicates"] >= 1 and not {"httpcore", "httpcore2"} <= names
    stats = out.column("stats").to_pylist()
    assert all(s["num_words"] >= 50 for s in stats)
    # every row that entered is accounted for at the end of the chain
    removed = sum(sum(e["dropped"].values()) + e["duplicates"] + e["quarantined"] for e in nodes.values())
    assert nodes["metadata"]["rows_in"] == removed + nodes["output"]["rows_out"]


def test_the_terminal_shows_raypress_lines_and_no_ray_log_lines(quickstart):
    """Issue 34: `make demo` printed ~20 of Ray's INFO/WARNING lines between its own."""
    lines = (quickstart["stdout"] + quickstart["stderr"]).splitlines()
    assert [line for line in lines if RAY_LOG_LINE.search(line) or is_ray_line(line)] == []
    nodes = quickstart["ledger"]["nodes"]
    for nid, e in nodes.items():  # one start and one result line per node
        assert f"▶ {nid} ({e['op']})" in lines
        assert f"✓ {nid}: {e['rows_in']} in → {e['rows_out']} out ({e['seconds']:.1f}s)" in lines
    progress = [e for e in quickstart["events"] if e["event"] == "node_progress"]
    started = {e["node"]: e["ts"] for e in quickstart["events"] if e["event"] == "node_started"}
    ended = {e["node"]: e["ts"] for e in quickstart["events"] if e["event"] == "node_finished"}
    if ended["metadata"] - started["metadata"] > 2.0:  # the first segment ran long enough to report
        assert {e["node"] for e in progress} >= {"metadata", "no_email", "flagged"}, progress
    for e in progress:  # each shown as a line of its node (RAYPRESS_PROGRESS_S=0: every one)
        assert any(line.startswith(f"  {e['node']}: {e['rows_in']:,} in → {e['rows_out']:,} out") for line in lines)
    assert "ledger adds up" in quickstart["stdout"]
    ray_log = ray_log_path(quickstart["run_dir"]).read_text()  # Ray's lines went here instead
    assert "execution finished" in ray_log
