"""Data-Juicer's regular expressions on Python's ``re``: Unicode category escapes like ``\\p{P}``.

Data-Juicer compiles patterns such as ``ignore_pattern: '\\p{P}'`` (in 23 of its recipes) with the
third-party ``regex`` package; Python's ``re`` rejects ``\\p``.  ``compile_pattern`` compiles with
``re`` and, only where a pattern uses ``\\p{X}`` / ``\\P{X}`` (X a general category: ``P``, ``L``,
``Lu``, ``N``, ...), first spells those escapes out as character classes built from
``unicodedata`` (Python's Unicode version, which may trail ``regex``'s by a release)."""

from __future__ import annotations

import functools
import re
import sys
import unicodedata

_CATEGORIES = frozenset("C Cc Cf Cn Co Cs L Ll Lm Lo Lt Lu M Mc Me Mn N Nd Nl No P Pc Pd Pe Pf Pi Po Ps "
                        "S Sc Sk Sm So Z Zl Zp Zs".split())


@functools.lru_cache(maxsize=None)
def category_class(name: str) -> str:
    """The members of general category ``name`` (one letter: the whole group) as ranges for the
    inside of a ``[...]`` class."""
    if name.startswith("Is"):
        name = name[2:]
    if name not in _CATEGORIES:
        raise ValueError(f"\\p{{{name}}}: only Unicode general categories are supported "
                         f"({', '.join(sorted(_CATEGORIES))})")
    match = (lambda c: unicodedata.category(c).startswith(name)) if len(name) == 1 else \
        (lambda c: unicodedata.category(c) == name)
    parts, start, prev = [], None, None
    for cp in range(sys.maxunicode + 1):
        if match(chr(cp)):
            if start is None:
                start = cp
            prev = cp
        elif start is not None:
            parts.append(_range(start, prev))
            start = None
    if start is not None:
        parts.append(_range(start, prev))
    return "".join(parts)


def _range(lo: int, hi: int) -> str:
    return f"\\U{lo:08x}" if lo == hi else f"\\U{lo:08x}-\\U{hi:08x}"


def translate(pattern: str) -> str:
    """``pattern`` with every ``\\p{X}`` / ``\\P{X}`` spelled out for ``re``."""
    out: list[str] = []
    i, n, in_class = 0, len(pattern), False
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            if pattern[i + 1] in "pP" and pattern[i + 2: i + 3] == "{":
                end = pattern.find("}", i + 3)
                if end < 0:
                    raise ValueError(f"unterminated \\{pattern[i + 1]}{{ at position {i}")
                members = category_class(pattern[i + 3: end])
                negated = pattern[i + 1] == "P"
                if in_class and negated:
                    raise ValueError("\\P{...} inside [...] is not supported; use [^...\\p{...}] instead")
                out.append(members if in_class else ("[^" if negated else "[") + members + "]")
                i = end + 1
                continue
            out.append(pattern[i: i + 2])
            i += 2
            continue
        out.append(c)
        i += 1
        if c == "[" and not in_class:
            in_class = True
            for literal in ("^", "]"):  # '[^' and a ']' right after '[' or '[^' open the class
                if pattern[i: i + 1] == literal:
                    out.append(literal)
                    i += 1
        elif c == "]" and in_class:
            in_class = False
    return "".join(out)


@functools.lru_cache(maxsize=64)
def compile_pattern(pattern: str) -> re.Pattern[str]:
    """``re.compile(pattern)``, accepting Data-Juicer's ``\\p{X}`` category escapes; ValueError
    (with ``re``'s reason) for a pattern that is invalid either way."""
    try:
        return re.compile(pattern)
    except re.error as exc:
        if "\\p" not in pattern and "\\P" not in pattern:
            raise ValueError(str(exc)) from None
    try:
        return re.compile(translate(pattern))
    except re.error as exc:
        raise ValueError(str(exc)) from None
