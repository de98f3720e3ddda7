"""``specified_numeric_field_filter`` (Data-Juicer): keep rows whose numeric field lies in a range.

Why it exists here: splitting a dataset by a number already in its rows — e.g. BridgePure's
protected set (``index < 10000``) and the leaked set (``index >= 10000``) of one Fashion-MNIST
read — is a filter with a reason per dropped row, so the two branches partition the input and the
ledger shows where every row went.

As in Data-Juicer, bounds are inclusive (``min_value <= value <= max_value``), a multi-level
field is named with dots (``meta.score`` reads the ``score`` key of the ``meta`` struct), and a
string that parses as a number counts as that number. Two deliberate differences:
- Data-Juicer's ``is_number`` calls every falsy value non-numeric, so the number 0 would be
  dropped (index 0 of every split): here 0 is a number;
- an empty ``field_key`` (Data-Juicer: keep everything) is a parameter error, since such a node
  filters nothing.
A row whose field is missing, null, or not a (finite) number is dropped with the reason
``<field> missing`` / ``<field> not numeric`` rather than failing the batch.
"""

from __future__ import annotations

import math
import sys
from typing import Any, ClassVar, Sequence

import pyarrow as pa
from pydantic import Field

from raypress.operators.base import Filter, Params
from raypress.operators.registry import register

_MISSING = object()


class SpecifiedNumericFieldParams(Params):
    field_key: str = Field(min_length=1, description="the field to test; nested fields joined with dots "
                                                     "(e.g. meta.score)")
    min_value: float = Field(-sys.maxsize, description="keep rows whose value is >= min_value")
    max_value: float = Field(sys.maxsize, description="keep rows whose value is <= max_value")


def field_values(table: pa.Table, field_key: str) -> list[Any]:
    """The field's value per row (``_MISSING`` where a row lacks it): a top-level column of that
    exact name first, else a dotted path into struct (dict) columns."""
    if field_key in table.column_names:
        return [_MISSING if v is None else v for v in table.column(field_key).to_pylist()]
    head, *rest = field_key.split(".")
    if head not in table.column_names:
        return [_MISSING] * table.num_rows
    out = []
    for value in table.column(head).to_pylist():
        for part in rest:
            value = value.get(part, _MISSING) if isinstance(value, dict) else _MISSING
        out.append(_MISSING if value is None else value)
    return out


def as_number(value: Any) -> float | None:
    """A finite float for numbers and numeric strings; None for anything else (bools included)."""
    if isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


@register("specified_numeric_field_filter")
class SpecifiedNumericFieldFilter(Filter[SpecifiedNumericFieldParams]):
    """Keep rows whose numeric field `field_key` is within [min_value, max_value]; missing/non-numeric ones drop."""

    honours_range_rule = True
    stat_names: ClassVar[tuple[str, ...]] = ()  # per instance: named after the field (see __init__)

    def __init__(self, params: SpecifiedNumericFieldParams, artifacts: dict | None = None) -> None:
        super().__init__(params, artifacts)
        key = self.params.field_key
        self.value_stat, self.missing_stat = key, f"{key}_missing"
        self.stat_names = (self.value_stat, self.missing_stat)

    def columns_read(self) -> tuple[str, ...]:
        return (self.params.field_key.split(".")[0],)

    def compute_stats(self, table: pa.Table) -> dict[str, Sequence[Any]]:
        raw = field_values(table, self.value_stat)
        return {self.value_stat: [None if v is _MISSING else as_number(v) for v in raw],
                self.missing_stat: [v is _MISSING for v in raw]}

    def drop_reasons(self, stats: dict[str, Sequence[Any]]) -> list[str | None]:
        p = self.params
        key = self.value_stat
        reasons: list[str | None] = []
        for value, missing in zip(stats[key], stats[self.missing_stat]):
            if missing:
                reasons.append(f"{key} missing")
            elif value is None:
                reasons.append(f"{key} not numeric")
            else:
                reasons.append(self.range_rule.reason(value, key, p.min_value, p.max_value))
        return reasons
