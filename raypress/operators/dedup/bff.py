"""``bff_dedup``: BFF's Bloom-filter paragraph + document dedup (``old-both``), deterministic, on Ray.

What BFF does (DCLM's copy of allenai/bff, mlfoundations/dclm ``dedup/bff/src/main.rs``,
``process_line_oldboth``, run as DCLM's README documents it: ``--min-ngram-size 13
--max-ngram-size 13 --fp-rate 0.01 --filtering-threshold 0.8 --remove-type old-both``, the
settings MINT-1T reports), per document, in input order:

* paragraphs are the text split on ``"\\n"``; each is tokenised with Unicode word boundaries
  (``split_word_bounds``), whitespace-only tokens dropped, case kept (no lowercasing), so
  punctuation marks are tokens too;
* a paragraph's n-grams are its windows of ``ngram_size`` tokens; a paragraph shorter than that
  but with at least ``min_ngram_size`` tokens is one n-gram of all its tokens; a shorter one has
  none: it is never removed and never enters the filter (with DCLM's min = max = 13 every
  paragraph under 13 tokens is simply kept);
* the paragraph is removed when ``contained / ngrams > threshold`` (strictly greater, as in
  BFF); otherwise all its n-grams are inserted, before the next paragraph is checked;
* the document is removed when ``sum contained / sum ngrams > threshold`` over its paragraphs
  (contained counted before any removal; kept paragraphs' n-grams stay inserted, as in BFF).

Here a document's paragraphs are those of each text position in order.  A removed paragraph
is cut as BFF cuts it, the window ``[its start, the next paragraph's start)`` (every paragraph
but a position's first starts with its ``"\\n"``); a text position left blank is dropped from
all parallel lists.  The tokeniser is a ``re`` approximation of UAX #29 word bounds (words with
inner apostrophes/periods/colons, numbers with inner ``,;.``, combining marks attached; each
other symbol, each ideograph and each Thai/Lao/Khmer/Myanmar letter a token), since no UAX #29
segmenter ships with the project; it only has to be consistent, not byte-identical to Rust's.

Determinism and Ray: BFF is order dependent (the first copy wins) and the Rust tool runs files
on threads sharing one filter, so its output varies from run to run.  This op is sequential
BFF in a fixed order, ``order_by`` (default ``id``) then ``id``, independent of blocks and
workers:

1. parallel (Ray Data tasks): tokenise and hash every live document into per-paragraph
   n-gram hashes (the expensive, pure-Python part);
2. those light rows (sorted within each block) are merged into the global order one key range
   at a time (plain Ray tasks cut every block at common sampled boundaries; the driver sorts
   one range, ``merge_bytes`` of hashes, at a time; Ray Data's sort would start shuffle workers,
   seconds of fixed cost) and decided in batches of ``batch_docs`` documents.  The filter's
   bit array is split by position range over ``num_shards`` Ray actors (so it may exceed one
   node's memory, and queries/inserts run on all shards at once).  Per batch: the actors return
   the bits of all its n-grams as they were before the batch; the driver resolves the order
   dependencies inside the batch exactly (an n-gram with an unset bit that no earlier paragraph
   of the batch touches is surely unseen; the few others are replayed paragraph by paragraph
   against the bits earlier kept paragraphs set), then sends the kept paragraphs' n-grams to
   the actors.  The result is bit-for-bit that of one sequential BFF pass over the same filter,
   for any number of blocks, batch size or shard count;
3. parallel: each task looks up the verdicts of its documents (held by the same actors, keyed by
   id) and cuts paragraphs / writes tombstones.  Documents never travel through the driver.

What does not parallelise: step 2's decisions (vectorised numpy per batch plus a Python loop over
the rare paragraphs with in-batch repeats) - inherent to "first seen wins".

Memory: the filter needs ``m = -n ln p / (ln 2)^2`` bits, about 9.59 bits per n-gram at p = 0.01
(k = 7 hashes), i.e. about 1.2 GB per billion n-grams, split evenly over the shard actors.  By
default it is sized for the n-grams this input actually has (counted in step 1).

Removed documents leave, with their content unchanged, as DUPLICATE tombstones with reason
``bff_seen_ngrams`` (BFF does not know which document it duplicates, so unlike the exact dedups
the reason cannot be the kept twin's id) and detail ``{"contained_fraction",
"contained_ngrams", "ngrams"}``.  Kept documents get ``bff_removed_paragraphs``; rows that
arrive as tombstones pass through untouched and are not seen by the filter.
"""

from __future__ import annotations

import bisect
import functools
import re
import time
import unicodedata
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import xxhash
from pydantic import Field, model_validator

from raypress.operators.base import Deduplicator, Params, RunContext, json_detail
from raypress.operators.shared.documents import CONTENT_COLUMNS, DOCUMENT_COLUMNS, Document, table_to_documents
from raypress.operators.dedup.bloom import (
    BitFilter,
    bloom_positions,
    optimal_num_bits,
    optimal_num_hashes,
    pairs_from_u64,
    popcount,
    set_packed,
    test_packed,
)
from raypress.operators.registry import register
from raypress.schema import ID_COL, TombstoneKind, alive_mask, ensure_tombstone_columns, with_tombstones

if TYPE_CHECKING:  # pragma: no cover
    import ray.data

REASON = "bff_seen_ngrams"
REMOVED_COL = "bff_removed_paragraphs"

# -- tokenisation -----------------------------------------------------------------------------

# Scripts UAX #29 segments one character at a time (ideographs, Hiragana, South-East Asian
# letters) and Katakana, which it keeps in runs.
_SINGLE = ((0x0E00, 0x0EFF), (0x1000, 0x109F), (0x1780, 0x17FF), (0x3040, 0x309F), (0x3400, 0x4DBF),
           (0x4E00, 0x9FFF), (0xF900, 0xFAFF), (0x20000, 0x3134F))
_KATAKANA = ((0x30A0, 0x30FF), (0x31F0, 0x31FF), (0xFF66, 0xFF9F))


def _char_class(ranges: Sequence[tuple[int, int]]) -> str:
    return "".join(re.escape(chr(a)) if a == b else f"{re.escape(chr(a))}-{re.escape(chr(b))}" for a, b in ranges)


@functools.cache
def _token_re() -> re.Pattern[str]:
    marks, start = [], None  # combining marks Python's \w leaves out (BMP: keeps the class a bitmap)
    for cp in range(0x10000):
        c = chr(cp)
        hit = unicodedata.category(c)[0] == "M" and not c.isalnum()
        if hit and start is None:
            start = cp
        elif not hit and start is not None:
            marks.append((start, cp - 1))
            start = None
    m = _char_class(marks + [(0xAD, 0xAD), (0x200C, 0x200D)])
    not_word = _char_class(_SINGLE + _KATAKANA)
    run = rf"[^\W{not_word}]+(?:[{m}]+[^\W{not_word}]*)*"
    word = rf"{run}(?:(?:['\u2019.:\u00b7]|(?<=\d)[,;](?=\d)){run})*"
    return re.compile(rf"{word}|[{_char_class(_SINGLE)}][{m}]*|[{_char_class(_KATAKANA)}]+|\S[{m}]*")


@functools.cache
def _token_re_with_newlines() -> re.Pattern[str]:
    """The token pattern that also returns each "\\n" (a paragraph break) as a token."""
    return re.compile("\n|" + _token_re().pattern)


_NEWLINE_HASH = xxhash.xxh3_64_intdigest(b"\n")


def tokenize(text: str) -> list[str]:
    """BFF's tokens: Unicode word-bound segments that are not all whitespace (case kept)."""
    return _token_re().findall(text)


# -- n-gram hashing ---------------------------------------------------------------------------

_MASK = (1 << 64) - 1
_POLY = 0x9E3779B97F4A7C15  # odd: the rolling combination is a bijection in each token
_LEN_SALT = 0xC2B2AE3D27D4EB4F


def _start(length: int) -> int:
    """Initial accumulator, different for each n-gram length (a short paragraph's single n-gram
    never equals a full window)."""
    return (length * _LEN_SALT + 0x165667B19E3779F9) & _MASK


@dataclass
class NgramBatch:
    """Flat, per-paragraph n-gram hashes of a run of documents, in processing order.

    Only paragraphs with at least one n-gram are listed (the others can neither be removed nor
    change the filter).  ``keys`` holds one 64-bit hash per n-gram, paragraph after paragraph."""

    doc_ids: list[str]
    doc_of_par: np.ndarray  # int64 (G,)
    par_pos: np.ndarray  # int32 (G,): text position of the paragraph
    par_idx: np.ndarray  # int32 (G,): its index among the position's "\n"-split paragraphs
    par_ngrams: np.ndarray  # int64 (G,)
    keys: np.ndarray  # uint64 (N,)

    @property
    def num_ngrams(self) -> int:
        return int(self.keys.size)


def hash_documents(
    texts: Sequence[Sequence[str | None] | None], ids: Sequence[str], ngram_size: int, min_ngram_size: int
) -> NgramBatch:
    """Tokenise and hash documents: per paragraph (text position split on "\\n"), the 64-bit
    hashes of its ``ngram_size``-token windows (or of all its tokens when it has
    ``min_ngram_size`` to ``ngram_size - 1``).

    Token hashes are xxh3_64 of the UTF-8 token; a window's hash is a polynomial over them mod
    2^64.  Each text position is tokenised in one ``findall`` that also returns its "\\n"s as
    markers, so the per-paragraph bookkeeping and all windows of the batch are numpy work."""
    find = _token_re_with_newlines().findall
    token_hash = xxhash.xxh3_64_intdigest
    hashes: list[int] = []
    pos_doc: list[int] = []
    pos_index: list[int] = []
    pos_len: list[int] = []
    for d, positions in enumerate(texts):
        for p, text in enumerate(positions or ()):
            if not text:
                continue
            tokens = find(text)
            hashes.extend(map(token_hash, map(str.encode, tokens)))
            pos_doc.append(d)
            pos_index.append(p)
            pos_len.append(len(tokens))
    h = np.asarray(hashes, dtype=np.uint64)
    position = np.repeat(np.arange(len(pos_len), dtype=np.int64), pos_len)
    newline = h == np.uint64(_NEWLINE_HASH)
    # paragraph number of each token inside its text position: "\n" markers seen before it
    nl_before = np.cumsum(newline) - newline
    pos_first = np.cumsum(pos_len) - np.asarray(pos_len, dtype=np.int64)
    par_in_pos = nl_before - nl_before[pos_first[position]] if h.size else nl_before
    words = ~newline
    h, position, par_in_pos = h[words], position[words], par_in_pos[words]
    if h.size:
        change = np.ones(h.size, dtype=bool)
        change[1:] = (position[1:] != position[:-1]) | (par_in_pos[1:] != par_in_pos[:-1])
        par_start = np.flatnonzero(change)
        par_len = np.diff(np.append(par_start, h.size))
    else:
        par_start = par_len = np.zeros(0, dtype=np.int64)
    is_long = par_len >= ngram_size
    listed = is_long | (par_len >= min_ngram_size)
    counts = np.where(is_long, par_len - ngram_size + 1, 1)[listed].astype(np.int64)
    offsets = np.zeros(counts.size + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    keys = np.empty(int(offsets[-1]), dtype=np.uint64)
    long_l = is_long[listed]
    if long_l.any():
        windows = h.size - ngram_size + 1
        acc = np.full(windows, _start(ngram_size), dtype=np.uint64)
        with np.errstate(over="ignore"):
            for i in range(ngram_size):
                acc = acc * np.uint64(_POLY) + h[i : i + windows]
        c = counts[long_l]
        within = np.arange(int(c.sum()), dtype=np.int64) - np.repeat(np.cumsum(c) - c, c)
        src = np.repeat(par_start[listed][long_l], c) + within
        keys[np.repeat(offsets[:-1][long_l], c) + within] = acc[src]
    for g in np.flatnonzero(~long_l):  # short paragraphs: one n-gram of all their tokens
        s0, n0 = int(par_start[listed][g]), int(par_len[listed][g])
        acc = _start(n0)
        for t in h[s0 : s0 + n0].tolist():
            acc = (acc * _POLY + t) & _MASK
        keys[offsets[g]] = acc
    first = par_start[listed]
    par_pos_id = position[first]
    return NgramBatch(
        doc_ids=list(ids),
        doc_of_par=np.asarray(pos_doc, dtype=np.int64)[par_pos_id] if first.size else np.zeros(0, np.int64),
        par_pos=np.asarray(pos_index, dtype=np.int32)[par_pos_id] if first.size else np.zeros(0, np.int32),
        par_idx=par_in_pos[first].astype(np.int32),
        par_ngrams=counts,
        keys=keys,
    )


# -- BFF's decisions, exact for a whole batch ------------------------------------------------


@dataclass
class BffVerdict:
    """What BFF decided for one document."""

    id: str
    ngrams: int
    contained: int  # n-grams already in the filter when their paragraph was checked
    removed: list[tuple[int, int]] = field(default_factory=list)  # (text position, paragraph)
    duplicate: bool = False

    @property
    def fraction(self) -> float:
        return self.contained / self.ngrams if self.ngrams else 0.0

    @property
    def changed(self) -> bool:
        return self.duplicate or bool(self.removed)

    def detail(self) -> str:
        return json_detail(
            {"contained_fraction": round(self.fraction, 6), "contained_ngrams": self.contained, "ngrams": self.ngrams}
        )


def _next_pow2(n: int) -> int:
    return 1 << max(10, (n - 1).bit_length())


def resolve_batch(batch: NgramBatch, bloom: BitFilter, threshold: float) -> list[BffVerdict]:
    """Run BFF old-both over ``batch`` in order against ``bloom`` (updated in place).

    Equivalent to checking and inserting paragraph by paragraph, but the filter is read once and
    written once per batch: with ``base`` the bits before the batch, an n-gram with an unset bit
    that no earlier paragraph of the batch touches is surely not contained; the rest ("maybe")
    are replayed in order against the set of bits earlier *kept* paragraphs set."""
    n_docs, n_pars = len(batch.doc_ids), len(batch.par_ngrams)
    par_of = np.repeat(np.arange(n_pars, dtype=np.int64), batch.par_ngrams)
    contained_par = np.zeros(n_pars, dtype=np.int64)
    if batch.num_ngrams:
        pos = bloom.positions(pairs_from_u64(batch.keys))  # (N, k)
        base = bloom.test_bits(pos)
        full = base.all(axis=1)
        contained_par = np.bincount(par_of, weights=full, minlength=n_pars).astype(np.int64)
        size = _next_pow2(2 * pos.size)
        slot = (pos & np.uint64(size - 1)).astype(np.int64)
        first = np.full(size, n_pars, dtype=np.int32)  # earliest paragraph touching each slot
        np.minimum.at(first, slot.ravel(), np.repeat(par_of.astype(np.int32), pos.shape[1]))
        reachable = base | (first[slot] < par_of[:, None])  # unset bits an earlier paragraph may set
        maybe = np.flatnonzero(~full & reachable.all(axis=1))
        if maybe.size:
            _replay(maybe, pos, base, slot, size, par_of, batch.par_ngrams, contained_par, threshold)
        removed_par = contained_par / np.maximum(batch.par_ngrams, 1) > threshold
        keep_rows = ~removed_par[par_of]
        if keep_rows.any():
            bloom.set_bits(pos[keep_rows])
    else:
        removed_par = np.zeros(n_pars, dtype=bool)
    doc_ngrams = np.bincount(batch.doc_of_par, weights=batch.par_ngrams, minlength=n_docs).astype(np.int64)
    doc_contained = np.bincount(batch.doc_of_par, weights=contained_par, minlength=n_docs).astype(np.int64)
    verdicts = [
        BffVerdict(i, int(n), int(c), duplicate=bool(n and c / n > threshold))
        for i, n, c in zip(batch.doc_ids, doc_ngrams, doc_contained)
    ]
    for g in np.flatnonzero(removed_par):
        verdicts[batch.doc_of_par[g]].removed.append((int(batch.par_pos[g]), int(batch.par_idx[g])))
    return verdicts


def _replay(
    maybe: np.ndarray,
    pos: np.ndarray,
    base: np.ndarray,
    slot: np.ndarray,
    size: int,
    par_of: np.ndarray,
    par_ngrams: np.ndarray,
    contained_par: np.ndarray,
    threshold: float,
) -> None:
    """Decide the "maybe" n-grams exactly, in paragraph order (updates ``contained_par``).

    Only bits that some maybe n-gram lacks in ``base`` matter ("watched").  Sweeping the
    paragraphs that hold a maybe n-gram or a watched bit in order: a maybe n-gram is contained
    when all its missing bits are in ``seen``; a kept paragraph adds its watched bits to
    ``seen`` (plus a few others that share a slot of the local table with one: harmless, as
    ``seen`` is only asked about watched bits).  Rows and entries are already in paragraph
    order, so each paragraph's share is a slice, and the per-paragraph work is set operations
    in C.  (No ``np.unique``/``np.isin``: their random access is what costs on large batches.)"""
    k = pos.shape[1]
    unset = ~base[maybe]
    missing = pos[maybe][unset]  # row-major: grouped by maybe row
    missing_off = np.concatenate([[0], np.cumsum(unset.sum(axis=1))]).tolist()
    mark = np.zeros(size, dtype=bool)
    mark[(missing & np.uint64(size - 1)).astype(np.int64)] = True
    flat = pos.ravel()
    hits = np.flatnonzero(mark[slot].ravel())  # ascending entries, so ascending paragraphs
    hit_par = par_of[hits // k]
    maybe_par = par_of[maybe]
    pars = np.union1d(maybe_par, hit_par)
    m_lo, m_hi = np.searchsorted(maybe_par, pars, "left").tolist(), np.searchsorted(maybe_par, pars, "right").tolist()
    h_lo, h_hi = np.searchsorted(hit_par, pars, "left").tolist(), np.searchsorted(hit_par, pars, "right").tolist()
    missing_l, hit_bits = missing.tolist(), flat[hits].tolist()
    counts, totals = contained_par[pars].tolist(), par_ngrams[pars].tolist()
    seen: set[int] = set()
    for i in range(len(counts)):
        for r in range(m_lo[i], m_hi[i]):
            if seen.issuperset(missing_l[missing_off[r] : missing_off[r + 1]]):
                counts[i] += 1
        if not counts[i] / totals[i] > threshold:
            seen.update(hit_bits[h_lo[i] : h_hi[i]])
    contained_par[pars] = counts


# -- editing documents ----------------------------------------------------------------------


def cut_paragraphs(text: str, removed: Sequence[int]) -> str:
    """``text`` without the given "\\n"-paragraphs, cut as BFF cuts them: paragraph i is the
    window from its start (its leading "\\n" for i > 0) to the next paragraph's start."""
    bounds = [0] + [m.start() for m in re.finditer("\n", text)] + [len(text)]
    drop = set(removed)
    return "".join(text[bounds[i] : bounds[i + 1]] for i in range(len(bounds) - 1) if i not in drop)


def apply_verdict(doc: Document, verdict: BffVerdict) -> Document:
    """A copy of ``doc`` without its removed paragraphs; positions left blank are dropped."""
    out = Document(doc.id, doc.url, doc.source, list(doc.texts), list(doc.images), list(doc.image_bytes),
                   list(doc.image_metadata))
    by_pos: dict[int, list[int]] = {}
    for p, i in verdict.removed:
        by_pos.setdefault(p, []).append(i)
    keep = [True] * len(out.texts)
    for p, idxs in by_pos.items():
        text = cut_paragraphs(out.texts[p] or "", idxs)
        out.texts[p] = text
        keep[p] = bool(text.strip())
    out.keep_positions(keep)
    return out


class BffParams(Params):
    ngram_size: int = Field(13, ge=1, description="tokens per n-gram (BFF's max_ngram_size; MINT-1T/DCLM: 13)")
    min_ngram_size: int = Field(
        13,
        ge=1,
        description="paragraphs with fewer tokens than ngram_size but at least this many count as one "
        "n-gram; shorter ones are always kept (BFF's min_ngram_size; DCLM: 13)",
    )
    false_positive_rate: float = Field(0.01, gt=0, lt=1, description="Bloom filter false-positive rate per n-gram")
    threshold: float = Field(
        0.8,
        ge=0,
        le=1,
        description="remove a paragraph / document whose fraction of already-seen n-grams is above this",
    )
    expected_ngrams: int | None = Field(
        None,
        ge=1,
        description="n-grams to size the filter for (default: the number this input has, counted first)",
    )
    num_shards: int = Field(1, ge=1, description="Ray actors holding slices of the filter's bit array")
    order_by: str = Field(ID_COL, description="column giving the input order (first seen wins); ties by id")
    batch_docs: int = Field(
        64, ge=1, description="documents decided per step on the driver (small steps: fewer in-step repeats)"
    )
    merge_bytes: int = Field(
        256 << 20, ge=1, description="n-gram hashes (bytes) the driver holds at once while merging into input order"
    )

    @model_validator(mode="after")
    def _min_le_max(self) -> "BffParams":
        if self.min_ngram_size > self.ngram_size:
            raise ValueError(f"min_ngram_size ({self.min_ngram_size}) > ngram_size ({self.ngram_size})")
        return self


def bff_documents(
    docs: Sequence[Document], bloom: BitFilter, params: BffParams | None = None
) -> tuple[list[tuple[Document, BffVerdict]], list[tuple[Document, BffVerdict]]]:
    """BFF over ``docs`` in the given order against ``bloom`` (updated in place), without Ray.

    Returns (kept: edited documents with their verdicts, removed: the original documents BFF
    drops whole, with theirs).  The op runs the same functions, only spread over Ray."""
    p = params or BffParams()
    kept, removed = [], []
    for start in range(0, len(docs), p.batch_docs):
        chunk = docs[start : start + p.batch_docs]
        batch = hash_documents([d.texts for d in chunk], [d.id for d in chunk], p.ngram_size, p.min_ngram_size)
        for doc, verdict in zip(chunk, resolve_batch(batch, bloom, p.threshold)):
            if verdict.duplicate:
                removed.append((doc, verdict))
            else:
                kept.append((apply_verdict(doc, verdict) if verdict.removed else doc, verdict))
    return kept, removed


# -- Ray: hash pass, sharded filter, edit pass -----------------------------------------------

_ORDER_COL = "_bff_order"


def _hash_block(table: pa.Table, ngram_size: int, min_ngram_size: int, order_by: str) -> pa.Table:
    """Pass 1: live documents with at least one n-gram -> id, order key and their n-gram hashes."""
    if table.num_rows == 0:  # an empty block may lack columns altogether
        order_type = table.schema.field(order_by).type if order_by in table.column_names else pa.string()
        table = pa.table({ID_COL: pa.array([], pa.string()), "texts": pa.array([], pa.list_(pa.string())),
                          order_by: pa.array([], order_type)})
    alive = alive_mask(table)
    if alive is not None:
        table = table.filter(alive)
    if order_by not in table.column_names:
        raise ValueError(f"bff_dedup: order_by column {order_by!r} not in the input ({table.column_names})")
    ids = table.column(ID_COL).to_pylist()
    batch = hash_documents(table.column("texts").to_pylist(), ids, ngram_size, min_ngram_size)
    pars_per_doc = np.bincount(batch.doc_of_par, minlength=len(ids))
    has = np.flatnonzero(pars_per_doc)
    par_off = np.concatenate([[0], np.cumsum(pars_per_doc[has])]).astype(np.int64)
    key_off = np.concatenate([[0], np.cumsum(batch.par_ngrams)]).astype(np.int64)
    doc_key_off = key_off[par_off]
    take = pa.array(has, pa.int64())

    def lists(values: np.ndarray, offsets: np.ndarray, typ: pa.DataType) -> pa.Array:
        return pa.LargeListArray.from_arrays(pa.array(offsets, pa.int64()), pa.array(values, typ))

    order = table.column(order_by).take(take)
    if order.null_count:
        raise ValueError(f"bff_dedup: order_by column {order_by!r} has nulls: no input order for those rows")
    out = pa.table(
        {
            _ORDER_COL: order,
            ID_COL: table.column(ID_COL).take(take),
            "_bff_par_pos": lists(batch.par_pos, par_off, pa.int32()),
            "_bff_par_idx": lists(batch.par_idx, par_off, pa.int32()),
            "_bff_par_ngrams": lists(batch.par_ngrams, par_off, pa.int64()),
            "_bff_keys": lists(batch.keys, doc_key_off, pa.uint64()),
            "_bff_n": pa.array(np.diff(doc_key_off), pa.int64()),
        }
    )
    return _sorted(out)


def _sorted(table: pa.Table) -> pa.Table:
    """Rows in processing order: order key, then id."""
    return table.sort_by([(_ORDER_COL, "ascending"), (ID_COL, "ascending")])


def _order_keys(table: pa.Table) -> list[tuple]:
    return list(zip(table.column(_ORDER_COL).to_pylist(), table.column(ID_COL).to_pylist()))


def _run_stats(run: pa.Table, samples: int) -> tuple[int, list[tuple]]:
    """(n-grams in this sorted run, up to ``samples`` evenly spaced order keys)."""
    n = run.num_rows
    if n == 0:
        return 0, []
    picks = np.unique(np.linspace(0, n - 1, min(n, samples)).astype(np.int64))
    return int(pc.sum(run.column("_bff_n")).as_py() or 0), _order_keys(run.take(pa.array(picks)))


def _split_run(run: pa.Table, bounds: list[tuple]) -> list[pa.Table]:
    """A sorted run cut into ``len(bounds) + 1`` key ranges (range r: bounds[r-1] <= key < bounds[r])."""
    keys = _order_keys(run)
    cuts = [0] + [bisect.bisect_left(keys, b) for b in bounds] + [run.num_rows]
    return [run.slice(a, b - a) for a, b in zip(cuts[:-1], cuts[1:])]


def _ordered_ranges(hashed: "ray.data.Dataset", range_bytes: int):
    """Pass-1 runs merged into the global processing order, one key range at a time.

    A small range sort with plain Ray tasks: sample each sorted run, cut every run at common
    boundaries, then the driver fetches and sorts one range at a time (so it holds about
    ``range_bytes`` of hashes, not all of them).  Returns (total n-grams, iterator of ranges)."""
    import ray

    runs = hashed.to_arrow_refs()
    ranges = max(1, -(-hashed.size_bytes() // range_bytes))
    stats = ray.get([ray.remote(_run_stats).options(num_cpus=0).remote(r, 16 * ranges) for r in runs])
    total = sum(n for n, _ in stats)
    samples = sorted(k for _, keys in stats for k in keys)
    bounds = sorted({samples[len(samples) * i // ranges] for i in range(1, ranges)}) if samples else []
    if bounds:
        split = ray.remote(_split_run).options(num_returns=len(bounds) + 1, num_cpus=0)
        pieces = [split.remote(r, bounds) for r in runs]
    else:
        pieces = [[r] for r in runs]

    def merged():
        for i in range(len(bounds) + 1):
            tables = [t for t in ray.get([p[i] for p in pieces]) if t.num_rows]
            if tables:
                yield _sorted(pa.concat_tables(tables))

    return total, merged()


def _batch_from_table(table: pa.Table) -> NgramBatch:
    """The driver's view of a sorted slice of pass-1 rows."""
    ngrams_col = table.column("_bff_par_ngrams").combine_chunks()
    flat = lambda name: pc.list_flatten(table.column(name).combine_chunks()).to_numpy(zero_copy_only=False)  # noqa: E731
    return NgramBatch(
        doc_ids=table.column(ID_COL).to_pylist(),
        doc_of_par=pc.list_parent_indices(ngrams_col).to_numpy().astype(np.int64),
        par_pos=flat("_bff_par_pos").astype(np.int32),
        par_idx=flat("_bff_par_idx").astype(np.int32),
        par_ngrams=flat("_bff_par_ngrams").astype(np.int64),
        keys=flat("_bff_keys").astype(np.uint64),
    )


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


def _store_verdicts(shards: list, verdicts: list[BffVerdict]) -> list:
    rows = [(v.id, v.duplicate, v.ngrams, v.contained, v.removed) for v in verdicts if v.changed]
    if not rows:
        return []
    where = _shard_of([r[0] for r in rows], len(shards))
    return [shards[s].put.remote([r for r, w in zip(rows, where) if w == s]) for s in np.unique(where)]


def _apply_block(table: pa.Table, shards: list, node: str) -> pa.Table:
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


@register("bff_dedup")
class BffDedup(Deduplicator):
    """BFF Bloom-filter dedup (old-both): remove paragraphs and documents whose n-grams were mostly
    seen before, in a fixed input order, with the filter sharded over Ray actors."""

    Params = BffParams
    reads = DOCUMENT_COLUMNS
    writes = CONTENT_COLUMNS + (REMOVED_COL,)

    def columns_read(self) -> tuple[str, ...]:
        p: BffParams = self.params  # type: ignore[assignment]
        return self.reads + ((p.order_by,) if p.order_by not in self.reads else ())

    def apply(self, ds: "ray.data.Dataset", ctx: RunContext) -> "ray.data.Dataset":
        p: BffParams = self.params  # type: ignore[assignment]
        start = time.perf_counter()
        hashed = ds.map_batches(
            _hash_block,
            batch_format="pyarrow",
            fn_kwargs=dict(ngram_size=p.ngram_size, min_ngram_size=p.min_ngram_size, order_by=p.order_by),
        )
        total, ranges = _ordered_ranges(hashed.materialize(), p.merge_bytes)
        hashed_s = time.perf_counter() - start
        expected = p.expected_ngrams or max(total, 1)
        num_bits = optimal_num_bits(expected, p.false_positive_rate)
        bloom = ShardedBloom(num_bits, optimal_num_hashes(num_bits, expected), p.num_shards)
        stats = dict(documents_with_ngrams=0, duplicates=0, removed_paragraphs=0)
        pending: list = []
        for table in (part.slice(i, p.batch_docs) for part in ranges for i in range(0, part.num_rows, p.batch_docs)):
            verdicts = resolve_batch(_batch_from_table(table), bloom, p.threshold)
            stats["documents_with_ngrams"] += len(verdicts)
            stats["duplicates"] += sum(v.duplicate for v in verdicts)
            stats["removed_paragraphs"] += sum(len(v.removed) for v in verdicts if not v.duplicate)
            pending += _store_verdicts(bloom.shards, verdicts)
        _wait(pending)
        decide_s = time.perf_counter() - start - hashed_s
        ctx.event(
            "bff",
            ngrams=total,
            bits=num_bits,
            hashes=bloom.num_hashes,
            shards=len(bloom.shards),
            fill_ratio=round(bloom.fill_ratio(), 6),
            hash_seconds=round(hashed_s, 3),
            decide_seconds=round(decide_s, 3),
            decide_ngrams_per_second=round(total / decide_s) if decide_s > 0 else None,
            **stats,
        )
        return ds.map_batches(_apply_block, batch_format="pyarrow", fn_kwargs=dict(shards=bloom.shards, node=ctx.node_id))


def _wait(refs: list) -> None:
    import ray

    if refs:
        ray.get(refs)
