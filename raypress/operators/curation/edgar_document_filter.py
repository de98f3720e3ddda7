"""edgar_document_filter: keep EDGAR documents by form type, attachment type, acceptance date and size.

Why: BeanCounter's analyses and a user's corpus select by what a document is (a 10-K body, an
EX-99 press release, never a GRAPHIC) and when it was filed.  Types are matched with shell globs,
case-insensitively (``10-K*`` takes 10-K and 10-K405; ``EX-99*`` every EX-99.x): a row is kept when
its type matches some include glob (no include list: every type) and no exclude glob.  Dates are
compared on ``ts_accept`` (ISO ``YYYY-MM-DD[THH:MM:SS]``), inclusive; a row without ``ts_accept``
fails a date bound.  ``min_chars`` counts the characters of ``text_key``.  The drop reasons name
the rule (``form_type excluded``, ``ts_accept < from``, ``n_char < min``).
"""

from __future__ import annotations

import fnmatch
from typing import Any, Sequence

import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field, NonNegativeInt, field_validator

from raypress.operators.base import Filter, Params
from raypress.operators.registry import register

TYPE_RULES = (("form_type", "form_types", "exclude_form_types"),
              ("type_attachment", "attachment_types", "exclude_attachment_types"))


class EdgarDocumentFilterParams(Params):
    form_types: list[str] | None = Field(None, description="keep only these form types (globs); None: all")
    exclude_form_types: list[str] = Field(default_factory=list, description="drop these form types (globs)")
    attachment_types: list[str] | None = Field(
        None, description="keep only these attachment types (the document's own <TYPE>, globs); None: all")
    exclude_attachment_types: list[str] = Field(default_factory=list, description="drop these attachment types")
    ts_from: str | None = Field(None, description="keep documents accepted on or after this ISO date/time")
    ts_to: str | None = Field(None, description="keep documents accepted on or before this ISO date/time "
                              "(a bare date takes the whole day)")
    min_chars: NonNegativeInt = Field(0, description="keep documents with at least this many characters")
    text_key: str = Field("text", description="column holding the document text")

    @field_validator("ts_from", "ts_to")
    @classmethod
    def _iso(cls, value: str | None) -> str | None:
        import datetime

        if value is not None:
            try:
                datetime.datetime.fromisoformat(value)
            except ValueError:
                raise ValueError(f"{value!r} is not an ISO date (YYYY-MM-DD or YYYY-MM-DDTHH:MM:SS)") from None
        return value


def matches(value: str | None, globs: list[str]) -> bool:
    return value is not None and any(fnmatch.fnmatchcase(value.upper(), g.upper()) for g in globs)


@register("edgar_document_filter")
class EdgarDocumentFilter(Filter[EdgarDocumentFilterParams]):
    """Keep documents whose form/attachment types, acceptance time and length pass the rules."""

    reads = ("form_type", "type_attachment", "ts_accept")
    stat_names = ("n_char",)

    def columns_read(self) -> tuple[str, ...]:
        return (*self.reads, self.params.text_key)

    def compute_stats(self, table: pa.Table) -> dict[str, Sequence[Any]]:
        lengths = pc.utf8_length(table.column(self.params.text_key)).fill_null(0)
        self._rows = {col: table.column(col).to_pylist() for col, _, _ in TYPE_RULES}
        self._rows["ts_accept"] = table.column("ts_accept").to_pylist()
        return {"n_char": lengths.to_pylist()}

    def drop_reasons(self, stats: dict[str, Sequence[Any]]) -> list[str | None]:
        p = self.params
        rows = self._rows
        hi = p.ts_to + "T23:59:59" if p.ts_to and "T" not in p.ts_to else p.ts_to
        out: list[str | None] = []
        for i, n_char in enumerate(stats["n_char"]):
            out.append(self._reason(i, n_char, rows, hi))
        return out

    def _reason(self, i: int, n_char: int, rows: dict[str, list], hi: str | None) -> str | None:
        p = self.params
        for col, include, exclude in TYPE_RULES:
            value = rows[col][i]
            if getattr(p, include) is not None and not matches(value, getattr(p, include)):
                return f"{col} not included"
            if matches(value, getattr(p, exclude)):
                return f"{col} excluded"
        ts = rows["ts_accept"][i]
        if p.ts_from is not None and (ts is None or ts < p.ts_from):
            return "ts_accept < from"
        if hi is not None and (ts is None or ts > hi):
            return "ts_accept > to"
        if n_char < p.min_chars:
            return "n_char < min"
        return None
