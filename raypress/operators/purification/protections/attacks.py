"""Availability attacks ("protections") that BridgePure learns to undo, at Fashion-MNIST scale.

Each method maps clean uint8 images (N, H, W) or (N, H, W, C) with labels to protected uint8
images of the same shape, deterministically for a seed:

- ``classwise``: one uniform noise pattern per class in [-eps, eps].
- ``lsp``: linear-separable synthetic patches, sample-wise, as APBench generates them (Yu et al.,
  KDD 2022): every image gets its own patch-constant pattern on a ``grid`` x ``grid`` grid, drawn
  from its class's Gaussian cluster (sklearn's ``make_classification`` geometry: one cluster per
  class on a hypercube vertex ``class_sep`` from the origin, all features informative), each
  pattern scaled to the L2 budget sqrt(H*W*C) * 6/255.
- ``lsp_classwise``: the class-wise variant (one pattern per class, no per-image draw), with an L2
  or Linf budget: easier to learn to undo, since every image of a class carries the same noise.
- ``ar``: autoregressive perturbations (Sandoval-Segura et al., NeurIPS 2022): one random,
  stable 3x3 AR process per class; each image gets its own noise drawn from its class's process,
  scaled to an L2 budget.
- ``ops``: one-pixel shortcut (Wu et al., ICLR 2023): per class the pixel(s) and extreme value
  that deviate most, and most consistently, from that class's images.
- ``em``: error-minimizing noise (Huang et al., ICLR 2021), sample-wise, by the min-min loop
  against a small CNN surrogate.

Units: ``eps`` (Linf) is in pixel levels of /255 (``eps: 8`` means 8/255), ``l2`` in the [0, 1]
pixel scale (APBench's convention).  Budgets hold on the final uint8 images: Linf noise is
rounded then capped at floor(eps) levels; L2 noise is truncated toward zero, so each pixel's change
never exceeds the float noise and an image's L2 change is at most ``l2`` (to 1e-6 of a level;
clipping to [0, 255] only shrinks it further).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from raypress.image_codecs import to_float
from raypress.models.device import choose_device

Method = Literal["classwise", "lsp", "lsp_classwise", "ar", "ops", "em"]
LSP_DEFAULT_LINF = 6 / 255  # Yu et al.'s norm limit: the L2 of a uniform 6/255 perturbation


class MethodParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ClasswiseParams(MethodParams):
    eps: float = Field(8.0, gt=0, le=255, description="Linf budget in /255 levels")


class LSPParams(MethodParams):
    """Sample-wise LSP (APBench)."""

    l2: float | None = Field(None, gt=0, description="L2 norm of each image's pattern ([0, 1] scale); default "
                                                     "sqrt(H*W*C) * 6/255 (APBench / Yu et al.)")
    grid: int = Field(4, ge=1, description="patches per side (APBench: 8x8 patches on 32x32, 4 per side; "
                                           "4 on 28x28 gives 7x7 patches)")
    class_sep: float = Field(10.0, gt=0, description="distance of each class's cluster centre from the origin "
                                                     "per feature (make_classification's class_sep; APBench: 10)")


class LSPClasswiseParams(MethodParams):
    """Class-wise LSP: one pattern per class."""

    l2: float | None = Field(None, gt=0, description="L2 norm of each class pattern ([0, 1] scale); default "
                                                     "sqrt(H*W*C) * 6/255 (Yu et al.) unless eps alone is given")
    eps: float | None = Field(None, gt=0, le=255, description="Linf in /255 levels: a cap on top of l2, or, "
                                                              "alone, the pattern is scaled to this Linf")
    grid: int = Field(4, ge=1, description="patches per side (4 on 28x28 gives 7x7 patches)")


class ARParams(MethodParams):
    l2: float = Field(1.0, gt=0, description="L2 norm of each image's noise ([0, 1] scale; APBench's CIFAR default)")
    crop: int = Field(4, ge=0, description="rows/columns of the random start dropped from the top-left")


class OPSParams(MethodParams):
    pixels: int = Field(1, ge=1, description="pixels set per class")


class EMParams(MethodParams):
    eps: float = Field(8.0, gt=0, le=255, description="Linf budget in /255 levels")
    steps: int = Field(20, ge=1, description="PGD steps per round (minimising the loss w.r.t. the noise)")
    step_size: float | None = Field(None, gt=0, description="PGD step in /255 levels; default eps/10")
    rounds: int = Field(10, ge=1, description="most rounds of (surrogate training, noise update)")
    train_steps: int = Field(10, ge=1, description="surrogate SGD steps per round")
    stop_acc: float = Field(0.99, gt=0, le=1, description="stop once the surrogate's accuracy on the "
                                                           "protected images exceeds this")
    batch_size: int = Field(256, ge=1)
    lr: float = Field(0.1, gt=0, description="surrogate SGD learning rate")
    width: int = Field(16, ge=1, description="channels of the surrogate's first conv (the second has twice)")
    device: str = Field("auto", description="torch device: auto (cuda when available, else cpu), cpu, cuda, ...; "
                                            "the same seed gives the same bytes on one device, not across devices")


# ---------------------------------------------------------------------------- shared pieces
def _as_nhwc(images: np.ndarray, labels: np.ndarray, num_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """Validate the inputs every method shares; images come back (N, H, W, C)."""
    images = np.asarray(images)
    labels = np.asarray(labels)
    if images.dtype != np.uint8 or images.ndim not in (3, 4):
        raise ValueError(f"images must be uint8 (N, H, W) or (N, H, W, C), got {images.dtype} {images.shape}")
    if labels.shape != (len(images),):
        raise ValueError(f"labels must have shape ({len(images)},), got {labels.shape}")
    if num_classes < 1:
        raise ValueError(f"num_classes must be >= 1, got {num_classes}")
    if len(labels) and (labels.min() < 0 or labels.max() >= num_classes):
        raise ValueError(f"labels must lie in [0, {num_classes}), got [{labels.min()}, {labels.max()}]")
    return (images[..., None] if images.ndim == 3 else images), labels.astype(np.int64)


def _restore(out: np.ndarray, like: np.ndarray) -> np.ndarray:
    return out.reshape(np.asarray(like).shape)


def _add_levels(images: np.ndarray, levels: np.ndarray) -> np.ndarray:
    """uint8 images + integer level changes, clipped to [0, 255]."""
    return np.clip(images.astype(np.int16) + levels.astype(np.int16), 0, 255).astype(np.uint8)


def _linf_levels(delta: np.ndarray, eps: float) -> np.ndarray:
    """Float noise ([0, 1] scale) -> integer levels, rounded, within floor(eps)."""
    cap = math.floor(eps + 1e-9)
    return np.clip(np.rint(delta * 255.0), -cap, cap)


def _l2_levels(delta: np.ndarray) -> np.ndarray:
    """Float noise ([0, 1] scale) -> integer levels truncated toward zero: |level| <= |delta| * 255
    per pixel (up to 1e-6 of a level), so no norm of the quantized noise exceeds the float noise's.
    The 1e-6 keeps a value that is an exact level (e.g. a cap of eps) from landing just below it
    in floating point and losing a whole level."""
    scaled = delta * 255.0
    return np.fix(scaled + np.sign(scaled) * 1e-6)


def _l2_normalise(noise: np.ndarray, l2: float) -> np.ndarray:
    """Scale each item (first axis) of ``noise`` to L2 norm ``l2``."""
    flat = noise.reshape(len(noise), -1)
    norms = np.linalg.norm(flat, axis=1)
    norms[norms == 0] = 1.0
    return (flat * (l2 / norms)[:, None]).reshape(noise.shape)


def measure_budget(clean: np.ndarray, protected: np.ndarray) -> dict[str, float]:
    """What a protection actually changed: ``linf`` in /255 levels (the unit of ``eps``),
    ``l2_mean`` / ``l2_max`` of per-image L2 norms in the [0, 1] scale (the unit of ``l2``), and
    ``changed_max``, the most pixel values changed in one image."""
    clean, protected = np.asarray(clean), np.asarray(protected)
    if clean.shape != protected.shape:
        raise ValueError(f"shapes differ: clean {clean.shape}, protected {protected.shape}")
    if len(clean) == 0:
        return {"linf": 0.0, "l2_mean": 0.0, "l2_max": 0.0, "changed_max": 0}
    diff = protected.astype(np.int16) - clean.astype(np.int16)
    flat = diff.reshape(len(diff), -1)
    l2 = np.linalg.norm(flat / 255.0, axis=1)
    return {"linf": float(np.abs(flat).max()), "l2_mean": float(l2.mean()), "l2_max": float(l2.max()),
            "changed_max": int((flat != 0).sum(axis=1).max())}


# ---------------------------------------------------------------------------- class-wise noise
def classwise_patterns(num_classes: int, shape: tuple[int, ...], eps: float, seed: int) -> np.ndarray:
    """One uniform [-eps, eps] pattern per class ([0, 1] scale), a function of the seed alone."""
    rng = np.random.default_rng([seed, 0])
    return rng.uniform(-eps / 255.0, eps / 255.0, size=(num_classes, *shape))


def protect_classwise(images: np.ndarray, labels: np.ndarray, num_classes: int,
                      params: ClasswiseParams | Mapping[str, Any] | None = None, seed: int = 0) -> np.ndarray:
    p = ClasswiseParams.model_validate(params or {})
    x, y = _as_nhwc(images, labels, num_classes)
    levels = _linf_levels(classwise_patterns(num_classes, x.shape[1:], p.eps, seed), p.eps)
    return _restore(_add_levels(x, levels[y]), images)


# ---------------------------------------------------------------------------- LSP
def _blow_up(values: np.ndarray, shape: tuple[int, ...], grid: int) -> np.ndarray:
    """(K, grid, grid, C) patch values -> (K, H, W, C) patch-constant images (the last patches cut)."""
    h, w, _ = shape
    ph, pw = -(-h // grid), -(-w // grid)
    return np.repeat(np.repeat(values, ph, axis=1), pw, axis=2)[:, :h, :w, :]


def lsp_classwise_patterns(num_classes: int, shape: tuple[int, ...], params: LSPClasswiseParams,
                           seed: int) -> np.ndarray:
    """Per class: uniform [-1, 1] values, one per patch (and channel), blown up to the image and
    scaled to the budget; returns integer levels (num_classes, H, W, C)."""
    h, w, c = shape
    rng = np.random.default_rng([seed, 1])
    pattern = _blow_up(rng.uniform(-1.0, 1.0, size=(num_classes, params.grid, params.grid, c)), shape, params.grid)
    if params.l2 is None and params.eps is not None:  # Linf-normalised: the largest patch hits eps
        peak = np.abs(pattern).reshape(num_classes, -1).max(axis=1)
        peak[peak == 0] = 1.0
        pattern = pattern * (params.eps / 255.0 / peak)[:, None, None, None]
        return _linf_levels(pattern, params.eps)
    l2 = params.l2 if params.l2 is not None else math.sqrt(h * w * c) * LSP_DEFAULT_LINF
    pattern = _l2_normalise(pattern, l2)
    if params.eps is not None:
        pattern = np.clip(pattern, -params.eps / 255.0, params.eps / 255.0)
    return _l2_levels(pattern)


def protect_lsp_classwise(images: np.ndarray, labels: np.ndarray, num_classes: int,
                          params: LSPClasswiseParams | Mapping[str, Any] | None = None, seed: int = 0) -> np.ndarray:
    p = LSPClasswiseParams.model_validate(params or {})
    x, y = _as_nhwc(images, labels, num_classes)
    return _restore(_add_levels(x, lsp_classwise_patterns(num_classes, x.shape[1:], p, seed)[y]), images)


@dataclass(frozen=True)
class LSPClusters:
    """Per class, the cluster a sample-wise LSP pattern is drawn from: ``centres`` (K, F) and
    ``mixing`` (K, F, F); a class-``k`` feature vector is ``centres[k] + z @ mixing[k]``, z ~ N(0, I)."""

    centres: np.ndarray
    mixing: np.ndarray


def lsp_clusters(num_classes: int, features: int, class_sep: float, seed: int) -> LSPClusters:
    """make_classification's geometry (n_informative = n_features, one cluster per class): centres
    on distinct vertices of the hypercube [-class_sep, class_sep]^F, each with its own random
    linear mixing (uniform [-1, 1] entries) of unit Gaussian draws."""
    if features < 60 and num_classes > 2 ** features:
        raise ValueError(f"{num_classes} classes need more than {features} features for distinct cluster centres")
    rng = np.random.default_rng([seed, 5])
    vertices: list[np.ndarray] = []
    seen: set[bytes] = set()
    while len(vertices) < num_classes:
        v = rng.integers(0, 2, size=features)
        if v.tobytes() not in seen:
            seen.add(v.tobytes())
            vertices.append(v)
    centres = (np.stack(vertices) * 2.0 - 1.0) * class_sep
    mixing = rng.uniform(-1.0, 1.0, size=(num_classes, features, features))
    return LSPClusters(centres, mixing)


def lsp_samplewise_noise(labels: np.ndarray, shape: tuple[int, ...], params: LSPParams, num_classes: int,
                         seed: int) -> np.ndarray:
    """Float noise ([0, 1] scale) (N, H, W, C): per image, a draw from its class's cluster, one value
    per patch and channel, blown up to patches and scaled to the L2 budget (APBench's
    ``perturb_with_lsp``). Draws go in index order, so an image's noise depends on its position and
    label, not on the rest of the set."""
    h, w, c = shape
    g = params.grid
    features = g * g * c
    clusters = lsp_clusters(num_classes, features, params.class_sep, seed)
    rng = np.random.default_rng([seed, 6])
    z = rng.standard_normal((len(labels), features))
    vectors = clusters.centres[labels] + np.einsum("nf,nfg->ng", z, clusters.mixing[labels])
    pattern = _blow_up(vectors.reshape(len(labels), g, g, c), shape, g)
    l2 = params.l2 if params.l2 is not None else math.sqrt(h * w * c) * LSP_DEFAULT_LINF
    return _l2_normalise(pattern, l2)


def protect_lsp(images: np.ndarray, labels: np.ndarray, num_classes: int,
                params: LSPParams | Mapping[str, Any] | None = None, seed: int = 0) -> np.ndarray:
    """Sample-wise LSP. APBench adds the float noise and truncates to uint8 after clipping; here the
    noise is truncated toward zero first (``_l2_levels``), so each image's L2 change stays within
    the budget on the saved bytes."""
    p = LSPParams.model_validate(params or {})
    x, y = _as_nhwc(images, labels, num_classes)
    out = np.empty_like(x)
    chunk = 4096
    noise_all = lsp_samplewise_noise(y, x.shape[1:], p, num_classes, seed) if len(x) else np.zeros(x.shape)
    for lo in range(0, len(x), chunk):
        out[lo:lo + chunk] = _add_levels(x[lo:lo + chunk], _l2_levels(noise_all[lo:lo + chunk]))
    return _restore(out, images)


# ---------------------------------------------------------------------------- AR
AR_GROWTH_LIMIT = 10.0  # a process whose noise grows past 10x its random start is unstable
AR_MAX_TRIES = 8_192
AR_CHUNK = 4096  # images whose noise is generated at once (bounds memory)


def ar_generate(coeffs: np.ndarray, size: tuple[int, int], channels: int, rng: np.random.Generator) -> np.ndarray:
    """Noise (N, H, W, C) from per-image AR coefficients ``coeffs`` (N, 3, 3) whose [2, 2] is 0.

    Start from Gaussian noise and, in raster order, replace each pixel (from row 2, column 2 on)
    by the coefficient-weighted sum of its 3x3 causal window.  The recursion forces a loop over
    the (H - 2) * (W - 2) positions; each step is vectorised over images and channels, with the
    signal laid out (H, W, N, C) so that one position is one contiguous slice."""
    h, w = size
    sig = rng.standard_normal((h, w, len(coeffs), channels))
    taps = [(u, v, coeffs[:, u, v, None].copy()) for u in range(3) for v in range(3) if (u, v) != (2, 2)]
    for i in range(h - 2):
        for j in range(w - 2):
            acc = taps[0][2] * sig[i, j]
            for u, v, b in taps[1:]:
                acc += b * sig[i + u, j + v]
            sig[i + 2, j + 2] = acc
    return sig.transpose(2, 0, 1, 3)


AR_BATCH = 64  # candidate processes tried at once


def _ar_stable(candidates: np.ndarray, size: tuple[int, int], rng: np.random.Generator) -> np.ndarray:
    """Per candidate (K, 3, 3): does its noise, from a few random starts, stay finite and within
    ``AR_GROWTH_LIMIT`` of the start's scale in the last rows and columns?  All at once."""
    trials = 4
    noise = ar_generate(np.repeat(candidates, trials, axis=0), size, 1, rng)
    tail = noise[:, -4:, -4:, :].reshape(len(candidates), -1)
    with np.errstate(over="ignore", invalid="ignore"):
        rms = np.sqrt(np.mean(tail ** 2, axis=1))
    return np.isfinite(rms) & (rms <= AR_GROWTH_LIMIT)


def ar_coefficients(num_classes: int, seed: int, size: tuple[int, int] = (32, 32)) -> np.ndarray:
    """One random stable 3x3 AR process per class, (num_classes, 3, 3): Gaussian coefficients
    normalised to sum to 1 with the current pixel's entry 0 (Sandoval-Segura et al.), keeping
    those whose noise neither explodes nor grows past ``AR_GROWTH_LIMIT`` on an image of ``size``.
    Replacing the 0 by -1 gives the filter that annihilates the class's noise."""
    rng = np.random.default_rng([seed, 2])
    found: list[np.ndarray] = []
    for _ in range(AR_MAX_TRIES // AR_BATCH):
        b = rng.standard_normal((AR_BATCH, 3, 3))
        b[:, 2, 2] = 0.0
        total = b.sum(axis=(1, 2))
        b = b[np.abs(total) > 1e-3] / total[np.abs(total) > 1e-3, None, None]
        with np.errstate(over="ignore", invalid="ignore"):
            found.extend(b[_ar_stable(b, size, rng)])
        if len(found) >= num_classes:
            return np.stack(found[:num_classes])
    raise ValueError(f"found only {len(found)} stable AR processes in {AR_MAX_TRIES} tries")


def protect_ar(images: np.ndarray, labels: np.ndarray, num_classes: int,
               params: ARParams | Mapping[str, Any] | None = None, seed: int = 0) -> np.ndarray:
    p = ARParams.model_validate(params or {})
    x, y = _as_nhwc(images, labels, num_classes)
    n, h, w, c = x.shape
    size = (h + p.crop, w + p.crop)
    coeffs = ar_coefficients(num_classes, seed, size)
    rng = np.random.default_rng([seed, 3])
    out = np.empty_like(x)
    for lo in range(0, n, AR_CHUNK):
        hi = min(n, lo + AR_CHUNK)
        noise = ar_generate(coeffs[y[lo:hi]], size, c, rng)[:, p.crop:, p.crop:, :]
        out[lo:hi] = _add_levels(x[lo:hi], _l2_levels(_l2_normalise(noise, p.l2)))
    return _restore(out, images)


# ---------------------------------------------------------------------------- OPS
OPS_STD_FLOOR = 1 / 255  # keeps a constant pixel's score finite; ties then go to the larger deviation


@dataclass(frozen=True)
class OPSPattern:
    """Per class, the pixel positions (num_classes, pixels, 2) and their values (num_classes, pixels, C)."""

    positions: np.ndarray
    values: np.ndarray


def ops_pattern(images: np.ndarray, labels: np.ndarray, num_classes: int, pixels: int = 1) -> OPSPattern:
    """Search, class by class, the positions and extreme values (0 or 255 per channel) maximising
    mean deviation / (std of deviation + floor) over the class's images, so the set pixel is both
    far from and consistent across the class.  A position already taken by an earlier class is
    not reused (two classes on one pixel with one value would not tell them apart).  A class
    without images still gets free positions, so the pattern has one entry per class."""
    x, y = _as_nhwc(images, labels, num_classes)
    _, h, w, c = x.shape
    if num_classes * pixels > h * w:
        raise ValueError(f"{num_classes} classes x {pixels} pixels do not fit in {h}x{w} distinct positions")
    xf = to_float(x)
    corners = np.array(np.meshgrid(*[[0.0, 1.0]] * c, indexing="ij")).reshape(c, -1).T  # (2^C, C)
    taken = np.zeros(h * w, dtype=bool)
    positions = np.zeros((num_classes, pixels, 2), dtype=np.int64)
    values = np.zeros((num_classes, pixels, c), dtype=np.uint8)
    for k in range(num_classes):
        members = xf[y == k]
        scores = np.empty((len(corners), h * w))
        for v, corner in enumerate(corners):
            if len(members) == 0:
                scores[v] = 0.0
                continue
            dev = np.abs(members - corner).mean(axis=-1).reshape(len(members), -1)  # (n, H*W)
            scores[v] = dev.mean(axis=0) / (dev.std(axis=0) + OPS_STD_FLOOR)
        best_value = scores.argmax(axis=0)  # per position, its best corner
        best_score = np.where(taken, -np.inf, scores.max(axis=0))
        chosen = np.argsort(-best_score, kind="stable")[:pixels]
        taken[chosen] = True
        positions[k] = np.stack([chosen // w, chosen % w], axis=1)
        values[k] = np.rint(corners[best_value[chosen]] * 255).astype(np.uint8)
    return OPSPattern(positions, values)


def apply_ops(images: np.ndarray, labels: np.ndarray, pattern: OPSPattern) -> np.ndarray:
    """Set each image's class pixels to the class values."""
    x, y = _as_nhwc(images, labels, len(pattern.positions))
    out = x.copy()
    rows, cols = pattern.positions[y, :, 0], pattern.positions[y, :, 1]  # (N, pixels)
    out[np.arange(len(x))[:, None], rows, cols] = pattern.values[y]
    return _restore(out, images)


def protect_ops(images: np.ndarray, labels: np.ndarray, num_classes: int,
                params: OPSParams | Mapping[str, Any] | None = None, seed: int = 0) -> np.ndarray:
    """Deterministic given the images: the search has no randomness, so ``seed`` is unused."""
    p = OPSParams.model_validate(params or {})
    return apply_ops(images, labels, ops_pattern(images, labels, num_classes, p.pixels))


# ---------------------------------------------------------------------------- EM
@dataclass
class EMResult:
    """The protected images, the float noise, and the surrogate that the noise fools."""

    images: np.ndarray
    delta: np.ndarray
    model: Any
    rounds: int
    train_acc: float


def em_surrogate(channels: int, num_classes: int, size: tuple[int, int], width: int = 16):
    """A small CNN: two conv-ReLU-pool blocks and a linear head (enough to fit a shortcut)."""
    from torch import nn

    h, w = size
    return nn.Sequential(
        nn.Conv2d(channels, width, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(width, 2 * width, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(2 * width * (h // 4) * (w // 4), num_classes),
    )


def error_minimizing(images: np.ndarray, labels: np.ndarray, num_classes: int,
                     params: EMParams | Mapping[str, Any] | None = None, seed: int = 0) -> EMResult:
    """Sample-wise error-minimizing noise by Huang et al.'s min-min loop: each round trains the
    surrogate ``train_steps`` SGD steps on the protected images, then moves every image's noise
    ``steps`` signed-gradient steps DOWN the loss within the Linf ball; it stops once the surrogate
    classifies more than ``stop_acc`` of the protected images correctly (the noise has become a
    shortcut) or after ``rounds`` rounds."""
    import torch
    import torch.nn.functional as F

    p = EMParams.model_validate(params or {})
    x, y = _as_nhwc(images, labels, num_classes)
    n, h, w, c = x.shape
    if n == 0:
        return EMResult(images.copy(), np.zeros(x.shape, np.float32), None, 0, 0.0)
    device = torch.device(choose_device(p.device))
    eps = math.floor(p.eps + 1e-9) / 255.0  # the budget the uint8 result can honour
    alpha = (p.step_size if p.step_size is not None else p.eps / 10) / 255.0
    rng = np.random.default_rng([seed, 4])
    xt = torch.from_numpy(to_float(x)).permute(0, 3, 1, 2).contiguous().to(device)
    yt = torch.from_numpy(y).to(device)
    delta = torch.from_numpy(rng.uniform(-eps, eps, size=xt.shape).astype(np.float32)).to(device)
    delta = (xt + delta).clamp(0, 1) - xt
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = em_surrogate(c, num_classes, (h, w), p.width).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=p.lr, momentum=0.9, weight_decay=5e-4)
    order = rng.permutation(n)
    cursor, rounds, acc = 0, 0, 0.0
    for rounds in range(1, p.rounds + 1):
        model.train()
        for _ in range(p.train_steps):
            if cursor >= n:
                order, cursor = rng.permutation(n), 0
            idx = torch.from_numpy(order[cursor:cursor + p.batch_size]).to(device)
            cursor += p.batch_size
            opt.zero_grad()
            F.cross_entropy(model(xt[idx] + delta[idx]), yt[idx]).backward()
            opt.step()
        model.eval()
        for lo in range(0, n, p.batch_size):
            xb, yb = xt[lo:lo + p.batch_size], yt[lo:lo + p.batch_size]
            d = delta[lo:lo + p.batch_size].clone()
            for _ in range(p.steps):
                d.requires_grad_(True)
                loss = F.cross_entropy(model(xb + d), yb)
                (grad,) = torch.autograd.grad(loss, d)
                d = (d.detach() - alpha * grad.sign()).clamp(-eps, eps)
                d = (xb + d).clamp(0, 1) - xb
            delta[lo:lo + p.batch_size] = d.detach()
        acc = _accuracy(model, xt + delta, yt, p.batch_size)
        if acc > p.stop_acc:
            break
    delta_np = delta.permute(0, 2, 3, 1).cpu().numpy()
    protected = _add_levels(x, _linf_levels(delta_np, p.eps))
    return EMResult(_restore(protected, images), delta_np, model.cpu(), rounds, acc)


def _accuracy(model, x, y, batch_size: int) -> float:
    import torch

    with torch.no_grad():
        hits = sum(int((model(x[i:i + batch_size]).argmax(1) == y[i:i + batch_size]).sum())
                   for i in range(0, len(x), batch_size))
    return hits / max(1, len(x))


def protect_em(images: np.ndarray, labels: np.ndarray, num_classes: int,
               params: EMParams | Mapping[str, Any] | None = None, seed: int = 0) -> np.ndarray:
    return error_minimizing(images, labels, num_classes, params, seed).images


# ---------------------------------------------------------------------------- dispatch
METHODS: dict[str, tuple[type[MethodParams], Callable[..., np.ndarray]]] = {
    "classwise": (ClasswiseParams, protect_classwise),
    "lsp": (LSPParams, protect_lsp),
    "lsp_classwise": (LSPClasswiseParams, protect_lsp_classwise),
    "ar": (ARParams, protect_ar),
    "ops": (OPSParams, protect_ops),
    "em": (EMParams, protect_em),
}


def method_params(method: str, params: Mapping[str, Any] | None = None) -> MethodParams:
    """Validate ``params`` for ``method``; a key the method does not take is an error naming the
    keys it does take (a budget meant for another method must not be silently ignored)."""
    if method not in METHODS:
        raise ValueError(f"unknown protection {method!r}; known: {sorted(METHODS)}")
    model = METHODS[method][0]
    unknown = sorted(set(params or {}) - set(model.model_fields))
    if unknown:
        raise ValueError(f"protection {method!r} takes no {unknown}; its params: {sorted(model.model_fields)}")
    return model.model_validate(dict(params or {}))


def protect_images(method: str, images: np.ndarray, labels: np.ndarray, num_classes: int,
                   params: Mapping[str, Any] | None = None, seed: int = 0) -> np.ndarray:
    """Protect uint8 ``images`` with ``method``; the same inputs and seed give the same bytes."""
    p = method_params(method, params)
    return METHODS[method][1](images, labels, num_classes, p, seed)
