"""suffix_filter (Data-Juicer): keep rows read from files with one of the given suffixes.

Data-Juicer's loader, when a recipe has this op, stores each row's file suffix (".py",
".jsonl.zst": see ``raypress.operators.shared.file_suffix.dj_suffix``) in a column, and the op
keeps a row when that value is exactly one of ``suffixes`` (no case folding, no dot added: ".C"
or "Makefile" never match).  Here the op reads the column ``suffix_key`` (default ``suffix``);
with no ``suffixes`` it keeps everything and reads nothing.  Data-Juicer computes no stats for
it; the suffix is recorded as the one stat so a drop says which suffix it was."""

from __future__ import annotations

from typing import Any, ClassVar, Sequence

import pyarrow as pa
from pydantic import Field, field_validator

from raypress.operators.base import Filter, Params
from raypress.operators.registry import register


class SuffixFilterParams(Params):
    suffixes: list[str] | str | None = Field(
        default_factory=list,
        description="keep rows whose suffix is one of these, e.g. ['.txt', '.pdf'] (empty: keep all)",
    )
    suffix_key: str = Field(default="suffix", description="column holding each row's file suffix")

    @field_validator("suffixes")
    @classmethod
    def _as_list(cls, value: list[str] | str | None) -> list[str]:
        if value is None:
            return []
        return [value] if isinstance(value, str) else list(value)


@register("suffix_filter")
class SuffixFilter(Filter[SuffixFilterParams]):
    """Keep rows whose file suffix (the `suffix` column) is one of `suffixes` (Data-Juicer's op)."""

    stat_names: ClassVar[tuple[str, ...]] = ("suffix",)

    def __init__(self, params: SuffixFilterParams, artifacts=None):
        super().__init__(params, artifacts)
        self._suffixes = frozenset(params.suffixes or ())
        self._rows = 0  # rows of the last batch, for the keep-all case, which has no stat to count

    def columns_read(self) -> tuple[str, ...]:
        return (self.params.suffix_key,) if self._suffixes else ()

    def compute_stats(self, table: pa.Table) -> dict[str, Sequence[Any]]:
        self._rows = table.num_rows
        if not self._suffixes:
            return {}
        return {"suffix": table.column(self.params.suffix_key).to_pylist()}

    def drop_reasons(self, stats: dict[str, Sequence[Any]]) -> list[str | None]:
        if not self._suffixes:
            return [None] * self._rows
        allowed = self._suffixes
        return [None if s in allowed else "suffix not in suffixes" for s in stats["suffix"]]
