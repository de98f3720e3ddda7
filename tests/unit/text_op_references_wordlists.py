"""The word-list and regex-cleaning text ops as they were before their numba kernels
(``raypress.kernels.wordlist_hits``, ``raypress.kernels.anchored_spans``): the default
(whitespace-split, unaugmented) path of stopwords/flagged_words_filter, the regex substitution of
clean_links/clean_email_mapper, the character ratio of special_characters_filter.

Self-contained on purpose: the word splitting is a copy of ``CodepointBatch``'s numpy code as
it was (so a change to the shared word code cannot change the reference along with the op); only
Data-Juicer's character set and the word lists are imported; the patterns are copied."""

from __future__ import annotations

import re
from typing import Callable

import numpy as np

from raypress.operators.text.words.lists import words_for_lang
from raypress.operators.text.words.vocabulary import SPECIAL_CHARACTERS


# The ops' patterns as they were, copied so that the reference cannot change with them.
EMAIL_PATTERN = r"[A-Za-z0-9.\-+_]+@[a-z0-9.\-+_]+\.[a-z]+"
LINKS_PATTERN = (
    r"(?i)\b("
    r"(?:[a-z][\w-]+:(?:\/{1,3}|[a-z0-9%])|www\d{0,3}[.]|[a-z0-9.\-]+[.][a-z]{2,4}\/)"
    r"(?:[^\s()<>]|\(([^\s()<>]|(\([^\s()<>]+\)))*\))"
    r"+(?:\(([^\s()<>]|(\([^\s()<>]+\)))*\)|[^\s`!()\[\]{};:\'\".,<>?«»“”‘’])"
    r")"
)


def _special_lut() -> np.ndarray:
    lut = np.zeros(0x110000, dtype=bool)
    lut[[ord(c) for c in SPECIAL_CHARACTERS]] = True
    return lut


_SPECIAL = _special_lut()


def _ratio_in_list(texts: list[str | None], listed: frozenset[str]) -> list[float]:
    """Share of each row's lower-cased, stripped words found in ``listed`` (WordListRatioFilter's
    batch_values before the kernel: one code-point array for the batch, a set lookup per word)."""
    rows = [t.lower() if t else "" for t in texts]
    text = " ".join(rows)
    cps = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
    starts = np.zeros(len(rows), dtype=np.int64)
    if len(rows) > 1:
        np.cumsum(lengths[:-1] + 1, out=starts[1:])
    keep = np.flatnonzero(~_SPECIAL[cps])
    if len(keep) == 0:
        return [0.0] * len(rows)
    is_sep = (cps == 32) | (cps == 10) | (cps == 9)
    run = np.cumsum(is_sep)[keep]
    boundary = run[1:] != run[:-1]
    w_starts = keep[np.concatenate(([True], boundary))]
    w_ends = keep[np.concatenate((boundary, [True]))] + 1
    words = [text[a:b] for a, b in zip(w_starts.tolist(), w_ends.tolist())]
    counts = np.bincount(np.searchsorted(starts, w_starts, side="right") - 1, minlength=len(rows))
    found = np.fromiter((w in listed for w in words), dtype=bool, count=len(words))
    row_of = np.repeat(np.arange(len(rows)), counts)
    hits = np.bincount(row_of, weights=found, minlength=len(rows))
    ratios = np.where(counts > 0, hits / np.maximum(counts, 1), 0.0)
    return np.minimum(ratios, 1.0).tolist()


def stopwords_filter(texts: list[str | None], lang: str = "en", stopwords_dir: str | None = None,
                     **_: object) -> list[float]:
    return _ratio_in_list(texts, words_for_lang(stopwords_dir, "stopwords", lang))


def flagged_words_filter(texts: list[str | None], lang: str = "en", flagged_words_dir: str | None = None,
                         **_: object) -> list[float]:
    return _ratio_in_list(texts, words_for_lang(flagged_words_dir, "flagged_words", lang))


def _unwrap_raw(pattern: str) -> str:
    if len(pattern) > 2 and pattern[:2] in ("r'", 'r"') and pattern[-1] == pattern[1]:
        return pattern[2:-1]
    return pattern


def clean_links_mapper(texts: list[str | None], pattern: str | None = None, repl: str = "",
                       **_: object) -> list[str | None]:
    regex = re.compile(LINKS_PATTERN if pattern is None else _unwrap_raw(pattern), re.DOTALL)
    return [None if t is None else regex.sub(repl, t) for t in texts]


def clean_email_mapper(texts: list[str | None], pattern: str | None = None, repl: str = "",
                       **_: object) -> list[str | None]:
    regex = re.compile(EMAIL_PATTERN if pattern is None else _unwrap_raw(pattern), re.DOTALL)
    needle = "@" if pattern is None else None
    return [None if t is None else t if needle is not None and needle not in t else regex.sub(repl, t)
            for t in texts]


def special_characters_filter(texts: list[str | None], **_: object) -> list[float]:
    rows = [t if t is not None else "" for t in texts]
    cps = np.frombuffer(" ".join(rows).encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
    starts = np.zeros(len(rows), dtype=np.int64)
    if len(rows) > 1:
        np.cumsum(lengths[:-1] + 1, out=starts[1:])
    cumulative = np.zeros(len(cps) + 1, dtype=np.int64)
    np.cumsum(_SPECIAL[cps], out=cumulative[1:])
    counts = cumulative[starts + lengths] - cumulative[starts]
    return np.where(lengths > 0, counts / np.maximum(lengths, 1), 0.0).tolist()


REFERENCES: dict[str, Callable[..., list]] = {
    "stopwords_filter": stopwords_filter,
    "flagged_words_filter": flagged_words_filter,
    "clean_links_mapper": clean_links_mapper,
    "clean_email_mapper": clean_email_mapper,
    "special_characters_filter": special_characters_filter,
}
