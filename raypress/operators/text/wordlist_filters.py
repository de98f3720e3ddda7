"""stopwords_filter, flagged_words_filter (Data-Juicer): the share of words found in a word list.

Words are lower-cased and stripped of special characters (words.refined_words); with
``use_words_aug`` the joined n-grams of words are appended to them first, so the ratio counts
both in numerator and denominator, as Data-Juicer does for Chinese and Vietnamese."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from pydantic import Field, PositiveInt

from raypress.operators.registry import register
from raypress.operators.text.batch import CodepointBatch
from raypress.operators.text.common import RangeTextFilter, TokenizedParams
from raypress.operators.text.wordlists import words_for_lang
from raypress.operators.text.words import refined_words


class WordListParams(TokenizedParams):
    lang: str = Field(default="en", description="which list to use: a language code, or 'all' for every list merged")
    use_words_aug: bool = Field(
        default=False, description="also match joined runs of consecutive words (for zh, vi)"
    )
    words_aug_group_sizes: list[PositiveInt] = Field(
        default=[2], description="how many consecutive words each augmented word joins"
    )
    words_aug_join_char: str = Field(default="", description="string put between joined words")


class StopwordsParams(WordListParams):
    min_ratio: float = Field(default=0.3, description="keep samples whose stop-word ratio is >= min_ratio")
    max_ratio: float = Field(default=1.0, description="keep samples whose stop-word ratio is <= max_ratio")
    stopwords_dir: str | None = Field(
        default=None,
        description="directory of *stopwords*.json files ({lang: [words]}); None: the lists shipped "
        "with raypress (raypress/data/wordlists)",
    )


class FlaggedWordsParams(WordListParams):
    min_ratio: float = Field(default=0.0, description="keep samples whose flagged-word ratio is >= min_ratio")
    max_ratio: float = Field(default=0.045, description="keep samples whose flagged-word ratio is <= max_ratio")
    flagged_words_dir: str | None = Field(
        default=None,
        description="directory of *flagged_words*.json files ({lang: [words]}); None: the lists "
        "shipped with raypress (raypress/data/wordlists)",
    )


class _WordListFilter(RangeTextFilter):
    words_type: ClassVar[str]
    dir_param: ClassVar[str]

    def __init__(self, params: WordListParams, artifacts=None):
        super().__init__(params, artifacts)
        self.words = words_for_lang(getattr(params, self.dir_param), self.words_type, params.lang)

    def stat_value(self, text: str) -> float:
        p = self.params
        words = refined_words(
            text,
            use_words_aug=p.use_words_aug,
            words_aug_group_sizes=p.words_aug_group_sizes,
            words_aug_join_char=p.words_aug_join_char,
        )
        if not words:
            return 0.0
        listed = self.words
        return min(1.0, sum(1 for w in words if w in listed) / len(words))

    def batch_values(self, texts: list[str | None]) -> list[float]:
        if self.params.use_words_aug:  # augmented words are joined per row: row by row
            return super().batch_values(texts)
        batch = CodepointBatch.of([t.lower() if t else "" for t in texts])
        words, counts = batch.words()
        listed = self.words
        found = np.fromiter((w in listed for w in words), dtype=bool, count=len(words))
        rows = np.repeat(np.arange(len(batch)), counts)
        hits = np.bincount(rows, weights=found, minlength=len(batch))
        ratios = np.where(counts > 0, hits / np.maximum(counts, 1), 0.0)
        return np.minimum(ratios, 1.0).tolist()


@register("stopwords_filter")
class StopwordsFilter(_WordListFilter):
    """Keep samples whose share of stop words is within [min_ratio, max_ratio] (too few: not prose)."""

    Params = StopwordsParams
    stat = "stopwords_ratio"
    words_type = "stopwords"
    dir_param = "stopwords_dir"


@register("flagged_words_filter")
class FlaggedWordsFilter(_WordListFilter):
    """Keep samples whose share of flagged (obscene) words is within [min_ratio, max_ratio]."""

    Params = FlaggedWordsParams
    stat = "flagged_words_ratio"
    words_type = "flagged_words"
    dir_param = "flagged_words_dir"
