"""Collective Monte Carlo tree search (Mulberry's CoMCTS) and its equal-budget baselines.

Why the baselines live with the search: they must share the search's budget accounting so that
"equal model-call budget" means the same thing for each. The tree and its operations (expansion
adds paths, backpropagation, selection) are in ``tree``; what a search returns is in
``result``.

Budget: one unit per model call, i.e. every policy call (a failed one too) plus the model calls a
judge reports (an exact checker reports 0, a policy judging a candidate 1). A policy is called only
when its candidate and that candidate's judging both fit in what is left, so the total never
exceeds the budget (with judges reporting what their ``calls_per_path`` promised). The calls
actually spent are reported exactly.

Pure Python + asyncio: policies and judges are whatever answers the protocols in ``types.py``.
"""

from __future__ import annotations

import asyncio
import logging
import zlib
from dataclasses import dataclass, field
from typing import Sequence

from pydantic import BaseModel, ConfigDict, Field

from raypress.operators.reasoning.search.result import BestPath, SearchResult
from raypress.operators.reasoning.search.tree import ROOT_ID, Node, Tree, backpropagate, select
from raypress.operators.reasoning.search.types import PolicyReply, Judge, Policy, Task, TaskFamily

log = logging.getLogger(__name__)


class SearchParams(BaseModel):
    """The search's knobs; the defaults are the paper's (Mulberry, NeurIPS 2025)."""

    model_config = ConfigDict(extra="forbid")

    temperature: float = Field(0.9, ge=0.0, description="sampling temperature of the expansions")
    threshold: float = Field(0.0, description="t: a path is cut before its first step with collective score < t")
    c: float = Field(0.5, ge=0.0, description="UCB exploration constant")
    budget: int = Field(20, ge=1, description="model calls per question: policy calls + model-judge calls")
    max_tokens: int = Field(128, ge=1, description="max new tokens per policy call")
    max_rounds: int = Field(50, ge=1, description="hard stop on search rounds (sampling passes for the baseline)")
    max_depth: int = Field(16, ge=1, description="nodes at this depth (steps from the root) are not selectable")
    seed: int | None = Field(0, description="base of the per-call sampling seeds; None leaves sampling unseeded")
    call_timeout_s: float | None = Field(
        None, gt=0.0, description="give up on a policy call after this long (counted as a failure); None: no limit"
    )


def first_below(scores: Sequence[float], threshold: float) -> int | None:
    """Error positioning: the index of the first step scoring below ``threshold`` (None: no such step)."""
    for i, s in enumerate(scores):
        if s < threshold:
            return i
    return None


def collective_scores(per_judge: Sequence[Sequence[float]]) -> list[float]:
    """The collective score of each step: the mean over judges (paper Eq. 2–3)."""
    if not per_judge:
        raise ValueError("no judge scores")
    return [sum(col) / len(col) for col in zip(*per_judge, strict=True)]


@dataclass
class _Ledger:
    """Budget and accounting shared by the search and the baselines."""

    budget: int
    policy_calls: int = 0
    judge_calls: int = 0
    tokens: int = 0
    failures: dict[str, int] = field(default_factory=dict)

    @property
    def spent(self) -> int:
        return self.policy_calls + self.judge_calls

    @property
    def left(self) -> bool:
        return self.spent < self.budget

    def fail(self, policy: str) -> None:
        self.failures[policy] = self.failures.get(policy, 0) + 1


@dataclass
class JudgeAudit:
    """Per-step agreement of model judges with the exact checker, counted on every judged candidate
    step (the checker only labels afterwards; it never steers the search). "Positive" is "wrong":
    ``counts[judge] = {tp, fp, fn, tn}`` for each judge and for the collective score."""

    threshold: float = 0.0
    counts: dict[str, dict[str, int]] = field(default_factory=dict)

    def add(self, name: str, says_wrong: bool, is_wrong: bool) -> None:
        c = self.counts.setdefault(name, {"tp": 0, "fp": 0, "fn": 0, "tn": 0})
        c[("t" if says_wrong == is_wrong else "f") + ("p" if says_wrong else "n")] += 1

    def record(self, task: Task, family: TaskFamily, prefix: Sequence[str], steps: Sequence[str],
               judges: Sequence[Judge], per_judge: Sequence[Sequence[float]]) -> None:
        from raypress.operators.reasoning.search.judges import exact_labels

        labels = exact_labels(family, task, list(prefix) + list(steps))[len(prefix):]
        collective = collective_scores(per_judge)
        for i, correct in enumerate(labels):
            for judge, scores in zip(judges, per_judge):
                self.add(judge.name, scores[i] < self.threshold, not correct)
            self.add("collective", collective[i] < self.threshold, not correct)


def precision_recall(c: dict[str, int]) -> dict[str, float | int | None]:
    """Precision and recall of "wrong" from ``{tp, fp, fn, tn}`` (None where undefined)."""
    said, wrong = c["tp"] + c["fp"], c["tp"] + c["fn"]
    total = sum(c.values())
    return {**c, "steps": total, "precision_wrong": c["tp"] / said if said else None,
            "recall_wrong": c["tp"] / wrong if wrong else None,
            "agreement": (c["tp"] + c["tn"]) / total if total else None}


def call_seed(params: SearchParams, task: Task, call_index: int) -> int | None:
    """A distinct, reproducible seed per call, so K copies of one model still sample differently."""
    if params.seed is None:
        return None
    return (params.seed * 1_000_003 + zlib.crc32(task.id.encode()) + call_index) % (2**31 - 1)


async def _call_policy(
    policy: Policy, prompt: str, max_tokens: int, temperature: float, seed: int | None, timeout_s: float | None
) -> PolicyReply:
    """One policy call that never raises: a raised error or a timeout becomes ``PolicyReply(error=...)``."""
    try:
        coro = policy.complete(prompt, max_tokens=max_tokens, temperature=temperature, seed=seed)
        reply = await (asyncio.wait_for(coro, timeout_s) if timeout_s is not None else coro)
    except asyncio.TimeoutError:
        return PolicyReply(text="", error="timeout")
    except Exception as exc:  # noqa: BLE001 - a broken policy must not end the search
        log.warning("policy %s raised %s: %s", policy.name, type(exc).__name__, exc)
        return PolicyReply(text="", error=f"{type(exc).__name__}: {exc}")
    if not isinstance(reply, PolicyReply):
        return PolicyReply(text="", error=f"policy returned {type(reply).__name__}, not PolicyReply")
    return reply


async def _generate(
    ledger: _Ledger, task: Task, family: TaskFamily, policy: Policy, prompt: str, temperature: float,
    params: SearchParams,
    call_index: int | None = None,
) -> tuple[list[str], str | None] | None:
    """Call a policy, charge it, split its continuation; None (and a counted failure) when the call
    failed or the continuation reaches no ``Answer:`` line (garbage, or cut off by max_tokens). ``call_index`` picks the call's
    seed (default: the calls made so far)."""
    seed = call_seed(params, task, ledger.policy_calls if call_index is None else call_index)
    reply = await _call_policy(policy, prompt, params.max_tokens, temperature, seed, params.call_timeout_s)
    ledger.policy_calls += 1
    ledger.tokens += int(reply.tokens)
    if reply.error is not None:
        ledger.fail(policy.name)
        return None
    steps, answer = family.split(reply.text)
    if answer is None:  # garbage, or cut off before its answer: a candidate must reach a final answer
        ledger.fail(policy.name)
        return None
    return list(steps), answer


def wrong_step_on_path(task: Task, family: TaskFamily, steps: Sequence[str]) -> bool | None:
    """Does the exact step checker mark any step of ``steps`` -1? None when it cannot tell for some
    step and marks none -1."""
    unknown = False
    for i, step in enumerate(steps):
        verdict = family.check_step(task, list(steps[:i]), step)
        if verdict is None:
            unknown = True
        elif verdict < 0:
            return True
    return None if unknown else False


async def _judge(
    ledger: _Ledger, task: Task, judges: Sequence[Judge], previous: list[str], steps: list[str]
) -> list[list[float]]:
    """Every judge scores the new steps (concurrently); their model calls are charged."""
    if not steps:
        return [[] for _ in judges]
    answers = await asyncio.gather(*(j.score_steps(task, list(previous), list(steps)) for j in judges))
    per_judge: list[list[float]] = []
    for judge, (scores, calls) in zip(judges, answers):
        if len(scores) != len(steps):
            raise ValueError(f"judge {judge.name} scored {len(scores)} of {len(steps)} steps")
        per_judge.append([float(s) for s in scores])
        ledger.judge_calls += int(calls)
    return per_judge


def _result(task: Task, family: TaskFamily, method: str, ledger: _Ledger, rounds: int, best: BestPath | None,
            tree: Tree | None) -> SearchResult:
    """The outcome of one search (or baseline) from its ledger."""
    return SearchResult(
        task_id=task.id,
        method=method,
        solved=best is not None,
        final_answer=best.answer if best else None,
        rounds=rounds,
        policy_calls=ledger.policy_calls,
        judge_calls=ledger.judge_calls,
        tokens=ledger.tokens,
        failures=dict(ledger.failures),
        tree=tree,
        best_path=best,
        path_has_wrong_step=wrong_step_on_path(task, family, best.steps) if best else None,
    )


def _affordable(ledger: _Ledger, judges: Sequence[Judge]) -> int:
    """How many policies a round may call: each candidate costs one call plus what the model judges
    spend on it (``calls_per_path``); only whole candidates fit, so with model judges the total never
    exceeds the budget (equal budgets are then equal for the search, best-of-n and sampling)."""
    left = ledger.budget - ledger.spent
    if left <= 0:
        return 0
    return left // (1 + sum(int(getattr(j, "calls_per_path", 0)) for j in judges))


async def _nothing() -> list[list[float]]:
    return []


async def comcts(
    task: Task,
    family: TaskFamily,
    policies: Sequence[Policy],
    judges: Sequence[Judge],
    params: SearchParams | None = None,
    method: str = "comcts",
    audit: JudgeAudit | None = None,
) -> SearchResult:
    """Collective MCTS on one question (the paper's four operations, repeated until solved, out of
    budget or out of rounds).

    With one policy this is single-model MCTS; with K copies of one policy (distinct objects, each
    called separately) the "copies" baseline: ``method`` only labels the result. Give copies
    distinct names if their failures should be counted apart.

    A candidate with no step below the threshold whose answer is wrong or missing (e.g. cut off by
    ``max_tokens``) is discarded whole. A solving round is finished (every policy still called)
    before the search stops; the first solving candidate, in policy order, is the best path."""
    params = params or SearchParams()
    if not policies:
        raise ValueError("comcts needs at least one policy")
    if not judges:
        raise ValueError("comcts needs at least one judge")
    tree = Tree(task.question)
    ledger = _Ledger(params.budget)
    selected = ROOT_ID
    rounds = 0
    best: BestPath | None = None
    while rounds < params.max_rounds and _affordable(ledger, judges) and best is None:
        rounds += 1
        prefix = tree.steps_to(selected)
        prompt = family.prompt(task, prefix)
        new_paths: list[list[Node]] = []
        # 1. expansion: every policy the budget still allows, called at once (their calls batch in
        # the model servers); results are then taken in policy order, so the outcome is the same
        callers = list(policies)[: _affordable(ledger, judges)]
        first_call = ledger.policy_calls
        outputs = await asyncio.gather(*(
            _generate(ledger, task, family, policy, prompt, params.temperature, params, first_call + i)
            for i, policy in enumerate(callers)))
        judged = await asyncio.gather(*(  # 2. simulation: every candidate judged at once
            _judge(ledger, task, judges, prefix, out[0]) if out is not None else _nothing()
            for out in outputs))
        for policy, generated, per_judge in zip(callers, outputs, judged):
            if generated is None:
                continue
            steps, answer = generated
            if audit is not None and steps:
                audit.record(task, family, prefix, steps, judges, per_judge)
            scores = collective_scores(per_judge) if steps else []
            cut = first_below(scores, params.threshold)  # error positioning
            solves = cut is None and answer is not None and family.score(task, answer)
            if cut is None and not solves:
                continue  # no step judged wrong, yet the answer is wrong: nothing here is trustworthy
            keep = len(steps) if cut is None else cut
            per_step = [list(col) for col in zip(*per_judge)][:keep]
            path = tree.add_path(selected, steps[:keep], scores[:keep], policy.name, per_step, rounds)
            if path:
                new_paths.append(path)
            if cut is not None:  # the negative step itself, for reflection (outside search and backprop)
                anchor = path[-1].id if path else selected
                tree.add_path(anchor, [steps[cut]], [scores[cut]], policy.name,
                              [list(col) for col in zip(*per_judge)][cut:cut + 1], rounds, pruned=True)
            if solves and best is None:
                assert answer is not None
                leaf = path[-1] if path else tree[selected]
                leaf.answer = answer
                nodes = tree.path_to(leaf.id)
                best = BestPath([n.text for n in nodes], [n.policy for n in nodes], answer, [n.id for n in nodes])
        backpropagate(tree, selected, new_paths)  # 3.
        if not new_paths:
            tree[selected].exhausted = True
        if best is None:
            added = [n for path in new_paths for n in path]
            selected = select(tree, added, params.c, params.max_depth)  # 4.
    return _result(task, family, method, ledger, rounds, best, tree)


async def direct(
    task: Task, family: TaskFamily, policy: Policy, params: SearchParams | None = None, method: str = "direct"
) -> SearchResult:
    """Baseline: one greedy (temperature 0) answer from one policy; costs one model call.

    Unlike the tree methods, its ``best_path`` and ``final_answer`` are its one attempt even when
    wrong (that is what an evaluation of the policy needs)."""
    params = params or SearchParams()
    ledger = _Ledger(1)
    generated = await _generate(ledger, task, family, policy, family.prompt(task, []), 0.0, params)
    steps, answer = generated if generated is not None else ([], None)
    solved = answer is not None and family.score(task, answer)
    path = BestPath(steps, [policy.name] * len(steps), answer) if answer is not None else None
    return SearchResult(
        task_id=task.id,
        method=method,
        solved=solved,
        final_answer=answer,
        rounds=1,
        policy_calls=ledger.policy_calls,
        judge_calls=0,
        tokens=ledger.tokens,
        failures=dict(ledger.failures),
        best_path=path,
        path_has_wrong_step=wrong_step_on_path(task, family, steps) if solved else None,
    )


async def independent_sampling(
    task: Task,
    family: TaskFamily,
    policies: Sequence[Policy],
    params: SearchParams | None = None,
    method: str = "independent",
) -> SearchResult:
    """Baseline: full solutions from scratch, round-robin over the policies at the search
    temperature, until one is correct (``family.score``) or the budget is spent; no tree, no
    judges. A round is one pass over the policies, called at once like a CoMCTS expansion (the
    last may be partial); the first correct sample in policy order is the answer."""
    params = params or SearchParams()
    if not policies:
        raise ValueError("independent_sampling needs at least one policy")
    ledger = _Ledger(params.budget)
    prompt = family.prompt(task, [])
    rounds = 0
    best: BestPath | None = None
    while rounds < params.max_rounds and ledger.left and best is None:
        rounds += 1
        callers = list(policies)[: ledger.budget - ledger.spent]
        first_call = ledger.policy_calls
        outputs = await asyncio.gather(*(  # one pass, all at once, as CoMCTS expands (same accounting)
            _generate(ledger, task, family, policy, prompt, params.temperature, params, first_call + i)
            for i, policy in enumerate(callers)))
        for policy, generated in zip(callers, outputs):
            if generated is None:
                continue
            steps, answer = generated
            if answer is not None and family.score(task, answer):
                best = BestPath(steps, [policy.name] * len(steps), answer)
                break
    return _result(task, family, method, ledger, rounds, best, None)


async def best_of_n(
    task: Task,
    family: TaskFamily,
    policies: Sequence[Policy],
    judges: Sequence[Judge],
    params: SearchParams | None = None,
    method: str = "best_of_n",
    audit: JudgeAudit | None = None,
) -> SearchResult:
    """Baseline: independent full solutions (round-robin over the policies, as ``independent_sampling``)
    each judged by the same judges as the search, until the budget (policy + judge calls) is spent;
    the answer is the candidate the judges rank first: no step below the threshold first, then the
    highest mean collective step score, then the earliest. Nothing here sees the ground truth: the
    question is solved when that pick is right (like ``direct``, the pick is kept even when wrong)."""
    params = params or SearchParams()
    if not policies:
        raise ValueError("best_of_n needs at least one policy")
    if not judges:
        raise ValueError("best_of_n needs at least one judge")
    ledger = _Ledger(params.budget)
    prompt = family.prompt(task, [])
    rounds = 0
    ranked: list[tuple[tuple[bool, float, int], list[str], str, str]] = []
    while rounds < params.max_rounds and _affordable(ledger, judges):
        rounds += 1
        callers = list(policies)[: _affordable(ledger, judges)]
        first_call = ledger.policy_calls
        outputs = await asyncio.gather(*(
            _generate(ledger, task, family, policy, prompt, params.temperature, params, first_call + i)
            for i, policy in enumerate(callers)))
        judged = await asyncio.gather(*(
            _judge(ledger, task, judges, [], out[0]) if out is not None else _nothing() for out in outputs))
        for policy, generated, per_judge in zip(callers, outputs, judged):
            if generated is None:
                continue
            steps, answer = generated
            assert answer is not None
            if audit is not None and steps:
                audit.record(task, family, [], steps, judges, per_judge)
            scores = collective_scores(per_judge) if steps else []
            passes = first_below(scores, params.threshold) is None
            mean = sum(scores) / len(scores) if scores else 0.0
            ranked.append(((passes, mean, -len(ranked)), steps, answer, policy.name))
    pick = max(ranked, key=lambda r: r[0]) if ranked else None
    solved = pick is not None and family.score(task, pick[2])
    return SearchResult(
        task_id=task.id, method=method, solved=solved, final_answer=pick[2] if pick else None, rounds=rounds,
        policy_calls=ledger.policy_calls, judge_calls=ledger.judge_calls, tokens=ledger.tokens,
        failures=dict(ledger.failures),
        best_path=BestPath(pick[1], [pick[3]] * len(pick[1]), pick[2]) if pick else None,
        path_has_wrong_step=wrong_step_on_path(task, family, pick[1]) if solved and pick else None,
    )
