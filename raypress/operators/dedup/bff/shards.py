"""``bff_dedup``'s Bloom filter spread over Ray actors, the verdicts they keep, and pass 3.

Why a module of its own: the filter's bit array may exceed one node's memory, so it is split by
position range over ``FilterShard`` actors (queries and inserts run on all shards at once).  The
same actors keep the verdicts of the documents BFF changed, keyed by id, so that pass 3 (cutting
paragraphs, writing tombstones) runs in parallel tasks that look their documents' verdicts up:
documents never travel through the driver.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pyarrow as pa
import xxhash

from raypress.operators.dedup.bff.decisions import BffVerdict, apply_verdict
from raypress.operators.dedup.bff.bloom import bloom_positions, popcount, set_packed, test_packed
from raypress.operators.shared.documents import CONTENT_COLUMNS, Document, table_to_documents
from raypress.schema import ID_COL, TombstoneKind, alive_mask, ensure_tombstone_columns, with_tombstones

REASON = "bff_seen_ngrams"
REMOVED_COL = "bff_removed_paragraphs"


class FilterShard:
    """One Ray actor: bits ``[lo, lo + num_bits)`` of the filter, and the verdicts of the
    documents whose id hashes to it (for the edit pass)."""

    def __init__(self, num_bits: int):
        self.bits = np.zeros(num_bits // 8, dtype=np.uint8)
        self.verdicts: dict[str, tuple] = {}

    def test(self, offsets: np.ndarray) -> np.ndarray:
        return test_packed(self.bits, offsets)

    def set(self, offsets: np.ndarray) -> None:
        set_packed(self.bits, offsets)

    def popcount(self) -> int:
        return popcount(self.bits)

    def put(self, verdicts: list[tuple]) -> None:
        for v in verdicts:
            self.verdicts[v[0]] = v

    def lookup(self, ids: list[str]) -> list[tuple | None]:
        return [self.verdicts.get(i) for i in ids]


class ShardedBloom:
    """A BitFilter whose bits live in ``FilterShard`` actors, by contiguous position ranges.

    Positions are computed exactly as for a one-piece ``BloomFilter`` of the same size, so the
    decisions do not depend on the number of shards."""

    def __init__(self, num_bits: int, num_hashes: int, num_shards: int):
        import ray

        self.num_bits, self.num_hashes = num_bits, num_hashes
        shards = max(1, min(num_shards, num_bits // 8))
        self.width = (-(-num_bits // shards) + 7) // 8 * 8  # bits per shard, whole bytes
        sizes = [min(self.width, num_bits - s * self.width) for s in range(shards)]
        actor = ray.remote(num_cpus=0)(FilterShard)  # memory-bound: the hint spreads shards over nodes
        self.shards = [actor.options(memory=size // 8 + (64 << 20)).remote(size) for size in sizes if size > 0]
        self.offset_type = np.uint32 if self.width <= 1 << 32 else np.uint64

    def positions(self, pairs: np.ndarray) -> np.ndarray:
        return bloom_positions(pairs, self.num_bits, self.num_hashes)

    def _route(self, positions: np.ndarray):
        flat = positions.ravel()
        shard = (flat // np.uint64(self.width)).astype(np.int64)
        order = np.argsort(shard, kind="stable")
        bounds = np.searchsorted(shard[order], np.arange(len(self.shards) + 1))
        for s in range(len(self.shards)):
            idx = order[bounds[s] : bounds[s + 1]]
            if idx.size:
                yield s, idx, (flat[idx] - np.uint64(s * self.width)).astype(self.offset_type)

    def test_bits(self, positions: np.ndarray) -> np.ndarray:
        import ray

        parts = [(idx, self.shards[s].test.remote(off)) for s, idx, off in self._route(positions)]
        out = np.zeros(positions.size, dtype=bool)
        for (idx, _), bits in zip(parts, ray.get([ref for _, ref in parts])):
            out[idx] = bits
        return out.reshape(positions.shape)

    def set_bits(self, positions: np.ndarray) -> None:
        for s, _, off in self._route(positions):
            self.shards[s].set.remote(off)  # actor calls from one caller run in order

    def fill_ratio(self) -> float:
        import ray

        return sum(ray.get([s.popcount.remote() for s in self.shards])) / self.num_bits


def _shard_of(ids: Sequence[str], shards: int) -> np.ndarray:
    return np.fromiter((xxhash.xxh3_64_intdigest(i.encode()) % shards for i in ids), np.int64, len(ids))


def store_verdicts(shards: list, verdicts: list[BffVerdict]) -> list:
    rows = [(v.id, v.duplicate, v.ngrams, v.contained, v.removed) for v in verdicts if v.changed]
    if not rows:
        return []
    where = _shard_of([r[0] for r in rows], len(shards))
    return [shards[s].put.remote([r for r, w in zip(rows, where) if w == s]) for s in np.unique(where)]


def apply_block(table: pa.Table, shards: list, node: str) -> pa.Table:
    """Pass 3: cut removed paragraphs, tombstone duplicate documents, add ``bff_removed_paragraphs``."""
    import ray

    table = ensure_tombstone_columns(table)
    n = table.num_rows
    if n == 0:  # an empty block may lack columns altogether
        return _put_column(table, REMOVED_COL, pa.nulls(0, pa.int64()))
    alive = alive_mask(table)
    live = np.ones(n, bool) if alive is None else alive.to_numpy(zero_copy_only=False)
    live_rows = np.flatnonzero(live)
    ids = table.column(ID_COL).take(pa.array(live_rows, pa.int64())).to_pylist()
    where = _shard_of(ids, len(shards))
    asks = {int(s): np.flatnonzero(where == s) for s in np.unique(where)}
    answers = ray.get([shards[s].lookup.remote([ids[i] for i in rows]) for s, rows in asks.items()])
    verdict: dict[int, BffVerdict] = {}
    for rows, found in zip(asks.values(), answers):
        for i, v in zip(rows, found):
            if v is not None:
                verdict[int(live_rows[i])] = BffVerdict(v[0], v[2], v[3], list(map(tuple, v[4])), v[1])
    removed_count = np.where(live, 0, -1)
    for r, v in verdict.items():
        removed_count[r] = len(v.removed)
    dup_rows = [r for r, v in verdict.items() if v.duplicate]
    edit_rows = [r for r, v in verdict.items() if not v.duplicate]
    parts, order = [], []
    if edit_rows:
        sub = table.take(pa.array(edit_rows, pa.int64()))
        docs = [apply_verdict(d, verdict[r]) for d, r in zip(table_to_documents(sub), edit_rows)]
        parts.append(_replace_content(sub, docs))
        order += edit_rows
    if dup_rows:
        sub = table.take(pa.array(dup_rows, pa.int64()))
        parts.append(with_tombstones(sub, node, TombstoneKind.DUPLICATE, [REASON] * len(dup_rows),
                                     [verdict[r].detail() for r in dup_rows]))
        order += dup_rows
    if parts:
        rest = np.setdiff1d(np.arange(n), np.asarray(order, dtype=np.int64))
        parts.append(table.take(pa.array(rest, pa.int64())))
        order += rest.tolist()
        table = pa.concat_tables(parts).take(pa.array(np.argsort(np.asarray(order)), pa.int64()))
    return _put_column(table, REMOVED_COL, pa.array(removed_count, pa.int64(), mask=removed_count < 0))


def _put_column(table: pa.Table, name: str, column: pa.Array) -> pa.Table:
    idx = table.schema.get_field_index(name)
    return table.set_column(idx, name, column) if idx >= 0 else table.append_column(name, column)


def _replace_content(sub: pa.Table, docs: list[Document]) -> pa.Table:
    """``sub`` with the content columns of ``docs``, in ``sub``'s own column types."""
    rows = [d.as_row() for d in docs]
    for name in CONTENT_COLUMNS:
        idx = sub.schema.get_field_index(name)
        typ = sub.schema.field(idx).type
        sub = sub.set_column(idx, name, pa.array([r[name] for r in rows], typ))
    return sub



def wait_all(refs: list) -> None:
    """Block until the given actor calls (e.g. ``store_verdicts``' puts) are done."""
    import ray

    if refs:
        ray.get(refs)
