"""`mode: stats` and `raypress analyze`: filters annotate every row and drop nothing."""

from __future__ import annotations

import json
import textwrap

import pytest

from raypress.dag.runner import run_pipeline

pytestmark = pytest.mark.e2e


def corpus(tmp_path):
    path = tmp_path / "in.jsonl"
    texts = ["one two three four five six", "tiny", "a b c d e f g h i j k l", "two words"]
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    return path


def pipeline(tmp_path, words_mode: str, writer: str, out: str):
    """read_jsonl -> words_num_filter (min 5, in `words_mode`) -> `writer` at `out`."""
    data = corpus(tmp_path)
    pipe = tmp_path / "p.yaml"
    pipe.write_text(textwrap.dedent(f"""\
        nodes:
          - {{id: src, op: read_jsonl, with: {{paths: ["{data}"]}}}}
          - {{id: words, op: words_num_filter, input: src, mode: {words_mode}, with: {{min_num: 5}}}}
          - {{id: out, op: {writer}, input: words, with: {{path: "{{run_dir}}/{out}"}}}}
        """))
    return pipe


def test_stats_mode_node_keeps_every_row_with_stats(ray_session, tmp_path):
    pipe = pipeline(tmp_path, "stats", "write_jsonl", "out.jsonl")
    ledger = run_pipeline(str(pipe), run_dir=str(tmp_path / "run"))
    assert ledger["adds_up"] and ledger["nodes"]["words"]["dropped"] == {}
    rows = [json.loads(x) for x in (tmp_path / "run" / "out.jsonl").read_text().splitlines()]
    assert sorted(r["stats"]["num_words"] for r in rows) == [1, 2, 6, 12]


def test_analyze_cli_prints_quantiles(ray_session, tmp_path):
    pipe = pipeline(tmp_path, "run", "write_parquet", "out")  # analyze itself switches to stats
    from typer.testing import CliRunner

    from raypress.cli import app

    result = CliRunner().invoke(app, ["analyze", str(pipe), "--run-dir", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output[-2000:]
    assert json.loads((tmp_path / "run" / "ledger.json").read_text())["adds_up"]
    row = next(line for line in result.output.splitlines() if "num_words" in line)
    assert "4" in row and "12" in row  # count 4 (nothing dropped), max 12
