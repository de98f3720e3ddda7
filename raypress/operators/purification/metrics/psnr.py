"""Image-quality numbers for purification reports: PSNR of a purified (or protected) image to its clean twin.

Why uint8 only: PSNR depends on the pixel scale (peak 255 here), and the images BridgePure
compares travel as PNG bytes, i.e. uint8; refusing floats avoids a silent [0, 1]-vs-[0, 255] mixup
that would shift every number by 48 dB.  Pure numpy, so the report stage and tests share it.
"""

from __future__ import annotations

import numpy as np

PEAK = 255.0
DEFAULT_CAP_DB = 100.0  # what an identical pair counts as in a mean (its true PSNR is infinite)


def _check(clean: np.ndarray, other: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    a, b = np.asarray(clean), np.asarray(other)
    if a.dtype != np.uint8 or b.dtype != np.uint8:
        raise ValueError(f"psnr needs uint8 pixels, got {a.dtype} and {b.dtype}")
    if a.shape != b.shape:
        raise ValueError(f"psnr needs images of one shape, got {a.shape} and {b.shape}")
    if a.ndim < 2:
        raise ValueError(f"psnr needs a stack of images shaped (N, ...), got shape {a.shape}")
    return a, b


def mse(clean: np.ndarray, other: np.ndarray) -> np.ndarray:
    """Mean squared error per image (leading axis = images), in uint8 levels squared."""
    a, b = _check(clean, other)
    diff = a.astype(np.float64) - b.astype(np.float64)
    return (diff * diff).mean(axis=tuple(range(1, a.ndim)))


def psnr(clean: np.ndarray, other: np.ndarray, cap: float | None = None) -> np.ndarray:
    """PSNR in dB of each image (N, ...) of ``other`` to ``clean``: 10 log10(255^2 / MSE).

    An identical pair has MSE 0: its PSNR is +inf, or ``cap`` when given."""
    err = mse(clean, other)
    with np.errstate(divide="ignore"):
        values = 10.0 * np.log10(PEAK**2 / err)
    if cap is not None:
        values = np.minimum(values, cap)
    return values


def mean_psnr(clean: np.ndarray, other: np.ndarray, cap: float = DEFAULT_CAP_DB) -> float:
    """Mean over images of the per-image PSNR, identical pairs counted as ``cap`` dB (so that one
    untouched image does not make the mean infinite)."""
    values = psnr(clean, other, cap=cap)
    if values.size == 0:
        raise ValueError("mean_psnr of an empty stack of images")
    return float(values.mean())


__all__ = ["PEAK", "DEFAULT_CAP_DB", "mse", "psnr", "mean_psnr"]
