"""words_num_filter (Data-Juicer): the number of words.

Words are split on ' ', '\\n', '\\t' (with ``tokenization``: into the pieces of Data-Juicer's
sentencepiece model) and stripped of special characters (words.refined_words)."""

from __future__ import annotations

import sys

from pydantic import Field

from raypress.operators.registry import register
from raypress.operators.text.templates.range_filter import RangeTextFilter
from raypress.operators.text.templates.tokenized_params import TokenizedParams
from raypress.operators.text.words.batch import CodepointBatch
from raypress.operators.text.words.vocabulary import refined_words


class WordsNumParams(TokenizedParams):
    min_num: int = Field(default=10, description="keep samples with >= min_num words")
    max_num: int = Field(default=sys.maxsize, description="keep samples with <= max_num words")


@register("words_num_filter", requires_when={"tokenization": {"sentencepiece": "text"}})
class WordsNumFilter(RangeTextFilter[WordsNumParams]):
    """Keep samples whose number of words is within [min_num, max_num]."""

    stat = "num_words"
    min_param = "min_num"
    max_param = "max_num"

    def __init__(self, params: WordsNumParams, artifacts=None):
        super().__init__(params, artifacts)
        self.split = params.word_splitter("words_num_filter")

    def stat_value(self, text: str) -> int:
        # Data-Juicer does not lower-case here; case cannot change the count.
        return len(refined_words(text, lower_case=False, split=self.split))

    def batch_values(self, texts: list[str | None]) -> list[int]:
        if self.split is not None:
            return super().batch_values(texts)
        return CodepointBatch.of(texts).word_counts().tolist()
