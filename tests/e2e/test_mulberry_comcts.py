"""pipelines/mulberry_comcts.yaml end to end on a small problem (two-term single-digit chain
arithmetic, two policies that also learn to judge, short training): disjoint task sets and the
leakage check -> policies -> CoMCTS with collective judges and every baseline (best-of-n, oracle
judge) -> collective SFT of both policies (with and without reflection) and the control ->
held-out evaluation -> the report with judge agreement and verdicts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from raypress.dag.runner import run_pipeline

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1200)]
REPO = Path(__file__).resolve().parents[2]
EASY = "{chain_arithmetic: {min_terms: 2, max_terms: 2, min_digits: 1, max_digits: 1}}"
RUNS = ["direct-arith", "direct-equations", "independent-2", "best-of-n", "mcts-best", "comcts-2-copies-of-best",
        "comcts-1", "comcts-2", "oracle judge"]


def test_mulberry_pipeline_small(ray_session, tmp_path):
    pytest.importorskip("reasoning_gym")
    overrides = [f"{node}.{key}" for node in ("train_raw", "search_raw", "dev_raw", "heldout_tasks")
                 for key in ("families=[chain_arithmetic]", f"difficulty={EASY}")]
    overrides += [
        "train_raw.n_per_family=400", "search_raw.n_per_family=10", "heldout_tasks.n_per_family=10",
        "dev_raw.n_per_family=10",
        # step-bound training: a time budget gave weaker policies on a loaded machine (nothing solved)
        "policies.examples_per_policy=3000", "policies.max_steps=600", "policies.max_minutes=10",
        "policies.batch_size=16", "policies.hidden_size=64",
        "policies.intermediate_size=128", "policies.num_hidden_layers=2", "policies.context_length=96",
        "policies.parallel=2",  # two one-worker trainings overlap their Ray Train start-ups
        "policies.policies=[{name: arith, mix: {chain_arithmetic: 1}, seed: 1}, "
        "{name: equations, mix: {chain_arithmetic: 1}, seed: 2, flawed_rate: 0.3}]",
        "search.runs=[{name: direct-arith, method: direct, policies: [arith]}, "
        "{name: direct-equations, method: direct, policies: [equations]}, "
        "{name: independent-2, method: independent, policies: [arith, equations]}, "
        "{name: best-of-n, method: best_of_n, policies: [arith, equations]}, "
        "{name: mcts-best, method: comcts, policies: ['@best']}, "
        "{name: comcts-2-copies-of-best, method: comcts, policies: ['@best', '@best']}, "
        "{name: comcts-1, method: comcts, policies: [arith], judges: ['policy:arith', 'policy:equations']}, "
        "{name: comcts-2, method: comcts, policies: [arith, equations]}, "
        "{name: oracle judge, method: comcts, policies: [arith, equations], judges: [exact]}]",
        "search.search={budget: 12, max_tokens: 24}", "report.ablation=[comcts-1, comcts-2]",
        "report.claims=[{claim: collective beats single, better: comcts-2, other: mcts-best}, "
        "{claim: search beats best-of-n, better: comcts-2, other: best-of-n}, "
        "{claim: sft beats control, better: 'eval:after', other: 'eval:control'}]",
        # SFT on CoMCTS paths of two runs: with these tiny policies as judges, comcts-2 alone solved
        # 0-6 of the 10 questions over eight runs (training is not bit-reproducible), and a run
        # that solved none left the SFT nodes nothing to learn from; the oracle-judged run solves 8-9
        *[f"{n}.{k}" for n in ("sft", "sft_reflection", "sft_control")
          for k in ("runs=[comcts-2, 'oracle judge']", "max_steps=20", "max_minutes=5", "num_workers=0",
                    "parallel=1")],
        "settings.concurrent_steps=2"]
    events: list[dict] = []
    ledger = run_pipeline(str(REPO / "pipelines" / "mulberry_comcts.yaml"), run_dir=str(tmp_path / "run"),
                          overrides=overrides, on_event=events.append)
    assert ledger["adds_up"], ledger["problems"]
    nodes = ledger["nodes"]
    report = json.loads(Path(nodes["report"]["artifact"]).read_text())
    table = {line["run"]: line for line in report["table"]}
    assert set(table) == set(RUNS)
    for line in table.values():
        assert line["questions"] == table["direct-arith"]["questions"] > 0  # the same questions for every run
        assert 0 <= line["ci95"][0] <= line["success_rate"] <= line["ci95"][1] <= 1
        assert line["calls_mean"] <= 12  # judge calls included, never over the budget
    assert table["direct-arith"]["calls_mean"] == 1
    assert table["comcts-2"]["judge_calls_mean"] > 0 and table["oracle judge"]["judge_calls_mean"] == 0
    assert "collective" in table["comcts-2"]["judge_agreement"]
    assert [a["run"] for a in report["ablation"]] == ["comcts-1", "comcts-2"]
    assert set(report["evaluation"]) == {"before", "after", "after_reflection", "control"}
    assert report["leakage_overlap"] == 0
    assert [c["verdict"] in ("holds", "fails", "inconclusive") for c in report["claims"]] == [True] * 3
    assert set(report["sft_steps"]["control"].values()) == {20} == set(report["sft_steps"]["after"].values())
    assert any(e.get("event") == "best_on_dev" for e in events)
    sft_events = [e for e in events if e.get("event") == "sft_corpus"]
    assert {(e["node"], e["policy"]) for e in sft_events} == {
        (n, p) for n in ("sft", "sft_reflection", "sft_control") for p in ("arith", "equations")}
    assert all(e["reflective"] == 0 for e in sft_events if e["node"] == "sft")
