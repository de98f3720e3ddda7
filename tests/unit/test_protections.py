"""Protections (classwise, LSP sample-wise and class-wise, AR, OPS, EM), the image codec helpers, and the ``protect`` stage's
table function: budgets hold on the uint8 output, seeds determine the bytes, class-wise patterns
are shared within a class and differ across classes, bad rows leave as tombstones naming the row."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
import torch

torch.set_num_threads(1)

import torch.nn.functional as F  # noqa: E402
from pydantic import ValidationError  # noqa: E402

from raypress.operators.purification.protections import attacks as P  # noqa: E402
from raypress.image_codecs import (  # noqa: E402
    decode_image,
    decode_images,
    encode_png,
    from_float,
    to_float,
)
from raypress.artifacts import ReportArtifact  # noqa: E402
from raypress.operators.purification.choose_protection import (  # noqa: E402
    ChooseProtectionParams,
    choose,
    choose_on,
)
from raypress.operators.purification.classifiers.data import LabelledImages  # noqa: E402
from raypress.operators.purification.protect import Protect, ProtectParams, protect_table, with_strength  # noqa: E402
from raypress.operators.registry import get_op  # noqa: E402
from raypress.schema import DETAIL_COL, NODE_COL, REASON_COL, alive_mask  # noqa: E402

H = W = 28


def _warm_torch() -> None:
    """Pay torch's one-time start-up (the first optimizer imports torch._dynamo; the first conv
    picks its kernels: seconds on a busy machine) at import, so the EM tests time the EM loop."""
    x = torch.zeros(2, 1, H, W, requires_grad=True)
    torch.optim.SGD([x], lr=0.1)
    loss = F.cross_entropy(P.em_surrogate(1, 10, (H, W), 4)(x), torch.zeros(2, dtype=torch.long))
    torch.autograd.grad(loss, x)


_warm_torch()
D = H * W
QUANT_SLACK = np.sqrt(D) / 255  # the most truncation toward zero can take off an image's L2 norm
TOL = 1e-6  # truncation keeps an exact level within 1e-6 of a level


def data(n: int = 200, classes: int = 10, seed: int = 0, lo: int = 0, hi: int = 256):
    rng = np.random.default_rng(seed)
    return rng.integers(lo, hi, (n, H, W), dtype=np.uint8), np.arange(n) % classes


def mid_gray(n: int = 40, classes: int = 10):
    """Constant images far from 0 and 255, so nothing is clipped and the change is the pattern."""
    return np.full((n, H, W), 128, np.uint8), np.arange(n) % classes


def deltas(clean, protected) -> np.ndarray:
    return protected.astype(np.int16) - clean.astype(np.int16)


def assert_classwise(delta: np.ndarray, labels: np.ndarray) -> None:
    for k in np.unique(labels):
        members = delta[labels == k]
        assert (members == members[0]).all(), f"class {k}: the pattern differs between images"
    firsts = [delta[labels == k][0] for k in np.unique(labels)]
    for a in range(len(firsts)):
        for b in range(a + 1, len(firsts)):
            assert not np.array_equal(firsts[a], firsts[b]), f"classes {a} and {b} share a pattern"


# ------------------------------------------------------------------------------- images
def test_png_round_trip_and_float_helpers():
    arr = np.arange(D, dtype=np.uint32).reshape(H, W).astype(np.uint8)
    np.testing.assert_array_equal(decode_image(encode_png(arr), "r"), arr)
    rgb = np.stack([arr, 255 - arr, arr // 2], axis=-1)
    np.testing.assert_array_equal(decode_image(encode_png(rgb), "r", mode="RGB"), rgb)
    assert decode_images([encode_png(arr)] * 3, ["a", "b", "c"]).shape == (3, H, W)
    f = to_float(arr)
    assert f.dtype == np.float32 and f.max() <= 1.0
    np.testing.assert_array_equal(from_float(f), arr)
    np.testing.assert_array_equal(from_float(np.array([-0.5, 0.5 / 255 + 1e-6, 1.7])), [0, 1, 255])
    t = torch.from_numpy(arr)
    assert torch.equal(from_float(to_float(t)), t)
    with pytest.raises(ValueError, match="uint8"):
        encode_png(arr.astype(np.float32))
    with pytest.raises(ValueError, match="uint8"):
        to_float(arr.astype(np.int64))


def test_decode_errors_name_the_row():
    with pytest.raises(ValueError, match=r"row 'img-7': cannot decode image"):
        decode_image(b"\x89PNG\r\n\x1a\nnot really", "img-7")
    with pytest.raises(ValueError, match=r"row 'img-8': no image bytes"):
        decode_image(None, "img-8")
    big = encode_png(np.zeros((32, 32), np.uint8))
    with pytest.raises(ValueError, match=r"^row 'x': image is 32x32, this op expects 28x28$"):
        decode_image(big, "x")
    assert decode_image(big, "x", size=None).shape == (32, 32)


def test_measure_budget_by_hand():
    clean = np.zeros((2, 2, 2), np.uint8)
    prot = clean.copy()
    prot[0, 0, 0], prot[1, 1, 1], prot[1, 0, 0] = 3, 4, 3
    m = P.measure_budget(clean, prot)
    assert m["linf"] == 4 and m["changed_max"] == 2
    assert m["l2_max"] == pytest.approx(5 / 255)
    assert m["l2_mean"] == pytest.approx((3 / 255 + 5 / 255) / 2)


# ------------------------------------------------------------------------------- classwise
def test_classwise_budget_patterns_and_seed():
    x, y = mid_gray()
    out = P.protect_images("classwise", x, y, 10, {"eps": 8}, seed=1)
    assert P.measure_budget(x, out)["linf"] == 8  # uniform in [-8, 8] over 784 pixels reaches the edge
    assert_classwise(deltas(x, out), y)
    np.testing.assert_array_equal(out, P.protect_images("classwise", x, y, 10, {"eps": 8}, seed=1))
    assert not np.array_equal(out, P.protect_images("classwise", x, y, 10, {"eps": 8}, seed=2))
    xr, yr = data()
    assert P.measure_budget(xr, P.protect_images("classwise", xr, yr, 10, {"eps": 4.7}))["linf"] <= 4
    # one class's pattern does not depend on which other images are protected with it
    np.testing.assert_array_equal(P.protect_images("classwise", x[:3], y[:3], 10, {}, 1)[2], out[2])


# ------------------------------------------------------------------------------- LSP
def test_lsp_samplewise_budget_patches_and_per_image_draws():
    x, y = mid_gray(60)
    out = P.protect_images("lsp", x, y, 10, {}, seed=0)
    d = deltas(x, out)
    m = P.measure_budget(x, out)
    limit = np.sqrt(D) * 6 / 255  # APBench's budget
    assert limit - QUANT_SLACK <= m["l2_mean"] and m["l2_max"] <= limit + TOL
    for image in d[:5]:  # 4x4 grid of 7x7 patches, each constant
        patches = image.reshape(4, 7, 4, 7)
        assert (patches == patches[:, :1, :, :1]).all()
    for k in range(10):  # every image its own pattern, not one per class
        members = d[y == k]
        assert not (members == members[0]).all()
    np.testing.assert_array_equal(out, P.protect_images("lsp", x, y, 10, {}, seed=0))
    assert not np.array_equal(out, P.protect_images("lsp", x, y, 10, {}, seed=1))
    xr, yr = data()
    assert P.measure_budget(xr, P.protect_images("lsp", xr, yr, 10, {"l2": 2.0}))["l2_max"] <= 2.0 + TOL


def test_lsp_samplewise_patterns_cluster_by_class():
    """What makes LSP a shortcut: each image's pattern is linearly separable by class (APBench draws
    them from make_classification clusters with class_sep 10): nearest class centre gives the label."""
    y = np.arange(500) % 10
    noise = P.lsp_samplewise_noise(y, (H, W, 1), P.LSPParams(), 10, seed=3)
    features = noise[:, ::7, ::7, 0].reshape(len(y), -1)  # one value per patch
    clusters = P.lsp_clusters(10, 16, 10.0, seed=3)
    assert clusters.centres.shape == (10, 16) and np.abs(clusters.centres).min() == 10.0
    assert len({c.tobytes() for c in clusters.centres}) == 10
    centres = np.stack([features[y == k].mean(0) for k in range(10)])
    nearest = np.argmin(((features[:, None] - centres[None]) ** 2).sum(-1), axis=1)
    assert (nearest == y).mean() > 0.95
    with pytest.raises(ValueError, match="features"):
        P.lsp_clusters(10, 3, 10.0, 0)



def test_lsp_classwise_l2_budget_patches_and_classes():
    x, y = mid_gray()
    out = P.protect_images("lsp_classwise", x, y, 10, {"l2": 0.5}, seed=0)
    d = deltas(x, out)
    m = P.measure_budget(x, out)
    assert 0.5 - QUANT_SLACK <= m["l2_mean"] and m["l2_max"] <= 0.5 + TOL
    assert_classwise(d, y)
    patches = d[0].reshape(4, 7, 4, 7)  # 4x4 grid of 7x7 patches, each constant
    assert (patches == patches[:, :1, :, :1]).all()
    assert len(np.unique(patches[:, 0, :, 0])) > 1
    xr, yr = data()
    assert P.measure_budget(xr, P.protect_images("lsp_classwise", xr, yr, 10, {"l2": 0.5}))["l2_max"] <= 0.5 + TOL


def test_lsp_classwise_linf_modes_and_default():
    x, y = mid_gray()
    only_eps = P.measure_budget(x, P.protect_images("lsp_classwise", x, y, 10, {"eps": 16}))
    assert only_eps["linf"] == 16
    capped = P.measure_budget(x, P.protect_images("lsp_classwise", x, y, 10, {"l2": 2.0, "eps": 10}))
    assert capped["linf"] <= 10 and capped["l2_max"] <= 2.0 + TOL
    default = P.measure_budget(x, P.protect_images("lsp_classwise", x, y, 10, {}))
    limit = np.sqrt(D) * 6 / 255  # Yu et al.'s norm limit
    assert limit - QUANT_SLACK <= default["l2_mean"] and default["l2_max"] <= limit + TOL


# ------------------------------------------------------------------------------- AR
def test_ar_coefficients_are_normalised_and_annihilated_by_their_filter():
    coeffs = P.ar_coefficients(10, seed=0)
    assert coeffs.shape == (10, 3, 3)
    assert np.allclose(coeffs.sum(axis=(1, 2)), 1.0) and np.all(coeffs[:, 2, 2] == 0)
    np.testing.assert_array_equal(coeffs, P.ar_coefficients(10, seed=0))
    noise = P.ar_generate(coeffs[[3, 3]], (32, 32), 1, np.random.default_rng(0))[..., 0]

    def response(b: np.ndarray, sig: np.ndarray) -> float:
        f = b.copy()
        f[2, 2] = -1.0
        windows = np.lib.stride_tricks.sliding_window_view(sig, (3, 3))
        return float(np.abs((windows * f).sum(axis=(-1, -2))).mean())

    own = response(coeffs[3], noise[0])
    others = [response(coeffs[k], noise[0]) for k in range(10) if k != 3]
    assert own < 1e-9 < min(others)
    assert not np.allclose(noise[0], noise[1])  # sample-wise noise from one class-wise process


def test_ar_l2_budget_and_seed():
    x, y = mid_gray(20)
    out = P.protect_images("ar", x, y, 10, {"l2": 1.0}, seed=0)
    m = P.measure_budget(x, out)
    assert m["l2_mean"] >= 1.0 - QUANT_SLACK and m["l2_max"] <= 1.0 + TOL
    d = deltas(x, out)
    assert not np.array_equal(d[0], d[10])  # same class, different noise
    np.testing.assert_array_equal(out, P.protect_images("ar", x, y, 10, {"l2": 1.0}, seed=0))
    assert not np.array_equal(out, P.protect_images("ar", x, y, 10, {"l2": 1.0}, seed=1))
    xr, yr = data(50)
    assert P.measure_budget(xr, P.protect_images("ar", xr, yr, 10, {"l2": 0.3}))["l2_max"] <= 0.3 + TOL


# ------------------------------------------------------------------------------- OPS
def test_ops_sets_exactly_pixels_per_class():
    x, y = data(300, lo=60, hi=200)
    out = P.protect_images("ops", x, y, 10, {"pixels": 2})
    d = deltas(x, out)
    assert P.measure_budget(x, out)["changed_max"] == 2  # mid-range pixels: every set pixel changes
    pattern = P.ops_pattern(x, y, 10, 2)
    for k in range(10):
        changed = {tuple(p) for p in np.argwhere((d[y == k] != 0).any(axis=0))}
        assert changed == {tuple(p) for p in pattern.positions[k]}
        rows, cols = pattern.positions[k].T
        assert (out[y == k][:, rows, cols] == pattern.values[k][:, 0]).all()
        assert set(pattern.values[k].ravel()) <= {0, 255}
    flat = [tuple(p) for p in pattern.positions.reshape(-1, 2)]
    assert len(set(flat)) == len(flat)  # no two classes share a position


def test_ops_search_picks_the_consistently_deviating_pixel():
    x, y = data(100, lo=100, hi=156)
    x[y == 0, 3, 5] = 0  # class 0: this pixel is always black, so 255 there is a perfect shortcut
    x[y == 0, 20, 20] = 255  # ...and this one always white
    pattern = P.ops_pattern(x, y, 10, pixels=2)
    assert {tuple(p) for p in pattern.positions[0]} == {(3, 5), (20, 20)}
    values = dict(zip(map(tuple, pattern.positions[0]), pattern.values[0][:, 0]))
    assert values[(3, 5)] == 255 and values[(20, 20)] == 0


# ------------------------------------------------------------------------------- EM
EM_FAST = dict(eps=16, steps=5, rounds=4, train_steps=5, batch_size=128, width=4, device="cpu")


def _surrogate_loss(model, images: np.ndarray, labels: np.ndarray) -> float:
    with torch.no_grad():
        logits = model(torch.from_numpy(to_float(images))[:, None])
        return float(F.cross_entropy(logits, torch.from_numpy(labels)))


def test_em_noise_minimises_the_surrogate_loss_within_budget():
    x, y = data(256, seed=3)
    res = P.error_minimizing(x, y, 10, EM_FAST, seed=0)
    assert P.measure_budget(x, res.images)["linf"] <= 16
    assert np.abs(res.delta).max() <= 16 / 255 + 1e-6
    clean_loss = _surrogate_loss(res.model, x, y)
    em_loss = _surrogate_loss(res.model, res.images, y)
    rng = np.random.default_rng(9)  # the same budget, spent at random
    random_noise = np.clip(x.astype(np.int16) + rng.choice([-16, 16], x.shape), 0, 255).astype(np.uint8)
    assert em_loss < clean_loss - 0.1
    assert em_loss < _surrogate_loss(res.model, random_noise, y) - 0.1


def test_em_stops_early_and_is_deterministic():
    x, y = data(64, seed=4)
    cfg = dict(EM_FAST, stop_acc=0.05, batch_size=64)
    a = P.error_minimizing(x, y, 10, cfg, seed=7)
    b = P.error_minimizing(x, y, 10, cfg, seed=7)
    assert a.rounds == 1 and a.train_acc > 0.05
    np.testing.assert_array_equal(a.images, b.images)


# ------------------------------------------------------------------------------- dispatch
def test_dispatch_rejects_unknown_methods_and_foreign_params():
    x, y = mid_gray(10)
    known = r"\['ar', 'classwise', 'em', 'lsp', 'lsp_classwise', 'ops'\]"
    with pytest.raises(ValueError, match=rf"unknown protection 'noise'; known: {known}"):
        P.protect_images("noise", x, y, 10)
    with pytest.raises(ValueError, match=r"protection 'ops' takes no \['eps'\]; its params: \['pixels'\]"):
        P.protect_images("ops", x, y, 10, {"eps": 8})
    with pytest.raises(ValueError, match=r"labels must lie in \[0, 5\)"):
        P.protect_images("classwise", x, y, 5)
    with pytest.raises(ValueError, match="uint8"):
        P.protect_images("classwise", x.astype(np.float32), y, 10)


# ------------------------------------------------------------------------------- the protect stage
def image_rows(n: int = 30) -> pa.Table:
    x, y = data(n, seed=5)
    return pa.table({"id": [f"fm-{i:03d}" for i in range(n)], "image": [encode_png(a) for a in x],
                     "label": y.tolist(), "split": ["train"] * n})


def test_protect_table_protects_and_keeps_clean_pairs():
    table = image_rows()
    p = ProtectParams(method="classwise", eps=8, keep_clean=True)
    out, live_rows, budget = protect_table(table, p, "protect", seed=0)
    assert live_rows == 30 and alive_mask(out) is None
    assert out.column("protection").to_pylist() == ["classwise"] * 30
    assert out.column("split").to_pylist() == ["train"] * 30
    assert out.column("clean_image").to_pylist() == table.column("image").to_pylist()
    clean = decode_images(out.column("clean_image").to_pylist(), out.column("id").to_pylist())
    prot = decode_images(out.column("image").to_pylist(), out.column("id").to_pylist())
    assert budget == P.measure_budget(clean, prot) and 0 < budget["linf"] <= 8
    shuffled = table.take(np.random.default_rng(0).permutation(30))
    again, _, _ = protect_table(shuffled, p, "protect", seed=0)
    assert again.column("image").to_pylist() == out.column("image").to_pylist()  # sorted by id first
    plain, _, _ = protect_table(table, ProtectParams(method="classwise"), "protect", seed=0)
    assert "clean_image" not in plain.column_names


def test_protect_table_quarantines_bad_rows_naming_them():
    table = image_rows(12)
    images = table.column("image").to_pylist()
    labels = table.column("label").to_pylist()
    images[1] = b"garbage"
    images[2] = encode_png(np.zeros((32, 32), np.uint8))
    labels[3] = 11
    table = table.set_column(1, "image", pa.array(images, pa.binary())).set_column(2, "label", pa.array(labels))
    out, live_rows, _ = protect_table(table, ProtectParams(method="ops"), "node-p", seed=0)
    assert live_rows == 9
    dead = out.filter(pa.compute.is_valid(out.column(NODE_COL)))
    assert dead.column("id").to_pylist() == ["fm-001", "fm-002", "fm-003"]
    assert dead.column(NODE_COL).to_pylist() == ["node-p"] * 3
    assert dead.column(REASON_COL).to_pylist() == ["bad_image", "bad_image", "bad_label"]
    details = dead.column(DETAIL_COL).to_pylist()
    assert details[0].startswith("row 'fm-001': cannot decode image")
    assert details[1] == "row 'fm-002': image is 32x32, this op expects 28x28"
    assert details[2] == "row 'fm-003': label 11 is outside [0, 10)"
    empty, n, _ = protect_table(pa.table({}), ProtectParams(method="ops"), "n", 0)
    assert n == 0 and empty.num_rows == 0
    with pytest.raises(ValueError, match="lacks columns \\['label'\\]"):
        protect_table(table.drop_columns(["label"]), ProtectParams(method="ops"), "n", 0)


def test_protect_params_validate_per_method():
    assert get_op("protect") is Protect
    assert ProtectParams(method="em", eps=4, steps=3).method_options() == {"eps": 4, "steps": 3}
    with pytest.raises(ValidationError, match=r"protection 'ar' takes no \['pixels'\]"):
        ProtectParams(method="ar", pixels=1)
    with pytest.raises(ValidationError, match="greater than 0"):
        ProtectParams(method="classwise", eps=-1)
    with pytest.raises(ValidationError):
        ProtectParams(method="unknown")


def test_lsp_samplewise_params_reach_the_method():
    assert ProtectParams(method="lsp", l2=1.5, class_sep=5).method_options() == {"l2": 1.5, "class_sep": 5}
    with pytest.raises(ValidationError, match=r"protection 'lsp' takes no \['eps'\]"):
        ProtectParams(method="lsp", eps=8)


# ------------------------------------------------------------------------------- strength on validation
def test_choose_picks_the_weakest_candidate_reaching_the_drop():
    results = [{"accuracy_mean": 0.85}, {"accuracy_mean": 0.70}, {"accuracy_mean": 0.55}, {"accuracy_mean": 0.2}]
    assert choose(0.88, results, 0.25) == (2, True)
    assert choose(0.88, results[:2], 0.25) == (1, False)  # none reached: the strongest, flagged


def test_choose_on_trains_scores_on_validation_and_refuses_overlap(tmp_path):
    x, y = data(120, seed=7)
    train = LabelledImages([f"t{i:03d}" for i in range(100)], x[:100], y[:100])
    validation = LabelledImages([f"v{i:03d}" for i in range(20)], x[100:], y[100:])
    p = ChooseProtectionParams(method="lsp", candidates=[{"l2": 0.5}, {"l2": 6.0}], width=2, steps=3,
                               batch_size=50, min_drop=0.0)
    out = choose_on(train, validation, p, seed=0)
    assert [c["options"] for c in out["candidates"]] == [{"l2": 0.5}, {"l2": 6.0}]
    assert out["chosen"] == {"method": "lsp", "options": {"l2": 0.5}} and out["reached"]  # min_drop 0: the weakest
    assert out["candidates"][1]["budget"]["l2_max"] <= 6.0 + TOL
    assert out["validation_rows"] == 20 and out["train_rows"] == 100
    with pytest.raises(ValueError, match="validation rows are also training rows"):
        choose_on(train, LabelledImages(train.ids[:5], x[:5], y[:5]), p, seed=0)
    with pytest.raises(ValidationError, match=r"protection 'lsp' takes no \['pixels'\]"):
        ChooseProtectionParams(method="lsp", candidates=[{"pixels": 1}])

    chosen = ReportArtifact(str(tmp_path / "r.json"), {"chosen": {"method": "lsp", "options": {"l2": 6.0}}})
    applied = with_strength(ProtectParams(method="lsp", l2=0.5, keep_clean=True), chosen, "protect")
    assert applied.method_options() == {"l2": 6.0} and applied.keep_clean
    assert with_strength(ProtectParams(method="lsp"), None, "n").method_options() == {}
    with pytest.raises(ValueError, match="chose for method 'lsp', but this node protects with 'ops'"):
        with_strength(ProtectParams(method="ops"), chosen, "protect")
    with pytest.raises(ValueError, match="no chosen protection"):
        with_strength(ProtectParams(method="lsp"), ReportArtifact(str(tmp_path / "x.json"), {}), "protect")
