"""Hugging Face tokenizers (``tokenizer.json``) loaded with ``tokenizers``, found by ``dj_models``."""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Callable

from raypress.operators.text.dj_models import hf_tokenizer_file


@lru_cache(maxsize=4)
def load_hf_tokenizer(path: str) -> Any:
    from tokenizers import Tokenizer

    return Tokenizer.from_file(path)


def hf_token_splitter(name: str, op: str) -> Callable[[str], list[str]]:
    """The tokens transformers' ``tokenizer.tokenize(text)`` gives: no special tokens added."""
    tokenizer = load_hf_tokenizer(str(hf_tokenizer_file(name, op)))
    return lambda text: tokenizer.encode(text, add_special_tokens=False).tokens
