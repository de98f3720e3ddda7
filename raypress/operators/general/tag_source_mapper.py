"""``tag_source_mapper``: rows of one source, made ready to meet other sources in a union.

Why: a DAG that curates several corpora (web pages, SEC filings, package descriptions) and then
deduplicates them together needs three things of every row before the union: a column naming its
source (so the ledger, the reports and a token count can be split by it), an ``id`` that no other
source can hold (each reader makes its own ids: two sources may both have ``doc-1``), and the same
columns as the other sources (a union of differently shaped rows is a schema conflict at the first
writer).  The id becomes ``<source>/<id>``, so a duplicate's kept twin names its source too: a
duplicate across sources says which source lost it.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field, field_validator

from raypress.operators.base import Mapper, Params
from raypress.operators.registry import register
from raypress.schema import ID_COL


class TagSourceParams(Params):
    source: str = Field(min_length=1, description="the source's name (no '/'): the `source_key` value and the id prefix")
    source_key: str = Field("corpus", description="column that names the source")
    columns: list[str] | None = Field(default_factory=lambda: ["text"],
                                      description="columns kept besides `id` and `source_key` (a missing one is "
                                                  "null); null keeps every column (tag a branch at its reader, "
                                                  "then narrow it before the union)")
    text_list_key: str | None = Field(None, description="a list-of-strings column (an interleaved document's "
                                      "`texts`) joined into the first of `columns` where that one is missing")
    separator: str = Field("\n\n", description="between the joined strings of `text_list_key`")
    prefix_ids: bool = Field(True, description="ids become `<source>/<id>` (an id that already starts so "
                                               "stays as it is: tagging a branch twice is harmless)")

    @field_validator("source")
    @classmethod
    def _no_slash(cls, value: str) -> str:
        if "/" in value:
            raise ValueError("source must not contain '/': it prefixes ids as `<source>/<id>`")
        return value


@register("tag_source_mapper")
class TagSourceMapper(Mapper[TagSourceParams]):
    """Name each row's source in a column, prefix its id with it, and keep only the shared columns."""

    def columns_read(self) -> tuple[str, ...]:
        p = self.params
        return tuple(dict.fromkeys([*(p.columns or []), *([p.text_list_key] if p.text_list_key else [])]))

    def columns_written(self) -> tuple[str, ...] | None:
        return None if self.params.columns is None else (self.params.source_key, *self.params.columns)

    def process_batch(self, table: pa.Table) -> pa.Table:
        p = self.params
        n = table.num_rows
        ids = pc.cast(table.column(ID_COL), pa.string())
        if p.prefix_ids:
            tagged = pc.starts_with(ids, f"{p.source}/")
            ids = pc.if_else(tagged, ids, pc.binary_join_element_wise(pa.scalar(p.source), ids, "/"))
        if p.columns is None:
            out_all = table.set_column(table.schema.get_field_index(ID_COL), ID_COL, ids)
            column = pa.array([p.source] * n, pa.string())
            if p.source_key in out_all.column_names:
                return out_all.set_column(out_all.schema.get_field_index(p.source_key), p.source_key, column)
            return out_all.append_column(p.source_key, column)
        out: dict[str, pa.Array] = {ID_COL: ids}
        for i, name in enumerate(p.columns):
            if name in table.column_names:
                out[name] = table.column(name)
            elif i == 0 and p.text_list_key and p.text_list_key in table.column_names:
                out[name] = pa.array([None if parts is None else p.separator.join(s for s in parts if s)
                                      for parts in table.column(p.text_list_key).to_pylist()], pa.string())
            else:
                out[name] = pa.nulls(n, pa.string())
        out[p.source_key] = pa.array([p.source] * n, pa.string())
        return pa.table(out)
