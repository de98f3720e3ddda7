"""A Data-Juicer recipe with `document_minhash_deduplicator` runs unchanged; a misspelt or
unsupported knob is stopped by validation with its name (and a suggestion)."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from raypress.dag.runner import run_pipeline

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]


def corpus(path: Path) -> tuple[int, int]:
    """40 unrelated articles, 10 of them also present with one word changed and/or re-cased, and 3
    too short for the word filter.  Returns (rows, near duplicates)."""
    rng = random.Random(11)
    vocab = [f"word{i}" for i in range(4000)]
    docs = [" ".join(rng.choice(vocab) for _ in range(160)) for _ in range(40)]
    copies = []
    for text in docs[:10]:
        words = text.split()
        words[rng.randrange(len(words))] = "changed"
        copies.append(" ".join(words).title())
    rows = docs + copies + ["too short", "also short", "x"]
    rng.shuffle(rows)
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in rows))
    return len(rows), len(copies)


RECIPE = """\
project_name: dj-minhash
dataset_path: {data}
export_path: {out}/result.jsonl
np: 2
process:
  - words_num_filter:
      min_num: 5
  - document_minhash_deduplicator:
      tokenization: space
      window_size: 5
      lowercase: true
      num_permutations: 256
      jaccard_threshold: 0.7
"""


def test_data_juicer_minhash_recipe_runs_unchanged(ray_session, tmp_path):
    rows, near = corpus(tmp_path / "in.jsonl")
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(RECIPE.format(data=tmp_path / "in.jsonl", out=tmp_path / "out"))
    ledger = run_pipeline(str(recipe), run_dir=str(tmp_path / "run"))
    assert ledger["adds_up"], ledger["problems"]
    node = ledger["nodes"]["document_minhash_deduplicator"]
    assert node["rows_in"] == rows - 3 and node["duplicates"] == near
    out = [json.loads(line) for line in (tmp_path / "out" / "result.jsonl").read_text().splitlines()]
    assert len(out) == rows - 3 - near == ledger["nodes"]["export"]["rows_out"]
    bags = [set(r["text"].lower().split()) for r in out]
    assert all(len(a & b) / len(a | b) < 0.9 for i, a in enumerate(bags) for b in bags[:i])  # no copy left


def test_misspelt_and_unsupported_knobs_are_named_before_anything_runs(tmp_path):
    data = tmp_path / "in.jsonl"
    data.write_text('{"text": "a"}\n')
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(textwrap.dedent(f"""\
        dataset_path: {data}
        export_path: {tmp_path}/out.jsonl
        process:
          - document_minhash_deduplicator:
              jacard_threshold: 0.8
          - ray_bts_minhash_deduplicator:
              union_find_parallel_num: 4
              merge_batch_size: 1000
              union_threshold: 64
              tokenizer_model: /models/sp.model
        """))
    proc = subprocess.run([sys.executable, "-m", "raypress.cli", "validate", str(recipe)], capture_output=True,
                          text=True, cwd=REPO)
    said = " ".join((proc.stdout + proc.stderr).split())
    assert proc.returncode == 2, said
    assert "unknown parameter for document_minhash_deduplicator (did you mean 'jaccard_threshold'?)" in said
    assert "union_threshold=64 tunes Data-Juicer's union-find actors" in said
    assert "tokenizer_model is only used by Data-Juicer's 'sentencepiece' tokenization" in said
    assert "merge_batch_size" not in said and "union_find_parallel_num" not in said  # honoured / default: fine
