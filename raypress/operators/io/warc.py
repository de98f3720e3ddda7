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
"""

from __future__ import annotations

import bisect
from abc import ABC, abstractmethod
import contextlib
import hashlib
import io
import re
import zlib
from dataclasses import dataclass
from functools import partial
from typing import IO, Any, Iterator, Literal

import pyarrow as pa
from pydantic import Field

from raypress.operators.base import Params, Reader, RunContext
from raypress.operators.shared.files import Globs, expand_globs, map_files
from raypress.operators.io.sniff import HEAD_BYTES, describe
from raypress.operators.registry import register
from raypress.schema import DETAIL_COL, ID_COL, KIND_COL, NODE_COL, REASON_COL, TombstoneKind

ROW_RECORD_TYPES = ("response", "resource")
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
# media types that say nothing: the body is sniffed instead
GENERIC_TYPES = frozenset({"", "application/octet-stream", "binary/octet-stream", "application/unknown", "unknown/unknown"})

GZIP_MAGIC = b"\x1f\x8b\x08"
READ_CHUNK = 1 << 16
MAX_INFLATE = 1 << 20  # decompressed bytes per zlib call: a gzip bomb cannot balloon one read
# where a record starts: a WARC version line at the start of a line
_HEADER_LINE = re.compile(rb"\nWARC/[01]\.\d{1,2}\r?\n")
# how a file starts: a WARC version line (warcio reads these versions), or an ARC v1 record line
# (URL, IP, 14-digit date, content type, length) when there is no ``filedesc://`` header
_WARC_START = re.compile(rb"WARC/(\d{1,3}\.\d{1,3})\r?\n")
WARC_VERSIONS = ("0.17", "0.18", "1.0", "1.1")
_ARC_START = re.compile(rb"[a-zA-Z][a-zA-Z0-9+.-]*:\S* \S+ \d{14} \S* \d+\r?\n")
_META_CHARSET = re.compile(rb"""<meta[^>]{0,512}?charset\s*=\s*["']?\s*([a-zA-Z0-9_.:-]{1,40})""", re.IGNORECASE)
_HTML_START = re.compile(rb"^\s*(?:<!--.*?-->\s*)*<(?:!doctype\s+html|html|head|body)\b", re.IGNORECASE | re.DOTALL)
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f]")
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

Content = Literal["html", "images"]


@register("read_warc")
class ReadWarc(Reader):
    """Read WARC/ARC files (gzip or plain) into HTML page rows or an image table keyed by URL."""

    class Params(Params):
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

    def columns_written(self) -> tuple[str, ...]:
        schema = HTML_SCHEMA if self.params.content == "html" else IMAGE_SCHEMA
        return tuple(n for n in schema.names if n != ID_COL)

    def read(self, ctx: RunContext):
        files = expand_globs(self.params.paths)
        p = self.params
        return map_files(files, partial(read_warc_file, node=ctx.node_id, content=p.content,
                                        max_record_bytes=p.max_record_bytes, only_2xx=p.only_2xx,
                                        max_decode_errors=p.max_decode_errors), ctx=ctx)


# -- rows -------------------------------------------------------------------------------------


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


def item_row(item: "WarcItem", path: str, node: str, content: Content, only_2xx: bool,
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


# -- charset ----------------------------------------------------------------------------------


class UndecodableHtml(ValueError):
    """No candidate charset decodes the body into text."""


def decode_html(body: bytes, http_charset: str | None, max_errors: float = 0.01) -> tuple[str, str]:
    """(text, codec): the first candidate charset -- BOM, HTTP header, ``<meta>`` in the first 4 KiB,
    uchardet detection, UTF-8 -- whose decoding leaves at most ``max_errors`` of the characters
    invalid (they become U+FFFD).  Text that decodes but is full of control characters is binary
    data mislabelled as HTML: UndecodableHtml too."""
    tried: list[str] = []
    for codec in _candidates(body, http_charset):
        if codec in tried:
            continue
        tried.append(codec)
        try:
            text = body.decode(codec)
        except UnicodeDecodeError:
            text = body.decode(codec, errors="replace")
            if text.count("\ufffd") > max_errors * max(len(text), 1):
                continue
        except LookupError:
            continue
        if text.startswith("\ufeff"):
            text = text[1:]
        controls = len(_CONTROL.findall(text, 0, 100_000))
        if controls > 0.01 * min(len(text), 100_000):
            raise UndecodableHtml(f"decoded as {codec}, {controls} control characters in the first "
                                  f"{min(len(text), 100_000)}: binary data, not HTML")
        return text, codec
    raise UndecodableHtml(f"more than {max_errors:.1%} invalid characters with every charset tried ({', '.join(tried)})")


def _candidates(body: bytes, http_charset: str | None) -> Iterator[str]:
    from resiliparse.parse.encoding import detect_encoding

    if body.startswith(b"\xef\xbb\xbf"):
        yield "utf-8"
    elif body.startswith((b"\xff\xfe", b"\xfe\xff")):
        yield "utf-16"
    if http_charset:
        codec = charset_codec(http_charset)
        if codec:
            yield codec
    match = _META_CHARSET.search(body, 0, 4096)
    if match:
        codec = charset_codec(match.group(1).decode("ascii"))
        if codec:  # a <meta> readable as ASCII cannot be right about UTF-16 (WHATWG): use UTF-8
            yield "utf-8" if codec.startswith("utf-16") else codec
    detected = detect_encoding(body)
    yield charset_codec(detected) or detected
    yield "utf-8"


def charset_codec(label: str) -> str | None:
    """A Python codec for a charset label, WHATWG-mapped (latin1 -> cp1252, gb2312 -> gb18030...)."""
    from resiliparse.parse.encoding import map_encoding_to_html5

    codec = map_encoding_to_html5(label.strip().strip("\"'"), fallback_utf8=False)
    if codec is None:
        return None
    return {"gbk": "gb18030", "shift_jis": "cp932"}.get(codec, codec)


# -- records ----------------------------------------------------------------------------------


@dataclass
class WarcItem:
    """A response/resource record (body read, or None when too large) or a failure to read one."""

    where: str  # "{offset}" or "{member offset}+{bytes into it}": the id after "{path}@"
    warc_type: str | None = None
    url: str | None = None
    date: str | None = None
    http_status: int | None = None
    media_type: str | None = None  # lowercased, parameters stripped
    http_charset: str | None = None
    length: int | None = None  # Content-Length of the record
    body: bytes | None = None  # HTTP payload (de-chunked, content-decoded)
    skipped: bool = False  # body not read: its content type is not the content being read
    error: tuple[str, str] | None = None  # (reason, detail): the record is unusable


def iter_warc_items(abs_path: str, max_record_bytes: int = 32 << 20,
                    content: Content | None = None, name: str | None = None) -> Iterator[WarcItem]:
    """Every response/resource record of a WARC/ARC file and every failure, in file order.
    With ``content``, bodies whose declared type is surely something else are not read (``skipped``).

    A file whose (decompressed) data does not start with a WARC or ARC header is one ``not_a_warc``
    failure naming the file (``name``, else ``abs_path``) and what it looks like, whatever its
    suffix: otherwise warcio would take any line of five words for an ARC record header and a
    text file would become one broken record per line.  For the same reason, warcio is told that
    a file starting with a WARC header is WARC: such lines later in it are one malformed stretch,
    skipped by the resynchronisation.  Gzip is recognised by its magic, not by the
    name, so an uncompressed WARC named ``.warc.gz`` reads too.

    After a failure, reading restarts at the first record header line after the last record that
    parsed (warcio may have swallowed the failing record's first line), or after the failure when
    none did; when the gzip data itself is broken, at the next gzip member.  Restart points only
    move forward, so every file ends."""
    from warcio.archiveiterator import ArchiveIterator

    with open(abs_path, "rb") as fh:
        gz = fh.read(2) == GZIP_MAGIC[:2]
        problem, blank_start, warc_only = _not_an_archive(fh, gz)
        if problem is not None:
            yield WarcItem("0", error=("not_a_warc", f"{name or abs_path}: not a WARC file: {problem}"))
            return
        # restart point: member (or file) offset, and where to look for a header.  warcio takes a
        # blank first line for the end of the file: then the first header line is looked for
        base, scan_from = 0, (0 if blank_start else None)
        pending: tuple[tuple[int, int], WarcItem] | None = None  # a failure, reported once resync passes it
        while True:
            stream: _Stream = _MemberStream(fh, base) if gz else _PlainStream(fh, base)
            if scan_from is not None:
                found = stream.skip_to_header(scan_from)
                if pending is not None and (not found or stream.locate(stream.pos) > pending[0]):
                    yield pending[1]  # else the failure was a header line warcio swallowed: now re-read
                pending = None
                if not found:
                    nxt = yield from _after_stream_problem(fh, stream, reported=set())
                    if nxt is None:
                        return
                    base, scan_from = nxt, None
                    continue
            it = ArchiveIterator(stream, arc2warc=True)
            if warc_only:  # a WARC file: lines warcio could take for ARC headers are broken records
                it.known_format = "warc"  # as warcio's own WARCIterator does
            reported: set[int] = set()  # members with a record already reported broken
            last_start: int | None = None
            failed_at = 0
            records = iter(it)
            while True:
                try:
                    rec = next(records)
                except StopIteration:
                    break
                except Exception as exc:  # noqa: BLE001 - any parse failure: report, resynchronise
                    failed_at = it.offset
                    pending = (stream.locate(failed_at), WarcItem(stream.where(failed_at), error=(
                        "malformed_record", f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]} "
                        f"(at {stream.describe(failed_at)})")))
                    break
                last_start = it.offset
                item = _read_record(rec, it, stream, last_start, max_record_bytes, content)
                if item is not None:
                    if item.error is not None:
                        reported.add(stream.member_of(last_start))
                    yield item
            if pending is not None:
                base, delta = stream.locate(last_start if last_start is not None else failed_at)
                scan_from = delta + 1
                continue
            nxt = yield from _after_stream_problem(fh, stream, reported)
            if nxt is None:
                return
            base, scan_from = nxt, None


def _not_an_archive(fh: IO[bytes], gz: bool) -> tuple[str | None, bool, bool]:
    """What the start of the file looks like when it is neither a WARC nor an ARC, else None;
    whether blank lines come before the first header; whether that header is a WARC one.

    None too when there is nothing to judge (an empty file, only padding, a first gzip member
    too broken to inflate a line): reading then goes as it always did."""
    stream: _Stream = _MemberStream(fh, 0) if gz else _PlainStream(fh, 0)
    head = b""
    while len(head) < HEAD_BYTES:
        chunk = stream.read(HEAD_BYTES - len(head))
        if not chunk:
            break
        head += chunk
    start = head.lstrip(b"\r\n")
    blank = len(start) < len(head)
    if not start.strip(b"\x00\r\n") or (stream.problem is not None and b"\n" not in start):
        return None, False, False
    version = _WARC_START.match(start)
    if version is not None:
        if version.group(1).decode() in WARC_VERSIONS:
            return None, blank, True
        why = f"unsupported version {version.group(0).strip().decode()} (warcio reads {', '.join(WARC_VERSIONS)})"
        return why, False, False
    if start.startswith(b"filedesc://") or _ARC_START.match(start):
        return None, False, False  # ARC: the resynchronisation looks for WARC headers only
    return ("once decompressed, it " if gz else "it ") + describe(start), False, False


def _after_stream_problem(fh: IO[bytes], stream: "_Stream", reported: set[int]):
    """Report a broken gzip stream (unless a record in that member already was); the next member
    offset to restart at, or None: nothing more to read."""
    problem = stream.problem
    if problem is None:
        return None
    reason, member, detail = problem
    if member not in reported:
        size = stream.member_size(member)
        yield WarcItem(f"{member}+{size}" if size else f"{member}", error=(reason, detail))
    return _next_member(fh, member + 1)


def _read_record(rec: Any, it: Any, stream: "_Stream", start: int, max_record_bytes: int,
                 content: Content | None = None) -> WarcItem | None:
    """Read one record starting at stream position ``start`` (None for types that are not rows);
    a short body or a warcio warning (wrong Content-Length) becomes the item's error."""
    if rec.rec_type not in ROW_RECORD_TYPES:
        return None
    headers = rec.rec_headers
    item = WarcItem(stream.where(start), warc_type=rec.rec_type, url=headers.get_header("WARC-Target-URI"),
                    date=headers.get_header("WARC-Date"))
    http = rec.http_headers
    ctype = http.get_header("Content-Type") if http is not None else headers.get_header("Content-Type")
    item.media_type, item.http_charset = _media_type(ctype)
    if http is not None:
        code = http.get_statuscode()
        item.http_status = int(code) if code and code.isdigit() else None
    declared = headers.get_header("Content-Length")
    try:
        item.length = int(declared) if declared is not None else None
    except ValueError:
        item.length = None
    if item.length is None or item.length < 0:
        item.error = ("malformed_record", f"invalid Content-Length {declared!r} (at {stream.describe(start)})")
        _finish(it)
        return item
    if item.length > max_record_bytes:
        _finish(it)
        return item
    media = item.media_type or ""
    if content is not None and media not in GENERIC_TYPES:
        item.skipped = not (media in HTML_TYPES if content == "html" else media.startswith("image/"))
    if item.skipped:
        item.body = b""
    else:
        try:
            item.body = _read_all(rec.content_stream())
        except Exception as exc:  # noqa: BLE001 - bad chunking / content encoding: this record only
            item.error = ("bad_content_encoding", f"{type(exc).__name__}: {exc} (at {stream.describe(start)})")
    warnings = _finish(it)
    short = getattr(rec.raw_stream, "limit", 0)
    if short > 0:
        why = stream.problem[2] if stream.problem else "the data ends early"
        reason = "corrupt_gzip" if stream.problem and stream.problem[0] == "corrupt_gzip" else "truncated_record"
        item.error = (reason, f"record at {stream.describe(start)} lacks {short} of its {item.length} "
                              f"bytes: {why}")
    elif warnings and item.error is None:
        item.error = ("malformed_record", f"record at {stream.describe(start)} is not followed by the blank "
                                          f"line its Content-Length ({item.length}) announces: the length is wrong "
                                          f"({' '.join(warnings.split())[:200]})")
    if item.error is not None:
        item.body = None
    return item


def _read_all(reader: Any) -> bytes:
    parts = []
    while True:
        chunk = reader.read(READ_CHUNK)
        if not chunk:
            return b"".join(parts)
        parts.append(chunk)


def _finish(it: Any) -> str:
    """Read to the end of the current record; warcio's warnings (wrong Content-Length) as text."""
    before = it.err_count
    with _quiet() as err:
        it.read_to_end()
    return err.getvalue() if it.err_count > before else ""


@contextlib.contextmanager
def _quiet():
    """warcio prints its wrong-Content-Length warning to stderr; for row records it becomes the
    tombstone's detail instead (other records' warnings still reach the worker log)."""
    buf = io.StringIO()
    with contextlib.redirect_stderr(buf):
        yield buf


def _media_type(value: str | None) -> tuple[str | None, str | None]:
    """('text/html', 'utf-8') from 'text/html; charset="UTF-8"'."""
    if not value:
        return None, None
    parts = value.split(";")
    media = parts[0].strip().lower() or None
    charset = None
    for param in parts[1:]:
        key, _, val = param.partition("=")
        if key.strip().lower() == "charset" and val.strip():
            charset = val.strip().strip("\"'")
    return media, charset


def _next_member(fh: IO[bytes], start: int) -> int | None:
    """Offset of the next gzip member at or after ``start`` whose first bytes inflate."""
    pos = start
    while True:
        fh.seek(pos)
        block = fh.read(READ_CHUNK + 2)
        if len(block) < len(GZIP_MAGIC):
            return None
        i = block.find(GZIP_MAGIC)
        if i < 0:
            pos += len(block) - 2
            continue
        fh.seek(pos + i)
        try:
            zlib.decompressobj(31).decompress(fh.read(4096), 1)
            return pos + i
        except zlib.error:
            pos += i + 1


# -- streams ----------------------------------------------------------------------------------


class _Stream(ABC):
    """What warcio reads: the (decompressed) bytes from a restart point, with a position."""

    problem: tuple[str, int, str] | None = None  # (reason, member offset, detail) of broken gzip data

    def __init__(self, fh: IO[bytes], base: int):
        self.fh, self.base, self.pos = fh, base, 0
        self._pushback = b""

    def tell(self) -> int:
        return self.pos

    def read(self, size: int = -1) -> bytes:
        if self._pushback:
            out = self._pushback if size < 0 else self._pushback[:size]
            self._pushback = self._pushback[len(out):]
        else:
            out = self._read(READ_CHUNK if size is None or size < 0 else size)
        self.pos += len(out)
        return out

    @abstractmethod
    def _read(self, size: int) -> bytes:
        """Up to ``size`` bytes of the (decompressed) stream, ``b""`` at its end."""

    def skip_to_header(self, start: int) -> bool:
        """Advance to the first WARC header line after position ``start``; False at the end."""
        tail = b""
        while True:
            chunk = self.read(READ_CHUNK)
            if not chunk:
                return False
            end = self.pos
            window = tail + chunk
            wstart = end - len(window)
            lo = max(0, start - 1 - wstart)  # the header's newline may be the byte at start - 1
            match = _HEADER_LINE.search(window, lo)
            if match:
                found = wstart + match.start() + 1
                self._pushback = window[match.start() + 1:]
                self.pos = found
                return True
            tail = window[-16:]

    @abstractmethod
    def locate(self, pos: int) -> tuple[int, int]:
        """(restart offset, bytes after it) of stream position ``pos``."""

    def member_of(self, pos: int) -> int:
        return self.locate(pos)[0]

    def member_size(self, member: int) -> int:
        return 0

    def where(self, pos: int) -> str:
        base, delta = self.locate(pos)
        return f"{base}" if delta == 0 else f"{base}+{delta}"

    def describe(self, pos: int) -> str:
        base, delta = self.locate(pos)
        return f"offset {base}" if delta == 0 else f"offset {base} + {delta} decompressed bytes"


class _PlainStream(_Stream):
    """An uncompressed file from ``base``; positions map back one to one."""

    def __init__(self, fh: IO[bytes], base: int):
        super().__init__(fh, base)
        fh.seek(base)

    def _read(self, size: int) -> bytes:
        return self.fh.read(size)

    def locate(self, pos: int) -> tuple[int, int]:
        return self.base + pos, 0


class _MemberStream(_Stream):
    """Concatenated gzip members from ``base``, inflated; remembers where each member starts so a
    decompressed position maps back to (member offset, bytes into it).  Broken compressed data
    ends the stream and is noted in ``problem`` instead of raising inside warcio."""

    def __init__(self, fh: IO[bytes], base: int):
        super().__init__(fh, base)
        fh.seek(base)
        self._in = b""  # compressed bytes read but not yet inflated
        self._comp = base  # file offset of the first byte of ``_in``
        self._z: Any = None  # the current member's inflater
        self._member = base
        self._done = False
        self.starts: list[int] = []  # decompressed position where each member starts
        self.members: list[int] = []  # its file offset
        self._produced = 0

    def _read(self, size: int) -> bytes:
        while not self._done:
            out = self._inflate(size)
            if out:
                return out
        return b""

    def _inflate(self, size: int) -> bytes:
        if len(self._in) < len(GZIP_MAGIC):
            self._fill()
        if not self._in:
            if self._z is not None:
                self._end("truncated_record", f"gzip data ends inside the member at offset {self._member}")
            else:
                self._done = True
            return b""
        if self._z is None:
            if not self._in.startswith(GZIP_MAGIC):
                if self._only_padding_left():
                    self._done = True  # NUL/blank padding at the end of the file
                else:
                    self._end("malformed_record", f"bytes at offset {self._comp} are not a gzip member",
                              member=self._comp)
                return b""
            self._z = zlib.decompressobj(31)
            self._member = self._comp
            self.starts.append(self._produced)
            self.members.append(self._comp)
        data = self._in
        try:
            out = self._z.decompress(data, min(size, MAX_INFLATE))
        except zlib.error as exc:
            self._end("corrupt_gzip", f"gzip member at offset {self._member} is corrupt: {exc}")
            return b""
        if self._z.eof:
            rest = self._z.unused_data
            self._z = None
        else:
            rest = self._z.unconsumed_tail
        self._comp += len(data) - len(rest)
        self._in = rest
        self._produced += len(out)
        return out

    def _only_padding_left(self, limit: int = 1 << 20) -> bool:
        while len(self._in) <= limit:
            if self._in.strip(b"\x00\r\n"):
                return False
            if not self._fill():
                return True
        return False

    def _fill(self) -> bool:
        more = self.fh.read(READ_CHUNK)
        self._in += more
        return bool(more)

    def _end(self, reason: str, detail: str, member: int | None = None) -> None:
        self.problem = (reason, self._member if member is None else member, detail)
        self._done = True

    def locate(self, pos: int) -> tuple[int, int]:
        i = bisect.bisect_right(self.starts, pos) - 1
        if i < 0:
            return self.base, pos
        return self.members[i], pos - self.starts[i]

    def member_size(self, member: int) -> int:
        """Decompressed bytes read from the member at ``member`` (where a broken one stopped)."""
        if member in self.members:
            i = self.members.index(member)
            end = self.starts[i + 1] if i + 1 < len(self.starts) else self._produced
            return end - self.starts[i]
        return 0
