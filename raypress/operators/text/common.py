"""What the Data-Juicer-compatible text ops share: params pieces and the one-stat range filter."""

from __future__ import annotations

from abc import abstractmethod
from typing import Any, ClassVar, Sequence

import pyarrow as pa
from pydantic import Field, field_validator

from raypress.operators.base import TP, TextFilter, TextParams, range_reason


class TokenizedParams(TextParams):
    """Data-Juicer's ``lang`` + ``tokenization`` pair, restricted to the download-free path."""

    lang: str = Field(default="en", description="language of the samples")
    tokenization: bool = Field(
        default=False,
        description="split words with a tokenizer model; only False (whitespace split) is supported",
    )

    @field_validator("tokenization")
    @classmethod
    def _no_tokenizer(cls, value: bool) -> bool:
        if value:
            raise ValueError(
                "tokenization=True needs a sentencepiece/HuggingFace tokenizer downloaded at run "
                "time, which raypress does not do; use tokenization=False (words split on whitespace)"
            )
        return value


class RangeTextFilter(TextFilter[TP]):
    """A filter with one stat per row, kept when ``min <= stat <= max`` (Data-Juicer's closed
    interval).  Subclasses name the stat and the params holding the bounds, and compute the
    value for one text; stats and reasons are built as plain lists, no per-row dicts."""

    stat: ClassVar[str]
    min_param: ClassVar[str] = "min_ratio"
    max_param: ClassVar[str] = "max_ratio"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "stat" in cls.__dict__:
            cls.stat_names = (cls.stat,)

    @abstractmethod
    def stat_value(self, text: str) -> float:
        """The stat for one (non-null) text."""

    def text_stats(self, text: str) -> dict[str, Any]:
        return {self.stat: self.stat_value(text)}

    def reject(self, stats: dict[str, Any]) -> str | None:
        return range_reason(stats[self.stat], self.stat, self._lo(), self._hi())

    def compute_stats(self, table: pa.Table) -> dict[str, Sequence[Any]]:
        texts = table.column(self.params.text_key).to_pylist()
        return {self.stat: self.batch_values(texts)}

    def batch_values(self, texts: list[str | None]) -> list[Any]:
        """The stat for every row (None counts as ""): row by row here; vectorised filters
        override it and must agree with ``stat_value``."""
        f = self.stat_value
        return [f(t if t is not None else "") for t in texts]

    def drop_reasons(self, stats: dict[str, Sequence[Any]]) -> list[str | None]:
        lo, hi, name = self._lo(), self._hi(), self.stat
        return [range_reason(v, name, lo, hi) for v in stats[name]]

    def _lo(self) -> float:
        return getattr(self.params, self.min_param)

    def _hi(self) -> float:
        return getattr(self.params, self.max_param)
