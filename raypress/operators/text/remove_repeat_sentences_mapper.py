"""remove_repeat_sentences_mapper (Data-Juicer): keep the first occurrence of each sentence.

Lines (split on '\\n') are cut into sentences after an end mark (``.。!！?？``) that is not
followed by a closing quote, after a closing quote that follows an end mark, and after ``……``;
a sentence is a repeat when its key (stripped, lower-cased if ``lowercase``, and with everything
but ASCII letters/digits, CJK ideographs, tabs and spaces removed if ``ignore_special_character``)
was seen before anywhere in the text.  Keys shorter than ``min_repeat_sentence_length`` are never
repeats.  Kept sentences are joined as they were (their own spacing), lines by '\\n'."""

from __future__ import annotations

from typing import Callable

from pydantic import Field

from raypress.operators.base import TextMapper, TextParams
from raypress.operators.registry import register
from raypress.operators.shared.unicode_regex import compile_pattern

_NOT_QUOTE = "([^’”])"
# Data-Juicer's four rules, applied in this order, each putting a '\n' between group 1 and group 2.
# The last one's class is a set of single characters: Data-Juicer writes it `[.。!！？\?\.{6}\…{2}]`,
# so '{', '}', '6' and '2' followed by a closing quote end a sentence too.
_RULES = tuple(compile_pattern(p) for p in (
    "([.。！!？?])" + _NOT_QUOTE,
    r"(\.{6})" + _NOT_QUOTE,
    "(…{2})" + _NOT_QUOTE,
    "([.。!！？?{}62…][’”])" + _NOT_QUOTE,
))
_SPECIAL = compile_pattern("[^a-zA-Z0-9\u4e00-\u9fa5\n\t ]")


def split_sentences(line: str) -> list[str]:
    """The sentences of one line (no '\\n' in it), spacing kept: ''.join(result) == line."""
    for rule in _RULES:
        line = rule.sub("\\1\n\\2", line)
    return line.split("\n")


def drop_repeats(text: str, key: Callable[[str], str], min_len: int) -> str:
    seen: set[str] = set()
    lines = []
    for line in text.split("\n"):
        kept = []
        for sentence in split_sentences(line) if line else ():
            k = key(sentence)
            if len(k) >= min_len:
                if k in seen:
                    continue
                seen.add(k)
            kept.append(sentence)
        lines.append("".join(kept))
    return "\n".join(lines)


class RemoveRepeatSentencesParams(TextParams):
    lowercase: bool = Field(default=False, description="compare sentences lower-cased")
    ignore_special_character: bool = Field(
        default=True, description="compare sentences with only ASCII letters/digits, CJK ideographs, tabs and "
        "spaces kept")
    min_repeat_sentence_length: int = Field(
        default=2, description="sentences whose compared form is shorter than this are always kept")


@register("remove_repeat_sentences_mapper")
class RemoveRepeatSentencesMapper(TextMapper[RemoveRepeatSentencesParams]):
    """Remove sentences seen before in the same text (Data-Juicer remove_repeat_sentences_mapper)."""

    def key(self, sentence: str) -> str:
        """What two sentences must share to be repeats."""
        k = sentence.strip()
        if self.params.lowercase:
            k = k.lower()
        return _SPECIAL.sub("", k) if self.params.ignore_special_character else k

    def process_text(self, text: str) -> str:
        return drop_repeats(text, self.key, self.params.min_repeat_sentence_length)
