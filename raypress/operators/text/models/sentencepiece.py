"""Data-Juicer's sentencepiece models, loaded once per process (found by ``locate``)."""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Callable

from raypress.operators.text.models.locate import sentencepiece_file


@lru_cache(maxsize=4)
def load_sentencepiece(path: str) -> Any:
    import sentencepiece

    sp = sentencepiece.SentencePieceProcessor()
    sp.load(path)
    return sp


def piece_splitter(lang: str, given: str | None, op: str) -> Callable[[str], list[str]]:
    """``encode_as_pieces`` of the op's sentencepiece model: Data-Juicer's word splitter when
    ``tokenization`` is on (the pieces keep sentencepiece's ``▁`` word marks, as there)."""
    return load_sentencepiece(str(sentencepiece_file(lang, given, op))).encode_as_pieces
