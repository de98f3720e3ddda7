"""text_length_filter, maximum_line_length_filter, average_line_length_filter (Data-Juicer).

Lengths count Unicode code points (Python ``len``); lines are ``str.splitlines()``, so every
line boundary Python knows (``\\r\\n``, ``\\r``, ``\\x0b``, ``\\u2028``...) ends a line."""

from __future__ import annotations

import sys
from typing import Any, Sequence

import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field

from raypress.operators.registry import register
from raypress.operators.text.common import RangeTextFilter, TextParams


class LengthParams(TextParams):
    min_len: int = Field(default=10, description="keep samples whose length is >= min_len")
    max_len: int = Field(default=sys.maxsize, description="keep samples whose length is <= max_len")


class _LengthFilter(RangeTextFilter):
    Params = LengthParams
    min_param = "min_len"
    max_param = "max_len"


@register("text_length_filter")
class TextLengthFilter(_LengthFilter):
    """Keep samples whose text length (characters) is within [min_len, max_len]."""

    stat = "text_len"

    def stat_value(self, text: str) -> int:
        return len(text)

    def compute_stats(self, table: pa.Table) -> dict[str, Sequence[Any]]:
        # Arrow counts code points without building Python strings; null text counts as "".
        lengths = pc.fill_null(pc.utf8_length(table.column(self.params.text_key)), 0)
        return {self.stat: lengths.to_pylist()}


@register("maximum_line_length_filter")
class MaximumLineLengthFilter(_LengthFilter):
    """Keep samples whose longest line (characters) is within [min_len, max_len]."""

    stat = "max_line_length"

    def stat_value(self, text: str) -> int:
        return max(map(len, text.splitlines()), default=0)


@register("average_line_length_filter")
class AverageLineLengthFilter(_LengthFilter):
    """Keep samples whose average line length is within [min_len, max_len].

    As in Data-Juicer the average is len(text) / number of lines, so line breaks count."""

    stat = "avg_line_length"

    def stat_value(self, text: str) -> float:
        lines = text.splitlines()
        return len(text) / len(lines) if lines else 0.0
