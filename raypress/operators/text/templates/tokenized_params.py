"""Data-Juicer's ``lang`` + ``tokenization`` parameter pair of its word-based text ops.

Its own module because ``tokenization: true`` loads a sentencepiece model: the ops that take these
params declare ``requires_when={"tokenization": {"sentencepiece": "text"}}``, the others never
import it."""

from __future__ import annotations

from typing import Callable

from pydantic import Field

from raypress.operators.base import TextParams
from raypress.operators.shared.files import LocalFile
from raypress.operators.text.models.locate import sentencepiece_file
from raypress.operators.text.models.sentencepiece import piece_splitter


class TokenizedParams(TextParams):
    """Data-Juicer's ``lang`` + ``tokenization`` pair: words split on whitespace, or (tokenization)
    the pieces of Data-Juicer's ``{lang}.sp.model`` sentencepiece model, found locally (``models.locate``).
    """

    lang: str = Field(default="en", description="language of the samples (picks {lang}.sp.model)")
    tokenization: bool = Field(
        default=False,
        description="split words into the pieces of the sentencepiece model {lang}.sp.model (looked up "
        "in $RAYPRESS_DJ_MODELS or Data-Juicer's model cache; never downloaded) instead of on whitespace",
    )
    sp_model_path: LocalFile | None = Field(
        default=None, description="raypress: a local sentencepiece model for tokenization=True, "
        "instead of {lang}.sp.model found by name")


    def word_splitter(self, op: str) -> Callable[[str], list[str]] | None:
        """The sentencepiece splitter when tokenization is on, else None (whitespace)."""
        return piece_splitter(self.lang, self.sp_model_path, op) if self.tokenization else None

    def with_model_files(self, op: str) -> "TokenizedParams":
        if not self.tokenization:
            return self
        return self.model_copy(update={"sp_model_path": str(sentencepiece_file(self.lang, self.sp_model_path, op))})
