"""word_repetition_filter (Data-Juicer): how much of a text is repeated word n-grams.

Words are split on ' ', '\\n', '\\t' (with ``tokenization``: into the pieces of Data-Juicer's
sentencepiece model), lower-cased and stripped of special characters (words.refined_words)."""

from __future__ import annotations

from collections import Counter

import numpy as np
from pydantic import Field, PositiveInt

from raypress.kernels import text_ngrams
from raypress.operators.registry import register
from raypress.operators.text.templates.range_filter import RangeTextFilter
from raypress.operators.text.templates.tokenized_params import TokenizedParams
from raypress.operators.text.words.batch import CodepointBatch
from raypress.operators.text.words.vocabulary import refined_words


class WordRepetitionParams(TokenizedParams):
    rep_len: PositiveInt = Field(default=10, description="length of the word n-grams")
    min_ratio: float = Field(default=0.0, description="keep samples whose ratio is >= min_ratio")
    max_ratio: float = Field(default=0.5, description="keep samples whose ratio is <= max_ratio")


@register("word_repetition_filter", requires_when={"tokenization": {"sentencepiece": "text"}})
class WordRepetitionFilter(RangeTextFilter[WordRepetitionParams]):
    """Keep samples whose word n-gram repetition ratio is within [min_ratio, max_ratio].

    Ratio = occurrences of the n-grams (of lower-cased words) that occur more than once / all n-grams.

    A batch's words are found and given ids in numba loops (``CodepointBatch.word_ids``), and each
    row's n-grams of ids counted in one more (``text_ngrams.ngram_repetition``).  Both tables
    compare every key of a hash hit, so ids are equal exactly for equal words and the counts are
    Counter's: the same ratios as ``_ratio``, the path kept for tokenization or no numba."""

    stat = "word_rep_ratio"

    def __init__(self, params: WordRepetitionParams, artifacts=None):
        super().__init__(params, artifacts)
        self.split = params.word_splitter("word_repetition_filter")

    def stat_value(self, text: str) -> float:
        return self._ratio(refined_words(text, split=self.split))

    def batch_values(self, texts: list[str | None]) -> list[float]:
        if self.split is not None:
            return super().batch_values(texts)
        batch = CodepointBatch.of([t.lower() if t else "" for t in texts])
        if not text_ngrams.available():
            return [self._ratio(words) for words in batch.words_per_row()]
        # Words become ids (equal exactly for equal words), n-grams of ids are counted per row:
        # the counts of the word tuples, without a Python string per word.
        ids, counts = batch.word_ids()
        starts = np.zeros(len(counts), dtype=np.int64)
        np.cumsum(counts[:-1], out=starts[1:])
        total, repeated = text_ngrams.ngram_repetition(ids, starts, counts, self.params.rep_len, top_k=False)
        # int64 / int64 is float64 true division, correctly rounded: Python's int / int for counts < 2**53
        return np.where(total > 0, repeated / np.maximum(total, 1), 0.0).tolist()

    def _ratio(self, words: list[str]) -> float:
        n = self.params.rep_len
        total = len(words) - n + 1
        if total <= 0:
            return 0.0
        # Tuples of n words are equal exactly when Data-Juicer's ' '-joined n-grams are (words
        # hold no spaces and are never empty), and need no joining.
        freqs = Counter(zip(*(words[i:] for i in range(n)))).values()
        return sum(f for f in freqs if f > 1) / total
