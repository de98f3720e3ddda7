"""Data-Juicer's recipe library, unchanged, through `raypress validate` (issue 19).

The 41 recipes of Data-Juicer's `configs/` are kept in tests/data/dj_recipes at a pinned commit
(SOURCE.md). The goal: every text-only recipe validates as it is, and a multimodal/generation one
fails only on ops raypress lists as "not available in raypress". The lists below are a ratchet:
what validated when they were last filled in must keep validating, and the counts may only grow;
move a recipe into them when it starts to pass. `bench/dj_recipes_validate.py` prints the full
classification (the test prints it too: `pytest -s`).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("dj_recipes_validate", REPO / "bench" / "dj_recipes_validate.py")
assert _spec is not None and _spec.loader is not None
bench = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = bench  # its dataclass looks itself up there
_spec.loader.exec_module(bench)

COMMIT = "c07c2d793cd85f7d5151ddc560fe92a0b6a0ba4b"
# The recipes that use image, video or generation ops; the other 34 are text-only.
MEDIA = {
    "data_juicer_recipes/data-juicer-sandbox-optimal.yaml",
    "data_juicer_recipes/data-juicer-sandbox-self-evolution.yaml",
    "data_juicer_recipes/general-video-refine-example.yaml",
    "data_juicer_recipes/img-diff-recipe.yaml",
    "data_juicer_recipes/llava-pretrain-refine.yaml",
    "data_juicer_recipes/sandbox/auto_prompt_optimization/dj_configs_prompt_generating.yaml",
    "data_juicer_recipes/sandbox/internvl_coco_caption/all_text_image_stats.yaml",
}
# Ratchet, filled from `bench/dj_recipes_validate.py` (before issue 19: none of them; 9 when the
# global keys and the missing ops were in; all 34 text-only ones once `tokenization: true` found its
# models locally, `accelerator: cuda` ran the Triton kernel and Hub datasets came from the cache).
VALIDATE_UNCHANGED = {
    "data_juicer_recipes/alpaca_cot/alpaca-cot-en-refine.yaml",
    "data_juicer_recipes/alpaca_cot/alpaca-cot-zh-refine.yaml",
    "data_juicer_recipes/github_code/redpajama-code-refine.yaml",
    "data_juicer_recipes/github_code/redpajama-stack-code-deduplicate.yaml",
    "data_juicer_recipes/github_code/stack-code-refine.yaml",
    "data_juicer_recipes/pile-europarl-refine.yaml",
    "data_juicer_recipes/pile-freelaw-refine.yaml",
    "data_juicer_recipes/pile-hackernews-refine.yaml",
    "data_juicer_recipes/pile-nih-refine.yaml",
    "data_juicer_recipes/pile-philpaper-refine.yaml",
    "data_juicer_recipes/pile-pubmed-abstract-refine.yaml",
    "data_juicer_recipes/pile-pubmed-central-refine.yaml",
    "data_juicer_recipes/pile-uspto-refine.yaml",
    "data_juicer_recipes/redpajama-arxiv-refine.yaml",
    "data_juicer_recipes/redpajama-book-refine.yaml",
    "data_juicer_recipes/redpajama-c4-refine.yaml",
    "data_juicer_recipes/redpajama-cc-2019-30-refine.yaml",
    "data_juicer_recipes/redpajama-cc-2020-05-refine.yaml",
    "data_juicer_recipes/redpajama-cc-2021-04-refine.yaml",
    "data_juicer_recipes/redpajama-cc-2022-05-refine.yaml",
    "data_juicer_recipes/redpajama-cc-2023-06-refine.yaml",
    "data_juicer_recipes/redpajama-pile-stackexchange-refine.yaml",
    "data_juicer_recipes/redpajama-wiki-refine.yaml",
    "demo/analyzer.yaml",
    "demo/dedup-ray-bts-gpu.yaml",
    "demo/dedup-ray-bts.yaml",
    "demo/dedup.yaml",
    "demo/process-huggingface.yaml",
    "demo/process.yaml",
    "reproduced_bloom/bloom-oscar.yaml",
    "reproduced_redpajama/redpajama-arxiv.yaml",
    "reproduced_redpajama/redpajama-books.yaml",
    "reproduced_redpajama/redpajama-code.yaml",
    "reproduced_redpajama/redpajama-stackexchange.yaml",
}
FAIL_ONLY_ON_UNAVAILABLE_OPS = set(MEDIA)  # all 7


@pytest.fixture(scope="module")
def outcomes() -> dict[str, "bench.Outcome"]:
    found = bench.classify_all()
    print("\n" + bench.report(found, show_problems=True))
    return {o.recipe: o for o in found}


def test_the_library_is_the_pinned_copy_with_its_licence():
    recipes = bench.recipe_files()
    assert len(recipes) == 41
    assert all("process" in yaml.safe_load(p.read_text()) for p in recipes)
    assert COMMIT in (bench.RECIPES / "SOURCE.md").read_text()
    assert "Apache License" in (bench.RECIPES / "LICENSE").read_text()


def test_every_text_only_recipe_validates(outcomes):
    assert {name for name, o in outcomes.items() if o.text_only} <= VALIDATE_UNCHANGED


def test_text_only_and_media_recipes_are_told_apart(outcomes):
    assert {name for name, o in outcomes.items() if not o.text_only} == MEDIA


def test_ratchet_recipes_that_validated_still_do(outcomes):
    # A recipe whose only problem is an extra this machine lacks (demo/analyzer.yaml's perplexity_filter
    # without kenlm) is right as written; which extras a machine has is not the recipe's business.
    ok = {name for name, o in outcomes.items() if o.outcome in ("ok", "needs_extra")}
    unavailable = {name for name, o in outcomes.items() if o.outcome == "unavailable"}
    assert not VALIDATE_UNCHANGED - ok, {n: outcomes[n].problems for n in VALIDATE_UNCHANGED - ok}
    lost = FAIL_ONLY_ON_UNAVAILABLE_OPS - unavailable - ok
    assert not lost, {n: outcomes[n].problems for n in lost}
    assert len(ok) >= len(VALIDATE_UNCHANGED)
    assert len((ok | unavailable) & MEDIA) >= len(FAIL_ONLY_ON_UNAVAILABLE_OPS)
    # A text-only recipe is never answered with "not available": its ops are raypress's to provide.
    assert not {n for n in unavailable if outcomes[n].text_only}


def test_a_missing_dataset_path_is_a_run_time_matter(tmp_path):
    """The recipes' placeholders (`/path/to/your/dataset`, `./demos/data/...`) do not exist here, and
    validate must not open input files: a recipe is checked on one machine and run where its data is."""
    from raypress.dag.validate import load_pipeline

    for dataset in ("/path/to/your/dataset", "./demos/data/demo-dataset.jsonl", str(tmp_path / "no.parquet")):
        assert not Path(dataset).exists() and not (tmp_path / dataset).exists()
        recipe = tmp_path / "recipe.yaml"
        recipe.write_text(yaml.safe_dump({"project_name": "p", "dataset_path": dataset, "np": 4,
                                          "export_path": "/path/to/your/dataset.jsonl",
                                          "process": [{"clean_email_mapper": None}]}))
        nodes = load_pipeline(recipe).nodes
        assert dataset in str(nodes["dataset"].raw_params) and "clean_email_mapper" in nodes


def test_the_cli_agrees(outcomes):
    """`raypress validate FILE` exits 0 exactly for the recipes classified as validating."""
    from raypress.cli import app

    runner = CliRunner()
    for name, o in outcomes.items():
        result = runner.invoke(app, ["validate", str(bench.RECIPES / name)])
        assert (result.exit_code == 0) == (o.outcome == "ok"), (name, result.output)
        if o.outcome == "ok":
            assert ": ok (" in result.output, (name, result.output)
