"""One resolved pipeline file (dag/resolve.py): what resolving does, that reading a resolved file
back is the identity, and that resolving and submitting parse the pipeline once."""

from __future__ import annotations

import functools
import os
import re
import textwrap
from pathlib import Path

import pytest

from raypress.dag import spec as spec_module
from raypress.dag.resolve import resolve_pipeline
from raypress.dag.store import config_hashes
from raypress.dag.validate import PipelineInvalid

REPO = Path(__file__).resolve().parents[2]


def test_relative_paths_and_run_dir_become_absolute_as_run_reads_them(tmp_path):
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(textwrap.dedent("""\
        nodes:
          - id: a
            op: read_hf_dataset
            with: {builder: json, data_files: {train: [data/a.jsonl, /abs/b.jsonl, "~/c.jsonl"]}}
          - id: b
            op: read_jsonl
            with: {paths: ["s3://bucket/x.jsonl", "{run_dir}/nodes/y", ./z.jsonl]}
          - id: out
            op: write_parquet
            input: b
            with: {path: ../out, overwrite: true}
        """))
    resolved = resolve_pipeline(recipe, run_dir="r1", base_dir="/work/here", inputs_here=False)
    nodes = resolved.vp.nodes
    home = os.path.expanduser("~")
    assert nodes["a"].params.data_files == {"train": ["/work/here/data/a.jsonl", "/abs/b.jsonl", f"{home}/c.jsonl"]}
    assert nodes["b"].params.paths == ["s3://bucket/x.jsonl", "/work/here/r1/nodes/y", "/work/here/z.jsonl"]
    assert nodes["out"].params.path == "/work/out"
    assert resolved.run_dir == Path("/work/here/r1") and resolved.file == Path("/work/here/r1/pipeline.yaml")


def test_run_dir_defaults_to_runs_under_the_base_directory(tmp_path):
    recipe = tmp_path / "qs.yaml"
    recipe.write_text("nodes:\n  - {id: a, op: read_jsonl, with: {paths: [x.jsonl]}}\n")
    resolve = functools.partial(resolve_pipeline, recipe, base_dir="/work/here", inputs_here=False)
    assert re.fullmatch(r"/work/here/runs/qs/\d{8}-\d{6}-[0-9a-f]{4}", str(resolve().run_dir))
    assert str(resolve(run_dir="/abs/r1").run_dir) == "/abs/r1"


@pytest.mark.parametrize("name", ["quickstart", "mint1t_html", "beancounter", "minhash_dedup", "bridgepure",
                                  "mulberry_comcts", "moe_train_serve"])
def test_a_resolved_file_reads_back_as_itself(tmp_path, name):
    """Defaults filled, overrides and references applied: the file a run writes is the pipeline it
    ran, and running that file resolves to the same text and the same config hashes."""
    source = REPO / "pipelines" / f"{name}.yaml"
    if not source.exists():
        pytest.skip(f"{source} is not shipped")
    resolved = resolve_pipeline(source, run_dir=str(tmp_path / "run"))
    again = resolve_pipeline(resolved.write())
    assert again.text == resolved.text
    assert config_hashes(again.vp) == config_hashes(resolved.vp)
    assert again.resolution == resolved.resolution


def test_the_header_names_the_source_and_its_overrides(tmp_path):
    resolved = resolve_pipeline(REPO / "pipelines" / "quickstart.yaml", ["enough_words.min_num=7"],
                                run_dir=str(tmp_path / "run"))
    first = resolved.text.splitlines()[0]
    assert str(REPO / "pipelines" / "quickstart.yaml") in first and "--set enough_words.min_num=7" in first
    assert resolved.vp.nodes["enough_words"].params.min_num == 7


def test_a_resolved_file_takes_no_overrides_and_keeps_its_run_directory(tmp_path):
    written = resolve_pipeline(REPO / "pipelines" / "quickstart.yaml", run_dir=str(tmp_path / "run")).write()
    with pytest.raises(PipelineInvalid, match="give --set with its source file"):
        resolve_pipeline(written, ["enough_words.min_num=7"])
    with pytest.raises(PipelineInvalid, match="belongs to"):
        resolve_pipeline(written, run_dir=str(tmp_path / "elsewhere"))
    assert resolve_pipeline(written, run_dir=str(tmp_path / "run")).run_dir == tmp_path / "run"


def test_problems_still_point_at_the_users_file_and_line(tmp_path):
    recipe = tmp_path / "p.yaml"
    recipe.write_text("nodes:\n  - id: a\n    op: read_jsonl\n    with: {paths: [x.jsonl]}\n"
                      "  - id: b\n    op: words_num_filter\n    input: a\n    with: {min_num: many}\n")
    with pytest.raises(PipelineInvalid) as caught:
        resolve_pipeline(recipe, run_dir=str(tmp_path / "run"), inputs_here=False)
    assert str(caught.value.problems[0]).startswith(f"{recipe}:8 node 'b' key 'min_num'")
    assert not (tmp_path / "run").exists()


def test_resolving_parses_once_and_submit_parses_once(tmp_path, monkeypatch):
    from raypress.cluster import ClusterError, submit_pipeline

    calls = []
    real = spec_module.load_located
    monkeypatch.setattr(spec_module, "load_located", lambda *a, **k: calls.append(a[1]) or real(*a, **k))
    source = REPO / "pipelines" / "quickstart.yaml"
    written = resolve_pipeline(source, run_dir=str(tmp_path / "run")).write()
    assert len(calls) == 1
    resolve_pipeline(written)
    assert len(calls) == 2
    with pytest.raises(ClusterError):  # nothing listens there: resolved, then refused
        submit_pipeline(str(source), "http://127.0.0.1:1", str(tmp_path / "r2"), [])
    assert len(calls) == 3


def test_ids_keep_paths_relative_to_where_the_run_started():
    """A resolved file holds absolute paths; a reader's ids keep the form a relative path gave."""
    from raypress.operators.shared.files import id_path

    assert id_path("/work/here/data/a.jsonl", "/work/here") == "data/a.jsonl"
    assert id_path("/elsewhere/a.jsonl", "/work/here") == "/elsewhere/a.jsonl"
    assert id_path("/work/here-too/a.jsonl", "/work/here") == "/work/here-too/a.jsonl"
    assert id_path("data/a.jsonl", "/work/here") == "data/a.jsonl"
    assert id_path("/work/here/a.jsonl", None) == "/work/here/a.jsonl"


def test_a_resolved_pipeline_cannot_be_edited(tmp_path):
    """The runner receives the final pipeline: nothing after resolution may change a node."""
    resolved = resolve_pipeline(REPO / "pipelines" / "quickstart.yaml", run_dir=str(tmp_path / "run"))
    node = resolved.vp.nodes["enough_words"]
    with pytest.raises(AttributeError, match="is resolved"):
        node.params = node.params.model_copy(update={"min_num": 1})
    with pytest.raises(TypeError):
        resolved.vp.nodes["enough_words"] = node  # type: ignore[index]
