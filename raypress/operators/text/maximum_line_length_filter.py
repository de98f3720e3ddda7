"""maximum_line_length_filter (Data-Juicer): the length of the longest line.

Lengths count Unicode code points (Python ``len``); lines are ``str.splitlines()``, so every
line boundary Python knows (``\\r\\n``, ``\\r``, ``\\x0b``, ``\\u2028``...) ends a line."""

from __future__ import annotations

from raypress.operators.registry import register
from raypress.operators.text.templates.params import LengthParams
from raypress.operators.text.templates.range_filter import RangeTextFilter


@register("maximum_line_length_filter")
class MaximumLineLengthFilter(RangeTextFilter[LengthParams]):
    """Keep samples whose longest line (characters) is within [min_len, max_len]."""

    stat = "max_line_length"
    min_param = "min_len"
    max_param = "max_len"

    def stat_value(self, text: str) -> int:
        return max(map(len, text.splitlines()), default=0)
