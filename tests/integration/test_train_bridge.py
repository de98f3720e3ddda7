"""``train_bridge`` through Ray Train on synthetic leaked pairs, then ``purify`` with the Model it made.

The pairs: Fashion-MNIST-like garments (bright ellipses with stripes) protected by a strong
class-wise additive pattern (+-32 levels, one pattern per class). A tiny U-Net learns to remove
it with the one-step objective: 120 steps lift the PSNR to clean by 4.3-4.5 dB (two seeds, the
same loop run without Ray), so the PSNR check (> 3 dB) uses that objective. The bridge objective
needs far more steps before its sampler beats the protected input (150 steps of a tiny U-Net
still purify worse than doing nothing), so for it the test checks the loss, the progress events,
and that the Model loads and purifies.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from raypress.artifacts import DatasetArtifact, ModelArtifact
from raypress.models.bridge_unet import KIND, load_bridge
from raypress.operators.base import RunContext
from raypress.image_codecs import decode_image, encode_png
from raypress.operators.purification.metrics.psnr import mean_psnr
from raypress.operators.purification.purify import Purify
from raypress.operators.purification.train_bridge import TrainBridge
from raypress.operators.registry import get_op

pytestmark = pytest.mark.integration

CLASSES = 4
TINY = dict(base_channels=8, channel_mult=(1, 2), num_res_blocks=1, num_heads=2, norm_groups=4)


def garments(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:28, 0:28]
    out = np.zeros((n, 28, 28), np.uint8)
    for i in range(n):
        cy, cx, ry, rx = 14 + rng.integers(-2, 3), 14 + rng.integers(-2, 3), rng.integers(8, 12), rng.integers(6, 11)
        inside = ((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2 <= 1
        body = 120 + 60 * ((xx // (2 + i % 3)) % 2)
        out[i] = np.where(inside, body, 0).astype(np.uint8)
    return out


PATTERNS = np.sign(np.random.default_rng(99).standard_normal((CLASSES, 28, 28))) * 32


def protect(clean: np.ndarray, labels: np.ndarray) -> np.ndarray:
    return np.clip(clean.astype(np.int64) + PATTERNS[labels], 0, 255).astype(np.uint8)


def pairs_rows(n: int, seed: int, prefix: str) -> tuple[pa.Table, np.ndarray, np.ndarray]:
    clean = garments(n, seed)
    labels = np.arange(n) % CLASSES
    protected = protect(clean, labels)
    table = pa.table({"id": [f"{prefix}-{i:03d}" for i in range(n)],
                      "image": pa.array([encode_png(im) for im in protected], pa.binary()),
                      "clean_image": pa.array([encode_png(im) for im in clean], pa.binary()),
                      "label": pa.array(labels, pa.int64())})
    return table, clean, protected


def train(run_dir, objective: str, steps: int, **params) -> tuple[ModelArtifact, list[dict]]:
    import ray.data

    table, _, _ = pairs_rows(80, seed=0, prefix="leak")
    events: list[dict] = []
    stage = TrainBridge(TrainBridge.Params(objective=objective, steps=steps, pairs=64, batch_size=16,
                                           lr=2e-3, ema_decay=0.9, log_every=10, seed=0, **TINY, **params))
    data = DatasetArtifact(ray.data.from_arrow([table.slice(0, 40), table.slice(40)]))
    model = stage.run({"data": data}, RunContext(run_dir=str(run_dir), node_id=objective, emit=events.append))
    return model, events


@pytest.fixture(scope="module")
def bridge(ray_session, tmp_path_factory):
    return train(tmp_path_factory.mktemp("run"), "bridge", steps=40)


@pytest.fixture(scope="module")
def one_step(ray_session, tmp_path_factory):
    # Ray Train's local mode (the loop in this process): the bridge fixture covers the worker actors
    return train(tmp_path_factory.mktemp("run"), "one_step", steps=120, num_workers=0)


def test_registered():
    assert get_op("train_bridge") is TrainBridge


def test_bridge_loss_drops_progress_reaches_events_and_the_model_loads(bridge):
    model, events = bridge
    summary = model.config["training"]
    progress = [e for e in events if e["event"] == "train_progress"]
    print("\nbridge:", [(e["step"], round(e["loss"], 4)) for e in progress], f"{summary['seconds']:.1f}s")
    assert summary["steps"] == 40 and summary["stopped_by"] == "steps" and summary["pairs"] == 64
    assert summary["first_id"] == "leak-000" and summary["last_id"] == "leak-063"  # the first 64 by id
    assert summary["final_loss"] < 0.5 * summary["initial_loss"]
    assert [e["step"] for e in progress] == [1, 10, 20, 30, 40]
    assert all(e["node"] == "bridge" and e["elapsed_s"] >= 0 for e in progress)
    assert [e for e in events if e["event"] == "train_data"][0]["pairs"] == 64
    net, config = load_bridge(model.path)
    assert config["kind"] == KIND == model.config["kind"] and config["objective"] == "bridge"
    assert config["bridge"]["sigma_max"] == 80.0 and config["unet"]["base_channels"] == 8
    assert config["training"]["steps"] == 40
    assert ModelArtifact.load(model.path).config["training"] == model.config["training"]

    table, _, _ = pairs_rows(3, seed=1, prefix="test")
    out = Purify(Purify.Params(steps=3), {"model": model}).process_batch(table)
    assert out.column("purified_by").to_pylist() == [f"{model.path.rsplit('/', 1)[-1]}:bridge"] * 3
    assert all(decode_image(b, "x").shape == (28, 28) for b in out.column("image").to_pylist())


def test_one_step_model_purifies_held_out_protected_images(one_step):
    model, _ = one_step
    summary = model.config["training"]
    assert summary["final_loss"] < 0.3 * summary["initial_loss"]
    assert model.config["training"]["num_workers"] == 0 and summary["steps"] == 120
    table, clean, protected = pairs_rows(16, seed=1, prefix="test")  # garments never trained on
    out = Purify(Purify.Params(), {"model": model}).process_batch(table)
    purified = np.stack([decode_image(b, "x") for b in out.column("image").to_pylist()])
    before, after = mean_psnr(clean, protected), mean_psnr(clean, purified)
    print(f"\none_step: PSNR to clean {before:.2f} dB protected -> {after:.2f} dB purified")
    assert after > before + 3.0


def test_rows_without_clean_images_stop_the_stage_before_training(ray_session, tmp_path):
    import ray.data

    table, _, _ = pairs_rows(4, seed=2, prefix="x")
    stage = TrainBridge(TrainBridge.Params(steps=1, **TINY))
    data = DatasetArtifact(ray.data.from_arrow(table.drop_columns(["clean_image"])))
    with pytest.raises(ValueError, match=r"needs leaked pairs: rows with image and clean_image \(protect with "
                                         r"keep_clean: true\)"):
        stage.run({"data": data}, RunContext(run_dir=str(tmp_path), node_id="nope"))
