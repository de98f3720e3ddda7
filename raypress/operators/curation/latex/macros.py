"""TeX's conditionals and macro definitions, resolved on the source text before parsing.

TexSoup does not run TeX: it would keep both branches of every ``\\if...\\fi`` and leave
``\\method{}`` unexpanded.  This module keeps the branch TeX would typeset, removes macro and
environment definitions, and substitutes the zero-argument macros a paper defines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from raypress.operators.curation.latex.commands import KNOWN_FALSE_CONDITIONALS, NOT_CONDITIONALS, command_kind
from raypress.operators.curation.latex.lexing import group_end, read_args

_CONTROL_WORD = re.compile(r"\\\\|\\([a-zA-Z@]+)")
_NEWIF = re.compile(r"\\newif\s*\\if([a-zA-Z@]+)")


@dataclass
class _CondToken:
    kind: str  # "if" | "else" | "or" | "fi" | "set"
    name: str
    start: int
    end: int
    orphan: bool = False


def resolve_conditionals(text: str) -> str:
    """Keep the branch of each ``\\if...\\fi`` that TeX would typeset, drop the tokens.

    ``\\iffalse`` is false, ``\\iftrue`` true, a ``\\newif`` switch is false until its
    ``\\footrue`` (followed in document order), and any other conditional (``\\ifx``,
    ``\\ifCLASSOPTION...``) is taken as true: its first branch is kept.  Tokens without a partner
    (an ``\\if`` never closed, a stray ``\\fi``) are removed and the text around them kept."""
    switches = {name: False for name in _NEWIF.findall(text)}
    text = _NEWIF.sub("", text)
    tokens = _conditional_tokens(text, switches)
    _pair(tokens)
    out: list[str] = []
    keep = True
    frames: list[list[Any]] = []  # [keep outside, value]
    pos = 0
    for tok in tokens:
        if keep:
            out.append(text[pos : tok.start])
        pos = tok.end
        if tok.orphan:
            continue
        if tok.kind == "set":
            if keep:
                base, value = (tok.name[:-4], True) if tok.name.endswith("true") else (tok.name[:-5], False)
                switches[base] = value
        elif tok.kind == "if":
            value = _condition_value(tok.name, switches)
            frames.append([keep, value])
            keep = keep and value is not False
        elif tok.kind in ("else", "or"):
            outer, value = frames[-1]
            keep = outer and value is False
            frames[-1][1] = True  # a later \or / \else branch is never taken
        else:  # fi
            keep = frames.pop()[0]
    if keep:
        out.append(text[pos:])
    return "".join(out)


def _conditional_tokens(text: str, switches: dict[str, bool]) -> list[_CondToken]:
    setters = {f"{name}true" for name in switches} | {f"{name}false" for name in switches}
    tokens = []
    for m in _CONTROL_WORD.finditer(text):
        name = m.group(1)
        if name is None:
            continue
        if name.startswith("if") and name not in NOT_CONDITIONALS:
            tokens.append(_CondToken("if", name, m.start(), m.end()))
        elif name in ("else", "or", "fi"):
            tokens.append(_CondToken(name, name, m.start(), m.end()))
        elif name in setters:
            tokens.append(_CondToken("set", name, m.start(), m.end()))
    return tokens


def _pair(tokens: list[_CondToken]) -> None:
    """Mark the tokens that have no partner as orphans (nesting as TeX counts it)."""
    stack: list[tuple[_CondToken, list[_CondToken]]] = []
    for tok in tokens:
        if tok.kind == "if":
            stack.append((tok, []))
        elif tok.kind in ("else", "or"):
            if stack:
                stack[-1][1].append(tok)
            else:
                tok.orphan = True
        elif tok.kind == "fi":
            if stack:
                stack.pop()
            else:
                tok.orphan = True
    for opener, branches in stack:  # never closed
        opener.orphan = True
        for tok in branches:
            tok.orphan = True


def _condition_value(name: str, switches: dict[str, bool]) -> bool | None:
    if name in KNOWN_FALSE_CONDITIONALS:
        return False
    if name == "iftrue":
        return True
    return switches.get(name[2:])  # None: unknown, its first branch is kept


_DEF_COMMAND = re.compile(
    r"\\(?:re)?newcommand\*?|\\providecommand\*?|\\DeclareRobustCommand\*?|\\[gex]?def(?![a-zA-Z@])"
)
_NEWENV = re.compile(r"\\(?:re)?newenvironment\*?")
_CS = re.compile(r"\s*\\([a-zA-Z@]+|.)")


def strip_definitions(text: str) -> tuple[str, dict[str, str]]:
    """Remove macro and environment definitions; return the text and the zero-argument macros
    (name -> body) that ``expand_macros`` can substitute."""
    macros: dict[str, str] = {}
    out: list[str] = []
    pos = 0
    for m in re.finditer(rf"{_DEF_COMMAND.pattern}|{_NEWENV.pattern}", text):
        if m.start() < pos:
            continue
        end, name, body, params = _definition_end(text, m)
        if end < 0:
            continue
        out.append(text[pos : m.start()])
        pos = end
        if name and body is not None and not params and "#" not in body:
            macros[name] = body
    out.append(text[pos:])
    return "".join(out), macros


def _definition_end(text: str, m: re.Match) -> tuple[int, str | None, str | None, bool]:
    """(index after the definition, macro name, body, has parameters); index -1 if malformed."""
    head = m.group(0)
    i = m.end()
    if "environment" in head:
        args, end = read_args(text, i, max_args=5)
        braces = [a for a in args if a[0] == "{"]
        return (end if len(braces) >= 3 else -1), None, None, True
    if head.lstrip("\\").rstrip("*").endswith("def"):  # \def\name<params>{body}
        cs = _CS.match(text, i)
        if cs is None:
            return -1, None, None, False
        brace = text.find("{", cs.end())
        if brace < 0:
            return -1, None, None, False
        end = group_end(text, brace)
        params = text[cs.end() : brace].strip()
        return end, cs.group(1), text[brace + 1 : end - 1] if end > 0 else None, bool(params)
    # \newcommand{\name}[n][default]{body} or \newcommand\name[n]{body}
    j = i
    while j < len(text) and text[j] in " \t\n":
        j += 1
    if text.startswith("{", j):
        close = group_end(text, j)
        if close < 0:
            return -1, None, None, False
        name = text[j + 1 : close - 1].strip().lstrip("\\")
        j = close
    else:
        cs = _CS.match(text, j)
        if cs is None:
            return -1, None, None, False
        name, j = cs.group(1), cs.end()
    args, end = read_args(text, j, max_args=3)
    if not args or args[-1][0] != "{":
        return -1, None, None, False
    has_params = any(opener == "[" for opener, _ in args[:-1])
    return end, name, args[-1][1], has_params


def expand_macros(text: str, macros: dict[str, str], rounds: int = 3) -> str:
    """Substitute zero-argument macros (``\\method`` -> ``FooNet``), nested ones up to ``rounds``
    deep; a macro whose expansion would grow the text past 4x stops the expansion."""
    # a (re)definition of a command the walkers handle (\section, \cite...) keeps their meaning
    names = [n for n in macros if re.fullmatch(r"[a-zA-Z@]+", n) and command_kind(n) == "text"]
    if not names:
        return text
    alternatives = "|".join(sorted(map(re.escape, names), key=len, reverse=True))
    # after an even number of backslashes: in ``\\ours`` the macro is not ``\ours`` but ``\\``
    pattern = re.compile(r"(?<!\\)((?:\\\\)*)\\(" + alternatives + r")(?![a-zA-Z@])")
    limit = 4 * len(text) + 10_000
    for _ in range(rounds):
        expanded = pattern.sub(lambda m: m.group(1) + macros[m.group(2)], text)
        if expanded == text or len(expanded) > limit:
            break
        text = expanded
    return text
