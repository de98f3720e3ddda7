"""The quickstart pipeline end to end, on this machine's real package descriptions."""

from __future__ import annotations

import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from raypress.dag.runner import run_pipeline

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]


def test_quickstart_runs_and_ledger_adds_up(ray_session, tmp_path):
    metadata_glob = f"{sys.prefix}/lib/python*/site-packages/*.dist-info/METADATA"
    ledger = run_pipeline(str(REPO / "pipelines" / "quickstart.yaml"), run_dir=str(tmp_path / "run"),
                          overrides=[f"metadata.paths=['{metadata_glob}']"])
    assert ledger["adds_up"], ledger["problems"]
    nodes = ledger["nodes"]
    assert nodes["metadata"]["rows_in"] > 100  # one row per installed package
    assert nodes["dedup"]["rows_in"] - nodes["dedup"]["rows_out"] == nodes["dedup"]["duplicates"]
    assert sum(nodes["enough_words"]["dropped"].values()) > 0
    out = pq.read_table(tmp_path / "run" / "output")
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
