"""The GSM-symbolic family: grade-school word problems whose steps are reasoning-gym's own chain
of thought, checked by the arithmetic claims in each line of prose.

Why its own module: reading ``a op b = r`` claims out of prose conservatively (a false -1
misleads the search) is most of this family's code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from random import Random
from typing import Any

from raypress.operators.reasoning.tasks.families.flaws import SLIPS, check_kind
from raypress.operators.reasoning.tasks.families.rg_family import RgFamily
from raypress.operators.reasoning.tasks.families.step_text import GLYPHS, Solution, fmt, safe_eval
from raypress.operators.reasoning.search.types import Task

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
    text = "".join(line[i] for i in keep).translate(GLYPHS)
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
        check_kind(kind)
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
            for d in rng.sample(SLIPS, len(SLIPS)):
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
