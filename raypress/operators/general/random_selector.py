"""``random_selector`` (Data-Juicer): keep a random sample of the rows, the same one on every rerun.

The count follows Data-Juicer: ``int(select_ratio * N)``, lowered to ``select_num`` when both are
set; ``select_num`` alone when ``select_ratio`` is unset or 0; neither set, or at most one row,
keeps every row.  As in Data-Juicer's ``random_sample``, a count of 0 (a ratio too small for N)
keeps every row too, not none.

Which rows: Data-Juicer shuffles with a fixed seed (42) and takes the first rows, which depends on
the input order.  Here each row draws a number from its id and the run's seed
(``settings.seed``, xxhash64), and the ``count`` smallest draws are kept (ties broken by input
order): reruns, and runs over the same rows split into other blocks, keep the same rows; another
seed keeps another sample.  Each row not kept leaves with the reason ``not in random sample of <n>``.

Where raypress differs: a ``select_num`` above N keeps every row once; Data-Juicer repeats rows to
reach it (raypress never duplicates a row: ids stay unique and the ledger adds up).  With
``select_ratio: 0`` and no ``select_num`` every row is kept (Data-Juicer raises).
"""

from __future__ import annotations

import json

import pyarrow as pa
from pydantic import Field

from raypress.operators.base import Params
from raypress.operators.general.selection.order import ORDER_COL, VALUE_COL, draws, first_rows, inside, order_keys
from raypress.operators.general.selection.passes import Keys, PassInfo, Selector, Verdict, dj_select_count
from raypress.operators.registry import register
from raypress.schema import ID_COL


class RandomSelectorParams(Params):
    select_ratio: float | None = Field(None, ge=0, le=1, description="share of the rows to keep; with "
                                       "select_num, the smaller count applies")
    select_num: int | None = Field(None, gt=0, description="number of rows to keep; with select_ratio, the "
                                   "smaller count applies")


@register("random_selector")
class RandomSelector(Selector[RandomSelectorParams]):
    """Keep a reproducible random sample of select_ratio / select_num rows (drawn from each row's id
    and the run's seed); the others drop as `not in random sample of <n>`."""

    count_params = ("select_ratio", "select_num")  # a ratio of 0 counts as unset, as in Data-Juicer

    def keys(self, live: pa.Table, info: PassInfo) -> Keys:
        ids = live.column(ID_COL)
        return Keys(pa.table({VALUE_COL: pa.array(draws(ids, info.seed), pa.int64()), ORDER_COL: order_keys(ids)}))

    def decide(self, projected: pa.Table):
        total = projected.num_rows
        count = dj_select_count(self.params.select_ratio, self.params.select_num, total)
        if total <= 1 or not count or count >= total:  # random_sample: a count of 0 means every row
            return {"rows": total, "selected": total}, None
        return {"rows": total, "selected": count}, (count, first_rows(projected, count))

    def verdict(self, keys: pa.Table, decision, info: PassInfo) -> Verdict:
        count, cut = decision
        reason = f"not in random sample of {count}"
        detail = json.dumps({"seed": info.seed})
        kept = inside(keys, cut)
        return Verdict([None if k else reason for k in kept], [None if k else detail for k in kept])
