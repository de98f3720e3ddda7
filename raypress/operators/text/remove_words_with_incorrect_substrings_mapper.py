"""remove_words_with_incorrect_substrings_mapper (Data-Juicer): drop words holding e.g. "http".

A word (split on '\\n', '\\t', ' ') is removed when, stripped of special characters, it contains
any of ``substrings``.  Only the whitespace path (``tokenization: false``) is available."""

from __future__ import annotations

from pydantic import Field

from raypress.operators.base import TextMapper
from raypress.operators.registry import register
from raypress.operators.text.params import TokenizedParams
from raypress.operators.text.word_edits import keep_words
from raypress.operators.text.words import SPECIAL_CHARACTERS, strip

DEFAULT_SUBSTRINGS = ("http", "www", ".com", "href", "//")


class RemoveWordsWithIncorrectSubstringsParams(TokenizedParams):
    substrings: list[str] | None = Field(
        default=None,
        description="a word containing any of these is removed (None: http, www, .com, href, //)",
    )


@register("remove_words_with_incorrect_substrings_mapper")
class RemoveWordsWithIncorrectSubstringsMapper(TextMapper[RemoveWordsWithIncorrectSubstringsParams]):
    """Remove words containing any of the given substrings (URLs by default; Data-Juicer's op)."""

    def __init__(self, params: RemoveWordsWithIncorrectSubstringsParams, artifacts=None):
        super().__init__(params, artifacts)
        subs = DEFAULT_SUBSTRINGS if params.substrings is None else params.substrings
        self._substrings = tuple(subs)

    def _keep(self, word: str) -> bool:
        word = strip(word, SPECIAL_CHARACTERS)
        return not any(s in word for s in self._substrings)

    def process_text(self, text: str) -> str:
        return keep_words(text, self._keep)
