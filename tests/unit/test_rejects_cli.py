"""`raypress rejects RUN_DIR [NODE]`: the rows a run dropped, found from the terminal by node and
reason, each with its stat value against the threshold and its source; `--json` reloads."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pipelines_server import SMALL_PIPELINE
from typer.testing import CliRunner

from raypress.cli import app



@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    """A finished run's folder as the runner leaves it: resolved pipeline, ledger, a rejects part."""
    from raypress.dag.resolve import resolve_pipeline

    (tmp_path / "docs.jsonl").write_text('{"text": "hello"}\n{"text": "a b c"}\n{"text": "hi there"}\n')
    (tmp_path / "small.yaml").write_text(SMALL_PIPELINE)
    run = tmp_path / "run"
    resolve_pipeline(tmp_path / "small.yaml", (), str(run), base_dir=str(tmp_path)).write()
    ledger = {"status": "succeeded", "adds_up": True, "nodes": {
        "docs": {"op": "read_jsonl", "rows_in": 3, "rows_out": 3, "dropped": {}, "duplicates": 0, "quarantined": 0},
        "long_enough": {"op": "words_num_filter", "rows_in": 3, "rows_out": 1, "dropped": {"num_words < min": 2},
                        "duplicates": 0, "quarantined": 0}}}
    (run / "ledger.json").write_text(json.dumps(ledger))
    part = run / "rejects" / "long_enough" / "part-00000000-x.parquet"  # under the node that dropped them
    part.parent.mkdir(parents=True)
    pq.write_table(pa.table({"id": ["docs.jsonl:1", "docs.jsonl:3"], "_rp_node": ["long_enough"] * 2,
                             "_rp_kind": ["filtered"] * 2, "_rp_reason": ["num_words < min"] * 2,
                             "_rp_detail": [json.dumps({"num_words": 1}), json.dumps({"num_words": 2})]}), part)
    return run


def test_summary_table_lists_each_nodes_drops(run_dir):
    result = CliRunner().invoke(app, ["rejects", str(run_dir)])
    assert result.exit_code == 0, result.output
    assert "long_enough" in result.output and "num_words < min" in result.output and "2" in result.output


def test_rows_of_a_node_with_values_thresholds_and_sources(run_dir):
    result = CliRunner().invoke(app, ["rejects", str(run_dir), "long_enough", "--reason", "num_words < min"])
    assert result.exit_code == 0, result.output
    assert "1 < min_num 3" in result.output and "2 < min_num 3" in result.output
    assert "docs.jsonl:3" in result.output


def test_json_output_reloads(run_dir):
    result = CliRunner().invoke(app, ["rejects", str(run_dir), "long_enough", "--json", "--limit", "1"])
    rows = [json.loads(line) for line in result.output.splitlines() if line.strip()]
    assert len(rows) == 1 and rows[0]["id"] == "docs.jsonl:1"
    assert rows[0]["threshold"] == {"param": "min_num", "value": 3, "side": "min"}
    assert rows[0]["source"] == {"file": "docs.jsonl", "offset": 1}


def test_clear_errors_for_a_wrong_folder_node_or_kind(run_dir, tmp_path):
    assert CliRunner().invoke(app, ["rejects", str(tmp_path / "nope")]).exit_code == 2
    missing = CliRunner().invoke(app, ["rejects", str(run_dir), "long_enuf"])
    assert missing.exit_code == 2 and "no node 'long_enuf'" in missing.output
    assert CliRunner().invoke(app, ["rejects", str(run_dir), "long_enough", "--kind", "x"]).exit_code == 2
