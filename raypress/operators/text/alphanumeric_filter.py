"""alphanumeric_filter (Data-Juicer): the share of alphanumeric characters.

Character ratios divide by ``len(text)`` in code points and are 0.0 for empty text.  With
``tokenization`` the stat is Data-Juicer's ``alpha_token_ratio`` instead: alphabetic characters
(str.isalpha) per token of the ``EleutherAI/pythia-6.9b-deduped`` tokenizer, found locally
(``models.locate``; never downloaded)."""

from __future__ import annotations

import sys
from pathlib import Path

from pydantic import Field

from raypress.operators.registry import register
from raypress.operators.shared.files import LocalFile
from raypress.operators.text.models.hf_tokenizers import hf_token_splitter
from raypress.operators.text.models.locate import PYTHIA_TOKENIZER, hf_tokenizer_file
from raypress.operators.text.templates.params import RatioParams
from raypress.operators.text.templates.range_filter import RangeTextFilter
from raypress.operators.text.words.batch import CodepointBatch, alnum_lut


class AlphanumericParams(RatioParams):
    tokenization: bool = Field(
        default=False,
        description="alpha_token_ratio (alphabetic characters per token of the EleutherAI/pythia-6.9b-deduped "
        "tokenizer, found locally) instead of alnum_ratio (alphanumeric characters per character)",
    )
    min_ratio: float = Field(default=0.25, description="keep samples whose ratio is >= min_ratio")
    max_ratio: float = Field(default=sys.maxsize, description="keep samples whose ratio is <= max_ratio")

    tokenizer_path: LocalFile | None = Field(
        default=None, description="raypress: a local tokenizer.json for tokenization=True, instead of "
        "EleutherAI/pythia-6.9b-deduped's found by name")


    def tokenizer_file(self, op: str) -> Path:
        return Path(self.tokenizer_path).expanduser() if self.tokenizer_path else hf_tokenizer_file(PYTHIA_TOKENIZER, op)

    def with_model_files(self, op: str) -> "AlphanumericParams":
        if not self.tokenization:
            return self
        return self.model_copy(update={"tokenizer_path": str(self.tokenizer_file(op))})


@register("alphanumeric_filter", requires_when={"tokenization": {"tokenizers": "text"}})
class AlphanumericFilter(RangeTextFilter[AlphanumericParams]):
    """Keep samples whose share of alphanumeric characters (str.isalnum) is within [min_ratio, max_ratio]
    (with tokenization: alphabetic characters per tokenizer token)."""

    stat = "alnum_ratio"

    def __init__(self, params: AlphanumericParams, artifacts=None):
        super().__init__(params, artifacts)
        self.tokens = hf_token_splitter(params.tokenizer_file(self.name)) if params.tokenization else None
        if self.tokens is not None:
            self.stat = "alpha_token_ratio"
            self.stat_names = (self.stat,)

    def stat_value(self, text: str) -> float:
        if self.tokens is not None:
            count = len(self.tokens(text))
            return sum(map(str.isalpha, text)) / count if count else 0.0
        return sum(map(str.isalnum, text)) / len(text) if text else 0.0

    def batch_values(self, texts: list[str | None]) -> list[float]:
        if self.tokens is not None:
            return super().batch_values(texts)
        return CodepointBatch.of(texts).ratio_per_row(alnum_lut())
