"""``range_specified_field_selector`` (Data-Juicer): keep the rows ranked between two bounds by a field.

As in Data-Juicer, with N rows: the lower bound is ``int(lower_percentile * N)``, raised to
``lower_rank`` when that is larger; the upper bound ``int(upper_percentile * N)``, lowered to
``upper_rank`` when that is smaller, and never below the lower bound.  With no lower or no upper
parameter, an empty ``field_key`` or at most one row, every row is kept.  Values are read with
``stats_to_number`` (a numeric string counts as its number, a list as its mean; null, a missing
field or anything else as ``-sys.maxsize``, so such rows rank lowest).

Which rows, ties included, follows Data-Juicer's two steps: take the ``upper`` smallest values
(``heapq.nsmallest``: of equal values, the row first in the input first), then of those the
``upper - lower`` largest (``heapq.nlargest`` over them: of equal values, again the first).  So the
rows dropped as too low are the first ``lower`` of the ``upper`` in the order (value ascending, the
input order *descending*): a tie across the lower bound keeps its earliest rows.  Input order is
read from the ids (see ``selection/order.py``).  Rows above the range drop with the reason
``above ranks <a>-<b> by <field> (ascending)``, those below it with ``below ...``.

Where raypress differs: a missing field reads as null (Data-Juicer stops the run); the kept rows
stay in input order (Data-Juicer returns them sorted by the field, largest first).
"""

from __future__ import annotations

import pyarrow as pa
from pydantic import Field

from raypress.operators.general.selection.order import Cut, ORDER_COL, VALUE_COL, first_rows, inside, order_keys
from raypress.operators.general.selection.passes import FieldParams, FieldSelector, Keys, PassInfo, Verdict
from raypress.operators.general.selection.values import field_column, number_detail, numbers
from raypress.operators.registry import register
from raypress.schema import ID_COL


class RangeSelectorParams(FieldParams):
    lower_percentile: float | None = Field(None, ge=0, le=1, description="lower bound as a share of the rows: "
                                           "rows ranked above it (ascending) are kept; with lower_rank, the "
                                           "larger bound applies")
    upper_percentile: float | None = Field(None, ge=0, le=1, description="upper bound as a share of the rows: "
                                           "rows ranked up to it are kept; with upper_rank, the smaller bound "
                                           "applies")
    lower_rank: int | None = Field(None, gt=0, description="lower bound as a rank (ascending); with "
                                   "lower_percentile, the larger bound applies")
    upper_rank: int | None = Field(None, gt=0, description="upper bound as a rank (ascending); with "
                                   "upper_percentile, the smaller bound applies")


@register("range_specified_field_selector")
class RangeSpecifiedFieldSelector(FieldSelector[RangeSelectorParams]):
    """Keep the rows ranked (ascending by `field_key`, dots for nested keys) between the lower
    percentile/rank and the upper one; the others drop as below / above the ranks."""

    def keeps_everything(self) -> str | None:
        p = self.params
        if p.lower_percentile is None and p.lower_rank is None:
            return "no lower bound (lower_percentile, lower_rank) is set"
        if p.upper_percentile is None and p.upper_rank is None:
            return "no upper bound (upper_percentile, upper_rank) is set"
        return super().keeps_everything()

    def bounds(self, total: int) -> tuple[int, int]:
        """Data-Juicer's (lower, upper) bounds for ``total`` rows."""
        p = self.params
        lower, upper = 0, total
        if p.lower_percentile is not None:
            lower = int(p.lower_percentile * total)
        if p.lower_rank is not None:
            lower = max(lower, p.lower_rank)
        if p.upper_percentile is not None:
            upper = int(p.upper_percentile * total)
        if p.upper_rank is not None:
            upper = min(upper, p.upper_rank)
        return lower, max(lower, upper)

    def keys(self, live: pa.Table, info: PassInfo) -> Keys:
        values = numbers(field_column(live, self.params.field_key))
        return Keys(pa.table({VALUE_COL: pa.array(values, pa.float64()), ORDER_COL: order_keys(live.column(ID_COL))}))

    def decide(self, projected: pa.Table):
        total = projected.num_rows
        if total <= 1:
            return {"rows": total, "selected": total}, None
        lower, upper = self.bounds(total)
        taken = min(upper, total)  # heapq.nsmallest(upper)
        selected = min(upper - lower, taken)  # heapq.nlargest(upper - lower) of those
        upto = first_rows(projected, taken)
        below = Cut(False, True, None, False)
        if taken - selected:
            below = first_rows(projected.filter(pa.array(inside(projected, upto))), taken - selected, order_desc=True)
        span = f"ranks {taken - selected + 1}-{taken}" if selected else "no ranks"
        summary = {"rows": total, "selected": selected, "lower": lower, "upper": upper}
        return summary, (span, upto, below)

    def verdict(self, keys: pa.Table, decision, info: PassInfo) -> Verdict:
        span, upto, below = decision
        field = self.params.field_key
        taken = inside(keys, upto)
        low = taken & inside(keys, below)
        above, under = f"above {span} by {field} (ascending)", f"below {span} by {field} (ascending)"
        reasons = [above if not t else under if b else None for t, b in zip(taken, low)]
        values = keys.column(VALUE_COL).to_numpy()
        return Verdict(reasons, [None if r is None else number_detail(v) for r, v in zip(reasons, values)])
