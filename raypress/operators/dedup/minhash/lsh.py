"""MinHash-LSH candidate edges, per block and per shuffle partition (Ray-free functions).

Each function takes and returns Arrow tables, so the distributed driver (``minhash.deduplicator``) and
the unit tests run the very same code.  The flow:

1. ``band_rows`` (per input batch, streamed over the input): documents -> shingle hashes ->
   signatures -> one row ``(band_key, id)`` per live document and band; ``tasks.route_step``
   routes them by ``band_key``.  A document with no shingles (empty) gets no rows: it is never
   anyone's near duplicate.
2. ``bucket_step`` (per partition: whole buckets, as a key's rows all land in one partition):
   each bucket of k members becomes k-1 edges from every member to the bucket's smallest id
   (a star: O(k) edges, never the k^2 pairs), routed by node for the connected components.
3. With ``verify``, instead of 2: ``members_step`` keeps the buckets of two or more members
   (a partition's buckets with identical member sets once); ``AttachShingles``, a second pass
   streamed over the input, attaches the shingle hashes of the member documents only (each
   worker indexes the memberships by id once); ``verify_step`` checks pairs in each bucket by
   exact Jaccard.

Verification, and why it is not "every member against the smallest id": that would drop a pair
x ~ y whose bucket minimum matches neither, so a true near-duplicate pair would be lost
whenever LSH also put an unrelated document with a smaller id into their bucket.  Instead the
members of a bucket are visited in id order against the bucket's *leaders* (the members that
matched no earlier leader): a member gets an edge to every leader it matches (Jaccard >=
threshold), or becomes a leader itself.  Every true pair involving a leader is kept, and so is
every pair whose later member matches any leader of the earlier one; the pairs it can miss are two
non-leaders x, y that each match only leaders the other does not (then, Jaccard distance being a
metric, y is still >= 2t-1 similar to x's leader).  Cost: Jaccards per bucket <= k x leaders
(k for a bucket of near duplicates of one text, against k^2/2 for all pairs); shingle hashes
(4 bytes each) travel once per (candidate document, bucket with >= 2 members), nothing for the
rest.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from raypress.kernels.minhash import minhash_signatures, minhash_signatures_on
from raypress.operators.dedup.graph.connected_components import NODE, edges_table, normalize
from raypress.operators.dedup.minhash.bands import band_keys, permutations
from raypress.operators.dedup.minhash.shingles import jaccard, shingle_hashes
from raypress.operators.dedup.shuffle.id_index import IdIndex, cached_index, new_token
from raypress.operators.dedup.shuffle.tasks import concat, route_by_hash
from raypress.schema import ID_COL, alive_mask

KEY, SHINGLES = "band_key", "shingles"


@dataclass(frozen=True)
class LSHConfig:
    """Everything a worker needs to turn texts into band keys (and to name itself in errors)."""

    op: str
    text_key: str
    tokenization: str
    window_size: int
    lowercase: bool
    ignore_pattern: str | None
    num_perm: int
    num_bands: int
    rows_per_band: int
    seed: int
    threshold: float
    chunk_rows: int = 4096
    device: str = "cpu"  # "cuda": signatures by the Triton kernel on the task's GPU (Data-Juicer's accelerator)
    shingle_hash: str = "polynomial"  # or "sha1": Data-Juicer's shingle hash (shingles.shingle_hashes)


@functools.lru_cache(maxsize=4)
def _permutations(num_perm: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    return permutations(num_perm, seed)


def live_rows(table: pa.Table) -> np.ndarray:
    alive = alive_mask(table)
    return np.ones(table.num_rows, dtype=bool) if alive is None else alive.to_numpy(zero_copy_only=False)


def _text_column(table: pa.Table, text_key: str, op: str) -> pa.ChunkedArray:
    if text_key not in table.column_names:
        if not live_rows(table).any():  # a block of tombstones only (or no rows): nothing to read
            return pa.chunked_array([pa.nulls(table.num_rows, pa.string())])
        raise ValueError(f"{op}: the input has no column {text_key!r} (columns: {', '.join(table.column_names)}); "
                         "name the text column with `text_key`")
    return table.column(text_key)


def _is_text(col: pa.ChunkedArray) -> bool:
    return pa.types.is_string(col.type) or pa.types.is_large_string(col.type)


def _is_text_list(col: pa.ChunkedArray) -> bool:
    """An interleaved document's ``texts`` (list<string|null>, MINT-1T/OBELICS)."""
    return ((pa.types.is_list(col.type) or pa.types.is_large_list(col.type))
            and (pa.types.is_string(col.type.value_type) or pa.types.is_large_string(col.type.value_type)))


def document_text(value: Any) -> str | None:
    """The text to shingle: a string as is; a list of text pieces (an interleaved document, images
    at the null positions) joined by blank lines; anything else None (not text)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(v is None or isinstance(v, str) for v in value):
        return "\n\n".join(v for v in value if v)
    return None


def texts_at(table: pa.Table, text_key: str, rows: pa.Array) -> list[str]:
    """The shingled texts of ``rows`` (all known to be good, see ``good_texts``)."""
    col = table.column(text_key)
    values = col.take(rows).to_pylist()
    return values if _is_text(col) else [document_text(v) or "" for v in values]


def good_texts(table: pa.Table, text_key: str, op: str) -> tuple[np.ndarray, list[str]]:
    """Live rows whose text is a string: their indices and texts.  Tombstones are skipped."""
    col = _text_column(table, text_key, op)
    live = live_rows(table)
    if _is_text(col):
        rows = np.flatnonzero(live & col.is_valid().to_numpy(zero_copy_only=False))
        return rows, col.take(pa.array(rows)).to_pylist()
    values = col.to_pylist()  # lists of text pieces, ints, mixed Python objects: row by row
    texts = {i: document_text(values[i]) for i in np.flatnonzero(live).tolist()}
    rows = np.asarray([i for i, t in texts.items() if t is not None], dtype=np.int64)
    return rows, [texts[i] for i in rows.tolist()]


def bad_texts(table: pa.Table, text_key: str, op: str) -> tuple[np.ndarray, list[str], list[str]]:
    """Live rows whose text is not a string: indices, error types, messages naming row and op."""
    col = _text_column(table, text_key, op)
    live = live_rows(table)
    if _is_text(col):
        bad = np.flatnonzero(live & col.is_null().to_numpy(zero_copy_only=False))
        values: list = [None] * len(bad)
    else:
        every = col.to_pylist()
        bad = np.asarray([i for i in np.flatnonzero(live).tolist() if document_text(every[i]) is None],
                         dtype=np.int64)
        values = [every[i] for i in bad.tolist()]
    ids = table.column(ID_COL).take(pa.array(bad, pa.int64())).to_pylist()
    kinds = ["ValueError" if v is None else "TypeError" for v in values]
    messages = [f"{op}: {text_key!r} of row {row_id!r} is {'null' if v is None else f'a {type(v).__name__}'}, "
                "not a string: cannot shingle it" for row_id, v in zip(ids, values)]
    return bad, kinds, messages


def _empty_bands(id_type: pa.DataType) -> pa.Table:
    return pa.table({KEY: pa.array([], pa.uint64()), ID_COL: pa.array([], id_type)})


def signatures_on(device: str, hashes: np.ndarray, offsets: np.ndarray, perm_a: np.ndarray,
                  perm_b: np.ndarray) -> np.ndarray:
    """uint32 signatures computed on ``device``: "cpu" (numba), else the Triton kernel on that torch
    device ("cuda"); bit-identical either way."""
    if device == "cpu":
        return minhash_signatures(hashes, offsets, perm_a, perm_b)
    return minhash_signatures_on(device, hashes, offsets, perm_a, perm_b)


def band_rows(table: pa.Table, cfg: LSHConfig) -> pa.Table:
    """``(band_key, id)``: ``num_bands`` rows per live document that has shingles."""
    rows, texts = good_texts(table, cfg.text_key, cfg.op)
    ids = table.column(ID_COL)
    if len(rows) == 0:
        return _empty_bands(ids.type)
    perm_a, perm_b = _permutations(cfg.num_perm, cfg.seed)
    keys, which = [], []
    for lo in range(0, len(rows), cfg.chunk_rows):
        chunk = texts[lo: lo + cfg.chunk_rows]
        hashes, offsets = shingle_hashes(chunk, cfg.tokenization, cfg.window_size, cfg.lowercase, cfg.ignore_pattern,
                                         cfg.shingle_hash)
        has = np.flatnonzero(offsets[1:] > offsets[:-1])
        if len(has) == 0:
            continue
        sig = signatures_on(cfg.device, hashes, offsets, perm_a, perm_b)[has]
        keys.append(band_keys(sig, cfg.num_bands, cfg.rows_per_band).reshape(-1))
        which.append(np.repeat(rows[lo: lo + cfg.chunk_rows][has], cfg.num_bands))
    if not keys:
        return _empty_bands(ids.type)
    return pa.table({
        KEY: pa.array(np.concatenate(keys), pa.uint64()),
        ID_COL: ids.take(pa.array(np.concatenate(which))),
    })


def _buckets(table: pa.Table, op: str = "near-dedup") -> tuple[pa.Table, np.ndarray, np.ndarray]:
    """Sorted by (band_key, id); per row: is it its bucket's first (smallest id), and that row.

    One id twice in a bucket means two live rows share an id (a document read twice under one
    name): the op marks rows by id, so it stops with the id named instead of marking both."""
    table = table.sort_by([(KEY, "ascending"), (ID_COL, "ascending")])
    n = table.num_rows
    keys = table.column(KEY).to_numpy()
    first = np.ones(n, dtype=bool)
    first[1:] = keys[1:] != keys[:-1]
    if n > 1:
        ids = table.column(ID_COL)
        same = pc.equal(ids.slice(1), ids.slice(0, n - 1)).to_numpy(zero_copy_only=False) & ~first[1:]
        if same.any():
            twice = ids[int(np.flatnonzero(same)[0]) + 1].as_py()
            raise ValueError(f"{op}: two live rows have the id {twice!r}; near-dedup needs unique ids "
                             "(give each row its own id, or run an exact dedup first)")
    head = np.maximum.accumulate(np.where(first, np.arange(n), 0))
    return table, first, head


def bucket_edges(table: pa.Table, op: str = "near-dedup") -> pa.Table:
    """Every non-smallest member of a bucket -- the bucket's smallest id (both ways, normalized)."""
    table, first, head = _buckets(table, op)
    rows = pa.array(np.flatnonzero(~first))
    heads = pa.array(head[~first])
    ids = table.column(ID_COL)
    return normalize(edges_table(ids.take(rows), ids.take(heads)))


def bucket_members(table: pa.Table, op: str = "near-dedup") -> pa.Table:
    """The rows of buckets with two or more members; of buckets with the same member set (a pair
    of near duplicates shares many bands) only the first by key."""
    table, first, head = _buckets(table, op)
    n = table.num_rows
    size = np.bincount(head, minlength=n)[head] if n else np.zeros(0, dtype=np.int64)
    multi = np.flatnonzero(size >= 2)
    if len(multi) == 0:
        return table.slice(0, 0)
    ids = table.column(ID_COL).take(pa.array(multi)).to_pylist()
    seen: set[tuple] = set()
    keep = np.zeros(len(multi), dtype=bool)
    starts = np.flatnonzero(first[multi])
    for s, e in zip(starts.tolist(), [*starts[1:].tolist(), len(multi)]):
        members = tuple(ids[s:e])
        if members not in seen:
            seen.add(members)
            keep[s:e] = True
    return table.take(pa.array(multi[keep]))


def member_shingles(block: pa.Table, members: pa.Table | IdIndex, cfg: LSHConfig) -> pa.Table:
    """Memberships ``(band_key, id)`` of this block's documents, each with its document's shingle
    hashes (``members``: all memberships, or their index by id)."""
    index = members if isinstance(members, IdIndex) else IdIndex(members)
    rows, positions = index.lookup(block.column(ID_COL)) if block.num_rows else (np.zeros(0, np.int64),) * 2
    found = index.table.take(pa.array(positions, pa.int64())).select([KEY, ID_COL])
    found = found.set_column(1, ID_COL, found.column(ID_COL).cast(block.column(ID_COL).type))
    if len(rows) == 0:  # none of this block's documents is a candidate (or it has no live text)
        return found.append_column(SHINGLES, pa.array([], pa.large_list(pa.uint32())))
    docs, at = np.unique(rows, return_inverse=True)
    texts = texts_at(block, cfg.text_key, pa.array(docs, pa.int64()))
    hashes, offsets = shingle_hashes(texts, cfg.tokenization, cfg.window_size, cfg.lowercase, cfg.ignore_pattern,
                                     cfg.shingle_hash)
    sets = pa.LargeListArray.from_arrays(pa.array(offsets, pa.int64()), pa.array(hashes, pa.uint32()))
    return found.append_column(SHINGLES, sets.take(pa.array(at, pa.int64())))


class AttachShingles:
    """The verify pass over the input: each batch -> the memberships of its documents with their
    shingle hashes.  ``members`` (refs or tables) are indexed by id once per worker process."""

    def __init__(self, members: list, cfg: LSHConfig):
        self.members = list(members)
        self.cfg = cfg
        self.token = new_token()

    def __call__(self, block: pa.Table) -> pa.Table:
        return member_shingles(block, cached_index(self.token, self.members), self.cfg)


def verified_edges(table: pa.Table, threshold: float) -> pa.Table:
    """Leader verification in every bucket (see the module docstring); edges both ways."""
    table, first, _ = _buckets(table)
    col = table.column(SHINGLES).combine_chunks()
    hashes = pc.list_flatten(col).to_numpy(zero_copy_only=False).astype(np.uint32)
    offsets = np.zeros(len(col) + 1, dtype=np.int64)
    np.cumsum(pc.list_value_length(col).fill_null(0).to_numpy(zero_copy_only=False), out=offsets[1:])
    left: list[int] = []
    right: list[int] = []
    starts = np.flatnonzero(first).tolist()
    for s, e in zip(starts, [*starts[1:], table.num_rows]):
        leaders = [s]
        for x in range(s + 1, e):
            sims = jaccard(hashes, offsets, np.full(len(leaders), x), np.asarray(leaders))
            matched = [lead for lead, sim in zip(leaders, sims.tolist()) if sim >= threshold]
            if matched:
                left.extend([x] * len(matched))
                right.extend(matched)
            else:
                leaders.append(x)
    ids = table.column(ID_COL)
    a, b = pa.array(left, pa.int64()), pa.array(right, pa.int64())
    return normalize(edges_table(ids.take(a), ids.take(b)))


# -- steps (see shuffle.tasks.run_step): tables in -> routed tables out, plus one integer ---------

def bucket_step(tables: list[pa.Table], n: int, op: str = "near-dedup") -> tuple[list[pa.Table], int]:
    edges = bucket_edges(concat(tables), op)
    return route_by_hash(edges, NODE, n), edges.num_rows // 2


def members_step(tables: list[pa.Table], op: str = "near-dedup") -> tuple[list[pa.Table], int]:
    members = bucket_members(concat(tables), op)
    return [members], members.num_rows


def verify_step(tables: list[pa.Table], threshold: float, n: int) -> tuple[list[pa.Table], int]:
    edges = verified_edges(concat(tables), threshold)
    return route_by_hash(edges, NODE, n), edges.num_rows // 2
