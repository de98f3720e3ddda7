"""url_blocklist_filter: RefinedWeb's URL filter (a domain blocklist plus URL word lists).

RefinedWeb (Penedo et al. 2023, appendix G.1), as MINT-1T applies it to HTML documents: drop a
page whose domain is blocklisted, whose URL holds a *strict* word anywhere, a *hard* word as a
whole word, or at least two different *soft* words.  Word matching mirrors datatrove's
``URLFilter``: strict words are substrings of the URL stripped of every non-alphanumeric
character; hard and soft words are whole words of the URL split on non-alphanumeric runs.
The lists are text files (``raypress/data/url_blocklist``; the domain list there is a small seed,
see its header) and every path is a param, so real lists (e.g. UT1's) can replace them.
"""

from __future__ import annotations

import re
from functools import lru_cache
from importlib.resources import files
from pathlib import Path
from typing import Any, Sequence
from urllib.parse import urlsplit

import pyarrow as pa
from pydantic import Field, PositiveInt

from raypress.operators.base import Filter, Params
from raypress.operators.registry import register

SHIPPED_DIR = Path(str(files("raypress") / "data" / "url_blocklist"))
_NON_ALNUM = re.compile(r"[^a-z0-9]+")


def normalize(text: str) -> str:
    """Lower-cased, every non-alphanumeric character removed (how strict words are matched)."""
    return _NON_ALNUM.sub("", text.lower())


def url_words(url: str) -> set[str]:
    """The URL's words: lower-cased, split on runs of non-alphanumeric characters."""
    return {w for w in _NON_ALNUM.split(url.lower()) if w}


@lru_cache(maxsize=32)
def load_list(path: str, kind: str) -> frozenset[str]:
    """One entry a line; blank lines and lines starting with '#' skipped.  ``kind`` 'domain'
    lower-cases entries and strips a leading '*.' / '.' and a trailing '.'; 'subword' normalises
    them like the URL; 'word' lower-cases them.  Cached per process (every batch asks again)."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise FileNotFoundError(f"url_blocklist_filter: list file {str(p)!r} does not exist")
    entries = set()
    for line in p.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if kind == "domain":
            line = line.lower().removeprefix("*.").strip(".")
        elif kind == "subword":
            line = normalize(line)
        else:
            line = line.lower()
        if line:
            entries.add(line)
    return frozenset(entries)


def url_host(url: str) -> str | None:
    """The URL's host name, lower-cased, without port, credentials or trailing dot; a URL written
    without a scheme (``example.com/page``) is read as ``//example.com/page``.  None if absent."""
    try:
        parts = urlsplit(url)
        if not parts.hostname and not parts.scheme and not url.startswith("//"):
            parts = urlsplit("//" + url)
        host = parts.hostname
    except ValueError:  # e.g. an unbalanced '[' in the netloc
        return None
    host = (host or "").strip(".")
    if not host or any(c.isspace() for c in host):  # "not a url" parses as a host with spaces
        return None
    return host


def parent_domains(host: str) -> list[str]:
    """``a.b.example.com`` -> [a.b.example.com, b.example.com, example.com, com]."""
    labels = host.split(".")
    return [".".join(labels[i:]) for i in range(len(labels))]


def _path_param(name: str, what: str):
    return Field(
        default=None,
        description=f"file of {what}, one a line, '#' comments; None: the list shipped with raypress "
        f"(raypress/data/url_blocklist/{name})",
    )


class UrlBlocklistParams(Params):
    url_key: str = Field(default="url", description="column holding the document's URL")
    domains_path: str | None = _path_param("domains.txt", "blocked domains (a host and its subdomains)")
    strict_words_path: str | None = _path_param("strict_words.txt", "strict words (one hit anywhere in the URL drops)")
    hard_words_path: str | None = _path_param("hard_words.txt", "hard words (one whole-word hit drops)")
    soft_words_path: str | None = _path_param("soft_words.txt", "soft words (soft_threshold different hits drop)")
    allow_domains_path: str | None = Field(
        default=None,
        description="optional file of allowed domains: URLs on them (or their subdomains) pass every rule",
    )
    soft_threshold: PositiveInt = Field(default=2, description="drop when the URL holds this many different soft words")
    drop_missing_url: bool = Field(
        default=True,
        description="drop documents whose URL is null, blank or has no host (reason url_missing); "
        "False: keep them and apply the word rules to whatever the column holds",
    )


STAT_NAMES = ("url_missing", "url_domain_blocklisted", "url_strict_hits", "url_hard_hits", "url_soft_hits")


@register("url_blocklist_filter")
class UrlBlocklistFilter(Filter[UrlBlocklistParams]):
    """Drop documents whose URL's domain is blocklisted or whose URL holds a strict word, a hard
    word or >= 2 soft words (RefinedWeb's URL filter, as used by MINT-1T)."""

    stat_names = STAT_NAMES

    def __init__(self, params: UrlBlocklistParams, artifacts=None):
        super().__init__(params, artifacts)

        def shipped(path: str | None, name: str) -> str:
            return str(SHIPPED_DIR / name) if path is None else path

        self.domains = load_list(shipped(params.domains_path, "domains.txt"), "domain")
        self.strict = tuple(sorted(load_list(shipped(params.strict_words_path, "strict_words.txt"), "subword")))
        self.hard = load_list(shipped(params.hard_words_path, "hard_words.txt"), "word")
        self.soft = load_list(shipped(params.soft_words_path, "soft_words.txt"), "word")
        self.allowed = load_list(params.allow_domains_path, "domain") if params.allow_domains_path else frozenset()

    def columns_read(self) -> tuple[str, ...]:
        return (self.params.url_key,)

    def url_stats(self, url: str | None) -> tuple[bool, bool, int, int, int]:
        """(missing, domain blocklisted, strict hits, hard hits, different soft words) for one URL."""
        url = (url or "").strip()
        host = url_host(url) if url else None
        missing = host is None
        if not url or (missing and self.params.drop_missing_url):
            return missing, False, 0, 0, 0
        domains = parent_domains(host) if host else []
        if self.allowed and any(d in self.allowed for d in domains):
            return missing, False, 0, 0, 0
        blocked = any(d in self.domains for d in domains)
        flat = normalize(url)
        words = url_words(url)
        strict = sum(1 for w in self.strict if w in flat)
        return missing, blocked, strict, len(words & self.hard), len(words & self.soft)

    def compute_stats(self, table: pa.Table) -> dict[str, Sequence[Any]]:
        rows = [self.url_stats(u) for u in table.column(self.params.url_key).to_pylist()]
        return {name: [r[i] for r in rows] for i, name in enumerate(STAT_NAMES)}

    def drop_reasons(self, stats: dict[str, Sequence[Any]]) -> list[str | None]:
        drop_missing, threshold = self.params.drop_missing_url, self.params.soft_threshold
        reasons: list[str | None] = []
        for missing, blocked, strict, hard, soft in zip(*(stats[n] for n in STAT_NAMES)):
            if missing and drop_missing:
                reasons.append("url_missing")
            elif blocked:
                reasons.append("url_domain_blocklisted")
            elif strict:
                reasons.append("url_strict_word")
            elif hard:
                reasons.append("url_hard_word")
            elif soft >= threshold:
                reasons.append("url_soft_words")
            else:
                reasons.append(None)
        return reasons
