"""How many of each row's words are in a word list, in one pass: stopwords/flagged_words ratios.

A batch of texts is one uint32 array of code points with each row's ``starts``/``lengths``
(``operators.text.words.batch.CodepointBatch``).  One loop splits every row into Data-Juicer's
words (runs between ' ', '\\n', '\\t', trimmed of ``strip`` code points at both ends, dropped
when empty) and looks each word up in a table of the list built once per list, so no Python
``str`` is made per word (that, and a ``set`` lookup per word, was most of the op's time).

Exact, not probabilistic: the table holds the list's words themselves (their code points).  A
word's 64-bit polynomial hash only picks where to look; a word counts as listed only when a
slot's word has the same hash, the same length *and* the same code points, compared one by
one.  A different word with the same hash is probed past like any other occupant, so the count
is the count of ``word in set(list)`` whatever the hash does (collisions cost time, never a
different answer).  numba loops, ``cache=True`` (compiled once per machine, then loaded from disk
by each process, a Ray worker included) and ``nogil=True``; callers keep their Python path for
when numba is not importable.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Iterable

import numpy as np

# numpy scalars, so numba freezes them as uint64 constants (a Python int above 2**63 it cannot type)
_MIX = np.uint64(0x9E3779B97F4A7C15)  # odd 64-bit multiplier: slot = high bits of hash * _MIX
_BASE = np.uint64(0x100000001B3)  # odd polynomial base (FNV's prime)


@functools.cache
def numba():
    """numba, imported on first use (slow to import; a light install may lack it)."""
    try:
        import numba as nb
    except ImportError:  # the callers' Python path runs instead
        nb = None
    return nb


def available() -> bool:
    return numba() is not None


@functools.cache
def _kernel(name: str):
    fn = globals()[name]
    try:
        return numba().njit(cache=True, nogil=True)(fn)
    except RuntimeError:  # numba refuses cache=True where it finds no cache directory
        return numba().njit(nogil=True)(fn)


@dataclass(frozen=True)
class WordTable:
    """A word list as code points: word k is ``cps[offsets[k]:offsets[k + 1]]`` with hash
    ``hashes[k]``; ``slots`` (a power of two, at most half full) holds k, or -1 where empty."""

    cps: np.ndarray  # uint32
    offsets: np.ndarray  # int64, len(words) + 1
    hashes: np.ndarray  # uint64
    slots: np.ndarray  # int64

    @classmethod
    def of(cls, words: Iterable[str]) -> "WordTable":
        """The table of ``words`` (sorted first, so the table is the same in every process)."""
        words = sorted(set(words))
        cps = np.frombuffer("".join(words).encode("utf-32-le", "surrogatepass"), dtype=np.uint32).copy()
        offsets = np.zeros(len(words) + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, words), dtype=np.int64, count=len(words)), out=offsets[1:])
        bits = 4
        while (1 << bits) < 2 * len(words):
            bits += 1
        hashes = np.empty(len(words), dtype=np.uint64)
        slots = np.full(1 << bits, -1, dtype=np.int64)
        _kernel("_build_loop")(cps, offsets, hashes, slots)
        return cls(cps, offsets, hashes, slots)


def hits_per_row(cps: np.ndarray, starts: np.ndarray, lengths: np.ndarray, strip: np.ndarray,
                 table: WordTable) -> tuple[np.ndarray, np.ndarray]:
    """``(words, listed)``, int64 per row: how many words the row has, and how many of them are
    in ``table`` (module doc for what a word is)."""
    words = np.zeros(len(starts), dtype=np.int64)
    listed = np.zeros(len(starts), dtype=np.int64)
    _kernel("_hits_loop")(np.ascontiguousarray(cps, dtype=np.uint32), np.ascontiguousarray(starts, dtype=np.int64),
                          np.ascontiguousarray(lengths, dtype=np.int64), strip, table.cps, table.offsets,
                          table.hashes, table.slots, words, listed)
    return words, listed


# -- the loops (compiled by numba; plain Python runs them too, slowly) ----------------------------
def _build_loop(cps, offsets, hashes, slots):  # pragma: no cover - compiled by numba
    """Hash every word and put its index in the first free slot from its hash's slot on."""
    mask = len(slots) - 1
    bits = 0
    while (1 << bits) < len(slots):
        bits += 1
    shift = np.uint64(64 - bits)
    for k in range(len(offsets) - 1):
        a = offsets[k]
        b = offsets[k + 1]
        h = np.uint64(0)
        for i in range(a, b):
            h = h * _BASE + np.uint64(cps[i])
        hashes[k] = h
        j = np.int64((h * _MIX) >> shift)
        while slots[j] >= 0:
            j = (j + 1) & mask
        slots[j] = k


def _hits_loop(cps, starts, lengths, strip, wcps, woffsets, whashes, slots, words, listed):  # pragma: no cover
    """Per row, one pass: a word closes at each separator (and at the row's end) if it saw a
    non-strip code point; its span runs from the first to the last such code point, and its hash
    is rolled along the way (the hash up to the last non-strip code point is the word's).  Words
    longer or shorter than every listed word skip the lookup."""
    mask = len(slots) - 1
    bits = 0
    while (1 << bits) < len(slots):
        bits += 1
    shift = np.uint64(64 - bits)
    shortest = 1 << 62
    longest = 0
    for k in range(len(woffsets) - 1):
        n = woffsets[k + 1] - woffsets[k]
        shortest = min(shortest, n)
        longest = max(longest, n)
    for r in range(len(starts)):
        lo = starts[r]
        hi = lo + lengths[r]
        first = -1
        last = -1
        h = np.uint64(0)  # hash of cps[first:i]
        h_word = np.uint64(0)  # hash of cps[first:last + 1]
        n_words = 0
        n_listed = 0
        for i in range(lo, hi + 1):
            if i == hi:
                sep = True
            else:
                cp = cps[i]
                sep = cp == 32 or cp == 10 or cp == 9
            if not sep:
                if first >= 0:
                    h = h * _BASE + np.uint64(cp)
                    if not strip[cp]:
                        last = i
                        h_word = h
                elif not strip[cp]:
                    first = i
                    last = i
                    h = np.uint64(cp)
                    h_word = h
                continue
            if first < 0:
                continue
            n_words += 1
            a = first
            size = last + 1 - a
            first = -1
            if size < shortest or size > longest:
                continue
            j = np.int64((h_word * _MIX) >> shift)
            while True:
                k = slots[j]
                if k < 0:
                    break
                if whashes[k] == h_word:
                    wa = woffsets[k]
                    if woffsets[k + 1] - wa == size:
                        same = True
                        for p in range(size):
                            if wcps[wa + p] != cps[a + p]:
                                same = False
                                break
                        if same:
                            n_listed += 1
                            break
                j = (j + 1) & mask
        words[r] = n_words
        listed[r] = n_listed
