"""The pure-Python implementations of the repetition and word-count text ops before their numba
kernels (``raypress.kernels.text_ngrams``): per row, as the ops computed them, for the default
(whitespace-split, untokenized) path.  Self-contained on purpose: they depend on no code the fast
ops use, only on Data-Juicer's character set, so a change to the shared word splitting cannot
change the reference along with the op."""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Callable

from raypress.operators.text.words.vocabulary import SPECIAL_CHARACTERS


def _words(text: str, lower_case: bool) -> list[str]:
    """Data-Juicer's words: split on ' ', '\\n', '\\t', optionally lower-cased, stripped of special
    characters at both ends, empty ones dropped."""
    if lower_case:
        text = text.lower()
    out = []
    for w in text.replace("\n", " ").replace("\t", " ").split(" "):
        i, j = 0, len(w)
        while i < j and w[i] in SPECIAL_CHARACTERS:
            i += 1
        while j > i and w[j - 1] in SPECIAL_CHARACTERS:
            j -= 1
        if i < j:
            out.append(w[i:j])
    return out


def character_repetition_filter(texts: list[str | None], rep_len: int = 10, **_: object) -> list[float]:
    ngrams = re.compile("(?=(.{%d}))" % rep_len, re.DOTALL)
    out = []
    for text in texts:
        text = text or ""
        total = len(text) - rep_len + 1
        if total <= 0:
            out.append(0.0)
            continue
        freqs = sorted(Counter(ngrams.findall(text)).values(), reverse=True)
        repeated = len(freqs) - freqs.count(1)
        k = min(math.isqrt(len(freqs)), repeated)
        out.append(sum(freqs[:k]) / total)
    return out


def word_repetition_filter(texts: list[str | None], rep_len: int = 10, **_: object) -> list[float]:
    out = []
    for text in texts:
        words = _words(text or "", lower_case=True)
        total = len(words) - rep_len + 1
        if total <= 0:
            out.append(0.0)
            continue
        freqs = Counter(" ".join(words[i:i + rep_len]) for i in range(total)).values()
        out.append(sum(f for f in freqs if f > 1) / total)
    return out


def words_num_filter(texts: list[str | None], **_: object) -> list[int]:
    return [len(_words(text or "", lower_case=False)) for text in texts]


def alphanumeric_filter(texts: list[str | None], **_: object) -> list[float]:
    return [sum(map(str.isalnum, t)) / len(t) if t else 0.0 for t in texts]


REFERENCES: dict[str, Callable[..., list]] = {
    "character_repetition_filter": character_repetition_filter,
    "word_repetition_filter": word_repetition_filter,
    "words_num_filter": words_num_filter,
    "alphanumeric_filter": alphanumeric_filter,
}
