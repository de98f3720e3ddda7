"""refinedweb_gopher_quality_filter: every DCLM rule at its boundary on hand-built pages, the
tokenisers and line modifiers against DCLM's definitions, empty and broken input, real prose."""

from __future__ import annotations

import random
from collections import Counter

import pyarrow as pa
import pytest
from pydantic import ValidationError

from raypress.operators.base import OpKind
from raypress.operators.curation.gopher.rules import (
    STAT_NAMES,
    LineModifiers,
    LineSubstring,
    apply_line_modifiers,
    dup_segment_fracs,
    fasttext_words,
    gopher_stats,
    ngram_repetition,
    segment_words,
    word_count,
)
from raypress.operators.curation.refinedweb_gopher_quality_filter import GopherQualityFilter, GopherQualityParams
from raypress.operators.registry import get_op
from raypress.operators.shared.documents import Document, documents_to_table

RULE_FIELDS = [
    name
    for name in GopherQualityParams.model_fields
    if name.startswith(("min_", "max_")) and not name.startswith(("max_line_", "min_line_"))
]
DEFAULTS = {name: GopherQualityParams.model_fields[name].default for name in RULE_FIELDS}
COUNT_STATS = {"gopher_word_count", "gopher_stop_word_count"}

PROSE = (
    "The village sits at the edge of a wide valley, where the river slows down and spreads into "
    "shallow pools before it reaches the sea. Every spring the farmers walk along the banks to "
    "check the old stone walls, because the winter floods tend to loosen them.\n\n"
    "Most families have lived here for generations, and they still share the work of repairing "
    "the mill with their neighbours. Visitors often say that the place feels quiet, but anyone "
    "who stays for a week learns that it is busy from early morning until late in the evening."
)


def make_op(**params) -> GopherQualityFilter:
    return GopherQualityFilter(GopherQualityParams(text_key="text", **params))


def isolated(*rules: str, **params) -> GopherQualityFilter:
    """Only the named threshold params keep their (default) values: every other rule is off."""
    off = {name: None for name in RULE_FIELDS if name not in rules}
    return make_op(**{**off, **params})


def judge(op: GopherQualityFilter, *texts: str | None) -> tuple[dict[str, list], list[str | None]]:
    stats = op.compute_stats(pa.table({"text": pa.array(list(texts), pa.string())}))
    return stats, op.drop_reasons(stats)


def reasons(op: GopherQualityFilter, *texts: str | None) -> list[str | None]:
    return judge(op, *texts)[1]


def distinct_words(k: int, length: int = 5, alphabet: str = "kqxzv") -> list[str]:
    """k distinct words of ``length`` letters from ``alphabet`` (never a stop word, never a
    word of another alphabet)."""
    words = []
    for i in range(k):
        letters = []
        for _ in range(length):
            i, digit = divmod(i, len(alphabet))
            letters.append(alphabet[digit])
        words.append("".join(letters))
    assert len(set(words)) == k, "alphabet too small for k words of this length"
    return words


def repeated_block_page(block: list[str], total_chars: int) -> str:
    """``block`` twice, with distinct filler words between and after, the words' characters adding
    up to ``total_chars``: the block is the only repeated n-gram of its size or longer."""
    filler_chars = total_chars - 2 * sum(map(len, block))
    n5, rest = divmod(filler_chars, 5)
    filler = distinct_words(n5) + (["y" * rest] if rest else [])
    assert len(filler) >= 2 and sum(map(len, filler)) == filler_chars
    return " ".join(block + filler[:1] + block + filler[1:])


# ---------------------------------------------------------------- contract
def test_registered_as_a_filter_with_described_params():
    cls = get_op("refinedweb_gopher_quality_filter")
    assert cls is GopherQualityFilter
    assert cls.kind is OpKind.FILTER
    assert cls.stat_names == STAT_NAMES and len(STAT_NAMES) == 21
    assert all(f.description for f in GopherQualityParams.model_fields.values())
    assert GopherQualityFilter(GopherQualityParams()).columns_read() == ("texts",)
    assert make_op().columns_read() == ("text",)


def test_defaults_are_dclms_published_values():
    assert DEFAULTS == {
        "min_words": 50, "max_words": 100_000, "min_mean_word_length": 3, "max_mean_word_length": 10,
        "max_symbol_word_ratio": 0.1, "max_bullet_line_frac": 0.9, "max_ellipsis_line_frac": 0.3,
        "max_non_alpha_word_frac": 0.2, "min_stop_words": 2,
        "max_dup_line_frac": 0.30, "max_dup_para_frac": 0.30, "max_dup_line_char_frac": 0.20,
        "max_dup_para_char_frac": 0.20, "max_top_2gram_char_frac": 0.20, "max_top_3gram_char_frac": 0.18,
        "max_top_4gram_char_frac": 0.16, "max_dup_5gram_char_frac": 0.15, "max_dup_6gram_char_frac": 0.14,
        "max_dup_7gram_char_frac": 0.13, "max_dup_8gram_char_frac": 0.12, "max_dup_9gram_char_frac": 0.11,
        "max_dup_10gram_char_frac": 0.10, "max_word_removal_ratio": 0.05,
    }  # fmt: skip
    p = GopherQualityParams()
    assert (p.max_line_uppercase_ratio, p.max_line_numeric_ratio, p.min_line_words) == (0.5, 0.999999, 2)
    assert [(s.pattern, s.location, s.max_words) for s in p.line_substrings] == [
        ("items in cart", "any", 10), ("Read more...", "suffix", 10), ("Sign-in", "prefix", 10)
    ]


# ---------------------------------------------------------------- one rule at a time, at its boundary
def test_word_count_boundaries():
    op = isolated("min_words", "max_words")
    stats, got = judge(op, " ".join(distinct_words(50)), " ".join(distinct_words(49)))
    assert stats["gopher_word_count"] == [50, 49]
    assert got == [None, "gopher_word_count < min"]
    at_max = " ".join(f"w{i}" for i in range(100_000))
    stats, got = judge(op, at_max, at_max + " last")
    assert stats["gopher_word_count"] == [100_000, 100_001]
    assert got == [None, "gopher_word_count > max"]


def test_word_count_is_fasttext_tokens_starting_alphanumeric():
    # "(a)" starts with punctuation; a no-break space or thin space does not split for fastText,
    # NUL does; "--" is no word
    assert word_count("(a) b -- c") == 2
    assert word_count("a\xa0b c\u2009d") == 2
    assert word_count("a\x00b") == 2
    assert word_count("\xa0lead word") == 1
    for text in ("(a) b -- c", "a\xa0b c\u2009d", "x\x00y\x1cz w", "\xa0lead word\n\nend"):
        assert word_count(text, text.split()) == len(fasttext_words(text)) == word_count(text)


def test_mean_word_length_boundaries():
    op = isolated("min_mean_word_length", "max_mean_word_length")
    three = distinct_words(50, 3)
    ten = distinct_words(50, 10)
    texts = [
        " ".join(three),                      # 150/50 = 3.0
        " ".join(three[:49] + ["ab"]),        # 149/50 = 2.98
        " ".join(three[:49] + ["abcd"]),      # 151/50 = 3.02
        " ".join(ten),                        # 10.0
        " ".join(ten[:49] + ["a" * 11]),      # 501/50 = 10.02
        " ".join(ten[:49] + ["a" * 9]),       # 9.98
    ]  # fmt: skip
    stats, got = judge(op, *texts)
    assert stats["gopher_mean_word_length"] == pytest.approx([3.0, 2.98, 3.02, 10.0, 10.02, 9.98])
    assert got == [None, "gopher_mean_word_length < min", None, None, "gopher_mean_word_length > max", None]


def test_mean_word_length_counts_punctuation_in_whitespace_tokens():
    assert gopher_stats("abc, de.")["gopher_mean_word_length"] == 3.5


def test_symbol_ratio_boundary():
    op = isolated("max_symbol_word_ratio")
    words = distinct_words(100)

    def page(n_hash: int) -> str:
        return " ".join(["#" + w for w in words[:n_hash]] + words[n_hash:])

    stats, got = judge(op, page(10), page(11), page(9))
    assert stats["gopher_symbol_word_ratio"] == [0.1, 0.11, 0.09]
    assert got == [None, "gopher_symbol_word_ratio > max", None]


def test_symbols_are_hash_and_every_ellipsis_form():
    # one '#', one '...', one '…', one '. . .' over 6 whitespace tokens
    assert gopher_stats("wait... #tag … . . .")["gopher_symbol_word_ratio"] == 4 / 6
    assert gopher_stats("a.... b")["gopher_symbol_word_ratio"] == 1 / 2  # '...' counted once


def test_bullet_line_boundary():
    op = isolated("max_bullet_line_frac")

    def page(bullets: int, lines: int) -> str:
        marks = ["•", "●", "*", "-"]
        rows = [f"  {marks[i % 4]} item {w}" for i, w in enumerate(distinct_words(bullets))]
        rows += [f"plain {w}" for w in distinct_words(lines - bullets, alphabet="abcde")]
        return "\n\n".join(rows)  # blank lines do not count

    stats, got = judge(op, page(9, 10), page(91, 100), page(89, 100), page(10, 10))
    assert stats["gopher_bullet_line_frac"] == [0.9, 0.91, 0.89, 1.0]
    assert got == [None, "gopher_bullet_line_frac > max", None, "gopher_bullet_line_frac > max"]
    assert gopher_stats("– en dash is no bullet\nplain")["gopher_bullet_line_frac"] == 0.0


def test_ellipsis_line_boundary():
    op = isolated("max_ellipsis_line_frac")

    def page(ellipses: int, lines: int) -> str:
        ends = ["...", "…", ". . ."]
        rows = [f"line {w}{ends[i % 3]}   " for i, w in enumerate(distinct_words(ellipses))]
        rows += [f"line {w}." for w in distinct_words(lines - ellipses, alphabet="abcde")]
        return "\n".join(rows)

    stats, got = judge(op, page(3, 10), page(31, 100), page(29, 100))
    assert stats["gopher_ellipsis_line_frac"] == [0.3, 0.31, 0.29]
    assert got == [None, "gopher_ellipsis_line_frac > max", None]


def test_non_alphabetic_word_boundary():
    op = isolated("max_non_alpha_word_frac")
    words = distinct_words(100)
    non_alpha = ["123", "--", "½", "4.5", "(7)"]

    def page(n: int) -> str:
        return " ".join([non_alpha[i % 5] for i in range(n)] + words[n:])

    stats, got = judge(op, page(20), page(21), page(19))
    assert stats["gopher_non_alpha_word_frac"] == [0.2, 0.21, 0.19]
    assert got == [None, "gopher_non_alpha_word_frac > max", None]
    assert gopher_stats("a1 é2 3x 42")["gopher_non_alpha_word_frac"] == 0.25  # one digit may hold a letter


def test_stop_word_boundary():
    op = isolated("min_stop_words")
    filler = " ".join(distinct_words(10))
    stats, got = judge(op, f"The {filler} THAT", f"the {filler}", f"the, {filler} that.")
    assert stats["gopher_stop_word_count"] == [2, 1, 0]  # whole tokens only, any case
    assert got == [None, "gopher_stop_word_count < min", "gopher_stop_word_count < min"]


@pytest.mark.parametrize("sep,stat,field", [("\n", "gopher_dup_line_frac", "max_dup_line_frac"),
                                            ("\n\n", "gopher_dup_para_frac", "max_dup_para_frac")])
def test_duplicate_segment_fraction_boundary(sep, stat, field):
    op = isolated(field)

    def page(copies: int, segments: int) -> str:
        unique = [f"unique {w}" for w in distinct_words(segments - copies)]
        return sep.join(["  repeated text  "] * copies + unique)  # stripped before comparing

    stats, got = judge(op, page(3, 10), page(4, 10), page(31, 100), page(29, 100))
    assert stats[stat] == [0.3, 0.4, 0.31, 0.29]  # every copy counts, the first included
    assert got == [None, f"{stat} > max", f"{stat} > max", None]


@pytest.mark.parametrize("sep,stat,field", [("\n", "gopher_dup_line_char_frac", "max_dup_line_char_frac"),
                                            ("\n\n", "gopher_dup_para_char_frac", "max_dup_para_char_frac")])
def test_duplicate_segment_char_fraction_boundary(sep, stat, field):
    op = isolated(field)

    def page(last_len: int) -> str:  # two copies of a 10-char segment + unique segments
        unique = [w + w for w in distinct_words(7)] + ["q" * last_len]  # 7 x 10 + last_len chars
        return sep.join(["aaaaa bbbb"] * 2 + unique)

    stats, got = judge(op, page(10), page(9), page(11))
    assert stats[stat] == [20 / 100, 20 / 99, 20 / 101]
    assert got == [None, f"{stat} > max", None]


@pytest.mark.parametrize(
    "n,block,total,limit",
    [(2, ["aaaa", "bbbb"], 80, 0.20), (3, ["aaa", "bbb", "ccc"], 100, 0.18), (4, ["aa", "bb", "cc", "dd"], 100, 0.16)],
)
def test_top_ngram_char_fraction_boundary(n, block, total, limit):
    stat = f"gopher_top_{n}gram_char_frac"
    op = isolated(f"max_top_{n}gram_char_frac")
    stats, got = judge(op, *(repeated_block_page(block, t) for t in (total, total - 1, total + 1)))
    chars = 2 * sum(map(len, block))  # the block's characters times its count
    assert stats[stat] == [chars / total, chars / (total - 1), chars / (total + 1)]
    assert stats[stat][0] == limit
    assert got == [None, f"{stat} > max", None]


@pytest.mark.parametrize(
    "n,word_len,total,limit",
    [(5, 3, 200, 0.15), (6, 7, 600, 0.14), (7, 13, 1400, 0.13),
     (8, 3, 400, 0.12), (9, 11, 1800, 0.11), (10, 1, 200, 0.10)],
)
def test_duplicate_ngram_char_fraction_boundary(n, word_len, total, limit):
    stat = f"gopher_dup_{n}gram_char_frac"
    op = isolated(f"max_dup_{n}gram_char_frac")
    block = [c * word_len for c in "abcdefghij"[:n]]
    stats, got = judge(op, *(repeated_block_page(block, t) for t in (total, total - 1, total + 1)))
    chars = 2 * n * word_len  # both copies of the n words
    assert stats[stat] == [chars / total, chars / (total - 1), chars / (total + 1)]
    assert stats[stat][0] == limit
    assert got == [None, f"{stat} > max", None]
    longer = f"gopher_dup_{n + 1}gram_char_frac" if n < 10 else None
    if longer:
        assert stats[longer][0] == 0.0  # no (n+1)-gram repeats


def test_word_removal_ratio_boundary():
    op = isolated("max_word_removal_ratio")

    def page(shouted: int) -> str:
        words = distinct_words(100 - shouted)
        lines = [" ".join(words[i:i + 4]) for i in range(0, len(words), 4)]  # no line under 2 words
        caps = " ".join(w.upper() for w in distinct_words(shouted, alphabet="abcde"))
        return "\n".join(lines[:3] + [caps] + lines[3:])

    stats, got = judge(op, page(5), page(6), page(4))
    assert stats["word_removal_ratio"] == [0.05, 0.06, 0.04]
    assert got == [None, "word_removal_ratio > max", None]


# ---------------------------------------------------------------- DCLM order and whole pages
def test_real_english_prose_passes_every_rule():
    stats, got = judge(make_op(), PROSE)
    row = {k: v[0] for k, v in stats.items()}
    assert got == [None]
    assert row["gopher_word_count"] == 95  # 25 + 22 + 20 + 28 words in the four sentences
    assert row["gopher_stop_word_count"] == 22
    assert 3 <= row["gopher_mean_word_length"] <= 10
    assert row["gopher_non_alpha_word_frac"] == row["gopher_symbol_word_ratio"] == 0.0
    repetition = [name for name in STAT_NAMES if name.startswith(("gopher_dup_", "gopher_top_"))]
    assert [row[name] for name in repetition] == [0.0] * len(repetition)  # no bigram even repeats
    assert row["word_removal_ratio"] == 0.0


def test_reason_is_the_first_failing_rule_in_dclm_order():
    spam = "\n".join(["buy cheap pills now best price today"] * 30)  # no stop word, all lines repeated
    stats, got = judge(make_op(), spam, spam.replace("pills", "the pills"))
    assert stats["gopher_stop_word_count"] == [0, 30]
    assert stats["gopher_dup_line_frac"] == [1.0, 1.0]
    assert got == ["gopher_stop_word_count < min", "gopher_dup_line_frac > max"]
    names = [name for name, _, _ in make_op().rules]
    assert names == list(STAT_NAMES)  # rules run in the stats' (DCLM's) order


def test_phrase_spam_is_dropped_by_the_top_bigram_rule():
    spam = "click here to win the big prize " * 20
    stats, got = judge(make_op(), spam)
    # 25 word chars per repeat; six bigrams occur 20 times, the longest "click here" (9 chars)
    assert stats["gopher_top_2gram_char_frac"] == [9 * 20 / 500]
    assert got == ["gopher_top_2gram_char_frac > max"]
    # lifting that limit hands the page to the next rule: "click here to" / "the big prize", 11 chars
    stats, got = judge(make_op(max_top_2gram_char_frac=0.5), spam)
    assert stats["gopher_top_3gram_char_frac"] == [11 * 20 / 500]
    assert got == ["gopher_top_3gram_char_frac > max"]


def test_params_override_and_validation():
    short = " ".join(PROSE.split()[:20])
    assert reasons(make_op(), short) == ["gopher_word_count < min"]
    assert reasons(make_op(min_words=10), short) == [None]
    assert reasons(make_op(min_words=None), short) == [None]
    with pytest.raises(ValidationError):
        GopherQualityParams(min_word=10)
    with pytest.raises(ValidationError):
        GopherQualityParams(line_substrings=[{"pattern": "x", "location": "middle"}])


def test_skip_paragraph_turns_off_the_paragraph_rules():
    paras = ["Repeated note."] * 2 + ["\n".join(f"unique line {w} {w}" for w in distinct_words(4, alphabet=a))
                                      for a in ("kqxzv", "abcde", "fghij")]
    page = "\n\n".join(paras)
    dup_rules = [f for f in RULE_FIELDS if f.startswith("max_dup_") and "gram" not in f]
    stats, got = judge(isolated(*dup_rules), page)
    assert stats["gopher_dup_para_frac"] == [2 / 5] and stats["gopher_dup_line_frac"] == [2 / 14]
    assert got == ["gopher_dup_para_frac > max"]
    assert reasons(isolated(*dup_rules, skip_paragraph=True), page) == [None]


def test_line_modifier_params_change_the_removal_ratio():
    page = "\n".join(" ".join(distinct_words(5, alphabet=a)) for a in ("kqxzv", "abcde", "fghij", "lmnop"))
    page += "\nSHOUTED WORDS HERE"  # 3 of 23 words on an uppercase line
    assert gopher_stats(page)["word_removal_ratio"] == 3 / 23
    op = make_op(max_line_uppercase_ratio=None)
    assert judge(op, page)[0]["word_removal_ratio"] == [0.0]


# ---------------------------------------------------------------- empty, missing and broken input
def test_empty_documents_have_zero_stats_and_fail_the_word_count():
    docs = [Document(id="no-positions", url=None, source="html"),
            Document(id="image-only", url=None, source="html", texts=[None], images=["a.png"],
                     image_bytes=[None], image_metadata=[None]),
            Document(id="blank-texts", url=None, source="html", texts=["", "  \n "], images=[None, None],
                     image_bytes=[None, None], image_metadata=[None, None])]
    table = documents_to_table(docs)
    table = table.set_column(table.schema.get_field_index("texts"), "texts",
                             pa.array([None, [None], ["", "  \n "]], pa.list_(pa.string())))
    op = GopherQualityFilter(GopherQualityParams())
    stats = op.compute_stats(table)
    for name in STAT_NAMES:
        assert stats[name] == [0, 0, 0]
        assert all(type(v) is (int if name in COUNT_STATS else float) for v in stats[name])
    assert op.drop_reasons(stats) == ["gopher_word_count < min"] * 3


def test_plain_text_column_with_nulls():
    stats, got = judge(make_op(), None, "", PROSE)
    assert stats["gopher_word_count"] == [0, 0, 95]
    assert got == ["gopher_word_count < min", "gopher_word_count < min", None]


def test_interleaved_document_text_joins_text_positions():
    half = PROSE.split("\n\n")
    doc = Document(id="d", url="http://x/", source="html")
    doc.add_text(half[0])
    doc.add_image("http://x/a.png")
    doc.add_text(half[1])
    op = GopherQualityFilter(GopherQualityParams())
    stats = op.compute_stats(documents_to_table([doc]))
    assert stats == {k: [v] for k, v in gopher_stats(PROSE).items()}
    assert op.drop_reasons(stats) == [None]


def test_lone_surrogates_do_not_crash():
    stats = gopher_stats(("good words \ud800 here and the rest\n" * 12) + "\udfff")
    assert stats["gopher_word_count"] == 12 * 6
    assert set(stats) == set(STAT_NAMES)


def test_stats_only_mode_gets_every_stat_for_every_row():
    op = make_op()
    stats = op.compute_stats(pa.table({"text": ["", PROSE, "x " * 80]}))
    assert list(stats) == list(STAT_NAMES)
    assert all(len(v) == 3 for v in stats.values())


# ---------------------------------------------------------------- the pieces, against DCLM's definitions
@pytest.mark.parametrize(
    "text,words",
    [  # every expected list is what uniseg's word breaker gives, punctuation tokens dropped
        ("don't stop", ["don't", "stop"]),
        ("U.S. e.g. a,b 3,000.5 10:30", ["U.S", "e.g", "a", "b", "3,000.5", "10", "30"]),
        ("foo_bar _x x_", ["foo_bar", "x_"]),
        ("漢字かなカタカナ", ["漢", "字", "か", "な", "カタカナ"]),
        ("cafe\u0301 naïve", ["cafe\u0301", "naïve"]),
        ("x² ③", ["x", "²", "③"]),
        ("it’s ‘quoted’ well-known (paren) #tag", ["it’s", "quoted", "well", "known", "paren", "tag"]),
    ],
)
def test_segment_words_follow_unicode_word_breaks(text, words):
    assert segment_words(text) == words


def test_dup_segment_fracs():
    assert dup_segment_fracs([]) == (0.0, 0.0)
    assert dup_segment_fracs(["only one"]) == (0.0, 0.0)
    assert dup_segment_fracs(["ab", "ab", "cdef"]) == (2 / 3, 4 / 8)


def _naive_ngram_repetition(words: list[str]) -> tuple[dict[int, float], dict[int, float]]:
    """DCLM's repetition_filter fractions, written straight from its code."""
    total = sum(map(len, words))
    top, dup = {}, {}
    for n in range(2, 11):
        grams = list(zip(*(words[i:] for i in range(n))))
        counts = Counter(grams)
        best = max(counts.values(), default=1)
        if n <= 4:
            top[n] = 0.0 if best == 1 else max(sum(map(len, g)) for g, c in counts.items() if c == best) * best / total
        else:
            covered = {j for i, g in enumerate(grams) if counts[g] > 1 for j in range(i, i + n)}
            dup[n] = sum(len(words[j]) for j in covered) / total if best > 1 else 0.0
    return top, dup


def test_ngram_repetition_matches_the_direct_definition():
    rng = random.Random(7)
    for trial in range(300):
        vocab = ["a", "bb", "ccc", "dddd", "e", "ff"][: rng.randint(1, 6)]
        words = [rng.choice(vocab) for _ in range(rng.randint(0, 120))]
        if trial % 3 == 0:  # long exact repeats
            words = words[:30] * rng.randint(1, 4) + words[30:]
        assert ngram_repetition(words) == _naive_ngram_repetition(words), words


def test_line_modifiers_one_by_one():
    only = dict(max_uppercase_ratio=None, max_numeric_ratio=None, remove_counter_lines=False,
                min_line_words=None, substrings=())
    upper = LineModifiers(**{**only, "max_uppercase_ratio": 0.5})
    assert apply_line_modifiers("ABC def\nABCD ef\nok now", upper) == "ABC def\nok now"  # 3/7 kept, 4/7 out
    numeric = LineModifiers(**{**only, "max_numeric_ratio": 0.999999})
    assert apply_line_modifiers("12345\n1234a b\nend here", numeric) == "1234a b\nend here"
    counter = LineModifiers(**{**only, "remove_counter_lines": True})
    assert apply_line_modifiers("3 likes\n1.2K Views!\nI like it\n10 comments here", counter) == (
        "I like it\n10 comments here")
    short = LineModifiers(**{**only, "min_line_words": 2})
    assert apply_line_modifiers("Hello\nhello world\n\nbye now", short) == "hello world\n\nbye now"
    subs = LineModifiers(**{**only, "substrings": (LineSubstring("Sign-in", "prefix", 10),
                                                   LineSubstring("Read more...", "suffix", 10),
                                                   LineSubstring("items in cart", "any", 10))})
    assert apply_line_modifiers("Sign-in to comment\nfirst part Read more...\nRead more...\n3 items in cart",
                                subs) == "to comment\nfirst part\n3"
    # the banlist entries are regexes, as in DCLM: '...' matches any three characters
    assert apply_line_modifiers("keep this\nRead more!!!", subs) == "keep this"
    long_line = "the " * 10 + "items in cart"  # over 10 words: untouched
    assert apply_line_modifiers(long_line, subs) == long_line.strip()
    assert apply_line_modifiers("HELLO\nWORLD", upper) == ""  # emptied: DCLM drops the page
    # each modifier strips the page, so the next one sees "12", not "  12" (2 digits of 4 chars)
    both = LineModifiers(**{**only, "max_uppercase_ratio": 0.5, "max_numeric_ratio": 0.999999})
    assert apply_line_modifiers("  12\nfoo bar", both) == "foo bar"
    assert apply_line_modifiers("  12\nfoo bar", numeric) == "12\nfoo bar"


def test_modifiers_only_feed_the_ratio_the_text_is_not_rewritten():
    page = PROSE + "\nBUY NOW\n12345\n3 likes\nSign-in"
    table = pa.table({"text": [page]})
    op = make_op()
    stats = op.compute_stats(table)
    # removed: BUY NOW (2), 12345 (1), 3 likes (2), Sign-in (1) = 6 of 95 + 6 words
    assert stats["gopher_word_count"] == [101]
    assert stats["word_removal_ratio"] == [6 / 101]
    assert op.drop_reasons(stats) == ["word_removal_ratio > max"]
    assert table.column("text").to_pylist() == [page]
