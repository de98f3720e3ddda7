"""Step 1 of the LaTeX extraction: scanners and regexes that clean the source before TexSoup.

TexSoup mis-reads ``\\verb``, comments, verbatim-like environments, conditionals and macro
definitions, so they are handled here, on the text, in an order where each step needs the
previous one done (see ``clean_latex``); the preamble and what follows ``\\end{document}`` go
too (the preamble's ``\\title`` is kept), and so do tables, the bibliography and TikZ pictures.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from raypress.operators.curation.latex.commands import DROP_ENVIRONMENTS, VERBATIM_ENVIRONMENTS
from raypress.operators.curation.latex.lexing import command_args
from raypress.operators.curation.latex.macros import expand_macros, resolve_conditionals, strip_definitions
from raypress.operators.shared.latex_source import strip_comments

_ENV_TOKEN = re.compile(r"\\(begin|end)\s*\{\s*([^{}\s]+)\s*\}")


def drop_environments(text: str, names: frozenset[str] | set[str]) -> str:
    """Remove ``\\begin{X}...\\end{X}`` for every X in ``names``, nesting counted.  An unclosed
    ``\\begin{X}`` loses only itself: guessing where it ends could remove the rest of the paper."""
    out: list[str] = []
    pos = 0
    search_from = 0
    while True:
        start_m = None
        for m in _ENV_TOKEN.finditer(text, search_from):
            if m.group(1) == "begin" and m.group(2) in names:
                start_m = m
                break
        if start_m is None:
            break
        name = start_m.group(2)
        depth = 1
        end = -1
        for m in _ENV_TOKEN.finditer(text, start_m.end()):
            if m.group(2) != name:
                continue
            depth += 1 if m.group(1) == "begin" else -1
            if depth == 0:
                end = m.end()
                break
        out.append(text[pos : start_m.start()])
        pos = end if end >= 0 else start_m.end()
        search_from = pos
    out.append(text[pos:])
    return "".join(out)


_BEGIN_DOCUMENT = re.compile(r"\\begin\s*\{document\}")
_END_DOCUMENT = re.compile(r"\\end\s*\{document\}")


def split_document(text: str) -> tuple[str, str]:
    """(preamble, body): the body lies between ``\\begin{document}`` and ``\\end{document}``;
    without ``\\begin{document}`` (an inlined fragment) all of it is body."""
    begin = _BEGIN_DOCUMENT.search(text)
    preamble, body = (text[: begin.start()], text[begin.end() :]) if begin else ("", text)
    end = _END_DOCUMENT.search(body)
    return preamble, body[: end.start()] if end else body


def graphics_paths(text: str) -> list[str]:
    """The folders of every ``\\graphicspath{{a/}{b/}}``, in order."""
    dirs: list[str] = []
    for args in command_args(text, "graphicspath"):
        for opener, content in args[:1]:
            if opener == "{":
                dirs.extend(d.strip() for d in re.findall(r"\{([^{}]*)\}", content) if d.strip())
    return dirs


_ACCENT_MARKS = {"'": "\u0301", "`": "\u0300", "^": "\u0302", '"': "\u0308", "~": "\u0303", "=": "\u0304",
                 ".": "\u0307", "u": "\u0306", "v": "\u030c", "H": "\u030b", "c": "\u0327", "k": "\u0328",
                 "r": "\u030a"}
_ACCENT_BASE = r"(\\[ij](?![a-zA-Z])|[A-Za-z])"  # a letter, or dotless i/j
_SYMBOL_ACCENT = re.compile(r"""\\(['`^"~=.])\s*(?:\{\s*""" + _ACCENT_BASE + r"\s*\}|" + _ACCENT_BASE + ")")
_LETTER_ACCENT = re.compile(r"\\([uvHckr])(?:\s*\{\s*(\\[ij](?![a-zA-Z])|[A-Za-z])\s*\}|\s+([A-Za-z]))")


def replace_accents(text: str) -> str:
    """``\\'e`` / ``\\"{o}`` / ``\\v{c}`` -> é / ö / č (combining mark, NFC-composed later)."""

    def sub(m: re.Match) -> str:
        base = m.group(2) or m.group(3)
        base = {"\\i": "i", "\\j": "j"}.get(base, base)
        return base + _ACCENT_MARKS[m.group(1)]

    return _LETTER_ACCENT.sub(sub, _SYMBOL_ACCENT.sub(sub, text))


_VERB = re.compile(r"\\verb\*?([^a-zA-Z\s*])(.*?)\1")
_TEXT_SPECIALS = {"\\": "\\textbackslash{}", "{": "\\{", "}": "\\}", "%": "\\%", "$": "\\$", "&": "\\&",
                  "#": "\\#", "_": "\\_", "~": "\\textasciitilde{}", "^": "\\textasciicircum{}"}
_TEX_ASSIGNMENT = re.compile(
    r"\\[a-zA-Z@]+\s*=\s*-?\s*[\d.]+\s*(?:pt|em|ex|mm|cm|in|bp|pc|dd|cc|sp|mu|\\[a-zA-Z@]+)?"
    r"(?:\s*plus\s*-?[\d.]+\s*[a-z]{2})?(?:\s*minus\s*-?[\d.]+\s*[a-z]{2})?"
)


def verb_as_text(text: str) -> str:
    """``\\verb|a_%b|`` -> ``\\texttt{a\\_\\%b}``: its literal text, safe for every later step."""
    return _VERB.sub(lambda m: "\\texttt{" + "".join(_TEXT_SPECIALS.get(c, c) for c in m.group(2)) + "}", text)


@dataclass
class CleanLatex:
    body: str  # what lies between \begin{document} and \end{document}, pre-stripped
    graphics_paths: list[str]


def clean_latex(tex: str) -> CleanLatex:
    """Step 1 of the module docstring: everything regex/scanner-based, before TexSoup."""
    text = verb_as_text(tex.replace("\r\n", "\n").replace("\r", "\n"))  # before comments: \verb|%|
    text = strip_comments(text)
    # before conditionals and \end{document}: their content is not TeX (a verbatim example may
    # hold \end{document}, a comment environment an unmatched \fi)
    text = drop_environments(text, VERBATIM_ENVIRONMENTS)
    text = resolve_conditionals(text)
    text, macros = strip_definitions(text)
    text = expand_macros(text, macros)
    dirs = graphics_paths(text)
    preamble, body = split_document(text)
    titles = command_args(preamble, "title")
    title = next((c for args in titles for o, c in reversed(args) if o == "{"), None)
    if title:
        body = "\\title{" + title + "}\n\n" + body
    body = drop_environments(body, DROP_ENVIRONMENTS)
    body = re.sub(r"\\\\\*?\s*\[[^\]\n]*\]", r"\\\\", body)  # \\[2pt]: the length is not text
    body = _TEX_ASSIGNMENT.sub("", body)  # \itemsep=0pt: TeX register assignments
    body = replace_accents(body)
    return CleanLatex(body=body, graphics_paths=dirs)
