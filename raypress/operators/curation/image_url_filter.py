"""`image_url_filter`: MINT-1T's rules on what a document's image URLs look like.

A document is dropped when one image URL holds a banned word or names a file type other than the
allowed ones; the URL alone decides (no bytes are read), so it can run before ``attach_images``.
"""

from __future__ import annotations

from typing import Any, Sequence
from urllib.parse import unquote, urlsplit

import pyarrow as pa
from pydantic import Field, field_validator

from raypress.operators.base import Filter, Params
from raypress.operators.registry import register


def url_extension(url: str) -> str | None:
    """The lower-cased extension of the URL path's last segment, or None when it has none.

    ``data:`` URIs give their media subtype (``data:image/gif;...`` -> ``gif``), so an inlined
    GIF is judged like a linked one."""
    parts = urlsplit(url.strip())
    if parts.scheme.lower() == "data":
        media = parts.path.split(";", 1)[0].split(",", 1)[0].lower()
        subtype = media.split("/", 1)[1] if "/" in media else ""
        return subtype.split("+", 1)[0] or None
    name = unquote(parts.path).rsplit("/", 1)[-1]
    if "." not in name.strip("."):
        return None
    return name.rsplit(".", 1)[1].lower() or None


class ImageUrlParams(Params):
    banned_substrings: list[str] = Field(
        default=["logo", "avatar", "porn", "xxx"],
        description="drop a document when any image URL contains one of these (case-insensitive)",
    )
    allowed_extensions: list[str] = Field(
        default=["jpg", "jpeg", "png", "webp"],
        description="drop a document when an image URL's path ends in another extension; "
        "URLs whose last path segment has no extension are allowed",
    )

    @field_validator("banned_substrings", "allowed_extensions")
    @classmethod
    def _lower(cls, values: list[str]) -> list[str]:
        cleaned = [v.strip().lower().lstrip(".") for v in values]
        if any(not v for v in cleaned):
            raise ValueError("entries must be non-empty strings")
        return cleaned


@register("image_url_filter")
class ImageUrlFilter(Filter[ImageUrlParams]):
    """Drop documents with an image URL holding a banned word (logo, avatar, porn, xxx) or a
    file extension other than jpg/jpeg/png/webp (MINT-1T); extension-less URLs pass."""

    reads = ("images",)
    stat_names = ("image_url_banned_hits", "image_url_bad_extensions")

    def __init__(self, params: ImageUrlParams, artifacts=None):
        super().__init__(params, artifacts)
        self._banned = tuple(params.banned_substrings)
        self._allowed = frozenset(params.allowed_extensions)

    def url_stats(self, urls: list[str | None] | None) -> tuple[int, int]:
        """(images whose URL holds a banned substring, images with a disallowed extension)."""
        banned = bad_ext = 0
        for url in urls or ():
            if url is None:
                continue
            low = url.lower()
            if any(word in low for word in self._banned):
                banned += 1
            ext = url_extension(url)
            if ext is not None and ext not in self._allowed:
                bad_ext += 1
        return banned, bad_ext

    def compute_stats(self, table: pa.Table) -> dict[str, Sequence[Any]]:
        rows = [self.url_stats(urls) for urls in table.column("images").to_pylist()]
        return {
            "image_url_banned_hits": [r[0] for r in rows],
            "image_url_bad_extensions": [r[1] for r in rows],
        }

    def drop_reasons(self, stats: dict[str, Sequence[Any]]) -> list[str | None]:
        return [
            "image_url_banned_word" if banned else "image_url_extension" if bad else None
            for banned, bad in zip(stats["image_url_banned_hits"], stats["image_url_bad_extensions"])
        ]
