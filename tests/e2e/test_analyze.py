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


def test_analyze_cli_writes_analysis_and_report(ray_session, tmp_path):
    pipe = pipeline(tmp_path, "run", "write_parquet", "out")  # analyze itself switches to stats
    from typer.testing import CliRunner

    from raypress.cli import app

    result = CliRunner().invoke(app, ["analyze", str(pipe), "--run-dir", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output[-2000:]
    assert json.loads((tmp_path / "run" / "ledger.json").read_text())["adds_up"]
    row = next(line for line in result.output.splitlines() if "num_words" in line)
    assert "min_num=5" in row and "50.0%" in row  # 2 of the 4 rows have 5+ words
    folder = tmp_path / "run" / "reports" / "analysis"
    analysis = json.loads((folder / "analysis.json").read_text())
    (stat,) = analysis["outputs"][0]["stats"]
    assert (stat["count"], stat["min"], stat["max"]) == (4, 1, 12)
    assert sum(stat["histogram"]["counts"]) == 4
    assert analysis["outputs"][0]["filters"][0]["drops"] == 2
    assert (folder / "report.html").read_text().lstrip().lower().startswith("<!doctype html>")


def test_analyze_quickstart_matches_its_output(ray_session, tmp_path):
    """The quickstart analyzed from the CLI: every number checked against the stats the run wrote
    (every row's, as nothing is dropped in stats mode) and its deduplicator's rejects."""
    import numpy as np
    import pyarrow.dataset as pads
    from typer.testing import CliRunner

    from raypress.cli import app
    from tests.analysis_fixtures import quickstart_pipeline, range_drops

    run = tmp_path / "run"
    result = CliRunner().invoke(app, ["analyze", "pipelines/quickstart.yaml", "--run-dir", str(run),
                                      "--report", str(tmp_path / "report")])
    assert result.exit_code == 0, result.output[-3000:]
    analysis = json.loads((tmp_path / "report" / "analysis.json").read_text())
    table = pads.dataset(str(run / "output"), format="parquet").to_table()
    (output,) = analysis["outputs"]
    assert output["rows"] == table.num_rows > 100
    drops = range_drops(quickstart_pipeline(), table)
    nodes = output["overlap"]["nodes"]
    matrix = np.column_stack([drops[n] for n in nodes]).astype(int)
    assert output["overlap"]["rows"] == (matrix.T @ matrix).tolist()
    for s in output["stats"]:
        values = np.asarray(table["stats"].combine_chunks().field(s["stat"]).to_pylist(), dtype=float)
        counts, _ = np.histogram(values, bins=np.asarray(s["histogram"]["edges"], dtype=float))
        assert s["histogram"]["counts"] == counts.tolist()
    (dedup,) = analysis["dedup"]
    assert dedup["duplicates"] >= 1 and dedup["samples"][0]["kept_text"]
    ledger = json.loads((run / "ledger.json").read_text())
    assert dedup["duplicates"] == ledger["nodes"]["dedup"]["duplicates"]
