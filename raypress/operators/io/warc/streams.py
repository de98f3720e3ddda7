"""Byte streams that warcio reads a WARC through, and that map positions back to file offsets.

``read_warc`` decompresses WARC files itself, as one continuous stream over their gzip members,
so that records whose members do not line up with record boundaries and files gzipped as a
single member still read; these streams do that, remember where each gzip member starts so that
a record's position maps back to ``{member offset}+{bytes into it}`` (its row id), find the next
WARC header line to resynchronise at, and report broken compressed data instead of raising
inside warcio.  Kept apart from the record logic (``records``) because they know nothing of
WARC records beyond the header line.
"""

from __future__ import annotations

import bisect
import re
import zlib
from abc import ABC, abstractmethod
from typing import IO, Any

GZIP_MAGIC = b"\x1f\x8b\x08"
READ_CHUNK = 1 << 16
MAX_INFLATE = 1 << 20  # decompressed bytes per zlib call: a gzip bomb cannot balloon one read
# where a record starts: a WARC version line at the start of a line
_HEADER_LINE = re.compile(rb"\nWARC/[01]\.\d{1,2}\r?\n")


class Stream(ABC):
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


class PlainStream(Stream):
    """An uncompressed file from ``base``; positions map back one to one."""

    def __init__(self, fh: IO[bytes], base: int):
        super().__init__(fh, base)
        fh.seek(base)

    def _read(self, size: int) -> bytes:
        return self.fh.read(size)

    def locate(self, pos: int) -> tuple[int, int]:
        return self.base + pos, 0


class MemberStream(Stream):
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


def next_member(fh: IO[bytes], start: int) -> int | None:
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
