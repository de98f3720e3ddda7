"""Shingling for MinHash: every tokenization against a plain-Python reference of the documented
scheme (DJ's text preparation, tokens, shingles, the polynomial + fmix64 hash), and the edges."""

from __future__ import annotations

import re
import unicodedata

import numpy as np
import pytest

from raypress.operators.dedup.minhash import shingles as minhash_shingles
from raypress.operators.dedup.minhash.shingles import HASH_BASE, jaccard, shingle_hashes, shingle_sets

M64 = (1 << 64) - 1


def fmix64(h: int) -> int:
    h ^= h >> 33
    h = (h * 0xFF51AFD7ED558CCD) & M64
    h ^= h >> 33
    h = (h * 0xC4CEB9FE1A85EC53) & M64
    return h ^ (h >> 33)


def hash32(shingle: str) -> int:
    """The documented shingle hash, by Horner's rule (no prefix sums, no inverse powers)."""
    p = 0
    for ch in shingle:
        p = (p * HASH_BASE + ord(ch) + 1) & M64
    return fmix64(p ^ len(shingle)) >> 32


def tokens(text: str, tokenization: str) -> tuple[list[str], str]:
    if tokenization == "space":  # Data-Juicer's split_on_whitespace: the space character only
        return [t for t in text.split(" ") if t], " "
    if tokenization == "whitespace":
        return text.split(), " "
    if tokenization == "character":
        return list(text), ""
    out = [""]
    for ch in text:  # split at every P* character, empty tokens kept
        if unicodedata.category(ch).startswith("P"):
            out.append("")
        else:
            out[-1] += ch
    return out, " "


def reference(text: str | None, tokenization: str, w: int, lowercase: bool = True, ignore: str | None = None) -> set[int]:
    text = text or ""
    if lowercase:
        text = text.lower()
    if ignore:
        text = re.sub(ignore, "", text)
    if not text:
        return set()
    toks, sep = tokens(text, tokenization)
    if not toks:
        return set()
    if len(toks) <= w:
        return {hash32(sep.join(toks))}
    return {hash32(sep.join(toks[i:i + w])) for i in range(len(toks) - w + 1)}


DOCS = [
    "Hello, world. This is a test!",
    "",
    None,
    "one",
    "   ",
    "  spaced   out\ttext\n here ",
    "..a,,b..",
    "x.",
    ".x",
    "Ünïcödé ❤️ text 𝔘𝔫𝔦 「quote」 \U00010100 end",  # U+10100: astral punctuation (Po)
    "The Quick brown fox jumps over the lazy dog and the quick brown fox again",
    "a a a a a a a a",
    "no-punctuation-here? yes: some; (lots) of it!",
]


def as_sets(hashes: np.ndarray, offsets: np.ndarray) -> list[set[int]]:
    return [set(hashes[offsets[i]:offsets[i + 1]].tolist()) for i in range(len(offsets) - 1)]


@pytest.mark.parametrize("tokenization", ["space", "whitespace", "punctuation", "character"])
@pytest.mark.parametrize("window", [1, 2, 3, 5, 40])
def test_every_mode_matches_the_plain_reference(tokenization, window):
    hashes, offsets = shingle_hashes(DOCS, tokenization, window, True, None)
    assert hashes.dtype == np.uint32 and offsets.dtype == np.int64 and len(offsets) == len(DOCS) + 1
    for i, doc in enumerate(DOCS):
        got = hashes[offsets[i]:offsets[i + 1]]
        assert set(got.tolist()) == reference(doc, tokenization, window), (doc, tokenization, window)
        assert np.all(np.diff(got.astype(np.int64)) > 0), "per document: sorted, without repeats"


@pytest.mark.parametrize("tokenization", ["space", "whitespace", "punctuation", "character"])
def test_lowercase_and_ignore_pattern_follow_data_juicer(tokenization):
    docs = ["Hello World 123, AGAIN 45", "hello world , again"]
    for lowercase in (True, False):
        for ignore in (None, r"\d+", r"[A-Z]"):
            hashes, offsets = shingle_hashes(docs, tokenization, 2, lowercase, ignore)
            assert as_sets(hashes, offsets) == [reference(d, tokenization, 2, lowercase, ignore) for d in docs]
    # lowercase first, then the pattern: "[A-Z]" matches nothing once lowered
    assert as_sets(*shingle_hashes(docs[:1], tokenization, 2, True, r"[A-Z]")) == \
        as_sets(*shingle_hashes(docs[:1], tokenization, 2, True, None))
    # the digits removed, the two documents are the same in space mode
    stripped = as_sets(*shingle_hashes(docs, "space", 2, True, r"\d+"))
    assert stripped[0] == stripped[1] and as_sets(*shingle_hashes(docs, "space", 2, True, None))[0] != stripped[1]
    assert as_sets(*shingle_hashes(["Hello World AGAIN"], "space", 2, True, None)) == \
        as_sets(*shingle_hashes(["hello world again"], "space", 2, True, None))
    assert as_sets(*shingle_hashes(["Hello World"], "space", 2, False, None)) != \
        as_sets(*shingle_hashes(["hello world"], "space", 2, False, None))


def test_shingles_are_the_documented_strings():
    def one(text, tok, w):
        return as_sets(*shingle_hashes([text], tok, w, False, None))[0]

    assert one("a  b\tc", "space", 2) == {hash32("a b\tc")}  # Data-Juicer's words: a tab stays inside
    assert one("a  b\tc", "whitespace", 2) == {hash32("a b"), hash32("b c")}
    assert one("a b\nc d", "space", 2) == {hash32("a b\nc"), hash32("b\nc d")}
    assert one("a b c", "space", 5) == {hash32("a b c")}  # window larger than the document
    assert one("word", "space", 3) == {hash32("word")}  # one word
    assert one("Hello, world. Bye", "punctuation", 2) == {hash32("Hello  world"), hash32(" world  Bye")}
    assert one("abcd", "character", 2) == {hash32("ab"), hash32("bc"), hash32("cd")}
    assert one("ab", "character", 5) == {hash32("ab")}
    assert one("a a a a", "space", 1) == {hash32("a")}  # repeats within a document collapse


@pytest.mark.parametrize("tokenization", ["space", "whitespace", "punctuation", "character"])
def test_empty_and_none_documents_have_no_shingles(tokenization):
    hashes, offsets = shingle_hashes([None, "", "x", None, ""], tokenization, 3)
    assert offsets.tolist() == [0, 0, 0, 1, 1, 1] and len(hashes) == 1
    hashes, offsets = shingle_hashes([], tokenization, 3)
    assert offsets.tolist() == [0] and len(hashes) == 0
    # whitespace only: no words, but characters and one (empty-split) punctuation token
    assert shingle_hashes(["  \n "], "whitespace", 2)[1].tolist() == [0, 0]
    assert shingle_hashes(["   "], "space", 2)[1].tolist() == [0, 0]
    assert shingle_hashes(["\t"], tokenization, 2)[1].tolist() == [0, 0 if tokenization == "whitespace" else 1]
    assert shingle_hashes(["x"], tokenization, 2, ignore_pattern="x")[1].tolist() == [0, 0]


@pytest.mark.parametrize("tokenization", ["space", "whitespace", "punctuation", "character"])
def test_chunked_batches_give_the_same_hashes(monkeypatch, tokenization):
    docs = [d for d in DOCS if d] * 3 + ["", "word " * 50]
    whole = shingle_hashes(docs, tokenization, 3)
    monkeypatch.setattr(minhash_shingles, "CHUNK_CHARS", 17)  # many chunks, some longer than one document
    chunked = shingle_hashes(docs, tokenization, 3)
    assert np.array_equal(whole[0], chunked[0]) and np.array_equal(whole[1], chunked[1])


def test_a_document_hashes_the_same_in_any_batch():
    alone = [shingle_hashes([d], "space", 3)[0] for d in DOCS]
    hashes, offsets = shingle_hashes(DOCS[::-1], "space", 3)
    for i, d in enumerate(DOCS[::-1]):
        assert np.array_equal(hashes[offsets[i]:offsets[i + 1]], alone[len(DOCS) - 1 - i])


def test_shingle_sets_and_jaccard():
    docs = ["the cat sat on the mat today", "the cat sat on the mat yesterday", "", "dogs bark"]
    sets = shingle_sets(docs, "space", 2)
    hashes, offsets = shingle_hashes(docs, "space", 2)
    assert sets == as_sets(hashes, offsets)
    left, right = np.array([0, 0, 2, 1, 3]), np.array([1, 0, 2, 3, 3])
    expected = [len(sets[i] & sets[j]) / len(sets[i] | sets[j]) if sets[i] | sets[j] else 0.0
                for i, j in zip(left, right)]
    got = jaccard(hashes, offsets, left, right)
    assert got.tolist() == pytest.approx(expected) and got[0] == pytest.approx(5 / 7) and got[2] == 0.0


def test_unsupported_settings_are_rejected():
    with pytest.raises(ValueError, match="sentencepiece"):
        shingle_hashes(["x"], "sentencepiece", 5)
    with pytest.raises(ValueError, match="unknown tokenization"):
        shingle_hashes(["x"], "words", 5)
    with pytest.raises(ValueError, match="window_size"):
        shingle_hashes(["x"], "space", 0)


def test_per_document_dedupe_numba_and_numpy_agree(monkeypatch):
    from raypress.kernels import minhash

    rng = np.random.default_rng(4)
    counts = np.array([0, 1, 2, 24, 25, 0, 300, 3000, 0])  # insertion sort and radix runs
    offsets = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    hashes = rng.integers(0, 1 << 32, size=int(offsets[-1]), dtype=np.uint64).astype(np.uint32)
    hashes[offsets[6]:offsets[7]] %= 97  # many repeats
    hashes[offsets[3]:offsets[3] + 5] = 0xFFFFFFFF
    expected = [np.unique(hashes[offsets[i]:offsets[i + 1]]) for i in range(len(counts))]
    results = [minhash.unique_per_document(hashes, offsets)]
    monkeypatch.setattr(minhash, "numba_available", lambda: False)
    results.append(minhash.unique_per_document(hashes, offsets))
    for out, kept in results:
        assert kept.tolist() == [len(e) for e in expected]
        assert np.array_equal(out, np.concatenate(expected)) and out.dtype == np.uint32


def test_pyarrow_string_arrays_are_accepted():
    pa = pytest.importorskip("pyarrow")
    docs = ["a b c", None, "", "x y z w"]
    column = pa.chunked_array([docs[:2], docs[2:]])
    for got, expected in zip(shingle_hashes(column, "space", 2), shingle_hashes(docs, "space", 2)):
        assert np.array_equal(got, expected)


def test_jaccard_numba_and_numpy_agree(monkeypatch):
    from raypress.kernels import minhash

    docs = [" ".join(f"w{(i * k) % 50}" for i in range(30)) for k in range(1, 9)] + ["", "w1"]
    hashes, offsets = shingle_hashes(docs, "space", 1)
    sets = as_sets(hashes, offsets)
    left, right = np.meshgrid(np.arange(len(docs)), np.arange(len(docs)))
    left, right = left.ravel(), right.ravel()
    expected = [len(sets[i] & sets[j]) / len(sets[i] | sets[j]) if sets[i] | sets[j] else 0.0
                for i, j in zip(left, right)]
    fast = jaccard(hashes, offsets, left, right)
    monkeypatch.setattr(minhash, "numba_available", lambda: False)
    slow = jaccard(hashes, offsets, left, right)
    assert np.array_equal(fast, slow) and fast.tolist() == pytest.approx(expected)
    assert ((fast > 0) & (fast < 1)).sum() > 10 and len(set(fast.tolist())) > 5  # not all trivial


@pytest.mark.parametrize("tokenization", ["space", "whitespace", "punctuation", "character"])
def test_random_documents_over_tricky_characters(tokenization):
    """Every Unicode whitespace, ASCII and astral punctuation, symbols, empty runs, in many docs."""
    spaces = [chr(c) for c in range(0x3001) if chr(c).isspace()]
    alphabet = ["a", "B", "ç", "x", ",", ".", "!", "\U00010100", "❤", "$", "\x00", "İ"] + spaces
    rng = np.random.default_rng(7)
    docs = ["".join(rng.choice(alphabet, size=int(rng.integers(0, 25)))) for _ in range(300)]
    for window in (1, 3):
        hashes, offsets = shingle_hashes(docs, tokenization, window)
        assert as_sets(hashes, offsets) == [reference(d, tokenization, window) for d in docs]
