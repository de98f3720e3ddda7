"""WARC/ARC files -> response/resource records (``WarcItem``), with every failure in file order.

Parsing is warcio's; this module drives it over ``streams`` and turns what goes wrong into
items instead of exceptions: a file that is no WARC at all, a record whose headers do not parse
or whose Content-Length is wrong, a body cut off, broken gzip data.  After a failure it restarts
at the next WARC header line (or gzip member), so one bad record never ends a file.  What becomes
a row, and with which columns, is ``read_warc``'s business.
"""

from __future__ import annotations

import contextlib
import io
import re
from dataclasses import dataclass
from typing import IO, Any, Iterator, Literal

from raypress.operators.io.sniff.magic import HEAD_BYTES, describe
from raypress.operators.io.warc.streams import GZIP_MAGIC, READ_CHUNK, MemberStream, PlainStream, Stream, next_member

ROW_RECORD_TYPES = ("response", "resource")
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
# media types that say nothing: the body is sniffed instead
GENERIC_TYPES = frozenset({"", "application/octet-stream", "binary/octet-stream", "application/unknown", "unknown/unknown"})

# how a file starts: a WARC version line (warcio reads these versions), or an ARC v1 record line
# (URL, IP, 14-digit date, content type, length) when there is no ``filedesc://`` header
_WARC_START = re.compile(rb"WARC/(\d{1,3}\.\d{1,3})\r?\n")
WARC_VERSIONS = ("0.17", "0.18", "1.0", "1.1")
_ARC_START = re.compile(rb"[a-zA-Z][a-zA-Z0-9+.-]*:\S* \S+ \d{14} \S* \d+\r?\n")

Content = Literal["html", "images"]


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
            stream: Stream = MemberStream(fh, base) if gz else PlainStream(fh, base)
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
    stream: Stream = MemberStream(fh, 0) if gz else PlainStream(fh, 0)
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


def _after_stream_problem(fh: IO[bytes], stream: "Stream", reported: set[int]):
    """Report a broken gzip stream (unless a record in that member already was); the next member
    offset to restart at, or None: nothing more to read."""
    problem = stream.problem
    if problem is None:
        return None
    reason, member, detail = problem
    if member not in reported:
        size = stream.member_size(member)
        yield WarcItem(f"{member}+{size}" if size else f"{member}", error=(reason, detail))
    return next_member(fh, member + 1)


def _read_record(rec: Any, it: Any, stream: "Stream", start: int, max_record_bytes: int,
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
