"""What a resume would do, without running: after a finished run, a changed input file marks exactly
the nodes downstream of its reader to run again (and `raypress plan RUN_DIR/pipeline.yaml` says so),
and a run that had nothing change would skip everything."""

from __future__ import annotations

import json
import textwrap

import pytest
from typer.testing import CliRunner

from raypress.cli import app
from raypress.dag.resolve import resolve_pipeline
from raypress.dag.resume_plan import resume_plan
from raypress.dag.runner import Runner, run_pipeline

pytestmark = pytest.mark.integration


def test_a_changed_file_reruns_exactly_what_lies_downstream(ray_session, tmp_path):
    for name in ("a", "b"):
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps({"id": f"{name}{i}", "text": f"{name} row {i} " * 3})
                                                        + "\n" for i in range(10)))
    path = tmp_path / "p.yaml"
    path.write_text(textwrap.dedent(f"""\
        name: resume-plan
        nodes:
          - {{id: read_a, op: read_jsonl, with: {{paths: ["{tmp_path}/a.jsonl"]}}}}
          - {{id: clean_a, op: whitespace_normalization_mapper, input: read_a}}
          - {{id: read_b, op: read_jsonl, with: {{paths: ["{tmp_path}/b.jsonl"]}}}}
          - {{id: both, op: words_num_filter, input: [clean_a, read_b], with: {{min_num: 2}}}}
          - {{id: out, op: write_jsonl, input: both, with: {{path: "{{run_dir}}/out"}}}}
          - {{id: out_b, op: write_jsonl, input: read_b, with: {{path: "{{run_dir}}/out_b"}}}}
        """))
    run_dir = tmp_path / "run"
    assert run_pipeline(str(path), run_dir=str(run_dir))["adds_up"]
    resolved = run_dir / "pipeline.yaml"
    assert {f["action"] for f in resume_plan(Runner(resolve_pipeline(resolved))).values()} == {"skip"}

    with open(tmp_path / "a.jsonl", "a") as fh:
        fh.write(json.dumps({"id": "a99", "text": "one more row here"}) + "\n")
    fates = resume_plan(Runner(resolve_pipeline(resolved)))
    assert {n for n, f in fates.items() if f["action"] == "run"} == {"read_a", "clean_a", "both", "out"}
    assert "a.jsonl changed" in fates["read_a"]["reason"] and "'clean_a'" in fates["both"]["reason"]

    shown = CliRunner().invoke(app, ["plan", str(resolved)], env={"COLUMNS": "400"})
    assert shown.exit_code == 0, shown.output
    rows = {line.split("│")[2].strip(): line.split("│")[-2].strip() for line in shown.output.splitlines()
            if line.count("│") > 5 and line.split("│")[2].strip()}
    assert rows["read_b"] == "skip" and rows["out_b"] == "skip" and rows["out"].startswith("run: ")
