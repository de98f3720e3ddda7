"""remove_words_with_incorrect_substrings_mapper (Data-Juicer): drop words holding e.g. "http".

A word (split on '\\n', '\\t', ' ') is removed when, stripped of special characters, it contains
any of ``substrings``.  With ``tokenization`` the words are the pieces of Data-Juicer's sentencepiece
model (their ``▁`` marks removed before the test), as there; one deliberate difference: Data-Juicer
joins the kept pieces with "" (every space of a text that lost a piece is gone), raypress decodes
them with the model, so the kept words keep their spaces."""

from __future__ import annotations

from pydantic import Field

from raypress.operators.base import TextMapper
from raypress.operators.registry import register
from raypress.operators.text.models.locate import sentencepiece_file
from raypress.operators.text.models.sentencepiece import load_sentencepiece
from raypress.operators.text.templates.tokenized_params import TokenizedParams
from raypress.operators.text.words.edits import keep_words
from raypress.operators.text.words.vocabulary import SPECIAL_CHARACTERS, strip

DEFAULT_SUBSTRINGS = ("http", "www", ".com", "href", "//")


class RemoveWordsWithIncorrectSubstringsParams(TokenizedParams):
    substrings: list[str] | None = Field(
        default=None,
        description="a word containing any of these is removed (None: http, www, .com, href, //)",
    )


@register("remove_words_with_incorrect_substrings_mapper",
          requires_when={"tokenization": {"sentencepiece": "text"}})
class RemoveWordsWithIncorrectSubstringsMapper(TextMapper[RemoveWordsWithIncorrectSubstringsParams]):
    """Remove words containing any of the given substrings (URLs by default; Data-Juicer's op)."""

    def __init__(self, params: RemoveWordsWithIncorrectSubstringsParams, artifacts=None):
        super().__init__(params, artifacts)
        subs = DEFAULT_SUBSTRINGS if params.substrings is None else params.substrings
        self._substrings = tuple(subs)
        self._sp = (load_sentencepiece(str(sentencepiece_file(params.lang, params.sp_model_path, self.name)))
                    if params.tokenization else None)

    def _keep(self, word: str) -> bool:
        word = strip(word, SPECIAL_CHARACTERS)
        return not any(s in word for s in self._substrings)

    def process_text(self, text: str) -> str:
        if self._sp is None:
            return keep_words(text, self._keep)
        pieces = self._sp.encode_as_pieces(text)
        kept = [p for p in pieces if self._keep(p.replace("▁", ""))]
        return text if len(kept) == len(pieces) else self._sp.decode_pieces(kept)
