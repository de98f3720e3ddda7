"""Balanced ``{...}``/``[...]`` groups of TeX source: where one ends, which follow a command.

The scanners that clean LaTeX before parsing (definitions, ``\\graphicspath``, the title) and the
regex walker all read command arguments this way, with TeX's rules: ``\\{`` is not a delimiter,
braces nest inside brackets, a blank line ends a command's arguments.
"""

from __future__ import annotations

import re


def group_end(text: str, start: int) -> int:
    """Index just past the group opening at ``text[start]`` (``{`` or ``[``), -1 if unclosed.

    Braces nest inside brackets (``[a={x]}]``); ``\\{`` and ``\\}`` are not delimiters."""
    opener = text[start]
    closer = "}" if opener == "{" else "]"
    depth_brace = 0
    i = start + 1
    n = len(text)
    while i < n:
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == "{":
            depth_brace += 1
        elif c == "}":
            if depth_brace == 0:
                return i + 1 if closer == "}" else -1
            depth_brace -= 1
        elif c == "]" and closer == "]" and depth_brace == 0:
            return i + 1
        i += 1
    return -1


def read_args(text: str, pos: int, max_args: int = 9, max_braces: int = 9) -> tuple[list[tuple[str, str]], int]:
    """The ``[...]``/``{...}`` groups right after ``pos`` (spaces and one line break allowed
    between them, as LaTeX allows; a blank line ends them), at most ``max_braces`` ``{}`` ones:
    ``[(opener, content)]`` and the index after the last one."""
    args: list[tuple[str, str]] = []
    i = pos
    while len(args) < max_args and sum(1 for o, _ in args if o == "{") < max_braces:
        j = i
        while j < len(text) and text[j] in " \t\n":
            j += 1
        if j >= len(text) or text[j] not in "{[" or text.count("\n", i, j) > 1:
            break
        end = group_end(text, j)
        if end < 0:
            break
        args.append((text[j], text[j + 1 : end - 1]))
        i = end
    return args, i


def command_args(text: str, name: str) -> list[list[tuple[str, str]]]:
    """The argument groups of every ``\\name`` in ``text``."""
    found = []
    for m in re.finditer(rf"\\{re.escape(name)}(?![a-zA-Z@])\*?", text):
        args, _ = read_args(text, m.end())
        found.append(args)
    return found
