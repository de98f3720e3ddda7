"""punctuation_normalization_mapper (Data-Juicer): Unicode (mostly CJK fullwidth) punctuation -> ASCII.

Only non-ASCII characters change, so ASCII text takes a shortcut; otherwise one regex pass finds
the few characters to replace, several times faster than ``str.translate``, which looks every
character of a non-ASCII string up in a dict."""

from __future__ import annotations

import re

from raypress.operators.base import TextMapper, TextParams
from raypress.operators.registry import register

# Data-Juicer's table (after BigScience data-preparation), written as escapes because many of
# these characters look alike.  Note: fullwidth digit one (U+FF11) -> '"' is Data-Juicer's.
PUNCTUATION_UNICODE = {
    "\uff0c": ",",  # ，
    "\u3002": ".",  # 。
    "\u3001": ",",  # 、
    "\u201e": '"',  # „
    "\u201d": '"',  # ”
    "\u201c": '"',  # “
    "\u00ab": '"',  # «
    "\u00bb": '"',  # »
    "\uff11": '"',  # １
    "\u300d": '"',  # 」
    "\u300c": '"',  # 「
    "\u300a": '"',  # 《
    "\u300b": '"',  # 》
    "\u00b4": "'",  # ´
    "\u2236": ":",  # ∶
    "\uff1a": ":",  # ：
    "\uff1f": "?",  # ？
    "\uff01": "!",  # ！
    "\uff08": "(",  # （
    "\uff09": ")",  # ）
    "\uff1b": ";",  # ；
    "\u2013": "-",  # –
    "\u2014": " - ",  # —
    "\uff0e": ". ",  # ．
    "\uff5e": "~",  # ～
    "\u2019": "'",  # ’
    "\u2026": "...",  # …
    "\u2501": "-",  # ━
    "\u3008": "<",  # 〈
    "\u3009": ">",  # 〉
    "\u3010": "[",  # 【
    "\u3011": "]",  # 】
    "\uff05": "%",  # ％
    "\u25ba": "-",  # ►
}
_PUNCTUATION = re.compile("[" + "".join(re.escape(c) for c in PUNCTUATION_UNICODE) + "]")


def _ascii_punctuation(match: re.Match[str]) -> str:
    return PUNCTUATION_UNICODE[match.group()]


@register("punctuation_normalization_mapper")
class PunctuationNormalizationMapper(TextMapper[TextParams]):
    """Map Unicode (mostly CJK fullwidth) punctuation to ASCII (Data-Juicer's op)."""

    def process_text(self, text: str) -> str:
        return text if text.isascii() else _PUNCTUATION.sub(_ascii_punctuation, text)
