"""``image_deduplicator`` (Data-Juicer): rows whose images hash alike are copies; keep one.

Each row's key is the concatenation of imagededup's perceptual hash (``method``: phash, dhash,
whash or ahash; computed as imagededup computes them, see ``operators/shared/perceptual_hash.py``)
of each of its distinct images in order; rows with equal keys are one group, and the group keeps
its smallest ``id`` (Data-Juicer keeps the first in dataset order, which a distributed dataset does
not have).  A row without images is never a duplicate.  With ``consider_text`` the md5 of the
row's text (``document_deduplicator``'s, with its ``lowercase`` and ``ignore_non_character``, which
Data-Juicer forwards to it) joins the key: rows are copies only when images and text both match,
and rows without images are then compared by their text alone, as in Data-Juicer.

Images are read as Data-Juicer reads them (``operators/shared/image_rows.py``): from the bytes in
``image_bytes_key`` when the row carries them, else from the local file; interleaved documents'
null positions are skipped.  A row with an image that cannot be read is quarantined.  Duplicates
leave as tombstones naming the kept row's id, with ``{"imagehash": key}`` as detail; no hash
column is added to the rows (Data-Juicer drops its own unless ``keep_hashes_in_res_ds``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field

from raypress.operators.base import Deduplicator, Params, RunContext
from raypress.operators.dedup.exact.by_key import keep_smallest_id
from raypress.operators.dedup.exact.image_keys import KEY_COL, TextKey, add_image_keys
from raypress.operators.registry import register
from raypress.operators.shared.perceptual_hash import HashMethod
from raypress.schema import ID_COL

if TYPE_CHECKING:  # pragma: no cover
    import ray.data


class ImageKeyParams(Params):
    method: HashMethod = Field("phash", description="imagededup's hash of each image: phash, dhash, whash or ahash")
    image_key: str = Field("images", description="column holding each row's list of images (paths, or an "
                           "interleaved document's references, null at text positions)")
    image_bytes_key: str = Field("image_bytes", description="column holding the images' encoded bytes, parallel "
                                 "to image_key; an image with bytes is read from them, not from its path")
    num_partitions: int | None = Field(None, ge=1, description="partitions of the hash shuffle (default: one per "
                                       "100,000 input rows, at most 200)")


class ImageDedupParams(ImageKeyParams):
    consider_text: bool = Field(False, description="rows are copies only when their text (its md5) matches too; "
                                "rows without images are then compared by text")
    text_key: str = Field("text", description="column holding the text (consider_text)")
    lowercase: bool = Field(False, description="consider_text: compare texts case-insensitively")
    ignore_non_character: bool = Field(False, description="consider_text: ignore whitespace, digits and ASCII "
                                       "punctuation when comparing texts")


def dedup_by_image_keys(ds: "ray.data.Dataset", ctx: RunContext, params: ImageKeyParams, *,
                        empty_key: str | None, text: TextKey | None = None) -> "ray.data.Dataset":
    """Key every row (``add_image_keys``), shuffle by key, keep the smallest id of each group."""
    keyed = ds.map_batches(add_image_keys, batch_format="pyarrow", fn_kwargs=dict(
        image_key=params.image_key, image_bytes_key=params.image_bytes_key, method=params.method,
        node=ctx.node_id, empty_key=empty_key, text=text))
    return keep_smallest_id(keyed, KEY_COL, ctx.node_id, detail_key="imagehash",
                            num_partitions=params.num_partitions or ctx.shuffle_partitions())


@register("image_deduplicator", requires={"PIL": "images", "scipy": "images"})
class ImageDeduplicator(Deduplicator[ImageDedupParams]):
    """Exact dedup of rows by the perceptual hashes of their images (phash by default), optionally
    with their text; each group keeps its smallest id, rows without images stay (Data-Juicer's op)."""

    reads = (ID_COL,)

    def columns_read(self) -> tuple[str, ...]:
        p = self.params
        return (ID_COL, p.image_key) + ((p.text_key,) if p.consider_text else ())

    def apply(self, ds: "ray.data.Dataset", ctx: RunContext) -> "ray.data.Dataset":
        p = self.params
        text = TextKey(p.text_key, p.lowercase, p.ignore_non_character) if p.consider_text else None
        return dedup_by_image_keys(ds, ctx, p, empty_key=None, text=text)
