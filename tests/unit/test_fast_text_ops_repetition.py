"""The numba paths of character_repetition_filter, word_repetition_filter, words_num_filter and
alphanumeric_filter give exactly the stats of their previous pure-Python implementations
(``text_op_references_repetition``), row by row, on real prose found on this machine (the files
``bench/planted_near_dups.py`` builds its corpus from) and on edge cases; also with numba switched
off, and with a hash that collides all the time (the kernels' loops run as plain Python)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from raypress.kernels import text_ngrams
from raypress.operators.registry import get_op

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import text_op_references_repetition as references  # noqa: E402

EDGE_CASES = [
    "", None, "a", "ab", "abcd", " ", "\n\n", "\t", "a" * 54,
    "ab" * 40, "the cat " * 30, "The CAT the cat THE Cat " * 10,
    "日本語のテキスト。日本語のテキスト。日本語のテキスト。中文文本，中文文本，中文文本。",
    "emoji 😀😀😀 🎉🎉 👍🏽👍🏽👍🏽 ❤️❤️ and more 😀😀😀 🎉🎉",
    "combining e\u0301e\u0301e\u0301 n\u0303 a\u0308 e\u0301e\u0301e\u0301 n\u0303 a\u0308",
    "windows\r\nline\r\nendings\r\nwith\ttabs\tand  double  spaces\r\n" * 5,
    "İstanbul ǅ ß ﬁ ΣΑΣ İİİ",  # lower() changes lengths
    "...!!! ??? --- 123 456 *** ...!!! ??? --- 123 456",  # only special characters
    "\x00a\x00\x00", "x\u00a0y\u2009z\u3000w " * 8,
]
REP_LENS = (1, 2, 5, 10, 25)


@pytest.fixture(scope="module")
def real_texts() -> list[str]:
    """About 1.2 MB of real prose: every few files of planted_near_dups' sources, whole files and
    their first paragraphs (so both long and short rows), at most 40k characters each."""
    try:
        import planted_near_dups
    except ImportError:
        pytest.skip("bench/planted_near_dups.py not importable")
    files = planted_near_dups.source_files()
    texts: list[str] = []
    size = 0
    for path in files[:: max(1, len(files) // 300)]:
        text = planted_near_dups.read_text(path)[:40_000]
        if not text.strip():
            continue
        texts += [text, text.split("\n\n")[0]]
        size += len(text)
        if size > 1_200_000:
            break
    if len(texts) < 20:
        pytest.skip("no real text found on this machine")
    return texts


def stats(op: str, texts: list, **params) -> list:
    cls = get_op(op)
    values = cls(cls.Params.model_validate(params)).compute_stats(pa.table({"text": pa.array(texts, pa.string())}))
    (column,) = values.values()
    return list(column)


def check(op: str, texts: list, **params) -> None:
    got = stats(op, texts, **params)
    want = references.REFERENCES[op](texts, **params)
    bad = [i for i, (g, w) in enumerate(zip(got, want)) if g != w or type(g) is not type(w)]
    assert len(got) == len(want) and not bad, f"{op} {params}: rows {bad[:5]} differ: " \
        f"{[(got[i], want[i]) for i in bad[:5]]}"


@pytest.mark.parametrize("rep_len", REP_LENS)
def test_character_repetition_matches_reference(real_texts, rep_len):
    check("character_repetition_filter", real_texts + EDGE_CASES, rep_len=rep_len, min_ratio=0.1, max_ratio=0.4)


@pytest.mark.parametrize("rep_len", REP_LENS)
def test_word_repetition_matches_reference(real_texts, rep_len):
    check("word_repetition_filter", real_texts + EDGE_CASES, rep_len=rep_len, min_ratio=0.05, max_ratio=0.3)


def test_words_num_and_alphanumeric_match_reference(real_texts):
    check("words_num_filter", real_texts + EDGE_CASES, min_num=5, max_num=1000)
    check("alphanumeric_filter", real_texts + EDGE_CASES, min_ratio=0.5)


def test_edge_cases_alone_and_empty_batches():
    for op, params in [("character_repetition_filter", {"rep_len": 3}), ("word_repetition_filter", {"rep_len": 2}),
                       ("words_num_filter", {}), ("alphanumeric_filter", {})]:
        check(op, EDGE_CASES, **params)
        check(op, [None, ""], **params)
        assert stats(op, [], **params) == []


def test_without_numba_the_old_paths_agree(real_texts, monkeypatch):
    monkeypatch.setattr(text_ngrams, "available", lambda: False)
    texts = real_texts[:40] + EDGE_CASES
    for op, params in [("character_repetition_filter", {"rep_len": 5}), ("word_repetition_filter", {"rep_len": 3}),
                       ("words_num_filter", {}), ("alphanumeric_filter", {})]:
        check(op, texts, **params)


def test_counts_stay_exact_when_every_hash_collides(monkeypatch):
    """With base 0 and multiplier 0 every n-gram hashes to its last key and probes from slot 0, so
    equal hashes of different n-grams are the rule: the key-by-key check must still give
    Counter's counts.  The loops run as plain Python (the compiled ones froze the real constants)."""
    monkeypatch.setattr(text_ngrams, "_BASE", np.uint64(0))
    monkeypatch.setattr(text_ngrams, "_MIX", np.uint64(0))
    texts = ["abcabcabd xbc ybc abcabc", "the cat sat. The cat sat! the dog sat", "", "aaaa", "日本日本語"]
    from raypress.operators.text.words.batch import CodepointBatch, special_lut

    batch = CodepointBatch.of(texts)
    for n in (1, 2, 3, 5):
        total = np.zeros(len(texts), dtype=np.int64)
        top = np.zeros(len(texts), dtype=np.int64)
        text_ngrams._ngram_loop(batch.cps, batch.starts, batch.lengths, n, True, total, top)
        got = np.where(total > 0, top / np.maximum(total, 1), 0.0).tolist()
        assert got == references.character_repetition_filter(texts, rep_len=n)

    lowered = CodepointBatch.of([t.lower() for t in texts])
    starts, ends, counts = text_ngrams.word_spans(lowered.cps, lowered.starts, lowered.lengths, special_lut())
    ids = np.empty(len(starts), dtype=np.int64)
    text_ngrams._span_ids_loop(lowered.cps, starts, ends, counts, ids)
    words = [lowered.text[a:b] for a, b in zip(starts.tolist(), ends.tolist())]
    row_starts = np.concatenate(([0], np.cumsum(counts)[:-1])).astype(np.int64)
    for r in range(len(texts)):  # within a row: the same id exactly for the same word
        row = slice(row_starts[r], row_starts[r] + counts[r])
        pairs = set(zip(words[row], ids[row].tolist()))
        assert len(pairs) == len(set(words[row])) == len(set(ids[row].tolist()))
    for n in (1, 2, 3):
        total = np.zeros(len(texts), dtype=np.int64)
        rep = np.zeros(len(texts), dtype=np.int64)
        text_ngrams._ngram_loop(ids, row_starts, counts, n, False, total, rep)
        got = np.where(total > 0, rep / np.maximum(total, 1), 0.0).tolist()
        assert got == references.word_repetition_filter(texts, rep_len=n)
