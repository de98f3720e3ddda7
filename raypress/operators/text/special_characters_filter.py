"""special_characters_filter (Data-Juicer): the share of special characters (words.SPECIAL_CHARACTERS).

Character ratios divide by ``len(text)`` in code points and are 0.0 for empty text."""

from __future__ import annotations

from pydantic import Field

from raypress.operators.registry import register
from raypress.operators.text.templates.params import RatioParams
from raypress.operators.text.templates.range_filter import RangeTextFilter
from raypress.operators.text.words.batch import CodepointBatch, special_lut
from raypress.operators.text.words.vocabulary import count_special_characters


class SpecialCharactersParams(RatioParams):
    max_ratio: float = Field(default=0.25, description="keep samples whose special-char ratio is <= max_ratio")


@register("special_characters_filter")
class SpecialCharactersFilter(RangeTextFilter[SpecialCharactersParams]):
    """Keep samples whose share of special characters (punctuation, digits, whitespace, symbols,
    emoji: words.SPECIAL_CHARACTERS) is within [min_ratio, max_ratio]."""

    stat = "special_char_ratio"

    def stat_value(self, text: str) -> float:
        return count_special_characters(text) / len(text) if text else 0.0

    def batch_values(self, texts: list[str | None]) -> list[float]:
        return CodepointBatch.of(texts).ratio_per_row(special_lut())
