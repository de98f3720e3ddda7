"""edgar_html_to_text (BeanCounter): one EDGAR document's HTML/XHTML (inline XBRL included) or
plain text -> clean text.

Per row, HTML or plain text is told apart by HTML tags (``<html``, ``<div``, ``<p``, ``<td``,
``<font``...); the 1990s plain-text markup (``<PAGE>``, ``<TABLE>``, ``<S>``, ``<C>``) is not HTML.
A row still wrapped in its SGML ``<DOCUMENT>`` lines is cut to the part inside ``<TEXT>``.

HTML, parsed once by selectolax (lexbor):
- removed with their content: ``<head>``, scripts, styles, ``<ix:header>`` (the hidden XBRL facts,
  contexts and units) and every element styled ``display:none``; every other tag, the ``ix:``
  ones included, just gives up its text, and entities are decoded by the parser;
- block elements (``p``, ``div``, headings, lists, ``blockquote``, ``hr``...) end a paragraph (a
  blank line), ``<br>`` and ``<li>`` start a line, ``<pre>`` keeps its line breaks;
- tables (``tables: keep``): one line per ``<tr>``, non-empty cells joined by `` | ``, a ``$``,
  ``(`` or ``)``/``%`` cell glued to its number (``$391,035``, ``(1,234)``), so a row's numbers
  stay on one line in order; ``tables: drop`` removes them.
The structure marks are private-use characters put in front of the tags by regular expressions
before parsing, so the parser's one ``text()`` call yields the whole layout: no Python work per
node, only per table row.

Plain text: line breaks kept; ``<PAGE>`` lines, form feeds and the table markup tags removed;
entities with their ``;`` decoded; ``tables: drop`` removes ``<TABLE>...</TABLE>`` blocks.

Both then go through ``edgar.text_cleanup``: Unicode (NFKC but superscripts and fractions),
runs of spaces collapsed, lines stripped, page numbers / rule lines / "Table of Contents" links /
running headers removed, at most one blank line between paragraphs.

A row that looks binary (control characters) raises ``ValueError`` naming the row id and this op:
the runner quarantines that row only.  An HTML page with no visible text yields an empty string,
not an error: a later minimum-characters filter drops it with its reason.
"""

from __future__ import annotations

import re
from typing import Literal

import pyarrow as pa
from pydantic import Field
from selectolax.lexbor import LexborHTMLParser

from raypress.operators.base import TextMapper, TextParams
from raypress.operators.curation.edgar.text_cleanup import (
    CELL,
    LINE,
    MARKER_RE,
    MARKERS,
    PARA,
    ROW,
    ROW_MARK,
    TABLE_END,
    TABLE_START,
    clean_lines,
    decode_entities,
    normalize_unicode,
    table_rows,
)
from raypress.operators.registry import register
from raypress.schema import ID_COL

OP = "edgar_html_to_text"

_HTML_TAG = re.compile(r"<(?:!doctype\s+html|html|body|div|p|br|font|span|td|tr|center|h[1-6]|ix:|a\s)\b", re.I)
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1a\x1c-\x1f]")
_BINARY_SHARE = 0.01
_PROBE = 65536


def is_html(text: str) -> bool:
    """True when the document has HTML tags (EDGAR's plain-text table tags do not count)."""
    return _HTML_TAG.search(text) is not None


def document_body(text: str) -> str:
    """The part inside ``<TEXT>`` when the row still carries its SGML ``<DOCUMENT>`` lines."""
    head = text[:4096].lstrip()
    if not head[:10].upper().startswith("<DOCUMENT>"):
        return text
    m = re.search(r"<TEXT>", text, re.I)
    if m is None:
        return text
    end = text.rfind("</TEXT>")
    if end < m.end():
        end = text.upper().rfind("</TEXT>")
    return text[m.end(): end if end >= m.end() else len(text)]


def looks_binary(text: str) -> bool:
    """Control characters in more than 1% of the first 64k characters (uuencoded parts are text;
    raw bytes decoded as text are not)."""
    probe = text[:_PROBE]
    return bool(probe) and len(_CONTROL.findall(probe)) > _BINARY_SHARE * len(probe)


# --- HTML --------------------------------------------------------------------------------------

_PAGE_BREAK = re.compile(r"page-break-(?:before|after)\s*:\s*always")  # on the lower-cased page
_PRE = re.compile(r"(<pre\b[^>]*>)(.*?)(</pre\s*>)", re.I | re.S)
# The marks are inserted by patterns that start with the literal "<" (found fast), replaced by a
# literal (a template such as "\g<0>" costs a Python call per match on Python 3.11).  Text between
# a row and its cells would be foster-parented out of the table, so the cell and row marks go
# inside the cells: cell tags are rewritten without their attributes (which text does not need; a
# cell hidden by its own style, rare, stays visible).
_TD_TAG = re.compile(r"<td\b[^>]*>", re.I)
_TH_TAG = re.compile(r"<th\b[^>]*>", re.I)
_ROW_TD = re.compile(r"<tr\b[^>]*>\s*<td>" + CELL, re.I)
_ROW_TH = re.compile(r"<tr\b[^>]*>\s*<th>" + CELL, re.I)
_TABLE_OPEN = re.compile(r"<(?=table\b)", re.I)
_TABLE_CLOSE = re.compile(r"</table\s*>", re.I)
_BLOCK_TAG = re.compile(
    r"<(?=/?(?:p|div|h[1-6]|ul|ol|dl|blockquote|center|section|article|header|footer|address|figure|"
    r"figcaption|form|fieldset|caption|page)\b|hr\b)", re.I)
_LINE_TAG = re.compile(r"<(?=br\b|li\b|dt\b|dd\b)", re.I)
_DROP_TAGS = "head, title, script, style, noscript, template, object, embed, ix\\:header"
_HIDDEN = '[style*="display:none" i], [style*="display: none" i], [hidden]'
_TABLE_BODY = re.compile(f"{TABLE_START}([^{TABLE_START}{TABLE_END}]*){TABLE_END}")
_SPACES = re.compile(r"\s+")


def _mark_layout(raw: str) -> str:
    """Put the structure marks before (or inside) the tags that make lines, rows and cells."""
    if "<pre" in raw or "<PRE" in raw:
        raw = _PRE.sub(lambda m: m.group(1) + m.group(2).replace("\n", LINE) + m.group(3), raw)
    raw = _TD_TAG.sub("<td>" + CELL, raw)
    raw = _TH_TAG.sub("<th>" + CELL, raw)
    raw = _ROW_TD.sub("<tr><td>" + ROW + CELL, raw)
    raw = _ROW_TH.sub("<tr><th>" + ROW + CELL, raw)
    raw = _TABLE_OPEN.sub(TABLE_START + "<", raw)
    raw = _TABLE_CLOSE.sub("</table>" + TABLE_END, raw)
    raw = _BLOCK_TAG.sub(PARA + "<", raw)
    return _LINE_TAG.sub(LINE + "<", raw)


def _remove_invisible(tree: LexborHTMLParser, keep_tables: bool) -> None:
    """Decompose what a reader never sees (``<head>``, scripts, styles, ``<ix:header>``, elements
    styled ``display:none``; tables when dropped), outermost first: one CSS query, and a node
    inside a removed one is skipped (it is gone with its ancestor)."""
    nodes = tree.css(_DROP_TAGS + ", " + _HIDDEN + ("" if keep_tables else ", table"))
    ids = {n.mem_id for n in nodes}
    for node in nodes:
        parent = node.parent
        while parent is not None and parent.mem_id not in ids:
            parent = parent.parent
        if parent is None:
            node.decompose()


def html_text(raw: str, keep_tables: bool = True) -> tuple[str, int]:
    """HTML -> (lines with table rows marked, number of pages)."""
    low = raw.lower()
    pages = len(_PAGE_BREAK.findall(low)) + low.count("<page>") + 1
    tree = LexborHTMLParser(_mark_layout(raw))
    _remove_invisible(tree, keep_tables)
    root = tree.root
    text = root.text(deep=True, separator="", strip=False) if root is not None else ""
    text = _SPACES.sub(" ", normalize_unicode(text))
    for _ in range(4):  # innermost tables first; a nested table becomes text in its parent's cell
        text, n = _TABLE_BODY.subn(lambda m: table_rows(m.group(1)), text)
        if not n:
            break
    # marks left by broken or deeply nested tables
    text = text.replace(ROW, "\n").replace(CELL, " ").replace(TABLE_START, PARA).replace(TABLE_END, PARA)
    text = text.replace(PARA, "\n\n").replace(LINE, "\n")
    return text, pages


# --- plain text --------------------------------------------------------------------------------

_PAGE_LINE = re.compile(r"^[ \t]*<PAGE>[^\n]*$", re.M | re.I)
_PLAIN_TABLE = re.compile(r"<TABLE>(.*?)</TABLE>", re.S | re.I)
_PLAIN_TAG_LINE = re.compile(r"^[ \t]*(?:</?(?:TABLE|CAPTION|S|C|FN|F[0-9]{1,2})>[ \t]*)+\n", re.M | re.I)
_PLAIN_TAGS = re.compile(r"</?(?:TABLE|CAPTION|S|C|FN|F[0-9]{1,2}|PAGE)>", re.I)
_LINE_START = re.compile(r"^[^\S\n]*(?=\S)", re.M)  # a line's indentation, when it has text
_HSPACE = re.compile(r"[^\S\n]+")


def _plain_table(m: re.Match) -> str:
    """A ``<TABLE>`` block: lines of tags only (``<S>  <C>  <C>``) removed, the others marked as
    rows, the table set apart by blank lines."""
    body = _PLAIN_TAG_LINE.sub("", m.group(1))
    return "\n\n" + _LINE_START.sub(ROW_MARK, body) + "\n\n"


def plain_text(text: str, keep_tables: bool = True) -> tuple[str, int]:
    """A plain-text document -> (lines with table rows marked, number of pages)."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    pages = len(_PAGE_LINE.findall(text)) + text.count("\f") + 1
    text = _PAGE_LINE.sub("", text).replace("\f", "\n")
    if keep_tables:
        text = _PLAIN_TABLE.sub(_plain_table, text)
    else:
        text = _PLAIN_TABLE.sub("\n\n", text)
    text = _PLAIN_TAGS.sub(" ", _PLAIN_TAG_LINE.sub("", text))
    text = normalize_unicode(decode_entities(text))
    return _HSPACE.sub(" ", text), pages


# --- the op ------------------------------------------------------------------------------------


def edgar_to_text(text: str, keep_tables: bool = True, min_line_chars: int = 0) -> str:
    """One EDGAR document (HTML, XHTML with inline XBRL, or plain text) -> clean text."""
    text = document_body(text)
    if any(mark in text for mark in MARKERS):
        text = MARKER_RE.sub(" ", text)
    if is_html(text):
        lines, pages = html_text(text, keep_tables)
    else:
        lines, pages = plain_text(text, keep_tables)
    return clean_lines(lines, pages, min_line_chars).replace(ROW_MARK, "")


class EdgarHtmlToTextParams(TextParams):
    tables: Literal["keep", "drop"] = Field(
        default="keep", description="keep: one line per table row, cells joined by ' | '; drop: remove tables")
    min_line_chars: int = Field(
        default=0, ge=0, description="drop prose lines shorter than this (table rows always kept); 0 keeps all")


@register("edgar_html_to_text", requires={"selectolax": "curation"})
class EdgarHtmlToText(TextMapper[EdgarHtmlToTextParams]):
    """EDGAR document (inline-XBRL HTML or plain text) -> clean text: hidden XBRL header gone, ix:
    tags unwrapped, tables as ' | ' rows or dropped, page numbers / running headers / "Table of
    Contents" links removed, entities, Unicode and whitespace normalised.

    BeanCounter's extraction step; HTML vs plain text is decided per row."""

    def process_text(self, text: str) -> str:
        if looks_binary(text):
            raise ValueError("looks binary (control characters), not an HTML or text document")
        return edgar_to_text(text, self.params.tables == "keep", self.params.min_line_chars)

    def process_batch(self, table: pa.Table) -> pa.Table:
        key = self.params.text_key
        if key not in table.column_names:
            raise ValueError(f"{OP}: no column {key!r} (columns: {', '.join(table.column_names)})")
        texts = table.column(key).to_pylist()
        ids = table.column(ID_COL).to_pylist() if ID_COL in table.column_names else list(range(len(texts)))
        out = []
        for row_id, text in zip(ids, texts):
            if text is None:
                out.append(None)
                continue
            try:
                out.append(self.process_text(text))
            except Exception as exc:  # noqa: BLE001 - re-raised naming the row; the runner quarantines it
                raise ValueError(f"{OP}: row {row_id!r}: {exc}") from exc
        return table.set_column(table.schema.get_field_index(key), key, pa.array(out, pa.string()))
