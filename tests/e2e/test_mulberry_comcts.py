"""pipelines/mulberry_comcts.yaml end to end on a small problem (two-term single-digit chain
arithmetic, two policies, short training): tasks -> policies -> CoMCTS and every baseline ->
collective SFT (with and without reflection) -> held-out evaluation -> the report table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from raypress.dag.runner import run_pipeline

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1200)]
REPO = Path(__file__).resolve().parents[2]
EASY = "{chain_arithmetic: {min_terms: 2, max_terms: 2, min_digits: 1, max_digits: 1}}"


def test_mulberry_pipeline_small(ray_session, tmp_path):
    pytest.importorskip("reasoning_gym")
    overrides = [f"{node}.{key}" for node in ("train_tasks", "search_tasks", "heldout_tasks")
                 for key in ("families=[chain_arithmetic]", f"difficulty={EASY}")]
    overrides += [
        "train_tasks.n_per_family=400", "search_tasks.n_per_family=10", "heldout_tasks.n_per_family=10",
        # step-bound training: a time budget gave weaker policies on a loaded machine (nothing solved)
        "policies.examples_per_policy=3000", "policies.max_steps=600", "policies.max_minutes=10",
        "policies.batch_size=16", "policies.hidden_size=64",
        "policies.intermediate_size=128", "policies.num_hidden_layers=2", "policies.context_length=64",
        "policies.parallel=2",  # two one-worker trainings overlap their Ray Train start-ups
        # two policies instead of three keeps the test's Ray Train start-ups (~20 s each) down
        "policies.policies=[{name: arith, mix: {chain_arithmetic: 1}, seed: 1}, "
        "{name: equations, mix: {chain_arithmetic: 1}, seed: 2, flawed_rate: 0.3}]",
        "search.runs=[{name: direct-arith, method: direct, policies: [arith]}, "
        "{name: direct-equations, method: direct, policies: [equations]}, "
        "{name: independent-2, method: independent, policies: [arith, equations]}, "
        "{name: mcts-best, method: comcts, policies: ['@best']}, "
        "{name: comcts-2-copies-of-best, method: comcts, policies: ['@best', '@best']}, "
        "{name: comcts-1, method: comcts, policies: [arith]}, "
        "{name: comcts-2, method: comcts, policies: [arith, equations]}]",
        "search.search={budget: 8, max_tokens: 24}", "report.ablation=[comcts-1, comcts-2]",
        "sft.runs=[comcts-2]", "sft_reflection.runs=[comcts-2]",
        "sft.max_steps=20", "sft_reflection.max_steps=20", "sft.max_minutes=5", "sft_reflection.max_minutes=5",
        "sft.num_workers=0", "sft_reflection.num_workers=0",  # Ray Train local mode: no actors to start
        "settings.concurrent_steps=2"]  # eval_before beside the search, each SFT's evaluation beside the other SFT
    events: list[dict] = []
    ledger = run_pipeline(str(REPO / "pipelines" / "mulberry_comcts.yaml"), run_dir=str(tmp_path / "run"),
                          overrides=overrides, on_event=events.append)
    assert ledger["adds_up"], ledger["problems"]
    nodes = ledger["nodes"]
    report = json.loads(Path(nodes["report"]["artifact"]).read_text())
    table = {line["run"]: line for line in report["table"]}
    assert set(table) == {"direct-arith", "direct-equations", "independent-2", "mcts-best",
                          "comcts-2-copies-of-best", "comcts-1", "comcts-2"}
    for line in table.values():
        assert line["questions"] == 10 and 0 <= line["ci95"][0] <= line["success_rate"] <= line["ci95"][1] <= 1
        assert line["calls_mean"] <= 8
    assert table["direct-arith"]["calls_mean"] == 1
    assert [a["run"] for a in report["ablation"]] == ["comcts-1", "comcts-2"]
    assert table["comcts-2-copies-of-best"]["policies"] == [table["mcts-best"]["policies"][0]] * 2
    assert set(report["evaluation"]) == {"before", "after", "after_reflection"}
    assert Path(report["markdown"]).read_text().startswith("| run | method |")
    sft_events = {e["node"]: e for e in events if e.get("event") == "sft_corpus"}  # the two SFTs run at once
    assert set(sft_events) == {"sft", "sft_reflection"} and sft_events["sft"]["reflective"] == 0
