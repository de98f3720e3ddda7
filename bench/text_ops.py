"""Data-Juicer text ops, one at a time, on real text: MB/s per core of each op's batch work.

Corpus: ``bench/planted_near_dups.py``'s documents (prose found on this Debian machine: changelogs,
copyright files, READMEs, package descriptions; ~7.6 MB at scale 1), read once into Arrow batches.
Each op runs in this one process (one core, no Ray) over every batch, at its own batch size, the
way a Ray task runs it: a filter's ``compute_stats`` + ``drop_reasons``, a mapper's
``process_batch``.  The best of ``--repeats`` passes is reported.

Baseline (named ``python-reference``): with ``--reference``, an op's previous pure-Python
implementation kept in ``tests/unit/text_op_references.py`` runs on the same rows, and the ratio
is op / reference; without it only the op's own MB/s per core is printed.

    python bench/text_ops.py [--corpus bench/.corpora/planted] [--ops a,b] [--repeats 3] [--reference]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import pyarrow as pa

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run from a checkout without installing
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "tests" / "unit"))

# The Data-Juicer text recipe the curation benchmark times: 4 mappers, 10 filters (defaults as
# Data-Juicer's), in recipe order.
RECIPE_OPS: list[tuple[str, dict]] = [
    ("clean_email_mapper", {}),
    ("clean_links_mapper", {}),
    ("whitespace_normalization_mapper", {}),
    ("punctuation_normalization_mapper", {}),
    ("alphanumeric_filter", {}),
    ("average_line_length_filter", {}),
    ("character_repetition_filter", {}),
    ("flagged_words_filter", {}),
    ("maximum_line_length_filter", {}),
    ("special_characters_filter", {}),
    ("stopwords_filter", {}),
    ("text_length_filter", {}),
    ("word_repetition_filter", {}),
    ("words_num_filter", {}),
]


def load_corpus(folder: Path) -> list[str]:
    path = folder / "docs.jsonl"
    if not path.exists():
        import planted_near_dups

        folder.mkdir(parents=True, exist_ok=True)
        planted_near_dups.main(["--out", str(folder)])
    return [json.loads(line)["text"] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def batches(texts: list[str], size: int) -> list[pa.Table]:
    return [pa.table({"id": [str(i) for i in range(lo, min(lo + size, len(texts)))],
                      "text": texts[lo:lo + size]}) for lo in range(0, len(texts), size)]


def make_op(name: str, params: dict):
    from raypress.operators.registry import get_op

    cls = get_op(name)
    return cls(cls.Params.model_validate(params))


def run_op(op, tables: list[pa.Table]) -> float:
    from raypress.operators.base import Filter

    start = time.perf_counter()
    if isinstance(op, Filter):
        for t in tables:
            op.drop_reasons(op.compute_stats(t))
    else:
        for t in tables:
            op.process_batch(t)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=REPO / "bench" / ".corpora" / "planted")
    ap.add_argument("--ops", default="", help="comma list of op names (default: the text recipe's)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--reference", action="store_true", help="also time the previous implementations")
    args = ap.parse_args()

    texts = load_corpus(args.corpus)
    mb = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    wanted = [o for o in args.ops.split(",") if o]
    ops = [(n, p) for n, p in RECIPE_OPS if not wanted or n in wanted] + \
          [(n, {}) for n in wanted if n not in dict(RECIPE_OPS)]
    refs = {}
    if args.reference:
        import text_op_references

        refs = text_op_references.REFERENCES
    print(f"corpus: {len(texts)} documents, {mb:.1f} MB (best of {args.repeats})")
    print(f"{'op':36s} {'MB/s/core':>10s} {'reference':>10s} {'ratio':>7s}")
    for name, params in ops:
        op = make_op(name, params)
        tables = batches(texts, op.batch_size or 1000)
        best = min(run_op(op, tables) for _ in range(args.repeats))
        line = f"{name:36s} {mb / best:10.1f}"
        if name in refs:
            ref_best = min(_time_reference(refs[name], params, texts) for _ in range(args.repeats))
            line += f" {mb / ref_best:10.1f} {ref_best / best:7.2f}"
        print(line)


def _time_reference(fn, params: dict, texts: list[str]) -> float:
    start = time.perf_counter()
    fn(texts, **params)
    return time.perf_counter() - start


if __name__ == "__main__":
    main()
