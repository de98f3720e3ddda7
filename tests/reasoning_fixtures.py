"""Deterministic rule-based solvers: test fixtures standing in for policy models.

A ``RuleSolver`` knows the tasks it may be asked about; given a prompt it continues the steps
already written with the task's worked solution, and with probability ``error_rate`` (its own
seeded stream) writes a flawed solution instead, so several solvers make different mistakes.
"""

from __future__ import annotations

import random

from raypress.operators.reasoning.tasks.families.step_text import solution_text
from raypress.operators.reasoning.tasks.catalog import get_family
from raypress.operators.reasoning.search.types import PolicyReply, Task


class RuleSolver:
    def __init__(self, name: str, tasks: list[Task], error_rate: float = 0.0, seed: int = 0,
                 garbage: bool = False) -> None:
        self.name = name
        self.tasks = tasks
        self.error_rate = error_rate
        self.rng = random.Random(seed)
        self.garbage = garbage
        self.calls = 0

    def _find(self, prompt: str) -> tuple[Task, list[str]]:
        for task in self.tasks:
            family = get_family(task.family)
            head = family.prompt(task, [])
            if prompt.startswith(head):
                written = [line for line in prompt[len(head):].split("\n") if line.strip()]
                return task, written
        raise KeyError("unknown question")

    async def complete(self, prompt: str, max_tokens: int, temperature: float, seed: int | None = None) -> PolicyReply:
        self.calls += 1
        if self.garbage:
            return PolicyReply("%%%% ~~~~ ####", 4)
        task, written = self._find(prompt)
        family = get_family(task.family)
        steps, final = family.worked_solution(task)
        if self.rng.random() < self.error_rate:
            try:
                steps, final = family.flawed_solution(task, self.rng, "arithmetic_slip")
            except ValueError:
                steps, final = family.worked_solution(task)
        rest = steps[len(written):] if steps[: len(written)] == written else steps
        text = solution_text(rest, final)
        return PolicyReply(text, len(text.split()))
