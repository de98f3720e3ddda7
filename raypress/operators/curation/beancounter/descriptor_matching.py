"""Sentences, descriptor mentions and pronouns in a document, the way BeanCounter's notebook finds them.

- **Blocks, then sentences**: text is cut into blocks (``paragraphs``: runs of non-blank lines,
  their single line breaks joined by spaces, since 1990s filings are hard-wrapped at ~70
  columns; ``lines``: every line, the notebook's ``splitlines()``), and only blocks holding a
  descriptor go through the sentence splitter, pySBD (rule-based, Golden Rules; English), which
  is slow enough that skipping the rest matters.  A paragraph block longer than
  ``MAX_BLOCK_CHARS`` (a page of HTML text with no blank lines) is split by lines first.
- **Mentions**: case-sensitive; a surface form matches only between non-word characters (start
  and end of text count), the notebook's ``(?:[^\\w\\s]|\\s)`` on both sides, so "Americans" is not
  "American" but "African-American" holds one.  Longest match wins: at each position the longest
  form is taken ("African American", not its "American"), and a sentence with several
  descriptors is attributed to its longest one, as the paper does.  Whitespace inside a form
  matches any run of whitespace, and a straight apostrophe also matches a curly one.
- **Sentence identity**: MD5 of the UTF-8 sentence (the paper's dedup key).
- **Pronouns**: case-insensitive whole words in three classes (``PRONOUNS``), counted over the
  whole document.  First and second person are left out ("US" would read as "us").
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

MAX_BLOCK_CHARS = 20_000

PRONOUNS: dict[str, tuple[str, ...]] = {
    "she": ("she", "her", "hers", "herself"),
    "he": ("he", "him", "his", "himself"),
    "they": ("they", "them", "their", "theirs", "themself", "themselves", "theirself"),
}
_PRONOUN_CLASS = {word: cls for cls, words in PRONOUNS.items() for word in words}
_PRONOUN_RE = re.compile(r"\b(" + "|".join(sorted(_PRONOUN_CLASS, key=len, reverse=True)) + r")\b", re.IGNORECASE)
_BLANK_LINE = re.compile(r"\n[ \t\f\v\u00a0]*\n")
_WS = re.compile(r"\s+")


def md5(sentence: str) -> str:
    return hashlib.md5(sentence.encode("utf-8")).hexdigest()


def _form_pattern(form: str) -> str:
    parts = [re.escape(word) for word in form.split(" ")]
    return r"\s+".join(parts).replace("'", "['\u2019]")


def normalize_match(text: str) -> str:
    """A matched span as its surface form: whitespace runs to one space, curly apostrophes straight."""
    return _WS.sub(" ", text).replace("\u2019", "'")


class DescriptorMatcher:
    """Finds surface forms in text (case-sensitive, non-word boundaries, longest first)."""

    def __init__(self, forms: dict[str, str]):
        if not forms:
            raise ValueError("no descriptor surface forms to match")
        self.forms = dict(forms)
        ordered = sorted(forms, key=lambda f: (-len(f), f))
        self.pattern = re.compile(r"(?<!\w)(?:" + "|".join(_form_pattern(f) for f in ordered) + r")(?!\w)")

    def find(self, text: str) -> list[tuple[str, str]]:
        """(surface form, descriptor) of each mention, left to right, longest at each position."""
        out = []
        for m in self.pattern.finditer(text):
            form = normalize_match(m.group(0))
            out.append((form, self.forms[form]))
        return out

    def longest(self, sentence: str) -> tuple[str, str] | None:
        """The sentence's longest mention (the first of equal length), or None."""
        return longest_of(self.find(sentence))

    def __reduce__(self):  # pickles small (for Ray workers): rebuilt from the forms
        return (DescriptorMatcher, (self.forms,))


def longest_of(mentions: list[tuple[str, str]]) -> tuple[str, str] | None:
    """The longest (surface form, descriptor); the first of equal length."""
    return max(mentions, key=lambda m: len(m[0])) if mentions else None


@functools.lru_cache(maxsize=1)
def _segmenter():
    import pysbd

    return pysbd.Segmenter(language="en", clean=False)


def split_sentences(block: str) -> list[str]:
    """pySBD's sentences of one block, stripped, empty ones dropped."""
    return [s.strip() for s in _segmenter().segment(block) if s.strip()]


def blocks(text: str, mode: str = "paragraphs") -> Iterator[str]:
    """The text's blocks (see the module docstring); ``mode`` is ``paragraphs`` or ``lines``."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if mode == "lines":
        yield from (line for line in text.split("\n") if line.strip())
        return
    if mode != "paragraphs":
        raise ValueError(f"block mode {mode!r}: expected 'paragraphs' or 'lines'")
    for para in _BLANK_LINE.split(text):
        if not para.strip():
            continue
        if len(para) > MAX_BLOCK_CHARS:
            yield from (line for line in para.split("\n") if line.strip())
        else:
            yield " ".join(line.strip() for line in para.split("\n") if line.strip())


@dataclass
class DocumentMentions:
    """What one document holds: its descriptor sentences, the descriptors it mentions, its pronouns."""

    sentences: list[tuple[str, str, str]] = field(default_factory=list)  # (sentence, form, descriptor)
    descriptors: set[str] = field(default_factory=set)
    pronouns: dict[str, int] = field(default_factory=dict)
    words: int = 0
    too_long: int = 0  # descriptor sentences over the byte limit, left out


def count_pronouns(text: str) -> dict[str, int]:
    counts = dict.fromkeys(PRONOUNS, 0)
    for m in _PRONOUN_RE.finditer(text):
        counts[_PRONOUN_CLASS[m.group(1).lower()]] += 1
    return counts


def scan_document(text: str, matcher: DescriptorMatcher, mode: str = "paragraphs",
                  max_sentence_bytes: int = 20480) -> DocumentMentions:
    """Sentences mentioning a descriptor (each with its longest mention), in document order, once each."""
    doc = DocumentMentions(pronouns=count_pronouns(text), words=len(text.split()))
    seen: set[str] = set()
    for block in blocks(text, mode):
        if matcher.pattern.search(block) is None:
            continue
        for sentence in split_sentences(block):
            mentions = matcher.find(sentence)
            if not mentions:
                continue
            doc.descriptors.update(d for _, d in mentions)
            if len(sentence.encode("utf-8")) > max_sentence_bytes:
                doc.too_long += 1
                continue
            if sentence in seen:
                continue
            seen.add(sentence)
            form, descriptor = longest_of(mentions)
            doc.sentences.append((sentence, form, descriptor))
    return doc
