"""alphanumeric_filter (Data-Juicer): the share of alphanumeric characters.

Character ratios divide by ``len(text)`` in code points and are 0.0 for empty text."""

from __future__ import annotations

import sys

from pydantic import Field, field_validator

from raypress.operators.registry import register
from raypress.operators.text.batch import CodepointBatch, alnum_lut
from raypress.operators.text.params import RatioParams
from raypress.operators.text.range_filter import RangeTextFilter


class AlphanumericParams(RatioParams):
    tokenization: bool = Field(
        default=False,
        description="ratio of alphabetic characters to tokenizer tokens (needs a HuggingFace "
        "tokenizer download; not supported) instead of alphanumeric characters to characters",
    )
    min_ratio: float = Field(default=0.25, description="keep samples whose alnum ratio is >= min_ratio")
    max_ratio: float = Field(default=sys.maxsize, description="keep samples whose alnum ratio is <= max_ratio")

    @field_validator("tokenization")
    @classmethod
    def _no_tokenizer(cls, value: bool) -> bool:
        if value:
            raise ValueError(
                "tokenization=True counts tokens of the EleutherAI/pythia-6.9b-deduped tokenizer, "
                "downloaded at run time, which raypress does not do; use tokenization=False "
                "(alnum_ratio: alphanumeric characters / characters)"
            )
        return value


@register("alphanumeric_filter")
class AlphanumericFilter(RangeTextFilter[AlphanumericParams]):
    """Keep samples whose share of alphanumeric characters (str.isalnum) is within [min_ratio, max_ratio]."""

    stat = "alnum_ratio"

    def stat_value(self, text: str) -> float:
        return sum(map(str.isalnum, text)) / len(text) if text else 0.0

    def batch_values(self, texts: list[str | None]) -> list[float]:
        return CodepointBatch.of(texts).ratio_per_row(alnum_lut())
