"""A Data-Juicer recipe (`dataset_path`, `export_path`, `process:`) runs as a linear pipeline."""

from __future__ import annotations

import json
import textwrap

import pytest

from raypress.dag.runner import run_pipeline

pytestmark = pytest.mark.e2e


def test_data_juicer_recipe_runs_and_exports_one_file(ray_session, tmp_path):
    docs = [
        "Contact me at someone@example.com about the release notes for this package today.",
        "short",
        "Visit https://example.org/docs for the full documentation of every option we offer.",
        "Contact me at someone@example.com about the release notes for this package today.",
    ]
    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps({"text": t}) + "\n" for t in docs))
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(textwrap.dedent(f"""\
        project_name: dj-demo
        dataset_path: {data}
        export_path: {tmp_path}/out/result.jsonl
        np: 2
        process:
          - clean_email_mapper:
          - clean_links_mapper:
          - words_num_filter:
              min_num: 5
          - document_deduplicator:
        """))
    ledger = run_pipeline(str(recipe), run_dir=str(tmp_path / "run"))
    assert ledger["adds_up"], ledger["problems"]
    rows = [json.loads(line) for line in (tmp_path / "out" / "result.jsonl").read_text().splitlines()]
    assert len(rows) == 2 == ledger["nodes"]["export"]["rows_out"]
    assert all("@" not in r["text"] and "https://" not in r["text"] for r in rows)
    assert ledger["nodes"]["words_num_filter"]["dropped"] == {"num_words < min": 1}
    assert ledger["nodes"]["document_deduplicator"]["duplicates"] == 1
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [".result.jsonl.raypress-manifest.json",
                                                                      "result.jsonl"]  # no staging left


def test_a_missing_model_file_stops_the_run_before_ray_with_the_line(tmp_path, monkeypatch):
    """`tokenization: true` without Data-Juicer's sentencepiece model here: one line naming the
    recipe line, the node and how to provide the file, found while the run is resolved, before
    Ray starts or the run directory is touched (no actor traceback)."""
    from raypress.dag.validate import PipelineInvalid

    for var in ("RAYPRESS_DJ_MODELS", "DATA_JUICER_CACHE_HOME"):
        monkeypatch.setenv(var, str(tmp_path / "no-models"))
    monkeypatch.delenv("DATA_JUICER_MODELS_CACHE", raising=False)
    data = tmp_path / "in.jsonl"
    data.write_text(json.dumps({"id": "a", "text": "one two three four five six"}) + "\n")
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(textwrap.dedent(f"""\
        dataset_path: {data}
        export_path: {tmp_path}/out/result.jsonl
        process:
          - clean_email_mapper:
          - words_num_filter:
              tokenization: true
              min_num: 2
        """))
    with pytest.raises(PipelineInvalid) as caught:
        run_pipeline(str(recipe), run_dir=str(tmp_path / "run"))
    [problem] = caught.value.problems
    message = str(problem)
    assert message.startswith(f"{recipe}:5 node 'words_num_filter': words_num_filter with tokenization=True")
    assert "en.sp.model" in message and "$RAYPRESS_DJ_MODELS" in message and "\n" not in message
    assert not (tmp_path / "run").exists() and not (tmp_path / "out").exists()
