"""Hugging Face tokenizers (``tokenizer.json``) loaded with ``tokenizers``."""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Callable

from pathlib import Path


@lru_cache(maxsize=4)
def load_hf_tokenizer(path: str) -> Any:
    from tokenizers import Tokenizer

    return Tokenizer.from_file(path)


def hf_token_splitter(path: Path) -> Callable[[str], list[str]]:
    """The tokens transformers' ``tokenizer.tokenize(text)`` gives for the tokenizer.json at
    ``path`` (found by ``locate.hf_tokenizer_file``): no special tokens added."""
    tokenizer = load_hf_tokenizer(str(path))
    return lambda text: tokenizer.encode(text, add_special_tokens=False).tokens
