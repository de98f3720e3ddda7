"""BFF's old-both decisions for a batch of documents, and the document edits they imply.

Why a module of its own: "first seen wins" makes BFF order dependent, and this is the code that
decides a whole batch exactly as a sequential paragraph-by-paragraph pass would, against any
``BitFilter`` (an in-process ``BloomFilter`` or the op's Ray-sharded one); it needs neither Ray
nor the tokeniser, so it can be tested on hand-made n-gram batches.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from raypress.operators.base import json_detail
from raypress.operators.dedup.bff.ngrams import NgramBatch
from raypress.operators.dedup.bff.bloom import BitFilter, pairs_from_u64
from raypress.operators.shared.documents import Document

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

