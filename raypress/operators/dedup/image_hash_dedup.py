"""``image_hash_dedup``: MINT-1T's image dedup by sha256, over the whole dataset.

MINT-1T (as OBELICS before it) removes images whose sha256 occurs more than 10 times in the
dataset (logos, icons, tracking pixels, share buttons) and, within one document, every copy of
an image after the first.  The within-document rule runs first, so an image is counted once per
document that holds it: ``max_occurrences`` counts documents.  The sha256 is
``image_metadata.sha256`` when set, else computed from ``image_bytes``; an image with neither
is left alone (it cannot be compared).

Two passes over the (materialized) input: the counts (per block, distinct per document, then
summed per sha256 across blocks by a hash-partitioned reduce), then a map that edits the
documents holding a frequent or repeated image.  Only the frequent hashes (at most 1 / (max_occurrences + 1) of all distinct
images) come back to the driver and travel to the edit tasks.

No document is dropped here, even one left without images: a later ``image_count_filter``
drops those, so the ledger names the rule that removed them.  Adds ``images_removed_dedup``.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import xxhash
from pydantic import Field

from raypress.operators.base import Deduplicator, Params, RunContext
from raypress.operators.shared.documents import CONTENT_COLUMNS, DOCUMENT_COLUMNS, Document, table_to_documents
from raypress.operators.registry import register
from raypress.schema import alive_mask

if TYPE_CHECKING:  # pragma: no cover
    import ray.data

REMOVED_COL = "images_removed_dedup"
_SHA, _COUNT = "sha256", "documents"


def image_hashes(table: pa.Table, rows: list[int] | None = None) -> list[list[str | None]]:
    """Per row (of ``rows``, default all), per position: the image's sha256 hex, or None for a
    text position or an image with neither a recorded sha256 nor bytes."""
    rows = list(range(table.num_rows)) if rows is None else rows
    if not rows:
        return []
    images = table.column("images").to_pylist()
    metas = table.column("image_metadata").to_pylist()
    image_bytes = table.column("image_bytes")
    out = []
    for r in rows:
        refs, meta = images[r] or [], metas[r] or []
        shas: list[str | None] = []
        data: list[Any] | None = None
        for j, ref in enumerate(refs):
            sha = (meta[j] or {}).get("sha256") if j < len(meta) else None
            if ref is not None and not sha:
                if data is None:
                    data = image_bytes[r].as_py() or []
                if j < len(data) and data[j]:
                    sha = hashlib.sha256(data[j]).hexdigest()
            shas.append(sha.lower() if ref is not None and sha else None)
        out.append(shas)
    return out


def _live_rows(table: pa.Table) -> list[int]:
    alive = alive_mask(table)
    if alive is None:
        return list(range(table.num_rows))
    return np.flatnonzero(alive.to_numpy(zero_copy_only=False)).tolist()


def count_block(table: pa.Table) -> pa.Table:
    """Pass 1: (sha256, number of live documents of this block holding it)."""
    counts: Counter[str] = Counter()
    for shas in image_hashes(table, _live_rows(table) if table.num_rows else []):
        counts.update({s for s in shas if s is not None})
    return pa.table({_SHA: pa.array(list(counts), pa.string()), _COUNT: pa.array(list(counts.values()), pa.int64())})


def dedup_images(doc: Document, shas: list[str | None], frequent: frozenset[str] | set[str]) -> int:
    """Remove from ``doc`` its images whose sha is frequent and every later copy of an image;
    returns how many were removed (0: ``doc`` untouched)."""
    seen: set[str] = set()
    keep = []
    for sha in shas:
        ok = sha is None or (sha not in frequent and sha not in seen)
        if sha is not None:
            seen.add(sha)
        keep.append(ok)
    removed = keep.count(False)
    if removed:
        doc.keep_positions(keep)
    return removed


def edit_block(table: pa.Table, frequent: frozenset[str]) -> pa.Table:
    """Pass 2: edit live documents that hold a frequent or repeated image; tombstones pass."""
    live = _live_rows(table) if table.num_rows else []  # an empty block may lack columns
    removed: list[int | None] = [None] * table.num_rows
    for r in live:
        removed[r] = 0
    touched = [(r, shas) for r, shas in zip(live, image_hashes(table, live)) if _needs_edit(shas, frequent)]
    if touched:
        rows = [r for r, _ in touched]
        sub = table.take(pa.array(rows, pa.int64()))
        docs = table_to_documents(sub)
        for doc, (r, shas) in zip(docs, touched):
            removed[r] = dedup_images(doc, shas, frequent)
        table = _put_rows(table, rows, docs)
    column = pa.array(removed, pa.int64())
    idx = table.schema.get_field_index(REMOVED_COL)
    return table.set_column(idx, REMOVED_COL, column) if idx >= 0 else table.append_column(REMOVED_COL, column)


def _needs_edit(shas: list[str | None], frequent: frozenset[str]) -> bool:
    present = [s for s in shas if s is not None]
    return len(set(present)) < len(present) or any(s in frequent for s in present)


def _put_rows(table: pa.Table, rows: list[int], docs: list[Document]) -> pa.Table:
    """``table`` with the content of ``rows`` replaced by ``docs`` (row order and types kept)."""
    sub = table.take(pa.array(rows, pa.int64()))
    new_rows = [d.as_row() for d in docs]
    for name in CONTENT_COLUMNS:
        idx = sub.schema.get_field_index(name)
        sub = sub.set_column(idx, name, pa.array([row[name] for row in new_rows], sub.schema.field(idx).type))
    rest = np.setdiff1d(np.arange(table.num_rows), rows)
    out = pa.concat_tables([sub, table.take(pa.array(rest, pa.int64()))])
    return out.take(pa.array(np.argsort(np.concatenate([rows, rest])), pa.int64()))


PARTITION_BYTES = 128 << 20  # (sha256, count) rows one reduce task sums at a time


def split_counts(counts: pa.Table, parts: int) -> list[pa.Table]:
    """Per-block counts cut into ``parts`` hash partitions of sha256 (a small hash shuffle with
    plain Ray tasks: Ray Data's groupby starts shuffle actors, seconds of fixed cost)."""
    where = np.fromiter((xxhash.xxh3_64_intdigest(s.encode()) % parts for s in counts.column(_SHA).to_pylist()),
                        np.int64, counts.num_rows)
    return [counts.filter(pa.array(where == i)) for i in range(parts)]


def frequent_in(limit: int, *pieces: pa.Table) -> list[str]:
    """Sum the counts of one partition; the sha256s counted in more than ``limit`` documents."""
    pieces = tuple(piece for piece in pieces if piece.num_rows)  # Ray may hand over empty, column-less blocks
    if not pieces:
        return []
    table = pa.concat_tables(pieces)
    totals = table.group_by(_SHA).aggregate([(_COUNT, "sum")])
    return totals.column(_SHA).filter(pc.greater(totals.column(f"{_COUNT}_sum"), limit)).to_pylist()


class ImageHashParams(Params):
    max_occurrences: int = Field(
        10, ge=1, description="remove images whose sha256 is in more than this many documents (MINT-1T: 10)"
    )
    num_partitions: int | None = Field(
        None, ge=1, description="partitions of the count aggregation (default: one per 128 MB of per-block counts)"
    )


@register("image_hash_dedup")
class ImageHashDedup(Deduplicator[ImageHashParams]):
    """Remove images whose sha256 is in more than max_occurrences documents (10) and later copies
    of an image within a document; documents are kept (image_count_filter drops empty ones)."""

    reads = DOCUMENT_COLUMNS
    writes = CONTENT_COLUMNS + (REMOVED_COL,)

    def frequent_hashes(self, ds: "ray.data.Dataset", ctx: RunContext) -> frozenset[str]:
        """The sha256s in more than ``max_occurrences`` live documents of ``ds``."""
        import ray

        p = self.params
        counts = ds.map_batches(count_block, batch_format="pyarrow").materialize()
        runs = counts.to_arrow_refs()
        if not runs:
            return frozenset()
        parts = p.num_partitions or max(1, -(-counts.size_bytes() // PARTITION_BYTES))
        if parts == 1:
            pieces = [[r] for r in runs]
        else:
            split = ray.remote(split_counts).options(num_returns=parts, num_cpus=0)
            pieces = [split.remote(r, parts) for r in runs]
        reduce = ray.remote(frequent_in).options(num_cpus=0)
        found = ray.get([reduce.remote(p.max_occurrences, *[piece[i] for piece in pieces]) for i in range(parts)])
        return frozenset(sha for part in found for sha in part)

    def apply(self, ds: "ray.data.Dataset", ctx: RunContext) -> "ray.data.Dataset":
        frequent = self.frequent_hashes(ds, ctx)
        ctx.event("image_hash_dedup", frequent_images=len(frequent))
        return ds.map_batches(edit_block, batch_format="pyarrow", fn_kwargs=dict(frequent=frequent))
