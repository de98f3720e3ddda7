"""The previous (pure-Python) implementations of Data-Juicer text ops that were made faster: each
is a function ``texts -> per-row values`` (a filter's stat, a mapper's output text), kept so that
tests compare the fast op with it row by row on real text, and ``bench/text_ops.py --reference``
times it.  One module per group of ops (each owned by the change that made them faster)."""

from __future__ import annotations

from typing import Callable

REFERENCES: dict[str, Callable[..., list]] = {}

for _module in ("text_op_references_repetition", "text_op_references_wordlists"):
    try:
        REFERENCES.update(__import__(_module).REFERENCES)
    except ModuleNotFoundError as _exc:  # a group not written yet
        if _exc.name != _module:
            raise
