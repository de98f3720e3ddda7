"""stopwords/flagged_words_filter (numba word-list lookup) and clean_links/clean_email_mapper
(regex on anchored tokens only) give exactly what their previous implementations gave
(``text_op_references_wordlists``), row by row: on real prose found on this machine, on hand-made
edge cases, and (the mappers) on random strings built from the characters their anchors and
patterns turn on."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from raypress.kernels import anchored_spans, wordlist_hits
from raypress.operators.registry import get_op

UNIT = Path(__file__).resolve().parent
sys.path.insert(0, str(UNIT))
sys.path.insert(0, str(UNIT.parents[1] / "bench"))

from text_op_references_wordlists import REFERENCES  # noqa: E402

FILTERS = ("stopwords_filter", "flagged_words_filter")
MAPPERS = ("clean_links_mapper", "clean_email_mapper")

EDGE = [
    None, "", " ", "\n\t ", "The", "the THE tHe", "...the,,, (and) 'of'", "123 456", "über straße ÉCOLE déjà",
    "e\u0301cole cafe\u0301", "中文文本，没有空格。我们的", "我 的 是 了", "emoji 😀 the 👍🏽 and 🇫🇷", "İstanbul ΣΟΦΟΣ ς",
    "a\u00a0the\u00a0of", "the\r\nend", "fuck shit the", "no\x00null", "x" * 5000 + " the",
    "see http://example.com and https://example.com:8080/path?q=1&r=2#frag.", "ftp://files.example.org/pub/x.tar.gz",
    "visit www.example.com, or WWW2.Example.COM/page!", "(http://example.com/in_parens)", "[https://a.b/c]",
    "host/path: example.com/page and sub.example.co.uk/a/b?c=d", "mailto:someone@example.com", "news:comp.lang",
    "http://example.com/path_(with)_parens) end", "a:b a:/ a:// ab:c ab:% ab:: w ww www www. wwww3.x",
    "trailing http://example.com/. and http://example.com/?", "«http://example.com/x»", "“https://x.org/y”",
    "\u017fchem:x K\u212aelvin:2 ı:a", "ab:c" + "." * 40, "https://例子.测试/路径 and http://xn--fsq.com",
    "mail me: john.doe+tag@example.com, Jane_D@sub.example.org; x@y z@w.c a@b.cd @ @@ a@.b",
    "LINE1\nhttp://a.com/x\nLINE3\thttp://b.com/y", "http://a.com/x" * 20, " http://a.com/ ",
]


def real_texts(limit: int = 300, cap: int = 20_000) -> list[str]:
    """Documents read from /usr/share/doc and dist-info METADATA (bench/planted_near_dups's
    sources), evenly spread over the sorted list, each cut to ``cap`` characters."""
    import planted_near_dups

    paths = planted_near_dups.source_files()
    step = max(1, len(paths) // limit)
    texts = [planted_near_dups.read_text(p)[:cap] for p in paths[::step][:limit]]
    return [t for t in texts if t.strip()]


@pytest.fixture(scope="module")
def real():
    texts = real_texts()
    if len(texts) < 20:
        pytest.skip("no real text found on this machine")
    return texts


def op_values(name: str, texts: list[str | None], **params) -> list:
    cls = get_op(name)
    op = cls(cls.Params.model_validate(params))
    table = pa.table({"text": pa.array(texts, pa.string())})
    if name in FILTERS:
        return list(op.compute_stats(table)[op.stat])
    return op.process_batch(table).column("text").to_pylist()


def check(name: str, texts: list[str | None], batch: int = 1024, **params) -> None:
    for lo in range(0, max(len(texts), 1), batch):
        part = texts[lo:lo + batch]
        got, want = op_values(name, part, **params), REFERENCES[name](part, **params)
        assert len(got) == len(want) == len(part)
        for i, (g, w) in enumerate(zip(got, want)):
            assert g == w and type(g) is type(w), (name, params, lo + i, part[i][:200] if part[i] else part[i], g, w)


LANGS = {"stopwords_filter": ("en", "zh", "all"), "flagged_words_filter": ("en", "all")}


@pytest.mark.parametrize("name", FILTERS)
def test_filters_match_the_reference_on_real_text(name, real):
    for lang in LANGS[name]:
        check(name, real, lang=lang)
    check(name, real, batch=7, min_ratio=0.1, max_ratio=0.2)


@pytest.mark.parametrize("name", MAPPERS)
def test_mappers_match_the_reference_on_real_text(name, real):
    check(name, real)
    check(name, real, batch=13, repl="<removed>")


@pytest.mark.parametrize("name", FILTERS + MAPPERS)
def test_edge_cases(name):
    check(name, EDGE)
    check(name, [])
    check(name, [None, None])
    for i in range(len(EDGE)):  # each case alone: row starts and ends at every edge
        check(name, EDGE[i:i + 1])
    if name in FILTERS:
        for lang in LANGS[name]:
            check(name, EDGE, lang=lang, min_ratio=0.0, max_ratio=0.5)
    else:
        check(name, EDGE, repl="[\\1]" if name == "clean_links_mapper" else "<EMAIL>")


# Characters the anchors and patterns decide on, including the ones (?i)[a-z] matches beyond ASCII.
ALPHABET = list("aZw W:/.-%_+@1(()<>)[]?!,;'\"«»") + ["ww", "www", "http://", "ftp:", ".com/", ".org", " ", "\n",
                                                       "\t", "\u00a0", "\u3000", "\u017f", "\u212a", "\u0130",
                                                       "\u0131", "é", "中", "😀", "e\u0301"]


@pytest.mark.parametrize("name", MAPPERS)
def test_mappers_match_the_reference_on_random_strings(name):
    rng = random.Random(7)
    texts = ["".join(rng.choice(ALPHABET) for _ in range(rng.randrange(0, 40))) for _ in range(3000)]
    check(name, texts, batch=500)


@pytest.mark.parametrize("name", MAPPERS)
def test_custom_pattern_runs_on_every_row(name):
    check(name, EDGE, pattern=r"r'\bthe\b'", repl="X")
    check(name, EDGE, pattern="e", repl="")


def test_fallbacks_without_numba_agree(monkeypatch):
    monkeypatch.setattr(wordlist_hits, "available", lambda: False)
    monkeypatch.setattr(anchored_spans, "available", lambda: False)
    for name in FILTERS + MAPPERS:
        check(name, EDGE)


def test_word_table_finds_exactly_its_words():
    rng = random.Random(3)
    alphabet = "abcdeéü中ß"
    words = {"".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 6))) for _ in range(3000)}
    probes = ["".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 7))) for _ in range(5000)]
    listed = frozenset(rng.sample(sorted(words), 1500))
    from raypress.operators.text.words.batch import CodepointBatch, special_lut

    batch = CodepointBatch.of(probes)
    counts, hits = wordlist_hits.hits_per_row(batch.cps, batch.starts, batch.lengths, special_lut(),
                                              wordlist_hits.WordTable.of(listed))
    assert counts.tolist() == [1] * len(probes)
    assert hits.tolist() == [int(p in listed) for p in probes]
