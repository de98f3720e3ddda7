"""Decoding an HTML body to text: which charset, and when the bytes are not text at all.

The label a page carries (BOM, HTTP header, ``<meta>``) is often wrong or missing, so
``read_warc`` tries the candidates in the WHATWG order, checks that each really decodes, and
falls back on detection (resiliparse's uchardet).  Its own module because it is about text
encodings, not WARC records: the record reader hands it a body and a header label.
"""

from __future__ import annotations

import re
from typing import Iterator

_META_CHARSET = re.compile(rb"""<meta[^>]{0,512}?charset\s*=\s*["']?\s*([a-zA-Z0-9_.:-]{1,40})""", re.IGNORECASE)
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f]")


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
