"""remove_specific_chars_mapper (Data-Juicer): delete every occurrence of some characters.

Data-Juicer builds one character class from ``chars_to_remove``: its items (the characters of a
string, or the strings of a list) joined by ``|`` inside ``[...]``.  That class is what runs, so
raypress builds the same one: with two or more items ``|`` itself is removed too (the default
removes ``|``), and an item may use class syntax (``a-z``, ``\\d``).  The class is compiled with
Data-Juicer's ``regex`` semantics and checked while the pipeline is validated."""

from __future__ import annotations

from pydantic import Field, field_validator

from raypress.operators.base import TextParams
from raypress.operators.registry import register
from raypress.operators.text.templates.user_patterns import SubstituteMapper, recipe_pattern

DEFAULT_CHARS = "◆●■►▼▲▴∆▻▷❖♡□"


def removal_class(chars: str | list[str]) -> str | None:
    """Data-Juicer's pattern for ``chars_to_remove``; None when there is nothing to remove."""
    return f"[{'|'.join(chars)}]" if chars else None


class RemoveSpecificCharsParams(TextParams):
    chars_to_remove: str | list[str] = Field(
        default=DEFAULT_CHARS, description="characters to delete: a string, or a list of strings, joined into "
        "one regex character class as Data-Juicer does (so with 2+ items '|' is deleted too)")

    @field_validator("chars_to_remove")
    @classmethod
    def _class_compiles(cls, value: str | list[str]) -> str | list[str]:
        pattern = removal_class(value)
        if pattern is not None:
            recipe_pattern(pattern, raw_quoting=False)
        return value


@register("remove_specific_chars_mapper")
class RemoveSpecificCharsMapper(SubstituteMapper[RemoveSpecificCharsParams]):
    """Delete the given characters from text (Data-Juicer remove_specific_chars_mapper)."""

    def substitutions(self) -> list[tuple[str, str]]:
        pattern = removal_class(self.params.chars_to_remove)
        return [] if pattern is None else [(pattern, "")]
