"""A batch of texts as one array of code points: character classes and words for all rows at once.

The per-row Python in ``vocabulary`` is the reference; this is the same arithmetic in numpy, which is
several times faster on a 1024-row batch (one ``str.encode`` and a few array passes instead of
a Python step per character or word).  Texts are joined with ' ', which is both a word
separator and a special character, so no word or count crosses from one row into the next.
Where numba imports (a core dependency), words are found and counted by the one-pass loops of
``raypress.kernels.text_ngrams`` instead of numpy's several passes: the same spans and counts.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

import numpy as np

from raypress.kernels import text_ngrams
from raypress.operators.text.words.vocabulary import SPECIAL_CHARACTERS

_N_CODEPOINTS = 0x110000


@lru_cache(maxsize=1)
def special_lut() -> np.ndarray:
    """``lut[cp]``: is chr(cp) in SPECIAL_CHARACTERS."""
    lut = np.zeros(_N_CODEPOINTS, dtype=bool)
    lut[[ord(c) for c in SPECIAL_CHARACTERS]] = True
    return lut


@lru_cache(maxsize=1)
def alnum_lut() -> np.ndarray:
    """``lut[cp]``: chr(cp).isalnum(), from Python's own Unicode tables (built once, ~0.2 s)."""
    return np.fromiter((chr(cp).isalnum() for cp in range(_N_CODEPOINTS)), dtype=bool, count=_N_CODEPOINTS)


@dataclass(frozen=True)
class CodepointBatch:
    text: str  # the rows joined by " "
    cps: np.ndarray  # uint32 code points of `text`
    starts: np.ndarray  # int64 index of each row's first character in `text`
    lengths: np.ndarray  # int64 length of each row, in code points

    @classmethod
    def of(cls, texts: Sequence[str | None]) -> "CodepointBatch":
        """None counts as the empty text, as TextFilter treats it."""
        rows = [t if t is not None else "" for t in texts]
        text = " ".join(rows)
        # numpy's str -> UCS4 copy: the code points of str.encode("utf-32-le", "surrogatepass"),
        # lone surrogates and trailing NULs included, at twice its speed ("" would give one 0)
        cps = np.array(text).reshape(1).view(np.uint32) if text else np.zeros(0, dtype=np.uint32)
        lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
        starts = np.zeros(len(rows), dtype=np.int64)
        if len(rows) > 1:
            np.cumsum(lengths[:-1] + 1, out=starts[1:])
        return cls(text, cps, starts, lengths)

    def __len__(self) -> int:
        return len(self.lengths)

    def count_per_row(self, mask: np.ndarray) -> np.ndarray:
        """How many positions of each row are True in ``mask`` (aligned with ``cps``)."""
        cumulative = np.zeros(len(mask) + 1, dtype=np.int64)
        np.cumsum(mask, out=cumulative[1:])
        return cumulative[self.starts + self.lengths] - cumulative[self.starts]

    def ratio_per_row(self, lut: np.ndarray) -> list[float]:
        """Share of each row's characters whose code point is True in ``lut``; 0.0 for empty rows."""
        if text_ngrams.available():  # one pass, no bool array of the batch and its cumsum
            counts = text_ngrams.count_per_row(self.cps, self.starts, self.lengths, lut)
        else:
            counts = self.count_per_row(lut[self.cps])
        safe = np.maximum(self.lengths, 1)
        return np.where(self.lengths > 0, counts / safe, 0.0).tolist()

    def word_spans(self) -> tuple[np.ndarray, np.ndarray]:
        """Start and end of every word after stripping special characters, in text order.

        A word is a run between ' ', '\\n', '\\t'; stripped of special characters at both ends
        it starts at its first non-special character and ends after its last; a run with no
        non-special character disappears (words.strip_words)."""
        if text_ngrams.available():
            starts, ends, _ = text_ngrams.word_spans(self.cps, self.starts, self.lengths, special_lut())
            return starts, ends
        cps = self.cps
        keep = np.flatnonzero(~special_lut()[cps])
        if len(keep) == 0:
            empty = np.zeros(0, dtype=np.int64)
            return empty, empty
        is_sep = (cps == 32) | (cps == 10) | (cps == 9)  # ' ', '\n', '\t': split_on_whitespace
        run = np.cumsum(is_sep)[keep]
        boundary = run[1:] != run[:-1]
        first = np.concatenate(([True], boundary))
        last = np.concatenate((boundary, [True]))
        return keep[first], keep[last] + 1

    def rows_of(self, positions: np.ndarray) -> np.ndarray:
        """Row index of each position in ``text``."""
        return np.searchsorted(self.starts, positions, side="right") - 1

    def word_counts(self) -> np.ndarray:
        """Number of (stripped, non-empty) words per row."""
        if text_ngrams.available():
            return text_ngrams.word_spans(self.cps, self.starts, self.lengths, special_lut(), emit=False)[2]
        starts, _ = self.word_spans()
        return np.bincount(self.rows_of(starts), minlength=len(self))

    def words(self) -> tuple[list[str], np.ndarray]:
        """Every stripped word, in order, and how many belong to each row."""
        if text_ngrams.available():
            starts, ends, counts = text_ngrams.word_spans(self.cps, self.starts, self.lengths, special_lut())
        else:
            starts, ends = self.word_spans()
            counts = np.bincount(self.rows_of(starts), minlength=len(self))
        text = self.text
        words = [text[a:b] for a, b in zip(starts.tolist(), ends.tolist())]
        return words, counts

    def word_ids(self) -> tuple[np.ndarray, np.ndarray]:
        """``(ids, counts)``: an int64 id per word, in order, equal within a row exactly for equal
        words (numba only: ``text_ngrams.span_ids``), and how many words belong to each row."""
        starts, ends, counts = text_ngrams.word_spans(self.cps, self.starts, self.lengths, special_lut())
        return text_ngrams.span_ids(self.cps, starts, ends, counts), counts

    def words_per_row(self) -> list[list[str]]:
        words, counts = self.words()
        bounds = np.concatenate(([0], np.cumsum(counts))).tolist()
        return [words[bounds[i] : bounds[i + 1]] for i in range(len(self))]
