"""``specified_field_filter`` (Data-Juicer): keep rows whose field holds only values of a given list.

As in Data-Juicer: ``field_key`` names the field, a nested one with dots (``meta.suffix`` reads
the ``suffix`` key of the ``meta`` struct); a value that is a list is kept when every element is
in ``target_value`` (an empty list therefore passes), any other value when it is itself in
``target_value``; an empty ``target_value`` keeps every row.  ``in`` is Python's, so ``1`` matches
``1.0`` and ``true`` matches ``1`` there as here.  A null is the value ``None``: kept only when
``target_value`` lists ``null``.

Where raypress differs, and why:
- a column named exactly ``field_key`` (dots included) wins over the dotted path, as in
  ``specified_numeric_field_filter``;
- a row that lacks the field (no such column, or a parent that is not a struct) is dropped with the
  reason ``<field> missing``; Data-Juicer's assertion fails the whole run there;
- an empty ``field_key`` is a parameter error (Data-Juicer's default, which fails on the first row);
- besides the stat ``<field_key>`` (the value, as in Data-Juicer and ``specified_numeric_field_filter``:
  a row carrying it already, e.g. from that op, is judged by the carried value), the bool stat
  ``<field_key>_missing`` says which rows lack the field.
A field must hold one type across a batch's rows (Arrow stores the stat as one column), as it must
in Data-Juicer's datasets; where it does not, the runner judges the rows one by one.
"""

from __future__ import annotations

from typing import Any, ClassVar, Sequence

import pyarrow as pa
from pydantic import Field

from raypress.operators.base import Filter, Params
from raypress.operators.registry import register


class SpecifiedFieldParams(Params):
    field_key: str = Field(min_length=1, description="the field to test; nested fields joined with dots "
                                                     "(e.g. meta.suffix)")
    target_value: list[Any] = Field(default_factory=list, description="the values a row's field may hold (a "
                                    "list field: every element must be one of them); empty: keep every row")


def lookup(table: pa.Table, field_key: str) -> list[tuple[bool, Any]]:
    """Per row, (found, value) of ``field_key``: a column of that exact name, else the dotted path
    through struct columns.  A null on the way to the last key means the field is missing; a null
    at the last key is the value None."""
    if field_key in table.column_names:
        return [(True, v) for v in table.column(field_key).to_pylist()]
    head, *path = field_key.split(".")
    if head not in table.column_names:
        return [(False, None)] * table.num_rows
    found = []
    for value in table.column(head).to_pylist():
        present = True
        for key in path:
            if not isinstance(value, dict) or key not in value:
                present, value = False, None
                break
            value = value[key]
        found.append((present, value))
    return found


def matches(value: Any, targets: list[Any]) -> bool:
    """Data-Juicer's rule: every element of a list (or tuple) value, or the value itself, is a target."""
    values = value if isinstance(value, (list, tuple)) else [value]
    return all(v in targets for v in values)


@register("specified_field_filter")
class SpecifiedFieldFilter(Filter[SpecifiedFieldParams]):
    """Keep rows whose field `field_key` (dots for nested keys) holds only values listed in
    `target_value`; rows without the field drop."""

    stat_names: ClassVar[tuple[str, ...]] = ()  # per instance: the field's value, and whether it is missing

    def __init__(self, params: SpecifiedFieldParams, artifacts: dict | None = None) -> None:
        super().__init__(params, artifacts)
        self.stat_names = (params.field_key, params.field_key + "_missing")

    def columns_read(self) -> tuple[str, ...]:
        head, _, _ = self.params.field_key.partition(".")
        return (head,)

    def compute_stats(self, table: pa.Table) -> dict[str, Sequence[Any]]:
        value, missing = self.stat_names
        found = lookup(table, self.params.field_key)
        return {value: [v for _, v in found], missing: [not present for present, _ in found]}

    def drop_reasons(self, stats: dict[str, Sequence[Any]]) -> list[str | None]:
        key, missing_stat = self.stat_names
        targets = self.params.target_value
        reasons: list[str | None] = []
        for value, missing in zip(stats[key], stats[missing_stat]):
            if missing:
                reasons.append(f"{key} missing")
            elif targets and not matches(value, targets):
                reasons.append(f"{key} not in target_value")
            else:
                reasons.append(None)
        return reasons
