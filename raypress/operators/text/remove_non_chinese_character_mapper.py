"""remove_non_chinese_character_mapper (Data-Juicer): keep only Chinese characters (CJK Unified
Ideographs U+4E00-U+9FA5), optionally also ASCII letters, ASCII digits and Data-Juicer's set of
punctuation (``.， ,-。%《*》/•、&＆(—)（+）：？!！“”·``, the space included).  Everything else goes:
other scripts, accented letters, emoji, Kangxi radicals, newlines."""

from __future__ import annotations

from pydantic import Field

from raypress.operators.base import TextParams
from raypress.operators.registry import register
from raypress.operators.text.templates.user_patterns import SubstituteMapper

HAN = "\u4e00-\u9fa5"
LETTERS = "A-Za-z"
DIGITS = "0-9"
PUNCTUATION = ".， ,\\-。%《*》/•、&＆(—)（+）：？!！“”·"  # inside a class: '-' escaped


class RemoveNonChineseCharacterParams(TextParams):
    keep_alphabet: bool = Field(default=True, description="also keep ASCII letters A-Z, a-z")
    keep_number: bool = Field(default=True, description="also keep ASCII digits 0-9")
    keep_punc: bool = Field(default=True, description="also keep Data-Juicer's Chinese and ASCII punctuation set "
                            "and the space")


@register("remove_non_chinese_character_mapper")
class RemoveNonChineseCharacterMapper(SubstituteMapper[RemoveNonChineseCharacterParams]):
    """Remove every character that is not Chinese (optionally keeping ASCII letters, digits and
    punctuation) (Data-Juicer remove_non_chinese_character_mapper)."""

    def substitutions(self) -> list[tuple[str, str]]:
        p = self.params
        kept = HAN + (LETTERS if p.keep_alphabet else "") + (DIGITS if p.keep_number else "") + \
            (PUNCTUATION if p.keep_punc else "")
        return [(f"[^{kept}]+", "")]
