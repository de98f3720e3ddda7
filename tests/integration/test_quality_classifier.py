"""Training and inference as two nodes of one DAG: a Ray Train stage makes the Model that a
stateful filter then loads.  "Good" rows are real prose (sentences from the long descriptions of
the installed Python packages); "bad" rows are word salad drawn from the same vocabulary and
web boilerplate, the two kinds of text a quality filter is meant to catch."""

from __future__ import annotations

import importlib.metadata
import json
import random
import re
import textwrap
from pathlib import Path

import pyarrow as pa
import pytest

from raypress.artifacts import ModelArtifact
from raypress.models.ngram_classifier import load
from raypress.operators.quality.quality_classifier_filter import QualityClassifierFilter
from raypress.operators.quality.train_quality_classifier import TrainQualityClassifier
from raypress.operators.registry import get_op

BOILERPLATE = [
    "Copyright {year} All rights reserved", "Privacy Policy", "Terms of Use", "Cookie settings",
    "Subscribe to our newsletter", "Click here", "Log in", "Sign up", "Home", "Contact us",
    "Read more", "Share on Twitter", "Follow us", "Accept all cookies", "Skip to content",
]
EPOCHS = 5


def package_sentences() -> list[str]:
    """Plain prose sentences (8-40 words, no markup) from the installed packages' descriptions."""
    found = set()
    for dist in importlib.metadata.distributions():
        for sentence in re.split(r"(?<=[.!?])\s+", dist.metadata.get_payload() or ""):
            sentence = " ".join(sentence.split())
            if (8 <= len(sentence.split()) <= 40 and sentence[0].isupper() and sentence.endswith(".")
                    and not re.search(r"[`<>|_*=\[\]{}:/\\]", sentence)):
                found.add(sentence)
    return sorted(found)


def labelled_rows(sentences: list[str], seed: int) -> list[dict]:
    """Each real sentence ("good") plus one bad row: word salad or boilerplate, alternately."""
    rng = random.Random(seed)
    vocabulary = sorted({w for s in sentences for w in s.split()})
    rows = []
    for i, sentence in enumerate(sentences):
        rows.append({"id": f"{seed}-{i}-good", "text": sentence, "label": "good"})
        if i % 2 == 0:
            bad = " ".join(rng.sample(vocabulary, len(sentence.split())))
        else:
            bad = " | ".join(rng.sample(BOILERPLATE, rng.randint(3, 7))).format(year=rng.randint(2000, 2025))
        rows.append({"id": f"{seed}-{i}-bad", "text": bad, "label": "bad"})
    return rows


@pytest.fixture(scope="module")
def corpus() -> tuple[list[dict], list[dict]]:
    sentences = package_sentences()
    assert len(sentences) >= 250, f"only {len(sentences)} prose sentences in the installed packages"
    random.Random(0).shuffle(sentences)
    return labelled_rows(sentences[:300], seed=1), labelled_rows(sentences[300:], seed=2)


@pytest.fixture(scope="module")
def pipeline_run(ray_session, corpus, tmp_path_factory) -> tuple[dict, Path]:
    """One pipeline trains the classifier and filters with it; the stage tests below read its Model
    and events (one Ray Train run for the module: each costs ~20 s of start-up here)."""
    from raypress.dag.runner import run_pipeline

    tmp_path = tmp_path_factory.mktemp("quality")
    train_rows, test_rows = corpus
    for name, rows in (("train", train_rows), ("test", test_rows)):
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    path = tmp_path / "pipeline.yaml"
    path.write_text(textwrap.dedent(f"""\
        name: quality-classifier
        settings: {{seed: 0}}
        nodes:
          - id: labelled
            op: read_jsonl
            with: {{paths: ["{tmp_path}/train.jsonl"], id_key: id}}
          - id: clf
            op: train_quality_classifier
            input: labelled
            with: {{label_key: label, epochs: {EPOCHS}, lr: 0.1, dim: 32, buckets: {1 << 18}, word_ngrams: 2,
                    batch_size: 32, num_workers: 2, seed: 0, val_fraction: 0.2}}
          - id: unlabelled
            op: read_jsonl
            with: {{paths: ["{tmp_path}/test.jsonl"], id_key: id}}
          - id: quality
            op: quality_classifier_filter
            input: {{data: unlabelled, model: clf}}
            with: {{positive_label: good, min_score: 0.5}}
          - id: out
            op: write_jsonl
            input: quality
            with: {{path: "{{run_dir}}/out"}}
        """))
    run_dir = tmp_path / "run"
    return run_pipeline(str(path), run_dir=str(run_dir)), run_dir


@pytest.fixture(scope="module")
def trained(pipeline_run) -> tuple[ModelArtifact, list[dict], Path]:
    _, run_dir = pipeline_run
    events = [json.loads(x) for x in (run_dir / "events.jsonl").read_text().splitlines()]
    return ModelArtifact.load(str(run_dir / "models" / "clf")), [e for e in events if e.get("node") == "clf"], run_dir


def test_registered_under_the_pipeline_names():
    assert get_op("train_quality_classifier") is TrainQualityClassifier
    assert get_op("quality_classifier_filter") is QualityClassifierFilter
    assert QualityClassifierFilter.stateful


def test_stage_writes_a_loadable_model_with_its_manifest(trained, corpus):
    model, events, run_dir = trained
    assert Path(model.path) == run_dir / "models" / "clf"
    manifest = ModelArtifact.load(model.path).config
    assert manifest["kind"] == "ngram_classifier" and manifest["labels"] == ["bad", "good"]
    net = load(model.path)
    assert net.config.labels == ["bad", "good"] and net.config.buckets == 1 << 18

    metrics = manifest["metrics"]
    rows = len(corpus[0])
    assert metrics["epoch"] == EPOCHS
    # The hash split holds out about a fifth; streaming_split(equal=True) may drop one row.
    assert rows - 1 <= metrics["train_rows"] + metrics["val_rows"] <= rows
    assert 0.1 * rows < metrics["val_rows"] < 0.3 * rows
    assert metrics["val_accuracy"] >= 0.8


def test_stage_reports_progress_every_epoch(trained):
    _, events, _ = trained
    progress = [e for e in events if e["event"] == "train_progress"]
    assert [e["epoch"] for e in progress] == list(range(1, EPOCHS + 1))
    assert all(e["node"] == "clf" for e in progress)
    assert progress[-1]["loss"] < progress[0]["loss"]


def test_filter_scores_held_out_good_rows_above_bad(trained, corpus):
    model, _, _ = trained
    _, test_rows = corpus
    op = QualityClassifierFilter(QualityClassifierFilter.Params(positive_label="good", min_score=0.5),
                                 artifacts={"model": model})
    table = pa.Table.from_pylist(test_rows)
    scores = op.compute_stats(table)["quality_score"]
    assert len(scores) == len(test_rows) and all(0.0 <= s <= 1.0 for s in scores)

    good = [s for s, r in zip(scores, test_rows, strict=True) if r["label"] == "good"]
    bad = [s for s, r in zip(scores, test_rows, strict=True) if r["label"] == "bad"]
    auc = sum(g > b for g in good for b in bad) / (len(good) * len(bad))
    right = sum((s >= 0.5) == (r["label"] == "good") for s, r in zip(scores, test_rows, strict=True))
    accuracy = right / len(test_rows)
    assert auc >= 0.95, auc
    assert accuracy >= 0.85, accuracy

    reasons = op.drop_reasons({"quality_score": scores})
    assert set(reasons) <= {None, "quality_score < min"}
    assert [r is None for r in reasons] == [s >= 0.5 for s in scores]

    # The default positive label is the last in sorted order: "good" here.
    default = QualityClassifierFilter(QualityClassifierFilter.Params(), artifacts={"model": model})
    assert default.compute_stats(table)["quality_score"] == scores
    negative = QualityClassifierFilter(QualityClassifierFilter.Params(positive_label="bad", min_score=None),
                                       artifacts={"model": model})
    flipped = negative.compute_stats(table)["quality_score"]
    assert all(abs(a + b - 1.0) < 1e-5 for a, b in zip(scores, flipped, strict=True))


def test_training_and_filtering_are_nodes_of_one_pipeline(pipeline_run, corpus):
    ledger, run_dir = pipeline_run
    _, test_rows = corpus
    assert ledger["adds_up"], ledger.get("problems")
    assert ModelArtifact.load(str(run_dir / "models" / "clf")).config["kind"] == "ngram_classifier"

    quality = ledger["nodes"]["quality"]
    assert quality["rows_in"] == len(test_rows)
    assert quality["rows_in"] == quality["rows_out"] + sum(quality["dropped"].values())
    assert set(quality["dropped"]) == {"quality_score < min"}
    kept = [json.loads(line) for f in sorted((run_dir / "out").glob("*.jsonl")) for line in f.read_text().splitlines()]
    assert len(kept) == quality["rows_out"]
    labels = {r["id"]: r["label"] for r in test_rows}
    kept_good = sum(labels[r["id"]] == "good" for r in kept)
    total_good = sum(label == "good" for label in labels.values())
    assert kept_good >= 0.8 * total_good and len(kept) - kept_good <= 0.2 * (len(test_rows) - total_good)

    events = [json.loads(x) for x in (run_dir / "events.jsonl").read_text().splitlines()]
    assert [e["epoch"] for e in events if e["event"] == "train_progress"] == list(range(1, EPOCHS + 1))
