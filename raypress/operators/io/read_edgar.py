"""`read_edgar`: SEC EDGAR filings -> one row per ``<DOCUMENT>`` (BeanCounter's unit of text).

Input files are full submissions (``.txt``, the feed's ``.nc``; PEM-wrapped or not; gzip, bzip2 or
xz compressed recognised by content) or single filings saved as HTML (a main document, an
inline-XBRL file, an exhibit still wrapped in its ``<DOCUMENT>`` lines).  Parsing is
``edgar.sgml``'s; this module turns its parts into rows.

Columns: ``id`` (``{source}#{sequence}``), ``source`` (the path as matched), ``accession``,
``filename``, ``type_filing`` (the submission's form type), ``type_attachment`` (this document's
``<TYPE>``), ``form_type``, ``ts_accept`` (ISO datetime), ``sequence``, ``text`` (the content between
``<TEXT>`` and ``</TEXT>``, HTML or plain text as filed, decoded, line ends made ``\\n``, without
EDGAR's ``<XBRL>`` wrapper).  BeanCounter's release has ``type_filing`` and ``type_attachment``; we
add ``form_type``, the one key per-form statistics and filters need: the filing's form for its main
document (sequence 1: EDGAR's primary document), the attachment's type for every other document,
so "10-K" counts 10-K bodies and never their EX-21 or EX-99 exhibits.

Every ``<DOCUMENT>`` is a row: text parts live; binary parts (uuencoded images, spreadsheets, ZIP,
PDF) and machine parts (XBRL schema/linkbases/instance, the XBRL viewer's XML/JS/CSS, JSON) leave as
FILTERED tombstones (``binary_part`` / ``machine_part``, the detail naming the type and file), never
quarantined: they are by design not text.  A document that cannot be parsed (no ``<TEXT>``,
cut off, no ``</TEXT>``) is an ERROR tombstone with its byte offset; the rest of the file is kept.
A file that is no filing (empty, binary, neither SGML nor HTML) is one ERROR tombstone.
"""

from __future__ import annotations

import os
from functools import partial
from typing import Any, Iterator

import pyarrow as pa
from pydantic import Field

from raypress.operators.base import Params, Reader, RunContext
from raypress.operators.io.edgar.sgml import (
    EdgarDocument,
    EdgarHeader,
    FilingProblem,
    accession_from_name,
    decode_text,
    non_text_part,
    split_submission,
    unwrap,
)
from raypress.operators.io.sniff.magic import HEAD_BYTES, describe
from raypress.operators.registry import register
from raypress.operators.shared.files import Globs, expand_globs, map_files, open_maybe_compressed
from raypress.schema import DETAIL_COL, ID_COL, KIND_COL, NODE_COL, REASON_COL, TombstoneKind

ROW_SCHEMA = pa.schema(
    [
        (ID_COL, pa.string()),
        ("source", pa.string()),
        ("accession", pa.string()),
        ("filename", pa.string()),
        ("type_filing", pa.string()),
        ("type_attachment", pa.string()),
        ("form_type", pa.string()),
        ("ts_accept", pa.string()),
        ("sequence", pa.int32()),
        ("text", pa.string()),
    ]
)
COLUMNS = tuple(ROW_SCHEMA.names)
_SCHEMA = pa.schema(list(ROW_SCHEMA) + [(c, pa.string()) for c in (NODE_COL, KIND_COL, REASON_COL, DETAIL_COL)])
BYTES_PER_TABLE = 64 << 20  # Arrow string columns hold < 2 GiB per chunk; a 10-K with exhibits is far below
MAIN_SEQUENCE = 1  # EDGAR numbers the primary document 1


class ReadEdgarParams(Params):
    paths: Globs = Field(
        description="glob patterns of EDGAR files (.txt / .nc submissions, .htm/.html filings; "
        "compressed ones too), relative to the current directory",
    )


@register("read_edgar")
class ReadEdgar(Reader[ReadEdgarParams]):
    """Read EDGAR submissions and HTML filings: one row per <DOCUMENT>; binary and XBRL parts filtered."""

    writes = COLUMNS

    def read(self, ctx: RunContext):
        files = expand_globs(self.params.paths)
        return map_files(files, partial(read_edgar_file, node=ctx.node_id), ctx=ctx)


def read_edgar_file(path: str, abs_path: str, node: str) -> Iterator[pa.Table]:
    """Tables of rows (live rows and tombstones, in document order) for one file; pure, no Ray."""
    try:
        with open_maybe_compressed(abs_path) as f:
            data = f.read()
    except (OSError, EOFError) as exc:
        yield _table([_file_tombstone(path, node, "unreadable_file", f"{type(exc).__name__}: {exc}")])
        return
    try:
        submission = split_submission(data)
    except FilingProblem as exc:
        detail = exc.detail if exc.reason == "empty_file" else f"{exc.detail}; {describe(data[:HEAD_BYTES])}"
        yield _table([_file_tombstone(path, node, exc.reason, detail)])
        return
    accession = (submission.header.accession if submission.header else None) or accession_from_name(
        os.path.basename(path))
    if submission.layout == "html":
        submission.documents[0] = _named(submission.documents[0], os.path.basename(path))
    rows: list[dict[str, Any]] = []
    size = 0
    seen: set[str] = set()
    for doc in submission.documents:
        row = document_row(doc, path, node, submission.header, accession)
        row[ID_COL] = _unique(row[ID_COL], seen)
        rows.append(row)
        size += len(doc.body or b"")
        if size >= BYTES_PER_TABLE:
            yield _table(rows)
            rows, size = [], 0
    if rows:
        yield _table(rows)


def document_row(doc: EdgarDocument, source: str, node: str, header: EdgarHeader | None,
                 accession: str | None) -> dict[str, Any]:
    """One output row: a live text document, or a tombstone saying why its text is not there."""
    main = doc.number == MAIN_SEQUENCE
    # without a header (an extract, a saved .htm) only the primary document tells the filing's form
    type_filing = header.submission_type if header is not None and header.submission_type else (
        doc.type if main else None)
    row: dict[str, Any] = {
        ID_COL: f"{source}#{doc.number}",
        "source": source,
        "accession": accession,
        "filename": doc.filename,
        "type_filing": type_filing,
        "type_attachment": doc.type,
        "form_type": type_filing if main and type_filing else doc.type,
        "ts_accept": header.ts_accept if header is not None else None,
        "sequence": doc.number,
        "text": None,
    }
    if doc.problem is not None:
        return _dead(row, node, TombstoneKind.ERROR, *doc.problem)
    dropped = non_text_part(doc)
    if dropped is not None:
        return _dead(row, node, TombstoneKind.FILTERED, *dropped)
    content, _ = unwrap(doc.body or b"")
    row["text"] = decode_text(content)
    return row


def _named(doc: EdgarDocument, filename: str) -> EdgarDocument:
    """A single HTML filing is its own file: its file name is the document's."""
    return EdgarDocument(doc.offset, doc.position, doc.type, doc.sequence, doc.filename or filename,
                         doc.description, doc.body, doc.problem)


def _file_tombstone(path: str, node: str, reason: str, detail: str) -> dict[str, Any]:
    """The one row of a file that holds no filing: its id is the path (no document to number)."""
    row: dict[str, Any] = {ID_COL: path, "source": path, "accession": accession_from_name(os.path.basename(path))}
    return _dead(row, node, TombstoneKind.ERROR, reason, f"{path}: {detail}")


def _dead(row: dict[str, Any], node: str, kind: TombstoneKind, reason: str, detail: str) -> dict[str, Any]:
    row.update({NODE_COL: node, KIND_COL: kind.value, REASON_COL: reason, DETAIL_COL: detail})
    return row


def _unique(rid: str, seen: set[str]) -> str:
    """Sequences are unique in a well-formed submission; a repeated one gets a suffix."""
    out, n = rid, 1
    while out in seen:
        out, n = f"{rid}.{n}", n + 1
    seen.add(out)
    return out


def _table(rows: list[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=_SCHEMA)
