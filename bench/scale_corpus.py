"""Real text at any size for the curation benchmarks: tiles of the planted near-duplicate corpus.

Why tiles: this machine holds ~30 MB of distinct English prose (``planted_near_dups``: Debian
changelogs, copyright files, READMEs, package descriptions, with planted near-duplicate families
and hard negatives).  A larger corpus repeats it, and a plain copy would make every document an
exact duplicate of its first copy, so dedup would face a different task at every size.  Tile k > 0
is the base with one consistent word substitution of its own: each content word type (4+ letters,
not a stop word nor a flagged word) is kept or replaced, by a hash of (k, word), with another word
of the base's vocabulary of the same length (capitalisation kept).  So:

- within a tile, the planted families stay exactly as similar as in the base (the same word maps
  the same way in every document of the tile), and exact copies stay exact;
- across tiles, about a quarter of the tokens differ, so a document and its copy in another tile
  share ~1 word 5-gram in 4 (Jaccard ~0.15, far below the 0.7 threshold): new documents;
- stop words, flagged words, punctuation, line structure and word lengths are untouched, so the
  quality filters see the same statistics at every size.

Each tile is built once (``bench/.corpora/tiles/``) in parallel processes; a size is ``tiles``
tiles written as 4 JSONL parts (``bench/.corpora/scale-<tiles>/``), ids ``t<k>-<base id>``.

    python bench/scale_corpus.py --tiles 8     # ~250 MB
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO))

import planted_near_dups as planted  # noqa: E402

CORPORA = HERE / ".corpora"
BASE_SCALE = 4.0  # ~31 MB, ~12,000 documents
PARTS = 4
WORD = re.compile(r"[A-Za-z]{4,}")


def base_docs() -> tuple[list[str], list[str]]:
    """(ids, texts) of the planted corpus the tiles are made from (built once, then cached)."""
    ps, _ = planted.cached(planted.scaled_config(BASE_SCALE))
    return list(ps.ids), list(ps.texts)


def _kept_words() -> set[str]:
    lists = REPO / "raypress" / "data" / "wordlists"
    words: set[str] = set()
    for name in ("stopwords.json", "flagged_words.json"):
        for values in json.loads((lists / name).read_text(encoding="utf-8")).values():
            words.update(w.lower() for w in values)
    return words


def vocabulary(texts: list[str]) -> dict[int, list[str]]:
    """Substitutable words of the base by length (sorted: the same on every run)."""
    kept = _kept_words()
    found = {m.group().lower() for t in texts for m in WORD.finditer(t)} - kept
    by_len: dict[int, list[str]] = {}
    for w in sorted(found):
        by_len.setdefault(len(w), []).append(w)
    return by_len


def _hash(tile: int, word: str) -> int:
    return int.from_bytes(hashlib.blake2b(f"{tile}:{word}".encode(), digest_size=8).digest(), "little")


def substitution(tile: int, vocab: dict[int, list[str]], kept: set[str]):
    """The word -> word function of one tile (memoised per lowercase word)."""
    memo: dict[str, str] = {}

    def swap(match: re.Match) -> str:
        word = match.group()
        low = word.lower()
        new = memo.get(low)
        if new is None:
            h = _hash(tile, low)
            pool = vocab.get(len(low), ())
            new = pool[(h >> 1) % len(pool)] if h & 1 and low not in kept and pool else low
            memo[low] = new
        if new == low:
            return word
        if word.isupper():
            return new.upper()
        return new.capitalize() if word[0].isupper() else new

    return swap


def _write_tile(args: tuple[int, Path]) -> str:
    tile, path = args
    ids, texts = base_docs()
    vocab, kept = vocabulary(texts), _kept_words()
    swap = substitution(tile, vocab, kept)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as out:
        for doc_id, text in zip(ids, texts):
            body = text if tile == 0 else WORD.sub(swap, text)
            out.write(json.dumps({"id": f"t{tile:03d}-{doc_id}", "text": body}, ensure_ascii=False) + "\n")
    tmp.replace(path)
    return str(path)


def tiles(count: int, log=print) -> list[Path]:
    """Tile files 0..count-1, built where missing (one process per CPU)."""
    folder = CORPORA / "tiles"
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"tile-{k:03d}.jsonl" for k in range(count)]
    missing = [(k, p) for k, p in enumerate(paths) if not p.exists()]
    if missing:
        base_docs()  # build the planted base once, before the workers read it
        log(f"building {len(missing)} tile(s) of real text under {folder} ...")
        with ProcessPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
            list(pool.map(_write_tile, missing))
    return paths


def scaled(count: int, log=print) -> list[str]:
    """``count`` tiles as 4 JSONL parts (contiguous tiles per part), built once."""
    folder = CORPORA / f"scale-{count}"
    parts = [folder / f"part-{i:03d}.jsonl" for i in range(PARTS)]
    if all(p.exists() for p in parts):
        return [str(p) for p in parts]
    paths = tiles(count, log)
    folder.mkdir(parents=True, exist_ok=True)
    per = -(-count // PARTS)
    for i, part in enumerate(parts):
        tmp = part.with_name(part.name + ".tmp")
        with open(tmp, "wb") as out:
            for p in paths[i * per:(i + 1) * per]:
                with open(p, "rb") as src:
                    while chunk := src.read(1 << 24):
                        out.write(chunk)
        tmp.replace(part)
    return [str(p) for p in parts]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiles", type=int, default=8)
    args = ap.parse_args()
    files = scaled(args.tiles)
    print(f"{sum(os.path.getsize(f) for f in files) / 1e6:.0f} MB in {files}")


if __name__ == "__main__":
    main()
