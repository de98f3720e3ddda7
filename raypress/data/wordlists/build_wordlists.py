"""Regenerate the shipped word lists from permissively licensed PyPI packages.

Run once by a maintainer (``pip install stop-words better-profanity`` first); the JSON files it
writes are committed, so nothing is downloaded when a pipeline runs.  Layout as Data-Juicer's
``stopwords_dir`` / ``flagged_words_dir`` expect: ``{"<lang>": ["word", ...]}``.

    python raypress/data/wordlists/build_wordlists.py
"""

from __future__ import annotations

import json
from importlib.metadata import version
from importlib.resources import files
from pathlib import Path

HERE = Path(__file__).resolve().parent


def normalise(words) -> list[str]:
    """Lower-case, trimmed, de-duplicated, sorted: the filters compare lower-cased words."""
    return sorted({w.strip().lower() for w in words if w.strip()})


def stopwords() -> dict[str, list[str]]:
    """Every language of the ``stop-words`` package (BSD-3-Clause), keyed by ISO 639-1 code."""
    from stop_words import LANGUAGE_MAPPING, get_stop_words

    return {code: normalise(get_stop_words(code)) for code in sorted(LANGUAGE_MAPPING)}


def flagged_words() -> dict[str, list[str]]:
    """English profanity from ``better-profanity`` (MIT)."""
    text = (files("better_profanity") / "profanity_wordlist.txt").read_text(encoding="utf-8")
    return {"en": normalise(text.splitlines())}


def write(name: str, lists: dict[str, list[str]]) -> None:
    path = HERE / name
    with path.open("w", encoding="utf-8") as fh:
        json.dump(lists, fh, ensure_ascii=False, indent=0, sort_keys=True)
        fh.write("\n")
    sizes = ", ".join(f"{k}: {len(v)}" for k, v in lists.items())
    print(f"wrote {path.name} ({sizes})")


def main() -> None:
    write("stopwords.json", stopwords())
    write("flagged_words.json", flagged_words())
    print(f"from stop-words {version('stop-words')}, better-profanity {version('better-profanity')}")


if __name__ == "__main__":
    main()
