"""Where in a batch of texts a regex can match at all: the whitespace-free tokens holding an anchor.

A regex cleaner (clean_links_mapper, clean_email_mapper) spends nearly all its time trying its
pattern at positions where it cannot match.  When every match of a pattern contains no
whitespace and contains one of a few short *anchors* (sequences of character classes, such as
``[\\w-] : [/a-z0-9%]`` for a URL's scheme), only the tokens (maximal runs without whitespace)
holding an anchor can change; this loop finds them in one pass over the batch's code points,
so the regex runs on a few percent of the text (``operators.text.templates.anchors`` says
why the result is the same).

Classes are bits of a per-code-point ``lut`` (uint16; bit ``space_bit`` marks whitespace); an
anchor is ``masks[q, :lengths[q]]``, one class mask per consecutive code point, checked only where
its rarest class ``key_at[q]`` matches (``key_bits``: the union of those).  Whitespace is
looked at only around an anchor, so the hot loop is one table lookup and a rarely taken branch.  numba loop,
``cache=True`` (compiled once per machine, loaded from disk by each process), ``nogil=True``.
"""

from __future__ import annotations

import functools

import numpy as np


@functools.cache
def numba():
    """numba, imported on first use (slow to import; a light install may lack it)."""
    try:
        import numba as nb
    except ImportError:  # the callers run their regex on every row instead
        nb = None
    return nb


def available() -> bool:
    return numba() is not None


@functools.cache
def _kernel():
    try:
        return numba().njit(cache=True, nogil=True)(_spans_loop)
    except RuntimeError:  # numba refuses cache=True where it finds no cache directory
        return numba().njit(nogil=True)(_spans_loop)


def anchored_spans(cps: np.ndarray, starts: np.ndarray, lengths: np.ndarray, lut: np.ndarray, space_bit: int,
                   masks: np.ndarray, lengths_of: np.ndarray, key_at: np.ndarray,
                   gap: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(rows, span_starts, span_ends)``: the spans, in row order and row-local code point
    positions, covering every token that holds an anchor.  A span is whole tokens (it starts at
    a row's start or after whitespace and ends at a row's end or before whitespace); tokens less
    at most ``gap`` code points apart share one span, with what lies between them."""
    n_rows = len(starts)
    cap = len(cps) // 2 + n_rows + 1  # a token takes a code point and a separator
    rows = np.empty(cap, dtype=np.int64)
    out_starts = np.empty(cap, dtype=np.int64)
    out_ends = np.empty(cap, dtype=np.int64)
    key_bits = 0
    for q in range(len(key_at)):
        key_bits |= int(masks[q, key_at[q]])
    n = _kernel()(np.ascontiguousarray(cps, dtype=np.uint32), np.ascontiguousarray(starts, dtype=np.int64),
                  np.ascontiguousarray(lengths, dtype=np.int64), lut, np.uint16(1 << space_bit),
                  np.uint16(key_bits), masks, lengths_of, key_at, gap, rows, out_starts, out_ends)
    return rows[:n], out_starts[:n], out_ends[:n]


def _spans_loop(cps, starts, lengths, lut, space, key_bits, masks, lengths_of, key_at, gap,
                rows, out_starts, out_ends):  # pragma: no cover - compiled by numba
    """Per row, one pass that looks only for key code points (whitespace is only looked at
    around an anchor, so the hot loop has one rarely taken branch); at an anchor, the token is
    found by stepping back and forward to whitespace, emitted (or joined to the row's last span
    when that ends at most ``gap`` before it), and the scan goes on after it."""
    n = 0
    n_anchors = len(key_at)
    for r in range(len(starts)):
        lo = starts[r]
        hi = lo + lengths[r]
        done = lo  # where the row's last span ends (its text is not scanned again)
        i = lo
        while i < hi:
            bits = lut[cps[i]]
            if (bits & key_bits) == 0:
                i += 1
                continue
            found = False
            for q in range(n_anchors):
                k = key_at[q]
                if (bits & masks[q, k]) == 0:
                    continue
                first = i - k
                if first < done or first + lengths_of[q] > hi:
                    continue
                found = True
                for m in range(lengths_of[q]):
                    if (lut[cps[first + m]] & masks[q, m]) == 0:
                        found = False
                        break
                if found:
                    break
            if not found:
                i += 1
                continue
            a = i  # anchor classes hold no whitespace: the anchor is inside i's token
            while a > done and (lut[cps[a - 1]] & space) == 0:
                a -= 1
            b = i + 1
            while b < hi and (lut[cps[b]] & space) == 0:
                b += 1
            if n > 0 and rows[n - 1] == r and a - lo - out_ends[n - 1] <= gap:
                out_ends[n - 1] = b - lo
            else:
                rows[n] = r
                out_starts[n] = a - lo
                out_ends[n] = b - lo
                n += 1
            done = b
            i = b
    return n
