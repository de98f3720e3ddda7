"""How Mulberry is measured here: collective model judging (scores, error position, budget with
judge calls, agreement with the exact checker), best-of-n at equal cost, the SFT control's
compute, the leakage check, paired-bootstrap verdicts. Hand-computed values next to assertions."""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest

from raypress.operators.reasoning.stats.bootstrap import paired_bootstrap, verdict
from raypress.operators.reasoning.collective_sft import CollectiveSFTParams, mixed_corpus, trainer_params
from raypress.operators.reasoning.search.comcts import JudgeAudit, SearchParams, best_of_n, comcts, independent_sampling, precision_recall
from raypress.operators.reasoning.search.judges import ModelJudge
from raypress.operators.reasoning.question_overlap import QuestionOverlap, QuestionOverlapParams, overlapping
from raypress.operators.reasoning.reasoning_report import ClaimSpec, judge_agreement, judge_claim
from raypress.operators.reasoning.search.types import PolicyReply
from test_comcts import FAMILY, TASK, ScriptedPolicy


def run(coro):
    return asyncio.run(coro)


class VerdictPolicy:
    """A scripted judge model: reads the steps of a judging prompt and writes "Step k is
    correct/wrong" from a table of step text -> verdict (default correct)."""

    def __init__(self, name: str, wrong: set[str]):
        self.name, self.wrong, self.calls = name, wrong, 0

    async def complete(self, prompt: str, max_tokens: int, temperature: float, seed: int | None = None) -> PolicyReply:
        self.calls += 1
        assert temperature == 0.0
        path, checked = prompt.split("Solution:\n", 1)[1].split("Check:\n", 1)
        steps = [s for s in path.splitlines() if s]
        done = len([s for s in checked.splitlines() if s])  # earlier steps, already written correct
        text = "".join(f"Step {i + 1} is {'wrong' if steps[i] in self.wrong else 'correct'}\n"
                       for i in range(done, len(steps)))
        return PolicyReply(text, 5 * (len(steps) - done))


def three_judges(*wrong_sets: set[str]) -> list[ModelJudge]:
    return [ModelJudge(VerdictPolicy(f"J{i}", w), FAMILY) for i, w in enumerate(wrong_sets)]


def test_collective_score_and_error_position_with_scripted_model_judges():
    # s1: all correct (R = 1); s2: one of three says wrong (R = 1/3); s3: two say wrong (R = -1/3) -> cut at s3
    judges = three_judges({"s3"}, {"s2", "s3"}, set())
    policy = ScriptedPolicy("A", ["s1\ns2\ns3\ns4\nAnswer: 7"])
    res = run(comcts(TASK, FAMILY, [policy], judges, SearchParams(budget=4)))
    kept = [n for n in res.tree.nodes[1:] if not n.pruned]
    assert [(n.text, n.score) for n in kept] == [("s1", 1.0), ("s2", pytest.approx(1 / 3))]
    assert kept[1].judge_scores == [1.0, -1.0, 1.0]
    (cut,) = [n for n in res.tree.nodes if n.pruned]
    assert (cut.text, cut.score, cut.parent) == ("s3", pytest.approx(-1 / 3), kept[-1].id)
    # one policy call + one call per judge = 4 = the budget: no second round
    assert (res.policy_calls, res.judge_calls, res.calls, res.rounds) == (1, 3, 4, 1)


def test_budget_counts_judge_calls_and_never_overshoots():
    judges = three_judges({"wrong"}, {"wrong"}, set())
    policies = [ScriptedPolicy(n, lambda prefix, n=n: f"{n}{len(prefix)}\nwrong\nAnswer: 7") for n in "AB"]
    res = run(comcts(TASK, FAMILY, policies, judges, SearchParams(budget=11)))
    # each candidate costs 1 + 3: round 1 both (8), then 3 left < 4: stop, budget not exceeded
    assert (res.policy_calls, res.judge_calls, res.calls, res.rounds) == (2, 6, 8, 1)
    assert [j.policy.calls for j in judges] == [2, 2, 2]
    # independent sampling at the same budget spends every call on policies (no judges)
    sampled = run(independent_sampling(TASK, FAMILY, [ScriptedPolicy("A", lambda p: "x\nAnswer: 8")],
                                       SearchParams(budget=11)))
    assert (sampled.policy_calls, sampled.judge_calls) == (11, 0)


def test_best_of_n_reranks_by_the_judges_without_the_ground_truth():
    # three samples: a wrong answer the judges like less, the right one, a wrong one judged clean
    samples = ["bad1\nAnswer: 8", "ok\nAnswer: 7", "fine\nfine2\nAnswer: 9"]
    judges = three_judges({"bad1"}, {"bad1", "ok"}, set())  # ok: R = 1/3, fine/fine2: R = 1
    res = run(best_of_n(TASK, FAMILY, [ScriptedPolicy("A", list(samples))], judges, SearchParams(budget=12)))
    assert (res.policy_calls, res.judge_calls, res.calls) == (3, 9, 12)
    assert res.final_answer == "9" and not res.solved  # the judges' pick, not the right answer
    judges = three_judges({"bad1", "fine2"}, {"fine2"}, set())  # fine2 cut (R = -1/3): ok (R = 1) wins
    res = run(best_of_n(TASK, FAMILY, [ScriptedPolicy("A", list(samples))], judges, SearchParams(budget=12)))
    assert res.final_answer == "7" and res.solved and res.best_path.steps == ["ok"]


def test_judge_audit_precision_recall_of_wrong():
    # the exact checker (FakeFamily) marks steps containing "bad" wrong, and every later step too
    audit = JudgeAudit()
    judges = three_judges({"bad"}, {"ok1"}, set())
    policy = ScriptedPolicy("A", ["ok1\nbad\nafter\nAnswer: 7"])
    run(comcts(TASK, FAMILY, [policy], judges, SearchParams(budget=4), audit=audit))
    # exact: ok1 correct, bad wrong, after wrong
    assert audit.counts["model:J0"] == {"tp": 1, "fp": 0, "fn": 1, "tn": 1}  # says wrong: bad
    assert audit.counts["model:J1"] == {"tp": 0, "fp": 1, "fn": 2, "tn": 0}  # says wrong: ok1
    # collective: ok1 1/3, bad 1/3, after 1: never below 0
    assert audit.counts["collective"] == {"tp": 0, "fp": 0, "fn": 2, "tn": 1}
    pr = precision_recall(audit.counts["model:J0"])
    assert pr["precision_wrong"] == 1.0 and pr["recall_wrong"] == 0.5 and pr["agreement"] == pytest.approx(2 / 3)
    assert precision_recall(audit.counts["collective"])["precision_wrong"] is None
    rows = [{"judge_audit": json.dumps(audit.counts)}, {"judge_audit": json.dumps(audit.counts)}]
    assert judge_agreement(rows)["model:J0"]["steps"] == 6


def test_control_matches_the_sft_compute():
    p = CollectiveSFTParams(max_steps=300, batch_size=8, lr=5e-4, original_ratio=1.5)
    comcts_run, control = trainer_params(p, "/m"), trainer_params(p.model_copy(update={"mode": "control"}), "/m")
    assert comcts_run == control and control.max_steps == 300 and control.batch_size == 8
    records = [(f"q{i}", "s") for i in range(4)]
    original = [(f"o{i}", "t") for i in range(20)]
    mixed = mixed_corpus(records, original, "comcts", 1.5)
    ctrl = mixed_corpus(records, original, "control", 1.5)
    assert len(mixed) == len(ctrl) == 4 + 6  # round(4 · 1.5) originals mixed in
    assert mixed[:4] == records and all(q.startswith("o") for q, _ in ctrl)
    with pytest.raises(ValueError, match="10 original examples needed, 3 given"):
        mixed_corpus(records, original[:3], "control", 1.5)


class _Rows:
    def __init__(self, rows):
        self.rows = rows

    def select_columns(self, cols):
        return _Rows([{c: r[c] for c in cols} for r in self.rows])

    def take_all(self):
        return list(self.rows)


class _Data:
    def __init__(self, rows):
        self.ds = _Rows(rows)


def test_leakage_check_fails_a_planted_overlap_naming_the_ids(tmp_path):
    from raypress.operators.base import RunContext

    held = [{"id": "h1", "question": "1 + 2 ="}, {"id": "h2", "question": "3 + 4 ="}, {"id": "h3", "question": "5 ="}]
    trained = [{"id": "t9", "question": " 3 + 4 = "}, {"id": "t8", "question": "9 ="}]
    assert overlapping(held, trained) == [("h2", "t9")]
    ctx = RunContext(run_dir=str(tmp_path), node_id="leakage")
    stage = QuestionOverlap(QuestionOverlapParams())
    with pytest.raises(ValueError, match=r"1 evaluated question.*\['h2'\].*\['t9'\]"):
        stage.run({"data": _Data(held), "against": _Data(trained)}, ctx)
    report = stage.run({"data": _Data(held), "against": _Data(trained[1:])}, ctx)
    assert report.metrics["overlap"] == 0 and report.metrics["evaluated"] == 3


def test_paired_bootstrap_verdicts():
    rng = np.random.default_rng(0)
    a = np.array([1] * 40 + [0] * 10 + [1] * 10 + [0] * 40)  # a right where b wrong on 10, never the reverse
    b = np.array([1] * 40 + [0] * 10 + [0] * 10 + [0] * 40)
    diff, low, high = paired_bootstrap(a, b, 2000, rng)
    assert diff == pytest.approx(0.1) and 0.04 <= low <= high <= 0.17 and verdict(low, high) == "holds"
    assert verdict(*paired_bootstrap(b, a, 2000, rng)[1:]) == "fails"
    assert verdict(*paired_bootstrap(a, a, 200, rng)[1:]) == "inconclusive"
    claim = judge_claim(ClaimSpec(claim="x beats y", better="x", other="y"), {"q1": 1, "q2": 1, "q3": 0},
                        {"q1": 0, "q2": 1, "q4": 1}, 500, rng)
    assert claim["paired"] == 2 and claim["better_rate"] == 1.0 and claim["other_rate"] == 0.5


def test_stage_chooses_best_on_dev_and_charges_collective_judges(tmp_path):
    pytest.importorskip("reasoning_gym")
    from raypress.operators.base import RunContext
    from raypress.operators.reasoning.comcts_search import ComctsSearch, SearchStageParams
    from raypress.operators.reasoning.tasks.catalog import make_tasks
    from reasoning_fixtures import RuleSolver

    tasks = make_tasks("chain_arithmetic", 6, seed=4)
    dev = make_tasks("chain_arithmetic", 6, seed=5)
    # on dev "good" is right, "sloppy" mostly wrong: @best must be "good" whatever the searched set says
    policies = {"sloppy": RuleSolver("sloppy", tasks + dev, error_rate=0.9, seed=2),
                "good": RuleSolver("good", tasks + dev, error_rate=0.0, seed=1)}
    runs = [{"name": "mcts-best", "method": "comcts", "policies": ["@best"]},
            {"name": "bon", "method": "best_of_n", "policies": ["sloppy", "good"]},
            {"name": "comcts-2", "method": "comcts", "policies": ["sloppy", "good"]},
            {"name": "oracle judge", "method": "comcts", "policies": ["sloppy", "good"], "judges": ["exact"]}]
    stage = ComctsSearch(SearchStageParams(runs=runs, search={"budget": 9, "max_tokens": 64}, seed=0))
    events: list[dict] = []
    ctx = RunContext(run_dir=str(tmp_path), node_id="search", emit=events.append)
    rows = asyncio.run(stage._all_runs(tasks, policies, ctx, dev))
    (best,) = [e for e in events if e["event"] == "best_on_dev"]
    assert best["best"] == "good" and best["accuracy"]["good"] == 1.0
    by_run = {r: [x for x in rows if x["run"] == r] for r in ("mcts-best", "bon", "comcts-2", "oracle judge")}
    assert json.loads(by_run["mcts-best"][0]["policies"]) == ["good"]
    assert all(r["calls"] <= 9 for r in rows)
    # collective: 2 distinct policies judge each candidate (1 + 2 calls); the oracle judge is free
    assert all(r["judge_calls"] == 2 * r["policy_calls"] for r in by_run["comcts-2"] + by_run["bon"])
    assert all(r["judge_calls"] == 0 for r in by_run["oracle judge"])
    assert all(r["judge_calls"] == r["policy_calls"] for r in by_run["mcts-best"])  # judged by itself
    audit = json.loads(by_run["comcts-2"][0]["judge_audit"])
    assert set(audit) == {"model:sloppy", "model:good", "collective"}
    assert json.loads(by_run["oracle judge"][0]["judge_audit"]) == {}
