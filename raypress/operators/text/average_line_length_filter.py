"""average_line_length_filter (Data-Juicer): the text's length per line.

Lengths count Unicode code points (Python ``len``); lines are ``str.splitlines()``, so every
line boundary Python knows (``\\r\\n``, ``\\r``, ``\\x0b``, ``\\u2028``...) ends a line."""

from __future__ import annotations

from raypress.operators.registry import register
from raypress.operators.text.templates.params import LengthParams
from raypress.operators.text.templates.range_filter import RangeTextFilter


@register("average_line_length_filter")
class AverageLineLengthFilter(RangeTextFilter[LengthParams]):
    """Keep samples whose average line length is within [min_len, max_len].

    As in Data-Juicer the average is len(text) / number of lines, so line breaks count."""

    stat = "avg_line_length"
    min_param = "min_len"
    max_param = "max_len"

    def stat_value(self, text: str) -> float:
        lines = text.splitlines()
        return len(text) / len(lines) if lines else 0.0
