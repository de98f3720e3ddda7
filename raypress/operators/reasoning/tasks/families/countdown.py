"""The countdown family: make the target from the given numbers, one ``a op b = c`` step at a time.

Why a solver here: its exact checker must know whether the target can still be made from the
numbers left, and its worked solutions are the solver's path.
"""

from __future__ import annotations

import ast
from fractions import Fraction
from functools import lru_cache
from random import Random
from typing import Any, Callable, ClassVar, Iterator

from raypress.operators.reasoning.tasks.families.flaws import SLIPS, check_kind, merge_next
from raypress.operators.reasoning.tasks.families.rg_family import RgFamily
from raypress.operators.reasoning.tasks.families.step_text import Solution, Steps, apply_op, fmt, parse_binary_step, safe_eval
from raypress.operators.reasoning.search.types import Task
from raypress import ast_safe


@lru_cache(maxsize=1 << 16)
def _solve(state: tuple[int, ...], target: int) -> tuple[tuple[int, str, int, int], ...] | None:
    """Steps ``(a, op, b, c)`` turning the numbers ``state`` (sorted) into ``(target,)`` using each
    exactly once with integer results, or None. Natural moves (non-negative, exact) come first."""
    if len(state) == 1:
        return () if state[0] == target else None
    for i in range(len(state)):
        for j in range(len(state)):
            if i == j:
                continue
            a, b = state[i], state[j]
            rest = state[:min(i, j)] + state[min(i, j) + 1:max(i, j)] + state[max(i, j) + 1:]
            for op, c in _moves(a, b):
                tail = _solve(tuple(sorted((*rest, c))), target)
                if tail is not None:
                    return ((a, op, b, c), *tail)
    return None


def _moves(a: int, b: int) -> Iterator[tuple[str, int]]:
    """Integer results of ``a op b``; each unordered pair is also tried as ``b op a`` by the caller,
    so only ``a >= b`` yields ``+`` and ``*``."""
    if a >= b:
        yield "+", a + b
        yield "*", a * b
    yield "-", a - b
    if b != 0 and a % b == 0:
        yield "/", a // b


def reachable(numbers: tuple[int, ...], target: int) -> bool:
    """Can ``numbers`` (each used exactly once, integer steps) make ``target``?"""
    return _solve(tuple(sorted(numbers)), target) is not None


class Countdown(RgFamily):
    """Make the target from the given numbers; a step combines two available numbers."""

    defaults: ClassVar[dict[str, Any]] = {"min_numbers": 3, "max_numbers": 4}

    def accept(self, entry: dict[str, Any]) -> bool:
        meta = entry["metadata"]
        return reachable(tuple(meta["numbers"]), meta["target"]) and super().accept(entry)

    def prompt(self, task: Task, steps: list[str]) -> str:
        """The question without reasoning-gym's answer-format instructions (its text after the first
        blank line): the Answer line's format is learned from the solutions, and the instructions
        were three quarters of the prompt, which a small policy reads on every call."""
        question = task.question.split("\n\n", 1)[0].strip()
        return f"{question}\nSolution:\n" + "".join(f"{s}\n" for s in steps)

    def score(self, task: Task, final_answer: str) -> bool:
        # reasoning-gym parses the answer with sympy (which evaluates it): only plain arithmetic
        # may reach it, never arbitrary model output.
        try:
            safe_eval(final_answer)
        except ValueError:
            return False
        return super().score(task, final_answer)

    def check_step(self, task: Task, previous: list[str], step: str) -> int | None:
        """+1 when the arithmetic is right, both operands are available (each number once) and the
        target can still be made from the numbers left (all of them, integer steps); else -1.
        A prefix that cannot be replayed makes every next step wrong."""
        state = self._replay(task, previous)
        parsed = parse_binary_step(step)
        if state is None or parsed is None:
            return -1
        a, op, b, c = parsed
        if apply_op(a, op, b) != c or c.denominator != 1:
            return -1
        rest = _take(state, [a, b])
        if rest is None:
            return -1
        return 1 if reachable(tuple(int(v) for v in (*rest, c)), task.metadata["target"]) else -1

    def _replay(self, task: Task, previous: list[str]) -> list[Fraction] | None:
        state = [Fraction(n) for n in task.metadata["numbers"]]
        for step in previous:
            parsed = parse_binary_step(step)
            if parsed is None or apply_op(parsed[0], parsed[1], parsed[2]) != parsed[3]:
                return None
            rest = _take(state, [parsed[0], parsed[2]])
            if rest is None:
                return None
            state = [*rest, parsed[3]]
        return state

    def _path(self, task: Task) -> tuple[tuple[int, str, int, int], ...]:
        path = _solve(tuple(sorted(task.metadata["numbers"])), task.metadata["target"])
        if path is None:
            raise ValueError(f"{task.id}: target {task.metadata['target']} is not reachable")
        return path

    def worked_solution(self, task: Task) -> Solution:
        out = self._render(task, self._path(task), None, None)
        if out is None:  # integer steps replayed as they were found: cannot happen
            raise ValueError(f"{task.id}: the solver's path does not replay")
        return out

    def flawed_solution(self, task: Task, rng: Random, kind: str) -> Solution:
        """``arithmetic_slip``: a wrong result (later steps carry it; the final expression is built
        from the numbers, so it can still score); ``wrong_operand``: a number that is not available
        (used up, or never given), which the final expression then uses too; ``skipped_step``: a step
        claims the result of the next one, which is left out."""
        check_kind(kind)
        path = self._path(task)
        steps, final = self.worked_solution(task)
        if kind == "skipped_step":
            ks = [k for k in range(len(path) - 1) if path[k][3] in (path[k + 1][0], path[k + 1][2])
                  and path[k + 1][3] != path[k][3]]
            if ks:
                k = rng.choice(ks)
                return merge_next(steps, k, str(path[k + 1][3])), final
            kind = "arithmetic_slip"
        for k in rng.sample(range(len(path)), len(path)):
            for corrupt in self._corruptions(task, path, k, rng, kind):
                out = self._render(task, path, k, corrupt)
                if out is not None:
                    return out
        raise ValueError(f"{task.id}: no {kind} flaw fits")

    def _corruptions(self, task: Task, path, k: int, rng: Random, kind: str) -> list[Callable]:
        if kind == "arithmetic_slip":
            return [lambda a, b, na, nb, avail, d=d: (a, b, na, nb, apply_op(a, path[k][1], b) + d)
                    for d in rng.sample(SLIPS, len(SLIPS))]
        used = sorted(set(task.metadata["numbers"]) | {p[3] for p in path[:k]})  # given or made so far
        rng.shuffle(used)

        def wrong(a, b, na, nb, avail, cands=used):
            for v in (*cands, b + 1, b + 2):
                v = Fraction(v)
                if v not in avail and v != b:
                    out = apply_op(a, path[k][1], v)
                    if out is not None and out.denominator == 1:
                        return a, v, na, ast.Constant(int(v)), out
            return None

        return [wrong]

    def _render(self, task: Task, path, k: int | None, corrupt: Callable | None) -> Solution | None:
        """Write ``path`` as steps and the final expression, corrupting step ``k`` with ``corrupt``;
        later steps compute with the shown (possibly wrong) values. None when that breaks a step
        (a division that is no longer exact)."""
        state = [(Fraction(n), Fraction(n), ast.Constant(n)) for n in task.metadata["numbers"]]
        steps: Steps = []
        for i, (a, op, b, c) in enumerate(path):
            (_, sa, na), state = _pop(state, a)
            (_, sb, nb), state = _pop(state, b)
            if i == k:
                avail = [e[1] for e in state]
                corrupted = corrupt(sa, sb, na, nb, avail)
                if corrupted is None:
                    return None
                sa, sb, na, nb, sc = corrupted
            else:
                sc = apply_op(sa, op, sb)
                if sc is None or sc.denominator != 1:
                    return None
            steps.append(f"{fmt(sa)} {op} {fmt(sb)} = {fmt(sc)}")
            node = ast.BinOp(na, {"+": ast.Add(), "-": ast.Sub(), "*": ast.Mult(), "/": ast.Div()}[op], nb)
            state.append((Fraction(c), sc, node))
        return steps, ast_safe.unparse(state[0][2])


def _take(values: list[Fraction], wanted: list[Fraction]) -> list[Fraction] | None:
    """``values`` without one copy of each of ``wanted``; None when one is missing."""
    rest = list(values)
    for w in wanted:
        if w not in rest:
            return None
        rest.remove(w)
    return rest


def _pop(state: list, true_value: int) -> tuple[tuple, list]:
    i = next(i for i, e in enumerate(state) if e[0] == true_value)
    return state[i], state[:i] + state[i + 1:]
