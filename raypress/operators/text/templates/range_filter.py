"""The one-stat range filter most Data-Juicer text filters are: keep ``min <= stat <= max``.

Each such op only says which stat it computes and which params hold the bounds; the stats and
drop reasons of a whole batch are built here as plain lists, with no per-row dicts."""

from __future__ import annotations

from abc import abstractmethod
from typing import Any, ClassVar, Sequence

import pyarrow as pa

from raypress.operators.base import TP, TextFilter, range_reason


class RangeTextFilter(TextFilter[TP]):
    """A filter with one stat per row, kept when ``min <= stat <= max`` (Data-Juicer's closed
    interval).  Subclasses name the stat and the params holding the bounds, and compute the
    value for one text; stats and reasons are built as plain lists, no per-row dicts."""

    stat: ClassVar[str]
    honours_range_rule = True
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
        return self.range_rule.reason(stats[self.stat], self.stat, self._lo(), self._hi())

    def compute_stats(self, table: pa.Table) -> dict[str, Sequence[Any]]:
        texts = table.column(self.params.text_key).to_pylist()
        return {self.stat: self.batch_values(texts)}

    def batch_values(self, texts: list[str | None]) -> list[Any]:
        """The stat for every row (None counts as ""): row by row here; vectorised filters
        override it and must agree with ``stat_value``."""
        f = self.stat_value
        return [f(t if t is not None else "") for t in texts]

    def drop_reasons(self, stats: dict[str, Sequence[Any]]) -> list[str | None]:
        lo, hi, name, rule = self._lo(), self._hi(), self.stat, self.range_rule
        if rule.reversed or not (rule.min_closed and rule.max_closed):
            return [rule.reason(v, name, lo, hi) for v in stats[name]]
        return [range_reason(v, name, lo, hi) for v in stats[name]]

    def _lo(self) -> float:
        return getattr(self.params, self.min_param)

    def _hi(self) -> float:
        return getattr(self.params, self.max_param)
