"""Run a regex substitution only where it can match: the tokens of a batch that hold an anchor.

A cleaner's pattern declares ``Anchors``: short sequences of character classes such that

1. no match of the pattern contains a whitespace character (``\\s``), and
2. every match contains at least one anchor (e.g. a URL contains ``[\\w-]:[/a-z0-9%]`` or
   ``www`` or ``.`` + 2-4 letters + ``/``).

Then ``pattern.sub(repl, text)`` equals the text with only the *anchored* tokens (maximal runs
without whitespace that hold an anchor) substituted, each on its own, and the rest copied:

- a match lies inside one token (1), so a token without an anchor holds no match (2);
- the search reaches each token's start afresh (earlier matches ended inside earlier tokens),
  so it finds in the token what it finds in the token alone;
- at a token's edges the pattern sees whitespace in the text and the string's edge in the token
  alone; both are non-word and neither can be part of a match, so ``\\b`` and every character
  class decide the same (the pattern must not use ``^``, ``$``, ``\\A``, ``\\Z`` or lookarounds).

Several anchored tokens close together are substituted as one span (whole tokens and the
whitespace between them), which (by the same argument) changes nothing either.  The character
classes are read by Python's ``re`` itself, code point by code point, with the pattern's flags
(so ``(?i)[a-z]`` includes 'ſ' and the Kelvin sign, as it does in the pattern).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from raypress.kernels import anchored_spans
from raypress.operators.text.words.batch import CodepointBatch

SPACE_BIT = 0
# Anchored tokens at most this many code points apart are substituted as one span (the regex on a
# short gap costs about what a Python step per span does; measured: 0-32 alike, 128+ slower).
MERGE_GAP = 8


@dataclass(frozen=True)
class Anchors:
    """What every match of a whitespace-free pattern contains (module doc): each anchor is a
    sequence of single-character regex classes, read with ``flags`` (the pattern's)."""

    sequences: tuple[tuple[str, ...], ...]
    flags: int = 0


@dataclass(frozen=True)
class CompiledAnchors:
    lut: np.ndarray  # uint16 per code point: bit SPACE_BIT = \s, bit 1 + c = class c
    masks: np.ndarray  # uint16 (anchors, longest): each position's class bit
    lengths: np.ndarray  # int64 per anchor
    key_at: np.ndarray  # int64 per anchor: its position with the fewest code points (ties: the last)


@lru_cache(maxsize=8)
def compile_anchors(anchors: Anchors) -> CompiledAnchors:
    """The lookup table of the anchors' classes over all of Unicode (once per process, ~0.3 s)."""
    classes = sorted({c for seq in anchors.sequences for c in seq})
    if len(classes) > 15:
        raise ValueError(f"at most 15 distinct anchor classes, got {len(classes)}")
    every = "".join(map(chr, range(0x110000)))
    lut = np.zeros(0x110000, dtype=np.uint16)
    members = {}
    for bit, cls in enumerate([r"\s", *classes]):
        found = np.frombuffer("".join(re.findall(cls, every, anchors.flags)).encode("utf-32-le", "surrogatepass"),
                              dtype=np.uint32)
        if bit > SPACE_BIT and (lut[found] & (1 << SPACE_BIT)).any():
            raise ValueError(f"anchor class {cls!r} matches whitespace")
        lut[found] |= np.uint16(1 << bit)
        members[cls] = len(found)
    longest = max(map(len, anchors.sequences))
    masks = np.zeros((len(anchors.sequences), longest), dtype=np.uint16)
    key_at = np.zeros(len(anchors.sequences), dtype=np.int64)
    for q, seq in enumerate(anchors.sequences):
        masks[q, : len(seq)] = [1 << (1 + classes.index(c)) for c in seq]
        key_at[q] = min(reversed(range(len(seq))), key=lambda m: members[seq[m]])  # ties: the last
    lengths = np.array([len(seq) for seq in anchors.sequences], dtype=np.int64)
    return CompiledAnchors(lut, masks, lengths, key_at)


def sub_anchored(regex: re.Pattern, repl: str, texts: list[str | None], anchors: Anchors) -> list[str | None]:
    """``[regex.sub(repl, t) for t in texts]`` (None stays None), computed on anchored spans only."""
    compiled = compile_anchors(anchors)
    batch = CodepointBatch.of(texts)
    rows, starts, ends = anchored_spans.anchored_spans(batch.cps, batch.starts, batch.lengths, compiled.lut,
                                                       SPACE_BIT, compiled.masks, compiled.lengths,
                                                       compiled.key_at, MERGE_GAP)
    out = list(texts)
    sub = regex.sub
    rows_l, starts_l, ends_l = rows.tolist(), starts.tolist(), ends.tolist()
    k, n = 0, len(rows_l)
    while k < n:
        r = rows_l[k]
        text = texts[r]
        parts = []
        done = 0
        while k < n and rows_l[k] == r:
            a, b = starts_l[k], ends_l[k]
            parts.append(text[done:a])
            parts.append(sub(repl, text[a:b]))
            done = b
            k += 1
        parts.append(text[done:])
        out[r] = "".join(parts)
    return out
