"""Step 2 of the LaTeX extraction: cleaned LaTeX -> pieces (text and figure references) in order.

Two walkers apply the same rules: TexSoup's parse tree (what MINT-1T uses) and a tolerant regex
token walker that takes over where TexSoup raises (unbalanced input) or would be too slow.  Text
is kept, unknown commands' ``{}`` arguments are text, titles and captions become paragraphs,
math stays LaTeX source, references and layout commands go, figure commands become ``Figure``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from raypress.operators.curation.latex.commands import (
    ARITY,
    DROP_ENVIRONMENTS,
    LINE,
    MATH_ENVIRONMENTS,
    PARA,
    SYMBOLS,
    command_kind,
)
from raypress.operators.curation.latex.lexing import group_end, read_args


@dataclass(frozen=True)
class Figure:
    """An ``\\includegraphics`` target as written in the source."""

    ref: str


Piece = str | Figure
_ESCAPES = re.compile(r"\\([%&_#${}])|\\\\|\\[ ,;:!>]|\\[@/\-]|~")


def unescape_text(text: str) -> str:
    """Text-mode escapes: ``\\%`` -> %, ``~`` -> space, ``\\\\`` -> line break, ``\\@`` -> nothing."""

    def sub(m: re.Match) -> str:
        s = m.group(0)
        if m.group(1):
            return m.group(1)
        if s == "\\\\":
            return LINE
        if s == "~" or s[1] in " ,;:!>":
            return " "
        return ""

    return _ESCAPES.sub(sub, text)


def texsoup_pieces(body: str, keep_math: bool = True) -> list[Piece]:
    """Walk TexSoup's parse of ``body``; raises whatever TexSoup raises on input it cannot parse."""
    from TexSoup import TexSoup

    soup = TexSoup(body)
    out: list[Piece] = []
    _walk(soup.expr._contents, out, keep_math)  # _contents: .contents drops whitespace (paragraphs)
    return out


def _walk(nodes: list[Any], out: list[Piece], keep_math: bool) -> None:
    from TexSoup.data import (
        BraceGroup,
        BracketGroup,
        TexCmd,
        TexDisplayMathEnv,
        TexDisplayMathModeEnv,
        TexMathEnv,
        TexMathModeEnv,
        TexNamedEnv,
    )

    for node in nodes:
        if isinstance(node, str):  # TexText is a str
            out.append(unescape_text(str(node)))
        elif isinstance(node, BraceGroup):
            _walk(node._contents, out, keep_math)
        elif isinstance(node, BracketGroup):  # a bare [ ... ] in running text
            out.append("[")
            _walk(node._contents, out, keep_math)
            out.append("]")
        elif isinstance(node, (TexMathModeEnv, TexDisplayMathModeEnv, TexMathEnv, TexDisplayMathEnv)):
            if keep_math:
                out.append(str(node))
        elif isinstance(node, TexNamedEnv):
            if node.name in MATH_ENVIRONMENTS:
                if keep_math:
                    out.append(str(node))
            elif node.name in DROP_ENVIRONMENTS:
                continue
            else:  # environments are blocks: a line break around them (the abstract: a paragraph)
                edge = PARA if node.name == "abstract" else LINE
                out.append(edge)
                _walk(node._contents, out, keep_math)
                out.append(edge)
        elif isinstance(node, TexCmd):
            _walk_command(node, out, keep_math, BraceGroup)


def _walk_command(node: Any, out: list[Piece], keep_math: bool, brace_type: type) -> None:
    kind = command_kind(node.name)
    if kind in ("figure", "title", "drop", "lastarg"):
        own, extra = split_args(list(node.args), ARITY.get(node.name.rstrip("*"), 1), brace_type)
        _command_args(kind, [a for a in own if isinstance(a, brace_type)], out, keep_math)
        _walk(extra, out, keep_math)  # groups TexSoup attached beyond the command's arity are text
        return
    braces = [a for a in node.args if isinstance(a, brace_type)]
    if kind == "symbol":
        out.append(SYMBOLS[node.name.rstrip("*")])
        if node.name == "item":  # \item[label] body: the label without its brackets, then the body
            for label in node.args:
                _walk(label._contents, out, keep_math)
                out.append(" ")
        else:  # a group TexSoup attached to an argument-less command is running text
            _walk(list(node.args), out, keep_math)
        _walk(node._contents, out, keep_math)
    elif kind == "noarg":
        _walk(list(node.args), out, keep_math)
    else:  # unknown command: the text of its {} arguments
        for arg in braces:
            _walk(arg._contents, out, keep_math)


def split_args(args: list[Any], arity: int, brace_type: type) -> tuple[list[Any], list[Any]]:
    """(the command's own arguments: up to its ``arity``-th ``{}``, what follows)."""
    seen = 0
    for i, arg in enumerate(args):
        if isinstance(arg, brace_type):
            seen += 1
            if seen == arity:
                return args[: i + 1], args[i + 1 :]
    return args, []


def _command_args(kind: str, braces: list[Any], out: list[Piece], keep_math: bool) -> None:
    if not braces or kind == "drop":
        return
    if kind == "figure":
        out.append(Figure(str(braces[0])[1:-1]))
    elif kind == "title":
        out.append(PARA)
        _walk(braces[-1]._contents, out, keep_math)
        out.append(PARA)
    else:  # lastarg
        _walk(braces[-1]._contents, out, keep_math)


# The regex walker: the same rules on a token stream, for input TexSoup rejects.
_FALLBACK_TOKEN = re.compile(
    r"(?P<math>\$\$(?:(?!\n[^\S\n]*\n).)+?\$\$|(?<!\\)\$(?:\\.|(?!\n[^\S\n]*\n)[^$\\])+?\$"
    r"|\\\((?:(?!\n[^\S\n]*\n).)+?\\\)|\\\[(?:(?!\n[^\S\n]*\n).)+?\\\])"
    r"|(?P<begin>\\begin\s*\{(?P<bname>[^{}]*)\})"
    r"|(?P<end>\\end\s*\{[^{}]*\})"
    r"|(?P<cmd>\\(?P<cname>[a-zA-Z@]+\*?))"
    r"|(?P<other>\\.|[{}])",
    re.S,
)


def regex_pieces(body: str, keep_math: bool = True) -> list[Piece]:
    """A tolerant walker for what TexSoup cannot parse: braces are dropped, not matched."""
    out: list[Piece] = []
    pos = 0
    while True:
        m = _FALLBACK_TOKEN.search(body, pos)
        if m is None:
            out.append(unescape_text(body[pos:]))
            return out
        out.append(unescape_text(body[pos : m.start()]))
        pos = m.end()
        if m.group("math"):
            if keep_math:
                out.append(m.group("math"))
        elif m.group("begin"):
            name = m.group("bname").strip()
            if name in MATH_ENVIRONMENTS:
                end = re.compile(rf"\\end\s*\{{{re.escape(name)}\}}").search(body, pos)
                stop = end.end() if end else len(body)
                if keep_math:
                    out.append(body[m.start() : stop])
                pos = stop
            else:
                _, pos = read_args(body, pos)  # an environment's own arguments are not text
                out.append(PARA if name == "abstract" else LINE)
        elif m.group("end"):
            out.append(PARA if m.group("end").endswith("{abstract}") else LINE)
        elif m.group("cmd"):
            pos = _regex_command(body, m.group("cname"), pos, out, keep_math)
        else:
            out.append(unescape_text(m.group("other")) if m.group("other") not in "{}" else "")


def _regex_command(body: str, name: str, pos: int, out: list[Piece], keep_math: bool) -> int:
    kind = command_kind(name)
    if kind in ("figure", "title", "drop", "lastarg"):
        args, end = read_args(body, pos, max_braces=ARITY.get(name.rstrip("*"), 1))
        braces = [c for o, c in args if o == "{"]
        if kind == "figure" and braces:
            out.append(Figure(braces[0]))
        elif kind == "title" and braces:
            out.extend([PARA, *regex_pieces(braces[-1], keep_math), PARA])
        elif kind == "lastarg" and braces:
            out.extend(regex_pieces(braces[-1], keep_math))
        return end
    if kind == "symbol":
        out.append(SYMBOLS[name.rstrip("*")])
        end = group_end(body, pos) if name == "item" and body.startswith("[", pos) else -1
        if end > 0:  # \item[label]: the label, without its brackets
            out.extend([*regex_pieces(body[pos + 1 : end - 1], keep_math), " "])
            return end
        return pos
    if body.startswith("[", pos) and kind == "text":  # \foo[options]: not text
        end = group_end(body, pos)
        return end if end > 0 else pos
    return pos  # text / noarg: the following groups flow on as text


def document_pieces(body: str, keep_math: bool = True, parser: str = "texsoup",
                    texsoup_max_chars: int | None = None) -> tuple[list[Piece], str]:
    """(pieces, parser used): TexSoup's walk, or the regex walker when TexSoup raises, when the
    body is longer than ``texsoup_max_chars``, or when asked for.  The regex walker is ~200x
    faster: TexSoup parses about 10 KB of LaTeX per second (measured on a busy 2-core machine)."""
    if parser == "regex" or (texsoup_max_chars is not None and len(body) > texsoup_max_chars):
        return regex_pieces(body, keep_math), "regex"
    try:
        return texsoup_pieces(body, keep_math), "texsoup"
    except Exception:  # noqa: BLE001 - TexSoup raises EOFError, TypeError, AssertionError, RecursionError...
        return regex_pieces(body, keep_math), "regex"
