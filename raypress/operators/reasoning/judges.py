"""Judges: score reasoning steps in {-1, 0, +1} (``types.Judge``).

- ``ExactStepJudge``: the task family's exact checker (free: no model call); 0 where it cannot tell.
- ``ModelJudge``: a policy model prompted to grade a candidate path, one call per path (Mulberry's
  collective judging: each policy scores the others' steps); unparsable grades count as 0.
- ``CollectiveJudge``: the mean of several judges (paper Eq. 2-3), their calls summed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from raypress.operators.reasoning.types import Judge, Policy, Task, TaskFamily

GRADE = re.compile(r"[-+]?[01]")


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


def grading_prompt(family: TaskFamily, task: Task, previous: list[str], steps: list[str]) -> str:
    """Ask for one grade per new step, on its own line, in order."""
    numbered = "\n".join(f"Step {i + 1}: {s}" for i, s in enumerate(steps))
    return (f"{family.prompt(task, previous)}{numbered}\n"
            f"Grade each step above: +1 if it is correct, 0 if unsure, -1 if it is wrong. One grade per line.\n")


def parse_grades(text: str, n: int) -> list[float]:
    """The first ``n`` grades found, one per line; missing or unreadable ones are 0."""
    grades = []
    for line in text.splitlines():
        match = GRADE.search(line)
        if match:
            grades.append(float(int(match.group())))
        if len(grades) == n:
            break
    return grades + [0.0] * (n - len(grades))


class ModelJudge:
    """A policy model grading steps (greedy); a failed call grades every step 0 and still costs a call."""

    def __init__(self, policy: Policy, family: TaskFamily, max_tokens: int = 32) -> None:
        self.policy = policy
        self.family = family
        self.max_tokens = max_tokens
        self.name = f"model:{policy.name}"
        self.calls_per_path = 1

    async def score_steps(self, task: Task, previous: list[str], steps: list[str]) -> tuple[list[float], int]:
        if not steps:
            return [], 0
        out = await self.policy.complete(grading_prompt(self.family, task, previous, steps), self.max_tokens, 0.0)
        return (parse_grades(out.text, len(steps)) if out.error is None else [0.0] * len(steps)), 1


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
