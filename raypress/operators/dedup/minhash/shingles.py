"""Documents -> per-document sets of 32-bit shingle hashes, vectorised per batch (MinHash input).

Text preparation is Data-Juicer's, per document in Python's C string code: ``str.lower`` when
``lowercase``, then ``ignore_pattern``'s matches removed, the pattern compiled as Data-Juicer
compiles it (the ``regex`` package's semantics: ``\\p{P}`` works; ``shared.unicode_regex``).
Tokens, then shingles (``window_size`` consecutive tokens joined by one space; a document with
fewer tokens than the window gives one shingle of all of them; an empty document none):

- ``space`` (Data-Juicer's): split on the space character only, empty words dropped
  (``split_on_whitespace``), so a newline or tab stays inside its word;
- ``whitespace`` (raypress's opt-in): split on runs of any Unicode whitespace, so a page
  re-wrapped or re-indented gives the same shingles;
- ``punctuation``: split at every character of Unicode general category P* (DJ's ``\\p{P}``),
  empty tokens kept, as a regex split keeps them;
- ``character``: each character is a token and shingles are joined without a separator
  (``window_size``-character substrings).

Every shingle is a substring of a per-document *canonical* string (tokens joined by one space),
so its hash comes from prefix sums over the batch's code points, with no per-shingle Python:

  ``P(s) = sum_j (ord(s_j) + 1) * B**(len(s)-1-j)  mod 2**64`` (a polynomial hash, B odd), then
  ``hash(s) = fmix64(P(s) ^ len(s)) >> 32`` (MurmurHash3's 64-bit finaliser, top 32 bits).

``P`` of ``s[l:r]`` is ``B**(r-1) * (C[r] - C[l])`` with ``C[i] = sum_{j<i} (c_j + 1) * B**-j``
(B is odd, so invertible mod 2**64, and uint64 arithmetic wraps exactly mod 2**64).  Within a
document the hashes are deduplicated and sorted.  Code points, not UTF-8 bytes: the same strings
give the same hashes, and ``character`` windows are windows of characters.

Where Data-Juicer (1.6.1) differs, on purpose: it hashes with SHA-1 per shingle in Python (slow;
any good 32-bit hash serves MinHash), and a document of fewer than ``window_size`` tokens gets no
shingle at all, so its signature is all-maximum and every such document is a duplicate of every
other (short rows lost); here it is one shingle of all its tokens.
"""

from __future__ import annotations

import functools
import hashlib
import unicodedata
from typing import Any, Sequence

import numpy as np
from pydantic import Field, PositiveInt, field_validator

from raypress.kernels.minhash import intersection_sizes, unique_per_document
from raypress.operators.base import Params
from raypress.operators.dedup.hashing import fmix64
from raypress.operators.shared.unicode_regex import compile_pattern

TOKENIZATIONS = ("space", "whitespace", "punctuation", "character")
SHINGLE_HASHES = ("polynomial", "sha1")
HASH_BASE = 0x100000001B3  # FNV's 64-bit prime: odd, so invertible mod 2**64
_S32 = np.uint64(32)
CHUNK_CHARS = 1 << 20  # code points per vectorised pass: work arrays ~50 MB, powers 16 MB


def check_tokenization(tokenization: str, window_size: int) -> None:
    """Raise ValueError for a tokenization this module does not implement or a bad window."""
    if tokenization == "sentencepiece":
        raise ValueError("tokenization 'sentencepiece' is not supported (it needs a sentencepiece model); "
                         f"use one of {TOKENIZATIONS}")
    if tokenization not in TOKENIZATIONS:
        raise ValueError(f"unknown tokenization {tokenization!r}; expected one of {TOKENIZATIONS}")
    if window_size < 1:
        raise ValueError("window_size must be >= 1")


class ShingleParams(Params):
    """The shingling and shuffle parameters the near-dedup ops share (Data-Juicer's names): the MinHash
    ops' and SimHash's params derive from it and add their own (and ``window_size``'s default)."""

    text_key: str = Field("text", description="column holding the document text")
    tokenization: str = Field("space", description="shingle tokens: 'space' (words between spaces, as "
                              "Data-Juicer splits them: a newline stays inside its word), 'whitespace' (words "
                              "between runs of any whitespace: re-wrapped copies match), 'punctuation' (pieces "
                              "between punctuation marks) or 'character'")
    window_size: PositiveInt = Field(5, description="tokens per shingle")
    lowercase: bool = Field(True, description="lowercase the text before shingling")
    ignore_pattern: str | None = Field(None, description="regex whose matches are removed before shingling")
    num_partitions: PositiveInt | None = Field(None, description="shuffle partitions (default: one per "
                                               "100,000 input rows, at most 200)")

    @classmethod
    def compile_ignore(cls, pattern: str) -> Any:
        """How the op compiles ``ignore_pattern``: as Data-Juicer does (the ``regex`` package's meaning)."""
        return compile_pattern(pattern)

    @field_validator("tokenization")
    @classmethod
    def _known_tokenization(cls, value: str) -> str:
        check_tokenization(value, 1)
        return value

    @field_validator("ignore_pattern")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value:
            try:
                cls.compile_ignore(value)
            except ValueError as exc:
                raise ValueError(f"ignore_pattern is not a valid regular expression: {exc}") from None
        return value


def prepare(text: str | None, lowercase: bool, ignore: Any) -> str:
    """DJ's text preparation: lowercase, then remove the ignore pattern's matches."""
    if not text:
        return ""
    if lowercase:
        text = text.lower()
    if ignore is not None:
        text = ignore.sub("", text)
    return text


def shingle_hashes(
    texts: Sequence[str | None],
    tokenization: str,
    window_size: int,
    lowercase: bool = True,
    ignore_pattern: str | None = None,
    shingle_hash: str = "polynomial",
) -> tuple[np.ndarray, np.ndarray]:
    """``(hashes, offsets)``: uint32 shingle hashes of all documents (each document's sorted,
    without repeats) and int64 offsets (n+1): document i is ``hashes[offsets[i]:offsets[i+1]]``.
    ``shingle_hash``: ``polynomial`` (vectorised, see the module) or ``sha1`` (Data-Juicer's
    ``sha1_hash32`` of each shingle's UTF-8 bytes, one at a time: its signatures exactly)."""
    check_tokenization(tokenization, window_size)
    if hasattr(texts, "to_pylist"):  # a pyarrow (Chunked)Array of strings
        texts = texts.to_pylist()
    ignore = compile_pattern(ignore_pattern) if ignore_pattern else None
    prepared = [prepare(t, lowercase, ignore) for t in texts]
    if shingle_hash == "sha1":
        return _sha1_hashes(prepared, tokenization, window_size)
    if shingle_hash != "polynomial":
        raise ValueError(f"unknown shingle_hash {shingle_hash!r}; expected one of {SHINGLE_HASHES}")
    if tokenization == "space":  # canonical: words joined by single spaces (C speed; numpy lost)
        prepared = [" ".join(filter(None, t.split(" "))) for t in prepared]
    elif tokenization == "whitespace":
        prepared = [" ".join(t.split()) for t in prepared]
    parts_h, counts = [], []
    for lo, hi in _chunks([len(t) for t in prepared]):
        h, c = _hash_chunk(prepared[lo:hi], tokenization, window_size)
        parts_h.append(h)
        counts.append(c)
    offsets = np.zeros(len(prepared) + 1, dtype=np.int64)
    if counts:
        np.cumsum(np.concatenate(counts), out=offsets[1:])
    hashes = np.concatenate(parts_h) if parts_h else np.zeros(0, dtype=np.uint32)
    return hashes, offsets


def shingle_strings(text: str, tokenization: str, w: int) -> list[str]:
    """The shingles of one prepared text as strings (what both hashes hash; none for an empty
    text, one of all its tokens when it has fewer than ``w``)."""
    if not text:
        return []
    if tokenization == "character":
        return [text[i: i + w] for i in range(max(len(text) - w + 1, 1))]
    if tokenization == "space":
        tokens = [t for t in text.split(" ") if t]
    elif tokenization == "whitespace":
        tokens = text.split()
    else:
        tokens = compile_pattern(r"\p{P}").split(text)
    if not tokens:
        return []
    return [" ".join(tokens[i: i + w]) for i in range(max(len(tokens) - w + 1, 1))]


def sha1_hash32(shingle: str) -> int:
    """Data-Juicer's (and datasketch's) ``sha1_hash32``: the SHA-1 digest's first 4 bytes, little-endian."""
    return int.from_bytes(hashlib.sha1(shingle.encode("utf-8", "surrogatepass")).digest()[:4], "little")


def _sha1_hashes(prepared: list[str], tokenization: str, w: int) -> tuple[np.ndarray, np.ndarray]:
    per_doc = [np.unique(np.fromiter(map(sha1_hash32, shingle_strings(t, tokenization, w)), dtype=np.uint32))
               for t in prepared]
    offsets = np.zeros(len(prepared) + 1, dtype=np.int64)
    np.cumsum([len(h) for h in per_doc], out=offsets[1:])
    hashes = np.concatenate(per_doc) if per_doc else np.zeros(0, dtype=np.uint32)
    return hashes.astype(np.uint32, copy=False), offsets


def shingle_sets(
    texts: Sequence[str | None],
    tokenization: str,
    window_size: int,
    lowercase: bool = True,
    ignore_pattern: str | None = None,
) -> list[set[int]]:
    """The same shingle hashes as ``shingle_hashes``, one Python set per document (for exact
    Jaccard of candidate pairs)."""
    hashes, offsets = shingle_hashes(texts, tokenization, window_size, lowercase, ignore_pattern)
    return [set(hashes[offsets[i]:offsets[i + 1]].tolist()) for i in range(len(offsets) - 1)]


def jaccard(hashes: np.ndarray, offsets: np.ndarray, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Exact Jaccard similarity of the shingle sets of documents ``left[k]`` and ``right[k]`` in
    ``shingle_hashes``' output (float64 per pair; two empty documents: 0.0, as they never match)."""
    left = np.asarray(left, dtype=np.int64)
    right = np.asarray(right, dtype=np.int64)
    sizes = np.diff(offsets)
    union = sizes[left] + sizes[right]
    inter = intersection_sizes(hashes, offsets, left, right)
    union -= inter
    out = np.zeros(len(left), dtype=np.float64)
    np.divide(inter, union, out=out, where=union > 0)
    return out


# -- vectorised hashing -------------------------------------------------------------------------

def _chunks(lengths: list[int]) -> list[tuple[int, int]]:
    """Consecutive document ranges of about ``CHUNK_CHARS`` code points (a longer document alone)."""
    out, lo, size = [], 0, 0
    for i, n in enumerate(lengths):
        if size and size + n > CHUNK_CHARS:
            out.append((lo, i))
            lo, size = i, 0
        size += n
    if lo < len(lengths):
        out.append((lo, len(lengths)))
    return out


@functools.cache
def _bmp_punctuation() -> np.ndarray:
    """Is-punctuation (category P*) for every code point of the Basic Multilingual Plane."""
    return np.array([unicodedata.category(chr(c))[0] == "P" for c in range(0x10000)], dtype=bool)


def _punctuation_mask(cp: np.ndarray) -> np.ndarray:
    table = _bmp_punctuation()
    mask = table[np.minimum(cp, 0xFFFF)] & (cp < 0x10000)
    astral = np.flatnonzero(cp >= 0x10000)
    if len(astral):
        values = cp[astral]
        uniq = np.unique(values)
        punct = uniq[[unicodedata.category(chr(int(c)))[0] == "P" for c in uniq]]
        mask[astral] = np.isin(values, punct)
    return mask


_POWERS: list[np.ndarray] = []  # [B**i, B**-i] for the largest chunk so far


def _powers(n: int) -> tuple[np.ndarray, np.ndarray]:
    """``(B**i, B**-i) mod 2**64`` for i < n at least; one pair kept for chunks up to CHUNK_CHARS
    (a longer single document gets its own, uncached)."""
    if _POWERS and len(_POWERS[0]) >= n:
        return _POWERS[0], _POWERS[1]
    size = max(n, min(2 * n, CHUNK_CHARS + 1), 1024)
    inv = pow(HASH_BASE, -1, 1 << 64)
    fwd = np.full(size, HASH_BASE, dtype=np.uint64)
    bwd = np.full(size, inv, dtype=np.uint64)
    fwd[0] = bwd[0] = 1
    np.multiply.accumulate(fwd, out=fwd)
    np.multiply.accumulate(bwd, out=bwd)
    if size <= CHUNK_CHARS + 1:
        _POWERS[:] = [fwd, bwd]
    return fwd, bwd



def _hash_chunk(texts: list[str], tokenization: str, w: int) -> tuple[np.ndarray, np.ndarray]:
    """Hashes (per document deduplicated and sorted) and per-document counts of ``texts``."""
    n_docs = len(texts)
    lengths = np.fromiter((len(t) for t in texts), dtype=np.int64, count=n_docs)
    doc_start = np.zeros(n_docs + 1, dtype=np.int64)
    np.cumsum(lengths, out=doc_start[1:])
    cp = np.frombuffer("".join(texts).encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    total = int(doc_start[-1])
    nonempty = np.flatnonzero(lengths > 0)

    if tokenization == "character":
        counts = np.where(lengths > 0, np.maximum(lengths - w + 1, 1), 0)
        doc = np.repeat(np.arange(n_docs), counts)
        first = np.zeros(n_docs + 1, dtype=np.int64)
        np.cumsum(counts, out=first[1:])
        j = np.arange(len(doc), dtype=np.int64) - first[doc]
        left = doc_start[doc] + j
        right = np.minimum(left + w, doc_start[doc + 1])
    else:
        if tokenization in ("space", "whitespace"):  # canonical: words joined by single spaces
            sep = cp == 32
        else:
            sep = _punctuation_mask(cp)
            cp = np.where(sep, np.uint32(32), cp)
        sep_pos = np.flatnonzero(sep)
        # two sorted runs each: a stable (merge) sort is linear
        tok_start = np.sort(np.concatenate([doc_start[nonempty], sep_pos + 1]), kind="stable")
        tok_end = np.sort(np.concatenate([sep_pos, doc_start[nonempty + 1]]), kind="stable")
        # tokens in order are (start, end)-sorted both ways, so the two sorted lists pair up;
        # a nonempty document has one token more than it has separators
        ntok = np.bincount(np.searchsorted(doc_start, sep_pos, side="right") - 1, minlength=n_docs)
        ntok = np.where(lengths > 0, ntok + 1, 0)
        tok_first = np.zeros(n_docs + 1, dtype=np.int64)
        np.cumsum(ntok, out=tok_first[1:])
        counts = np.where(ntok > 0, np.maximum(ntok - w + 1, 1), 0)
        doc = np.repeat(np.arange(n_docs), counts)
        first = np.zeros(n_docs + 1, dtype=np.int64)
        np.cumsum(counts, out=first[1:])
        j = np.arange(len(doc), dtype=np.int64) - first[doc]
        left = tok_start[tok_first[doc] + j]
        right = tok_end[tok_first[doc] + np.minimum(j + w - 1, ntok[doc] - 1)]

    fwd, bwd = _powers(total + 1)
    c = np.zeros(total + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        np.cumsum((cp.astype(np.uint64) + np.uint64(1)) * bwd[:total], out=c[1:])
        poly = fwd[np.maximum(right - 1, 0)] * (c[right] - c[left])
        poly ^= (right - left).astype(np.uint64)
        h = (fmix64(poly) >> _S32).astype(np.uint32)
    return unique_per_document(h, first)  # first: each document's first shingle (CSR offsets)

