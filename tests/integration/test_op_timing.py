"""Per-node seconds in the ledger are each op's own work: a reader is not charged for the ops
Ray fuses into its task, and a writer reports its own writing time."""

from __future__ import annotations

import json
import textwrap

import pytest

from raypress.dag.runner import run_pipeline

pytestmark = pytest.mark.integration
SLEEP = 0.4


def test_reader_and_writer_time_their_own_work(ray_session, tmp_path):
    corpus = tmp_path / "rows.jsonl"
    corpus.write_text("".join(json.dumps({"text": f"row {i}"}) + "\n" for i in range(3)))
    path = tmp_path / "p.yaml"
    path.write_text(textwrap.dedent(f"""\
        settings: {{allow_code: true}}
        nodes:
          - {{id: src, op: read_jsonl, with: {{paths: ["{corpus}"]}}}}
          - id: slow
            op: python_lambda_mapper
            input: src
            with: {{lambda_str: "lambda s: __import__('time').sleep({SLEEP}) or s"}}
          - {{id: out, op: write_jsonl, input: slow, with: {{path: "{{run_dir}}/out"}}}}
        """))
    ledger = run_pipeline(str(path), run_dir=str(tmp_path / "run"))
    seconds = {nid: entry["seconds"] for nid, entry in ledger["nodes"].items()}
    assert seconds["slow"] >= 3 * SLEEP * 0.9  # three rows, one sleep each
    assert seconds["src"] < SLEEP  # reading three short lines, not the fused mapper's sleeps
    assert 0 < seconds["out"] < SLEEP
