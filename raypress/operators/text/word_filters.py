"""words_num_filter, word_repetition_filter (Data-Juicer).

Words are split on ' ', '\\n', '\\t' and stripped of special characters (words.refined_words)."""

from __future__ import annotations

import sys
from collections import Counter

from pydantic import Field, PositiveInt

from raypress.operators.registry import register
from raypress.operators.text.batch import CodepointBatch
from raypress.operators.text.common import RangeTextFilter, TokenizedParams
from raypress.operators.text.words import refined_words


class WordsNumParams(TokenizedParams):
    min_num: int = Field(default=10, description="keep samples with >= min_num words")
    max_num: int = Field(default=sys.maxsize, description="keep samples with <= max_num words")


@register("words_num_filter")
class WordsNumFilter(RangeTextFilter):
    """Keep samples whose number of words is within [min_num, max_num]."""

    Params = WordsNumParams
    stat = "num_words"
    min_param = "min_num"
    max_param = "max_num"

    def stat_value(self, text: str) -> int:
        # Data-Juicer does not lower-case here; case cannot change the count.
        return len(refined_words(text, lower_case=False))

    def batch_values(self, texts: list[str | None]) -> list[int]:
        return CodepointBatch.of(texts).word_counts().tolist()


class WordRepetitionParams(TokenizedParams):
    rep_len: PositiveInt = Field(default=10, description="length of the word n-grams")
    min_ratio: float = Field(default=0.0, description="keep samples whose ratio is >= min_ratio")
    max_ratio: float = Field(default=0.5, description="keep samples whose ratio is <= max_ratio")


@register("word_repetition_filter")
class WordRepetitionFilter(RangeTextFilter):
    """Keep samples whose word n-gram repetition ratio is within [min_ratio, max_ratio].

    Ratio = occurrences of the n-grams (of lower-cased words) that occur more than once / all n-grams."""

    Params = WordRepetitionParams
    stat = "word_rep_ratio"

    def stat_value(self, text: str) -> float:
        return self._ratio(refined_words(text))

    def batch_values(self, texts: list[str | None]) -> list[float]:
        lowered = [t.lower() if t else "" for t in texts]
        return [self._ratio(words) for words in CodepointBatch.of(lowered).words_per_row()]

    def _ratio(self, words: list[str]) -> float:
        n = self.params.rep_len
        total = len(words) - n + 1
        if total <= 0:
            return 0.0
        # Tuples of n words are equal exactly when Data-Juicer's ' '-joined n-grams are (words
        # hold no spaces and are never empty), and need no joining.
        freqs = Counter(zip(*(words[i:] for i in range(n)))).values()
        return sum(f for f in freqs if f > 1) / total
