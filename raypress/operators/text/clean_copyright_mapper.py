"""clean_copyright_mapper (Data-Juicer, after RedPajama's code cleaning): drop a copyright header.

Two rules, as Data-Juicer applies them: if the text has a ``/* ... */`` comment, the *first* one
is cut when it mentions "copyright" (case-insensitive) and nothing else happens, even when it
does not; otherwise the leading lines that start with ``//``, ``#`` or ``--`` (or are empty) are
dropped, as most files that open with a comment block open with a licence."""

from __future__ import annotations

import re

from raypress.operators.base import TextMapper, TextParams
from raypress.operators.registry import register

# Data-Juicer's pattern for a C block comment; first_block_comment finds the same span faster.
BLOCK_COMMENT = re.compile(r"/\*[^*]*\*+(?:[^/*][^*]*\*+)*/")
_COPYRIGHT = re.compile("copyright", re.IGNORECASE)
_COMMENT_LINE_STARTS = ("//", "#", "--")


def first_block_comment(text: str) -> tuple[int, int] | None:
    """The span of ``BLOCK_COMMENT.search(text)``, with two ``str.find``: the pattern runs from a
    "/*" to the first "*/" after it (the closing star cannot be the opening one), so the leftmost
    match starts at the first "/*", and if that one is never closed no later one is either."""
    start = text.find("/*")
    if start < 0:
        return None
    end = text.find("*/", start + 2)
    return None if end < 0 else (start, end + 2)


def clean_copyright(text: str) -> str:
    """Data-Juicer's ``_process_single_sample``."""
    span = first_block_comment(text)
    if span:
        start, end = span
        if _COPYRIGHT.search(text, start, end):
            return text[:start] + text[end:]
        return text
    lines = text.split("\n")
    skip = 0
    for line in lines:
        if not line or line.startswith(_COMMENT_LINE_STARTS):
            skip += 1
        else:
            break
    return "\n".join(lines[skip:]) if skip else text


@register("clean_copyright_mapper")
class CleanCopyrightMapper(TextMapper[TextParams]):
    """Remove a copyright /* */ comment, else leading //, #, -- comment lines (Data-Juicer's op)."""

    def process_text(self, text: str) -> str:
        return clean_copyright(text)
