"""Regenerate the shipped word lists.

Run once by a maintainer; the JSON files it writes are committed, so nothing is downloaded when a
pipeline runs.  Layout as Data-Juicer's ``stopwords_dir`` / ``flagged_words_dir`` expect:
``{"<lang>": ["word", ...]}``.

- ``bigscience/``: BigScience's lists as Data-Juicer uses them by default, verbatim from
  bigscience-workshop/data-preparation (``preprocessing/training/01b_oscar_cleaning_and_filtering/
  {stopwords,flagged_words}.py``), given a checkout of that repository (``--bigscience DIR``);
- ``stop-words/`` and ``better-profanity/``: the larger lists of those PyPI packages
  (``pip install stop-words better-profanity`` first).

    python raypress/data/wordlists/build_wordlists.py [--bigscience PATH/TO/data-preparation]
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


def bigscience(checkout: Path, name: str) -> dict[str, list[str]]:
    """BigScience's ``{name}`` dict, read from its module without importing it, words as they are
    (Data-Juicer matches them as they are)."""
    import ast

    module = checkout / "preprocessing" / "training" / "01b_oscar_cleaning_and_filtering" / f"{name}.py"
    for node in ast.parse(module.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets):
            return ast.literal_eval(node.value)
    raise ValueError(f"{module} defines no {name!r}")


def write(name: str, lists: dict[str, list[str]]) -> None:
    path = HERE / name
    with path.open("w", encoding="utf-8") as fh:
        json.dump(lists, fh, ensure_ascii=False, indent=0, sort_keys=True)
        fh.write("\n")
    sizes = ", ".join(f"{k}: {len(v)}" for k, v in lists.items())
    print(f"wrote {path.name} ({sizes})")


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bigscience", type=Path, help="a checkout of bigscience-workshop/data-preparation")
    args = parser.parse_args()
    if args.bigscience:
        for name in ("stopwords", "flagged_words"):
            write(f"bigscience/{name}.json", bigscience(args.bigscience, name))
    write("stop-words/stopwords.json", stopwords())
    write("better-profanity/flagged_words.json", flagged_words())
    print(f"from stop-words {version('stop-words')}, better-profanity {version('better-profanity')}")


if __name__ == "__main__":
    main()
