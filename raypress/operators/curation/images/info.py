"""Height, width, format and sha256 of encoded image bytes, read from the header only.

Pillow's ``Image.open`` is lazy: it parses the header (dimensions, format) and decodes no pixels,
so sizing thousands of images per second costs little.  The flip side, on purpose: bytes whose
header is fine but whose pixel data is cut short still count as readable here; an op that decodes
pixels (e.g. an NSFW detector) must handle that failure itself.
"""

from __future__ import annotations

import hashlib
import io
import threading
import warnings
from dataclasses import dataclass
from typing import Any

from PIL import Image, UnidentifiedImageError

_BOMB_LOCK = threading.Lock()


class UnreadableImage(ValueError):
    """The bytes are not an image Pillow can identify (corrupt, truncated header, SVG, HTML...)."""


@dataclass(frozen=True)
class ImageInfo:
    height: int
    width: int
    format: str | None  # Pillow's format name lowercased: "jpeg", "png", "webp", "gif"...
    sha256: str

    def metadata(self) -> dict[str, Any]:
        """The fields of documents.IMAGE_METADATA_TYPE this module knows (page/xref are PDF-only)."""
        return {"height": self.height, "width": self.width, "sha256": self.sha256, "format": self.format}


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def read_image_info(data: bytes | bytearray | memoryview | None) -> ImageInfo:
    """Header facts of ``data``; raises UnreadableImage naming what is wrong."""
    if data is None:
        raise UnreadableImage("no image bytes (null)")
    data = bytes(data)
    if not data:
        raise UnreadableImage("no image bytes (empty)")
    width, height, fmt = _header(data)
    if width <= 0 or height <= 0:
        raise UnreadableImage(f"image header gives a size of {width}x{height}")
    return ImageInfo(height=height, width=width, format=fmt.lower() if fmt else None, sha256=sha256_hex(data))


def image_info(data: bytes | bytearray | memoryview | None) -> ImageInfo | None:
    """Like read_image_info, but None instead of an exception for unreadable bytes."""
    try:
        return read_image_info(data)
    except UnreadableImage:
        return None


def _header(data: bytes) -> tuple[int, int, str | None]:
    try:
        return _open(data)
    except Image.DecompressionBombError:
        # The bomb check guards *decoding*; we only read the header, so a huge (but legitimate,
        # e.g. 20,000 px) image must still report its size.  Lift the limit just for this open.
        with _BOMB_LOCK:
            saved = Image.MAX_IMAGE_PIXELS
            Image.MAX_IMAGE_PIXELS = None
            try:
                return _open(data)
            finally:
                Image.MAX_IMAGE_PIXELS = saved


def _open(data: bytes) -> tuple[int, int, str | None]:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as im:
                width, height = im.size
                return int(width), int(height), im.format
    except Image.DecompressionBombError:
        raise
    except UnidentifiedImageError as exc:
        raise UnreadableImage(f"not a recognised image format ({len(data)} bytes, starts {data[:8]!r})") from exc
    except Exception as exc:  # noqa: BLE001 - plugins raise many types on hostile headers
        raise UnreadableImage(f"corrupt image header: {type(exc).__name__}: {exc}") from exc
