"""MINT-1T's image rules: how many images a document has, what their URLs look like, their size.

``image_count_filter`` and ``image_url_filter`` drop whole documents.  ``image_size_filter``
removes single images (MINT-1T drops the image, not the page), so it is a Mapper; a later
``image_count_filter`` then drops the documents it left without images.
"""

from __future__ import annotations

from typing import Any, Sequence
from urllib.parse import unquote, urlsplit

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field, NonNegativeInt, PositiveFloat, PositiveInt, field_validator

from raypress.operators.base import Filter, Mapper, Params, range_reason
from raypress.operators.shared.documents import CONTENT_COLUMNS, replace_documents, table_to_documents
from raypress.operators.curation.image_info import ImageInfo, image_info
from raypress.operators.registry import register


def image_counts(table: pa.Table) -> list[int]:
    """Non-null entries of each row's ``images`` list (a null list counts 0), vectorised."""
    col = table.column("images").combine_chunks()
    if len(col) == 0:
        return []
    parents = pc.list_parent_indices(col).to_numpy()
    valid = pc.is_valid(pc.list_flatten(col)).to_numpy(zero_copy_only=False)
    return np.bincount(parents[valid], minlength=len(col)).tolist()


# -- image_count_filter -------------------------------------------------------------------------


class ImageCountParams(Params):
    min_images: NonNegativeInt = Field(default=1, description="keep documents with at least this many images")
    max_images: NonNegativeInt = Field(default=30, description="keep documents with at most this many images")


@register("image_count_filter")
class ImageCountFilter(Filter):
    """Keep documents with min_images <= number of images <= max_images (MINT-1T: 1-30)."""

    Params = ImageCountParams
    reads = ("images",)
    stat_names = ("image_count",)

    def compute_stats(self, table: pa.Table) -> dict[str, Sequence[Any]]:
        return {"image_count": image_counts(table)}

    def drop_reasons(self, stats: dict[str, Sequence[Any]]) -> list[str | None]:
        lo, hi = self.params.min_images, self.params.max_images
        return [range_reason(v, "image_count", lo, hi) for v in stats["image_count"]]


# -- image_url_filter ---------------------------------------------------------------------------


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
class ImageUrlFilter(Filter):
    """Drop documents with an image URL holding a banned word (logo, avatar, porn, xxx) or a
    file extension other than jpg/jpeg/png/webp (MINT-1T); extension-less URLs pass."""

    Params = ImageUrlParams
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


# -- image_size_filter --------------------------------------------------------------------------


class ImageSizeParams(Params):
    min_side: PositiveInt = Field(default=150, description="remove images whose width or height is below this (px)")
    max_side: PositiveInt = Field(default=20_000, description="remove images whose width or height is above this (px)")
    max_aspect_ratio: PositiveFloat = Field(
        default=2.0, description="remove images whose long side / short side exceeds this (MINT-1T HTML: 2)"
    )
    max_aspect_ratio_pdf: PositiveFloat | None = Field(
        default=3.0,
        description="the aspect-ratio limit for documents whose source is 'pdf' (MINT-1T: 3); "
        "None: max_aspect_ratio applies to them too",
    )


@register("image_size_filter")
class ImageSizeFilter(Mapper):
    """Remove images with a side outside [min_side, max_side] px or a long/short side ratio above
    max_aspect_ratio (2 for HTML, 3 for PDF), and images whose bytes are not a readable image.

    Sizes come from ``image_metadata`` height/width when set, else from the image header (no
    pixel decoding, ``image_info``); what a header gives fills the null fields of
    ``image_metadata`` (height, width, format, sha256).  Images with neither a size nor bytes
    are removed too: they cannot be checked.  Adds ``images_removed_size`` (per document)."""

    Params = ImageSizeParams
    reads = CONTENT_COLUMNS + ("source",)
    writes = CONTENT_COLUMNS + ("images_removed_size",)

    def image_ok(self, width: int, height: int, source: str | None) -> bool:
        p = self.params
        if min(width, height) < p.min_side or max(width, height) > p.max_side:
            return False
        limit = p.max_aspect_ratio_pdf if source == "pdf" and p.max_aspect_ratio_pdf is not None else p.max_aspect_ratio
        return max(width, height) / min(width, height) <= limit

    def process_batch(self, table: pa.Table) -> pa.Table:
        docs = table_to_documents(table)
        removed = []
        for doc in docs:
            keep = []
            for i, ref in enumerate(doc.images):
                if ref is None:
                    keep.append(True)
                    continue
                meta = doc.image_metadata[i]
                size = _known_size(meta)
                if size is None:
                    info = image_info(doc.image_bytes[i])
                    if info is not None:
                        size = info.width, info.height
                        doc.image_metadata[i] = _with_info(meta, info)
                keep.append(size is not None and self.image_ok(size[0], size[1], doc.source))
            removed.append(keep.count(False))
            doc.keep_positions(keep)
        out = replace_documents(table, docs)
        column = pa.array(removed, pa.int64())
        idx = out.schema.get_field_index("images_removed_size")
        if idx >= 0:
            return out.set_column(idx, "images_removed_size", column)
        return out.append_column("images_removed_size", column)


def _known_size(meta: dict[str, Any] | None) -> tuple[int, int] | None:
    if not meta or not meta.get("width") or not meta.get("height"):
        return None
    return int(meta["width"]), int(meta["height"])


def _with_info(meta: dict[str, Any] | None, info: ImageInfo) -> dict[str, Any]:
    """``meta`` completed with what the header gave (its null fields only), so later ops (image
    dedup, writers) need not read the image again."""
    updated = dict(meta or {})
    for name, value in info.metadata().items():
        if updated.get(name) is None:
            updated[name] = value
    return updated
