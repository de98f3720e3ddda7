"""Split an EDGAR filing (bytes) into its submission header and its ``<DOCUMENT>`` parts; pure Python.

EDGAR serves a submission as one SGML-ish text file: an optional PEM envelope (1990s files), a
header, then one ``<DOCUMENT>`` per file of the filing, each with ``<TYPE>``, ``<SEQUENCE>``,
``<FILENAME>``, ``<DESCRIPTION>`` lines and its content between ``<TEXT>`` and ``</TEXT>``.  The
header comes in two layouts: ``KEY: value`` lines inside ``<SEC-HEADER>`` (the ``.txt`` full
submissions, 1993 to today; modern ones add an ``<ACCEPTANCE-DATETIME>`` tag line) and one tag per
field (``<ACCESSION-NUMBER>``, ``<TYPE>``, ``<FILING-DATE>``... in the ``.nc`` feed files).  Lines
end in LF, CRLF or a bare CR (the feed), so every pattern here accepts all three.

The scan works on bytes so that a problem is reported at a byte offset of the file as it is, and
content is decoded only for the documents that are kept.  Nothing here knows Ray or Arrow: the
reader (``read_edgar``) turns the parts into rows.  A file that is not a submission is either a
single HTML filing (a saved ``.htm`` main document, an inline-XBRL file) or not a filing at all
(:class:`FilingProblem`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Iterator

# "at the start of a line": the file's start, or after a CR or LF (any line ending)
_BOL = rb"(?<![^\r\n])"
_EOL = re.compile(rb"\r\n|\r|\n")
_DOC_OPEN = re.compile(_BOL + rb"<DOCUMENT>")
# what ends a document's metadata lines: its <TEXT>, its end, or the next document
_META_END = re.compile(_BOL + rb"<(TEXT|/DOCUMENT|DOCUMENT)>")
_TEXT_END = re.compile(rb"</TEXT>|" + _BOL + rb"<DOCUMENT>")
_DOC_END = re.compile(_BOL + rb"(?:</DOCUMENT>|<DOCUMENT>)")
_META_TAG = re.compile(_BOL + rb"[ \t]*<([A-Z][A-Z0-9-]*)>[ \t]*([^\r\n]*?)[ \t]*(?=[\r\n]|$)")
# markers of a submission whose documents are missing (a file cut inside its header)
_SUBMISSION_MARK = re.compile(rb"<(?:SEC-DOCUMENT|SEC-HEADER|IMS-HEADER|SUBMISSION)>|ACCESSION NUMBER:")
# SGML wrapper around a document's content, e.g. <XBRL> around an inline-XBRL .htm
_WRAPPER_OPEN = re.compile(rb"\A\s*<(XBRL|XML|PDF|JSON)>[ \t]*(?:\r\n|\r|\n)?")
_UUENCODE_BEGIN = re.compile(rb"\A\s*begin[ \t]+[0-7]{3,4}[ \t]+([^\r\n]+?)[ \t]*(?:\r\n|\r|\n|$)")
# a single HTML filing: an optional XML declaration, comments or a doctype, then an HTML element
_HTML_START = re.compile(
    rb"\A(?:\xef\xbb\xbf)?\s*(?:<\?xml[^>]*>\s*)?(?:(?:<!--.*?-->|<!doctype[^>]*>)\s*)*"
    rb"<(?:html|head|body|title|meta|div|p|table|font|center)\b",
    re.IGNORECASE | re.DOTALL,
)
HTML_SNIFF_BYTES = 64 << 10  # room for the long comment blocks filing agents put before <html>
_IX_DOCUMENT_TYPE = re.compile(
    rb"<ix:nonNumeric\b[^>]*\bname=[\"']dei:DocumentType[\"'][^>]*>\s*([^<]+?)\s*<", re.IGNORECASE)
_ACCESSION = re.compile(r"(?<!\d)(\d{10}-\d{2}-\d{6})(?!\d)")

# Parts that are not text.  BINARY: files (mostly uuencoded in the submission); MACHINE: data for
# programs -- XBRL instance, schema and linkbases (EX-101.*), the XBRL viewer's R pages, scripts,
# style sheets and summaries (type XML), JSON.
BINARY_TYPES = frozenset({"GRAPHIC", "ZIP", "EXCEL", "PDF"})
BINARY_SUFFIXES = (".jpg", ".jpeg", ".gif", ".png", ".bmp", ".tif", ".tiff", ".pdf", ".zip", ".xls", ".xlsx")
MACHINE_TYPES = frozenset({"XML", "JSON", "XBRL"})
MACHINE_SUFFIXES = (".xsd", ".xml", ".json", ".js", ".css")
BINARY_PART = "binary_part"
MACHINE_PART = "machine_part"


class FilingProblem(ValueError):
    """The whole file is unusable: ``reason`` is the ledger category, ``detail`` says why."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True)
class EdgarHeader:
    """The submission-level fields of the header, in either layout; ``fields`` holds every field
    as first found (``-`` read as a space; in the tag layout the first company's nested fields too),
    for callers that need more than the four named ones."""

    accession: str | None
    submission_type: str | None
    accepted: str | None  # ISO datetime from ACCEPTANCE-DATETIME
    filed: str | None  # ISO datetime (midnight) from FILED AS OF DATE / FILING-DATE
    fields: dict[str, str] = field(default_factory=dict)

    @property
    def ts_accept(self) -> str | None:
        """When EDGAR accepted the filing; the filing date at midnight where no time was recorded
        (the 1990s headers and the feed files have none)."""
        return self.accepted or self.filed


@dataclass(frozen=True)
class EdgarDocument:
    """One ``<DOCUMENT>``: its metadata, and either its content (``body``) or why it has none
    (``problem`` = (reason, detail) naming the byte offset)."""

    offset: int  # byte offset of its <DOCUMENT> line (0 for a single HTML filing)
    position: int  # 1-based place among the file's documents
    type: str | None = None
    sequence: int | None = None
    filename: str | None = None
    description: str | None = None
    body: bytes | None = None  # the bytes between the <TEXT> line and the </TEXT> line, as filed
    problem: tuple[str, str] | None = None

    @property
    def number(self) -> int:
        """The document's number in the submission: its ``<SEQUENCE>``, else its position."""
        return self.sequence if self.sequence is not None else self.position


@dataclass(frozen=True)
class EdgarSubmission:
    """A parsed file: ``layout`` is ``"sgml"`` (header and/or ``<DOCUMENT>`` parts) or ``"html"``
    (a single HTML filing without any SGML; one document, its body the whole file)."""

    layout: str
    header: EdgarHeader | None
    documents: list[EdgarDocument]


def split_submission(data: bytes) -> EdgarSubmission:
    """The header and documents of a filing, or FilingProblem when the file holds no filing at all.

    A document that cannot be parsed (no ``<TEXT>``, cut off by the end of the file, no
    ``</TEXT>`` before the next document) is returned with its ``problem`` set, so the documents
    around it are kept and every ``<DOCUMENT>`` is accounted for."""
    if not data.strip():
        raise FilingProblem("empty_file", "the file has 0 bytes" if not data else
                            f"the file has only whitespace ({len(data)} bytes)")
    first = _DOC_OPEN.search(data)
    if first is None:
        if _SUBMISSION_MARK.search(data[:HTML_SNIFF_BYTES]):
            header = parse_header(data)
            raise FilingProblem("no_documents", f"a submission header (accession {header.accession}) but no "
                                f"<DOCUMENT> in {len(data)} bytes: the file is cut off or malformed")
        if not looks_like_html(data):
            raise FilingProblem("not_a_filing", "neither an EDGAR SGML submission (no <DOCUMENT>, no "
                                "submission header) nor an HTML filing")
        return EdgarSubmission("html", None, [EdgarDocument(0, 1, type=ixbrl_document_type(data), body=data)])
    head = data[: first.start()]
    header = parse_header(head) if head.strip() else None
    return EdgarSubmission("sgml", header, list(iter_documents(data, first.start())))


def iter_documents(data: bytes, start: int = 0) -> Iterator[EdgarDocument]:
    """Every ``<DOCUMENT>`` from ``start`` on, in file order; broken ones carry their problem."""
    pos, position = start, 0
    while (m := _DOC_OPEN.search(data, pos)) is not None:
        position += 1
        doc, pos = _read_document(data, m.start(), m.end(), position)
        yield doc


def _read_document(data: bytes, offset: int, meta_start: int, position: int) -> tuple[EdgarDocument, int]:
    """The document whose ``<DOCUMENT>`` line is at ``offset``, and where the scan goes on."""
    event = _META_END.search(data, meta_start)
    meta = _metadata(data[meta_start: event.start() if event else len(data)])
    doc = EdgarDocument(offset, position, type=meta.get("TYPE"), sequence=_int(meta.get("SEQUENCE")),
                        filename=meta.get("FILENAME"), description=meta.get("DESCRIPTION"))
    where = f"<DOCUMENT> at byte {offset} ({_name(doc)})"
    if event is None:
        return _broken(doc, "truncated_document", f"{where}: the file ends at byte {len(data)} before its <TEXT>"), \
            len(data)
    if event.group(1) != b"TEXT":
        end = event.end() if event.group(1) == b"/DOCUMENT" else event.start()
        return _broken(doc, "document_without_text", f"{where}: no <TEXT> before byte {event.start()}"), end
    body_start = _skip_eol(data, event.end())
    stop = _TEXT_END.search(data, body_start)
    if stop is None:
        return _broken(doc, "truncated_document",
                       f"{where}: the file ends at byte {len(data)} inside its <TEXT> (opened at byte "
                       f"{event.start()}, no </TEXT>)"), len(data)
    if stop.group(0) != b"</TEXT>":
        return _broken(doc, "unterminated_text",
                       f"{where}: no </TEXT> before the next <DOCUMENT> at byte {stop.start()}"), stop.start()
    body = data[body_start: _drop_eol_before(data, body_start, stop.start())]
    after = _DOC_END.search(data, stop.end())
    if after is None:
        nxt = len(data)
    else:
        nxt = after.end() if after.group(0) == b"</DOCUMENT>" else after.start()
    return EdgarDocument(offset, position, doc.type, doc.sequence, doc.filename, doc.description, body=body), nxt


def _broken(doc: EdgarDocument, reason: str, detail: str) -> EdgarDocument:
    return EdgarDocument(doc.offset, doc.position, doc.type, doc.sequence, doc.filename, doc.description,
                         problem=(reason, detail))


def _metadata(block: bytes) -> dict[str, str]:
    out: dict[str, str] = {}
    for m in _META_TAG.finditer(block):
        out.setdefault(m.group(1).decode("ascii"), _decode_field(m.group(2)))
    return {k: v for k, v in out.items() if v}


def _name(doc: EdgarDocument) -> str:
    parts = [doc.type or "no <TYPE>"]
    if doc.sequence is not None:
        parts.append(f"sequence {doc.sequence}")
    if doc.filename:
        parts.append(doc.filename)
    return ", ".join(parts)


def _skip_eol(data: bytes, pos: int) -> int:
    """Past one line break at ``pos`` (the end of the ``<TEXT>`` line), if there is one."""
    m = _EOL.match(data, pos)
    return m.end() if m else pos


def _drop_eol_before(data: bytes, lo: int, pos: int) -> int:
    """``pos`` moved before the line break that ends the content's last line (``</TEXT>``'s own)."""
    if pos - 2 >= lo and data[pos - 2: pos] == b"\r\n":
        return pos - 2
    if pos - 1 >= lo and data[pos - 1: pos] in (b"\n", b"\r"):
        return pos - 1
    return pos


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


# --- header -------------------------------------------------------------------------------------

_KEY_VALUE = re.compile(r"^([A-Z][A-Z0-9 ./&()-]*?):[ \t]*(.*?)[ \t]*$", re.MULTILINE)
_TAG_VALUE = re.compile(r"^<([A-Z][A-Z0-9-]*)>[ \t]*(\S.*?)[ \t]*$", re.MULTILINE)
_INDENTED_FORM_TYPE = re.compile(r"^[ \t]*(?:FORM TYPE:|<FORM-TYPE>)[ \t]*(\S.*?)[ \t]*$", re.MULTILINE)


def parse_header(head: bytes) -> EdgarHeader:
    """Submission fields from the part of the file before the first ``<DOCUMENT>``, in either
    layout: unindented ``KEY: value`` lines and ``<TAG>value`` lines, first occurrence wins (the
    nested company blocks come after the submission's own fields in both layouts)."""
    text = normalise_newlines(_decode_field(head))
    fields: dict[str, str] = {}
    for pattern in (_KEY_VALUE, _TAG_VALUE):
        for m in pattern.finditer(text):
            if m.group(2):
                fields.setdefault(m.group(1).replace("-", " "), m.group(2))
    submission_type = fields.get("CONFORMED SUBMISSION TYPE") or fields.get("TYPE")
    if submission_type is None and (m := _INDENTED_FORM_TYPE.search(text)):
        submission_type = m.group(1)
    return EdgarHeader(
        accession=fields.get("ACCESSION NUMBER"),
        submission_type=submission_type,
        accepted=iso_timestamp(fields.get("ACCEPTANCE DATETIME")),
        filed=iso_timestamp(fields.get("FILED AS OF DATE") or fields.get("FILING DATE")),
        fields=fields,
    )


def iso_timestamp(value: str | None) -> str | None:
    """``20250415163025`` -> ``2025-04-15T16:30:25``, ``19951228`` -> ``1995-12-28T00:00:00``;
    None for anything that is not a real date (a header typo must not become a wrong date)."""
    if not value:
        return None
    value = value.strip()
    fmt = {14: "%Y%m%d%H%M%S", 8: "%Y%m%d"}.get(len(value))
    if fmt is None or not value.isdigit():
        return None
    try:
        return datetime.strptime(value, fmt).isoformat(timespec="seconds")
    except ValueError:
        return None


# --- content --------------------------------------------------------------------------------------

def unwrap(body: bytes) -> tuple[bytes, str | None]:
    """The content without an SGML ``<XBRL>``/``<XML>``/``<PDF>``/``<JSON>`` wrapper, and the wrapper's
    name: EDGAR adds it around the file (an inline-XBRL ``.htm`` sits inside ``<XBRL>``), it is
    not part of the file as filed."""
    m = _WRAPPER_OPEN.match(body)
    if m is None:
        return body, None
    name = m.group(1)
    inner = body[m.end():]
    close = re.search(rb"(?:\r\n|\r|\n)?[ \t]*</" + name + rb">\s*\Z", inner)
    return (inner[: close.start()] if close else inner), name.decode("ascii")


def uuencoded_name(body: bytes) -> str | None:
    """The file name of a uuencoded part (``begin 644 ex99-1_001.jpg``), None if it is not one."""
    m = _UUENCODE_BEGIN.match(body[:1024])
    return None if m is None else _decode_field(m.group(1))


def non_text_part(doc: EdgarDocument) -> tuple[str, str] | None:
    """``(reason, detail)`` when the document is a binary or machine part, None when it is text.

    Decided by the content first (a uuencoded or PDF-wrapped body is binary whatever its type says),
    then by ``<TYPE>`` and the file name's suffix.  The detail names the type, e.g.
    ``GRAPHIC ex99-1_001.jpg (uuencoded)``."""
    body, wrapper = unwrap(doc.body or b"")
    dtype = (doc.type or "").upper()
    fname = doc.filename or ""
    suffix = fname.lower()
    label = f"{doc.type or 'no <TYPE>'} {fname}".rstrip()
    encoded = uuencoded_name(body)
    if encoded is not None:
        return BINARY_PART, f"{doc.type or 'no <TYPE>'} {fname or encoded} (uuencoded)"
    if wrapper == "PDF" or dtype in BINARY_TYPES or suffix.endswith(BINARY_SUFFIXES):
        return BINARY_PART, f"{label} ({wrapper or 'binary'})"
    if dtype.startswith("EX-101"):
        return MACHINE_PART, f"{label} (XBRL)"
    if dtype in MACHINE_TYPES or wrapper in ("XML", "JSON") or suffix.endswith(MACHINE_SUFFIXES):
        return MACHINE_PART, f"{label} ({wrapper or dtype or suffix.rsplit('.', 1)[-1].upper()})"
    return None


def decode_text(raw: bytes) -> str:
    """UTF-8 when the bytes are UTF-8; else Windows-1252 (the 1990s filings and many HTML exhibits
    are Latin-1 family); else UTF-8 with the bad bytes replaced.  Line endings become ``\\n``."""
    for codec in ("utf-8", "cp1252"):
        try:
            return normalise_newlines(raw.decode(codec))
        except UnicodeDecodeError:
            continue
    return normalise_newlines(raw.decode("utf-8", errors="replace"))


def normalise_newlines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def looks_like_html(data: bytes) -> bool:
    """An HTML (or XHTML / inline-XBRL) document, judged from its start, not its file name."""
    return _HTML_START.match(data[:HTML_SNIFF_BYTES]) is not None


def ixbrl_document_type(data: bytes) -> str | None:
    """The form an inline-XBRL filing declares (``dei:DocumentType``: ``10-K``, ``DEF 14A``...);
    what a saved main document without its submission says about its type."""
    m = _IX_DOCUMENT_TYPE.search(data)
    return None if m is None else " ".join(_decode_field(m.group(1)).split())


def accession_from_name(name: str) -> str | None:
    """``0001213900-25-032135`` when a file name carries an accession number, else None."""
    m = _ACCESSION.search(name)
    return None if m is None else m.group(1)


def _decode_field(raw: bytes) -> str:
    """Header and tag values: ASCII in practice; Latin-1 never fails on an odd byte."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")
