"""Patterns a recipe hands to a text op (Data-Juicer's ``pattern``/``repl``, ``split_pattern``, ...).

Data-Juicer compiles them with the ``regex`` package and re.DOTALL; raypress compiles every one
with ``shared.unicode_regex.compile_pattern`` (the same semantics) and checks it while the pipeline
is validated, so a bad pattern, or a replacement naming a group the pattern lacks, is an error on
its YAML line instead of a quarantined row per document.  ``SubstituteMapper`` is the op that
rewrites each text with a list of (pattern, replacement) pairs in order."""

from __future__ import annotations

import re
from abc import abstractmethod
from typing import Any

from raypress.operators.base import TP, TextMapper
from raypress.operators.shared.unicode_regex import check_pattern, compile_pattern
from raypress.operators.text.templates.regex_clean import unwrap_raw

FLAGS = re.DOTALL  # what Data-Juicer's pattern ops pass


def recipe_pattern(value: str, raw_quoting: bool = True) -> str:
    """``value`` as Data-Juicer reads it (``r'...'`` / ``r"..."`` unwrapped when ``raw_quoting``),
    checked: ValueError saying why it does not compile."""
    pattern = unwrap_raw(value) if raw_quoting else value
    return check_pattern(pattern, FLAGS)


def check_replacement(pattern: str, repl: str) -> str:
    """``repl`` if it is a valid replacement template for ``pattern`` (group references exist,
    escapes are known), else ValueError: Python parses the template before looking for matches."""
    try:
        compile_pattern(pattern, FLAGS).sub(repl, "")
    except Exception as exc:  # re.error, regex.error, IndexError: all say the template is bad
        raise ValueError(f"replacement {repl!r} does not fit pattern {pattern!r}: {exc}") from None
    return repl


class SubstituteMapper(TextMapper[TP]):
    """Replace every match of each pattern of ``substitutions()`` by its replacement, in order."""

    @abstractmethod
    def substitutions(self) -> list[tuple[str, str]]:
        """(pattern, replacement) pairs, already checked by the params."""

    def __init__(self, params: TP, artifacts: Any = None):
        super().__init__(params, artifacts)
        self._subs = [(compile_pattern(p, FLAGS), r) for p, r in self.substitutions()]

    def process_text(self, text: str) -> str:
        for regex, repl in self._subs:
            text = regex.sub(repl, text)
        return text
