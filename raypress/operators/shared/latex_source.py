"""What both the arXiv source reader and the LaTeX extractor need to know about TeX source text:
where comments start, how TeX joins a line that ends in a comment, which figure files count.

Shared (io's ``read_arxiv`` finds the main file and its figures; curation's
``latex_to_interleaved`` extracts the text) so the two domains do not import each other."""

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
