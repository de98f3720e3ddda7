"""``document_deduplicator``: Data-Juicer's exact document dedup, global and deterministic.

Normalization and hash follow Data-Juicer's ``DocumentDeduplicator`` (optional lowercase, then
optional removal of whitespace, digits and ASCII punctuation, then ``strip()``, then md5 of the
UTF-8 bytes), so the md5 recorded in each duplicate's detail is the value Data-Juicer computes.
Data-Juicer keeps the first occurrence in dataset order; on a distributed dataset that order is
not stable, so here each group keeps its smallest ``id`` instead (see ``exact/by_key.py``).
"""

from __future__ import annotations

import hashlib
import re
import string
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
from pydantic import Field

from raypress.operators.base import Deduplicator, Params, RunContext
from raypress.operators.dedup.exact.by_key import keep_smallest_id
from raypress.operators.registry import register
from raypress.schema import (
    ID_COL,
    TOMBSTONE_COLS,
    TombstoneKind,
    alive_mask,
    ensure_tombstone_columns,
    with_tombstones,
)

if TYPE_CHECKING:  # pragma: no cover
    import ray.data

HASH_COL = "_rp_hash"

# Data-Juicer's pattern ``\s+|\d+|[<punctuation>]`` as one class: removing every matched
# character gives the same string.  (Data-Juicer compiles it with the ``regex`` package; the
# stdlib agrees on every code point but the separators U+001C..U+001F, which ``re`` counts as
# whitespace, and the digits of scripts newer than this Python's Unicode tables.)
_NON_CHARACTER = re.compile(rf"[\s\d{re.escape(string.punctuation)}]+")


def normalize_text(text: str, lowercase: bool = False, ignore_non_character: bool = False) -> str:
    """The text Data-Juicer hashes: optionally lowercased, optionally without whitespace,
    digits and ASCII punctuation, then stripped."""
    if lowercase:
        text = text.lower()
    if ignore_non_character:
        text = _NON_CHARACTER.sub("", text)
    return text.strip()


def text_md5(text: str, lowercase: bool = False, ignore_non_character: bool = False) -> bytes:
    """md5 digest (16 bytes) of the normalized text; ``.hex()`` is Data-Juicer's hash value."""
    return hashlib.md5(normalize_text(text, lowercase, ignore_non_character).encode()).digest()


def _string_tombstone_columns(table: pa.Table) -> pa.Table:
    """All-null tombstone columns may arrive typed ``null``; make every block agree on string."""
    for name in TOMBSTONE_COLS:
        i = table.schema.get_field_index(name)
        if table.schema.field(i).type != pa.string():
            table = table.set_column(i, name, table.column(i).cast(pa.string()))
    return table


def add_text_hash(
    table: pa.Table, text_key: str, lowercase: bool, ignore_non_character: bool, node: str
) -> pa.Table:
    """Add the 16-byte ``_rp_hash`` column.  A live row whose text is null cannot be compared:
    it leaves as an error tombstone (quarantined with the message) rather than killing the run.
    Tombstones are keyed by their id only so that they spread evenly over the shuffle."""
    table = _string_tombstone_columns(ensure_tombstone_columns(table))
    alive = alive_mask(table)
    is_alive = np.ones(table.num_rows, bool) if alive is None else alive.to_numpy()
    texts = table.column(text_key)
    null_text = is_alive & texts.is_null().to_numpy(zero_copy_only=False)
    if null_text.any():
        bad = table.filter(pa.array(null_text))
        message = f"{text_key!r} is null: cannot hash the document"
        bad = with_tombstones(
            bad, node, TombstoneKind.ERROR, ["ValueError"] * bad.num_rows, [message] * bad.num_rows
        )
        table = pa.concat_tables([table.filter(pa.array(~null_text)), bad])
        is_alive = np.concatenate([is_alive[~null_text], np.zeros(bad.num_rows, bool)])
        texts = table.column(text_key)
    ids = table.column(ID_COL).to_pylist()
    digests = [
        text_md5(text, lowercase, ignore_non_character)
        if live
        else hashlib.md5(f"\0{row_id}".encode()).digest()
        for text, row_id, live in zip(texts.to_pylist(), ids, is_alive)
    ]
    return table.append_column(HASH_COL, pa.array(digests, pa.binary(16)))


class DocumentDedupParams(Params):
    text_key: str = Field("text", description="column holding the document text")
    lowercase: bool = Field(False, description="compare texts case-insensitively")
    ignore_non_character: bool = Field(
        False,
        description="ignore whitespace, digits and ASCII punctuation when comparing texts",
    )
    num_partitions: int | None = Field(
        None,
        ge=1,
        description="partitions of the hash shuffle (default: one per 100,000 input rows, "
        "at most 200)",
    )


@register("document_deduplicator")
class DocumentDeduplicator(Deduplicator[DocumentDedupParams]):
    """Exact document dedup: md5 of the normalized text; each group keeps its smallest id."""

    reads = (ID_COL,)

    def apply(self, ds: "ray.data.Dataset", ctx: RunContext) -> "ray.data.Dataset":
        p = self.params
        hashed = ds.map_batches(
            add_text_hash,
            batch_format="pyarrow",
            fn_kwargs=dict(
                text_key=p.text_key,
                lowercase=p.lowercase,
                ignore_non_character=p.ignore_non_character,
                node=ctx.node_id,
            ),
        )
        return keep_smallest_id(
            hashed, HASH_COL, ctx.node_id, detail_key="md5",
            num_partitions=p.num_partitions or ctx.shuffle_partitions(),
        )
