"""The small image classifiers, their saved form, the Ray-free halves of the classifier stages, and
``specified_numeric_field_filter`` on Arrow tables (no Ray)."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest
import torch

torch.set_num_threads(1)

from raypress.dag.batch_exec import StreamingOpRunner  # noqa: E402
from raypress.models.bridge_unet import BridgeUNet, BridgeUNetConfig, save_bridge  # noqa: E402
from raypress.models.image_classifier import (  # noqa: E402
    ClassifierConfig,
    ImageClassifier,
    classifier_set_members,
    load_classifier,
    save_classifier,
    write_classifier_set,
)
from raypress.operators.general.specified_numeric_field_filter import SpecifiedNumericFieldFilter  # noqa: E402
from raypress.operators.purification.classifiers.data import decode_table  # noqa: E402
from raypress.operators.purification.evaluate_classifier import accuracy_summary, predict  # noqa: E402
from raypress.operators.purification.train_classifier import (  # noqa: E402
    TrainClassifierParams,
    crop_flip,
    seeds_of,
    train_one,
)
from raypress.image_codecs import encode_png  # noqa: E402
from raypress.schema import KIND_COL, NODE_COL, REASON_COL, STATS_COL  # noqa: E402


# ---------------------------------------------------------------------------------------------
# the networks


@pytest.mark.parametrize("arch", ["cnn", "resnet"])
def test_logits_shape_for_each_arch_and_width(arch):
    for width in (4, 8):
        model = ImageClassifier(ClassifierConfig(arch=arch, width=width, num_classes=7)).eval()
        assert model(torch.rand(3, 1, 28, 28)).shape == (3, 7)


def test_wider_network_has_more_parameters():
    small = sum(p.numel() for p in ImageClassifier(ClassifierConfig(width=4)).parameters())
    large = sum(p.numel() for p in ImageClassifier(ClassifierConfig(width=8)).parameters())
    assert large > 2 * small


def test_non_square_and_rgb_inputs():
    model = ImageClassifier(ClassifierConfig(arch="cnn", width=4, in_channels=3, image_size=(32, 24))).eval()
    assert model(torch.rand(2, 3, 32, 24)).shape == (2, 10)


def test_wrong_input_shape_is_a_clear_error():
    model = ImageClassifier(ClassifierConfig(width=4))
    with pytest.raises(ValueError, match=r"expects \(B, 1, 28, 28\).*\(2, 1, 32, 32\)"):
        model(torch.rand(2, 1, 32, 32))


def test_config_validation_and_round_trip():
    cfg = ClassifierConfig(arch="resnet", width=6, num_classes=3, image_size=(28, 28), dropout=0.1)
    assert ClassifierConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg
    with pytest.raises(ValueError, match="arch must be one of"):
        ClassifierConfig(arch="vit")
    with pytest.raises(ValueError, match="unknown ClassifierConfig keys \\['depth'\\]"):
        ClassifierConfig.from_dict({"depth": 3})


# ---------------------------------------------------------------------------------------------
# saving and loading


def test_save_load_gives_the_same_outputs(tmp_path):
    torch.manual_seed(0)
    model = ImageClassifier(ClassifierConfig(arch="resnet", width=4)).eval()
    x = torch.rand(4, 1, 28, 28)
    save_classifier(model, tmp_path / "m", {"seed": 3, "training": {"final_loss": 0.5}})
    loaded, config = load_classifier(tmp_path / "m")
    assert config["kind"] == "image_classifier" and config["seed"] == 3 and config["model"]["arch"] == "resnet"
    assert not loaded.training
    assert torch.allclose(loaded(x), model(x), atol=1e-6)


def test_reserved_extra_keys_are_refused(tmp_path):
    with pytest.raises(ValueError, match="reserved"):
        save_classifier(ImageClassifier(ClassifierConfig(width=4)), tmp_path, {"kind": "other"})


def test_loading_another_kind_of_model_names_the_kind(tmp_path):
    bridge = BridgeUNet(BridgeUNetConfig(base_channels=8, channel_mult=(1, 2), num_res_blocks=1, attention=False,
                                         norm_groups=4))
    save_bridge(bridge, {}, tmp_path / "bridge")
    with pytest.raises(ValueError, match="kind 'bridgepure_ddbm', expected 'image_classifier'"):
        load_classifier(tmp_path / "bridge")
    with pytest.raises(ValueError, match="kind 'bridgepure_ddbm'"):
        classifier_set_members(tmp_path / "bridge")
    with pytest.raises(FileNotFoundError, match="config.json is missing"):
        load_classifier(tmp_path / "nowhere")


def test_classifier_set_lists_its_seeds(tmp_path):
    cfg = ClassifierConfig(width=4)
    for seed in (0, 5):
        save_classifier(ImageClassifier(cfg), tmp_path / f"seed_{seed}", {"seed": seed, "training": {"seed": seed}})
    manifest = write_classifier_set(tmp_path, cfg.to_dict(), [0, 5], {"rows": 12})
    assert manifest["kind"] == "image_classifier_set" and manifest["per_seed"]["5"] == {"seed": 5}
    assert json.loads((tmp_path / "config.json").read_text())["rows"] == 12
    assert classifier_set_members(tmp_path) == {0: tmp_path / "seed_0", 5: tmp_path / "seed_5"}
    assert classifier_set_members(tmp_path / "seed_5") == {5: tmp_path / "seed_5"}  # a single model
    (tmp_path / "seed_5" / "model.pt").unlink()
    with pytest.raises(FileNotFoundError, match="lacks the models"):
        classifier_set_members(tmp_path)


# ---------------------------------------------------------------------------------------------
# the stage's Ray-free pieces


def _table(images, labels, ids=None) -> pa.Table:
    ids = ids or [f"r{i}" for i in range(len(images))]
    blobs = [img if isinstance(img, (bytes, type(None))) else encode_png(img) for img in images]
    return pa.table({"id": ids, "image": pa.array(blobs, pa.binary()), "label": pa.array(labels, pa.int64())})


def test_decode_table_sorts_by_id_and_counts_labels():
    imgs = [np.full((28, 28), v, np.uint8) for v in (10, 20, 30)]
    rows = decode_table(_table(imgs, [2, 0, 2], ["c", "a", "b"]), "image", "label", (28, 28), 10)
    assert rows.ids == ["a", "b", "c"]
    assert rows.images[:, 0, 0].tolist() == [20, 30, 10] and rows.labels.tolist() == [0, 2, 2]
    assert rows.label_counts() == {"0": 1, "2": 2}


def test_decode_table_names_the_bad_row():
    good = np.zeros((28, 28), np.uint8)
    with pytest.raises(ValueError, match=r"row 'r1': label 10 is not an integer in \[0, 10\)"):
        decode_table(_table([good, good], [0, 10]), "image", "label", (28, 28), 10)
    with pytest.raises(ValueError, match=r"row 'r1': label None"):
        decode_table(_table([good, good], [0, None]), "image", "label", (28, 28), 10)
    with pytest.raises(ValueError, match="row 'r1': cannot decode image"):
        decode_table(_table([good, b"not a png"], [0, 1]), "image", "label", (28, 28), 10)
    with pytest.raises(ValueError, match="row 'r0': image is 32x32, this op expects 28x28"):
        decode_table(_table([np.zeros((32, 32), np.uint8)], [0]), "image", "label", (28, 28), 10)
    with pytest.raises(ValueError, match=r"lacks columns \['label'\]"):
        decode_table(_table([good], [0]).drop_columns(["label"]), "image", "label", (28, 28), 10)


def test_crop_flip_keeps_shape_and_is_a_shift_or_flip():
    x = torch.rand(16, 1, 28, 28)
    out = crop_flip(x, torch.Generator().manual_seed(0), pad=0)  # no room to shift: identity or flip
    assert out.shape == x.shape
    for a, b in zip(out, x):
        assert torch.equal(a, b) or torch.equal(a, b.flip(-1))
    shifted = crop_flip(x, torch.Generator().manual_seed(1), pad=2)
    assert shifted.shape == x.shape and not torch.equal(shifted, x)


def _two_blob_classes(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Class 0: a bright square top-left; class 1: bottom-right; plus noise."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, n)
    images = rng.integers(0, 60, (n, 28, 28)).astype(np.uint8)
    for img, label in zip(images, labels):
        if label == 0:
            img[3:12, 3:12] = 230
        else:
            img[16:25, 16:25] = 230
    return images, labels


def test_train_one_learns_and_follows_its_seed():
    images, labels = _two_blob_classes(96, 0)
    cfg = ClassifierConfig(width=4, num_classes=2).to_dict()
    kwargs = dict(epochs=3, batch_size=16, lr=3e-3, weight_decay=5e-4, augment=True)
    seen = []
    model_a, summary = train_one(images, labels, cfg, seed=0, on_epoch=seen.append, **kwargs)
    model_b, _ = train_one(images, labels, cfg, seed=0, **kwargs)
    model_c, _ = train_one(images, labels, cfg, seed=1, **kwargs)
    assert [m["epoch"] for m in seen] == [1, 2, 3] and summary["steps"] == 3 * 6
    assert summary["final_loss"] < summary["initial_loss"]
    test_images, test_labels = _two_blob_classes(100, 1)
    assert (predict(model_a, test_images, batch_size=32) == test_labels).mean() > 0.9
    for key, value in model_a.state_dict().items():
        assert torch.equal(value, model_b.state_dict()[key]), key
    assert not torch.equal(model_a.state_dict()["body.head.4.weight"], model_c.state_dict()["body.head.4.weight"])


def test_steps_replace_epochs_and_cut_the_last_pass_short():
    images, labels = _two_blob_classes(40, 0)  # 3 batches of 16 per pass (16, 16, 8)
    cfg = ClassifierConfig(width=4, num_classes=2).to_dict()
    seen = []
    _, summary = train_one(images, labels, cfg, seed=0, epochs=1, steps=7, batch_size=16, lr=3e-3,
                           weight_decay=0.0, augment=False, on_epoch=seen.append)
    assert summary["steps"] == 7 and summary["epochs"] == 3  # passes 1, 2 whole; pass 3 one batch
    assert [m["epoch"] for m in seen] == [1, 2, 3]
    seen.clear()
    train_one(images, labels, cfg, seed=0, epochs=1, steps=7, batch_size=16, lr=3e-3, weight_decay=0.0,
              augment=False, on_epoch=seen.append, report_every_s=60.0)
    assert [m["epoch"] for m in seen] == [1, 3]  # the first and last pass; the middle one came too soon


def test_accuracy_summary_by_hand():
    labels = np.array([0, 0, 1, 1])
    per_seed = {0: np.array([0, 0, 1, 1]), 1: np.array([0, 1, 1, 0]), 2: np.array([1, 1, 1, 1])}
    s = accuracy_summary(per_seed, labels, num_classes=3)
    assert s["accuracy"] == {"0": 1.0, "1": 0.5, "2": 0.5}
    assert s["accuracy_mean"] == pytest.approx(2 / 3)
    assert s["accuracy_std"] == pytest.approx(np.std([1.0, 0.5, 0.5], ddof=1))
    assert s["per_seed_per_class_accuracy"]["1"] == {"0": 0.5, "1": 0.5, "2": None}
    assert s["per_class_accuracy"] == {"0": pytest.approx(0.5), "1": pytest.approx(5 / 6), "2": None}
    assert accuracy_summary({7: np.array([0, 1])}, np.array([0, 0]), 2)["accuracy_std"] == 0.0


def test_seeds_are_dealt_to_workers_without_overlap():
    seeds = [0, 1, 2, 3, 4]
    shares = [seeds_of(rank, 2, seeds) for rank in range(2)]
    assert shares == [[0, 2, 4], [1, 3]]
    assert seeds_of(0, 1, seeds) == seeds


def test_train_params_refuse_bad_seeds():
    assert TrainClassifierParams().seeds == [0, 1, 2]
    for bad in ([], [1, 1], [-1]):
        with pytest.raises(ValueError):
            TrainClassifierParams(seeds=bad)


# ---------------------------------------------------------------------------------------------
# specified_numeric_field_filter


def _filter(**params) -> SpecifiedNumericFieldFilter:
    return SpecifiedNumericFieldFilter(SpecifiedNumericFieldFilter.Params(**params))


def _reasons(op: SpecifiedNumericFieldFilter, table: pa.Table) -> list[str | None]:
    return op.drop_reasons(op.compute_stats(table))


def test_index_split_is_inclusive_and_keeps_zero():
    table = pa.table({"id": [f"r{i}" for i in range(5)], "index": [0, 9999, 10000, 10001, 20000]})
    protected = _filter(field_key="index", max_value=9999)
    leaked = _filter(field_key="index", min_value=10000)
    assert _reasons(protected, table) == [None, None, "index > max", "index > max", "index > max"]
    assert _reasons(leaked, table) == ["index < min", "index < min", None, None, None]
    assert protected.compute_stats(table)["index"] == [0.0, 9999.0, 10000.0, 10001.0, 20000.0]


def test_missing_null_and_non_numeric_fields_are_drop_reasons():
    table = pa.table({"id": ["a", "b", "c", "d"], "score": ["0.5", "high", None, "7"]})
    op = _filter(field_key="score", min_value=0, max_value=1)
    assert _reasons(op, table) == [None, "score not numeric", "score missing", "score > max"]
    assert _reasons(_filter(field_key="absent"), table) == ["absent missing"] * 4


def test_dotted_field_reads_a_struct():
    table = pa.table({"id": ["a", "b", "c"], "meta": [{"score": 3.0}, {"score": None}, {"other": 1.0}]})
    op = _filter(field_key="meta.score", min_value=2.5)
    assert op.columns_read() == ("meta",)
    assert _reasons(op, table) == [None, "meta.score missing", "meta.score missing"]


def test_filter_in_the_batch_runner_leaves_tombstones_with_stats():
    table = pa.table({"id": ["a", "b", "c"], "index": [5, 15000, None]})
    runner = StreamingOpRunner(SpecifiedNumericFieldFilter,
                               SpecifiedNumericFieldFilter.Params(field_key="index", max_value=9999), None, "split")
    out = runner(table)
    assert out.column(NODE_COL).to_pylist() == [None, "split", "split"]
    assert out.column(KIND_COL).to_pylist() == [None, "filtered", "filtered"]
    assert out.column(REASON_COL).to_pylist() == [None, "index > max", "index missing"]
    stats = out.column(STATS_COL).to_pylist()
    assert stats[0] == {"index": 5.0, "index_missing": False} and stats[2]["index_missing"] is True


def test_empty_field_key_is_a_parameter_error():
    with pytest.raises(ValueError):
        SpecifiedNumericFieldFilter.Params(field_key="")
