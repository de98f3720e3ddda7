"""Data-Juicer-compatible text filters: stats computed by hand, closed intervals, reasons, word lists."""

from __future__ import annotations

import json
import math
import random
import sys
from collections import Counter

import pyarrow as pa
import pytest
from pydantic import ValidationError

from raypress.operators.base import OpKind
from raypress.operators.registry import get_op
from raypress.operators.text.alphanumeric_filter import AlphanumericFilter
from raypress.operators.text.average_line_length_filter import AverageLineLengthFilter
from raypress.operators.text.character_repetition_filter import CharacterRepetitionFilter
from raypress.operators.text.flagged_words_filter import FlaggedWordsFilter
from raypress.operators.text.maximum_line_length_filter import MaximumLineLengthFilter
from raypress.operators.text.special_characters_filter import SpecialCharactersFilter
from raypress.operators.text.stopwords_filter import StopwordsFilter
from raypress.operators.text.text_length_filter import TextLengthFilter
from raypress.operators.text.word_repetition_filter import WordRepetitionFilter
from raypress.operators.text.words.lists import SHIPPED_DIR, load_words_asset
from raypress.operators.text.words.vocabulary import SPECIAL_CHARACTERS, refined_words, split_on_whitespace, strip
from raypress.operators.text.words_num_filter import WordsNumFilter

FILTERS = {
    "text_length_filter": (TextLengthFilter, "text_len"),
    "words_num_filter": (WordsNumFilter, "num_words"),
    "alphanumeric_filter": (AlphanumericFilter, "alnum_ratio"),
    "character_repetition_filter": (CharacterRepetitionFilter, "char_rep_ratio"),
    "word_repetition_filter": (WordRepetitionFilter, "word_rep_ratio"),
    "special_characters_filter": (SpecialCharactersFilter, "special_char_ratio"),
    "maximum_line_length_filter": (MaximumLineLengthFilter, "max_line_length"),
    "average_line_length_filter": (AverageLineLengthFilter, "avg_line_length"),
    "stopwords_filter": (StopwordsFilter, "stopwords_ratio"),
    "flagged_words_filter": (FlaggedWordsFilter, "flagged_words_ratio"),
}


def stats_and_reasons(cls, texts, **params):
    """Run a filter the way the runner does: compute_stats on a batch, then drop_reasons."""
    op = cls(cls.Params(**params))
    stats = op.compute_stats(pa.table({"text": pa.array(texts, pa.string())}))
    assert list(stats) == list(op.stat_names)
    return list(stats[op.stat_names[0]]), op.drop_reasons(stats)


def stat(cls, text, **params):
    return stats_and_reasons(cls, [text], **params)[0][0]


# -- registry and params -----------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(FILTERS))
def test_registered_as_filter_with_data_juicer_stat_key(name):
    cls, key = FILTERS[name]
    assert get_op(name) is cls
    assert cls.name == name and cls.kind is OpKind.FILTER
    assert cls.stat_names == (key,)
    op = cls(cls.Params())
    assert op.columns_read() == ("text",) and op.columns_written() == ("stats",)


def test_data_juicer_defaults():
    assert (TextLengthFilter.Params().min_len, TextLengthFilter.Params().max_len) == (10, sys.maxsize)
    assert (WordsNumFilter.Params().min_num, WordsNumFilter.Params().max_num) == (10, sys.maxsize)
    p = AlphanumericFilter.Params()
    assert (p.tokenization, p.min_ratio, p.max_ratio) == (False, 0.25, sys.maxsize)
    p = CharacterRepetitionFilter.Params()
    assert (p.rep_len, p.min_ratio, p.max_ratio) == (10, 0.0, 0.5)
    p = WordRepetitionFilter.Params()
    assert (p.lang, p.tokenization, p.rep_len, p.min_ratio, p.max_ratio) == ("en", False, 10, 0.0, 0.5)
    assert (SpecialCharactersFilter.Params().min_ratio, SpecialCharactersFilter.Params().max_ratio) == (0.0, 0.25)
    for cls in (MaximumLineLengthFilter, AverageLineLengthFilter):
        assert (cls.Params().min_len, cls.Params().max_len) == (10, sys.maxsize)
    p = StopwordsFilter.Params()
    assert (p.lang, p.min_ratio, p.max_ratio, p.stopwords_dir) == ("en", 0.3, 1.0, None)
    assert (p.use_words_aug, p.words_aug_group_sizes, p.words_aug_join_char) == (False, [2], "")
    p = FlaggedWordsFilter.Params()
    assert (p.lang, p.min_ratio, p.max_ratio, p.flagged_words_dir) == ("en", 0.0, 0.045, None)


@pytest.mark.parametrize(
    "cls", [WordsNumFilter, WordRepetitionFilter, StopwordsFilter, FlaggedWordsFilter, AlphanumericFilter]
)
def test_tokenization_true_is_never_ignored(cls, tmp_path, monkeypatch):
    """Without its model the op does not fall back to whitespace words: it refuses to start and
    names the file (test_dj_tokenization.py runs it with models)."""
    for var in ("RAYPRESS_DJ_MODELS", "DATA_JUICER_CACHE_HOME", "HF_HUB_CACHE"):
        monkeypatch.setenv(var, str(tmp_path))
    monkeypatch.delenv("DATA_JUICER_MODELS_CACHE", raising=False)
    params = cls.Params(tokenization=True)
    assert "tokenization=True" in params.missing_model_files(cls.name)
    with pytest.raises(FileNotFoundError, match="does not download"):
        cls(params)


def test_params_are_validated():
    with pytest.raises(ValidationError):
        CharacterRepetitionFilter.Params(rep_len=0)
    with pytest.raises(ValidationError):
        StopwordsFilter.Params(words_aug_group_sizes=[0])
    with pytest.raises(ValidationError):
        TextLengthFilter.Params(min_length=3)  # Data-Juicer calls it min_len


# -- the closed interval and the reasons --------------------------------------------------------


def test_text_length_closed_interval_and_stable_reasons():
    texts = ["a" * 9, "a" * 10, "a" * 12, "a" * 13, "", None, "日本語テキスト😀あい"]
    values, reasons = stats_and_reasons(TextLengthFilter, texts, min_len=10, max_len=12)
    assert values == [9, 10, 12, 13, 0, 0, 10]  # code points; None counts as ""
    assert reasons == ["text_len < min", None, None, "text_len > max", "text_len < min", "text_len < min", None]


@pytest.mark.parametrize("name", sorted(FILTERS))
def test_reason_strings_are_categories_without_row_values(name):
    cls, key = FILTERS[name]
    op = cls(cls.Params())
    lo, hi = getattr(op.params, op.min_param), getattr(op.params, op.max_param)
    reasons = op.drop_reasons({key: [lo, hi, lo - 1, hi + 1]})
    assert reasons == [None, None, f"{key} < min", f"{key} > max"]
    assert op.reject({key: lo - 1}) == f"{key} < min"


# -- words --------------------------------------------------------------------------------------


def test_word_splitting_follows_data_juicer():
    # Only ' ', '\n' and '\t' separate words; '\r' and no-break spaces do not.
    assert split_on_whitespace("a  b\nc\td\re\u00a0f") == ["a", "b", "c", "d\re\u00a0f"]
    # Special characters (punctuation, digits, whitespace, symbols, emoji) are stripped at the ends only.
    assert strip("¿¡Hello, wo-rld!!😀", SPECIAL_CHARACTERS) == "Hello, wo-rld"
    assert refined_words("The QUICK, brown-fox! 123 -- 😀 ok") == ["the", "quick", "brown-fox", "ok"]
    assert refined_words("A b", lower_case=False) == ["A", "b"]
    assert refined_words("a b c", use_words_aug=True, words_aug_group_sizes=[2, 3], words_aug_join_char="_") == [
        "a", "b", "c", "a_b", "b_c", "a_b_c",
    ]


def test_words_num():
    texts = ["Hello, world! -- 123 foo", "a\tb\nc", "a\rb", "😀 hi", "", "...", "x \u0413 \u0433"]
    values, reasons = stats_and_reasons(WordsNumFilter, texts, min_num=3, max_num=3)
    # "--" and "123" are all special characters: stripped to nothing, not words.  Cyrillic capital
    # Ghe (U+0413) is in Data-Juicer's special list and is not lower-cased here; U+0433 is a word.
    assert values == [3, 3, 1, 1, 0, 0, 2]
    assert reasons == [None, None, "num_words < min", "num_words < min", "num_words < min", "num_words < min",
                       "num_words < min"]
    assert stats_and_reasons(WordsNumFilter, ["a b c d"], min_num=1, max_num=3)[1] == ["num_words > max"]


def test_word_repetition():
    rep2 = dict(rep_len=2)
    # bigrams: the cat x2, cat the x2, the dog x1 -> repeated occurrences 4 of 5
    assert stat(WordRepetitionFilter, "the cat the cat the dog", **rep2) == pytest.approx(0.8)
    # lower-cased before counting: the cat, cat the, the cat -> 2 of 3
    assert stat(WordRepetitionFilter, "The cat, the CAT", **rep2) == pytest.approx(2 / 3)
    # punctuation stripped: cat, cat -> one unigram twice
    assert stat(WordRepetitionFilter, "cat. cat!", rep_len=1) == 1.0
    assert stat(WordRepetitionFilter, "one two", rep_len=3) == 0.0  # fewer words than rep_len
    assert stat(WordRepetitionFilter, "", rep_len=1) == 0.0
    values, reasons = stats_and_reasons(
        WordRepetitionFilter, ["the cat the cat the dog", "a b a b", "a a a", "a b c"], rep_len=2,
        min_ratio=0.1, max_ratio=0.8,
    )
    assert values == [pytest.approx(0.8), pytest.approx(2 / 3), 1.0, 0.0]  # "a b" x2, "b a" x1: 2 of 3
    assert reasons == [None, None, "word_rep_ratio > max", "word_rep_ratio < min"]


# -- characters ---------------------------------------------------------------------------------


def test_alphanumeric_ratio():
    values, reasons = stats_and_reasons(AlphanumericFilter, ["ab1!", "é日_", "", "!!!!", "x"], max_ratio=0.75)
    assert values == [0.75, 2 / 3, 0.0, 0.0, 1.0]  # str.isalnum: é and 日 are, '_' is not
    assert reasons == [None, None, "alnum_ratio < min", "alnum_ratio < min", "alnum_ratio > max"]
    assert stats_and_reasons(AlphanumericFilter, ["ab1!"], min_ratio=0.75)[1] == [None]  # min is inclusive


def test_special_characters_ratio():
    values, reasons = stats_and_reasons(
        SpecialCharactersFilter, ["ab, 1😀", "日本", "a\u3000b\u2003", "", "abc!"], max_ratio=0.25
    )
    # ',', ' ', '1' and the emoji of 6 characters; Unicode spaces are special too.
    assert values == [4 / 6, 0.0, 0.5, 0.0, 0.25]
    assert reasons == ["special_char_ratio > max", None, "special_char_ratio > max", None, None]


def naive_char_rep(text: str, n: int) -> float:
    """Data-Juicer's computation, spelled out as it is there."""
    grams = [text[i : i + n] for i in range(len(text) - n + 1)]
    freq = sorted(Counter(grams).values(), reverse=True)
    if not freq:
        return 0.0
    k = min(int(math.sqrt(len(freq))), len(freq) - len([f for f in freq if f == 1]))
    return sum(freq[:k]) / sum(freq)


def test_character_repetition():
    assert stat(CharacterRepetitionFilter, "aaaa", rep_len=2) == 1.0  # aa x3: k = 1 -> 3/3
    assert stat(CharacterRepetitionFilter, "abab", rep_len=2) == pytest.approx(2 / 3)  # ab x2, ba x1
    assert stat(CharacterRepetitionFilter, "abcd", rep_len=2) == 0.0  # nothing repeats: k = 0
    # four letters twice each: 4 distinct, k = min(isqrt(4), 4) = 2 -> (2 + 2) / 8
    assert stat(CharacterRepetitionFilter, "aabbccdd", rep_len=1) == 0.5
    assert stat(CharacterRepetitionFilter, "short", rep_len=10) == 0.0
    assert stat(CharacterRepetitionFilter, "😀😀😀 😀😀😀", rep_len=3) == naive_char_rep("😀😀😀 😀😀😀", 3)
    values, reasons = stats_and_reasons(CharacterRepetitionFilter, ["aabbccdd", "aaaa", "abcd"], rep_len=1)
    assert values == [0.5, 1.0, 0.0]
    assert reasons == [None, "char_rep_ratio > max", None]  # 0.5 == max_ratio is kept


def test_character_repetition_matches_data_juicer_on_random_text():
    rng = random.Random(3)
    texts = ["".join(rng.choice("ab \n日😀") for _ in range(rng.randrange(0, 60))) for _ in range(300)]
    for n in (1, 2, 5, 10):
        values, _ = stats_and_reasons(CharacterRepetitionFilter, texts, rep_len=n)
        assert values == [naive_char_rep(t, n) for t in texts]


# -- lines --------------------------------------------------------------------------------------


def test_line_lengths():
    texts = ["ab\ncde\n\nf", "ab\r\ncdef", "abc", "", "x\u2028yz"]
    values, _ = stats_and_reasons(MaximumLineLengthFilter, texts)
    assert values == [3, 4, 3, 0, 2]
    values, reasons = stats_and_reasons(AverageLineLengthFilter, texts, min_len=3, max_len=4)
    # len(text) / number of lines: line breaks count in the length
    assert values == [9 / 4, 8 / 2, 3.0, 0.0, 4 / 2]
    assert reasons == ["avg_line_length < min", None, None, "avg_line_length < min", "avg_line_length < min"]
    assert stats_and_reasons(MaximumLineLengthFilter, ["abcde\nab"], min_len=5, max_len=5)[1] == [None]


# -- word lists ---------------------------------------------------------------------------------


@pytest.fixture()
def words_dir(tmp_path):
    (tmp_path / "stopwords.json").write_text(json.dumps({"en": ["the", "a", "is"], "fr": ["le"], "zh": ["你好"]}))
    (tmp_path / "more_stopwords.json").write_text(json.dumps({"en": ["of"]}))  # merged per language
    (tmp_path / "flagged_words.json").write_text(json.dumps({"en": ["damn"]}))
    (tmp_path / "notes.txt").write_text("ignored: not json")
    return str(tmp_path)


def test_stopwords_ratio(words_dir):
    text = "The cat is on the mat of a rug."  # the, is, the, of, a of 9 words
    assert stat(StopwordsFilter, text, stopwords_dir=words_dir) == pytest.approx(5 / 9)
    assert stat(StopwordsFilter, text, stopwords_dir=words_dir, lang="fr") == 0.0
    assert stat(StopwordsFilter, "le chat", stopwords_dir=words_dir, lang="all") == 0.5
    values, reasons = stats_and_reasons(
        StopwordsFilter, ["the cat", "cat dog", "", "the a"], stopwords_dir=words_dir, min_ratio=0.5, max_ratio=0.9
    )
    assert values == [0.5, 0.0, 0.0, 1.0]
    assert reasons == [None, "stopwords_ratio < min", "stopwords_ratio < min", "stopwords_ratio > max"]


def test_stopwords_words_augmentation(words_dir):
    # 你 好 世 界 + augmented 你好, 好世, 世界: one hit of seven words
    ratio = stat(StopwordsFilter, "你 好 世 界", stopwords_dir=words_dir, lang="zh", use_words_aug=True)
    assert ratio == pytest.approx(1 / 7)
    assert stat(StopwordsFilter, "你 好 世 界", stopwords_dir=words_dir, lang="zh") == 0.0


def test_flagged_words_ratio(words_dir):
    values, reasons = stats_and_reasons(FlaggedWordsFilter, ["Damn, damn it", "fine words"], flagged_words_dir=words_dir)
    assert values == [pytest.approx(2 / 3), 0.0]
    assert reasons == ["flagged_words_ratio > max", None]


def test_unknown_language_and_missing_lists_fail_at_construction(words_dir, tmp_path):
    with pytest.raises(ValueError, match="lang='de'"):
        StopwordsFilter(StopwordsFilter.Params(stopwords_dir=words_dir, lang="de"))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match="does not download"):
        FlaggedWordsFilter(FlaggedWordsFilter.Params(flagged_words_dir=str(empty)))


def test_shipped_lists_are_used_by_default_and_the_larger_ones_by_name():
    assert (SHIPPED_DIR / "stopwords.json").is_file() and (SHIPPED_DIR / "flagged_words.json").is_file()
    lists = load_words_asset(None, "stopwords")
    assert {"the", "is", "of"} <= lists["en"] and "all" in lists
    assert len(lists["en"]) == 301 and len(load_words_asset(None, "flagged_words")["en"]) == 68  # Data-Juicer's
    assert len(load_words_asset("stop-words", "stopwords")["en"]) == 1333
    assert len(load_words_asset("better-profanity", "flagged_words")["en"]) == 916
    assert stat(StopwordsFilter, "the cat") == 0.5
    assert stat(FlaggedWordsFilter, "well bdsm happens") == pytest.approx(1 / 3)
    assert stat(FlaggedWordsFilter, "well shit happens") == 0  # not in BigScience's list ...
    assert stat(FlaggedWordsFilter, "well shit happens", flagged_words_dir="better-profanity") == pytest.approx(1 / 3)


def test_shared_wordlists_dir_is_honoured(shared_data):
    directory = shared_data / "wordlists"
    stop = json.loads((directory / "stopwords.json").read_text())["en"]
    flagged = json.loads((directory / "flagged_words.json").read_text())["en"]
    # "able", "million" and "hi" are stop words in the stop-words package's list, not in BigScience's
    # (the shared folder's, Data-Juicer's default and raypress's)
    text = "I am able to say hi to a million of the people"
    words = refined_words(text)
    expected = sum(w in stop for w in words) / len(words)
    assert stat(StopwordsFilter, text, stopwords_dir=str(directory)) == pytest.approx(expected)
    assert stat(StopwordsFilter, text, stopwords_dir=str(directory)) == stat(StopwordsFilter, text)
    assert stat(StopwordsFilter, text, stopwords_dir="stop-words") > stat(StopwordsFilter, text)
    word = flagged[0]
    assert stat(FlaggedWordsFilter, f"{word} and more", flagged_words_dir=str(directory)) == pytest.approx(1 / 3)


# -- the batch (numpy) paths agree with the per-row reference -----------------------------------

TRICKY = ["the", "The", "and", "Damn,", "shit!", "a", "b", "ab", "é", "Г", "г", "İ", "Σ", "ς", "😀", "👍🏽", "日本",
          "1", "_", "--", "\u00a0", "\u3000", "\r", "\x0b", "x\u200by"]


def random_texts(seed: int, count: int = 400) -> list[str | None]:
    rng = random.Random(seed)
    seps = [" ", " ", "\n", "\t", "  ", ""]
    texts: list[str | None] = [
        "".join(rng.choice(TRICKY) + rng.choice(seps) for _ in range(rng.randrange(0, 30))) for _ in range(count)
    ]
    return texts + [None, "", " ", "\n\t"]


@pytest.mark.parametrize(
    "cls,params",
    [
        (AlphanumericFilter, {}),
        (SpecialCharactersFilter, {}),
        (WordsNumFilter, {}),
        (WordRepetitionFilter, {"rep_len": 2}),
        (WordRepetitionFilter, {}),
        (StopwordsFilter, {}),
        (FlaggedWordsFilter, {}),
        (StopwordsFilter, {"use_words_aug": True, "words_aug_join_char": " "}),
        (TextLengthFilter, {}),
    ],
)
def test_batch_stats_equal_row_by_row_stats(cls, params):
    texts = random_texts(seed=len(params) + len(cls.name))
    op = cls(cls.Params(**params))
    batch = op.compute_stats(pa.table({"text": pa.array(texts, pa.string())}))[op.stat]
    row_by_row = [op.text_stats(t if t is not None else "")[op.stat] for t in texts]
    assert list(batch) == row_by_row


def test_special_characters_are_data_juicers_own_set():
    """Data-Juicer's list holds C1 controls, a soft hyphen, a zero-width space and a BOM, and only
    some Unicode spaces: NBSP is a word character there, so it is one here (c07c2d7)."""
    from raypress.operators.text.words.batch import special_lut
    from raypress.operators.text.words.vocabulary import SPECIAL_CHARACTERS

    for c in "\u200b\ufeff\u00ad\u0081\u0085\u0092\u2009\u3000":
        assert c in SPECIAL_CHARACTERS and special_lut()[ord(c)], repr(c)
    for c in "\u00a0\u1680\u2000\u2001\u205fa":
        assert c not in SPECIAL_CHARACTERS and not special_lut()[ord(c)], repr(c)
