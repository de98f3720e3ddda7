"""``drop_columns``: remove columns before a writer.

Why: Data-Juicer exports without the filters' stats unless ``keep_stats_in_res_ds: true``; a
recipe's expansion ends with this op so the exported rows match Data-Juicer's.  A column that is
not there is not an error (a recipe without filters has no ``stats``)."""

from __future__ import annotations

import pyarrow as pa
from pydantic import Field

from raypress.operators.base import Mapper, Params
from raypress.operators.registry import register
from raypress.schema import ID_COL


class DropColumnsParams(Params):
    columns: list[str] = Field(min_length=1, description="columns to remove where present (never `id`)")


@register("drop_columns")
class DropColumns(Mapper[DropColumnsParams]):
    """Remove the named columns from every row (those absent are ignored); `id` always stays."""

    def columns_written(self) -> tuple[str, ...]:
        return ()

    def columns_dropped(self) -> tuple[str, ...]:
        return tuple(c for c in self.params.columns if c != ID_COL)

    def process_batch(self, table: pa.Table) -> pa.Table:
        gone = [c for c in self.columns_dropped() if c in table.column_names]
        return table.drop_columns(gone) if gone else table
