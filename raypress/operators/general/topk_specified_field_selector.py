"""``topk_specified_field_selector`` (Data-Juicer): keep the rows with the largest (or smallest) field values.

As in Data-Juicer: the count is ``top_ratio`` of the rows (truncated), lowered to ``topk`` when both
are set, ``topk`` alone when ``top_ratio`` is unset or 0; neither set, an empty ``field_key`` or at
most one row keeps every row; a count of 0 keeps none.  ``reverse: true`` (the default) keeps the
largest values.  Values are read with ``stats_to_number`` (see ``selection/values.py``): a numeric
string counts as its number, a list as its mean, and null, a missing field or anything else as
``-sys.maxsize`` (``reverse: true``) or ``sys.maxsize`` (``reverse: false``), i.e. last.  Of equal
values the row first in the input wins, as with Data-Juicer's stable ``heapq``; input order is read
from the ids (see ``selection/order.py``).  Each row not kept leaves with the reason
``not in top <k> by <field>`` (``not in lowest <k> by <field>`` when ``reverse`` is false).

Where raypress differs, and why:
- a top-level field is read with ``stats_to_number`` too; Data-Juicer compares its raw values
  (a None among numbers raises there, strings compare as text);
- a missing field reads as null; Data-Juicer stops the run;
- the kept rows stay in input order; Data-Juicer returns them sorted by the field.
"""

from __future__ import annotations

import pyarrow as pa
from pydantic import Field

from raypress.operators.general.selection.order import ORDER_COL, VALUE_COL, first_rows, inside, order_keys
from raypress.operators.general.selection.passes import (
    FieldParams,
    FieldSelector,
    Keys,
    PassInfo,
    Verdict,
    dj_select_count,
)
from raypress.operators.general.selection.values import field_column, number_detail, numbers
from raypress.operators.registry import register
from raypress.schema import ID_COL


class TopkSelectorParams(FieldParams):
    top_ratio: float | None = Field(None, ge=0, le=1, description="share of the rows to keep; with topk, "
                                    "the smaller count applies")
    topk: int | None = Field(None, gt=0, description="number of rows to keep; with top_ratio, the smaller "
                             "count applies")
    reverse: bool = Field(True, description="true: keep the largest values; false: the smallest")


@register("topk_specified_field_selector")
class TopkSpecifiedFieldSelector(FieldSelector[TopkSelectorParams]):
    """Keep the top_ratio / topk rows with the largest (reverse: false, smallest) `field_key` values
    (dots for nested keys); the others drop as `not in top <k> by <field>`."""

    count_params = ("top_ratio", "topk")

    def keys(self, live: pa.Table, info: PassInfo) -> Keys:
        values = numbers(field_column(live, self.params.field_key), self.params.reverse)
        return Keys(pa.table({VALUE_COL: pa.array(values, pa.float64()), ORDER_COL: order_keys(live.column(ID_COL))}))

    def decide(self, projected: pa.Table):
        p = self.params
        total = projected.num_rows
        count = dj_select_count(p.top_ratio, p.topk, total)
        if total <= 1 or count is None or count >= total:
            return {"rows": total, "selected": total}, None
        cut = first_rows(projected, count, value_desc=p.reverse)
        return {"rows": total, "selected": count, "value_at_cut": cut.last[0] if cut.last else None}, (count, cut)

    def verdict(self, keys: pa.Table, decision, info: PassInfo) -> Verdict:
        count, cut = decision
        p = self.params
        reason = f"not in {'top' if p.reverse else 'lowest'} {count} by {p.field_key}"
        kept, values = inside(keys, cut), keys.column(VALUE_COL).to_numpy()
        return Verdict([None if k else reason for k in kept],
                       [None if k else number_detail(v, p.reverse) for k, v in zip(kept, values)])
