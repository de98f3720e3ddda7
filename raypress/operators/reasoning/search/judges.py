"""Judges: score reasoning steps in {-1, 0, +1} (``types.Judge``).

- ``ExactStepJudge``: the task family's exact checker (free: no model call); 0 where it cannot tell.
- ``ModelJudge``: a policy model prompted to judge a candidate path, one call per path (Mulberry's
  collective judging: each policy scores every candidate's steps); the policies learn the verdict
  format in training (``train_policies``' judging examples, labelled by the exact checker, which
  is never consulted at search time); unreadable verdicts count as 0.
- ``CollectiveJudge``: the mean of several judges (paper Eq. 2-3), their calls summed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from raypress.operators.reasoning.search.types import Judge, Policy, Task, TaskFamily



class ExactStepJudge:
    """The family's exact step checker, step by step along the path."""

    def __init__(self, family: TaskFamily) -> None:
        self.family = family
        self.name = f"exact:{family.name}"
        self.calls_per_path = 0

    async def score_steps(self, task: Task, previous: list[str], steps: list[str]) -> tuple[list[float], int]:
        scores: list[float] = []
        so_far = list(previous)
        for step in steps:
            verdict = self.family.check_step(task, so_far, step)
            scores.append(0.0 if verdict is None else float(verdict))
            so_far.append(step)
        return scores, 0


CHECK_HEADER = "Check:"
VERDICT = re.compile(r"Step\s+(\d+)\s+is\s+(correct|wrong)")


def verdict_lines(labels: Sequence[bool]) -> str:
    """The judging format a policy learns: ``Step k is correct`` / ``Step k is wrong``, one per line."""
    return "".join(f"Step {i + 1} is {'correct' if ok else 'wrong'}\n" for i, ok in enumerate(labels))


def judging_prompt(family: TaskFamily, task: Task, previous: list[str], steps: list[str]) -> str:
    """The path (question, earlier steps, new steps), the check header, and the earlier steps'
    verdicts already written as correct (they were accepted by the search): the policy continues
    with its verdict on each new step, so "Step k is" is followed by the token it finds likelier."""
    return (f"{family.prompt(task, list(previous) + list(steps))}{CHECK_HEADER}\n"
            f"{verdict_lines([True] * len(previous))}")


def parse_verdicts(text: str, first: int, n: int) -> list[float]:
    """Scores of steps ``first + 1 .. first + n`` (1-based numbers in the text): +1 correct, -1 wrong,
    0 when the policy wrote no readable verdict for that step."""
    found: dict[int, float] = {}
    for match in VERDICT.finditer(text):
        found.setdefault(int(match.group(1)), 1.0 if match.group(2) == "correct" else -1.0)
    return [found.get(first + i + 1, 0.0) for i in range(n)]


def exact_labels(family: TaskFamily, task: Task, steps: Sequence[str]) -> list[bool]:
    """Training/audit labels from the exact checker: a step is correct while no step up to it is
    marked wrong (after the first wrong step the path is wrong; "cannot tell" counts as correct)."""
    labels, ok = [], True
    for i, step in enumerate(steps):
        if ok and family.check_step(task, list(steps[:i]), step) == -1:
            ok = False
        labels.append(ok)
    return labels


class ModelJudge:
    """A policy model judging steps (greedy, one call per candidate path): its verdict token after
    "Step k is" (the likelier of "correct" / "wrong") scores step k +1 / -1; unreadable is 0. A
    failed call scores every step 0 and still costs a call."""

    def __init__(self, policy: Policy, family: TaskFamily, tokens_per_step: int = 12) -> None:
        # a verdict line is ~11 tokens with the policies' small BPE ("Step 1 is c-o-r-r-e-c-t")
        self.policy = policy
        self.family = family
        self.tokens_per_step = tokens_per_step
        self.name = f"model:{policy.name}"
        self.calls_per_path = 1

    async def score_steps(self, task: Task, previous: list[str], steps: list[str]) -> tuple[list[float], int]:
        if not steps:
            return [], 0
        prompt = judging_prompt(self.family, task, previous, steps)
        out = await self.policy.complete(prompt, self.tokens_per_step * len(steps), 0.0)
        if out.error is not None:
            return [0.0] * len(steps), 1
        return parse_verdicts(out.text, len(previous), len(steps)), 1


class CollectiveJudge:
    """Mean score over ``judges`` for each step; model calls add up."""

    def __init__(self, judges: Sequence[Judge]) -> None:
        if not judges:
            raise ValueError("a collective judge needs at least one judge")
        self.judges = list(judges)
        self.calls_per_path = sum(int(getattr(j, "calls_per_path", 0)) for j in self.judges)
        self.name = "collective(" + ",".join(j.name for j in self.judges) + ")"

    async def score_steps(self, task: Task, previous: list[str], steps: list[str]) -> tuple[list[float], int]:
        results = [await j.score_steps(task, previous, steps) for j in self.judges]
        scores = [sum(r[0][i] for r in results) / len(results) for i in range(len(steps))]
        return scores, sum(r[1] for r in results)
