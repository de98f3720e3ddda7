"""document_deduplicator's fast md5 path (``normalized_bytes``: bytes.translate for ASCII
non-characters) gives exactly the digests of the previous path (``normalize_text``: the regex on the
str, then UTF-8), row by row, on real prose found on this machine and on edge cases, for every
combination of the op's two flags."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import pytest

from raypress.operators.dedup.document_deduplicator import normalize_text, normalized_bytes, text_md5

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

EDGE_CASES = [
    "", " ", "\n\t", "a", " Hello, World! 42 ", "\x1cab\x1f", "\x0b\x0cx\r\n",
    "café\u3000٣٤ naïve—x", " \u00a0a\u2003b\u0663 ", "a\x85b", "\u2028line\u2029sep",
    "İstanbul ǅ ß ﬁ ΣΑΣ 12", "日本語、テキスト。１２３", "emoji 😀 👍🏽 ❤️ 3.14",
    "\x00a\x00", "ＡＢＣ full width ０９", "tab\tinside\tand   spaces   ",
]
FLAGS = [(False, False), (True, False), (False, True), (True, True)]


@pytest.fixture(scope="module")
def real_texts() -> list[str]:
    """Real prose: every few files of planted_near_dups' sources, whole and first paragraphs."""
    try:
        import planted_near_dups
    except ImportError:
        pytest.skip("bench/planted_near_dups.py not importable")
    files = planted_near_dups.source_files()
    texts: list[str] = []
    for path in files[:: max(1, len(files) // 300)]:
        text = planted_near_dups.read_text(path)[:40_000]
        if text.strip():
            texts += [text, text.split("\n\n")[0]]
    if len(texts) < 20:
        pytest.skip("no real text found on this machine")
    return texts


@pytest.mark.parametrize("lowercase, ignore", FLAGS)
def test_digests_equal_the_regex_path_row_by_row_on_real_text(real_texts, lowercase, ignore):
    assert any(not t.isascii() for t in real_texts)  # both branches of the fast path are taken
    bad = [i for i, t in enumerate(real_texts)
           if text_md5(t, lowercase, ignore) != hashlib.md5(normalize_text(t, lowercase, ignore).encode()).digest()]
    assert not bad, f"rows {bad[:5]} differ"


@pytest.mark.parametrize("lowercase, ignore", FLAGS)
@pytest.mark.parametrize("text", EDGE_CASES)
def test_edge_cases_normalize_the_same(text, lowercase, ignore):
    assert normalized_bytes(text, lowercase, ignore) == normalize_text(text, lowercase, ignore).encode()
