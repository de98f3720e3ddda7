"""Planted near-duplicates from real text, with exact ground truth, for scoring MinHash-LSH dedup.

Why planted: no public near-dup corpus has ground truth that matches *our* notion of "near
duplicate" (Jaccard of word 5-shingles >= 0.7), so precision and recall need a set built here.
Why real text: shingle statistics (shared boilerplate, repeated phrases, short lines) decide how
LSH behaves; random words would make every pair trivially far apart.

- Source: prose found on a Debian machine (``/usr/share/doc/*/`` changelogs, copyright files,
  READMEs, NEWS, ``/var/lib/dpkg/status`` descriptions) and the running Python's
  ``*.dist-info/METADATA``, cut into documents of consecutive paragraphs (60-500 words).
- Bases: those documents, kept only while every pair of bases has exact Jaccard < 0.5.
- Variants of a base (or, for chains, of an earlier variant): word deletions, insertions and
  substitutions at a drawn rate, typos, paragraph drops and swaps, boilerplate headers/footers,
  re-wrapping and case changes (both invisible to ``whitespace`` + ``lowercase`` shingles).  The edit
  strength is drawn so that pairs land on both sides of the threshold, many near it.
- Hard negatives: a long prefix (55-78% of the words) of a base followed by an unrelated body;
  kept only when below the threshold against every document of the set.
- Ground truth: a pair is a true near-duplicate when the exact Jaccard of the op's own shingle
  hashes (``minhash_shingles.shingle_hashes``: ``whitespace`` tokens, window 5, lowercase: a
  re-wrapped page is the same page; the op must run with ``tokenization: whitespace``) is >= the
  threshold, over ALL pairs of the set (an exact all-pairs join with prefix filtering), so
  accidental near-duplicates across families count too; true clusters are the connected
  components of true pairs.

Everything is drawn from ``numpy.random.default_rng(seed)``; the same seed on the same machine
gives the same set.  Document ids are assigned after a shuffle, so which member of a cluster has
the smallest id (the one a dedup keeps) is random.

    python bench/planted_near_dups.py --out bench/.corpora/planted   # writes docs.jsonl + truth.npz
"""

from __future__ import annotations

import argparse
import glob
import gzip
import json
import math
import os
import re
import sys
import sysconfig
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

WINDOW = 5  # the op's default shingle window
TOKENIZATION = "whitespace"  # raypress's opt-in: re-wrapping is an invisible edit (Data-Juicer's `space` sees it)
DOC_GLOBS = ("changelog*", "NEWS*", "README*", "copyright", "*.md", "*.txt", "FAQ*", "TODO*", "AUTHORS*")

# Real-world boilerplate of the kinds that get glued onto copies of a text.
BOILERPLATE = (
    "On Debian systems, the complete text of the GNU General Public License version 2 can be found "
    "in /usr/share/common-licenses/GPL-2.",
    "This page was last edited on 3 March 2021, at 14:07. Text is available under the Creative "
    "Commons Attribution-ShareAlike License; additional terms may apply.",
    "We use cookies to improve your experience on our website. By continuing to browse you agree "
    "to our use of cookies. Read our privacy policy to learn more.",
    "Skip to main content. Home | Download | Documentation | Community | Support | About",
    "This file was automatically generated from the upstream sources. Do not edit it by hand; "
    "changes will be overwritten the next time it is regenerated.",
    "Share this article: Facebook Twitter LinkedIn Email Print. Related posts you might like.",
    "Copyright (c) the contributors. All rights reserved. Redistribution and use in source and "
    "binary forms, with or without modification, are permitted provided that the conditions are met.",
    "Posted in Uncategorized | Leave a comment. Subscribe to our newsletter for weekly updates.",
)

Paragraphs = list[list[str]]  # a document as paragraphs of words


@dataclass(frozen=True)
class PlantConfig:
    n_bases: int = 1500
    seed: int = 0
    threshold: float = 0.7
    base_max_jaccard: float = 0.5  # bases are pairwise below this
    min_words: int = 60
    max_words: int = 500
    docs_per_file: int = 30  # cap per source file, for variety
    # how many variants a base gets: values and probabilities
    variant_counts: tuple[int, ...] = (0, 1, 2, 3, 5, 20)  # a few "viral" texts copied many times
    variant_probs: tuple[float, ...] = (0.35, 0.30, 0.20, 0.10, 0.045, 0.005)
    chain_rate: float = 0.3  # a variant derived from an earlier variant of the family, not the base
    hard_negative_rate: float = 0.15  # bases that get a shared-prefix hard negative
    hard_negative_margin: float = 0.03  # a hard negative stays below threshold - margin vs its base


@dataclass
class PlantedSet:
    """Documents (in id order) and their ground truth."""

    config: PlantConfig
    ids: list[str]
    texts: list[str]
    kinds: list[str]  # base | variant | hard_negative
    family: np.ndarray  # index of the base the document comes from (a hard negative: its prefix's base)
    edits: list[str]  # what was done to make it
    pairs: np.ndarray  # (k, 2) int64, i < j: every pair with exact Jaccard >= threshold
    pair_jaccard: np.ndarray  # (k,) float64
    cluster: np.ndarray  # per document, the smallest index of its true cluster (itself if alone)
    hard_negative_jaccard: np.ndarray  # per hard negative, exact Jaccard against its prefix's base
    dropped_hard_negatives: int = 0
    source_files: int = 0
    seconds: float = 0.0
    sources: dict[str, int] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.ids)

    def cluster_sizes(self) -> np.ndarray:
        """Size of each document's true cluster."""
        return np.bincount(self.cluster, minlength=len(self))[self.cluster]

    def n_bytes(self) -> int:
        return sum(len(t.encode("utf-8")) for t in self.texts)

    def stats(self) -> dict:
        sizes = np.bincount(self.cluster, minlength=len(self))
        multi = sizes[sizes >= 2]
        kinds = {k: self.kinds.count(k) for k in ("base", "variant", "hard_negative")}
        hist_edges = [self.config.threshold, 0.75, 0.8, 0.9, 0.999, 1.0001]
        hist = np.histogram(self.pair_jaccard, bins=hist_edges)[0].tolist() if len(self.pairs) else []
        hn = self.hard_negative_jaccard
        return {
            "docs": len(self),
            "mb": round(self.n_bytes() / 1e6, 2),
            **kinds,
            "true_pairs": int(len(self.pairs)),
            "true_pairs_by_jaccard": dict(zip(["0.70-0.75", "0.75-0.80", "0.80-0.90", "0.90-1.00", "1.00"], hist)),
            "true_clusters": int(len(multi)),
            "docs_in_true_clusters": int(multi.sum()),
            "removable": int((multi - 1).sum()),
            "largest_cluster": int(multi.max()) if len(multi) else 0,
            "hard_negative_jaccard_max": round(float(hn.max()), 3) if len(hn) else None,
            "hard_negative_jaccard_mean": round(float(hn.mean()), 3) if len(hn) else None,
            "dropped_hard_negatives": self.dropped_hard_negatives,
            "source_files": self.source_files,
            "seconds": round(self.seconds, 1),
        }

    def write_jsonl(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            for i, t in zip(self.ids, self.texts):
                f.write(json.dumps({"id": i, "text": t}, ensure_ascii=False) + "\n")
        return path

    def save(self, folder: str | Path) -> None:
        """``docs.jsonl`` (id, text) and ``truth.npz`` + ``meta.json`` (everything else)."""
        folder = Path(folder)
        self.write_jsonl(folder / "docs.jsonl")
        np.savez_compressed(folder / "truth.npz", family=self.family, pairs=self.pairs,
                            pair_jaccard=self.pair_jaccard, cluster=self.cluster,
                            hard_negative_jaccard=self.hard_negative_jaccard)
        meta = {"config": asdict(self.config), "kinds": self.kinds, "edits": self.edits,
                "dropped_hard_negatives": self.dropped_hard_negatives,
                "source_files": self.source_files, "seconds": self.seconds, "sources": self.sources}
        (folder / "meta.json").write_text(json.dumps(meta))

    @classmethod
    def load(cls, folder: str | Path) -> "PlantedSet":
        folder = Path(folder)
        ids, texts = [], []
        with open(folder / "docs.jsonl", encoding="utf-8") as f:
            for line in f:
                rec = json.loads(line)
                ids.append(rec["id"])
                texts.append(rec["text"])
        meta = json.loads((folder / "meta.json").read_text())
        truth = np.load(folder / "truth.npz")
        cfg = meta["config"]
        cfg = PlantConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in cfg.items()})
        return cls(cfg, ids, texts, meta["kinds"], truth["family"], meta["edits"], truth["pairs"],
                   truth["pair_jaccard"], truth["cluster"], truth["hard_negative_jaccard"],
                   meta["dropped_hard_negatives"], meta["source_files"], meta["seconds"], meta["sources"])


# -- shingles and exact Jaccard ---------------------------------------------------------------------
def shingles(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """The op's own shingle hashes (``TOKENIZATION`` tokens, window 5, lowercase): flat uint32 + offsets."""
    from raypress.operators.dedup.minhash.shingles import shingle_hashes

    return shingle_hashes(list(texts), TOKENIZATION, WINDOW, True, None)


def exact_jaccard(a: np.ndarray, b: np.ndarray) -> float:
    """Jaccard of two sets of hashes (each already unique)."""
    if len(a) == 0 and len(b) == 0:
        return 0.0  # empty documents are never duplicates
    inter = len(np.intersect1d(a, b, assume_unique=True))
    return inter / (len(a) + len(b) - inter)


def similar_pairs(hashes: np.ndarray, offsets: np.ndarray, threshold: float) -> tuple[np.ndarray, np.ndarray]:
    """Every pair (i < j) of documents whose hash sets have Jaccard >= ``threshold``, exactly.

    Prefix filtering: order each document's hashes rarest first (ties by value); two sets with
    Jaccard >= t must share one of the first ``|x| - ceil(t |x|) + 1`` of either's ordering.  The
    candidates that share a prefix hash and pass the length filter are then verified exactly."""
    offsets = np.asarray(offsets, dtype=np.int64)
    n = len(offsets) - 1
    sizes = np.diff(offsets)
    empty = (np.empty((0, 2), np.int64), np.empty(0, np.float64))
    if n < 2 or len(hashes) == 0:
        return empty
    doc = np.repeat(np.arange(n), sizes)
    uniq, inv, counts = np.unique(hashes, return_inverse=True, return_counts=True)
    order = np.lexsort((inv, counts[inv], doc))  # by doc, then rarity, then hash
    pos = np.arange(len(hashes)) - offsets[doc]  # doc[order] == doc: lexsort keeps docs contiguous
    prefix_len = sizes - np.ceil(threshold * sizes - 1e-9).astype(np.int64) + 1
    keep = pos < prefix_len[doc]
    tok, pdoc = inv[order][keep], doc[keep]
    by_tok = np.lexsort((pdoc, tok))
    tok, pdoc = tok[by_tok], pdoc[by_tok]
    cand: list[np.ndarray] = []
    k = 1
    alive = np.arange(len(tok) - 1)  # positions p whose group may still have a member at p + k
    while len(alive):
        alive = alive[alive + k < len(tok)]
        alive = alive[tok[alive] == tok[alive + k]]
        if len(alive):
            cand.append(pdoc[alive] * n + pdoc[alive + k])
        k += 1
    if not cand:
        return empty
    code = np.unique(np.concatenate(cand))
    i, j = code // n, code % n
    small, big = np.minimum(sizes[i], sizes[j]), np.maximum(sizes[i], sizes[j])
    ok = small >= threshold * big - 1e-9
    i, j = i[ok], j[ok]
    sets: dict[int, np.ndarray] = {}

    def hs(d: int) -> np.ndarray:
        if d not in sets:
            sets[d] = np.sort(hashes[offsets[d]:offsets[d + 1]])
        return sets[d]

    jac = np.array([exact_jaccard(hs(a), hs(b)) for a, b in zip(i.tolist(), j.tolist())], dtype=np.float64)
    hit = jac >= threshold - 1e-12
    return np.stack([i[hit], j[hit]], axis=1).astype(np.int64), jac[hit]


def components(n: int, pairs: np.ndarray) -> np.ndarray:
    """Connected components: per node, the smallest node index of its component."""
    parent = np.arange(n)

    def find(x: int) -> int:
        root = x
        while parent[root] != root:
            root = parent[root]
        while parent[x] != root:
            parent[x], x = root, parent[x]
        return root

    for a, b in pairs.tolist():
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    return np.array([find(x) for x in range(n)], dtype=np.int64)


# -- real text ------------------------------------------------------------------------------------
def source_files() -> list[str]:
    """Text files of real prose on this machine (sorted; the generator shuffles them by seed)."""
    paths: set[str] = set()
    for pattern in DOC_GLOBS:
        for p in glob.glob(f"/usr/share/doc/*/{pattern}"):
            if os.path.isfile(p) and not p.endswith((".html", ".htm")):
                paths.add(os.path.realpath(p))
    paths.update(glob.glob(os.path.join(sysconfig.get_paths()["purelib"], "*.dist-info", "METADATA")))
    if os.path.isfile("/var/lib/dpkg/status"):
        paths.add("/var/lib/dpkg/status")
    return sorted(paths)


def read_text(path: str) -> str:
    try:
        raw = gzip.open(path).read() if path.endswith(".gz") else Path(path).read_bytes()
    except (OSError, EOFError):
        return ""
    if b"\x00" in raw[:4096]:
        return ""
    text = raw.decode("utf-8", errors="replace")
    if path == "/var/lib/dpkg/status":  # long descriptions: the indented lines after 'Description:'
        return dpkg_descriptions(text)
    return text


def dpkg_descriptions(status: str) -> str:
    out = []
    for stanza in status.split("\n\n"):
        m = re.search(r"^Description: .*\n((?: .*\n?)+)", stanza, flags=re.M)
        if m:
            body = "\n".join(line[1:] for line in m.group(1).splitlines())
            out.append(body.replace("\n.\n", "\n\n"))
    return "\n\n".join(out)


def paragraphs_of(text: str) -> Paragraphs:
    paras = []
    for block in re.split(r"\n[ \t]*\n", text):
        words = block.split()
        if words:
            paras.append(words)
    return paras


def documents_of(text: str, rng: np.random.Generator, cfg: PlantConfig) -> list[Paragraphs]:
    """Consecutive paragraphs of a text joined to a drawn length between min and max words;
    a paragraph longer than max_words is cut into pieces."""
    paras: Paragraphs = []
    for p in paragraphs_of(text):
        for lo in range(0, len(p), cfg.max_words):
            paras.append(p[lo:lo + cfg.max_words])
    docs: list[Paragraphs] = []
    cur: Paragraphs = []
    target = _draw_length(rng, cfg)
    for p in paras:
        if cur and sum(map(len, cur)) + len(p) > cfg.max_words:
            cur = []
        cur.append(p)
        if sum(map(len, cur)) >= target:
            if looks_like_prose(cur):
                docs.append(cur)
            cur = []
            target = _draw_length(rng, cfg)
    return docs


def _draw_length(rng: np.random.Generator, cfg: PlantConfig) -> int:
    return int(math.exp(rng.uniform(math.log(cfg.min_words), math.log(cfg.max_words))))


def looks_like_prose(doc: Paragraphs) -> bool:
    """Mostly words with letters, not a table or a hex dump."""
    words = [w for p in doc for w in p]
    alpha = sum(1 for w in words if any(c.isalpha() for c in w))
    return alpha >= 0.7 * len(words) and len(set(words)) >= 0.3 * len(words)


def render(doc: Paragraphs, width: int = 0) -> str:
    """Paragraphs separated by blank lines; ``width`` > 0 wraps lines at about that many chars."""
    out = []
    for p in doc:
        if width <= 0:
            out.append(" ".join(p))
            continue
        lines, cur, n = [], [], 0
        for w in p:
            if cur and n + 1 + len(w) > width:
                lines.append(" ".join(cur))
                cur, n = [], 0
            n += len(w) + (1 if cur else 0)
            cur.append(w)
        lines.append(" ".join(cur))
        out.append("\n".join(lines))
    return "\n\n".join(out)


def candidate_pool(cfg: PlantConfig, rng: np.random.Generator, want: int,
                   texts: Iterable[tuple[str, str]] | None = None) -> tuple[list[Paragraphs], list[str], int]:
    """At least ``want`` prose documents (if the machine has them): files in a seeded order,
    at most ``docs_per_file`` documents from each, those documents in a seeded order too."""
    if texts is None:
        files = source_files()
        rng.shuffle(files)
        texts = ((p, read_text(p)) for p in files)
    docs: list[Paragraphs] = []
    origin: list[str] = []
    n_files = 0
    for name, text in texts:
        got = documents_of(text, rng, cfg)
        if not got:
            continue
        n_files += 1
        if len(got) > cfg.docs_per_file:
            got = [got[i] for i in sorted(rng.choice(len(got), cfg.docs_per_file, replace=False))]
        docs += got
        origin += [name] * len(got)
        if len(docs) >= want:
            break
    return docs, origin, n_files


def pick_bases(pool: list[Paragraphs], cfg: PlantConfig, need: int) -> list[int]:
    """Pool documents in order, skipping any whose Jaccard with an earlier pick is >= base_max_jaccard
    (or that are exact copies): the first ``need`` survivors."""
    texts = [render(d) for d in pool]
    hashes, offsets = shingles(texts)
    pairs, _ = similar_pairs(hashes, offsets, cfg.base_max_jaccard)
    neighbours: dict[int, list[int]] = {}
    for a, b in pairs.tolist():
        neighbours.setdefault(b, []).append(a)  # a < b: b is dropped if a was picked
    picked: list[int] = []
    chosen = np.zeros(len(pool), dtype=bool)
    for d in range(len(pool)):
        if any(chosen[a] for a in neighbours.get(d, ())):
            continue
        chosen[d] = True
        picked.append(d)
        if len(picked) >= need:
            break
    return picked


# -- edits ----------------------------------------------------------------------------------------
def delete_words(doc: Paragraphs, rate: float, rng: np.random.Generator) -> Paragraphs:
    out = [[w for w in p if rng.random() >= rate] for p in doc]
    return [p for p in out if p] or [doc[0][:1]]


def insert_words(doc: Paragraphs, rate: float, rng: np.random.Generator, vocab: Sequence[str]) -> Paragraphs:
    out = []
    for p in doc:
        q = []
        for w in p:
            q.append(w)
            if rng.random() < rate:
                q.append(vocab[int(rng.integers(len(vocab)))])
        out.append(q)
    return out


def substitute_words(doc: Paragraphs, rate: float, rng: np.random.Generator, vocab: Sequence[str]) -> Paragraphs:
    return [[vocab[int(rng.integers(len(vocab)))] if rng.random() < rate else w for w in p] for p in doc]


def typos(doc: Paragraphs, rate: float, rng: np.random.Generator) -> Paragraphs:
    """Swap two adjacent letters inside words of 4+ characters."""
    def typo(w: str) -> str:
        if len(w) < 4:
            return w
        k = int(rng.integers(1, len(w) - 2))
        return w[:k] + w[k + 1] + w[k] + w[k + 2:]
    return [[typo(w) if rng.random() < rate else w for w in p] for p in doc]


def drop_paragraph(doc: Paragraphs, rng: np.random.Generator) -> Paragraphs:
    if len(doc) < 3:
        return doc
    k = int(rng.integers(len(doc)))
    return doc[:k] + doc[k + 1:]


def swap_paragraphs(doc: Paragraphs, rng: np.random.Generator) -> Paragraphs:
    if len(doc) < 2:
        return doc
    i, j = rng.choice(len(doc), 2, replace=False)
    out = list(doc)
    out[i], out[j] = out[j], out[i]
    return out


def add_boilerplate(doc: Paragraphs, rng: np.random.Generator) -> Paragraphs:
    text = BOILERPLATE[int(rng.integers(len(BOILERPLATE)))].split()
    return [text] + doc if rng.random() < 0.5 else doc + [text]


def change_case(doc: Paragraphs, rng: np.random.Generator) -> Paragraphs:
    return [[w.upper() if rng.random() < 0.05 else w for w in p] for p in doc]


def make_variant(doc: Paragraphs, rng: np.random.Generator, vocab: Sequence[str]) -> tuple[Paragraphs, str]:
    """One copy with edits of a drawn strength: 'same' (invisible to the shingles), 'light',
    'medium' (around the threshold) or 'heavy' (mostly below it)."""
    strength = str(rng.choice(["same", "light", "medium", "heavy"], p=[0.1, 0.4, 0.3, 0.2]))
    done = [strength]
    if strength == "same":
        return change_case(doc, rng), "same:case+wrap"
    rate = {"light": (0.002, 0.02), "medium": (0.02, 0.045), "heavy": (0.045, 0.09)}[strength]
    total = rng.uniform(*rate)
    # split the word-edit budget over the four kinds at random
    share = rng.dirichlet(np.ones(4))
    doc = delete_words(doc, total * share[0], rng)
    doc = insert_words(doc, total * share[1], rng, vocab)
    doc = substitute_words(doc, total * share[2], rng, vocab)
    doc = typos(doc, total * share[3], rng)
    done.append(f"words:{total:.3f}")
    if rng.random() < 0.3:
        doc = swap_paragraphs(doc, rng)
        done.append("swap")
    if rng.random() < (0.15 if strength == "light" else 0.35):
        doc = drop_paragraph(doc, rng)
        done.append("drop")
    if rng.random() < 0.3:
        doc = add_boilerplate(doc, rng)
        done.append("boilerplate")
    if rng.random() < 0.3:
        doc = change_case(doc, rng)
        done.append("case")
    return doc, "+".join(done)


def make_hard_negative(base: Paragraphs, other: Paragraphs, frac: float) -> Paragraphs:
    """The first ``frac`` of ``base``'s words (its paragraphs kept), then ``other``'s words up to
    ``base``'s length."""
    n = sum(map(len, base))
    keep = max(WINDOW, int(n * frac))
    out: Paragraphs = []
    left = keep
    for p in base:
        if left <= 0:
            break
        out.append(p[:left])
        left -= len(p)
    body_left = max(WINDOW, n - keep)
    for p in other:
        if body_left <= 0:
            break
        out.append(p[:body_left])
        body_left -= len(p)
    return out


# -- the set --------------------------------------------------------------------------------------
def make_planted(cfg: PlantConfig = PlantConfig(),
                 texts: Iterable[tuple[str, str]] | None = None,
                 log: Callable[[str], None] | None = None) -> PlantedSet:
    """Build the set.  ``texts`` ((name, text) pairs) replaces the machine's files (for tests)."""
    t0 = time.perf_counter()
    rng = np.random.default_rng(cfg.seed)
    say = log or (lambda _m: None)
    n_spare = max(8, int(cfg.n_bases * cfg.hard_negative_rate * 1.5))
    want = int((cfg.n_bases + n_spare) * 1.6) + 50
    pool, origin, n_files = candidate_pool(cfg, rng, want, texts)
    say(f"pool: {len(pool)} candidate documents from {n_files} files ({time.perf_counter() - t0:.1f}s)")
    picked = pick_bases(pool, cfg, cfg.n_bases + n_spare)
    n_bases = min(cfg.n_bases, len(picked) - min(n_spare, max(1, len(picked) // 10)))
    if n_bases < 2:
        raise RuntimeError(f"only {len(picked)} distinct documents of real text found")
    if n_bases < cfg.n_bases:
        say(f"only {len(picked)} distinct documents found: {n_bases} bases instead of {cfg.n_bases} "
            "(raise docs_per_file)")
    bases = [pool[i] for i in picked[:n_bases]]
    spares = [pool[i] for i in picked[n_bases:]]
    sources: dict[str, int] = {}
    for i in picked[:n_bases]:
        key = _source_kind(origin[i])
        sources[key] = sources.get(key, 0) + 1
    say(f"bases: {len(bases)} (+{len(spares)} spare bodies for hard negatives) ({time.perf_counter() - t0:.1f}s)")
    vocab = sorted({w for d in bases for p in d for w in p if w.isalpha()})

    docs: list[Paragraphs] = []
    rendered: list[str] = []
    kinds: list[str] = []
    family: list[int] = []
    edits: list[str] = []
    hard_base: list[int] = []  # per hard negative: the document index of its base

    def add(doc: Paragraphs, text: str, kind: str, fam: int, edit: str) -> int:
        docs.append(doc)
        rendered.append(text)
        kinds.append(kind)
        family.append(fam)
        edits.append(edit)
        return len(docs) - 1

    counts = rng.choice(cfg.variant_counts, size=len(bases), p=cfg.variant_probs)
    for b, base in enumerate(bases):
        members = [add(base, render(base, width=int(rng.integers(60, 100))), "base", b, "")]
        for _ in range(int(counts[b])):
            src = members[0]
            if len(members) > 1 and rng.random() < cfg.chain_rate:
                src = members[int(rng.integers(1, len(members)))]
            var, how = make_variant(docs[src], rng, vocab)
            how = how if src == members[0] else f"chain:{how}"
            members.append(add(var, render(var, width=int(rng.integers(50, 110))), "variant", b, how))
    spare_order = rng.permutation(len(spares))
    hn_bases = np.flatnonzero(rng.random(len(bases)) < cfg.hard_negative_rate)
    base_doc = {family[d]: d for d in range(len(docs)) if kinds[d] == "base"}
    for k, b in enumerate(hn_bases.tolist()):
        other = spares[int(spare_order[k % len(spares)])]
        frac = rng.uniform(0.55, 0.78)
        base_h = shingles([rendered[base_doc[b]]])[0]
        for _attempt in range(6):
            hn = make_hard_negative(bases[b], other, frac)
            text = render(hn, width=int(rng.integers(60, 100)))
            j = exact_jaccard(np.unique(shingles([text])[0]), np.unique(base_h))
            if j < cfg.threshold - cfg.hard_negative_margin:
                break
            frac -= 0.08
        else:
            continue
        add(hn, text, "hard_negative", b, f"prefix:{frac:.2f}")
        hard_base.append(base_doc[b])
    say(f"documents: {len(docs)} ({time.perf_counter() - t0:.1f}s)")

    # ids after a shuffle: the smallest id of a cluster is any of its members
    perm = rng.permutation(len(docs))
    rendered = [rendered[i] for i in perm]
    kinds = [kinds[i] for i in perm]
    family_arr = np.asarray(family, dtype=np.int64)[perm]
    edits = [edits[i] for i in perm]
    new_index = np.empty(len(perm), dtype=np.int64)
    new_index[perm] = np.arange(len(perm))
    hard_pairs = {int(new_index[len(docs) - len(hard_base) + k]): int(new_index[hb])
                  for k, hb in enumerate(hard_base)}

    hashes, offsets = shingles(rendered)
    pairs, jac = similar_pairs(hashes, offsets, cfg.threshold)
    # a hard negative must stay a negative against every document of the set
    bad = sorted({int(x) for x in pairs.ravel() if kinds[int(x)] == "hard_negative"})
    if bad:
        keep = np.ones(len(rendered), dtype=bool)
        keep[bad] = False
        remap = np.cumsum(keep) - 1
        rendered = [t for t, k in zip(rendered, keep) if k]
        kinds = [t for t, k in zip(kinds, keep) if k]
        edits = [t for t, k in zip(edits, keep) if k]
        family_arr = family_arr[keep]
        hard_pairs = {int(remap[h]): int(remap[b]) for h, b in hard_pairs.items() if keep[h]}
        ok = keep[pairs[:, 0]] & keep[pairs[:, 1]]
        pairs, jac = remap[pairs[ok]], jac[ok]
        hashes, offsets = shingles(rendered)
    sets = [hashes[offsets[i]:offsets[i + 1]] for i in range(len(rendered))]
    hn_jac = np.array([exact_jaccard(np.unique(sets[h]), np.unique(sets[b])) for h, b in sorted(hard_pairs.items())])
    cluster = components(len(rendered), pairs)
    width = max(7, len(str(len(rendered))))
    ids = [f"doc{i:0{width}d}" for i in range(len(rendered))]
    return PlantedSet(cfg, ids, rendered, kinds, family_arr, edits, pairs, jac, cluster, hn_jac,
                      dropped_hard_negatives=len(bad), source_files=n_files,
                      seconds=time.perf_counter() - t0, sources=sources)


def _source_kind(path: str) -> str:
    name = os.path.basename(path).lower()
    if path == "/var/lib/dpkg/status":
        return "dpkg-description"
    if name == "metadata":
        return "python-metadata"
    for kind in ("changelog", "copyright", "readme", "news"):
        if name.startswith(kind):
            return kind
    return "other-doc"


def cached(cfg: PlantConfig, root: str | Path = Path(__file__).resolve().parent / ".corpora",
           log: Callable[[str], None] | None = None) -> tuple[PlantedSet, Path]:
    """``make_planted(cfg)`` saved under ``root/planted-<hash of cfg>``; loaded if already there."""
    import hashlib

    # the ground truth's shingling is part of what is built: a corpus made with another one is not reused
    key = hashlib.sha256(json.dumps({**asdict(cfg), "tokenization": TOKENIZATION}, sort_keys=True)
                         .encode()).hexdigest()[:12]
    folder = Path(root) / f"planted-{key}"
    if (folder / "meta.json").is_file():
        return PlantedSet.load(folder), folder
    ps = make_planted(cfg, log=log)
    tmp = folder.with_name(folder.name + f".tmp{os.getpid()}")
    ps.save(tmp)
    os.replace(tmp, folder)
    return ps, folder


def scaled_config(scale: float, n_bases: int = PlantConfig.n_bases, seed: int = 0) -> PlantConfig:
    """``scale`` times the bases; more documents per source file above scale 1 (the machine has
    ~2,000 files of prose, ~17,000 documents at 30 per file)."""
    return PlantConfig(n_bases=int(n_bases * scale), seed=seed,
                       docs_per_file=int(PlantConfig.docs_per_file * max(1.0, scale)))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None, help="folder for docs.jsonl, truth.npz, meta.json")
    ap.add_argument("--bases", type=int, default=PlantConfig.n_bases)
    ap.add_argument("--scale", type=float, default=1.0, help="multiply the number of bases")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    cfg = scaled_config(args.scale, n_bases=args.bases, seed=args.seed)
    ps = make_planted(cfg, log=lambda m: print(m, flush=True))
    if args.out:
        ps.save(args.out)
    print(json.dumps(ps.stats(), indent=1))


if __name__ == "__main__":
    main()
