"""``frequency_specified_field_selector`` (Data-Juicer): keep the rows whose field value is among the most frequent.

As in Data-Juicer: rows are grouped by the value of ``field_key`` (dots for nested keys) with
Python's equality (``1``, ``1.0`` and ``true`` are one value, ``"1"`` another, null a value of its
own); the number of values kept is ``top_ratio`` of the distinct values (truncated), lowered to
``topk`` when both are set, ``topk`` alone when ``top_ratio`` is unset or 0; neither set, an empty
``field_key`` or at most one row keeps every row.  ``reverse: true`` (the default) keeps the most
frequent values, ``false`` the least frequent; of values as frequent as each other, the one that
appears first in the input wins (Data-Juicer's stable sort over its dict in first-seen order; input
order is read from the ids, see ``selection/order.py``).  Every row of a kept value is kept; the
others leave with the reason ``<field> not among the <n> most frequent values`` (``least`` when
``reverse`` is false).

Where raypress differs, and why: a missing field reads as null (Data-Juicer stops the run); a value
that is not a string, a number or null (a list, a struct) makes that row an error tombstone,
quarantined with the message, where Data-Juicer's assertion stops the run; the kept rows stay in
input order (Data-Juicer groups them by value).  Counting is a Ray aggregation: each block counts
its own values, one task adds the counts up.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field

from raypress.operators.general.selection.order import ORDER_COL, order_keys
from raypress.operators.general.selection.passes import (
    FieldParams,
    FieldSelector,
    Keys,
    PassInfo,
    Verdict,
    dj_select_count,
)
from raypress.operators.general.selection.values import field_column, key_value, value_keys
from raypress.operators.registry import register
from raypress.schema import ID_COL

KEY_COL = "_rp_value_key"
COUNT_COL = "_rp_count"
FIRST_COL = "_rp_first"


class FrequencySelectorParams(FieldParams):
    top_ratio: float | None = Field(None, ge=0, le=1, description="share of the distinct values to keep; with "
                                    "topk, the smaller count applies")
    topk: int | None = Field(None, gt=0, description="number of distinct values to keep; with top_ratio, the "
                             "smaller count applies")
    reverse: bool = Field(True, description="true: keep the most frequent values; false: the least frequent")


def count_values(keys: pa.Table) -> pa.Table:
    """(value key, rows, first order key) of each value in ``keys``."""
    counted = keys.group_by(KEY_COL, use_threads=False).aggregate([(KEY_COL, "count", pc.CountOptions(mode="all")),
                                                                    (ORDER_COL, "min")])
    return pa.table({KEY_COL: counted.column(KEY_COL), COUNT_COL: counted.column(f"{KEY_COL}_count"),
                     FIRST_COL: counted.column(f"{ORDER_COL}_min")})


def add_counts(counts: pa.Table) -> pa.Table:
    """Merge per-block ``count_values`` tables into one row per value."""
    merged = counts.group_by(KEY_COL, use_threads=False).aggregate([(COUNT_COL, "sum"), (FIRST_COL, "min")])
    return pa.table({KEY_COL: merged.column(KEY_COL), COUNT_COL: merged.column(f"{COUNT_COL}_sum"),
                     FIRST_COL: merged.column(f"{FIRST_COL}_min")})


@register("frequency_specified_field_selector")
class FrequencySpecifiedFieldSelector(FieldSelector[FrequencySelectorParams]):
    """Keep the rows whose `field_key` value (dots for nested keys) is among the top_ratio / topk most
    (reverse: false, least) frequent values; the others drop as not among them."""

    count_params = ("top_ratio", "topk")

    def keys(self, live: pa.Table, info: PassInfo) -> Keys:
        keys, errors = value_keys(field_column(live, self.params.field_key), self.params.field_key, self.name)
        return Keys(pa.table({KEY_COL: keys, ORDER_COL: order_keys(live.column(ID_COL))}), errors)

    def project(self, keys: Keys) -> pa.Table:
        return count_values(keys.table)  # the rows that cannot be judged count under a null key

    def decide(self, projected: pa.Table):
        p = self.params
        counted = add_counts(projected)
        total = pc.sum(counted.column(COUNT_COL)).as_py() or 0  # every row, as Data-Juicer's len(dataset)
        if total <= 1:
            return {"rows": total, "selected": total}, None
        values = counted.filter(pc.is_valid(counted.column(KEY_COL)))
        count = dj_select_count(p.top_ratio, p.topk, values.num_rows)
        if count >= values.num_rows:
            return {"rows": total, "values": values.num_rows, "selected": int(pc.sum(values.column(COUNT_COL)).as_py()
                                                                             or 0)}, (count, None)
        ranked = values.sort_by([(COUNT_COL, "descending" if p.reverse else "ascending"), (FIRST_COL, "ascending")])
        kept = ranked.slice(0, count)
        summary = {"rows": total, "values": values.num_rows, "selected_values": count,
                   "selected": pc.sum(kept.column(COUNT_COL)).as_py() or 0}
        return summary, (count, kept.column(KEY_COL).combine_chunks())

    def verdict(self, keys: pa.Table, decision, info: PassInfo) -> Verdict:
        count, kept_keys = decision
        if kept_keys is None:
            return Verdict([None] * keys.num_rows, [None] * keys.num_rows)
        p = self.params
        reason = f"{p.field_key} not among the {count} {'most' if p.reverse else 'least'} frequent values"
        kept = pc.is_in(keys.column(KEY_COL), value_set=kept_keys).to_numpy(zero_copy_only=False)
        return Verdict([None if k else reason for k in kept],
                       [None if k else json.dumps({"value": key_value(key)}, default=str)
                        for k, key in zip(kept, keys.column(KEY_COL).to_pylist())])
