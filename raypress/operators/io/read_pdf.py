"""PDF files as rows (MINT-1T's PDF intake): one row per file with its bytes and page count.

MINT-1T skips PDFs over 50 MB or over 50 pages; those rows leave here as *filtered* tombstones
(reason ``file_too_large`` / ``too_many_pages``) so that the ledger counts them per rule.  A file
PyMuPDF cannot open (corrupt, empty, password-protected) is an *error* tombstone: it goes to
quarantine with PyMuPDF's message; so is a file that is no PDF at all, whatever its name says
(no ``%PDF-`` in its first 1024 bytes: ``not_a_pdf``, with what it looks like instead).
Extraction itself is ``pdf_to_interleaved``'s job, so the reader stays cheap: the size check
needs no read at all, the page count only opens the document.
"""

from __future__ import annotations

import os
from functools import partial
from typing import Any, Iterator

import pyarrow as pa
from pydantic import Field

from raypress.operators.base import Params, Reader, RunContext, json_detail
from raypress.operators.io.sniff.magic import HEAD_BYTES, describe
from raypress.operators.registry import register
from raypress.operators.shared.files import Globs, expand_globs, map_files
from raypress.operators.shared.pymupdf import import_pymupdf
from raypress.operators.shared.rows import combine
from raypress.schema import ID_COL, TombstoneKind, with_tombstones

COLUMNS = (ID_COL, "path", "pdf_bytes", "n_pages", "file_bytes")
# MINT-1T's limits.  "50 MB" is taken as 50 MiB.
MAX_FILE_BYTES = 50 * 1024 * 1024
MAX_PAGES = 50
PDF_MAGIC = b"%PDF-"
# large_binary: int64 offsets, so a block of many big PDFs never overflows Arrow's 2 GiB binary limit
ROW_SCHEMA = pa.schema(
    [
        (ID_COL, pa.string()),
        ("path", pa.string()),
        ("pdf_bytes", pa.large_binary()),
        ("n_pages", pa.int32()),
        ("file_bytes", pa.int64()),
    ]
)


class ReadPdfParams(Params):
    paths: Globs = Field(description="glob patterns of PDF files, relative to the current directory")
    max_file_bytes: int = Field(
        default=MAX_FILE_BYTES, ge=1,
        description="files larger than this many bytes are dropped (reason file_too_large); MINT-1T: 50 MB",
    )
    max_pages: int = Field(
        default=MAX_PAGES, ge=1,
        description="files with more pages than this are dropped (reason too_many_pages); MINT-1T: 50",
    )


@register("read_pdf", requires={"pymupdf": "curation"})
class ReadPdf(Reader[ReadPdfParams]):
    """Read PDF files (one row each: bytes, page count); over-limit files are filtered, unopenable ones quarantined."""

    writes = COLUMNS

    def read(self, ctx: RunContext):
        files = expand_globs(self.params.paths)
        return map_files(
            files,
            partial(read_pdf_file, node=ctx.node_id, max_file_bytes=self.params.max_file_bytes,
                    max_pages=self.params.max_pages),
            ctx=ctx,
        )


def read_pdf_file(path: str, abs_path: str, node: str, max_file_bytes: int = MAX_FILE_BYTES,
                  max_pages: int = MAX_PAGES) -> Iterator[pa.Table]:
    """One table with one row: the PDF, or a tombstone saying why it is not there."""
    try:
        size = os.path.getsize(abs_path)
    except OSError as exc:
        yield dead_pdf(path, node, TombstoneKind.ERROR, "unreadable_file", f"{type(exc).__name__}: {exc}")
        return
    if size > max_file_bytes:  # checked before reading: a huge file is never loaded just to be rejected
        detail = json_detail({"file_bytes": size, "max_file_bytes": max_file_bytes})
        yield dead_pdf(path, node, TombstoneKind.FILTERED, "file_too_large", detail, file_bytes=size)
        return
    try:
        with open(abs_path, "rb") as f:
            data = f.read()
    except OSError as exc:
        yield dead_pdf(path, node, TombstoneKind.ERROR, "unreadable_file", f"{type(exc).__name__}: {exc}",
                       file_bytes=size)
        return
    n_pages, problem = count_pages(data, path)
    if problem is not None:
        reason, detail = problem
        yield dead_pdf(path, node, TombstoneKind.ERROR, reason, detail, file_bytes=len(data))
        return
    if n_pages > max_pages:
        detail = json_detail({"n_pages": n_pages, "max_pages": max_pages})
        yield dead_pdf(path, node, TombstoneKind.FILTERED, "too_many_pages", detail, n_pages=n_pages,
                       file_bytes=len(data))
        return
    yield combine(pdf_row(path, data, n_pages, len(data)), None)


def count_pages(data: bytes, name: str = "the file") -> tuple[int, tuple[str, str] | None]:
    """Page count of a PDF held in memory, or ``(reason, detail)`` when it cannot be used.

    Bytes without the PDF magic are ``not_a_pdf``, whatever the file is called: MuPDF also opens
    HTML, XML, images and text, and guesses from the content even when told ``filetype="pdf"``,
    so an error page saved as ``x.pdf`` would otherwise pass as a one-page PDF.
    Files MuPDF has to repair (a damaged xref, a truncated tail) still open and are kept: what is
    left of them is usually readable, and ``pdf_to_interleaved`` quarantines a page that is not."""
    if not data:
        return 0, ("empty_file", "the file has 0 bytes")
    if not is_pdf(data):
        return 0, ("not_a_pdf", f"{name}: not a PDF: {describe(data[:HEAD_BYTES])}")
    pymupdf = import_pymupdf()
    pymupdf.TOOLS.mupdf_warnings(reset=True)  # so the detail holds this file's warnings only
    try:
        doc = pymupdf.open(stream=data, filetype="pdf")
    except Exception as exc:  # noqa: BLE001 - PyMuPDF raises FileDataError/RuntimeError/ValueError
        return 0, ("corrupt_pdf", _with_warnings(f"{type(exc).__name__}: {exc}", pymupdf))
    with doc:
        if not doc.is_pdf:  # MuPDF recognises content first and may still have picked another format
            fmt = (doc.metadata or {}).get("format") or "another format"
            return 0, ("not_a_pdf", f"{name}: not a PDF: MuPDF opened it as {fmt}")
        if doc.needs_pass:
            return 0, ("encrypted_pdf", "the PDF needs a password to open")
        if doc.page_count == 0:
            return 0, ("corrupt_pdf", _with_warnings("the PDF has no pages", pymupdf))
        return doc.page_count, None


def is_pdf(data: bytes) -> bool:
    """``%PDF-`` within the first 1024 bytes: where PDF readers look for it (leading junk allowed)."""
    return PDF_MAGIC in data[:HEAD_BYTES]


def _with_warnings(message: str, pymupdf: Any) -> str:
    warnings = pymupdf.TOOLS.mupdf_warnings(reset=True).strip()
    return f"{message} (MuPDF: {'; '.join(warnings.splitlines()[:5])})" if warnings else message


def pdf_row(path: str, data: bytes | None, n_pages: int | None, file_bytes: int | None) -> pa.Table:
    return pa.Table.from_pylist(
        [{ID_COL: path, "path": path, "pdf_bytes": data, "n_pages": n_pages, "file_bytes": file_bytes}],
        schema=ROW_SCHEMA,
    )


def dead_pdf(path: str, node: str, kind: TombstoneKind, reason: str, detail: str, n_pages: int | None = None,
             file_bytes: int | None = None) -> pa.Table:
    """A tombstone with the live row's columns (no bytes: the path says where the file is)."""
    return with_tombstones(pdf_row(path, None, n_pages, file_bytes), node, kind, reasons=[reason], details=[detail])
