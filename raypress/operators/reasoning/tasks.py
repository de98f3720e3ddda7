"""Reasoning task families on reasoning-gym: questions, the step format, scorers, step checkers and
generators of worked and flawed solutions.

Why reasoning-gym: it generates endless seeded questions and owns each family's final-answer
scorer, so the search and the evaluation judge answers exactly as that package does. What it does
not have is a step format, so this module adds one per family (types.py: one step per line, then
``Answer: <value>``), an exact step checker where the family allows one, and the solutions that
train the policies: worked ones (every step checks, the answer scores) and flawed ones (one step
fails the checker), whose mix gives each trained policy its own error profile.

``reasoning_gym`` is imported lazily (about 2 s): validating a pipeline that names no reasoning
op must not pay for it.
"""

from __future__ import annotations

import ast
import json
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from random import Random
from typing import Any, Callable, ClassVar, Iterator

from raypress.operators.reasoning.types import ANSWER_PREFIX, Task
from raypress.suggest import did_you_mean

FLAW_KINDS = ("arithmetic_slip", "wrong_operand", "skipped_step")
# make_tasks(seed) reads reasoning-gym items seed*stride + i: its items are seeded seed+index, so
# plain consecutive seeds would share all but one question (a train set leaking into a test set).
SEED_STRIDE = 1_000_000
MAX_EXPR_CHARS = 300  # longer "arithmetic" from a model is not worth parsing
_SLIPS = (-3, -2, -1, 1, 2, 3)
_GLYPHS = str.maketrans({"×": "*", "÷": "/", "−": "-", "–": "-"})
_NUM = r"-?\d+(?:\.\d+)?"
_STEP = re.compile(rf"^\s*({_NUM})\s*([-+*/x])\s*({_NUM})\s*=\s*({_NUM})\s*$")

Steps = list[str]
Solution = tuple[Steps, str]


# ---- shared helpers -------------------------------------------------------------------------


def solution_text(steps: Steps, final: str) -> str:
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
    m = _STEP.match(step.translate(_GLYPHS))
    if m is None:
        return None
    a, op, b, c = m.groups()
    return Fraction(a), "*" if op == "x" else op, Fraction(b), Fraction(c)


def safe_eval(text: str, variables: dict[str, Fraction] | None = None) -> Fraction:
    """Evaluate arithmetic text exactly without ``eval``: numbers, ``+ - * /``, unary signs,
    parentheses and the given variables only. Anything else raises ValueError."""
    text = text.translate(_GLYPHS).strip()
    if not text or len(text) > MAX_EXPR_CHARS:
        raise ValueError("empty or too long expression")
    try:
        tree = ast.parse(text, mode="eval")
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


def _merge_next(steps: Steps, k: int, result: str) -> Steps:
    """``skipped_step``: step k claims the result of step k+1, which is left out."""
    head = steps[k].rsplit("=", 1)[0].rstrip()
    return [*steps[:k], f"{head} = {result}", *steps[k + 2:]]


def _result_of(step: str) -> str:
    return step.rsplit("=", 1)[1].strip()


# ---- the families ---------------------------------------------------------------------------


@dataclass(frozen=True)
class RgFamily(ABC):
    """What every family shares: a reasoning-gym dataset, the prompt, the splitter and the scorer.

    Subclasses add the step checker and the solution generators."""

    name: str
    rg_name: str
    defaults: ClassVar[dict[str, Any]] = {}

    def prompt(self, task: Task, steps: list[str]) -> str:
        return f"{task.question}\nSolution:\n" + "".join(f"{s}\n" for s in steps)

    def split(self, text: str) -> tuple[list[str], str | None]:
        """Steps are the non-blank lines before the first ``Answer:`` line (any case); its value,
        when not empty, is the final answer."""
        steps: list[str] = []
        for line in text.splitlines():
            line = line.strip()
            if not line:
                continue
            if line[: len(ANSWER_PREFIX)].lower() == ANSWER_PREFIX.lower():
                return steps, line[len(ANSWER_PREFIX):].strip() or None
            steps.append(line)
        return steps, None

    def score(self, task: Task, final_answer: str) -> bool:
        entry = {"question": task.question, "answer": task.answer, "metadata": task.metadata}
        return _scorer(self.rg_name)(final_answer.strip(), entry) == 1.0

    def accept(self, entry: dict[str, Any]) -> bool:
        """Keep this generated item? Not when reasoning-gym's own scorer rejects its own answer
        (gsm_symbolic's misses negative answers)."""
        return _scorer(self.rg_name)(str(entry["answer"]), entry) == 1.0

    @abstractmethod
    def check_step(self, task: Task, previous: list[str], step: str) -> int | None:
        """+1 / -1 / None (see types.TaskFamily)."""

    @abstractmethod
    def worked_solution(self, task: Task) -> Solution:
        """A correct solution (see the module-level ``worked_solution``)."""

    @abstractmethod
    def flawed_solution(self, task: Task, rng: Random, kind: str) -> Solution:
        """A solution with one flawed step (see the module-level ``flawed_solution``)."""


@lru_cache(maxsize=None)
def _scorer(rg_name: str) -> Callable[[str, dict[str, Any]], float]:
    import reasoning_gym as rg

    return rg.get_score_answer_fn(rg_name)


def _check_kind(kind: str) -> None:
    if kind not in FLAW_KINDS:
        raise ValueError(f"unknown flaw kind {kind!r}; known: {', '.join(FLAW_KINDS)}")


# ---- countdown --------------------------------------------------------------------------------


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
        _check_kind(kind)
        path = self._path(task)
        steps, final = self.worked_solution(task)
        if kind == "skipped_step":
            ks = [k for k in range(len(path) - 1) if path[k][3] in (path[k + 1][0], path[k + 1][2])
                  and path[k + 1][3] != path[k][3]]
            if ks:
                k = rng.choice(ks)
                return _merge_next(steps, k, str(path[k + 1][3])), final
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
                    for d in rng.sample(_SLIPS, len(_SLIPS))]
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
        return steps, ast.unparse(state[0][2])


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


# ---- chain arithmetic -----------------------------------------------------------------------


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
        _check_kind(kind)
        terms, ops = self.chain(task)
        if not ops:
            raise ValueError(f"{task.id}: a one-term chain has no step to corrupt")
        steps, final = self.worked_solution(task)
        run = self.running(task)
        if kind == "skipped_step":
            ks = [k for k in range(len(ops) - 1) if run[k + 2] != run[k + 1]]
            if ks:
                k = rng.choice(ks)
                return _merge_next(steps, k, str(run[k + 2])), final
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
                nxt += rng.choice(_SLIPS)
            out.append(f"{value} {ops[i]} {term} = {nxt}")
            value = nxt
        return out, str(value)


# ---- simple equations -----------------------------------------------------------------------


def linear(text: str, var: str) -> tuple[Fraction, Fraction]:
    """``text`` as ``a*var + b`` -> ``(a, b)``; ValueError when it is not linear arithmetic."""
    tree = ast.parse(text.translate(_GLYPHS).strip(), mode="eval").body
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
    return Fraction(0), safe_eval(ast.unparse(node))


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
        _check_kind(kind)
        var, a, b, d, sol = self.parts(task)
        steps, final = self.worked_solution(task)
        if kind == "skipped_step":
            if len(steps) > 1 and _result_of(steps[1]) != _result_of(steps[0]):
                return _merge_next(steps, 0, _result_of(steps[1])), final
            kind = "arithmetic_slip"
        slip = Fraction(rng.choice(_SLIPS))
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


# ---- GSM symbolic ---------------------------------------------------------------------------

_CNUM = r"\d+(?:,\d{3})*(?:\.\d+)?"
# A number may carry up to two unit words ("100 ladybugs + 200 bees = 300"), but not words that
# change its value or join it to prose ("3 dozen", "5 per plant", "2 times").
_NOT_UNITS = (r"(?:dozens?|hundreds?|thousands?|millions?|billions?|percent|half|halves|thirds?|quarters?|twice"
              r"|times|of|per|x|and|or|more|less|fewer|than|each|every|a|an|the|is|are|was|were|by|from|to|in"
              r"|on|at|for|as|so)")
_UNITS = rf"(?:\s+(?!{_NOT_UNITS}\b)[a-z]+){{0,2}}"
_CTERM = rf"\(*\s*-?\s*{_CNUM}{_UNITS}\s*\)*"
_CLAIM = re.compile(
    rf"(?P<expr>\(*(?:-\s*)?{_CNUM}{_UNITS}\s*\)*(?:\s*[-+*/x]\s*{_CTERM})+)\s*=\s*(?P<result>-?{_CNUM})"
)
_CURRENCY = "$£€¥"


@dataclass(frozen=True)
class Claim:
    """One arithmetic claim of a line: the value of its left side, the result it states, and
    where the stated result and the left side's first number sit in the original line."""

    value: Fraction
    stated: Fraction
    stated_text: str
    result_span: tuple[int, int]
    operand_span: tuple[int, int]

    @property
    def holds(self) -> bool:
        """Is the stated result a fair writing of the value? Exact for integers; for fractions,
        the floor, the ceiling or a rounding to the stated decimals (GSM writes 0.52*40 = 20)."""
        v, s = self.value, self.stated
        if v.denominator == 1:
            return v == s
        decimals = len(self.stated_text.split(".")[1]) if "." in self.stated_text else 0
        tol = Fraction(1, 2 * 10**decimals) + abs(v) * Fraction(1, 10**9)
        return abs(v - s) <= tol or s in (v.numerator // v.denominator, -(-v.numerator // v.denominator))


def arithmetic_claims(line: str) -> list[Claim]:
    """The ``a op b (op c ...) = r`` claims of a line of prose.

    Conservative, since a false -1 misleads the search: a claim counts only when its left side
    is plain arithmetic (``x`` between numbers multiplies; numbers may carry unit words, see
    ``_UNITS``) that does not continue to the left (``total - 3 + 2 = 10`` is not ``3 + 2 = 10``,
    ``2(10)`` is not ``(10)``), and its result is a plain number, not followed by more arithmetic
    or ``%``. Currency signs are ignored; ``a/b/c`` is skipped as ambiguous."""
    keep = [i for i, ch in enumerate(line) if ch not in _CURRENCY]
    text = "".join(line[i] for i in keep).translate(_GLYPHS)
    out = []
    for m in _CLAIM.finditer(text):
        if _continues_left(text[: m.start()], m["expr"]) or re.match(r"[\d(*/+x%]|-\s*\d", text[m.end():].lstrip()):
            continue  # part of a longer expression, or a percentage
        if re.search(r"/\s*[\d.,]+\s*/", m["expr"]):
            continue  # 14÷1/2 means 14/(1/2) in prose: ambiguous
        try:
            value = safe_eval(re.sub(r"\b(?!x\b)[a-z]+\b", " ", m["expr"]).replace(",", "").replace("x", "*"))
        except ValueError:
            continue
        first = re.search(_CNUM, m["expr"])
        if first is None:
            continue
        o0, o1 = m.start("expr") + first.start(), m.start("expr") + first.end()
        out.append(Claim(value, Fraction(m["result"].replace(",", "")), m["result"],
                         (keep[m.start("result")], keep[m.end("result") - 1] + 1), (keep[o0], keep[o1 - 1] + 1)))
    return out


def _continues_left(before: str, expr: str) -> bool:
    """Is the matched arithmetic part of a longer expression to its left?"""
    stripped = before.rstrip()
    if re.search(r"[\w.)]$", before) or re.search(r"(?:[-+*/]|\bx)$", stripped):
        return True
    return expr.lstrip("( ").startswith("-") and bool(re.search(r"[\w.)]$", stripped))


def _wrong_claim(line: str) -> bool:
    return any(not c.holds for c in arithmetic_claims(line))


def _replace(line: str, span: tuple[int, int], new: str) -> str:
    return line[: span[0]] + new + line[span[1]:]


class GsmSymbolic(RgFamily):
    """Grade-school word problems: the steps are reasoning-gym's own chain of thought."""

    def accept(self, entry: dict[str, Any]) -> bool:
        """Also not when its chain of thought makes a wrong claim (``28.44 - 13.44 = 14``)."""
        lines = entry["metadata"]["answer_cot"].splitlines()
        return super().accept(entry) and not any(_wrong_claim(line) for line in lines)

    def check_step(self, task: Task, previous: list[str], step: str) -> int | None:
        """-1 when the line makes a wrong arithmetic claim; None otherwise (prose cannot be checked)."""
        return -1 if _wrong_claim(step) else None

    def worked_solution(self, task: Task) -> Solution:
        lines = [ln.strip() for ln in task.metadata["answer_cot"].splitlines()]
        return [ln for ln in lines if ln and not ln.startswith("####")], task.answer

    def flawed_solution(self, task: Task, rng: Random, kind: str) -> Solution:
        """Rewrites one arithmetic claim: ``arithmetic_slip`` changes its result (a slip in a line
        whose result is the answer carries to the answer); ``wrong_operand`` changes its first
        number, keeping the result; ``skipped_step`` states the next claim's result and leaves
        the lines up to that claim out (a slip when no such pair fits)."""
        _check_kind(kind)
        steps, final = self.worked_solution(task)
        claims = [(i, c) for i, s in enumerate(steps) for c in arithmetic_claims(s)[:1]]
        if not claims:
            raise ValueError(f"{task.id}: its solution makes no arithmetic claim to corrupt")
        if kind == "skipped_step":
            pairs = [(i, c, j, nxt) for (i, c), (j, nxt) in zip(claims, claims[1:]) if i != j]
            for i, c, j, nxt in rng.sample(pairs, len(pairs)):
                line = _replace(steps[i], c.result_span, nxt.stated_text)
                if _wrong_claim(line):
                    return [*steps[:i], line, *steps[j + 1:]], final
            kind = "arithmetic_slip"
        for i, c in rng.sample(claims, len(claims)):
            for d in rng.sample(_SLIPS, len(_SLIPS)):
                if kind == "arithmetic_slip":
                    wrong = fmt(c.stated + d)
                    line = _replace(steps[i], c.result_span, wrong)
                else:
                    operand = Fraction(steps[i][slice(*c.operand_span)].replace(",", ""))
                    line = _replace(steps[i], c.operand_span, fmt(operand + d))
                if not _wrong_claim(line):
                    continue
                if kind == "arithmetic_slip" and _same_number(c.stated_text, final):
                    tail = [re.sub(rf"(?<![\d.]){re.escape(final)}(?![\d.])", wrong, s) for s in steps[i + 1:]]
                    return [*steps[:i], line, *tail], wrong
                return [*steps[:i], line, *steps[i + 1:]], final
        raise ValueError(f"{task.id}: no {kind} flaw fits")


def _same_number(a: str, b: str) -> bool:
    try:
        return Fraction(a.replace(",", "")) == Fraction(b.replace(",", ""))
    except ValueError:
        return False


# ---- registry and module-level API ----------------------------------------------------------

FAMILIES: dict[str, RgFamily] = {
    f.name: f
    for f in (
        Countdown("countdown", "countdown"),
        ChainArithmetic("chain_arithmetic", "chain_sum"),
        SimpleEquations("simple_equations", "simple_equations"),
        GsmSymbolic("gsm_symbolic", "gsm_symbolic"),
    )
}


def get_family(name: str) -> RgFamily:
    """The family called ``name``; an unknown name is a ValueError (so pydantic reports it as a
    params error) that suggests the closest one."""
    if name not in FAMILIES:
        hint = did_you_mean(name, FAMILIES)
        raise ValueError(f"unknown reasoning task family {name!r}{hint}; known: {', '.join(FAMILIES)}")
    return FAMILIES[name]


def worked_solution(task: Task) -> Solution:
    """A correct solution: every step passes the family's checker and the answer scores."""
    return get_family(task.family).worked_solution(task)


def flawed_solution(task: Task, rng: Random, kind: str) -> Solution:
    """A solution with one step of the given kind of error (one of ``FLAW_KINDS``), which the
    family's checker rejects; the steps before it are the worked solution's."""
    return get_family(task.family).flawed_solution(task, rng, kind)


def make_tasks(family: str, n: int, seed: int, **difficulty: Any) -> list[Task]:
    """``n`` tasks of ``family``, the same for the same arguments; ``difficulty`` are the keyword
    arguments of the reasoning-gym dataset's config (over the family's defaults). A prefix of a
    longer list for the same seed; different seeds never share items (see ``SEED_STRIDE``)."""
    fam = get_family(family)
    if not 0 <= n < SEED_STRIDE // 2:
        raise ValueError(f"n must be in [0, {SEED_STRIDE // 2}), got {n}")
    ds = rg_dataset(fam, seed, size=2 * n + 16, **difficulty)
    tasks: list[Task] = []
    for idx in range(len(ds)):
        if len(tasks) == n:
            break
        entry = ds[idx]
        if fam.accept(entry):
            meta = json.loads(json.dumps(entry["metadata"], default=str))  # gsm has Fractions
            tasks.append(Task(f"{family}-{seed}-{len(tasks)}", family, entry["question"], str(entry["answer"]), meta))
    if len(tasks) < n:
        raise ValueError(f"{family}: only {len(tasks)} of {n} generated tasks are usable with {difficulty}")
    return tasks


def rg_dataset(fam: RgFamily, seed: int, size: int = 1, **difficulty: Any):
    """The family's reasoning-gym dataset; bad difficulty arguments are a ValueError naming the
    config's fields."""
    import dataclasses

    import reasoning_gym as rg
    from reasoning_gym.factory import DATASETS

    kwargs = {**fam.defaults, **difficulty}
    fields = sorted(f.name for f in dataclasses.fields(DATASETS[fam.rg_name][1]) if f.name not in ("seed", "size"))
    unknown = sorted(set(kwargs) - set(fields))
    if unknown:
        raise ValueError(f"{fam.name}: unknown difficulty settings {unknown}; reasoning-gym's "
                         f"{fam.rg_name} takes {fields}")
    try:
        return rg.create_dataset(fam.rg_name, size=size, seed=seed * SEED_STRIDE, **kwargs)
    except (AssertionError, TypeError, ValueError) as exc:
        raise ValueError(f"{fam.name}: invalid difficulty {kwargs}: {exc}") from exc
