"""Counting in text at machine speed: words, equal spans and repeated n-grams of a whole batch.

A batch of texts is one uint32 array of code points with each row's ``starts``/``lengths``
(``operators.text.words.batch.CodepointBatch``; rows must not overlap: the loops do not check
bounds, and the callers' arrays are sized for disjoint rows); each kernel makes one pass over all rows, so a
1024-row batch is one call, not 1024.  They are numba loops (``cache=True``: compiled once per
machine, then each process, a Ray worker included, loads the machine code from disk on its first
call; ``nogil=True``); callers keep their numpy or Python path for when numba is not importable.

Exact, not probabilistic.  N-grams and spans are found through 64-bit polynomial hashes in an
open-addressing table, but a hash only picks where to look: a slot counts an occurrence only
when its stored first occurrence has the same hash *and* the same keys, compared one by one;
a different n-gram with the same hash is probed past like any other occupant.  So the table's
entries are the distinct n-grams themselves, and every count is the count Python's ``Counter``
gets, whatever the hash does (collisions cost time, never a different answer).
"""

from __future__ import annotations

import functools

import numpy as np

# numpy scalars, so numba freezes them as uint64 constants (a Python int above 2**63 it cannot type)
_MIX = np.uint64(0x9E3779B97F4A7C15)  # odd 64-bit multiplier: slot = high bits of hash * _MIX
_BASE = np.uint64(0x100000001B3)  # odd polynomial base (FNV's prime): hash = sum key[i] * BASE**(n-1-i) mod 2**64


@functools.cache
def numba():
    """numba, imported on first use (slow to import; a light install may lack it)."""
    try:
        import numba as nb
    except ImportError:  # the callers' numpy/Python paths run instead
        nb = None
    return nb


def available() -> bool:
    return numba() is not None


def _jit(fn):
    try:
        return numba().njit(cache=True, nogil=True)(fn)
    except RuntimeError:  # numba refuses cache=True where it finds no cache directory
        return numba().njit(nogil=True)(fn)


@functools.cache
def _kernel(name: str):
    return _jit(globals()[name])


def word_spans(cps: np.ndarray, starts: np.ndarray, lengths: np.ndarray, strip: np.ndarray,
               emit: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Data-Juicer's words of every row: runs between ' ', '\\n', '\\t', trimmed at both ends of
    code points where ``strip[cp]`` is True, dropped when nothing is left.

    Returns ``(word_starts, word_ends, counts)``: positions in ``cps`` in text order and the number
    of words per row; with ``emit=False`` only ``counts`` is filled (the span arrays are empty)."""
    cps = np.ascontiguousarray(cps, dtype=np.uint32)
    cap = (len(cps) + 2) // 2 if emit else 0  # a word takes a character and a separator
    w_starts = np.empty(cap, dtype=np.int64)
    w_ends = np.empty(cap, dtype=np.int64)
    counts = np.zeros(len(starts), dtype=np.int64)
    n = _kernel("_word_spans_loop")(cps, np.ascontiguousarray(starts, dtype=np.int64),
                                   np.ascontiguousarray(lengths, dtype=np.int64), strip, emit, w_starts, w_ends,
                                   counts)
    return w_starts[:n], w_ends[:n], counts


def span_ids(cps: np.ndarray, starts: np.ndarray, ends: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """int64 id of each span ``cps[starts[i]:ends[i]]``, the spans taken in groups of ``counts[r]``
    consecutive ones (a row's words): within a group, equal ids exactly for equal code points
    (ids restart at 0 in each group; across groups they mean nothing)."""
    ids = np.empty(len(starts), dtype=np.int64)
    _kernel("_span_ids_loop")(np.ascontiguousarray(cps, dtype=np.uint32), np.ascontiguousarray(starts, dtype=np.int64),
                             np.ascontiguousarray(ends, dtype=np.int64), np.ascontiguousarray(counts, dtype=np.int64),
                             ids)
    return ids


def ngram_repetition(keys: np.ndarray, starts: np.ndarray, lengths: np.ndarray, n: int,
                     top_k: bool) -> tuple[np.ndarray, np.ndarray]:
    """For each row ``keys[starts[r]:starts[r] + lengths[r]]``, its overlapping n-grams of ``n`` keys:
    ``(total, repeated)``, int64 per row.  ``total`` = number of n-grams (0 when the row is shorter
    than n).  ``repeated``: with ``top_k`` (character_repetition_filter) the occurrences of the k
    most frequent distinct n-grams, k = min(isqrt(#distinct), #distinct occurring more than once);
    else (word_repetition_filter) the occurrences of all n-grams occurring more than once."""
    total = np.zeros(len(starts), dtype=np.int64)
    repeated = np.zeros(len(starts), dtype=np.int64)
    _kernel("_ngram_loop")(np.ascontiguousarray(keys, dtype=np.uint32 if keys.dtype == np.uint32 else np.int64),
                           np.ascontiguousarray(starts, dtype=np.int64), np.ascontiguousarray(lengths, dtype=np.int64),
                           n, top_k, total, repeated)
    return total, repeated


def count_per_row(cps: np.ndarray, starts: np.ndarray, lengths: np.ndarray, lut: np.ndarray) -> np.ndarray:
    """int64 number of code points of each row where ``lut[cp]`` is True."""
    counts = np.zeros(len(starts), dtype=np.int64)
    _kernel("_count_loop")(np.ascontiguousarray(cps, dtype=np.uint32), np.ascontiguousarray(starts, dtype=np.int64),
                           np.ascontiguousarray(lengths, dtype=np.int64), lut, counts)
    return counts


# -- the loops (compiled by numba; plain Python runs them too, slowly, which the tests may use) ---------
def _word_spans_loop(cps, starts, lengths, strip, emit, w_starts, w_ends, counts):  # pragma: no cover
    """Per row, one pass: remember the first and last non-strip code point since the last
    separator; at each separator (and the row's end) a word closes if it saw one.  The
    separators are strip characters themselves, so most code points take one table look-up."""
    w = 0
    for r in range(len(starts)):
        lo = starts[r]
        hi = lo + lengths[r]
        first = -1
        last = -1
        c = 0
        for i in range(lo, hi):
            cp = cps[i]
            if not strip[cp]:
                if first < 0:
                    first = i
                last = i
            elif (cp == 32 or cp == 10 or cp == 9) and first >= 0:
                if emit:
                    w_starts[w] = first
                    w_ends[w] = last + 1
                    w += 1
                c += 1
                first = -1
        if first >= 0:  # the row's last word
            if emit:
                w_starts[w] = first
                w_ends[w] = last + 1
                w += 1
            c += 1
        counts[r] = c
    return w


def _span_ids_loop(cps, starts, ends, counts, ids):  # pragma: no cover - compiled by numba
    """Per group of ``counts[r]`` consecutive spans (a row's words), a table: a span takes the id
    of the first equal span of its group (hash, then every code point compared), else the next
    new id.  Slots are (hash, span + 1), 0 = empty, side by side: one cache line per probe, and a
    row-sized table stays in cache where one for the whole batch would not."""
    longest = 0
    for r in range(len(counts)):
        longest = max(longest, counts[r])
    bits = 4  # a power-of-two table of >= 2 slots per span: load factor <= 1/2
    while (1 << bits) < 2 * longest:
        bits += 1
    table = np.zeros((1 << bits, 2), dtype=np.uint64)
    base = _BASE
    mix = _MIX
    first = 0
    for r in range(len(counts)):
        m = counts[r]
        bits = 4
        while (1 << bits) < 2 * m:
            bits += 1
        mask = (1 << bits) - 1
        shift = np.uint64(64 - bits)
        next_id = 0
        for s in range(first, first + m):
            a = starts[s]
            b = ends[s]
            h = np.uint64(b - a)
            for i in range(a, b):
                h = h * base + np.uint64(cps[i])
            j = np.int64((h * mix) >> shift)
            while True:
                t = np.int64(table[j, 1]) - 1
                if t < 0:
                    table[j, 0] = h
                    table[j, 1] = np.uint64(s + 1)
                    ids[s] = next_id
                    next_id += 1
                    break
                if table[j, 0] == h:
                    ta = starts[t]
                    if ends[t] - ta == b - a:
                        same = True
                        for i in range(b - a):
                            if cps[ta + i] != cps[a + i]:
                                same = False
                                break
                        if same:
                            ids[s] = ids[t]
                            break
                j = (j + 1) & mask
        table[: 1 << bits, 1] = 0
        first += m


def _ngram_loop(keys, starts, lengths, n, top_k, total, repeated):  # pragma: no cover - compiled by numba
    """Per row: a rolling polynomial hash of each n-gram, counted in an open-addressing table
    whose slots hold (hash, first position, count) side by side (one cache line per probe); a hit
    is confirmed key by key (module doc).  The table is sized for the longest row once and only
    the slots a row used are cleared."""
    longest = 0
    for r in range(len(starts)):
        longest = max(longest, lengths[r])
    bits = 4  # a power-of-two table of >= 2 slots per n-gram of the longest row: load factor <= 1/2
    while (1 << bits) < 2 * (longest - n + 1):
        bits += 1
    cap = 1 << bits
    table = np.zeros((cap, 4), dtype=np.int64)  # hash (bits of a uint64), first position, count, -
    used = np.empty(cap, dtype=np.int64)
    base = _BASE
    mix = _MIX
    lead = np.uint64(1)  # BASE ** (n - 1): the weight of the key leaving the window
    for _ in range(n - 1):
        lead = lead * base
    for r in range(len(starts)):
        lo = starts[r]
        m = lengths[r] - n + 1
        if m <= 0:
            continue
        total[r] = m
        bits = 4  # this row's part of the table
        while (1 << bits) < 2 * m:
            bits += 1
        mask = (1 << bits) - 1
        shift = np.uint64(64 - bits)
        h = np.uint64(0)
        for i in range(lo, lo + n - 1):
            h = h * base + np.uint64(keys[i])
        distinct = 0
        for p in range(lo, lo + m):
            if p > lo:
                h = h - np.uint64(keys[p - 1]) * lead
            h = h * base + np.uint64(keys[p + n - 1])
            hs = np.int64(h)
            j = np.int64((h * mix) >> shift)
            while True:
                c = table[j, 2]
                if c == 0:
                    table[j, 0] = hs
                    table[j, 1] = p
                    table[j, 2] = 1
                    used[distinct] = j
                    distinct += 1
                    break
                if table[j, 0] == hs:
                    q = table[j, 1]
                    same = True
                    for i in range(n):
                        if keys[q + i] != keys[p + i]:
                            same = False
                            break
                    if same:
                        table[j, 2] = c + 1
                        break
                j = (j + 1) & mask
        # the counts > 1, then clear the slots this row used
        k_rep = 0
        rep_sum = 0
        for u in range(distinct):
            j = used[u]
            c = table[j, 2]
            if c > 1:
                used[k_rep] = c  # reuse `used` for the repeated counts (k_rep <= u)
                k_rep += 1
                rep_sum += c
            table[j, 2] = 0
        if not top_k:
            repeated[r] = rep_sum
            continue
        k = np.int64(np.sqrt(np.float64(distinct)))  # isqrt, corrected for rounding either way
        while k * k > distinct:
            k -= 1
        while (k + 1) * (k + 1) <= distinct:
            k += 1
        k = min(k, k_rep)
        if k == k_rep:
            repeated[r] = rep_sum
        elif k > 0:
            freqs = np.sort(used[:k_rep])
            acc = 0
            for i in range(k_rep - k, k_rep):
                acc += freqs[i]
            repeated[r] = acc


def _count_loop(cps, starts, lengths, lut, counts):  # pragma: no cover - compiled by numba
    for r in range(len(starts)):
        lo = starts[r]
        c = 0
        for i in range(lo, lo + lengths[r]):
            if lut[cps[i]]:
                c += 1
        counts[r] = c
