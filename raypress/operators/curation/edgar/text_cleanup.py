"""Line-level cleanup of EDGAR document text, shared by the HTML and the plain-text paths of
``edgar_html_to_text``: Unicode and entity normalisation, table cells joined into one row line,
and page furniture removed (page numbers, rule lines, "Table of Contents" links, running headers).

Unicode: NFKC, except for superscripts, subscripts and vulgar fractions, which keep their own
characters (NFKC would glue a footnote mark to its word, ``sales¹`` -> ``sales1``, and turn ``½``
into ``1⁄2``), and spacing accents such as ``¨`` (a Wingdings check box in many filings), which
NFKC would split into a space and a combining mark.  NFKC folds no-break and other typographic
spaces into a space, ligatures (``ﬁ``) into letters and full-width forms into ASCII; curly quotes
and dashes are kept.  Soft hyphens, zero-width characters, direction marks and byte-order marks
are removed.

Page furniture, removed when alone on its line: page numbers (``12``, ``- 12 -``, ``F-12``,
``S-ii``, ``Page 12``, ``Page 12 of 40``; not ``-0-``, which means nil, nor a 4-digit year), rule
lines (``_____``, ``- -----``), "Table of Contents" / "Index" / "Page" links and headings.
Running headers and footers: a short line (at most ``HEADER_MAX_CHARS``; a table row only when it
has one cell, i.e. is page layout) with a word in it (a line of figures is data) whose shape
(lower-cased, each run of digits read as one ``#``) repeats on at least half of the pages and at
least 3 times, e.g. ``Apple Inc. | 2024 Form 10-K | 23``.  Documents of fewer than 3 pages keep
their repeated lines: there is no page structure to tell a running header from a phrase.
"""

from __future__ import annotations

import html
import re
import unicodedata
from collections import Counter

# Characters the extraction uses as structure markers inside text: Unicode private-use code points,
# removed from the input first so that a document can never fake one.
PARA = "\ue000"  # paragraph break (block element): a blank line
LINE = "\ue001"  # line break (<br>, <li>): a new line
CELL = "\ue002"  # start of a table cell
ROW = "\ue003"  # start of a table row
TABLE_START = "\ue004"
TABLE_END = "\ue005"
ROW_MARK = "\ue006"  # leads a finished table-row line (no space after it) until the very end
MARKERS = PARA + LINE + CELL + ROW + TABLE_START + TABLE_END + ROW_MARK
MARKER_RE = re.compile(f"[{MARKERS}]")

CELL_SEP = " | "
HEADER_MAX_CHARS = 100

_INVISIBLE = re.compile("[\u00ad\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\ufeff]")


def _keep_chars() -> str:
    """The characters whose compatibility decomposition is <super>, <sub> or <fraction>, and the
    spacing accents NFKC turns into a space and a combining mark (``¨`` -> `` ̈``)."""
    chars = []
    for cp in list(range(0x80, 0x3400)) + list(range(0xA700, 0xA800)) + list(range(0xFE00, 0xFFF0)):
        c = chr(cp)
        tag = unicodedata.decomposition(c).split(" ", 1)[0]
        nfkc = unicodedata.normalize("NFKC", c)
        if tag in ("<super>", "<sub>", "<fraction>") or (len(nfkc) > 1 and nfkc[0] == " "):
            chars.append(c)
    return "".join(chars)


_KEEP = _keep_chars()
_KEEP_RE = re.compile(f"([{re.escape(_KEEP)}]+)")


def normalize_unicode(text: str) -> str:
    """NFKC except superscripts, subscripts and fractions; invisible characters removed."""
    if text.isascii():
        return text
    if _KEEP_RE.search(text) is None:
        text = unicodedata.normalize("NFKC", text)
    else:
        parts = _KEEP_RE.split(text)
        parts[::2] = [unicodedata.normalize("NFKC", p) for p in parts[::2]]
        text = "".join(parts)
    return _INVISIBLE.sub("", text)


# Named and numeric character references, only with their closing ";" (so "AT&T" and "S&P" stay).
_ENTITY = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")


def decode_entities(text: str) -> str:
    """HTML entities in a plain-text document (``&amp;``, ``&#8217;``)."""
    if "&" not in text:
        return text
    return _ENTITY.sub(lambda m: html.unescape(m.group()), text)


# --- table rows --------------------------------------------------------------------------------

_CURRENCY = frozenset(("$", "US$", "€", "£", "¥", "(", "($", "$(", "C$", "A$"))
_CLOSERS = re.compile(r"^(?:\)|%|\)%|%\)|\)\s*%)$")
_LIST_LABEL = re.compile(r"^(?:[•·▪◦○●■□►➢✓☐☑☒✔✗]|\(?[0-9]{1,2}[.)]|\(?[a-zA-Z][.)]|\([ivxlc]{1,5}\)|\([a-zA-Z0-9]{1,2}\))$")


def join_cells(cells: list[str]) -> str:
    """One table row as a line: empty cells dropped, the rest joined by ``CELL_SEP``.

    Filings put a currency sign, an opening parenthesis, a closing parenthesis or a percent sign
    in a cell of its own (``$`` | ``391,035``; ``(1,234`` | ``)``): they are glued back to their
    number, so ``$391,035`` and ``(1,234)`` read as one value.  A bullet or a list label alone in
    a row's first cell (``•`` | text; ``(a)`` | text; ``☐`` | text) is joined to its text by a space."""
    out: list[str] = []
    glue = ""  # a pending prefix: currency sign (no space) or list label (with a space)
    for raw in cells:
        cell = " ".join(raw.split())
        if not cell:
            continue
        if cell in _CURRENCY:
            if glue and not glue.endswith(" "):  # two signs in a row (no figure yet): keep both
                out.append(glue)
                glue = ""
            glue += cell
            continue
        if out and not glue and _CLOSERS.match(cell):
            out[-1] += cell
            continue
        if not out and not glue and _LIST_LABEL.match(cell):
            glue = cell + " "
            continue
        out.append(glue + cell)
        glue = ""
    if glue:
        out.append(glue.strip())
    return CELL_SEP.join(out)


def table_rows(body: str) -> str:
    """The inside of one table (row and cell markers, whitespace already collapsed) -> its row
    lines, each marked with ``ROW_MARK``, the table set apart by blank lines."""
    lines = []
    for row in body.split(ROW):
        for brk in (PARA, LINE, TABLE_START, TABLE_END):
            row = row.replace(brk, " ")
        line = join_cells(row.split(CELL))
        if line:
            lines.append(ROW_MARK + line)
    return PARA + LINE.join(lines) + PARA if lines else PARA


# --- page furniture ----------------------------------------------------------------------------

_PAGE_WORD = r"(?:[Pp]age|PAGE)"
_PAGE_NUMBER = re.compile(
    r"^(?:"
    rf"(?:{_PAGE_WORD}\s*)?[-–—(\[]?\s*(?:[A-Z]{{1,3}}\s?[-–—]\s?)?(?:[1-9][0-9]{{0,2}}|(?=[ivx])x{{0,3}}(?:ix|iv|v?i{{0,3}}))\s*[-–—)\]]?"
    rf"|{_PAGE_WORD}\s+[0-9]{{1,4}}\s+(?:of|OF)\s+[0-9]{{1,4}}"
    r")$"
)
_TOC_LINE = re.compile(
    r"^[\[(]?\s*(?:(?:return|back|go)\s+to\s+)?(?:the\s+)?(?:table\s+of\s+contents|contents|toc|index|page)\s*[\])]?(?:\s*\(continued\))?$",
    re.IGNORECASE,
)
_RULE_LINE = re.compile(r"^(?=(?:\s*[-_=*~.•·+#]){3})[-_=*~.•·+#\s]+$")
_DIGITS = re.compile(r"[0-9]+")
_WORD = re.compile(r"[^\W\d_]{2}")  # two letters in a row: a line of figures is data, never a header
_LONE_BULLET = re.compile(r"^[•·▪◦○●■□►➢✓]$")


def is_furniture(line: str) -> bool:
    """A page number, a rule line or a "Table of Contents" link, alone on its line."""
    return bool(_PAGE_NUMBER.match(line) or _TOC_LINE.match(line) or _RULE_LINE.match(line))


def _header_shape(line: str) -> str:
    return _DIGITS.sub("#", line.lower())


def _header_candidate(line: str) -> bool:
    """Short, with a word, and not a data row (a table row of one cell is page layout)."""
    return (bool(line) and len(line) <= HEADER_MAX_CHARS and (line[0] != ROW_MARK or CELL_SEP not in line)
            and _WORD.search(line) is not None)


def running_headers(lines: list[str], pages: int) -> set[str]:
    """Shapes of the short lines repeated on at least half of the ``pages`` (and at least 3 times)."""
    if pages < 3:
        return set()
    counts = Counter(_header_shape(s.lstrip(ROW_MARK)) for s in lines if _header_candidate(s))
    least = max(3, pages // 2)
    return {shape for shape, n in counts.items() if n >= least}


def clean_lines(text: str, pages: int, min_line_chars: int = 0) -> str:
    """Lines (table rows marked with ``ROW_MARK``) -> the final text: each line stripped, furniture
    and running headers removed, a lone bullet joined to the next line, short prose lines dropped
    when ``min_line_chars`` asks, at most one blank line between paragraphs."""
    lines = [s.strip() for s in text.split("\n")]
    headers = running_headers(lines, pages)
    out: list[str] = []
    bullet = ""
    for line in lines:
        if not line:
            if out and out[-1]:
                out.append("")
            continue
        is_row = line[0] == ROW_MARK
        body = line[1:] if is_row else line
        if not body:
            if out and out[-1]:
                out.append("")
            continue
        if is_furniture(body):
            continue
        if headers and _header_candidate(line) and _header_shape(body) in headers:
            continue
        if not is_row:
            if _LONE_BULLET.match(body):
                bullet = body + " "
                continue
            if len(body) < min_line_chars:
                continue
        out.append(bullet + body)
        bullet = ""
    while out and not out[-1]:
        out.pop()
    return "\n".join(out)
