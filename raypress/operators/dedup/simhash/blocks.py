"""Data-Juicer's 64-bit SimHash of a document and its near-duplicate candidates (Ray-free functions).

The SimHash is Data-Juicer's (its ``simhash-pybind`` dependency, i.e. seomoz's simhash-cpp), bit
for bit: the text is prepared as for MinHash (``minhash_shingles.prepare``: lowercase, then
remove ``ignore_pattern``, where Data-Juicer's ``\\p{P}`` is understood: see
``shared.unicode_regex``), cut into shingles of ``window_size`` tokens, each shingle's UTF-8 bytes
hashed by the first 8 bytes of their MD5 (big-endian), and bit ``i`` of the SimHash is set when
more than half of the shingle hashes have bit ``i`` set.  Tokens, as Data-Juicer makes them:

- ``space``: the text split on single ``" "``, empty words dropped (newlines stay inside words);
- ``punctuation``: the text split at every character of Unicode category P*, empty pieces kept,
  pieces of a shingle joined by ``" "``;
- ``character``: every ``window_size``-character substring is a shingle.

A document with fewer tokens than the window has no shingle and, as in Data-Juicer, the SimHash
0: all such short (or empty) documents are near duplicates of each other, and of any document
within ``hamming_distance`` bits of 0.  Data-Juicer's recipes filter short documents out before
this op; the MinHash op, whose results cannot equal Data-Juicer's anyway, differs here instead.

Candidates (simhash-cpp's ``find_all``): the 64 bits are cut into ``num_blocks`` blocks; two
hashes that differ in at most ``k = hamming_distance`` bits agree on at least ``num_blocks - k``
whole blocks, so for each choice of ``num_blocks - k`` blocks the hashes are bucketed by those
blocks' bits, and pairs within a bucket are checked exactly.  The result is exactly every pair of
documents whose SimHashes differ in at most ``k`` bits (equal SimHashes included), whatever the
partitioning: a bucket's rows all land in one partition.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import math
import re
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from raypress.operators.dedup.graph.connected_components import NODE, edges_table, normalize
from raypress.operators.dedup.hashing import GOLDEN, fmix64
from raypress.operators.dedup.minhash.lsh import good_texts
from raypress.operators.dedup.minhash.shingles import TOKENIZATIONS, prepare
from raypress.operators.dedup.shuffle.tasks import concat, route_by_hash
from raypress.operators.shared.unicode_regex import compile_pattern
from raypress.schema import ID_COL

KEY, COMBO, HASH = "block_key", "combo", "simhash"
BITS = 64
MAX_CHOICES = 1000  # C(num_blocks, hamming_distance); the recipes use C(6, 4) = 15 and C(9, 7) = 36
PAIRS_PER_PASS = 1 << 22  # candidate pairs checked per vectorised pass (bounds the work arrays)


@dataclass(frozen=True)
class SimhashConfig:
    """Everything a worker needs to turn texts into bucket rows (and to name itself in errors)."""

    op: str
    text_key: str
    tokenization: str
    window_size: int
    lowercase: bool
    ignore_pattern: str | None
    num_blocks: int
    hamming_distance: int


def check_blocks(num_blocks: int, hamming_distance: int) -> None:
    """simhash-cpp's rule (it raises otherwise), no block narrower than one bit, and a bounded
    number of block choices (each costs a row per document)."""
    if not 0 < num_blocks <= BITS:
        raise ValueError(f"num_blocks must be between 1 and {BITS}")
    if not 0 <= hamming_distance < num_blocks:
        raise ValueError(f"hamming_distance ({hamming_distance}) must be less than num_blocks ({num_blocks})")
    choices = math.comb(num_blocks, hamming_distance)
    if choices > MAX_CHOICES:
        raise ValueError(f"num_blocks={num_blocks} with hamming_distance={hamming_distance} makes {choices} "
                         f"choices of blocks (one row per document each); at most {MAX_CHOICES}: use fewer blocks")


@functools.cache
def _punctuation() -> re.Pattern[str]:
    """One character of Unicode category P* (Data-Juicer's ``\\p{P}``)."""
    return compile_pattern(r"\p{P}")


def shingles(text: str, tokenization: str, window_size: int) -> list[str]:
    """Data-Juicer's shingles of an already prepared text (none when it has fewer tokens than
    the window)."""
    w = window_size
    if tokenization == "character":
        return [text[i: i + w] for i in range(len(text) - w + 1)]
    if tokenization == "space":
        tokens = [t for t in text.split(" ") if t]
    elif tokenization == "whitespace":  # raypress's opt-in: re-wrapped copies shingle alike
        tokens = text.split()
    elif tokenization == "punctuation":
        tokens = _punctuation().split(text)
    else:
        raise ValueError(f"unknown tokenization {tokenization!r}; expected one of {TOKENIZATIONS}")
    return [" ".join(tokens[i: i + w]) for i in range(len(tokens) - w + 1)]


def combine(hashes: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """simhash-cpp's ``compute`` per document: bit i set when more than half the hashes have it
    (documents ``hashes[offsets[d]:offsets[d+1]]``, each non-empty).  One pass per bit: 64 sums
    over the flat array beat one pass over a (hashes x 64) bit matrix several times."""
    starts, sizes = offsets[:-1], np.diff(offsets)
    out = np.zeros(len(sizes), dtype=np.uint64)
    one = np.uint64(1)
    for bit in range(BITS):
        b = np.uint64(bit)
        ones = np.add.reduceat(((hashes >> b) & one).astype(np.int32), starts) if len(hashes) else out
        out |= (2 * ones > sizes).astype(np.uint64) << b
    return out


def simhashes(
    texts: list[str | None], tokenization: str, window_size: int, lowercase: bool = True,
    ignore_pattern: str | None = None,
) -> np.ndarray:
    """Data-Juicer's uint64 SimHash of each text (0 for a text without shingles)."""
    ignore = compile_pattern(ignore_pattern) if ignore_pattern else None
    per_doc = [shingles(prepare(t, lowercase, ignore), tokenization, window_size) for t in texts]
    counts = np.fromiter(map(len, per_doc), dtype=np.int64, count=len(per_doc))
    has = counts > 0
    digest = hashlib.md5
    raw = b"".join(digest(s.encode("utf-8", "surrogatepass")).digest()[:8] for doc in per_doc for s in doc)
    hashes = np.frombuffer(raw, dtype=">u8").astype(np.uint64)
    offsets = np.zeros(int(has.sum()) + 1, dtype=np.int64)
    np.cumsum(counts[has], out=offsets[1:])
    out = np.zeros(len(texts), dtype=np.uint64)
    out[has] = combine(hashes, offsets)
    return out


def hamming(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Bits that differ between uint64 arrays ``a`` and ``b``."""
    return np.bitwise_count(np.bitwise_xor(a, b))


@functools.cache
def block_combinations(num_blocks: int, hamming_distance: int) -> np.ndarray:
    """uint64 masks, one per choice of ``num_blocks - hamming_distance`` of simhash-cpp's blocks
    (block i: bits ``i*64//num_blocks`` up to ``(i+1)*64//num_blocks``)."""
    check_blocks(num_blocks, hamming_distance)
    blocks = [sum(1 << j for j in range(i * BITS // num_blocks, (i + 1) * BITS // num_blocks))
              for i in range(num_blocks)]
    return np.array([sum(blocks[i] for i in chosen)
                     for chosen in itertools.combinations(range(num_blocks), num_blocks - hamming_distance)],
                    dtype=np.uint64)



def block_keys(hashes: np.ndarray, num_blocks: int, hamming_distance: int) -> np.ndarray:
    """(docs x combinations) uint64 bucket keys: a mix of the chosen blocks' bits and the choice.
    Two keys of different bits may collide: that only adds a candidate, which is then checked."""
    masks = block_combinations(num_blocks, hamming_distance)
    salt = (np.arange(1, len(masks) + 1, dtype=np.uint64) * GOLDEN)[None, :]
    with np.errstate(over="ignore"):
        return fmix64((hashes[:, None] & masks[None, :]) ^ salt)


def _empty_rows(id_type: pa.DataType) -> pa.Table:
    return pa.table({KEY: pa.array([], pa.uint64()), COMBO: pa.array([], pa.int32()), HASH: pa.array([], pa.uint64()),
                     ID_COL: pa.array([], id_type)})


def bucket_rows(table: pa.Table, cfg: SimhashConfig) -> pa.Table:
    """``(block_key, combo, simhash, id)``: one row per live document with a string text and per
    choice of blocks."""
    rows, texts = good_texts(table, cfg.text_key, cfg.op)
    ids = table.column(ID_COL)
    if len(rows) == 0:
        return _empty_rows(ids.type)
    hashes = simhashes(texts, cfg.tokenization, cfg.window_size, cfg.lowercase, cfg.ignore_pattern)
    keys = block_keys(hashes, cfg.num_blocks, cfg.hamming_distance)
    n_combo = keys.shape[1]
    which = np.repeat(rows, n_combo)
    return pa.table({
        KEY: pa.array(keys.reshape(-1), pa.uint64()),
        COMBO: pa.array(np.tile(np.arange(n_combo, dtype=np.int32), len(rows))),
        HASH: pa.array(np.repeat(hashes, n_combo), pa.uint64()),
        ID_COL: ids.take(pa.array(which)),
    })


def _upper_pairs(starts: np.ndarray, sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every (i, j), i < j, within one group, for groups of ``sizes`` indices from ``starts``."""
    group = np.repeat(np.arange(len(sizes)), sizes)
    base = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=base[1:])
    local = np.arange(len(group), dtype=np.int64) - base[group]
    later = sizes[group] - local - 1  # indices after each one in its group
    left = np.repeat(starts[group] + local, later)
    first = np.zeros(len(group) + 1, dtype=np.int64)
    np.cumsum(later, out=first[1:])
    right = left + 1 + (np.arange(len(left), dtype=np.int64) - np.repeat(first[:-1], later))
    return left, right


def bucket_edges(table: pa.Table, hamming_distance: int) -> pa.Table:
    """Edges of one partition's buckets: documents of equal SimHash to the smallest id among them
    (from the first choice of blocks only, which every such group shares), and the smallest ids of
    two different SimHashes in one bucket to each other when they differ in <= k bits; both ways,
    normalized."""
    if table.num_rows == 0:
        return normalize(edges_table(table.column(ID_COL), table.column(ID_COL)))
    table = table.sort_by([(KEY, "ascending"), (HASH, "ascending"), (ID_COL, "ascending")])
    n = table.num_rows
    keys = table.column(KEY).to_numpy()
    hashes = table.column(HASH).to_numpy()
    new_key = np.ones(n, dtype=bool)
    new_key[1:] = keys[1:] != keys[:-1]
    new_hash = new_key.copy()
    new_hash[1:] |= hashes[1:] != hashes[:-1]
    head = np.maximum.accumulate(np.where(new_hash, np.arange(n), 0))  # smallest id of its (key, hash)
    combo0 = table.column(COMBO).to_numpy() == 0
    same = np.flatnonzero(~new_hash & combo0)
    a_rows, b_rows = [same], [head[same]]
    # distinct SimHashes of each bucket: all pairs, checked exactly
    reps = np.flatnonzero(new_hash)
    bucket_of = np.cumsum(new_key)[reps]
    starts = np.flatnonzero(np.r_[True, bucket_of[1:] != bucket_of[:-1]])
    sizes = np.diff(np.r_[starts, len(reps)])
    multi = sizes >= 2
    starts, sizes = starts[multi], sizes[multi]
    done = np.cumsum(sizes * (sizes - 1) // 2)
    lo = 0
    while lo < len(starts):  # passes of about PAIRS_PER_PASS pairs (a bucket is never split)
        before = int(done[lo - 1]) if lo else 0
        hi = max(int(np.searchsorted(done, before + PAIRS_PER_PASS, side="right")), lo + 1)
        left, right = _upper_pairs(starts[lo:hi], sizes[lo:hi])
        ok = hamming(hashes[reps[left]], hashes[reps[right]]) <= hamming_distance
        a_rows.append(reps[left[ok]])
        b_rows.append(reps[right[ok]])
        lo = hi
    a, b = pa.array(np.concatenate(a_rows)), pa.array(np.concatenate(b_rows))
    ids = table.column(ID_COL)
    return normalize(edges_table(ids.take(a), ids.take(b)))


# -- steps (see shuffle.tasks.run_step): tables in -> routed tables out, plus one integer -----------

def pairs_step(tables: list[pa.Table], hamming_distance: int, n: int) -> tuple[list[pa.Table], int]:
    edges = bucket_edges(concat(tables), hamming_distance)
    return route_by_hash(edges, NODE, n), edges.num_rows // 2
