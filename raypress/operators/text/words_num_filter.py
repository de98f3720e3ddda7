"""words_num_filter (Data-Juicer): the number of words.

Words are split on ' ', '\\n', '\\t' and stripped of special characters (words.refined_words)."""

from __future__ import annotations

import sys

from pydantic import Field

from raypress.operators.registry import register
from raypress.operators.text.batch import CodepointBatch
from raypress.operators.text.params import TokenizedParams
from raypress.operators.text.range_filter import RangeTextFilter
from raypress.operators.text.words import refined_words


class WordsNumParams(TokenizedParams):
    min_num: int = Field(default=10, description="keep samples with >= min_num words")
    max_num: int = Field(default=sys.maxsize, description="keep samples with <= max_num words")


@register("words_num_filter")
class WordsNumFilter(RangeTextFilter[WordsNumParams]):
    """Keep samples whose number of words is within [min_num, max_num]."""

    stat = "num_words"
    min_param = "min_num"
    max_param = "max_num"

    def stat_value(self, text: str) -> int:
        # Data-Juicer does not lower-case here; case cannot change the count.
        return len(refined_words(text, lower_case=False))

    def batch_values(self, texts: list[str | None]) -> list[int]:
        return CodepointBatch.of(texts).word_counts().tolist()
