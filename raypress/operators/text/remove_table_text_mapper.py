"""remove_table_text_mapper (Data-Juicer): delete plain-text tables.

A table is two or more consecutive lines, right after a '\\n', each holding the same number of
cells, cells being runs of non-space characters separated by one space, '|' or tab (blank lines
may follow a row).  For each column count from ``min_col`` to ``max_col`` in turn, Data-Juicer
deletes the tables of exactly that many columns; so does raypress, with the same expression."""

from __future__ import annotations

from pydantic import Field

from raypress.operators.base import TextMapper, TextParams
from raypress.operators.registry import register
from raypress.operators.shared.unicode_regex import compile_pattern


def table_pattern(columns: int) -> str:
    """Rows of ``columns`` cells (the first cell, then ``columns - 1`` separator + cell), 2+ rows."""
    return r"(?<=\n)((\S+?)([ |\t](\S+?)){%d}\n+){2,}" % (columns - 1)


class RemoveTableTextParams(TextParams):
    min_col: int = Field(default=2, ge=2, le=20, description="fewest columns of a table to remove")
    max_col: int = Field(default=20, ge=2, le=20, description="most columns of a table to remove")


@register("remove_table_text_mapper")
class RemoveTableTextMapper(TextMapper[RemoveTableTextParams]):
    """Remove plain-text tables of min_col..max_col columns (Data-Juicer remove_table_text_mapper)."""

    def __init__(self, params: RemoveTableTextParams, artifacts=None):
        super().__init__(params, artifacts)
        self._tables = [compile_pattern(table_pattern(n)) for n in range(params.min_col, params.max_col + 1)]

    def process_text(self, text: str) -> str:
        if "\n" not in text:  # a table starts after a newline
            return text
        for table in self._tables:
            text = table.sub("", text)
        return text
