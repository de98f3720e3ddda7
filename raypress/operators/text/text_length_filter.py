"""text_length_filter (Data-Juicer): the length of the text in Unicode code points (Python ``len``)."""

from __future__ import annotations

from typing import Any, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from raypress.operators.registry import register
from raypress.operators.text.templates.params import LengthParams
from raypress.operators.text.templates.range_filter import RangeTextFilter


@register("text_length_filter")
class TextLengthFilter(RangeTextFilter[LengthParams]):
    """Keep samples whose text length (characters) is within [min_len, max_len]."""

    stat = "text_len"
    min_param = "min_len"
    max_param = "max_len"

    def stat_value(self, text: str) -> int:
        return len(text)

    def compute_stats(self, table: pa.Table) -> dict[str, Sequence[Any]]:
        # Arrow counts code points without building Python strings; null text counts as "".
        lengths = pc.fill_null(pc.utf8_length(table.column(self.params.text_key)), 0)
        return {self.stat: lengths.to_pylist()}
