"""replace_content_mapper (Data-Juicer): replace what one or more regular expressions match.

``pattern`` is one pattern or a list, applied in order (each to the previous one's output);
``repl`` is one replacement for all of them or a list with one per pattern.  Patterns are matched
with DOTALL and Data-Juicer's ``regex`` semantics, and may be written ``r'...'``.  Data-Juicer
finds a ``repl`` list shorter than ``pattern`` (or a replacement naming a missing group) only
when the first row is processed; here validation reports it."""

from __future__ import annotations

from pydantic import Field, ValidationInfo, field_validator

from raypress.operators.base import TextParams
from raypress.operators.registry import register
from raypress.operators.text.templates.user_patterns import SubstituteMapper, check_replacement, recipe_pattern


class ReplaceContentParams(TextParams):
    pattern: str | list[str] | None = Field(
        default=None, description="regular expression(s) to replace, applied in order (None: the op does nothing)")
    repl: str | list[str] = Field(
        default="", description="replacement for every pattern, or a list with one per pattern")

    @field_validator("pattern")
    @classmethod
    def _patterns(cls, value: str | list[str] | None) -> str | list[str] | None:
        if isinstance(value, list):
            return [recipe_pattern(p) for p in value]
        return None if value is None else recipe_pattern(value)

    @field_validator("repl")
    @classmethod
    def _repls(cls, value: str | list[str], info: ValidationInfo) -> str | list[str]:
        if "pattern" not in info.data:  # the pattern failed: that is the error to report
            return value
        pairs = substitution_pairs(info.data["pattern"], value)
        for pattern, repl in pairs:
            check_replacement(pattern, repl)
        return value


def substitution_pairs(pattern: str | list[str] | None, repl: str | list[str]) -> list[tuple[str, str]]:
    """(pattern, replacement) in the order they apply; ValueError when a list of replacements is
    shorter than the patterns."""
    patterns = [] if pattern is None else [pattern] if isinstance(pattern, str) else pattern
    if isinstance(repl, list) and len(repl) < len(patterns):
        raise ValueError(f"{len(patterns)} patterns but {len(repl)} replacements: give one replacement per "
                         "pattern, or a single string for all of them")
    return [(p, repl[i] if isinstance(repl, list) else repl) for i, p in enumerate(patterns)]


@register("replace_content_mapper")
class ReplaceContentMapper(SubstituteMapper[ReplaceContentParams]):
    """Replace the matches of regular expression(s) with replacement string(s) (Data-Juicer replace_content_mapper)."""

    def substitutions(self) -> list[tuple[str, str]]:
        return substitution_pairs(self.params.pattern, self.params.repl)
