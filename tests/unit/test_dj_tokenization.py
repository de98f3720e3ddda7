"""Data-Juicer's `tokenization: true`, with models found locally (never downloaded).

The word filters (words_num, word_repetition, flagged_words, stopwords) and
remove_words_with_incorrect_substrings_mapper split words into the pieces of `{lang}.sp.model`;
alphanumeric_filter counts tokens of the EleutherAI/pythia-6.9b-deduped tokenizer
(`alpha_token_ratio`).  Data-Juicer's own models cannot be downloaded here, so these tests train
a sentencepiece model and a BPE tokenizer on this repository's README and put them where
Data-Juicer's names are looked up; the hand cases use a word-level model, whose pieces are the
whitespace words with sentencepiece's `▁` in front (which Data-Juicer does not strip)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from pydantic import ValidationError

from raypress.operators.text.alphanumeric_filter import AlphanumericFilter, AlphanumericParams
from raypress.operators.text.flagged_words_filter import FlaggedWordsFilter
from raypress.operators.text.models import locate
from raypress.operators.text.models.sentencepiece import load_sentencepiece
from raypress.operators.text.remove_words_with_incorrect_substrings_mapper import (
    RemoveWordsWithIncorrectSubstringsMapper,
)
from raypress.operators.text.stopwords_filter import StopwordsFilter
from raypress.operators.text.word_repetition_filter import WordRepetitionFilter
from raypress.operators.text.words.vocabulary import SPECIAL_CHARACTERS, strip
from raypress.operators.text.words_num_filter import WordsNumFilter

spm = pytest.importorskip("sentencepiece")
tokenizers = pytest.importorskip("tokenizers")

README = Path(__file__).resolve().parents[2] / "README.md"
WORD_LINES = ["hello world this is a test", "the cat sat on the mat", "hello again world"] * 20


def readme_lines() -> list[str]:
    return [line for line in README.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> Path:
    """Data-Juicer's layout: en.sp.model (unigram, trained on the README), xx.sp.model (word
    level) and EleutherAI/pythia-6.9b-deduped/tokenizer.json (a BPE trained on the README)."""
    d = tmp_path_factory.mktemp("dj_models")
    spm.SentencePieceTrainer.train(sentence_iterator=iter(readme_lines()), model_prefix=str(d / "en.sp"),
                                   vocab_size=400, model_type="unigram", minloglevel=2)
    spm.SentencePieceTrainer.train(sentence_iterator=iter(WORD_LINES), model_prefix=str(d / "xx.sp"),
                                   vocab_size=15, model_type="word", minloglevel=2)
    from tokenizers import Tokenizer, models as tmodels, pre_tokenizers, trainers

    bpe = Tokenizer(tmodels.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.train_from_iterator(readme_lines(), trainers.BpeTrainer(vocab_size=500, show_progress=False))
    target = d / "EleutherAI" / "pythia-6.9b-deduped"
    target.mkdir(parents=True)
    bpe.save(str(target / "tokenizer.json"))
    return d


@pytest.fixture
def in_models(models, monkeypatch) -> Path:
    monkeypatch.setenv(locate.MODELS_ENV, str(models))
    monkeypatch.delenv("DATA_JUICER_MODELS_CACHE", raising=False)
    return models


def stat(op, texts: list[str]) -> list:
    return op.compute_stats(pa.table({"text": texts}))[op.stat]


def refined_pieces(sp, text: str, lower: bool) -> list[str]:
    """Data-Juicer's words with tokenization: encode_as_pieces, lower-cased, stripped, empties dropped."""
    pieces = [p.lower() if lower else p for p in sp.encode_as_pieces(text)]
    return [w for w in (strip(p, SPECIAL_CHARACTERS) for p in pieces) if w]


TEXTS = [
    "Hello, world!! 42",
    "raypress runs Data-Juicer recipes unchanged: every global key is understood.",
    "",
    "the the the the the the the the the the the the the the the the the the the the the the",
]


def test_words_num_counts_sentencepiece_pieces(in_models):
    op = WordsNumFilter(WordsNumFilter.Params(tokenization=True, lang="xx", min_num=0))
    # Word pieces "▁hello" "▁world" "▁###" "▁test": "▁###" is stripped to "▁" ("#" is a special
    # character, "▁" is not) and stays, so 4 words where the whitespace path finds 3.
    assert stat(op, ["hello world ### test"]) == [4]
    assert stat(WordsNumFilter(WordsNumFilter.Params(min_num=0)), ["hello world ### test"]) == [3]
    sp = load_sentencepiece(str(in_models / "en.sp.model"))
    op = WordsNumFilter(WordsNumFilter.Params(tokenization=True, min_num=0))
    assert stat(op, TEXTS) == [len(refined_pieces(sp, t, lower=False)) for t in TEXTS]
    assert stat(op, [TEXTS[1]])[0] > len(TEXTS[1].split())  # sub-word pieces: more than the words


def test_word_repetition_and_word_lists_use_lower_cased_pieces(in_models):
    sp = load_sentencepiece(str(in_models / "en.sp.model"))
    rep = WordRepetitionFilter(WordRepetitionFilter.Params(tokenization=True, rep_len=3))
    words = refined_pieces(sp, TEXTS[3], lower=True)
    assert stat(rep, TEXTS[2:]) == [0.0, 1.0] and len(words) >= 22
    # Pieces keep "▁", so a listed word matches only a piece without it (Data-Juicer's behaviour):
    # word-level pieces of a text of stopwords match nothing.
    word_model = str(in_models / "xx.sp.model")
    stop = StopwordsFilter(StopwordsFilter.Params(tokenization=True, sp_model_path=word_model, min_ratio=0.0))
    stop.words = {"the", "on", "cat"}
    assert stat(stop, ["the cat sat on the mat"]) == [0.0]
    stop.words = {"▁the", "▁on"}
    assert stat(stop, ["the cat sat on the mat"]) == [pytest.approx(3 / 6)]
    flagged = FlaggedWordsFilter(FlaggedWordsFilter.Params(tokenization=True, sp_model_path=word_model))
    flagged.words = {"▁mat"}
    assert stat(flagged, ["the cat sat on the MAT", ""]) == [pytest.approx(1 / 6), 0.0]


def test_remove_words_with_incorrect_substrings_tests_pieces_and_keeps_spaces(in_models):
    op = RemoveWordsWithIncorrectSubstringsMapper(RemoveWordsWithIncorrectSubstringsMapper.Params(
        tokenization=True, lang="xx", substrings=["cat", "wor"]))
    assert op.process_text("hello world the cat sat") == "hello the sat"
    assert op.process_text("hello again") == "hello again"  # nothing removed: the text as it was


def test_alphanumeric_tokenization_is_alpha_per_pythia_token(in_models):
    op = AlphanumericFilter(AlphanumericParams(tokenization=True, min_ratio=1.5))
    assert op.stat == "alpha_token_ratio" and op.stat_names == ("alpha_token_ratio",)
    tok = tokenizers.Tokenizer.from_file(str(in_models / "EleutherAI" / "pythia-6.9b-deduped" / "tokenizer.json"))
    texts = ["raypress runs recipes", "12345 !!!", ""]
    expected = []
    for t in texts:
        n = len(tok.encode(t, add_special_tokens=False).tokens)
        expected.append(sum(c.isalpha() for c in t) / n if n else 0.0)
    stats = op.compute_stats(pa.table({"text": texts}))
    assert stats == {"alpha_token_ratio": expected} and expected[1] == 0.0
    assert op.drop_reasons(stats) == [None if v >= 1.5 else "alpha_token_ratio < min" for v in expected]
    assert AlphanumericFilter(AlphanumericParams()).stat == "alnum_ratio"  # the class is untouched


def test_pythia_tokenizer_is_found_in_the_hugging_face_cache(models, tmp_path, monkeypatch):
    monkeypatch.setenv(locate.MODELS_ENV, str(tmp_path / "nothing"))
    monkeypatch.setenv("DATA_JUICER_CACHE_HOME", str(tmp_path / "nothing"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    repo = tmp_path / "hub" / "models--EleutherAI--pythia-6.9b-deduped"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("abc123")
    (repo / "snapshots" / "abc123").mkdir(parents=True)
    source = models / "EleutherAI" / "pythia-6.9b-deduped" / "tokenizer.json"
    (repo / "snapshots" / "abc123" / "tokenizer.json").write_bytes(source.read_bytes())
    assert locate.hf_tokenizer_file(locate.PYTHIA_TOKENIZER, "op") == repo / "snapshots" / "abc123" / "tokenizer.json"
    assert AlphanumericParams(tokenization=True).missing_model_files("alphanumeric_filter") is None


def test_missing_models_say_how_to_provide_them(tmp_path, monkeypatch):
    for var, value in ((locate.MODELS_ENV, "nothing"), ("DATA_JUICER_CACHE_HOME", "nothing"), ("HF_HUB_CACHE", "hub")):
        monkeypatch.setenv(var, str(tmp_path / value))
    monkeypatch.delenv("DATA_JUICER_MODELS_CACHE", raising=False)
    params = WordsNumFilter.Params(tokenization=True, lang="fr")
    why = params.missing_model_files("words_num_filter")
    for needed in ("fr.sp.model", "`sp_model_path`", "$RAYPRESS_DJ_MODELS", str(tmp_path / "nothing"), "does not download"):
        assert needed in why, needed
    with pytest.raises(FileNotFoundError, match="fr.sp.model"):
        WordsNumFilter(params)
    assert WordsNumFilter.Params().missing_model_files("words_num_filter") is None  # whitespace needs nothing
    why = AlphanumericParams(tokenization=True).missing_model_files("alphanumeric_filter")
    assert "EleutherAI/pythia-6.9b-deduped" in why and "huggingface-cli download" in why
    with pytest.raises(ValidationError, match="is not a file"):
        WordsNumFilter.Params(tokenization=True, sp_model_path=str(tmp_path / "no.model"))


def test_an_explicit_sp_model_path_wins(models, tmp_path, monkeypatch):
    monkeypatch.setenv(locate.MODELS_ENV, str(tmp_path / "nothing"))
    op = WordsNumFilter(WordsNumFilter.Params(tokenization=True, sp_model_path=str(models / "xx.sp.model"),
                                              min_num=0))
    assert stat(op, ["hello world ### test"]) == [4]
