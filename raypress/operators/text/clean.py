"""clean_email_mapper, clean_links_mapper: Data-Juicer's regex cleaners (pattern -> repl)."""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from raypress.operators.base import TextMapper
from raypress.operators.registry import register
from raypress.operators.text.common import TextParams

EMAIL_PATTERN = r"[A-Za-z0-9.\-+_]+@[a-z0-9.\-+_]+\.[a-z]+"
# Data-Juicer's pattern (after kallewesterling/CleanText): scheme URLs (http, ftp, mailto...),
# www.* hosts and bare host/paths such as example.com/page.  Data-Juicer repeats ``[^\s()<>]+``
# inside a ``+``, which backtracks exponentially on a long token with no valid last character
# (e.g. "ab:c" followed by 30 dots); repeating single characters instead matches exactly the
# same text (each character decides which branch applies) in linear time per start position.
LINKS_PATTERN = (
    r"(?i)\b("
    r"(?:[a-z][\w-]+:(?:\/{1,3}|[a-z0-9%])|www\d{0,3}[.]|[a-z0-9.\-]+[.][a-z]{2,4}\/)"
    r"(?:[^\s()<>]|\(([^\s()<>]|(\([^\s()<>]+\)))*\))"
    r"+(?:\(([^\s()<>]|(\([^\s()<>]+\)))*\)|[^\s`!()\[\]{};:\'\".,<>?«»“”‘’])"
    r")"
)


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


class RegexCleanMapper(TextMapper):
    """Replace every match of a pattern; the default pattern may declare a cheap pre-check."""

    Params = RegexCleanParams
    default_pattern: str = ""
    # A substring every match of the default pattern contains: texts without it are skipped.
    default_needle: str | None = None

    def __init__(self, params: RegexCleanParams, artifacts=None):
        super().__init__(params, artifacts)
        custom = params.pattern is not None
        self._regex = re.compile(params.pattern if custom else self.default_pattern, re.DOTALL)
        self._needle = None if custom else self.default_needle
        self._repl = params.repl

    def process_text(self, text: str) -> str:
        if self._needle is not None and self._needle not in text:
            return text
        return self._regex.sub(self._repl, text)


@register("clean_email_mapper")
class CleanEmailMapper(RegexCleanMapper):
    """Remove e-mail addresses from text (Data-Juicer clean_email_mapper)."""

    default_pattern = EMAIL_PATTERN
    default_needle = "@"


@register("clean_links_mapper")
class CleanLinksMapper(RegexCleanMapper):
    """Remove links (http/https/ftp URLs, www hosts, host/path) from text (Data-Juicer clean_links_mapper)."""

    default_pattern = LINKS_PATTERN
