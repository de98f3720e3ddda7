"""alphanumeric_filter, character_repetition_filter, special_characters_filter (Data-Juicer).

Character ratios divide by ``len(text)`` in code points and are 0.0 for empty text."""

from __future__ import annotations

import math
import re
import sys
from collections import Counter

from pydantic import Field, PositiveInt, field_validator

from raypress.operators.registry import register
from raypress.operators.text.batch import CodepointBatch, alnum_lut, special_lut
from raypress.operators.text.common import RangeTextFilter, TextParams
from raypress.operators.text.words import count_special_characters


class RatioParams(TextParams):
    min_ratio: float = Field(default=0.0, description="keep samples whose ratio is >= min_ratio")
    max_ratio: float = Field(default=0.5, description="keep samples whose ratio is <= max_ratio")


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
class AlphanumericFilter(RangeTextFilter):
    """Keep samples whose share of alphanumeric characters (str.isalnum) is within [min_ratio, max_ratio]."""

    Params = AlphanumericParams
    stat = "alnum_ratio"

    def stat_value(self, text: str) -> float:
        return sum(map(str.isalnum, text)) / len(text) if text else 0.0

    def batch_values(self, texts: list[str | None]) -> list[float]:
        return CodepointBatch.of(texts).ratio_per_row(alnum_lut())


class CharacterRepetitionParams(RatioParams):
    rep_len: PositiveInt = Field(default=10, description="length of the character n-grams")


@register("character_repetition_filter")
class CharacterRepetitionFilter(RangeTextFilter):
    """Keep samples whose character n-gram repetition ratio is within [min_ratio, max_ratio].

    The ratio (BigScience's): of the distinct n-grams, take the k most frequent, k = min(floor(
    sqrt(#distinct)), #distinct that occur more than once); ratio = their occurrences / all n-grams."""

    Params = CharacterRepetitionParams
    stat = "char_rep_ratio"

    def __init__(self, params: CharacterRepetitionParams, artifacts=None):
        super().__init__(params, artifacts)
        # Every n-gram, overlapping, in one C-level pass (a lookahead captures without consuming).
        self._ngrams = re.compile("(?=(.{%d}))" % params.rep_len, re.DOTALL)

    def stat_value(self, text: str) -> float:
        total = len(text) - self.params.rep_len + 1
        if total <= 0:
            return 0.0
        freqs = sorted(Counter(self._ngrams.findall(text)).values(), reverse=True)
        repeated = len(freqs) - freqs.count(1)
        k = min(math.isqrt(len(freqs)), repeated)
        return sum(freqs[:k]) / total


class SpecialCharactersParams(RatioParams):
    max_ratio: float = Field(default=0.25, description="keep samples whose special-char ratio is <= max_ratio")


@register("special_characters_filter")
class SpecialCharactersFilter(RangeTextFilter):
    """Keep samples whose share of special characters (punctuation, digits, whitespace, symbols,
    emoji: words.SPECIAL_CHARACTERS) is within [min_ratio, max_ratio]."""

    Params = SpecialCharactersParams
    stat = "special_char_ratio"

    def stat_value(self, text: str) -> float:
        return count_special_characters(text) / len(text) if text else 0.0

    def batch_values(self, texts: list[str | None]) -> list[float]:
        return CodepointBatch.of(texts).ratio_per_row(special_lut())
