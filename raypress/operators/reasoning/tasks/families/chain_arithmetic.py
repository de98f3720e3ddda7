"""The chain-arithmetic family: ``4 - 1 - 7`` solved one operation per step, left to right.

Why its own module: its checker knows the one right next step exactly (the running result and
the chain's next operation), unlike the other families.
"""

from __future__ import annotations

from random import Random
from typing import Any, ClassVar

from raypress.operators.reasoning.tasks.families.flaws import SLIPS, check_kind, merge_next
from raypress.operators.reasoning.tasks.families.rg_family import RgFamily
from raypress.operators.reasoning.tasks.families.step_text import Solution, apply_op, parse_binary_step
from raypress.operators.reasoning.search.types import Task


class ChainArithmetic(RgFamily):
    """``4 - 1 - 7``: one step per operation, left to right, on the running result."""

    defaults: ClassVar[dict[str, Any]] = {"min_terms": 3, "max_terms": 5, "min_digits": 1, "max_digits": 2}

    @staticmethod
    def chain(task: Task) -> tuple[list[int], list[str]]:
        """The terms and the operators of the task's expression (reasoning-gym joins them by spaces)."""
        tokens = task.metadata["expression"].split()
        return [int(t) for t in tokens[0::2]], tokens[1::2]

    @classmethod
    def running(cls, task: Task) -> list[int]:
        """The result after each operation, starting with the first term."""
        terms, ops = cls.chain(task)
        out = [terms[0]]
        for op, t in zip(ops, terms[1:]):
            out.append(out[-1] + t if op == "+" else out[-1] - t)
        return out

    def check_step(self, task: Task, previous: list[str], step: str) -> int | None:
        """+1 when the step is ``r op t = r'`` with r the true result so far, ``op t`` the chain's
        next operation and r' right; else -1 (also for steps past the end of the chain)."""
        terms, ops = self.chain(task)
        k = len(previous)
        parsed = parse_binary_step(step)
        if parsed is None or k >= len(ops):
            return -1
        a, op, b, c = parsed
        ok = (a, op, b) == (self.running(task)[k], ops[k], terms[k + 1]) and apply_op(a, op, b) == c
        return 1 if ok else -1

    def worked_solution(self, task: Task) -> Solution:
        terms, ops = self.chain(task)
        run = self.running(task)
        steps = [f"{run[i]} {ops[i]} {terms[i + 1]} = {run[i + 1]}" for i in range(len(ops))]
        return steps, str(run[-1])

    def flawed_solution(self, task: Task, rng: Random, kind: str) -> Solution:
        """``arithmetic_slip``: a wrong result, carried on; ``wrong_operand``: another term than the
        chain's next one (right arithmetic), carried on; ``skipped_step``: a step claims the result
        after the next operation (falls back to a slip when there is no next one)."""
        check_kind(kind)
        terms, ops = self.chain(task)
        if not ops:
            raise ValueError(f"{task.id}: a one-term chain has no step to corrupt")
        steps, final = self.worked_solution(task)
        run = self.running(task)
        if kind == "skipped_step":
            ks = [k for k in range(len(ops) - 1) if run[k + 2] != run[k + 1]]
            if ks:
                k = rng.choice(ks)
                return merge_next(steps, k, str(run[k + 2])), final
            kind = "arithmetic_slip"
        k = rng.randrange(len(ops))
        value = run[k]
        out = steps[:k]
        for i in range(k, len(ops)):
            term = terms[i + 1]
            if i == k and kind == "wrong_operand":
                others = [t for t in terms if t != term] or [term + 1]
                term = rng.choice(others)
            nxt = value + term if ops[i] == "+" else value - term
            if i == k and kind == "arithmetic_slip":
                nxt += rng.choice(SLIPS)
            out.append(f"{value} {ops[i]} {term} = {nxt}")
            value = nxt
        return out, str(value)
