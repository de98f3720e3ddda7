"""Issue 32 case 6: a reader pattern that matches nothing is a problem on its line when a run is
resolved (before Ray starts), not a failure 12 s into the run; paths the run itself makes are not."""

from __future__ import annotations

import textwrap

import pytest

from raypress.dag.resolve import resolve_pipeline
from raypress.dag.validate import PipelineInvalid, load_pipeline


def pipeline(tmp_path, body: str):
    path = tmp_path / "p.yaml"
    path.write_text(textwrap.dedent(body).replace("TMP", str(tmp_path)))
    return path


def test_a_glob_matching_nothing_is_a_problem_on_its_line(tmp_path):
    (tmp_path / "in.jsonl").write_text('{"text": "a"}\n')
    path = pipeline(tmp_path, """\
        name: g
        nodes:
          - id: src
            op: read_jsonl
            with:
              paths:
                - TMP/in.jsonl
                - TMP/nothing/*.jsonl
          - id: out
            op: write_jsonl
            input: src
            with: {path: TMP/out}
        """)
    with pytest.raises(PipelineInvalid) as info:
        resolve_pipeline(path, run_dir=str(tmp_path / "run"))
    (problem,) = info.value.problems
    assert problem.line == 8 and problem.node == "src" and problem.key == "paths"
    assert f"no file matches '{tmp_path}/nothing/*.jsonl'" in problem.message
    assert load_pipeline(path)  # the file alone is fine: Data-Juicer's `/path/to/your/dataset` validates
    resolve_pipeline(path, run_dir=str(tmp_path / "run2"), inputs_here=False)  # submit: the cluster's probe checks


def test_a_relative_pattern_says_where_it_was_looked_for(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = pipeline(tmp_path, """\
        nodes:
          - {id: src, op: read_jsonl, with: {paths: "data/*.jsonl"}}
          - {id: out, op: write_jsonl, input: src, with: {path: out}}
        """)
    with pytest.raises(PipelineInvalid) as info:
        resolve_pipeline(path, run_dir=str(tmp_path / "run"))
    assert "no file matches" in info.value.problems[0].message and str(tmp_path / "data") in str(info.value)


def test_what_the_run_makes_and_remote_paths_are_not_checked(tmp_path):
    (tmp_path / "in.jsonl").write_text('{"text": "a"}\n')
    path = pipeline(tmp_path, """\
        name: g
        nodes:
          - {id: src, op: read_jsonl, with: {paths: [TMP/in.jsonl]}}
          - {id: w, op: write_jsonl, input: src, with: {path: TMP/made}}
          - {id: again, op: read_jsonl, with: {paths: ["TMP/made/*.jsonl", "s3://bucket/x*.jsonl"]}}
          - {id: nested, op: read_jsonl, with: {paths: ["TMP/**/*.jsonl"]}}
          - {id: mine, op: read_parquet, with: {paths: ["{run_dir}/elsewhere/*.parquet"]}}
          - {id: w2, op: write_jsonl, input: again, with: {path: TMP/made2}}
          - {id: w3, op: write_jsonl, input: nested, with: {path: TMP/made3}}
          - {id: w4, op: write_jsonl, input: mine, with: {path: TMP/made4}}
        """)
    assert resolve_pipeline(path, run_dir=str(tmp_path / "run")).vp.nodes["again"]
