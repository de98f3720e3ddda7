"""`read_warc`: WARC (and ARC) files -> one row per response/resource record, HTML or images.

Parsing is warcio's (it reads WARC 0.18-1.1, ARC via ``arc2warc``, chunked and gzip-encoded HTTP
bodies).  Decompression is ours: the file is read as one continuous stream over its gzip
members, so records whose members do not line up with record boundaries, and files gzipped as a
single member, still read (warcio alone stops at both), while record ids stay tied to the
compressed offsets (``{path}@{member offset}``, ``+{bytes}`` when a record starts inside a member).
FastWARC parses faster, but on the bad sample files it stops at a wrong Content-Length, gives
every record of a single-member file the same offset, and reads no ARC; warcio reports the wrong
length (a warning we turn into a tombstone) and goes on.

Bad input never ends a file early: a record whose body is cut off becomes a ``truncated_record``
error tombstone, one whose headers do not parse (or whose Content-Length is wrong) a
``malformed_record`` one, and reading resumes at the next ``WARC/`` header line, or at the next
gzip member when the compressed data itself is corrupt.  Every response/resource record is an
input row: the ones of the other content (images in an HTML read...) leave as FILTERED tombstones,
so the ledger adds up.  Request, metadata, warcinfo and revisit records are not rows.

This module turns records into rows; the records come from ``warc.records`` (warcio and the
resynchronisation), which reads through ``warc.streams`` (decompression, offsets), and HTML bodies
are decoded by ``sniff.html_charset``.
"""

from __future__ import annotations

import hashlib
import re
from functools import partial
from typing import Any, Iterator

import pyarrow as pa
from pydantic import Field

from raypress.operators.base import Params, Reader, RunContext
from raypress.operators.io.sniff.html_charset import UndecodableHtml, decode_html
from raypress.operators.io.warc.records import GENERIC_TYPES, HTML_TYPES, Content, WarcItem, iter_warc_items
from raypress.operators.registry import register
from raypress.operators.shared.files import Globs, expand_globs, map_files
from raypress.schema import DETAIL_COL, ID_COL, KIND_COL, NODE_COL, REASON_COL, TombstoneKind

_HTML_START = re.compile(rb"^\s*(?:<!--.*?-->\s*)*<(?:!doctype\s+html|html|head|body)\b", re.IGNORECASE | re.DOTALL)
_IMAGE_MAGIC = (b"\xff\xd8\xff", b"\x89PNG\r\n\x1a\n", b"GIF87a", b"GIF89a", b"BM", b"II*\x00", b"MM\x00*")

ROWS_PER_TABLE = 512
BYTES_PER_TABLE = 64 << 20  # Arrow string/binary columns hold < 2 GiB per chunk; stay far below

HTML_SCHEMA = pa.schema(
    [
        (ID_COL, pa.string()),
        ("url", pa.string()),
        ("html", pa.string()),
        ("charset", pa.string()),
        ("warc_date", pa.string()),
        ("http_status", pa.int32()),
        ("content_type", pa.string()),
        ("source", pa.string()),
    ]
)
IMAGE_SCHEMA = pa.schema(
    [
        (ID_COL, pa.string()),
        ("url", pa.string()),
        ("image_bytes", pa.binary()),
        ("content_type", pa.string()),
        ("sha256", pa.string()),
    ]
)
_TOMBSTONE_FIELDS = [(c, pa.string()) for c in (NODE_COL, KIND_COL, REASON_COL, DETAIL_COL)]


class ReadWarcParams(Params):
    paths: Globs = Field(description="glob patterns of .warc/.warc.gz/.arc.gz files, relative to the current directory")
    content: Content = Field(
        default="html",
        description="'html': one row per HTML page (url, html, charset, ...); 'images': one row per "
        "image record (url, image_bytes, content_type, sha256), the table attach_images joins on. "
        "Records of the other content leave as filtered tombstones (not_html / not_image)",
    )
    max_record_bytes: int = Field(
        default=32 << 20, ge=1,
        description="records whose Content-Length exceeds this are dropped (record_too_large) unread",
    )
    only_2xx: bool = Field(
        default=True,
        description="drop HTTP responses whose status is not 2xx (redirects, errors: http_status_not_2xx)",
    )
    max_decode_errors: float = Field(
        default=0.01, ge=0, le=1,
        description="an HTML body decodes with a charset when at most this fraction of its characters "
        "are invalid (replaced); worse with every candidate charset -> decode_error",
    )


@register("read_warc", requires={"warcio": "curation", "resiliparse": "curation"})
class ReadWarc(Reader[ReadWarcParams]):
    """Read WARC/ARC files (gzip or plain) into HTML page rows or an image table keyed by URL."""

    def columns_written(self) -> tuple[str, ...]:
        schema = HTML_SCHEMA if self.params.content == "html" else IMAGE_SCHEMA
        return tuple(n for n in schema.names if n != ID_COL)

    def read(self, ctx: RunContext):
        files = expand_globs(self.params.paths)
        p = self.params
        return map_files(files, partial(read_warc_file, node=ctx.node_id, content=p.content,
                                        max_record_bytes=p.max_record_bytes, only_2xx=p.only_2xx,
                                        max_decode_errors=p.max_decode_errors), ctx=ctx)


def read_warc_file(path: str, abs_path: str, node: str, content: Content = "html",
                   max_record_bytes: int = 32 << 20, only_2xx: bool = True,
                   max_decode_errors: float = 0.01) -> Iterator[pa.Table]:
    """Tables of rows (live rows and tombstones, in file order) for one WARC file; pure, no Ray."""
    schema = pa.schema(list(HTML_SCHEMA if content == "html" else IMAGE_SCHEMA) + _TOMBSTONE_FIELDS)
    rows: list[dict[str, Any]] = []
    size = 0
    seen: set[str] = set()
    for item in iter_warc_items(abs_path, max_record_bytes, content, name=path):
        row = item_row(item, path, node, content, only_2xx, max_decode_errors)
        row[ID_COL] = _unique(row[ID_COL], seen)
        rows.append(row)
        size += len(item.body or b"")
        if len(rows) >= ROWS_PER_TABLE or size >= BYTES_PER_TABLE:
            yield pa.Table.from_pylist(rows, schema=schema)
            rows, size = [], 0
    if rows:
        yield pa.Table.from_pylist(rows, schema=schema)


def _unique(rid: str, seen: set[str]) -> str:
    """Ids are offsets, unique by construction; a failure reported at a record's own offset gets a suffix."""
    out, n = rid, 1
    while out in seen:
        out, n = f"{rid}#{n}", n + 1
    seen.add(out)
    return out


def item_row(item: WarcItem, path: str, node: str, content: Content, only_2xx: bool,
             max_decode_errors: float) -> dict[str, Any]:
    """One output row: live, or a tombstone (error for broken records, filtered for unwanted ones)."""
    rid = f"{path}@{item.where}"
    row: dict[str, Any] = {ID_COL: rid, "url": item.url, "content_type": item.media_type}
    if content == "html":
        row.update(warc_date=item.date, http_status=item.http_status, source="html")
    if item.error is not None:
        return _dead(row, node, TombstoneKind.ERROR, *item.error)
    if item.body is None:  # only too-large records come without a body
        return _dead(row, node, TombstoneKind.FILTERED, "record_too_large",
                     f"Content-Length {item.length} > max_record_bytes")
    if only_2xx and item.http_status is not None and not 200 <= item.http_status < 300:
        return _dead(row, node, TombstoneKind.FILTERED, "http_status_not_2xx", f"HTTP status {item.http_status}")
    wanted = is_html if content == "html" else is_image
    if item.skipped or (item.body and not wanted(item.media_type, item.body)):
        reason = "not_html" if content == "html" else "not_image"
        return _dead(row, node, TombstoneKind.FILTERED, reason, f"content type {item.media_type!r}")
    if not item.body:
        return _dead(row, node, TombstoneKind.FILTERED, "empty_body", f"{item.warc_type} record without payload")
    if content == "images":
        row["image_bytes"] = item.body
        row["sha256"] = hashlib.sha256(item.body).hexdigest()
        return row
    try:
        row["html"], row["charset"] = decode_html(item.body, item.http_charset, max_decode_errors)
    except UndecodableHtml as exc:
        return _dead(row, node, TombstoneKind.ERROR, "decode_error", str(exc))
    return row


def _dead(row: dict[str, Any], node: str, kind: TombstoneKind, reason: str, detail: str) -> dict[str, Any]:
    row.update({NODE_COL: node, KIND_COL: kind.value, REASON_COL: reason, DETAIL_COL: detail})
    return row


def is_html(media_type: str | None, body: bytes) -> bool:
    if media_type in HTML_TYPES:
        return True
    return (media_type or "") in GENERIC_TYPES and bool(_HTML_START.match(_strip_bom(body[:2048])))


def is_image(media_type: str | None, body: bytes) -> bool:
    if media_type and media_type.startswith("image/"):
        return True
    if (media_type or "") not in GENERIC_TYPES:
        return False
    return body.startswith(_IMAGE_MAGIC) or (body[:4] == b"RIFF" and body[8:12] == b"WEBP")


def _strip_bom(data: bytes) -> bytes:
    return data[3:] if data.startswith(b"\xef\xbb\xbf") else data
