"""The share of words found in a word list: what stopwords_filter and flagged_words_filter compute.

Words (split on whitespace, or with ``tokenization`` into the pieces of Data-Juicer's sentencepiece
model) are lower-cased and stripped of special characters (words.refined_words); with
``use_words_aug`` the joined n-grams of words are appended to them first, so the ratio counts
both in numerator and denominator, as Data-Juicer does for Chinese and Vietnamese.  Each op
only names its list, its stat and the param holding the list's directory.

The default path (whitespace words, no augmentation) counts a whole batch in one numba pass
(``kernels.wordlist_hits``: an exact lookup of each word's code points in a table of the list,
built once per list and process); the other paths, and installs without numba, go row by row
or through Python sets and give the same ratios."""

from __future__ import annotations

from functools import lru_cache
from typing import ClassVar, TypeVar

import numpy as np
from pydantic import Field, PositiveInt

from raypress.kernels import wordlist_hits
from raypress.operators.text.templates.range_filter import RangeTextFilter
from raypress.operators.text.templates.tokenized_params import TokenizedParams
from raypress.operators.text.words.batch import CodepointBatch, special_lut
from raypress.operators.text.words.lists import words_for_lang
from raypress.operators.text.words.vocabulary import refined_words


class WordListParams(TokenizedParams):
    lang: str = Field(default="en", description="which list to use: a language code, or 'all' for every list merged")
    use_words_aug: bool = Field(
        default=False, description="also match joined runs of consecutive words (for zh, vi)"
    )
    words_aug_group_sizes: list[PositiveInt] = Field(
        default=[2], description="how many consecutive words each augmented word joins"
    )
    words_aug_join_char: str = Field(default="", description="string put between joined words")


WLP = TypeVar("WLP", bound=WordListParams)


class WordListRatioFilter(RangeTextFilter[WLP]):
    """Keep samples whose share of words in the op's word list is within [min_ratio, max_ratio]."""

    words_type: ClassVar[str]
    dir_param: ClassVar[str]

    def __init__(self, params: WLP, artifacts=None):
        super().__init__(params, artifacts)
        self.words = words_for_lang(getattr(params, self.dir_param), self.words_type, params.lang)
        self.split = params.word_splitter(self.name)

    def stat_value(self, text: str) -> float:
        p = self.params
        words = refined_words(
            text,
            use_words_aug=p.use_words_aug,
            words_aug_group_sizes=p.words_aug_group_sizes,
            words_aug_join_char=p.words_aug_join_char,
            split=self.split,
        )
        if not words:
            return 0.0
        listed = self.words
        return min(1.0, sum(1 for w in words if w in listed) / len(words))

    def batch_values(self, texts: list[str | None]) -> list[float]:
        if self.params.use_words_aug or self.split is not None:  # joined or tokenised per row: row by row
            return super().batch_values(texts)
        batch = CodepointBatch.of([t.lower() if t else "" for t in texts])
        if wordlist_hits.available():
            counts, hits = wordlist_hits.hits_per_row(batch.cps, batch.starts, batch.lengths, special_lut(),
                                                      _table(self.words))
            ratios = np.where(counts > 0, hits / np.maximum(counts, 1), 0.0)
            return np.minimum(ratios, 1.0).tolist()
        words, counts = batch.words()
        listed = self.words
        found = np.fromiter((w in listed for w in words), dtype=bool, count=len(words))
        rows = np.repeat(np.arange(len(batch)), counts)
        hits = np.bincount(rows, weights=found, minlength=len(batch))
        ratios = np.where(counts > 0, hits / np.maximum(counts, 1), 0.0)
        return np.minimum(ratios, 1.0).tolist()


@lru_cache(maxsize=16)
def _table(words: frozenset[str]) -> wordlist_hits.WordTable:
    """The kernel's table of a list, once per list and process (lists are cached frozensets)."""
    return wordlist_hits.WordTable.of(words)
