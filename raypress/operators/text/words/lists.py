"""Stop-word and flagged-word lists, read the way Data-Juicer reads its ``*_dir`` params.

A directory holds JSON files mapping a language code to a list of words; every ``*.json`` file
whose name contains the list type (``stopwords`` or ``flagged_words``) is read and the lists
are merged per language.  Data-Juicer downloads its lists when the directory has none; raypress
ships them and never downloads (``raypress/data/wordlists``, see SOURCES.md there):

- ``bigscience`` (the default, what ``None`` means): Data-Juicer's own defaults, BigScience's
  lists (English: 301 stop words, 68 flagged words), so a recipe keeps the rows it keeps there;
- ``stop-words`` (stop words, English 1,333) and ``better-profanity`` (flagged words, English
  916): larger lists, chosen by naming them as the ``*_dir``.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib.resources import files
from pathlib import Path

WORDLISTS_DIR = Path(str(files("raypress") / "data" / "wordlists"))
DEFAULT_LISTS = "bigscience"
SHIPPED_LISTS = ("bigscience", "stop-words", "better-profanity")  # folders of WORDLISTS_DIR, by name
SHIPPED_DIR = WORDLISTS_DIR / DEFAULT_LISTS
ALL_LANGS = "all"


def resolve_dir(words_dir: str | None) -> Path:
    """``None``: Data-Juicer's default lists; a shipped list's name (``stop-words``, ...) unless
    a directory of that name exists here; else the directory itself."""
    if words_dir is None:
        return SHIPPED_DIR
    path = Path(words_dir).expanduser()
    if words_dir in SHIPPED_LISTS and not path.is_dir():
        return WORDLISTS_DIR / words_dir
    return path


@lru_cache(maxsize=16)
def load_words_asset(words_dir: str | None, words_type: str) -> dict[str, frozenset[str]]:
    """Language -> words, merged over the directory's matching JSON files, plus ``"all"``.

    Cached per process: every batch of a run asks for the same lists."""
    directory = resolve_dir(words_dir)
    if not directory.is_dir():
        raise FileNotFoundError(f"{words_type} directory {str(directory)!r} does not exist")
    merged: dict[str, list[str]] = {}
    for path in sorted(directory.iterdir()):
        if path.suffix == ".json" and words_type in path.name:
            loaded = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(loaded, dict):
                raise ValueError(f"{path} must map a language code to a list of words")
            for lang, words in loaded.items():
                merged.setdefault(lang, []).extend(words)
    if not merged:
        raise FileNotFoundError(
            f"no *{words_type}*.json file in {str(directory)!r} (raypress does not download word lists)"
        )
    if ALL_LANGS not in merged:
        merged[ALL_LANGS] = [w for words in merged.values() for w in words]
    return {lang: frozenset(words) for lang, words in merged.items()}


def words_for_lang(words_dir: str | None, words_type: str, lang: str) -> frozenset[str]:
    """The list for ``lang`` (``"all"``: every language merged); unknown languages are errors."""
    lists = load_words_asset(words_dir, words_type)
    if lang not in lists:
        raise ValueError(
            f"no {words_type} for lang={lang!r} in {str(resolve_dir(words_dir))!r}; "
            f"available: {', '.join(sorted(lists))}"
        )
    return lists[lang]
