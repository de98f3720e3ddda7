"""whitespace_normalization_mapper (Data-Juicer): every kind of Unicode whitespace -> ' '.

Only non-ASCII characters (bar the tab) change, so ASCII text takes a shortcut; otherwise one regex
pass finds the few characters to replace, several times faster than ``str.translate``, which looks
every character of a non-ASCII string up in a dict."""

from __future__ import annotations

import re

from raypress.operators.base import TextMapper, TextParams
from raypress.operators.registry import register
from raypress.operators.text.words.vocabulary import VARIOUS_WHITESPACES

_OTHER_WHITESPACE = re.compile("[" + "".join(re.escape(c) for c in sorted(VARIOUS_WHITESPACES - {" "})) + "]")


@register("whitespace_normalization_mapper")
class WhitespaceNormalizationMapper(TextMapper[TextParams]):
    """Strip text, then turn each kind of Unicode whitespace into ' ' (Data-Juicer's op).

    ``str.strip`` removes all whitespace, newlines included, at both ends; inside the text,
    newlines are kept and the characters of VARIOUS_WHITESPACES become ' '."""

    def process_text(self, text: str) -> str:
        text = text.strip()
        return text.replace("\t", " ") if text.isascii() else _OTHER_WHITESPACE.sub(" ", text)
