"""Collective Monte Carlo tree search (Mulberry's CoMCTS) and its equal-budget baselines.

Why one module for the tree and the search: the four operations (expansion, simulation with error
positioning, backpropagation, selection) only make sense on this tree, and the baselines must share
the search's budget accounting so that "equal model-call budget" means the same thing for each.

Budget: one unit per model call, i.e. every policy call (a failed one too) plus the model calls a
judge reports (an exact checker reports 0). A policy is called only while budget remains; the
judges of a candidate that was already generated are always run, so the total can exceed the budget
by the judge calls of the last candidate. The calls actually spent are reported exactly.

Pure Python + asyncio: policies and judges are whatever answers the protocols in ``types.py``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import zlib
from dataclasses import dataclass, field
from typing import Any, Sequence

from pydantic import BaseModel, ConfigDict, Field

from raypress.operators.reasoning.types import Completion, Judge, Policy, Task, TaskFamily

log = logging.getLogger(__name__)

ROOT_ID = 0


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


@dataclass
class Node:
    """One reasoning step. ``score`` is R (the collective judge score), ``value`` V, ``visits`` N.

    ``answer`` is set on the last step of a path whose final answer solved the task (the answer is
    never a node of its own)."""

    id: int
    parent: int | None
    text: str
    policy: str
    score: float
    value: float
    visits: int
    depth: int
    round: int = 0
    judge_scores: list[float] = field(default_factory=list)
    children: list[int] = field(default_factory=list)
    answer: str | None = None
    exhausted: bool = False  # expanded once and nothing survived: skipped by the fallback selection
    pruned: bool = False  # the step a candidate was cut at (score < t): kept as reflection's negative
    # sibling, never selected, never part of backpropagation


class Tree:
    """The search tree: node 0 is the root (the question, no step), ids are creation order."""

    def __init__(self, question: str) -> None:
        self.question = question
        self.nodes: list[Node] = [Node(ROOT_ID, None, "", "", 0.0, 0.0, 0, 0)]

    @property
    def root(self) -> Node:
        return self.nodes[ROOT_ID]

    def __getitem__(self, node_id: int) -> Node:
        return self.nodes[node_id]

    def __len__(self) -> int:
        return len(self.nodes)

    def add_path(
        self,
        parent_id: int,
        steps: Sequence[str],
        scores: Sequence[float],
        policy: str,
        judge_scores: Sequence[Sequence[float]] | None = None,
        round: int = 0,
    ) -> list[Node]:
        """Append a chain of new steps under ``parent_id``; each new node starts with V = R, N = 1.

        ``judge_scores[i]`` are the per-judge scores of step i (kept for the output rows)."""
        if len(steps) != len(scores):
            raise ValueError(f"{len(steps)} steps but {len(scores)} scores")
        added: list[Node] = []
        parent = self.nodes[parent_id]
        for i, (text, score) in enumerate(zip(steps, scores)):
            node = Node(
                id=len(self.nodes),
                parent=parent.id,
                text=text,
                policy=policy,
                score=float(score),
                value=float(score),
                visits=1,
                depth=parent.depth + 1,
                round=round,
                judge_scores=[float(s) for s in judge_scores[i]] if judge_scores is not None else [],
            )
            self.nodes.append(node)
            parent.children.append(node.id)
            added.append(node)
            parent = node
        return added

    def path_to(self, node_id: int) -> list[Node]:
        """The nodes from the root's child down to ``node_id`` (empty for the root)."""
        path: list[Node] = []
        node = self.nodes[node_id]
        while node.parent is not None:
            path.append(node)
            node = self.nodes[node.parent]
        return path[::-1]

    def steps_to(self, node_id: int) -> list[str]:
        """The step texts from the root down to ``node_id``: the prefix a policy continues."""
        return [n.text for n in self.path_to(node_id)]

    def siblings(self, node_id: int) -> list[Node]:
        """The other children of ``node_id``'s parent, in creation order."""
        node = self.nodes[node_id]
        if node.parent is None:
            return []
        return [self.nodes[i] for i in self.nodes[node.parent].children if i != node_id]

    def ucb(self, node_id: int, c: float = 0.5) -> float:
        """V(s) + c·sqrt(log N(parent(s)) / (1 + N(s))); the root (no parent) scores its V."""
        node = self.nodes[node_id]
        if node.parent is None:
            return node.value
        parent_visits = self.nodes[node.parent].visits
        explore = math.sqrt(math.log(parent_visits) / (1 + node.visits)) if parent_visits > 1 else 0.0
        return node.value + c * explore

    def to_rows(self) -> list[dict[str, Any]]:
        """One dict per node with fixed keys and no nulls, so a list of them is one Arrow column
        (root: parent -1, text/policy ""; no answer: "")."""
        return [
            {
                "id": n.id,
                "parent": -1 if n.parent is None else n.parent,
                "depth": n.depth,
                "round": n.round,
                "text": n.text,
                "policy": n.policy,
                "score": n.score,
                "judge_scores": list(n.judge_scores),
                "value": n.value,
                "visits": n.visits,
                "answer": "" if n.answer is None else n.answer,
                "exhausted": n.exhausted,
                "pruned": n.pruned,
            }
            for n in self.nodes
        ]

    @classmethod
    def from_rows(cls, rows: Sequence[dict[str, Any]], question: str = "") -> "Tree":
        """Rebuild a tree from ``to_rows`` output (e.g. a later reflection stage reading the column)."""
        tree = cls(question)
        tree.nodes = []
        for row in sorted(rows, key=lambda r: int(r["id"])):
            parent = int(row["parent"])
            tree.nodes.append(
                Node(
                    id=int(row["id"]),
                    parent=None if parent < 0 else parent,
                    text=row["text"],
                    policy=row["policy"],
                    score=float(row["score"]),
                    value=float(row["value"]),
                    visits=int(row["visits"]),
                    depth=int(row["depth"]),
                    round=int(row.get("round", 0)),
                    judge_scores=[float(s) for s in row.get("judge_scores") or []],
                    answer=row.get("answer") or None,
                    exhausted=bool(row.get("exhausted", False)),
                    pruned=bool(row.get("pruned", False)),
                )
            )
        for i, node in enumerate(tree.nodes):
            if node.id != i:
                raise ValueError(f"tree rows are not ids 0..{len(rows) - 1}: found id {node.id} at {i}")
            if node.parent is not None:
                tree.nodes[node.parent].children.append(node.id)
        return tree


def backpropagate(tree: Tree, selected_id: int, new_paths: Sequence[Sequence[Node]]) -> None:
    """Backpropagation (paper step 3) after a round expanded ``selected_id`` (s_m).

    Inside each new chain, bottom-up, a new node's new parent gets V ← (N·V + R_child)/(N + 1),
    N ← N + 1. Then s_m and every ancestor up to the root get
    V ← (N·V + Σ R of s_m's new children)/(N + #new children), N ← N + #new children."""
    for path in new_paths:
        for i in range(len(path) - 2, -1, -1):
            parent, child = path[i], path[i + 1]
            parent.value = (parent.visits * parent.value + child.score) / (parent.visits + 1)
            parent.visits += 1
    firsts = [path[0] for path in new_paths if path]
    if not firsts:
        return
    total, count = sum(n.score for n in firsts), len(firsts)
    node: Node | None = tree[selected_id]
    while node is not None:
        node.value = (node.visits * node.value + total) / (node.visits + count)
        node.visits += count
        node = tree[node.parent] if node.parent is not None else None


def select(tree: Tree, added: Sequence[Node], c: float, max_depth: int) -> int:
    """Selection (paper step 4): the highest-UCB selectable node among those added this round;
    when none, among all non-root nodes not exhausted; when none, the root. A node is selectable
    when its depth is below ``max_depth`` and it is not exhausted. Ties go to the earlier node."""

    def selectable(n: Node) -> bool:
        return n.parent is not None and n.depth < max_depth and not n.exhausted and not n.pruned

    for pool in (added, tree.nodes):
        candidates = sorted((n for n in pool if selectable(n)), key=lambda n: n.id)
        if candidates:
            best, best_ucb = candidates[0], tree.ucb(candidates[0].id, c)
            for n in candidates[1:]:
                u = tree.ucb(n.id, c)
                if u > best_ucb:
                    best, best_ucb = n, u
            return best.id
    return ROOT_ID


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
class BestPath:
    """The solution a method returns: its steps, which policy wrote each, the node ids, the answer."""

    steps: list[str]
    policies: list[str]
    answer: str
    node_ids: list[int] = field(default_factory=list)  # empty for methods without a tree


@dataclass
class SearchResult:
    """What one question's search (or baseline) spent and found."""

    task_id: str
    method: str
    solved: bool
    final_answer: str | None  # the best path's answer; None when a tree method did not solve
    rounds: int
    policy_calls: int
    judge_calls: int  # model calls reported by judges (exact checkers report 0)
    tokens: int  # sum of Completion.tokens over the policy calls
    failures: dict[str, int]  # failed policy calls (error or no steps and no answer) by policy name
    tree: Tree | None = None
    best_path: BestPath | None = None
    path_has_wrong_step: bool | None = None  # per family.check_step on the solved path; None: unknown

    @property
    def calls(self) -> int:
        """Model calls charged to the budget."""
        return self.policy_calls + self.judge_calls

    def to_row(self) -> dict[str, Any]:
        """JSON-serialisable columns. ``failures`` is a JSON string because its keys (policy names)
        differ between methods, which would not make one Arrow struct type."""
        best = self.best_path
        return {
            "task_id": self.task_id,
            "method": self.method,
            "solved": self.solved,
            "final_answer": self.final_answer,
            "rounds": self.rounds,
            "policy_calls": self.policy_calls,
            "judge_calls": self.judge_calls,
            "calls": self.calls,
            "tokens": self.tokens,
            "failures": json.dumps(self.failures, sort_keys=True),
            "failed_calls": sum(self.failures.values()),
            "tree": self.tree.to_rows() if self.tree is not None else [],
            "best_steps": list(best.steps) if best else [],
            "best_policies": list(best.policies) if best else [],
            "best_node_ids": list(best.node_ids) if best else [],
            "best_answer": best.answer if best else None,
            "path_has_wrong_step": self.path_has_wrong_step,
        }


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


def call_seed(params: SearchParams, task: Task, call_index: int) -> int | None:
    """A distinct, reproducible seed per call, so K copies of one model still sample differently."""
    if params.seed is None:
        return None
    return (params.seed * 1_000_003 + zlib.crc32(task.id.encode()) + call_index) % (2**31 - 1)


async def _call_policy(
    policy: Policy, prompt: str, max_tokens: int, temperature: float, seed: int | None, timeout_s: float | None
) -> Completion:
    """One policy call that never raises: a raised error or a timeout becomes ``Completion(error=...)``."""
    try:
        coro = policy.complete(prompt, max_tokens=max_tokens, temperature=temperature, seed=seed)
        completion = await (asyncio.wait_for(coro, timeout_s) if timeout_s is not None else coro)
    except asyncio.TimeoutError:
        return Completion(text="", error="timeout")
    except Exception as exc:  # noqa: BLE001 - a broken policy must not end the search
        log.warning("policy %s raised %s: %s", policy.name, type(exc).__name__, exc)
        return Completion(text="", error=f"{type(exc).__name__}: {exc}")
    if not isinstance(completion, Completion):
        return Completion(text="", error=f"policy returned {type(completion).__name__}, not Completion")
    return completion


async def _generate(
    ledger: _Ledger, task: Task, family: TaskFamily, policy: Policy, prompt: str, temperature: float,
    params: SearchParams,
    call_index: int | None = None,
) -> tuple[list[str], str | None] | None:
    """Call a policy, charge it, split its continuation; None (and a counted failure) when the call
    failed or the continuation reaches no ``Answer:`` line (garbage, or cut off by max_tokens). ``call_index`` picks the call's
    seed (default: the calls made so far)."""
    seed = call_seed(params, task, ledger.policy_calls if call_index is None else call_index)
    completion = await _call_policy(policy, prompt, params.max_tokens, temperature, seed, params.call_timeout_s)
    ledger.policy_calls += 1
    ledger.tokens += int(completion.tokens)
    if completion.error is not None:
        ledger.fail(policy.name)
        return None
    steps, answer = family.split(completion.text)
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
    spend on it (``calls_per_path``); at least one while any budget is left (its judging may then
    overshoot the budget by the judges' calls, which ``calls`` reports)."""
    left = ledger.budget - ledger.spent
    if left <= 0:
        return 0
    per_candidate = 1 + sum(int(getattr(j, "calls_per_path", 0)) for j in judges)
    return max(1, left // per_candidate)


async def _nothing() -> list[list[float]]:
    return []


async def comcts(
    task: Task,
    family: TaskFamily,
    policies: Sequence[Policy],
    judges: Sequence[Judge],
    params: SearchParams | None = None,
    method: str = "comcts",
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
    while rounds < params.max_rounds and ledger.left and best is None:
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
                negative = tree.add_path(anchor, [steps[cut]], [scores[cut]], policy.name,
                                         [list(col) for col in zip(*per_judge)][cut:cut + 1], rounds)[0]
                negative.pruned = True
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
