"""The statistics behind DCLM's RefinedWeb/Gopher quality rules, as pure functions of a string.

Each function follows the DCLM baselines code (``baselines/mappers/filters/content_filters.py``,
``modifiers.py``, ``core_utils.py``) so that a page's stats match what DCLM computes.  DCLM
tokenises three different ways, and so do we:

* ``text.split()`` (Python whitespace) for mean word length, symbol/word ratio, alphabetic
  words and stop words;
* fastText's tokeniser (split on `` \\n\\r\\t\\v\\f\\0`` only, so a no-break space joins words),
  keeping tokens whose first character is alphanumeric, for the page word count and the
  word-removal ratio (``split_words(ignore_punctuation=True)``);
* Unicode word segmentation (uniseg, UAX #29) without punctuation tokens for the n-gram
  repetition rules.  uniseg is pure Python and too slow for a per-page budget of a few ms, so
  ``segment_words`` reproduces it with one regex: runs of word characters, joined across the
  mid-word punctuation of UAX #29 (``' ‘ ’ . : ·`` between letters, ``, ; . ' ’`` between
  digits: ``don't``, ``U.S``, ``3,000.5``), Katakana runs apart, one word per Han, Hiragana or
  Thai letter and per superscript/circled number.  On 63 real pages (Common Crawl, ClueWeb
  Japanese, EDGAR, LaTeX) and 926 Debian doc pages it yields uniseg's exact tokens; known gaps
  are an underscore joining Katakana to letters and marks on Lao/Myanmar/Khmer script.

No Ray, no pyarrow: the op in ``refinedweb_gopher_quality_filter.py`` maps these over a batch.
"""

from __future__ import annotations

import re
import string
from bisect import bisect_left
from collections import Counter, deque
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import compress, product, repeat
from operator import add, itemgetter, not_
from typing import Callable, Iterable, Literal

STOP_WORDS = frozenset({"the", "be", "to", "of", "and", "that", "have", "with"})
# Every spelling whose lower() is a stop word: only ASCII ones, since the one non-ASCII character
# that lower-cases to ASCII is the Kelvin sign (to "k").  Lets the count skip lower-casing.
_STOP_WORDS_ANY_CASE = frozenset(
    "".join(letters) for word in STOP_WORDS for letters in product(*((c, c.upper()) for c in word))
)
BULLETS = ("●", "•", "*", "-")
ELLIPSES = ("...", ". . .", "\u2026")
SYMBOLS = ("#", "...", ". . .", "\u2026")
TOP_NGRAM_SIZES = (2, 3, 4)
DUP_NGRAM_SIZES = (5, 6, 7, 8, 9, 10)

# fastText's Dictionary::readWord splits on exactly these bytes.
_FASTTEXT_SPACES = " \n\r\t\v\f\x00"
_FASTTEXT_TOKEN = re.compile(r"[^ \n\r\t\v\f\x00]+")
# Characters on which str.split() and fastText disagree (fastText: NUL only; str.split: the rest).
_SPLIT_DIFFERS = re.compile("[\x00\x1c-\x1f\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]")
_NOT_FASTTEXT_SPACE = re.compile("[\x1c-\x1f\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]")
# UAX #29 approximation (see module docstring).  Han, Hiragana and Thai letters are words of one
# character each; Katakana runs are words of their own; other word characters join into runs
# across the mid-word punctuation of rules WB6/7 and WB11/12; combining marks and format
# characters (WB4) stay with the character before them.
_ONE_CHAR = (
    "\u0e01-\u0e30\u0e32\u0e33\u0e40-\u0e46\u3006\u3007\u3021-\u3029\u3041-\u3096\u309d-\u309f"
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f"
    # numbers that are not decimal digits (superscripts, fractions, circled): Word_Break=Other
    "\u00b2\u00b3\u00b9\u00bc-\u00be\u2070-\u209f\u2150-\u215f\u2189\u2460-\u24b5\u24ea-\u24ff"
    "\u2776-\u2793\u3251-\u325f\u3280-\u3289\u32b1-\u32bf"
)
_KATAKANA = "\u3031-\u3035\u309b\u309c\u30a0-\u30fa\u30fc-\u30ff\u31f0-\u31ff\u32d0-\u32fe\u3300-\u3357\uff66-\uff9d"
_MARKS = "\u00ad\u0300-\u036f\u0e31\u0e34-\u0e3a\u0e47-\u0e4e\u200c\u200d\u2060\u3099\u309a\ufe00-\ufe0f"
_MID_LETTER = ":\u00b7\u0387\u05f4\u2027\ufe13\ufe55\uff1a"
_MID_NUM_LET = ".'\u2018\u2019\u2024\ufe52\uff07\uff0e"
_MID_NUM = ",;\u037e\u0589\u060c\u060d\u066b\u066c\u07f8\u2044\ufe10\ufe14\ufe50\ufe54\uff0c\uff1b"
_J = rf"[^\W{_ONE_CHAR}{_KATAKANA}]"  # word characters that join into runs
_LETTER = rf"[^\W\d_{_ONE_CHAR}{_KATAKANA}]"
_RUN = rf"{_J}+(?:[{_MARKS}]+{_J}*)*"
_SEGMENT_WORD = re.compile(
    rf"{_RUN}(?:(?:(?<={_LETTER}|[{_MARKS}])[{_MID_LETTER}{_MID_NUM_LET}](?={_LETTER})"
    rf"|(?<=\d)[{_MID_NUM}{_MID_NUM_LET}](?=\d)){_RUN})*"
    rf"|[{_KATAKANA}]+[{_MARKS}]*|\w[{_MARKS}]*"
)
_COUNTER_BODY = (
    r"^\W*\d(?:,|\.|\d)*(?:K|k|M|m|B|b)?\s+(?:likes|shares|comments|retweets|reposts|quotes|"
    r"bookmarks|upvotes|downvotes|downloads|views|followers)\W*$"
)
_COUNTER_LINE = re.compile(_COUNTER_BODY)
# Every line it matches is also matched here (^/$ at line ends): a cheap whole-page pre-test.
_COUNTER_CANDIDATE = re.compile(_COUNTER_BODY, re.M)


# ---------------------------------------------------------------- tokenising and splitting
def fasttext_words(text: str) -> list[str]:
    """DCLM ``split_words(text, ignore_punctuation=True)``: fastText tokens starting alphanumeric."""
    return [w for w in _FASTTEXT_TOKEN.findall(text) if w[0].isalnum()]


def word_count(text: str, ws_words: list[str] | None = None) -> int:
    """The page length DCLM's ``page_length_filter`` and ``word_counter_enricher`` measure.

    ``ws_words`` (``text.split()``, when the caller has it) is reused when the text holds no
    character on which exactly one of fastText and ``str.split`` splits, the usual case."""
    if ws_words is None or _SPLIT_DIFFERS.search(text):
        # make str.split() split where fastText does: NUL becomes a space, the spaces fastText
        # does not split on become a character that is neither space nor alphanumeric
        ws_words = _NOT_FASTTEXT_SPACE.sub("\x01", text.replace("\x00", " ")).split()
    return sum(map(str.isalnum, map(itemgetter(0), ws_words)))


def segment_words(text: str) -> list[str]:
    """Words for the n-gram rules (uniseg words minus punctuation tokens, approximated)."""
    words = _SEGMENT_WORD.findall(text)
    if "_" in text:  # uniseg keeps "_foo" as one token, which then fails the isalnum test
        words = [w for w in words if w[0] != "_"]
    return words


def split_segments(text: str, sep: str) -> list[str]:
    """DCLM ``split_paragraphs(text, sep)``: split on ``sep``, strip, drop empty pieces."""
    return [s for piece in text.split(sep) if (s := piece.strip())]


# ---------------------------------------------------------------- the single-value rules
def mean_word_length(words: list[str]) -> float:
    """Mean length of whitespace tokens (punctuation included), 0.0 without words."""
    return sum(map(len, words)) / len(words) if words else 0.0


def symbol_word_ratio(text: str, n_words: int) -> float:
    """Occurrences of ``#`` and ellipses per whitespace token, 0.0 without words."""
    if not n_words:
        return 0.0
    return sum(text.count(s) for s in SYMBOLS) / n_words


def bullet_line_frac(lines: list[str]) -> float:
    """Share of (stripped, non-empty) lines starting with a bullet."""
    return sum(1 for line in lines if line.startswith(BULLETS)) / len(lines) if lines else 0.0


def ellipsis_line_frac(lines: list[str]) -> float:
    """Share of (stripped, non-empty) lines ending with an ellipsis."""
    return sum(1 for line in lines if line.endswith(ELLIPSES)) / len(lines) if lines else 0.0


def non_alpha_word_frac(words: list[str]) -> float:
    """Share of whitespace tokens without a single alphabetic character."""
    if not words:
        return 0.0
    # most tokens are all letters: only the others need a character scan
    others = compress(words, map(not_, map(str.isalpha, words)))
    return sum(1 for w in others if not any(map(str.isalpha, w))) / len(words)


def stop_word_count(words: Iterable[str]) -> int:
    """Whitespace tokens that lower-case to one of the eight Gopher stop words."""
    return sum(map(_STOP_WORDS_ANY_CASE.__contains__, words))


# ---------------------------------------------------------------- Gopher repetition
def dup_segment_fracs(segments: list[str]) -> tuple[float, float]:
    """(share of segments that are repeats, share of their characters) as in DCLM's
    ``repetition_filter`` for lines/paragraphs: every copy of a repeated segment counts,
    the first included; a page with fewer than two segments has no repetition."""
    if len(segments) < 2:
        return 0.0, 0.0
    counts = Counter(segments)
    if len(counts) == len(segments):
        return 0.0, 0.0
    dup = [(s, c) for s, c in counts.items() if c > 1]
    total_chars = sum(map(len, segments))
    return (sum(c for _, c in dup) / len(segments), sum(len(s) * c for s, c in dup) / total_chars)


def ngrams(words: list[str], n: int) -> Iterable[tuple[str, ...]]:
    """The page's n-grams in order (nltk.ngrams, as DCLM uses it)."""
    return zip(*(words[i:] for i in range(n)))


def ngram_repetition(
    words: list[str], top_sizes: Iterable[int] = TOP_NGRAM_SIZES, dup_sizes: Iterable[int] = DUP_NGRAM_SIZES
) -> tuple[dict[int, float], dict[int, float]]:
    """Gopher's n-gram repetition shares over the words' characters, as DCLM computes them.

    top (n in ``top_sizes``): characters of the most frequent n-gram times its count; among
    n-grams tied for most frequent, the longest (DCLM's ``most_common``).
    dup (n in ``dup_sizes``): characters of the words covered by any occurrence of an n-gram that
    occurs more than once, each word counted once (DCLM's ``all``).
    Both are 0.0 when no n-gram repeats.

    A repeated n-gram starting at i means a repeated (n-1)-gram starts at i, so only the smallest
    size counts every position; each larger one extends the n-grams that repeated at the size
    below (on a normal page a few hundred, then a handful)."""
    tops, dups = set(top_sizes), set(dup_sizes)
    sizes = range(min(tops | dups), max(tops | dups) + 1)
    n_words = len(words)
    lengths = list(map(len, words))
    total_chars = sum(lengths)
    top_out = {n: 0.0 for n in sorted(tops)}
    dup_out = {n: 0.0 for n in sorted(dups)}
    starts: list[int] = []  # where the n-grams of the previous size repeat
    grams: list[tuple[str, ...]] = []  # those n-grams
    for n in sizes:
        if n_words < n:
            break
        if n == sizes[0]:
            starts, grams = list(range(n_words - n + 1)), list(ngrams(words, n))
        else:
            keep = bisect_left(starts, n_words - n + 1)  # the n-gram must fit in the page
            starts, grams = starts[:keep], grams[:keep]
            # extend each (n-1)-gram by the word after it
            grams = list(map(add, grams, zip(map(words.__getitem__, map(add, starts, repeat(n - 1))))))
        counts = Counter(grams)
        if len(counts) == len(grams):  # nothing repeats now, nor at any larger size
            break
        if n in tops:
            top = max(counts.values())
            tied = compress(counts.keys(), map(top.__eq__, counts.values()))
            top_out[n] = max(sum(map(len, g)) for g in tied) * top / total_chars
        repeated = list(map((1).__lt__, map(counts.__getitem__, grams)))
        starts, grams = list(compress(starts, repeated)), list(compress(grams, repeated))
        if n in dups:
            covered = bytearray(n_words)  # mark words i..i+n-1 of every repeat, at C speed
            spans = map(slice, starts, map(add, starts, repeat(n)))
            deque(map(covered.__setitem__, spans, repeat(b"\x01" * n)), maxlen=0)
            dup_out[n] = sum(compress(lengths, covered)) / total_chars
    return top_out, dup_out


# ---------------------------------------------------------------- DCLM line modifiers
@dataclass(frozen=True)
class LineSubstring:
    """One ``substring_line_modifier`` with ``remove_substring_only=True``: on lines of at most
    ``max_words`` whitespace words, delete ``pattern`` (a case-insensitive regex, unescaped as in
    DCLM, so the dots of "read more..." match any character); drop the line if nothing is left."""

    pattern: str
    location: Literal["any", "prefix", "suffix"] = "any"
    max_words: int | None = 10


DCLM_LINE_SUBSTRINGS = (
    LineSubstring("items in cart", "any", 10),
    LineSubstring("Read more...", "suffix", 10),
    LineSubstring("Sign-in", "prefix", 10),
)


@dataclass(frozen=True)
class LineModifiers:
    """DCLM's RefinedWeb line modifiers, in the order they run (None / False switches one off)."""

    max_uppercase_ratio: float | None = 0.5
    max_numeric_ratio: float | None = 0.999999
    remove_counter_lines: bool = True
    min_line_words: int | None = 2
    substrings: tuple[LineSubstring, ...] = field(default=DCLM_LINE_SUBSTRINGS)


@lru_cache(maxsize=64)
def _substring_regexes(pattern: str, location: str) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """(DCLM's per-line regex, the same without anchors to test a whole page at once)."""
    body = f"(?:{pattern.lower()})"
    anchored = {"prefix": rf"^{body}\s?", "suffix": rf"\s?{body}$"}.get(location, rf"\s?{body}")
    return re.compile(anchored, re.I), re.compile(body, re.I)


@lru_cache(maxsize=16)
def _any_substring(rules: tuple[LineSubstring, ...]) -> re.Pattern[str]:
    """One case-insensitive pass that finds any of the rules' patterns anywhere in a page."""
    return re.compile("|".join(_substring_regexes(r.pattern, r.location)[1].pattern for r in rules), re.I)


# A character class as (its str predicate, its ASCII members as bytes to delete).
CharKind = tuple[Callable[[str], bool], bytes]
_UPPER: CharKind = (str.isupper, string.ascii_uppercase.encode())
_DIGIT: CharKind = (str.isdigit, string.digits.encode())


def _char_count(line: str, kind: CharKind) -> int:
    """How many characters of ``line`` satisfy ``kind[0]`` (ASCII lines: one C-level pass)."""
    if line.isascii():
        return len(line) - len(line.encode().translate(None, kind[1]))
    return sum(map(kind[0], line))


def _keep_ratio_lines(text: str, kind: CharKind, max_ratio: float) -> str:
    """DCLM's uppercase/numeric ratio line modifier: drop lines with more than ``max_ratio``."""
    lines = [ln for ln in text.split("\n") if not ln or _char_count(ln, kind) / len(ln) <= max_ratio]
    return "\n".join(lines).strip()


def _remove_counter_lines(text: str) -> str:
    """DCLM's ``counter_line_modifier``: drop lines like "3 likes" or "1.2K views"."""
    lowered = text.lower()
    if not _COUNTER_CANDIDATE.search(lowered):  # no line can match: only the strip remains
        return text.strip()
    pairs = zip(text.split("\n"), lowered.split("\n"))
    return "\n".join(ln for ln, low in pairs if not _COUNTER_LINE.search(low)).strip()


def _remove_substrings(text: str, rule: LineSubstring) -> str:
    """DCLM's ``substring_line_modifier`` with ``remove_substring_only=True``."""
    regex, anywhere = _substring_regexes(rule.pattern, rule.location)
    if not anywhere.search(text):  # no line holds it: only the strip remains
        return text.strip()
    kept = []
    for line in text.split("\n"):
        if rule.max_words is None or len(line.split()) <= rule.max_words:
            modified = regex.sub("", line)
            if line and (not modified or modified.isspace()):
                continue
            line = modified
        kept.append(line)
    return "\n".join(kept).strip()


def apply_line_modifiers(text: str, mods: LineModifiers) -> str:
    """The text after DCLM's line modifiers, each applied to the previous one's output exactly as
    DCLM chains them ("" when one of them empties the page, which DCLM then drops)."""
    if mods.max_uppercase_ratio is not None:
        text = _keep_ratio_lines(text, _UPPER, mods.max_uppercase_ratio)
        if not text:
            return ""
    if mods.max_numeric_ratio is not None:
        text = _keep_ratio_lines(text, _DIGIT, mods.max_numeric_ratio)
        if not text:
            return ""
    if mods.remove_counter_lines:
        text = _remove_counter_lines(text)
        if not text:
            return ""
    if mods.min_line_words is not None:
        low = mods.min_line_words
        text = "\n".join(ln for ln in text.split("\n") if not ln or len(ln.split()) >= low)
        if not text:
            return ""
    if mods.substrings and not _any_substring(mods.substrings).search(text):
        return text.strip()  # no line holds any of them: each modifier would only strip
    for rule in mods.substrings:
        text = _remove_substrings(text, rule)
        if not text:
            return ""
    return text


def word_removal_ratio(text: str, before: int, modified_text: str) -> float:
    """Share of the page's ``before`` words the line modifiers removed (0.0 for a page without
    words); ``modified_text`` is ``apply_line_modifiers(text)``."""
    if not before:
        return 0.0
    if modified_text == text.strip() and not _SPLIT_DIFFERS.match(text.lstrip(_FASTTEXT_SPACES)):
        return 0.0  # nothing removed, and the strip did not bare a leading fastText token
    return (before - word_count(modified_text)) / before


# ---------------------------------------------------------------- everything for one page
def top_stat(n: int) -> str:
    return f"gopher_top_{n}gram_char_frac"


def dup_stat(n: int) -> str:
    return f"gopher_dup_{n}gram_char_frac"


STAT_NAMES: tuple[str, ...] = (
    "gopher_word_count",
    "gopher_mean_word_length",
    "gopher_symbol_word_ratio",
    "gopher_bullet_line_frac",
    "gopher_ellipsis_line_frac",
    "gopher_non_alpha_word_frac",
    "gopher_stop_word_count",
    "gopher_dup_line_frac",
    "gopher_dup_para_frac",
    "gopher_dup_line_char_frac",
    "gopher_dup_para_char_frac",
    *(top_stat(n) for n in TOP_NGRAM_SIZES),
    *(dup_stat(n) for n in DUP_NGRAM_SIZES),
    "word_removal_ratio",
)


def gopher_stats(text: str, mods: LineModifiers = LineModifiers()) -> dict[str, int | float]:
    """Every stat of the RefinedWeb/Gopher quality rules for one page, keyed as in STAT_NAMES
    (counts are ints, ratios floats; an empty page gets 0 everywhere)."""
    ws_words = text.split()
    lines = split_segments(text, "\n")
    paragraphs = split_segments(text, "\n\n")
    n_words = word_count(text, ws_words)
    dup_line, dup_line_chars = dup_segment_fracs(lines)
    dup_para, dup_para_chars = dup_segment_fracs(paragraphs)
    stats: dict[str, int | float] = {
        "gopher_word_count": n_words,
        "gopher_mean_word_length": mean_word_length(ws_words),
        "gopher_symbol_word_ratio": symbol_word_ratio(text, len(ws_words)),
        "gopher_bullet_line_frac": bullet_line_frac(lines),
        "gopher_ellipsis_line_frac": ellipsis_line_frac(lines),
        "gopher_non_alpha_word_frac": non_alpha_word_frac(ws_words),
        "gopher_stop_word_count": stop_word_count(ws_words),
        "gopher_dup_line_frac": dup_line,
        "gopher_dup_para_frac": dup_para,
        "gopher_dup_line_char_frac": dup_line_chars,
        "gopher_dup_para_char_frac": dup_para_chars,
    }
    top, dup = ngram_repetition(segment_words(text))
    for n, frac in top.items():
        stats[top_stat(n)] = frac
    for n, frac in dup.items():
        stats[dup_stat(n)] = frac
    stats["word_removal_ratio"] = word_removal_ratio(text, n_words, apply_line_modifiers(text, mods) if n_words else "")
    return stats
