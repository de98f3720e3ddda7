"""``train_classifier`` + ``evaluate_classifier`` on real Fashion-MNIST: two seeds trained in one Ray
Train run on two workers (one seed each), evaluated on 1,000 test images."""

from __future__ import annotations

import json

import pytest
import torch

torch.set_num_threads(1)

from raypress.artifacts import DatasetArtifact, ModelArtifact, ReportArtifact  # noqa: E402
from raypress.models.image_classifier import classifier_set_members, load_classifier  # noqa: E402
from raypress.operators.base import RunContext  # noqa: E402
from raypress.operators.io.idx_images import dataset_files, read_idx, rows_table  # noqa: E402
from raypress.operators.purification.evaluate_classifier import EvaluateClassifier  # noqa: E402
from raypress.operators.purification.train_classifier import TrainClassifier  # noqa: E402

pytestmark = pytest.mark.integration


def _fashion_rows(name: str, limit: int):
    import ray.data

    try:
        images_path, labels_path, split = dataset_files(name)
    except FileNotFoundError as error:
        pytest.skip(str(error))
    images, labels = read_idx(images_path, labels_path, 0, limit)
    table = rows_table(images, labels, 0, split, name)
    return DatasetArtifact(ray.data.from_arrow([table.slice(i, 500) for i in range(0, table.num_rows, 500)]),
                           rows=table.num_rows)


@pytest.fixture(scope="module")
def trained(ray_session, tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("run")
    events: list[dict] = []
    stage = TrainClassifier(TrainClassifier.Params(width=16, epochs=2, batch_size=64, seeds=[0, 1], num_workers=2))
    ctx = RunContext(run_dir=str(run_dir), node_id="clf", emit=events.append)
    model = stage.run({"data": _fashion_rows("fashion-mnist-train", 2000)}, ctx)
    return model, events, run_dir


def test_one_run_trains_a_model_per_seed(trained):
    model, events, run_dir = trained
    assert isinstance(model, ModelArtifact) and model.path.endswith("models/clf")
    config = json.loads((run_dir / "models" / "clf" / "config.json").read_text())
    assert config["kind"] == "image_classifier_set" and config["seeds"] == [0, 1]
    assert config["rows"] == 2000 and sum(config["label_counts"].values()) == 2000
    assert config["training"]["num_workers"] == 2
    for seed in ("0", "1"):
        summary = config["per_seed"][seed]
        assert summary["epochs"] == 2 and summary["final_loss"] < summary["initial_loss"]
    assert ModelArtifact.load(model.path).config["kind"] == "image_classifier_set"
    progress = [e for e in events if e["event"] == "train_progress"]
    assert sorted((e["seed"], e["epoch"]) for e in progress) == [(0, 1), (0, 2), (1, 1), (1, 2)]
    assert {e["rank"] for e in progress} == {0, 1}  # each worker trained its own seed
    assert not (run_dir / "ray_train" / "clf").exists()  # the Model dir is the one copy kept


def test_seeds_give_different_models(trained):
    model, _, _ = trained
    members = classifier_set_members(model.path)
    a, _ = load_classifier(members[0])
    b, _ = load_classifier(members[1])
    assert any(not torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))


def test_evaluate_reports_mean_std_and_per_class(trained, tmp_path):
    model, _, _ = trained
    stage = EvaluateClassifier(EvaluateClassifier.Params(name="clean"))
    events: list[dict] = []
    ctx = RunContext(run_dir=str(tmp_path), node_id="eval", emit=events.append)
    report = stage.run({"data": _fashion_rows("fashion-mnist-test", 1000), "model": model}, ctx)
    assert isinstance(report, ReportArtifact)
    m = ReportArtifact.load(report.path).metrics
    assert m["name"] == "clean" and m["rows"] == 1000 and m["seeds"] == [0, 1]
    assert set(m["accuracy"]) == {"0", "1"} and m["accuracy_mean"] > 0.7
    values = list(m["accuracy"].values())
    assert m["accuracy_mean"] == pytest.approx(sum(values) / 2)
    assert m["accuracy_std"] == pytest.approx(abs(values[0] - values[1]) / 2 ** 0.5)
    assert set(m["per_class_accuracy"]) == {str(c) for c in range(10)}
    assert all(0.0 <= v <= 1.0 for v in m["per_class_accuracy"].values())
    assert sum(m["label_counts"].values()) == 1000
    assert [e["event"] for e in events] == ["evaluated"]
