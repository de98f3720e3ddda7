"""What a file looks like from its first bytes, for readers that must not trust a file's name.

Readers pick files by suffix (``*.pdf``, ``*.warc.gz``), and a suffix is only a claim: a saved
error page named ``x.pdf``, a text file named ``x.warc.gz``.  A reader checks its own format's
magic; when the check fails, :func:`describe` says in the tombstone what the file seems to be.
"""

from __future__ import annotations

import re

HEAD_BYTES = 1024  # what the readers read to check a magic number and describe a file

_HTML = re.compile(rb"\s*(?:<!--.*?-->\s*)*<(?:!doctype\s+html|html|head|body|title|meta|script|div|p)\b",
                   re.IGNORECASE | re.DOTALL)
_XML = re.compile(rb"\s*<\?xml\b", re.IGNORECASE)
_JSON = re.compile(rb"\s*[\[{]")
# (prefix, name) tried in order; the first that matches names the format
_MAGIC = (
    (b"%PDF-", "PDF"),
    (b"\x1f\x8b", "gzip"),
    (b"PK\x03\x04", "zip"),
    (b"PK\x05\x06", "zip (empty)"),
    (b"\x89PNG\r\n\x1a\n", "PNG"),
    (b"\xff\xd8\xff", "JPEG"),
    (b"GIF87a", "GIF"),
    (b"GIF89a", "GIF"),
    (b"BZh", "bzip2"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"\x28\xb5\x2f\xfd", "zstd"),
    (b"7z\xbc\xaf\x27\x1c", "7z"),
    (b"WARC/", "WARC"),
    (b"filedesc://", "ARC"),
    (b"%!PS", "PostScript"),
    (b"{\\rtf", "RTF"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "MS Office (OLE)"),
)
_TEXT_BYTES = frozenset(range(0x20, 0x7F)) | {0x09, 0x0A, 0x0C, 0x0D}


def kind(head: bytes) -> str | None:
    """A short name for the format of bytes starting with ``head`` (``"HTML"``, ``"gzip"``...),
    or None when nothing is recognised.  Plain text is ``"text"``; other bytes are ``None``."""
    body = head[3:] if head.startswith(b"\xef\xbb\xbf") else head
    for magic, name in _MAGIC:
        if body.startswith(magic):
            return name
    if len(head) >= 262 and head[257:262] == b"ustar":
        return "tar"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "WebP"
    if _HTML.match(body):
        return "HTML"
    if _XML.match(body):
        return "XML"
    if is_text(body):
        return "JSON or text" if _JSON.match(body) else "text"
    return None


def is_text(head: bytes) -> bool:
    """UTF-8 (a cut-off last character allowed) without control characters other than whitespace."""
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 3:  # not just a multi-byte character cut at the end of ``head``
            return False
        text = head[: exc.start].decode("utf-8")
    return all(ord(c) >= 0x80 or ord(c) in _TEXT_BYTES for c in text)


def describe(head: bytes, chars: int = 24) -> str:
    """``starts with '<!DOCTYPE html' (HTML?)``: the first bytes (first line, at most ``chars``)
    and what they look like; ``is empty`` for no bytes."""
    if not head:
        return "is empty"
    name = kind(head)
    first = head.lstrip()[:chars].split(b"\n", 1)[0].rstrip(b"\r")
    if name is not None and first and is_text(first):  # a text line: shown as text
        shown = repr(first.decode("utf-8", errors="ignore"))  # (a character cut at the end dropped)
    else:
        shown = repr(head[: min(chars, 8)])
    return f"starts with {shown}" + (f" ({name}?)" if name else " (binary data)")
