"""What both the arXiv source reader and the LaTeX extractor need to know about TeX source text:
where comments start, how TeX joins a line that ends in a comment, which figure files count.

Shared (io's ``read_arxiv`` finds the main file and its figures; curation's
``latex_to_interleaved`` extracts the text) so the two domains do not import each other.  The text
domain's Data-Juicer LaTeX mappers take RedPajama's regex cleaning from here (last section)."""

from __future__ import annotations

import re

FIGURE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".pdf", ".eps")  # tried in this order

# A ``%`` after an even number of backslashes (``\%`` is a percent sign, ``\\%`` a line break and
# a comment).  The comment eats its line end and the next line's indentation, as in TeX, unless the
# next line is blank: that blank line is a paragraph break and must stay one.
_COMMENT = re.compile(r"(?<!\\)((?:\\\\)*)%[^\n]*(?:\n[ \t]*+(?!\n))?")


def strip_comments(text: str) -> str:
    return _COMMENT.sub(r"\1", text)


def comment_start(line: str) -> int:
    """Index of the ``%`` that starts a comment in ``line``, -1 when there is none."""
    m = re.search(r"(?<!\\)(?:\\\\)*%", line)
    return -1 if m is None else m.end() - 1


# -- RedPajama's regex cleaning, as Data-Juicer runs it -------------------------------------------
# Data-Juicer's LaTeX mappers (remove_comments/expand_macro/remove_header/remove_bibliography_mapper,
# from RedPajama's arxiv_cleaner) are line-oriented regexes, not TeX: the inline-comment regex also
# eats the character before the ``%`` (a newline too, joining a comment line to the line above) and
# keeps a comment after ``\\``; ``\paragraph`` only counts as a header when ``\subparagraph``
# follows it at once.  They are kept byte for byte here (Data-Juicer runs them with the ``regex``
# package; where ``re`` differs, ``\s`` below is written out) so that a Data-Juicer recipe gives
# Data-Juicer's text; ``strip_comments`` above is the TeX way, for MINT-1T's extraction.

_DJ_INLINE_COMMENT = re.compile(r"[^\\]%.+$", re.MULTILINE)
_DJ_LINE_COMMENT = re.compile(r"^%.*\n?", re.MULTILINE)


def dj_remove_comments(text: str, inline: bool = True, multiline: bool = True) -> str:
    """Data-Juicer's remove_comments_mapper: the inline pass, then the whole-line pass."""
    if "%" not in text:
        return text
    if inline:
        text = _DJ_INLINE_COMMENT.sub("", text)
    if multiline:
        text = _DJ_LINE_COMMENT.sub("", text)
    return text


# ``regex``'s \s is Unicode White_Space; ``re``'s also takes the separators U+001C..U+001F.
_RX_SPACE = r"[^\S\x1c-\x1f]"
_DJ_NEWCOMMAND = re.compile(r"\\\bnewcommand\b\*?\{(\\[a-zA-Z0-9]+?)\}\{(.*?)\}$", re.MULTILINE)
_DJ_DEF = re.compile(rf"\\def{_RX_SPACE}*(\\[a-zA-Z0-9]+?){_RX_SPACE}*\{{(.*?)\}}$", re.MULTILINE)


def dj_argless_macros(text: str) -> dict[str, str]:
    """Name -> body of every one-line ``\\newcommand{\\x}{...}`` then ``\\def\\x{...}`` (a later
    definition of a name replaces the body but keeps the name's first place in the order)."""
    macros: dict[str, str] = {}
    if "\\newcommand" in text:
        for m in _DJ_NEWCOMMAND.finditer(text):
            macros[m.group(1)] = m.group(2)
    if "\\def" in text:
        for m in _DJ_DEF.finditer(text):
            macros[m.group(1)] = m.group(2)
    return macros


def dj_expand_macros(text: str) -> str:
    """Data-Juicer's expand_macro_mapper: replace each argument-less macro by its body, one macro
    after the other in definition order, definitions included.

    An occurrence needs a following character that is not an ASCII letter or digit, and that
    character is consumed, so in ``\\x\\x.`` only the first is expanded, as in Data-Juicer.  The body
    goes in literally (Data-Juicer's ``unicode-escape`` round trip through the ``regex`` template
    gives back the body unchanged)."""
    for name, body in dj_argless_macros(text).items():
        if name not in text:
            continue
        text = re.sub("(" + re.escape(name) + ")([^a-zA-Z0-9])", lambda m, b=body: b + m.group(2), text)
    return text


_DJ_HEADER = re.compile(
    r"^(.*?)("
    r"\\\bchapter\b\*?(?:\[(.*?)\])?\{(.*?)\}|"
    r"\\\bpart\b\*?(?:\[(.*?)\])?\{(.*?)\}|"
    r"\\\bsection\b\*?(?:\[(.*?)\])?\{(.*?)\}|"
    r"\\\bsubsection\b\*?(?:\[(.*?)\])?\{(.*?)\}|"
    r"\\\bsubsubsection\b\*?(?:\[(.*?)\])?\{(.*?)\}|"
    r"\\\bparagraph\b\*?(?:\[(.*?)\])?\{(.*?)\}"  # no "|": Data-Juicer's pattern joins these two
    r"\\\bsubparagraph\b\*?(?:\[(.*?)\])?\{(.*?)\}"
    r")",
    re.DOTALL,
)


def dj_from_first_header(text: str) -> str | None:
    """The text from its first sectioning command on (Data-Juicer's ``sub(pattern, r"\\2")``, the
    match being anchored at 0), or None when it has none."""
    m = _DJ_HEADER.search(text)
    return None if m is None else text[m.start(2):]


_DJ_BIBLIOGRAPHY = re.compile(
    r"(\\appendix|\\begin\{references\}|\\begin\{REFERENCES\}|\\begin\{thebibliography\}|\\bibliography\{.*\}).*$",
    re.DOTALL,
)


def dj_remove_bibliography(text: str) -> str:
    """Data-Juicer's remove_bibliography_mapper: cut the text at the first appendix/bibliography."""
    return _DJ_BIBLIOGRAPHY.sub("", text)
