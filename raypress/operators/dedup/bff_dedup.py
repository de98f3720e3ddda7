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

The parts live in modules of their own: ``bff.ngrams`` (tokenising and hashing),
``bff.decisions`` (a batch's exact decisions, document edits), ``bff.order`` (pass 1 on Ray, the
merge into input order) and ``bff.shards`` (the filter's actors, the verdicts, pass 3).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Sequence

from pydantic import Field, model_validator

from raypress.operators.base import Deduplicator, Params, RunContext
from raypress.operators.dedup.bff.decisions import BffVerdict, apply_verdict, resolve_batch
from raypress.operators.dedup.bff.ngrams import hash_documents
from raypress.operators.dedup.bff.order import batch_from_table, hash_block, ordered_ranges
from raypress.operators.dedup.bff.shards import REMOVED_COL, ShardedBloom, apply_block, store_verdicts, wait_all
from raypress.operators.dedup.bff.bloom import BitFilter, optimal_num_bits, optimal_num_hashes
from raypress.operators.registry import register
from raypress.operators.shared.documents import CONTENT_COLUMNS, DOCUMENT_COLUMNS, Document
from raypress.schema import ID_COL

if TYPE_CHECKING:  # pragma: no cover
    import ray.data


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


@register("bff_dedup")
class BffDedup(Deduplicator[BffParams]):
    """BFF Bloom-filter dedup (old-both): remove paragraphs and documents whose n-grams were mostly
    seen before, in a fixed input order, with the filter sharded over Ray actors."""

    reads = DOCUMENT_COLUMNS
    writes = CONTENT_COLUMNS + (REMOVED_COL,)

    def columns_read(self) -> tuple[str, ...]:
        p = self.params
        return self.reads + ((p.order_by,) if p.order_by not in self.reads else ())

    def apply(self, ds: "ray.data.Dataset", ctx: RunContext) -> "ray.data.Dataset":
        p = self.params
        start = time.perf_counter()
        hashed = ds.map_batches(
            hash_block,
            batch_format="pyarrow",
            fn_kwargs=dict(ngram_size=p.ngram_size, min_ngram_size=p.min_ngram_size, order_by=p.order_by),
        )
        total, ranges = ordered_ranges(hashed.materialize(), p.merge_bytes)
        hashed_s = time.perf_counter() - start
        expected = p.expected_ngrams or max(total, 1)
        num_bits = optimal_num_bits(expected, p.false_positive_rate)
        bloom = ShardedBloom(num_bits, optimal_num_hashes(num_bits, expected), p.num_shards)
        stats = dict(documents_with_ngrams=0, duplicates=0, removed_paragraphs=0)
        pending: list = []
        for table in (part.slice(i, p.batch_docs) for part in ranges for i in range(0, part.num_rows, p.batch_docs)):
            verdicts = resolve_batch(batch_from_table(table), bloom, p.threshold)
            stats["documents_with_ngrams"] += len(verdicts)
            stats["duplicates"] += sum(v.duplicate for v in verdicts)
            stats["removed_paragraphs"] += sum(len(v.removed) for v in verdicts if not v.duplicate)
            pending += store_verdicts(bloom.shards, verdicts)
        wait_all(pending)
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
        return ds.map_batches(apply_block, batch_format="pyarrow", fn_kwargs=dict(shards=bloom.shards, node=ctx.node_id))

