"""Settings profiles: a file's `profiles.NAME` values applied before `--set` (which wins), errors at
their line, a resolved file that does not apply them twice, and `raypress plan` showing where a
stage's workers would run."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from raypress.cli import app
from raypress.dag.plan import describe, make_plan
from raypress.dag.resolve import resolve_pipeline
from raypress.dag.validate import PipelineInvalid, load_pipeline

PIPELINE = textwrap.dedent("""\
    name: profiled
    profiles:
      reduced:
        description: the test's sizes
        long.min_num: 3
        settings.seed: 7
      cluster:
        model.num_workers: 4
        model.use_gpu: true
        endpoint.num_gpus: 1
      broken:
        long.no_such_param: 1
    nodes:
      - id: src
        op: read_jsonl
        with: {paths: [data.jsonl]}
      - id: long
        op: words_num_filter
        input: src
        with: {min_num: 50}
      - id: model
        op: train_moe_lm
        input: long
        with: {num_workers: 2}
      - id: endpoint
        op: serve_llm
        input: {model: model}
    """)


@pytest.fixture
def pipeline(tmp_path: Path) -> Path:
    path = tmp_path / "p.yaml"
    path.write_text(PIPELINE)
    (tmp_path / "data.jsonl").write_text('{"text": "a b c"}\n')
    return path


def test_a_profile_sets_its_values_and_set_still_wins(pipeline: Path) -> None:
    vp = load_pipeline(str(pipeline), ["settings.profile=reduced"])
    assert vp.nodes["long"].params.min_num == 3 and vp.spec.settings["seed"] == 7
    vp = load_pipeline(str(pipeline), ["settings.profile=reduced", "long.min_num=9"])
    assert vp.nodes["long"].params.min_num == 9
    assert load_pipeline(str(pipeline), []).nodes["long"].params.min_num == 50  # no profile: the file's values


def test_unknown_profiles_and_bad_entries_are_problems_at_their_place(pipeline: Path) -> None:
    with pytest.raises(PipelineInvalid) as info:
        load_pipeline(str(pipeline), ["settings.profile=huge"])
    assert "unknown profile 'huge' (this file's profiles: reduced, cluster, broken)" in str(info.value)
    with pytest.raises(PipelineInvalid) as info:
        load_pipeline(str(pipeline), ["settings.profile=broken"])
    text = str(info.value)  # named by its node, at the node's line (as a bad --set is)
    assert "node 'long' key 'no_such_param': unknown parameter" in text


def test_a_resolved_file_holds_the_profiles_values_once(pipeline: Path, tmp_path: Path) -> None:
    resolved = resolve_pipeline(pipeline, ["settings.profile=reduced", "long.min_num=9"], str(tmp_path / "run"),
                                base_dir=str(tmp_path))
    written = resolved.write()
    again = load_pipeline(str(written), [])
    assert again.nodes["long"].params.min_num == 9 and again.spec.settings["seed"] == 7


def test_plan_of_the_cluster_profile_shows_gpu_workers_on_training_and_serving(pipeline: Path) -> None:
    result = CliRunner().invoke(app, ["plan", str(pipeline), "--profile", "cluster"], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    lines = {line.split("│")[2].strip(): line for line in result.output.splitlines() if line.count("│") > 3}
    assert "4 Ray Train workers × cpu=1 gpu=1" in lines["model"]
    assert "a Serve replica × cpu=1 gpu=1" in lines["endpoint"]
    default = {r["node"]: r["resources"] for r in describe(make_plan(load_pipeline(str(pipeline), [])))}
    assert default["model"] == "cpu=0; 2 Ray Train workers × cpu=1 (gpu=1 where the cluster has a GPU per worker)"
    assert default["endpoint"] == "cpu=0; a Serve replica × cpu=1" and default["long"] == "cpu=1"


def test_a_source_key_that_names_no_column_is_a_problem_at_its_line(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("name: x\nsettings: {source_key: 3}\nnodes:\n  - {id: a, op: read_jsonl, with: {paths: [d.jsonl]}}\n")
    with pytest.raises(PipelineInvalid) as info:
        load_pipeline(str(path), [])
    assert f"{path}:2" in str(info.value) and "source_key must name a column (got 3)" in str(info.value)
