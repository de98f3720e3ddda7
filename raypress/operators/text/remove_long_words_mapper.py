"""remove_long_words_mapper (Data-Juicer): drop words whose length is outside [min_len, max_len].

A word (split on '\\n', '\\t', ' ') stays when its own length is in range, or else its length once
stripped of special characters (so "eyebrows." counts as 8 with max_len 8)."""

from __future__ import annotations

import sys

from pydantic import Field

from raypress.operators.base import TextMapper, TextParams
from raypress.operators.registry import register
from raypress.operators.text.words.edits import keep_words
from raypress.operators.text.words.vocabulary import SPECIAL_CHARACTERS, strip


class RemoveLongWordsParams(TextParams):
    min_len: int = Field(default=1, description="words shorter than this are removed")
    max_len: int = Field(default=sys.maxsize, description="words longer than this are removed")


@register("remove_long_words_mapper")
class RemoveLongWordsMapper(TextMapper[RemoveLongWordsParams]):
    """Remove words shorter than min_len or longer than max_len (Data-Juicer's op); separators are
    collapsed as Data-Juicer re-joins the words."""

    def __init__(self, params: RemoveLongWordsParams, artifacts=None):
        super().__init__(params, artifacts)
        self._lo, self._hi = params.min_len, params.max_len

    def _keep(self, word: str) -> bool:
        lo, hi = self._lo, self._hi
        return lo <= len(word) <= hi or lo <= len(strip(word, SPECIAL_CHARACTERS)) <= hi

    def process_text(self, text: str) -> str:
        return keep_words(text, self._keep)
