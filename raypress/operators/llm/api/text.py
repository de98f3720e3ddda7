"""Data-Juicer's small text helpers that its LLM ops parse answers with (same behaviour)."""

from __future__ import annotations

import re

# any Chinese/full-width punctuation, or any ASCII punctuation (Data-Juicer's split_text_by_punctuation)
_PUNCTUATION = re.compile(r'[\u3000-\u303f\uff00-\uffef]|[!"#$%&\'()*+,-./:;<=>?@[\\\]^_`{|}~]')


def split_text_by_punctuation(text: str) -> list[str]:
    """The non-blank pieces of ``text`` between punctuation marks, stripped; ``[text]`` when none."""
    pieces = [s.strip() for s in _PUNCTUATION.split(text) if s.strip()]
    return pieces or [text]


def remove_outer_quotes(text: str) -> str:
    """``"x"`` or ``'x'`` -> ``x``; anything else as it is."""
    if text and text[0] == text[-1] and text[0] in "\"'":
        return text[1:-1]
    return text


def is_float(text: str) -> bool:
    try:
        float(text)
    except (TypeError, ValueError):
        return False
    return True


def dedupe(items: list) -> list:
    """``items`` without repeats, first occurrence kept (Data-Juicer uses ``set``, whose order varies
    from run to run; raypress keeps the answer's order so a rerun writes the same rows)."""
    return list(dict.fromkeys(items))
