"""The key Data-Juicer's image deduplicators compare rows by, as a column for ``keep_smallest_id``.

A row's key is the concatenation of the perceptual hashes (``operators/shared/perceptual_hash.py``)
of its distinct images, in list order, so ``[a, b]`` and ``[b, a]`` differ and ``[a, a]`` equals
``[a]`` (Data-Juicer keys a row's loaded images by path).  What a row without images gets is the
caller's choice: ``image_deduplicator`` never counts it as a duplicate (a key of its own), its Ray
variant gives every such row the one key ``EMPTY``.  With ``text`` (``consider_text``) the md5 of
the row's normalized text joins the key, as ``document_deduplicator`` computes it.

A live row whose image cannot be read, or whose text is null when the text counts, leaves as an
error tombstone naming the problem (quarantined), not as a failed run.  Tombstones that arrive
get keys of their own: they never join a group.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from raypress.operators.dedup.document_deduplicator import text_md5
from raypress.operators.shared.image_rows import ImageSource, distinct_by_ref, image_sources
from raypress.operators.shared.perceptual_hash import image_hash
from raypress.schema import TombstoneKind, alive_mask, ensure_tombstone_columns, with_tombstones

KEY_COL = "_rp_image_key"
EMPTY_KEY = "EMPTY"  # Data-Juicer's RayBasicDeduplicator.EMPTY_HASH_VALUE


@dataclass(frozen=True)
class TextKey:
    """How the text joins the key (``consider_text``): ``document_deduplicator``'s md5."""

    text_key: str = "text"
    lowercase: bool = False
    ignore_non_character: bool = False

    def digest(self, text: str | None) -> str:
        if text is None:
            raise ValueError(f"{self.text_key!r} is null: cannot hash the text (consider_text)")
        return text_md5(text, self.lowercase, self.ignore_non_character).hex()


def _own_key() -> str:
    """A key no other row has: the row takes part in no group."""
    return "\0" + uuid.uuid4().hex


def row_key(images: list[ImageSource], method: str, empty_key: str | None, text_digest: str | None) -> str:
    """The key of one live row (``empty_key`` None: a row without images gets a key of its own,
    unless its text counts)."""
    hashes = "".join(image_hash(image.open(), method) for image in distinct_by_ref(images))
    if text_digest is not None:
        return f"{hashes}|{text_digest}"  # Data-Juicer: the pair (imagehash, text md5)
    if not images:
        return empty_key if empty_key is not None else _own_key()
    return hashes


def add_image_keys(table: pa.Table, *, image_key: str, image_bytes_key: str, method: str, node: str,
                   empty_key: str | None = None, text: TextKey | None = None) -> pa.Table:
    """``table`` with the string column ``KEY_COL``; rows that cannot be keyed become error tombstones."""
    table = ensure_tombstone_columns(table)
    alive = alive_mask(table)
    live = np.ones(table.num_rows, bool) if alive is None else alive.to_numpy(zero_copy_only=False)
    sources = image_sources(table, image_key, image_bytes_key)
    texts = table.column(text.text_key).to_pylist() if text is not None else None
    keys: list[str] = []
    failed: dict[int, Exception] = {}
    for i, images in enumerate(sources):
        if not live[i]:
            keys.append(_own_key())
            continue
        try:
            digest = text.digest(texts[i]) if text is not None else None
            keys.append(row_key(images, method, empty_key, digest))
        except Exception as exc:  # noqa: BLE001 - one unreadable image quarantines its row, not the run
            failed[i] = exc
            keys.append(_own_key())
    table = table.append_column(KEY_COL, pa.array(keys, pa.string()))
    if not failed:
        return table
    bad_mask = np.zeros(table.num_rows, bool)
    bad_mask[list(failed)] = True
    bad = with_tombstones(table.filter(pa.array(bad_mask)), node, TombstoneKind.ERROR,
                          [type(failed[i]).__name__ for i in sorted(failed)],
                          [str(failed[i])[:2000] for i in sorted(failed)])
    return pa.concat_tables([table.filter(pa.array(~bad_mask)), bad])
