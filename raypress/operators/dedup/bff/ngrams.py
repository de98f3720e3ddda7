"""BFF's tokeniser and n-gram hashing: documents -> per-paragraph 64-bit n-gram hashes.

Why a module of its own: this is the one expensive, pure-Python step of ``bff_dedup`` and the
only one that runs in parallel over blocks; it knows nothing of the filter or of Ray, so the op's
Ray pass, its Ray-free reference (``bff_documents``) and the benchmarks all call the same code.
The tokeniser is a ``re`` approximation of UAX #29 word bounds (see ``bff_dedup``'s docstring):
it only has to be consistent, not byte-identical to Rust's.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import xxhash

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
