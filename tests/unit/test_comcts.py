"""CoMCTS core: the four operations on hand-built trees, budget accounting, failures, baselines.

Expected values are computed by hand (written next to each assertion)."""

from __future__ import annotations

import asyncio
import json
from typing import Callable

import pytest

from raypress.operators.reasoning.search.comcts import (
    SearchParams,
    collective_scores,
    comcts,
    direct,
    first_below,
    independent_sampling,
)
from raypress.operators.reasoning.search.tree import Tree, backpropagate, select
from raypress.operators.reasoning.search.types import ANSWER_PREFIX, PolicyReply, Task

TASK = Task(id="q1", family="fake", question="make 7", answer="7")


class FakeFamily:
    """Steps are non-blank lines, ``Answer: x`` ends; a step containing "bad" is wrong by the checker,
    one containing "?" is unknown to it."""

    name = "fake"

    def prompt(self, task: Task, steps: list[str]) -> str:
        return f"Q: {task.question}\nSolution:\n" + "".join(f"{s}\n" for s in steps)

    def split(self, text: str) -> tuple[list[str], str | None]:
        steps: list[str] = []
        for line in text.splitlines():
            line = line.strip()
            if line.startswith(ANSWER_PREFIX):
                return steps, line[len(ANSWER_PREFIX) :].strip()
            if line:
                steps.append(line)
        return steps, None

    def score(self, task: Task, final_answer: str) -> bool:
        return final_answer.strip() == task.answer

    def check_step(self, task: Task, previous: list[str], step: str) -> int | None:
        if "?" in step:
            return None
        return -1 if "bad" in step else 1


FAMILY = FakeFamily()


def prefix_of(prompt: str) -> list[str]:
    """The steps a FakeFamily prompt already holds."""
    return [line for line in prompt.split("Solution:\n", 1)[1].splitlines() if line]


class ScriptedPolicy:
    """Answers from a script (a list consumed in order, or a function of the prompt's prefix)."""

    def __init__(self, name: str, script: list[str | PolicyReply] | Callable[[list[str]], str | PolicyReply]):
        self.name = name
        self.script = script
        self.prompts: list[str] = []
        self.temperatures: list[float] = []
        self.seeds: list[int | None] = []

    async def complete(self, prompt: str, max_tokens: int, temperature: float, seed: int | None = None) -> PolicyReply:
        self.prompts.append(prompt)
        self.temperatures.append(temperature)
        self.seeds.append(seed)
        out = self.script(prefix_of(prompt)) if callable(self.script) else self.script.pop(0)
        return out if isinstance(out, PolicyReply) else PolicyReply(text=out, tokens=len(out.split()))


class TableJudge:
    """Scores a step from a table by its text (default +1); ``calls`` model calls per scoring."""

    def __init__(self, name: str, table: dict[str, float] | None = None, calls: int = 0):
        self.name = name
        self.table = table or {}
        self.calls = calls
        self.calls_per_path = calls  # what the search reserves from the budget per candidate
        self.seen: list[tuple[list[str], list[str]]] = []

    async def score_steps(self, task: Task, previous: list[str], steps: list[str]) -> tuple[list[float], int]:
        self.seen.append((previous, steps))
        return [self.table.get(s, 1.0) for s in steps], self.calls


def run(coro):
    return asyncio.run(coro)


# ---------------------------------------------------------------- backpropagation


def _root_with_x() -> tuple[Tree, int]:
    """root -> x (R = 1) after round 1's backprop: x V=1 N=1, root V=(0·0+1)/(0+1)=1, N=1."""
    tree = Tree("q")
    (x,) = tree.add_path(0, ["x"], [1.0], "p")
    backpropagate(tree, 0, [[x]])
    assert (tree.root.value, tree.root.visits) == (1.0, 1)
    return tree, x.id


def test_backprop_two_children():
    tree, x = _root_with_x()
    p = tree.add_path(x, ["p"], [1.0], "A")
    q = tree.add_path(x, ["q"], [0.0], "B")
    backpropagate(tree, x, [p, q])
    # x: (1·1 + 1 + 0)/(1 + 2) = 2/3, N = 3; root likewise (1·1 + 1)/(1 + 2) = 2/3, N = 3
    assert tree[x].value == pytest.approx(2 / 3) and tree[x].visits == 3
    assert tree.root.value == pytest.approx(2 / 3) and tree.root.visits == 3
    assert (p[0].value, p[0].visits, q[0].value, q[0].visits) == (1.0, 1, 0.0, 1)


def test_backprop_three_children():
    tree, x = _root_with_x()
    paths = [tree.add_path(x, [t], [r], "A") for t, r in (("a", 1.0), ("b", 0.0), ("c", 0.5))]
    backpropagate(tree, x, paths)
    # x: (1·1 + 1.5)/(1 + 3) = 0.625, N = 4; root the same
    assert (tree[x].value, tree[x].visits) == (pytest.approx(0.625), 4)
    assert (tree.root.value, tree.root.visits) == (pytest.approx(0.625), 4)


def test_backprop_two_step_chain():
    tree, x = _root_with_x()
    chain = tree.add_path(x, ["a", "b"], [1.0, 0.5], "A")
    other = tree.add_path(x, ["c"], [0.0], "B")
    backpropagate(tree, x, [chain, other])
    a, b = chain
    # inside the chain: a ← (1·1 + R_b 0.5)/2 = 0.75, N = 2; b untouched
    assert (a.value, a.visits) == (pytest.approx(0.75), 2)
    assert (b.value, b.visits) == (0.5, 1)
    # x and root: Σ R of x's new children = R_a + R_c = 1, 2 children: (1·1 + 1)/3 = 2/3, N = 3
    assert (tree[x].value, tree[x].visits) == (pytest.approx(2 / 3), 3)
    assert (tree.root.value, tree.root.visits) == (pytest.approx(2 / 3), 3)
    assert [n.depth for n in (tree[x], a, b)] == [1, 2, 3]
    assert tree.steps_to(b.id) == ["x", "a", "b"]


def test_backprop_chain_uses_child_score_not_value():
    tree, x = _root_with_x()
    a, b, c = tree.add_path(x, ["a", "b", "c"], [1.0, 0.0, 1.0], "A")
    backpropagate(tree, x, [[a, b, c]])
    # b ← (1·0 + R_c 1)/2 = 0.5; a ← (1·1 + R_b 0)/2 = 0.5 (R_b, not b's updated V); x ← (1·1 + 1)/2 = 1
    assert [(n.value, n.visits) for n in (a, b, c)] == [(0.5, 2), (0.5, 2), (1.0, 1)]
    assert (tree[x].value, tree[x].visits) == (1.0, 2)


# ---------------------------------------------------------------- selection


def test_ucb_values_and_choice():
    tree, x = _root_with_x()
    p = tree.add_path(x, ["p"], [1.0], "A")
    q = tree.add_path(x, ["q"], [0.0], "B")
    backpropagate(tree, x, [p, q])
    # N(x) = 3: 0.5·sqrt(ln 3 / 2) = 0.3705760
    assert tree.ucb(p[0].id, 0.5) == pytest.approx(1.3705760, abs=1e-6)
    assert tree.ucb(q[0].id, 0.5) == pytest.approx(0.3705760, abs=1e-6)
    assert select(tree, p + q, 0.5, max_depth=16) == p[0].id


def test_ucb_exploration_beats_value():
    tree = Tree("q")
    tree.root.visits = 4
    (a,) = tree.add_path(0, ["a"], [0.5], "A")
    (b,) = tree.add_path(0, ["b"], [0.6], "B")
    b.visits = 3
    # a: 0.5 + 0.5·sqrt(ln 4 / 2) = 0.916277; b: 0.6 + 0.5·sqrt(ln 4 / 4) = 0.894353
    assert tree.ucb(a.id) == pytest.approx(0.916277, abs=1e-6)
    assert tree.ucb(b.id) == pytest.approx(0.894353, abs=1e-6)
    assert select(tree, [b, a], 0.5, 16) == a.id


def test_select_tie_goes_to_earlier_node():
    tree = Tree("q")
    first = tree.add_path(0, ["a"], [1.0], "A")
    second = tree.add_path(0, ["b"], [1.0], "B")
    backpropagate(tree, 0, [first, second])
    assert tree.ucb(first[0].id) == tree.ucb(second[0].id)
    assert select(tree, second + first, 0.5, 16) == first[0].id


def test_select_fallbacks_depth_and_exhausted():
    tree = Tree("q")
    chain = tree.add_path(0, ["a", "b"], [0.0, 1.0], "A")
    backpropagate(tree, 0, [chain])
    # b (depth 2) is not selectable at max_depth 2; a (depth 1) is
    assert select(tree, chain[1:], 0.5, max_depth=2) == chain[0].id  # falls back to all nodes
    assert select(tree, chain, 0.5, max_depth=16) == chain[1].id  # b: V 1 beats a: V 0.5
    chain[0].exhausted = True
    assert select(tree, [], 0.5, max_depth=2) == 0  # nothing selectable: the root


# ---------------------------------------------------------------- error positioning, collective score


def test_first_below_and_collective_mean():
    assert first_below([1, 0, -1, 1], 0.0) == 2
    assert first_below([1, 0, 0.5], 0.0) is None
    assert collective_scores([[1, 1], [-1, 1], [0, -1]]) == [0.0, pytest.approx(1 / 3)]


def test_path_cut_before_first_negative_step():
    judge = TableJudge("j", {"s1": 1, "s2": 0, "s3": -1, "s4": 1})
    policy = ScriptedPolicy("A", ["s1\ns2\ns3\ns4\nAnswer: 7"])
    res = run(comcts(TASK, FAMILY, [policy], [judge], SearchParams(budget=1)))
    kept = [n for n in res.tree.nodes[1:] if not n.pruned]
    assert [n.text for n in kept] == ["s1", "s2"]
    assert [n.score for n in kept] == [1.0, 0.0]
    # the step it was cut at stays as a pruned child of the last kept step (reflection's negative)
    pruned = [n for n in res.tree.nodes if n.pruned]
    assert [(n.text, n.score, n.parent) for n in pruned] == [("s3", -1.0, kept[-1].id)]
    assert res.tree.root.visits == 1 and res.tree[1].visits == 2  # pruned steps are not backpropagated
    assert not res.solved and res.final_answer is None and res.best_path is None
    assert judge.seen == [([], ["s1", "s2", "s3", "s4"])]


def test_path_without_negative_step_but_wrong_answer_is_discarded():
    policy = ScriptedPolicy("A", ["s1\ns2\nAnswer: 8", "s1\nAnswer: 7"])
    res = run(comcts(TASK, FAMILY, [policy], [TableJudge("j")], SearchParams(budget=2)))
    # round 1 adds nothing (root exhausted, selected again); round 2 solves from the root
    assert res.rounds == 2 and res.solved
    assert [n.text for n in res.tree.nodes[1:]] == ["s1"] and res.tree[1].round == 2
    assert res.tree.root.exhausted


def test_three_judges_collective_score_on_nodes():
    judges = [TableJudge("j1", {"s": 1}), TableJudge("j2", {"s": -1}), TableJudge("j3", {"s": 0})]
    policy = ScriptedPolicy("A", ["s\nAnswer: 7"])
    res = run(comcts(TASK, FAMILY, [policy], judges, SearchParams(budget=1)))
    node = res.tree[1]
    assert node.score == 0.0 and node.judge_scores == [1.0, -1.0, 0.0]
    assert res.solved  # 0 is not below t = 0
    judges[2].table["s"] = -1  # mean (1 - 1 - 1)/3 < 0: cut at the first step
    res = run(comcts(TASK, FAMILY, [ScriptedPolicy("A", ["s\nAnswer: 7"])], judges, SearchParams(budget=1)))
    assert not res.solved and [n.pruned for n in res.tree.nodes[1:]] == [True]
    assert res.tree.root.visits == 0


# ---------------------------------------------------------------- budget, stopping, failures


def _cut_policy(name: str) -> ScriptedPolicy:
    """Always writes one good step then a bad one (never solves)."""
    return ScriptedPolicy(name, lambda prefix: f"{name}{len(prefix)}\nwrong\nAnswer: 7")


def test_budget_partial_round_and_tokens():
    policies = [_cut_policy(n) for n in "ABC"]
    judge = TableJudge("checker", {"wrong": -1})
    res = run(comcts(TASK, FAMILY, policies, [judge], SearchParams(budget=5)))
    assert [len(p.prompts) for p in policies] == [2, 2, 1]  # round 1: 3 calls, round 2: 2
    assert (res.rounds, res.policy_calls, res.judge_calls, res.calls) == (2, 5, 0, 5)
    assert [n.round for n in res.tree.nodes[1:] if not n.pruned] == [1, 1, 1, 2, 2]
    assert sum(n.pruned for n in res.tree.nodes) == 5  # each call's "wrong" step, kept for reflection
    assert res.tokens == 5 * 4  # each continuation is 4 whitespace tokens
    assert not res.solved and res.failures == {}


def test_model_judge_calls_are_charged():
    policies = [_cut_policy(n) for n in "ABC"]
    judges = [TableJudge("checker", {"wrong": -1}), TableJudge("model", calls=1)]
    res = run(comcts(TASK, FAMILY, policies, judges, SearchParams(budget=4)))
    # A (1) + its judging (2), B (3) + its judging (4): C is never called
    assert [len(p.prompts) for p in policies] == [1, 1, 0]
    assert (res.policy_calls, res.judge_calls, res.calls, res.rounds) == (2, 2, 4, 1)


def test_stops_at_first_solving_round_and_reports_path():
    def solver(prefix: list[str]) -> str:
        return "B-bad-looking?\nAnswer: 7" if prefix else "B0\nwrong\nAnswer: 7"

    a, b, c = _cut_policy("A"), ScriptedPolicy("B", solver), _cut_policy("C")
    res = run(comcts(TASK, FAMILY, [a, b, c], [TableJudge("j", {"wrong": -1})], SearchParams(budget=20)))
    assert res.solved and res.rounds == 2 and res.final_answer == "7"
    assert res.policy_calls == 6  # the solving round is finished: C is still called in round 2
    # round 1 adds A0, B0, C0 (all V 1, N 1): the tie goes to A0, the earliest
    assert res.best_path.steps == ["A0", "B-bad-looking?"]
    assert res.best_path.policies == ["A", "B"]
    assert res.tree[res.best_path.node_ids[-1]].answer == "7"
    assert res.path_has_wrong_step is None  # the checker cannot tell for "?"; marks no step -1
    assert b.prompts[1] == FAMILY.prompt(TASK, ["A0"])


def test_path_has_wrong_step_flag():
    res = run(comcts(TASK, FAMILY, [ScriptedPolicy("A", ["ok\nbad\nAnswer: 7"])], [TableJudge("j")]))
    assert res.solved and res.path_has_wrong_step is True
    res = run(comcts(TASK, FAMILY, [ScriptedPolicy("A", ["ok\nAnswer: 7"])], [TableJudge("j")]))
    assert res.path_has_wrong_step is False


class RaisingPolicy:
    name = "raiser"

    async def complete(self, prompt, max_tokens, temperature, seed=None):
        raise RuntimeError("boom")


class HangingPolicy:
    name = "hang"

    async def complete(self, prompt, max_tokens, temperature, seed=None):
        await asyncio.sleep(30)
        return PolicyReply(text="never")


def test_garbage_and_timeout_policies_are_counted_and_skipped():
    garbage = ScriptedPolicy("garbage", lambda prefix: "   \n\n")
    timeout = ScriptedPolicy("timeout", lambda prefix: PolicyReply(text="", error="timeout"))
    good = ScriptedPolicy("good", lambda prefix: "g\nAnswer: 7" if prefix else "g\nwrong\nAnswer: 7")
    params = SearchParams(budget=20, call_timeout_s=0.05)
    policies = [garbage, timeout, RaisingPolicy(), HangingPolicy(), good]
    res = run(comcts(TASK, FAMILY, policies, [TableJudge("j", {"wrong": -1})], params))
    assert res.solved and res.rounds == 2 and res.policy_calls == 10
    assert res.failures == {"garbage": 2, "timeout": 2, "raiser": 2, "hang": 2}
    assert res.best_path.policies == ["good", "good"]
    assert json.loads(res.to_row()["failures"]) == res.failures and res.to_row()["failed_calls"] == 8


def test_copies_of_one_policy_are_called_separately_with_distinct_seeds():
    policy = _cut_policy("A")
    res = run(comcts(TASK, FAMILY, [policy] * 3, [TableJudge("j", {"wrong": -1})], SearchParams(budget=3)))
    assert res.policy_calls == 3 and len(policy.prompts) == 3
    assert len(set(policy.seeds)) == 3 and set(policy.temperatures) == {0.9}
    assert res.method == "comcts"
    assert run(comcts(TASK, FAMILY, [policy], [TableJudge("j")], method="single_mcts")).method == "single_mcts"


def test_max_rounds_stops_search():
    res = run(comcts(TASK, FAMILY, [_cut_policy("A")], [TableJudge("j", {"wrong": -1})], SearchParams(max_rounds=3)))
    assert res.rounds == 3 and res.policy_calls == 3 and not res.solved


def test_to_row_is_json_and_tree_round_trips():
    res = run(comcts(TASK, FAMILY, [_cut_policy("A"), _cut_policy("B")], [TableJudge("j", {"wrong": -1})],
                     SearchParams(budget=4)))
    row = json.loads(json.dumps(res.to_row()))
    assert row["tree"][0]["parent"] == -1 and row["calls"] == 4
    assert sum(not n["pruned"] for n in row["tree"]) == 5 and sum(n["pruned"] for n in row["tree"]) == 4
    again = Tree.from_rows(row["tree"])
    assert again.to_rows() == res.tree.to_rows()
    assert again[0].children == res.tree[0].children


# ---------------------------------------------------------------- baselines


def test_direct_is_one_greedy_call():
    policy = ScriptedPolicy("A", ["s\nAnswer: 8"])
    res = run(direct(TASK, FAMILY, policy))
    assert (res.solved, res.final_answer, res.policy_calls, res.rounds) == (False, "8", 1, 1)
    assert policy.temperatures == [0.0] and res.best_path.steps == ["s"]
    res = run(direct(TASK, FAMILY, ScriptedPolicy("A", ["s\nAnswer: 7"])))
    assert res.solved and res.path_has_wrong_step is False and res.method == "direct"


def test_independent_sampling_stops_at_first_correct_sample():
    a = ScriptedPolicy("A", lambda prefix: "x\nAnswer: 1")
    b = ScriptedPolicy("B", ["y\nAnswer: 2", "z\nAnswer: 7", "never\nAnswer: 7"])
    res = run(independent_sampling(TASK, FAMILY, [a, b], SearchParams(budget=20)))
    # A, B, A, B(correct): 4 calls, 2 passes
    assert (res.solved, res.policy_calls, res.rounds, res.judge_calls) == (True, 4, 2, 0)
    assert res.best_path.steps == ["z"] and res.best_path.policies == ["B"] and res.final_answer == "7"
    assert all(p == FAMILY.prompt(TASK, []) for p in a.prompts + b.prompts)
    assert res.tree is None and res.to_row()["tree"] == []


def test_independent_sampling_spends_budget_and_counts_failures():
    a = ScriptedPolicy("A", lambda prefix: "x\nAnswer: 1")
    bad = ScriptedPolicy("bad", lambda prefix: PolicyReply(text="", error="timeout", tokens=0))
    res = run(independent_sampling(TASK, FAMILY, [a, bad], SearchParams(budget=5)))
    assert (res.solved, res.policy_calls, res.rounds) == (False, 5, 3)
    assert res.failures == {"bad": 2} and res.tokens == 3 * 3 and res.final_answer is None


def test_params_forbid_unknown_keys():
    with pytest.raises(ValueError):
        SearchParams(budgett=3)
    p = SearchParams()
    assert (p.temperature, p.threshold, p.c, p.budget, p.max_tokens, p.max_rounds) == (0.9, 0.0, 0.5, 20, 128, 50)
