"""The n-gram classifier without Ray: stable features, exact save/load, and that it learns."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from raypress.artifacts import ModelArtifact
from raypress.models import ngram_classifier as nc
from raypress.operators.quality.quality_classifier_filter import QualityClassifierFilter, positive_index

# Adagrad on sparse gradients warns once that torch skips sparse-tensor invariant checks.
pytestmark = pytest.mark.filterwarnings("ignore:Sparse invariant checks")

@pytest.fixture(autouse=True)
def one_torch_thread():
    """These models are tiny: thread hand-offs would cost more than the maths on a busy machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


TEXTS = ["Hello, World!", "the cat sat on the mat", "", "The cat sat on the mat"]

SPACE = [
    "The telescope observed a distant galaxy beyond the milky way.",
    "Astronomers measured the orbit of a comet around the sun.",
    "A bright planet rose above the horizon after sunset.",
    "The probe sent images of the moons of Jupiter back to earth.",
    "Stars in the nebula are born from clouds of gas and dust.",
    "The eclipse darkened the sky as the moon covered the sun.",
    "Radio astronomers listen to signals from pulsars and quasars.",
    "The orbit of the planet Mars takes almost two earth years.",
    "Light from the galaxy travelled for millions of years.",
    "The space station passed overhead in the night sky.",
]
KITCHEN = [
    "Whisk the eggs with sugar until the batter is smooth.",
    "Bake the bread in a hot oven for forty minutes.",
    "Chop the onions and fry them slowly in butter.",
    "Season the soup with salt, pepper and fresh herbs.",
    "Knead the dough and let it rise in a warm kitchen.",
    "Simmer the tomato sauce and stir in the garlic.",
    "Roast the vegetables with olive oil and rosemary.",
    "Melt the chocolate and fold it into the cream.",
    "Grill the fish and serve it with lemon and rice.",
    "Stir the flour into the butter to thicken the sauce.",
]


def test_tokenize_lowercases_words_and_keeps_punctuation():
    assert nc.tokenize("Hello, World!  it's") == ["hello", ",", "world", "!", "it", "'", "s"]


def test_ngram_ids_count_range_and_case_insensitivity():
    ids = nc.ngram_ids(["a", "b", "c"], word_ngrams=2, buckets=97)
    assert len(ids) == 3 + 2  # three unigrams, two bigrams
    assert all(0 <= i < 97 for i in ids)
    flat_a, _ = nc.featurize(["The Cat"], 2, 1 << 20)
    flat_b, _ = nc.featurize(["the cat"], 2, 1 << 20)
    assert torch.equal(flat_a, flat_b)
    assert len(set(flat_a.tolist())) == 3  # "the", "cat", "the cat" land in different buckets


def test_featurize_offsets_delimit_each_text():
    ids, offsets = nc.featurize(TEXTS, 2, 1000)
    lengths = [len(nc.ngram_ids(nc.tokenize(t), 2, 1000)) for t in TEXTS]
    assert offsets.tolist() == [0, lengths[0], lengths[0] + lengths[1], sum(lengths[:3])]
    assert len(ids) == sum(lengths)
    assert ids.dtype == offsets.dtype == torch.long


def test_featurize_is_the_same_in_another_process_with_another_hash_seed():
    code = ("import json; from raypress.models.ngram_classifier import featurize; "
            f"ids, off = featurize({TEXTS!r}, 3, 4096); print(json.dumps([ids.tolist(), off.tolist()]))")
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    ids, offsets = nc.featurize(TEXTS, 3, 4096)
    assert json.loads(out.stdout) == [ids.tolist(), offsets.tolist()]


def _train(model: nc.NgramClassifier, texts: list[str], targets: list[int], steps: int) -> None:
    torch.manual_seed(0)
    optimizer = torch.optim.Adagrad(model.parameters(), lr=0.1)
    ids, offsets = model.featurize(texts)
    y = torch.tensor(targets)
    for _ in range(steps):
        loss = torch.nn.functional.cross_entropy(model(ids, offsets), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def test_learns_a_small_separable_set_and_generalises_by_vocabulary():
    torch.manual_seed(0)
    model = nc.NgramClassifier(nc.NgramConfig(labels=[0, 1], dim=16, buckets=1 << 12, word_ngrams=2))
    texts, targets = SPACE[:8] + KITCHEN[:8], [0] * 8 + [1] * 8
    assert model.predict_proba(texts)[:, 1].tolist() == [0.5] * 16  # zero output layer: no opinion yet
    _train(model, texts, targets, steps=300)
    assert model.predict_proba(texts).argmax(-1).tolist() == targets
    held_out = SPACE[8:] + KITCHEN[8:]
    assert model.predict_proba(held_out).argmax(-1).tolist() == [0, 0, 1, 1]


def test_save_load_roundtrip_gives_identical_outputs(tmp_path):
    model = nc.NgramClassifier(nc.NgramConfig(labels=[False, True], dim=8, buckets=512, word_ngrams=3))
    _train(model, SPACE + KITCHEN, [0] * 10 + [1] * 10, steps=20)
    nc.save(model, tmp_path / "m")
    loaded = nc.load(tmp_path / "m")
    assert loaded.config == model.config
    assert loaded.config.labels == [False, True] and isinstance(loaded.config.labels[0], bool)
    assert not loaded.training
    probe = ["The moon and the sun.", "Butter and eggs.", ""]
    assert torch.equal(loaded.predict_proba(probe), model.predict_proba(probe))


def test_a_classifier_needs_two_labels():
    with pytest.raises(ValueError, match="at least 2 labels"):
        nc.NgramClassifier(nc.NgramConfig(labels=["only"]))


@pytest.mark.parametrize(
    "labels, positive, index",
    [(["bad", "good"], None, 1), ([False, True], None, 1), ([0, 1], None, 1), (["high", "low"], "high", 0),
     ([0, 1], "1", 1), ([False, True], True, 1), ([0, 1, 2], 0, 0)],
)
def test_positive_label_resolution(labels, positive, index):
    assert positive_index(labels, positive) == index


def test_positive_label_must_be_a_model_label():
    with pytest.raises(ValueError, match="not one of the model's labels"):
        positive_index(["bad", "good"], "great")


def test_filter_refuses_a_missing_or_foreign_model(tmp_path):
    params = QualityClassifierFilter.Params()
    with pytest.raises(ValueError, match="needs a Model input"):
        QualityClassifierFilter(params)
    with pytest.raises(ValueError, match="not a 'ngram_classifier'"):
        QualityClassifierFilter(params, artifacts={"model": ModelArtifact(str(tmp_path), {"kind": "moe"})})


def test_filter_scores_batches_with_a_saved_model(tmp_path):
    import pyarrow as pa

    model = nc.NgramClassifier(nc.NgramConfig(labels=["bad", "good"], dim=8, buckets=1 << 12))
    _train(model, SPACE + KITCHEN, [1] * 10 + [0] * 10, steps=100)
    nc.save(model, tmp_path)
    artifact = ModelArtifact(str(tmp_path), {"kind": "ngram_classifier", "labels": ["bad", "good"]})
    op = QualityClassifierFilter(QualityClassifierFilter.Params(min_score=0.5, max_score=0.99),
                                 artifacts={"model": artifact})
    table = pa.table({"text": [SPACE[0], KITCHEN[0], None]})
    scores = op.compute_stats(table)["quality_score"]
    assert scores[0] > 0.5 > scores[1]
    assert scores[2] == pytest.approx(op.compute_stats(pa.table({"text": [""]}))["quality_score"][0])
    assert op.drop_reasons({"quality_score": [0.7, 0.2, 0.995]}) == [None, "quality_score < min", "quality_score > max"]
    assert op.compute_stats(pa.table({"text": pa.array([], pa.string())})) == {"quality_score": []}


class _Rows:
    """Stands in for a Ray Data iterator/dataset: numpy batches and ``unique``, no Ray."""

    def __init__(self, columns: dict):
        self.columns = columns

    def iter_batches(self, batch_size: int, batch_format: str):
        import numpy as np

        n = len(next(iter(self.columns.values())))
        for start in range(0, n, batch_size):
            yield {k: np.array(v[start : start + batch_size], dtype=object if k == "text" else None)
                   for k, v in self.columns.items()}

    def unique(self, column: str, ignore_nulls: bool):
        return list(dict.fromkeys(self.columns[column]))


def test_training_labels_are_sorted_plain_values_and_must_be_two_or_more():
    from raypress.operators.quality.train_quality_classifier import _labels

    assert _labels(_Rows({"y": [True, False, True]}), "y") == [False, True]
    import numpy as np

    ints = _labels(_Rows({"y": list(np.array([3, 1, 3, 2]))}), "y")
    assert ints == [1, 2, 3] and all(type(v) is int for v in ints)
    assert _labels(_Rows({"y": ["good", "bad"]}), "y") == ["bad", "good"]
    with pytest.raises(ValueError, match="null labels"):
        _labels(_Rows({"y": ["good", None, "bad"]}), "y")
    with pytest.raises(ValueError, match="need at least 2"):
        _labels(_Rows({"y": ["good", "good"]}), "y")


def test_training_batches_hold_out_rows_by_text_hash():
    from raypress.operators.quality.train_quality_classifier import _batches, _held_out

    texts = [f"sentence number {i} about the sky" for i in range(40)] + [None]
    labels = [i % 2 == 0 for i in range(41)]
    config = {"model": {"labels": [False, True], "word_ngrams": 2, "buckets": 1 << 10}, "seed": 7,
              "val_fraction": 0.3, "batch_size": 16, "text_key": "text", "label_key": "label"}
    batches = list(_batches(_Rows({"text": texts, "label": labels}), config))
    assert len(batches) == 3
    train_rows = sum(len(train[2]) for train, _ in batches)
    val_rows = sum(len(val[2]) for _, val in batches)
    assert train_rows + val_rows == 41 and 0 < val_rows < 41
    first_train, first_val = batches[0]
    expected = [int(v) for v in labels[:16]]
    assert sorted(first_train[2].tolist() + first_val[2].tolist()) == sorted(expected)
    # The held-out set depends on the texts and the seed only: the same again, another for seed 8.
    again = [val[0].tolist() for _, val in _batches(_Rows({"text": texts, "label": labels}), config)]
    assert again == [val[0].tolist() for _, val in batches]
    held = {t for t in texts[:40] if _held_out(t, 7, 0.3)}
    assert 0 < len(held) < 40 and held != {t for t in texts[:40] if _held_out(t, 8, 0.3)}
