"""The simple-equations family: a linear equation in one variable, solved by moving the constant
and dividing by the coefficient.

Why its own module: its checker evaluates each side of a step at the true solution, which needs
the equation read as ``a*var + b`` (``linear``).
"""

from __future__ import annotations

import ast
from fractions import Fraction
from random import Random
from typing import Any

from raypress.operators.reasoning.tasks.families.flaws import SLIPS, check_kind, merge_next, result_of
from raypress.operators.reasoning.tasks.families.rg_family import RgFamily
from raypress.operators.reasoning.tasks.families.step_text import GLYPHS, Solution, Steps, fmt, safe_eval
from raypress.operators.reasoning.search.types import Task
from raypress import ast_safe


def linear(text: str, var: str) -> tuple[Fraction, Fraction]:
    """``text`` as ``a*var + b`` -> ``(a, b)``; ValueError when it is not linear arithmetic."""
    tree = ast_safe.parse(text.translate(GLYPHS).strip(), mode="eval").body
    return _linear(tree, var)


def _linear(node: ast.AST, var: str) -> tuple[Fraction, Fraction]:
    if isinstance(node, ast.Name) and node.id == var:
        return Fraction(1), Fraction(0)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        a, b = _linear(node.operand, var)
        return -a, -b
    if isinstance(node, ast.BinOp):
        (a1, b1), (a2, b2) = _linear(node.left, var), _linear(node.right, var)
        if isinstance(node.op, (ast.Add, ast.Sub)):
            sign = 1 if isinstance(node.op, ast.Add) else -1
            return a1 + sign * a2, b1 + sign * b2
        if isinstance(node.op, ast.Mult) and (a1 == 0 or a2 == 0):
            return a1 * b2 + a2 * b1, b1 * b2
        if isinstance(node.op, ast.Div) and a2 == 0 and b2 != 0:
            return a1 / b2, b1 / b2
    return Fraction(0), safe_eval(ast_safe.unparse(node))


def _var_term(a: Fraction, var: str) -> str:
    return var if a == 1 else f"-{var}" if a == -1 else f"{fmt(a)}*{var}"


class SimpleEquations(RgFamily):
    """``56 - 98*e = -1218``: move the constant, then divide by the coefficient."""

    @staticmethod
    def parts(task: Task) -> tuple[str, Fraction, Fraction, Fraction, Fraction]:
        """The variable, the coefficient and constant of the left side, the right side, the solution."""
        meta = task.metadata
        left, right = meta["equation"].split("=")
        var = meta["variable"]
        a, b = linear(left, var)
        c, d = linear(right, var)
        if a == c:
            raise ValueError(f"{task.id}: {meta['equation']!r} has no unique solution")
        return var, a - c, b, d, (d - b) / (a - c)

    def accept(self, entry: dict[str, Any]) -> bool:
        meta = entry["metadata"]  # reasoning-gym can cancel the variable out: "0 = 0"
        left, right = meta["equation"].split("=")
        return linear(left, meta["variable"])[0] != linear(right, meta["variable"])[0] and super().accept(entry)

    def check_step(self, task: Task, previous: list[str], step: str) -> int | None:
        """+1 when the step has at least two ``=``-separated sides and every one of them, evaluated
        at the true solution, has the same value; else -1 (an unparsable side is wrong)."""
        var, *_, solution = self.parts(task)
        sides = step.split("=")
        if len(sides) < 2:
            return -1
        try:
            values = {safe_eval(side, {var: solution}) for side in sides}
        except ValueError:
            return -1
        return 1 if len(values) == 1 else -1

    def worked_solution(self, task: Task) -> Solution:
        var, a, b, d, sol = self.parts(task)
        steps = []
        if b != 0:
            sign = "-" if b > 0 else "+"
            steps.append(f"{_var_term(a, var)} = {fmt(d)} {sign} {fmt(abs(b))} = {fmt(d - b)}")
        if a != 1:
            steps.append(f"{var} = {fmt(d - b)} / {fmt(a)} = {fmt(sol)}")
        if not steps:
            steps.append(f"{var} = {fmt(sol)}")
        return steps, fmt(sol)

    def flawed_solution(self, task: Task, rng: Random, kind: str) -> Solution:
        """``arithmetic_slip``: a wrong value, carried on; ``wrong_operand``: the constant moved
        without changing its sign (or, with no constant, a divisor of the wrong sign);
        ``skipped_step``: the first step claims the solution (a slip when there is one step)."""
        check_kind(kind)
        var, a, b, d, sol = self.parts(task)
        steps, final = self.worked_solution(task)
        if kind == "skipped_step":
            if len(steps) > 1 and result_of(steps[1]) != result_of(steps[0]):
                return merge_next(steps, 0, result_of(steps[1])), final
            kind = "arithmetic_slip"
        slip = Fraction(rng.choice(SLIPS))
        if kind == "wrong_operand" and b != 0:
            moved = d + b
            first = f"{_var_term(a, var)} = {fmt(d)} {'+' if b > 0 else '-'} {fmt(abs(b))} = {fmt(moved)}"
            return self._finish([first], var, a, moved)
        if kind == "wrong_operand":
            div = -a if sol != 0 else a + (1 if a != -1 else 2)
            return [f"{var} = {fmt(d)} / {fmt(div)} = {fmt(d / div)}"], fmt(d / div)
        if b != 0 and (a == 1 or rng.random() < 0.5):  # slip in the first step, carried on
            moved = d - b + slip
            sign = "-" if b > 0 else "+"
            return self._finish([f"{_var_term(a, var)} = {fmt(d)} {sign} {fmt(abs(b))} = {fmt(moved)}"], var, a, moved)
        head = steps[-1].rsplit("=", 1)[0].rstrip()
        return [*steps[:-1], f"{head} = {fmt(sol + slip)}"], fmt(sol + slip)

    @staticmethod
    def _finish(steps: Steps, var: str, a: Fraction, moved: Fraction) -> Solution:
        if a == 1:
            return steps, fmt(moved)
        return [*steps, f"{var} = {fmt(moved)} / {fmt(a)} = {fmt(moved / a)}"], fmt(moved / a)
