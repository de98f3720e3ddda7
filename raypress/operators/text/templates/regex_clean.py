"""The regex cleaner clean_email_mapper and clean_links_mapper both are (Data-Juicer: pattern -> repl).

Each op only brings its default pattern (and a cheap substring pre-check for it, and the anchors
that let a batch run the pattern only on the tokens where it can match: ``anchors``); the
params, the validation of a user's pattern and the replacement live here."""

from __future__ import annotations

import re
from typing import TypeVar

import pyarrow as pa
from pydantic import Field, field_validator

from raypress.kernels import anchored_spans
from raypress.operators.base import TextMapper, TextParams
from raypress.operators.shared.unicode_regex import compile_pattern
from raypress.operators.text.templates.anchors import Anchors, sub_anchored


def unwrap_raw(pattern: str) -> str:
    """Data-Juicer accepts a pattern written as a Python raw literal, ``r'...'`` / ``r"..."``."""
    if len(pattern) > 2 and pattern[:2] in ("r'", 'r"') and pattern[-1] == pattern[1]:
        return pattern[2:-1]
    return pattern


class RegexCleanParams(TextParams):
    pattern: str | None = Field(
        default=None,
        description="regular expression to remove (None: the op's built-in pattern), with Data-Juicer's "
        "meaning (the regex package's: \\p{P} works); matched with DOTALL; r'...' quoting is accepted",
    )
    repl: str = Field(default="", description="replacement for each match")

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is None:
            return None
        value = unwrap_raw(value)
        try:
            compile_pattern(value, re.DOTALL)
        except ValueError as exc:
            raise ValueError(f"invalid regular expression {value!r}: {exc}") from None
        return value


RP = TypeVar("RP", bound=RegexCleanParams)


class RegexCleanMapper(TextMapper[RP]):
    """Replace every match of a pattern; the default pattern may declare a cheap pre-check."""

    default_pattern: str = ""
    # A substring every match of the default pattern contains: texts without it are skipped.
    default_needle: str | None = None
    # What every match of the default pattern contains (templates.anchors): batches substitute only the
    # tokens holding one.
    default_anchors: Anchors | None = None

    def __init__(self, params: RP, artifacts=None):
        super().__init__(params, artifacts)
        custom = params.pattern is not None
        self._regex = compile_pattern(params.pattern if custom else self.default_pattern, re.DOTALL)
        self._needle = None if custom else self.default_needle
        self._repl = params.repl
        self._anchors = None if custom or not anchored_spans.available() else self.default_anchors

    def process_text(self, text: str) -> str:
        if self._needle is not None and self._needle not in text:
            return text
        return self._regex.sub(self._repl, text)

    def process_batch(self, table: pa.Table) -> pa.Table:
        if self._anchors is None:
            return super().process_batch(table)
        key = self.params.text_key
        out = sub_anchored(self._regex, self._repl, table.column(key).to_pylist(), self._anchors)
        return table.set_column(table.schema.get_field_index(key), key, pa.array(out, pa.string()))
