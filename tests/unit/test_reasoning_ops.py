"""Judges, policies (HTTP, actor timeouts), corpus generation, SFT texts and the report's table —
the pieces around the CoMCTS core, on real task families and a real HTTP server (no Ray)."""

from __future__ import annotations

import asyncio
import json
import random

import numpy as np
import pytest
import torch

from moe_fixtures import save_tiny_model_dir
from raypress.operators.reasoning.search.judges import CollectiveJudge, ExactStepJudge, ModelJudge, parse_verdicts
from raypress.operators.reasoning.policies.backends import ActorPolicy, OpenAIPolicy
from raypress.operators.reasoning.stats.bootstrap import bootstrap_interval
from raypress.operators.reasoning.collective_sft import sft_texts
from raypress.operators.reasoning.reasoning_report import markdown_table, summarise_run
from raypress.operators.reasoning.train_policies import PolicySpec, TrainPoliciesParams, policy_corpus, without_questions
from raypress.operators.reasoning.search.types import PolicyReply, Task

pytest.importorskip("reasoning_gym")
from raypress.operators.reasoning.tasks.catalog import get_family, make_tasks  # noqa: E402


def run(coro):
    return asyncio.run(coro)


class FixedPolicy:
    def __init__(self, name: str, text: str) -> None:
        self.name, self.text, self.prompts = name, text, []

    async def complete(self, prompt, max_tokens, temperature, seed=None):
        self.prompts.append(prompt)
        return PolicyReply(self.text, len(self.text.split()))


def test_exact_judge_scores_steps_with_the_family_checker():
    family = get_family("chain_arithmetic")
    task = make_tasks("chain_arithmetic", 1, seed=3)[0]
    steps, _ = family.worked_solution(task)
    scores, calls = run(ExactStepJudge(family).score_steps(task, [], steps))
    assert scores == [1.0] * len(steps) and calls == 0
    wrong = steps[0].rsplit("=", 1)[0] + "= 99999"
    scores, _ = run(ExactStepJudge(family).score_steps(task, [], [wrong] + steps[1:]))
    assert scores[0] == -1.0


def test_model_judge_parses_verdicts_and_costs_one_call():
    assert parse_verdicts("Step 2 is correct\nStep 3 is wrong\nStep 3 is correct", 1, 3) == [1.0, -1.0, 0.0]
    assert parse_verdicts("garbage", 0, 2) == [0.0, 0.0]
    family = get_family("chain_arithmetic")
    task = make_tasks("chain_arithmetic", 1, seed=3)[0]
    judge_policy = FixedPolicy("g", "Step 2 is correct\nStep 3 is wrong\n")
    scores, calls = run(ModelJudge(judge_policy, family).score_steps(task, ["a"], ["b", "c"]))
    assert scores == [1.0, -1.0] and calls == 1
    # the path, the header, the accepted earlier step's verdict: the policy continues at "Step 2"
    assert judge_policy.prompts[0] == family.prompt(task, ["a", "b", "c"]) + "Check:\nStep 1 is correct\n"
    collective = CollectiveJudge([ExactStepJudge(family), ModelJudge(FixedPolicy("g", "Step 1 is wrong\n"), family)])
    steps, _ = family.worked_solution(task)
    scores, calls = run(collective.score_steps(task, [], steps[:1]))
    assert scores == [0.0] and calls == 1  # (+1 + -1) / 2


class NeverAnswers:
    """An actor handle whose calls never finish (a hung model)."""

    class _Method:
        def remote(self, *args):
            return asyncio.get_running_loop().create_future()

    complete = _Method()


def test_a_hung_actor_call_times_out_as_a_failed_completion():
    out = run(ActorPolicy("slow", NeverAnswers(), timeout_s=0.05).complete("p", 4, 0.0))
    assert out.text == "" and out.error.startswith("timeout")


def test_openai_policy_against_a_real_server_and_a_dead_one(tmp_path):
    pytest.importorskip("uvicorn")
    from raypress.inference.engine import Engine
    from raypress.serving.openai_app import create_app
    from raypress.serving.uvicorn_thread import free_port, serve_in_thread

    torch.set_num_threads(1)
    engine = Engine.from_pretrained(save_tiny_model_dir(tmp_path / "m"), max_batch_size=4, max_len=96)
    with serve_in_thread(create_app(engine, "tiny")) as server:

        async def calls():
            policy = OpenAIPolicy("http", f"{server.url}/v1", "tiny", stop=["\n\n"])
            try:
                good = await policy.complete("The quick", 5, 0.0, seed=1)
                unknown = await OpenAIPolicy("x", server.url, "no-such-model").complete("x", 3, 0.0)
                return good, unknown
            finally:
                await policy.aclose()

        good, unknown = run(calls())
    engine.stop()
    assert good.error is None and 1 <= good.tokens <= 5
    assert unknown.error.startswith("HTTP 404")
    dead = run(OpenAIPolicy("dead", f"http://127.0.0.1:{free_port()}/v1", "m", timeout_s=2).complete("x", 3, 0.0))
    assert dead.text == "" and dead.error


def test_policy_corpus_follows_the_mix_and_is_deterministic():
    tasks = make_tasks("chain_arithmetic", 30, seed=1) + make_tasks("simple_equations", 30, seed=1)
    spec = PolicySpec(name="p", mix={"chain_arithmetic": 3, "simple_equations": 1}, seed=5)
    examples = policy_corpus(spec, tasks, 400)
    assert examples == policy_corpus(spec, tasks, 400)
    assert all(prompt.endswith("\nSolution:\n") and "Solution:" not in solution for prompt, solution in examples)
    texts = [prompt + solution for prompt, solution in examples]
    chain_share = sum("Answer:" in t and t.startswith(tuple(t_.question for t_ in tasks[:30])) for t in texts) / 400
    assert 0.65 < chain_share < 0.85
    assert all(t.count("\nSolution:\n") == 1 and "\nAnswer: " in t for t in texts)
    flawed = [q + a for q, a in policy_corpus(
        PolicySpec(name="f", mix={"chain_arithmetic": 1}, flawed_rate=1.0, seed=5), tasks, 20)]
    family = get_family("chain_arithmetic")
    by_question = {t.question: t for t in tasks}
    for text in flawed:
        question, solution = text.split("\nSolution:\n")
        steps, _ = family.split(solution)
        task = by_question[question]
        assert any(family.check_step(task, steps[:i], s) == -1 for i, s in enumerate(steps))
    with pytest.raises(ValueError, match="no input tasks"):
        policy_corpus(PolicySpec(name="c", mix={"countdown": 1}), tasks, 5)


def test_training_tasks_drop_evaluated_questions():
    """Small task spaces repeat questions across seeds: those in the search/held-out sets go."""
    easy = {"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 1}
    train = make_tasks("chain_arithmetic", 300, seed=1, **easy)
    heldout = make_tasks("chain_arithmetic", 50, seed=2, **easy)
    banned = {t.question for t in heldout}
    kept = without_questions(train, banned)
    assert 0 < len(kept) < len(train)  # this space (~400 questions) does repeat
    assert not {t.question for t in kept} & banned
    assert [t for t in train if t.question not in banned] == kept


def test_sft_texts_with_and_without_reflection():
    records = [{"messages": [{"role": "user", "content": "Q\nSolution:\n"}, {"role": "assistant", "content": "s\nAnswer: 1"}],
                "kind": "correct"},
               {"messages": [{"role": "user", "content": "Q\nSolution:\n"}, {"role": "assistant", "content": "x\nR\ns\nAnswer: 1"}],
                "kind": "reflective"}]
    rows = [{"sft": json.dumps(records)}, {"sft": "[]"}]
    texts, kinds = sft_texts(rows, include_reflection=True)
    assert texts == [("Q\nSolution:\n", "s\nAnswer: 1"), ("Q\nSolution:\n", "x\nR\ns\nAnswer: 1")]
    assert kinds == {"correct": 1, "reflective": 1}
    assert sft_texts(rows, include_reflection=False)[1] == {"correct": 1, "reflective": 0}


def test_bootstrap_interval_and_summary_table():
    rng = np.random.default_rng(0)
    low, high = bootstrap_interval(np.array([1.0] * 60 + [0.0] * 40), 4000, rng)
    assert 0.49 < low < 0.52 and 0.68 < high < 0.71  # normal approx: 0.6 ± 1.96·0.049
    assert bootstrap_interval(np.ones(10), 500, rng) == (1.0, 1.0)
    rows = [{"run": "r", "method": "comcts", "policies": '["a"]', "family": f, "solved": s, "calls": c,
             "rounds": r, "tokens": 10 * c, "failures": json.dumps({"a": 1}), "path_has_wrong_step": w,
             "reflective_path": None}
            for f, s, c, r, w in [("x", True, 2, 1, False), ("x", False, 20, 7, None), ("y", True, 6, 3, True)]]
    line = summarise_run(rows, 500, rng)
    assert line["solved"] == 2 and line["success_rate"] == pytest.approx(2 / 3)
    assert line["calls_mean"] == pytest.approx(28 / 3) and line["calls_mean_solved"] == 4.0
    assert line["rounds_mean_solved"] == 2.0 and line["failed_calls"] == {"a": 3}
    assert line["solved_with_wrong_step_rate"] == 0.5 and line["success_by_family"] == {"x": 0.5, "y": 1.0}
    # sound: solved by a path the checker fully accepts (only the first row)
    assert line["sound_success_rate"] == pytest.approx(1 / 3)
    assert line["sound_success_by_family"] == {"x": 0.5, "y": 0.0}
    assert 0.0 <= line["sound_ci95"][0] <= 1 / 3 <= line["sound_ci95"][1] <= 1.0
    table = markdown_table([line])
    assert "| r | comcts | a |  | 3 | 66.7% (" in table and "| 33.3% (" in table and "| 50.0% |" in table


def test_reasoning_families_round_trip_through_the_policy_prompt():
    rng = random.Random(0)
    for name in ("countdown", "chain_arithmetic", "simple_equations"):
        family = get_family(name)
        task = make_tasks(name, 3, seed=9)[rng.randrange(3)]
        steps, final = family.worked_solution(task)
        prompt = family.prompt(task, steps[:1])
        # countdown drops reasoning-gym's answer-format instructions (the text after a blank line)
        question = task.question.split("\n\n", 1)[0] if name == "countdown" else task.question
        assert prompt.startswith(question) and prompt.endswith(steps[0] + "\n")
        assert (name == "countdown") == (len(prompt) < len(task.question))


def test_local_mode_policies_train_one_at_a_time():
    spec = [{"name": "a", "mix": {"chain_arithmetic": 1}}]
    assert TrainPoliciesParams(policies=spec, num_workers=0, parallel=1).num_workers == 0
    with pytest.raises(ValueError, match="parallel 2 needs num_workers >= 1: Ray Train's local mode"):
        TrainPoliciesParams(policies=spec, num_workers=0, parallel=2)
