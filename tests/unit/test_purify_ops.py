"""BridgePure's purification ops without Ray: the training-free baselines, the ``purify`` Mapper
with a tiny saved bridge, PSNR, and the Ray-free half of ``train_bridge`` (pairs, batches, flips)."""

from __future__ import annotations

import json
import math

import numpy as np
import pyarrow as pa
import pytest
import torch

from raypress.artifacts import ModelArtifact
from raypress.dag.batch_exec import StreamingOpRunner
from raypress.models.bridge_unet import BridgeUNet, BridgeUNetConfig, load_bridge, save_bridge
from raypress.models.ddbm import VEBridge
from raypress.operators.io.idx_images import FASHION_MNIST_DIR, dataset_files, read_idx
from raypress.operators.purification.purify_baseline import PurifyBaseline, bit_depth, gaussian_blur, jpeg, median
from raypress.image_codecs import decode_image, encode_png, from_float
from raypress.operators.purification.metrics.psnr import mean_psnr, mse, psnr
from raypress.operators.purification.purify import Purify, row_generators, row_seed, sample_rows
from raypress.operators.purification.train_bridge import (
    TrainBridge,
    decode_pairs,
    index_batches,
    paired_flip,
    to_model_space,
)
from raypress.operators.registry import get_op

torch.set_num_threads(1)

TINY = BridgeUNetConfig(base_channels=8, channel_mult=(1, 2), num_res_blocks=1, num_heads=2, norm_groups=4)


def garment_patterns(n: int = 6, seed: int = 0) -> np.ndarray:
    """Fashion-MNIST-like 28x28 uint8 images: a bright filled ellipse with stripes on black, plus
    a little texture noise, so every filter has edges and fine detail to act on."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:28, 0:28]
    out = np.zeros((n, 28, 28), np.uint8)
    for i in range(n):
        cy, cx, ry, rx = 14 + rng.integers(-2, 3), 14 + rng.integers(-2, 3), rng.integers(8, 12), rng.integers(6, 11)
        inside = ((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2 <= 1
        body = 140 + 60 * ((xx // (2 + i % 3)) % 2) + rng.integers(-15, 16, (28, 28))
        out[i] = np.where(inside, np.clip(body, 0, 255), 0).astype(np.uint8)
    return out


@pytest.fixture(params=["pattern", "fashion-mnist"])
def images(request) -> np.ndarray:
    if request.param == "pattern":
        return garment_patterns()
    try:
        images_path, labels_path, _ = dataset_files("fashion-mnist-test")
    except FileNotFoundError:
        pytest.skip(f"Fashion-MNIST not installed at {FASHION_MNIST_DIR}")
    return read_idx(images_path, labels_path, limit=6)[0]


def rows(images: np.ndarray, prefix: str = "r") -> pa.Table:
    return pa.table({
        "id": [f"{prefix}{i}" for i in range(len(images))],
        "image": pa.array([encode_png(im) for im in images], pa.binary()),
        "label": pa.array(list(range(len(images))), pa.int64()),
        "clean_image": pa.array([encode_png(im) for im in images], pa.binary()),
    })


def max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    """Largest absolute difference (torch.testing's comparison imports torch.distributed: seconds)."""
    assert a.shape == b.shape
    return float((a - b).abs().max())


def decoded(table: pa.Table) -> np.ndarray:
    return np.stack([decode_image(b, str(i), size=None) for i, b in
                     zip(table.column("id").to_pylist(), table.column("image").to_pylist())])


# --- baselines ------------------------------------------------------------------------------------


def baseline(**params) -> PurifyBaseline:
    return PurifyBaseline(PurifyBaseline.Params(**params))


@pytest.mark.parametrize("method", ["jpeg", "bit_depth", "gaussian_blur", "median"])
def test_each_baseline_changes_every_image_and_keeps_the_rows(images, method):
    table = rows(images)
    out = baseline(method=method).process_batch(table)
    assert out.column("id").to_pylist() == table.column("id").to_pylist()
    assert out.column("label").equals(table.column("label"))
    assert out.column("clean_image").equals(table.column("clean_image"))
    assert out.column("purified_by").to_pylist() == [method] * len(images)
    after = decoded(out)
    assert after.shape == images.shape and after.dtype == np.uint8
    assert (mse(images, after) > 0).all()


def test_jpeg_quality_10_is_lossy_and_quality_sets_the_loss(images):
    q10 = np.stack([jpeg(im, 10) for im in images])
    q90 = np.stack([jpeg(im, 90) for im in images])
    assert mean_psnr(images, q10) < 35.0  # 8x8 DCT blocks quantised hard
    assert mean_psnr(images, q90) > mean_psnr(images, q10) + 5.0


def test_bit_depth_keeps_at_most_2_to_the_bits_levels(images):
    two = np.stack([bit_depth(im, 2) for im in images])
    assert set(np.unique(two).tolist()) <= {0, 85, 170, 255}
    assert len(np.unique(bit_depth(np.arange(256, dtype=np.uint8).reshape(16, 16), 3))) == 8
    # rounding to the nearest level: 42 -> 0, 43 -> 85 (42/255*3 = 0.494, 43/255*3 = 0.506)
    np.testing.assert_array_equal(bit_depth(np.array([[42, 43, 128, 212, 213]], np.uint8), 2),
                                  [[0, 85, 170, 170, 255]])


def test_median_removes_salt_noise():
    clean = garment_patterns(4, seed=1)
    rng = np.random.default_rng(0)
    noisy = clean.copy()
    for im in noisy:  # isolated white pixels: about 4% of each image
        ys, xs = rng.integers(1, 27, 30), rng.integers(1, 27, 30)
        im[ys, xs] = 255
    filtered = np.stack([median(im, 3) for im in noisy])
    assert mean_psnr(clean, filtered) > mean_psnr(clean, noisy) + 6.0
    assert (filtered == 255).mean() < 0.25 * (noisy == 255).mean()


def test_gaussian_blur_smooths_a_fine_checkerboard_more_as_radius_grows():
    board = (np.indices((28, 28)).sum(0) % 2 * 200 + 28).astype(np.uint8)  # +-100 around 128
    small, large = gaussian_blur(board, 0.5), gaussian_blur(board, 2.0)
    assert board.std() > 90
    assert small.std() < 0.8 * board.std() and large.std() < 0.1 * board.std()


def test_baseline_params_refuse_what_the_method_does_not_take():
    with pytest.raises(ValueError, match=r"\['quality'\] do not apply to method 'median'"):
        PurifyBaseline.Params(method="median", quality=20)
    with pytest.raises(ValueError, match="odd"):
        PurifyBaseline.Params(method="median", size=4)
    assert PurifyBaseline.Params(method="jpeg", quality=20).quality == 20
    assert get_op("purify_baseline") is PurifyBaseline


def test_baseline_corrupt_image_names_the_row_and_the_runner_quarantines_only_it():
    table = rows(garment_patterns(3))
    blobs = table.column("image").to_pylist()
    blobs[1] = b"not a png"
    table = table.set_column(1, "image", pa.array(blobs, pa.binary()))
    with pytest.raises(ValueError, match="row 'r1': cannot decode image"):
        baseline(method="jpeg").process_batch(table)
    out = StreamingOpRunner(PurifyBaseline, PurifyBaseline.Params(method="jpeg"), None, "jpg")(table)
    by_id = {r["id"]: r for r in out.to_pylist()}
    assert by_id["r1"]["_rp_kind"] == "error" and "row 'r1'" in by_id["r1"]["_rp_detail"]
    assert by_id["r0"]["_rp_node"] is None and by_id["r0"]["purified_by"] == "jpeg"
    assert by_id["r2"]["_rp_node"] is None and by_id["r2"]["image"] != blobs[2]


# --- psnr -----------------------------------------------------------------------------------------


def test_psnr_hand_values():
    a = np.full((2, 4, 4), 100, np.uint8)
    b = a.copy()
    b[1] += 1  # every pixel one level off: MSE 1
    values = psnr(a, b)
    assert math.isinf(values[0]) and values[0] > 0
    assert values[1] == pytest.approx(20 * math.log10(255))  # 48.1308 dB
    c = a.copy()
    c[0, :2] += 2  # half the pixels 2 levels off: MSE 2
    assert psnr(a[:1], c[:1])[0] == pytest.approx(10 * math.log10(255**2 / 2))
    assert psnr(a, b, cap=60.0)[0] == 60.0
    assert mean_psnr(a, b, cap=60.0) == pytest.approx((60.0 + 20 * math.log10(255)) / 2)
    black, white = np.zeros((1, 3, 3), np.uint8), np.full((1, 3, 3), 255, np.uint8)
    assert psnr(black, white)[0] == pytest.approx(0.0)
    assert psnr(black[:0], white[:0]).shape == (0,)


def test_psnr_refuses_floats_and_mismatched_shapes():
    with pytest.raises(ValueError, match="uint8"):
        psnr(np.zeros((1, 2, 2), np.float32), np.zeros((1, 2, 2), np.float32))
    with pytest.raises(ValueError, match="one shape"):
        psnr(np.zeros((1, 2, 2), np.uint8), np.zeros((2, 2, 2), np.uint8))


# --- purify ---------------------------------------------------------------------------------------


def tiny_bridge_dir(path, objective: str = "bridge", beta: float = 0.0) -> ModelArtifact:
    """A saved tiny bridge whose weights are nudged off their zero init, so its output depends on
    the input and on the noise (an untrained one predicts 0 from its zero output layer)."""
    torch.manual_seed(0)
    net = BridgeUNet(TINY)
    with torch.no_grad():
        for p in net.parameters():
            p.add_(0.05 * torch.randn_like(p))
    save_bridge(net, {"objective": objective, "bridge": VEBridge(beta=beta).to_dict()}, path)
    return ModelArtifact(str(path), config={"kind": "bridgepure_ddbm"})


def purify_op(model: ModelArtifact, **params) -> Purify:
    return Purify(Purify.Params(**{"steps": 3, **params}), {"model": model})


@pytest.fixture(scope="module")
def bridge_model(tmp_path_factory) -> ModelArtifact:
    return tiny_bridge_dir(tmp_path_factory.mktemp("m") / "bridge_tiny")


def test_purify_replaces_images_and_keeps_every_other_column(bridge_model):
    images = garment_patterns(4)
    table = rows(images)
    out = purify_op(bridge_model).process_batch(table)
    assert out.num_rows == 4 and out.column_names == table.column_names + ["purified_by"]
    assert out.column("id").equals(table.column("id")) and out.column("label").equals(table.column("label"))
    assert out.column("clean_image").equals(table.column("clean_image"))
    assert out.column("purified_by").to_pylist() == ["bridge_tiny:bridge"] * 4
    after = decoded(out)
    assert after.shape == (4, 28, 28) and after.dtype == np.uint8
    assert (mse(images, after) > 0).all()
    assert get_op("purify") is Purify and Purify.stateful


def test_purify_is_deterministic_per_row_whatever_the_batching(bridge_model):
    table = rows(garment_patterns(2))
    op = purify_op(bridge_model, steps=10)
    whole = op.process_batch(table)
    assert op.process_batch(table).column("image").equals(whole.column("image"))  # same batch: same bytes
    split = pa.concat_tables([op.process_batch(table.slice(0, 1)), op.process_batch(table.slice(1, 1))])
    diff = np.abs(decoded(split).astype(int) - decoded(whole).astype(int))
    # the same noise per row; only the batched convolutions' float rounding differs (see purify_op)
    assert diff.max() <= 1 and (diff > 0).mean() < 0.01
    reseeded = purify_op(bridge_model, steps=10, seed=1).process_batch(table)
    assert np.abs(decoded(reseeded).astype(int) - decoded(whole).astype(int)).max() > 1


class Elementwise(torch.nn.Module):
    """A 'network' that treats each pixel alone: batched and single-row calls agree to the bit,
    so the sampler's own arithmetic and noise can be compared exactly."""

    def forward(self, x: torch.Tensor, c_noise: torch.Tensor, x_T: torch.Tensor) -> torch.Tensor:
        return 0.3 * torch.tanh(x) - 0.2 * x_T + 1e-3 * c_noise[:, None, None, None]


@pytest.mark.parametrize("beta", [0.0, 0.02])
def test_sample_rows_is_vebridge_sample_on_each_row_alone(beta):
    """With beta > 0, BridgePure's official pre-noise sqrt(1-beta) x_T + sqrt(beta) eps (the row's
    first draw) and then DDBM's sampler from that point: VEBridge.sample without its own pre-noise."""
    bridge = VEBridge(beta=beta)
    plain = VEBridge()
    x_T = to_model_space(garment_patterns(3))
    ids = ["a", "b", "c"]
    batched = sample_rows(bridge, Elementwise(), x_T, row_generators(7, ids), steps=4)
    for i, rid in enumerate(ids):
        gen = torch.Generator().manual_seed(row_seed(7, rid))
        start = x_T[i:i + 1]
        if beta:
            start = (1 - beta) ** 0.5 * start + beta ** 0.5 * torch.randn(start.shape, generator=gen)
        alone = plain.sample(Elementwise(), start, steps=4, generator=gen)
        assert max_diff(batched[i:i + 1], alone) <= 1e-6
    no_churn = sample_rows(plain, Elementwise(), x_T, row_generators(7, ids), steps=4, churn_step_ratio=0.0)
    gen = torch.Generator().manual_seed(row_seed(7, "b"))
    assert max_diff(no_churn[1:2], plain.sample(Elementwise(), x_T[1:2], steps=4, churn_step_ratio=0.0,
                                                generator=gen)) <= 1e-6
    assert row_seed(7, "a") != row_seed(7, "b") and row_seed(7, "a") != row_seed(8, "a")


def test_sample_rows_with_the_unet_matches_vebridge_sample_up_to_rounding(bridge_model):
    net, config = load_bridge(bridge_model.path)
    bridge = VEBridge.from_dict(config["bridge"])
    x_T = to_model_space(garment_patterns(2))
    batched = sample_rows(bridge, net, x_T, row_generators(3, ["a", "b"]), steps=10)
    alone = bridge.sample(net, x_T[1:2], steps=10, generator=torch.Generator().manual_seed(row_seed(3, "b")))
    assert max_diff(batched[1:2], alone) <= 2e-3


def test_purify_with_a_one_step_model_applies_the_one_step_inverse(tmp_path):
    art = tiny_bridge_dir(tmp_path / "direct", objective="one_step")
    images = garment_patterns(3)
    out = purify_op(art).process_batch(rows(images))
    assert out.column("purified_by").to_pylist() == ["direct:one_step"] * 3
    net, _ = load_bridge(art.path)
    want = from_float((VEBridge().one_step_inverse(net, to_model_space(images))[:, 0] + 1) / 2).numpy()
    np.testing.assert_array_equal(decoded(out), want)


def test_purify_refuses_a_model_of_another_kind(tmp_path):
    other = tmp_path / "lm"
    other.mkdir()
    (other / "config.json").write_text(json.dumps({"kind": "moe_lm"}))
    with pytest.raises(ValueError, match=r"purify: .*kind 'moe_lm'"):
        purify_op(ModelArtifact(str(other), config={"kind": "moe_lm"}))
    with pytest.raises(ValueError, match="needs a Model input named 'model'"):
        Purify(Purify.Params(), {})


def test_purify_corrupt_bytes_name_the_row_and_only_that_row_is_quarantined(bridge_model):
    table = rows(garment_patterns(3))
    blobs = table.column("image").to_pylist()
    blobs[2] = b"\x89PNG\r\n\x1a\n truncated"
    table = table.set_column(1, "image", pa.array(blobs, pa.binary()))
    with pytest.raises(ValueError, match="row 'r2': cannot decode image"):
        purify_op(bridge_model).process_batch(table)
    runner = StreamingOpRunner(Purify, Purify.Params(steps=2), {"model": bridge_model}, "purify")
    by_id = {r["id"]: r for r in runner(table).to_pylist()}
    assert by_id["r2"]["_rp_kind"] == "error" and "row 'r2'" in by_id["r2"]["_rp_detail"]
    assert by_id["r0"]["_rp_node"] is None and by_id["r0"]["purified_by"] == "bridge_tiny:bridge"


def test_purify_rejects_images_of_another_size(bridge_model):
    table = rows(np.zeros((1, 32, 32), np.uint8))
    with pytest.raises(ValueError, match="row 'r0': image is 32x32, this op expects 28x28"):
        purify_op(bridge_model).process_batch(table)


# --- train_bridge, the Ray-free half --------------------------------------------------------------


def pairs_table(n: int) -> pa.Table:
    clean = garment_patterns(n)
    protected = np.clip(clean.astype(int) + 8, 0, 255).astype(np.uint8)
    ids = [f"p{i:02d}" for i in range(n)][::-1]  # arrives in reverse id order
    return pa.table({"id": ids, "image": [encode_png(im) for im in protected][::-1],
                     "clean_image": [encode_png(im) for im in clean][::-1]})


def test_decode_pairs_takes_the_first_pairs_by_id():
    pairs = decode_pairs(pairs_table(5), pairs=3, image_size=28)
    assert pairs.ids == ["p00", "p01", "p02"]
    np.testing.assert_array_equal(pairs.clean, garment_patterns(5)[:3])
    np.testing.assert_array_equal(pairs.protected.astype(int), np.clip(pairs.clean.astype(int) + 8, 0, 255))
    assert len(decode_pairs(pairs_table(5), pairs=None, image_size=28).ids) == 5


def test_decode_pairs_errors_say_what_is_missing():
    table = pairs_table(3)
    with pytest.raises(ValueError, match="train_bridge needs leaked pairs.*keep_clean: true.*lacks columns "
                                         r"\['clean_image'\]"):
        decode_pairs(table.drop_columns(["clean_image"]), None, 28)
    nulls = table.set_column(2, "clean_image", pa.array([encode_png(np.zeros((28, 28), np.uint8)), None, None],
                                                          pa.binary()))
    with pytest.raises(ValueError, match="row 'p00': no clean_image; train_bridge needs leaked pairs"):
        decode_pairs(nulls, None, 28)  # rows [p02, p01, p00] in input order; p00 is first by id
    bad = table.set_column(1, "image", pa.array([b"junk", *table.column("image").to_pylist()[1:]], pa.binary()))
    with pytest.raises(ValueError, match="row 'p02': cannot decode image"):
        decode_pairs(bad, None, 28)
    with pytest.raises(ValueError, match="pairs=10 but the input holds only 3 leaked pairs"):
        decode_pairs(table, 10, 28)
    with pytest.raises(ValueError, match="no rows"):
        decode_pairs(table.slice(0, 0), None, 28)


def test_index_batches_visit_every_pair_once_per_shuffle():
    g = torch.Generator().manual_seed(0)
    stream = index_batches(5, 4, g)
    drawn = torch.cat([next(stream) for _ in range(5)])  # 20 draws = 4 whole shuffles of 5
    assert sorted(drawn.tolist()) == sorted(list(range(5)) * 4)
    big = next(index_batches(3, 7, torch.Generator().manual_seed(1)))  # a batch larger than the set
    assert len(big) == 7 and set(big.tolist()) == {0, 1, 2}


def test_paired_flip_flips_both_images_of_a_pair_together():
    clean = torch.arange(2 * 4 * 4, dtype=torch.float32).reshape(2, 1, 4, 4)
    protected = clean + 100
    flipped_any = False
    for seed in range(8):
        c, p = paired_flip(clean, protected, torch.Generator().manual_seed(seed))
        assert torch.equal(p, c + 100)  # the pair stays aligned
        for i in range(2):
            assert torch.equal(c[i], clean[i]) or torch.equal(c[i], clean[i].flip(-1))
            flipped_any |= torch.equal(c[i], clean[i].flip(-1))
    assert flipped_any


def test_train_bridge_params_refuse_a_unet_or_bridge_that_cannot_be_built():
    with pytest.raises(ValueError, match="not divisible by norm_groups"):
        TrainBridge.Params(base_channels=12, norm_groups=8)
    with pytest.raises(ValueError, match="sigma_min < sigma_max"):
        TrainBridge.Params(sigma_min=1.0, sigma_max=0.5)
    with pytest.raises(ValueError, match="positive entries"):
        TrainBridge.Params(channel_mult=(1, 0))
    params = TrainBridge.Params(objective="one_step", pairs=100)
    assert params.unet_config().base_channels == 32 and params.bridge().sigma_max == 80.0
    assert get_op("train_bridge") is TrainBridge


def test_prenoise_is_bridgepures_variance_preserving_mix():
    from raypress.models.ddbm import prenoise_mix as prenoise

    x, eps = torch.full((2, 1, 4, 4), 0.5), torch.ones(2, 1, 4, 4)
    assert prenoise(x, 0.0, eps) is x
    expected = (1 - 0.02) ** 0.5 * 0.5 + 0.02 ** 0.5
    assert torch.allclose(prenoise(x, 0.02, eps), torch.full_like(x, expected))
    noisy = prenoise(torch.zeros(20000), 0.02, torch.randn(20000, generator=torch.Generator().manual_seed(0)))
    assert abs(float(noisy.std()) - 0.02 ** 0.5) < 0.005  # noise std sqrt(beta) = 0.141, not beta
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        prenoise(x, 1.0, eps)
