"""The common step format, read and written exactly: a solution's text, ``a op b = c`` steps, and
arithmetic evaluated as fractions without ``eval``.

Why its own module: every family's checker and solution generator reads and writes steps the same
way, and model output reaches ``safe_eval``, so the one safe evaluator lives in one place.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from fractions import Fraction

from raypress.operators.reasoning.search.types import ANSWER_PREFIX
from raypress import ast_safe

MAX_EXPR_CHARS = 300  # longer "arithmetic" from a model is not worth parsing
GLYPHS = str.maketrans({"×": "*", "÷": "/", "−": "-", "–": "-"})
_NUM = r"-?\d+(?:\.\d+)?"
_STEP = re.compile(rf"^\s*({_NUM})\s*([-+*/x])\s*({_NUM})\s*=\s*({_NUM})\s*$")

Steps = list[str]
Solution = tuple[Steps, str]


def solution_text(steps: Sequence[str], final: str) -> str:
    """The canonical response: the steps one per line, then ``Answer: <final>``."""
    return "".join(f"{s}\n" for s in steps) + f"{ANSWER_PREFIX} {final}"


def apply_op(a: Fraction, op: str, b: Fraction) -> Fraction | None:
    """``a op b`` exactly; None for a division by zero."""
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op in ("*", "x"):
        return a * b
    return None if b == 0 else a / b


def parse_binary_step(step: str) -> tuple[Fraction, str, Fraction, Fraction] | None:
    """``a op b = c`` -> its four parts (``x`` and ``×`` read as ``*``); None when not that shape."""
    m = _STEP.match(step.translate(GLYPHS))
    if m is None:
        return None
    a, op, b, c = m.groups()
    return Fraction(a), "*" if op == "x" else op, Fraction(b), Fraction(c)


def safe_eval(text: str, variables: dict[str, Fraction] | None = None) -> Fraction:
    """Evaluate arithmetic text exactly without ``eval``: numbers, ``+ - * /``, unary signs,
    parentheses and the given variables only. Anything else raises ValueError."""
    text = text.translate(GLYPHS).strip()
    if not text or len(text) > MAX_EXPR_CHARS:
        raise ValueError("empty or too long expression")
    try:
        tree = ast_safe.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise ValueError(f"not an expression: {text!r}") from exc
    return _eval_node(tree.body, variables or {})


def _eval_node(node: ast.AST, variables: dict[str, Fraction]) -> Fraction:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return Fraction(str(node.value))
    if isinstance(node, ast.Name) and node.id in variables:
        return variables[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _eval_node(node.operand, variables)
        return -value if isinstance(node.op, ast.USub) else value
    ops = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}
    if isinstance(node, ast.BinOp) and type(node.op) in ops:
        out = apply_op(_eval_node(node.left, variables), ops[type(node.op)], _eval_node(node.right, variables))
        if out is None:
            raise ValueError("division by zero")
        return out
    raise ValueError(f"not allowed in arithmetic: {ast.dump(node)[:60]}")


def fmt(x: Fraction) -> str:
    """A number as a step writes it: an integer, else a short decimal (flawed solutions only)."""
    return str(x.numerator) if x.denominator == 1 else str(round(float(x), 4))
