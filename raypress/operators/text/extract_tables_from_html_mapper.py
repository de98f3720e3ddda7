"""extract_tables_from_html_mapper (Data-Juicer): the tables of an HTML text, into the row's meta.

As Data-Juicer does, the HTML is parsed with BeautifulSoup's ``html.parser`` and every ``<table>``
is taken (nested ones too, each on its own).  With ``retain_html_tags`` a table is its markup as a
string; otherwise a list of rows, a row being the texts of its own ``<td>``/``<th>`` cells
(``get_text(strip=True)``: each text piece stripped, joined with nothing), rows with a ``<th>``
skipped unless ``include_header``, rows without cells and tables without rows left out.

Data-Juicer stores the result in the sample's meta under ``tables_field_name`` (default
``html_tables``); raypress rows keep meta in the ``meta`` struct column (DESIGN.md §5), so the
result is the field ``meta.<tables_field_name>``: ``list<string>`` with ``retain_html_tags``,
else ``list<list<list<string>>>``; no table gives an empty list.  A row whose field is already
set (not null) is left as it is, as Data-Juicer skips a sample whose meta has the key."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from pydantic import Field

from raypress.operators.base import Mapper, TextParams
from raypress.operators.registry import register

META_COL = "meta"
MARKUP = pa.list_(pa.string())
CELLS = pa.list_(pa.list_(pa.list_(pa.string())))


def html_tables(html: str, retain_html_tags: bool = False, include_header: bool = True) -> list[Any]:
    """The tables of ``html``, as markup strings or as lists of rows of cell texts."""
    from bs4 import BeautifulSoup

    tables = BeautifulSoup(html, "html.parser").find_all("table")
    if retain_html_tags:
        return [str(table) for table in tables]
    out = []
    for table in tables:
        rows = []
        for tr in table.find_all("tr"):
            if not include_header and tr.find("th", recursive=False) is not None:
                continue
            cells = [cell.get_text(strip=True) for cell in tr.find_all(["td", "th"], recursive=False)]
            if cells:
                rows.append(cells)
        if rows:
            out.append(rows)
    return out


def set_meta_field(table: pa.Table, name: str, values: pa.Array) -> pa.Table:
    """``table`` with ``meta.<name>`` set to ``values`` (the struct column created, or the field
    added/replaced, other fields kept; every row's meta becomes non-null)."""
    fields: dict[str, pa.Array] = {}
    i = table.schema.get_field_index(META_COL)
    if i >= 0:
        meta = table.column(META_COL)
        if not pa.types.is_struct(meta.type):
            raise ValueError(f"column {META_COL!r} is {meta.type}, not a struct: cannot add the field {name!r}")
        meta = meta.combine_chunks()
        fields = {meta.type.field(k).name: child for k, child in enumerate(meta.flatten())}
    fields[name] = values
    struct = pa.StructArray.from_arrays(list(fields.values()), names=list(fields))
    return table.set_column(i, META_COL, struct) if i >= 0 else table.append_column(META_COL, struct)


def meta_field(table: pa.Table, name: str) -> list[Any]:
    """The values of ``meta.<name>`` per row (None where absent)."""
    if META_COL not in table.column_names or not pa.types.is_struct(table.schema.field(META_COL).type):
        return [None] * table.num_rows
    meta = table.column(META_COL).combine_chunks()
    if meta.type.get_field_index(name) < 0:
        return [None] * table.num_rows
    return meta.flatten()[meta.type.get_field_index(name)].to_pylist()


class ExtractTablesFromHtmlParams(TextParams):
    tables_field_name: str = Field(default="html_tables", description="field of the meta struct to store the "
                                   "tables in")
    retain_html_tags: bool = Field(default=False, description="store each table's HTML markup instead of its "
                                   "cell texts")
    include_header: bool = Field(default=True, description="keep rows holding a <th> cell (only without "
                                 "retain_html_tags)")


@register("extract_tables_from_html_mapper", requires={"bs4": "text"})
class ExtractTablesFromHtmlMapper(Mapper[ExtractTablesFromHtmlParams]):
    """Extract the tables of HTML text into meta.html_tables, as cell texts or markup
    (Data-Juicer extract_tables_from_html_mapper)."""

    def columns_written(self) -> tuple[str, ...]:
        return (META_COL,)

    def process_batch(self, table: pa.Table) -> pa.Table:
        p = self.params
        done = meta_field(table, p.tables_field_name)
        texts = table.column(p.text_key).to_pylist()
        values = [old if old is not None else
                  None if text is None else html_tables(text, p.retain_html_tags, p.include_header)
                  for old, text in zip(done, texts)]
        return set_meta_field(table, p.tables_field_name, pa.array(values, MARKUP if p.retain_html_tags else CELLS))
