"""refinedweb_gopher_quality_filter: DCLM's RefinedWeb reproduction of the Gopher quality rules.

The statistics are computed in ``gopher.rules`` (pure functions); this module only reads the
text of each row, collects the stats and names the first rule a page fails.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal, Sequence

import pyarrow as pa
from pydantic import Field, NonNegativeInt

from raypress.operators.base import Filter, Params, range_reason
from raypress.operators.curation.gopher.rules import (
    DCLM_LINE_SUBSTRINGS,
    STAT_NAMES,
    LineModifiers,
    LineSubstring,
    dup_stat,
    gopher_stats,
    top_stat,
)
from raypress.operators.registry import register
from raypress.operators.shared.documents import document_text


def _rule(default: float, what: str) -> Any:
    """A rule's threshold: the DCLM default, and None to switch the rule off."""
    return Field(default=default, description=f"keep pages with {what}; None: rule off")


class LineSubstringParams(Params):
    pattern: str = Field(description="case-insensitive regex removed from short lines (unescaped, as in DCLM)")
    location: Literal["any", "prefix", "suffix"] = Field(default="any", description="where in the line it must be")
    max_words: NonNegativeInt | None = Field(
        default=10, description="only lines of at most this many whitespace words are touched (None: all)"
    )


class GopherQualityParams(Params):
    text_key: str | None = Field(
        default=None,
        description="plain text column to judge; None: the interleaved document's `texts` joined by a blank line",
    )
    min_words: int | None = _rule(50, "words >= this (fastText tokens starting alphanumeric)")
    max_words: int | None = _rule(100_000, "words <= this")
    min_mean_word_length: float | None = _rule(3, "mean whitespace-token length >= this")
    max_mean_word_length: float | None = _rule(10, "mean whitespace-token length <= this")
    max_symbol_word_ratio: float | None = _rule(0.1, "('#' + ellipses) / whitespace tokens <= this")
    max_bullet_line_frac: float | None = _rule(0.9, "share of lines starting with a bullet <= this")
    max_ellipsis_line_frac: float | None = _rule(0.3, "share of lines ending with an ellipsis <= this")
    max_non_alpha_word_frac: float | None = _rule(0.2, "share of tokens without an alphabetic char <= this")
    min_stop_words: int | None = _rule(2, "occurrences of the 8 Gopher stop words >= this")
    skip_paragraph: bool = Field(
        default=False, description="skip the paragraph repetition rules (DCLM's skip_paragraph)"
    )
    max_dup_line_frac: float | None = _rule(0.30, "repeated lines / lines <= this")
    max_dup_para_frac: float | None = _rule(0.30, "repeated paragraphs / paragraphs <= this")
    max_dup_line_char_frac: float | None = _rule(0.20, "share of chars in repeated lines <= this")
    max_dup_para_char_frac: float | None = _rule(0.20, "share of chars in repeated paragraphs <= this")
    max_top_2gram_char_frac: float | None = _rule(0.20, "share of word chars in the top 2-gram <= this")
    max_top_3gram_char_frac: float | None = _rule(0.18, "share of word chars in the top 3-gram <= this")
    max_top_4gram_char_frac: float | None = _rule(0.16, "share of word chars in the top 4-gram <= this")
    max_dup_5gram_char_frac: float | None = _rule(0.15, "share of word chars in repeated 5-grams <= this")
    max_dup_6gram_char_frac: float | None = _rule(0.14, "share of word chars in repeated 6-grams <= this")
    max_dup_7gram_char_frac: float | None = _rule(0.13, "share of word chars in repeated 7-grams <= this")
    max_dup_8gram_char_frac: float | None = _rule(0.12, "share of word chars in repeated 8-grams <= this")
    max_dup_9gram_char_frac: float | None = _rule(0.11, "share of word chars in repeated 9-grams <= this")
    max_dup_10gram_char_frac: float | None = _rule(0.10, "share of word chars in repeated 10-grams <= this")
    max_line_uppercase_ratio: float | None = Field(
        default=0.5, description="modifier: remove lines with more uppercase chars than this share; None: off"
    )
    max_line_numeric_ratio: float | None = Field(
        default=0.999999, description="modifier: remove lines with more digits than this share; None: off"
    )
    remove_counter_lines: bool = Field(default=True, description="modifier: remove counter lines ('3 likes')")
    min_line_words: NonNegativeInt | None = Field(
        default=2, description="modifier: remove non-empty lines with fewer whitespace words; None: off"
    )
    line_substrings: list[LineSubstringParams] = Field(
        default_factory=lambda: [LineSubstringParams(**vars(s)) for s in DCLM_LINE_SUBSTRINGS],
        description="modifier: substrings removed from short lines (DCLM's 'items in cart', 'Read more...', 'Sign-in')",
    )
    max_word_removal_ratio: float | None = _rule(0.05, "words the line modifiers remove / words <= this")


@register("refinedweb_gopher_quality_filter")
class GopherQualityFilter(Filter[GopherQualityParams]):
    """DCLM's RefinedWeb/Gopher quality rules (length, word length, symbols, bullets, ellipses,
    alphabetic words, stop words, line/paragraph/n-gram repetition, line-modifier word removal).

    The rules run in DCLM's order (its ``refinedweb.yaml``: page length ... repetition, then the
    line modifiers and ``word_removal_ratio_filter``) and the drop reason names the first one a
    page fails, e.g. ``gopher_dup_5gram_char_frac > max``.  Every stat is computed for every row,
    so stats-only runs see them all.  Like DCLM, every rule except the last judges the text as it
    is; the line modifiers (uppercase, all-digit, counter and one-word lines, boilerplate
    substrings) only feed ``word_removal_ratio``.  This op is a filter: it never rewrites the
    text, so kept pages still hold the lines DCLM's modifiers would have removed (at most 5% of
    their words by default).  DCLM's ``url_removal_modifier`` (before these rules in its yaml)
    is not part of this op; its ``newline_removal_modifier`` changes none of these stats."""

    reads: ClassVar[tuple[str, ...]] = ("texts",)
    stat_names: ClassVar[tuple[str, ...]] = STAT_NAMES

    def __init__(self, params: GopherQualityParams, artifacts=None):
        super().__init__(params, artifacts)
        p = params
        self.modifiers = LineModifiers(
            max_uppercase_ratio=p.max_line_uppercase_ratio,
            max_numeric_ratio=p.max_line_numeric_ratio,
            remove_counter_lines=p.remove_counter_lines,
            min_line_words=p.min_line_words,
            substrings=tuple(LineSubstring(s.pattern, s.location, s.max_words) for s in p.line_substrings),
        )
        rules: list[tuple[str, Any, Any]] = [
            ("gopher_word_count", p.min_words, p.max_words),
            ("gopher_mean_word_length", p.min_mean_word_length, p.max_mean_word_length),
            ("gopher_symbol_word_ratio", None, p.max_symbol_word_ratio),
            ("gopher_bullet_line_frac", None, p.max_bullet_line_frac),
            ("gopher_ellipsis_line_frac", None, p.max_ellipsis_line_frac),
            ("gopher_non_alpha_word_frac", None, p.max_non_alpha_word_frac),
            ("gopher_stop_word_count", p.min_stop_words, None),
            ("gopher_dup_line_frac", None, p.max_dup_line_frac),
            ("gopher_dup_para_frac", None, None if p.skip_paragraph else p.max_dup_para_frac),
            ("gopher_dup_line_char_frac", None, p.max_dup_line_char_frac),
            ("gopher_dup_para_char_frac", None, None if p.skip_paragraph else p.max_dup_para_char_frac),
            *((top_stat(n), None, getattr(p, f"max_top_{n}gram_char_frac")) for n in (2, 3, 4)),
            *((dup_stat(n), None, getattr(p, f"max_dup_{n}gram_char_frac")) for n in range(5, 11)),
            ("word_removal_ratio", None, p.max_word_removal_ratio),
        ]
        self.rules = [(name, lo, hi) for name, lo, hi in rules if lo is not None or hi is not None]

    def columns_read(self) -> tuple[str, ...]:
        return (self.params.text_key,) if self.params.text_key else self.reads

    def row_texts(self, table: pa.Table) -> list[str]:
        """Each row's text: the plain column, or the document's text positions joined."""
        key = self.params.text_key
        if key:
            return [t or "" for t in table.column(key).to_pylist()]
        return [document_text(t) for t in table.column("texts").to_pylist()]

    def compute_stats(self, table: pa.Table) -> dict[str, Sequence[Any]]:
        mods = self.modifiers
        rows = [gopher_stats(text, mods) for text in self.row_texts(table)]
        return {name: [r[name] for r in rows] for name in STAT_NAMES}

    def drop_reasons(self, stats: dict[str, Sequence[Any]]) -> list[str | None]:
        n = len(stats[STAT_NAMES[0]])
        reasons: list[str | None] = [None] * n
        for name, lo, hi in self.rules:  # DCLM order: a row keeps the first rule it fails
            values = stats[name]
            for i in range(n):
                if reasons[i] is None:
                    reasons[i] = range_reason(values[i], name, lo, hi)
        return reasons
