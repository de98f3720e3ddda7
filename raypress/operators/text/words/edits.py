"""Data-Juicer's word-removal layout: split a text on '\\n', then '\\t', then ' ', drop words, rejoin.

remove_long_words_mapper and remove_words_with_incorrect_substrings_mapper both edit text this way
(``split_on_newline_tab_whitespace`` / ``merge_on_whitespace_tab_newline`` in Data-Juicer's
``ops/common/helper_func.py``).  Rejoining collapses runs of separators even where no word was
removed: empty words, tab-fields and lines disappear, so "a  b\\n\\nc" becomes "a b\\nc".  That is
Data-Juicer's output, so it is kept; it is done here in one pass, without the nested lists."""

from __future__ import annotations

from typing import Callable


def keep_words(text: str, keep: Callable[[str], bool]) -> str:
    """``text`` with only the words for which ``keep`` is true, re-joined as Data-Juicer does."""
    lines: list[str] = []
    for line in text.split("\n"):
        fields: list[str] = []
        for field in line.split("\t"):
            words = [w for w in field.split(" ") if w and keep(w)]
            if words:
                fields.append(" ".join(words))
        if fields:
            lines.append("\t".join(fields))
    return "\n".join(lines)
