"""The regex cleaner clean_email_mapper and clean_links_mapper both are (Data-Juicer: pattern -> repl).

Each op only brings its default pattern (and a cheap substring pre-check for it); the params, the
validation of a user's pattern and the replacement live here."""

from __future__ import annotations

import re
from typing import TypeVar

from pydantic import Field, field_validator

from raypress.operators.base import TextMapper, TextParams


def unwrap_raw(pattern: str) -> str:
    """Data-Juicer accepts a pattern written as a Python raw literal, ``r'...'`` / ``r"..."``."""
    if len(pattern) > 2 and pattern[:2] in ("r'", 'r"') and pattern[-1] == pattern[1]:
        return pattern[2:-1]
    return pattern


class RegexCleanParams(TextParams):
    pattern: str | None = Field(
        default=None,
        description="Python regular expression to remove (None: the op's built-in pattern); "
        "matched with re.DOTALL; r'...' quoting is accepted",
    )
    repl: str = Field(default="", description="replacement for each match")

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is None:
            return None
        value = unwrap_raw(value)
        try:
            re.compile(value, re.DOTALL)
        except re.error as exc:
            raise ValueError(f"invalid regular expression {value!r}: {exc}") from exc
        return value


RP = TypeVar("RP", bound=RegexCleanParams)


class RegexCleanMapper(TextMapper[RP]):
    """Replace every match of a pattern; the default pattern may declare a cheap pre-check."""

    default_pattern: str = ""
    # A substring every match of the default pattern contains: texts without it are skipped.
    default_needle: str | None = None

    def __init__(self, params: RP, artifacts=None):
        super().__init__(params, artifacts)
        custom = params.pattern is not None
        self._regex = re.compile(params.pattern if custom else self.default_pattern, re.DOTALL)
        self._needle = None if custom else self.default_needle
        self._repl = params.repl

    def process_text(self, text: str) -> str:
        if self._needle is not None and self._needle not in text:
            return text
        return self._regex.sub(self._repl, text)
