"""Images travel as PNG bytes in Arrow; ops decode them to uint8 arrays only inside themselves.

One place decides how bytes become arrays (and back) so that every purification op agrees on
sizes, modes and the uint8 <-> [0, 1] float convention, and so that a bad row always fails with
the same kind of message: ``row 'x': <what is wrong>``.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np
from PIL import Image, UnidentifiedImageError

_CHANNELS_TO_MODE = {1: "L", 3: "RGB", 4: "RGBA"}


def decode_image(data: bytes | None, row_id: str, size: tuple[int, int] | None = (28, 28),
                 mode: str | None = "L") -> np.ndarray:
    """PNG/JPEG/... bytes -> uint8 array (H, W) for mode "L", else (H, W, C).

    ``size`` is (height, width); None accepts any size.  ``mode`` converts with PIL (e.g. RGB to
    "L"); None keeps the file's own mode.  Corrupt bytes and a wrong size raise ValueError naming
    the row, which the runner turns into a quarantined row."""
    if data is None or len(data) == 0:
        raise ValueError(f"row {row_id!r}: no image bytes")
    try:
        with Image.open(io.BytesIO(data)) as img:
            img.load()
            if mode is not None and img.mode != mode:
                img = img.convert(mode)
            arr = np.asarray(img, dtype=np.uint8)
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
        raise ValueError(f"row {row_id!r}: cannot decode image ({type(exc).__name__}: {exc})") from exc
    if size is not None and tuple(arr.shape[:2]) != tuple(size):
        h, w = arr.shape[:2]
        raise ValueError(f"row {row_id!r}: image is {h}x{w}, this op expects {size[0]}x{size[1]}")
    return arr


def decode_images(blobs: Sequence[bytes | None], row_ids: Sequence[str], size: tuple[int, int] | None = (28, 28),
                  mode: str | None = "L") -> np.ndarray:
    """Decode a column of images of one size into one stacked uint8 array (N, H, W[, C])."""
    if len(blobs) != len(row_ids):
        raise ValueError(f"{len(blobs)} images but {len(row_ids)} row ids")
    arrays = [decode_image(b, rid, size, mode) for b, rid in zip(blobs, row_ids)]
    if not arrays:
        shape = (0, *(size or (0, 0)))
        return np.zeros(shape, dtype=np.uint8)
    try:
        return np.stack(arrays)
    except ValueError as exc:  # size=None and the images disagree
        raise ValueError(f"images of different shapes cannot be stacked: {sorted({a.shape for a in arrays})}") from exc


def encode_png(array: np.ndarray) -> bytes:
    """uint8 (H, W) or (H, W, C) with C in 1/3/4 -> PNG bytes (lossless, so protections survive)."""
    arr = np.asarray(array)
    if arr.dtype != np.uint8:
        raise ValueError(f"encode_png needs uint8 pixels, got {arr.dtype} (use from_float first)")
    if arr.ndim == 3 and arr.shape[2] == 1:
        arr = arr[:, :, 0]
    if arr.ndim == 2:
        mode = "L"
    elif arr.ndim == 3 and arr.shape[2] in _CHANNELS_TO_MODE:
        mode = _CHANNELS_TO_MODE[arr.shape[2]]
    else:
        raise ValueError(f"encode_png needs an (H, W) or (H, W, 1|3|4) array, got shape {arr.shape}")
    buf = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(arr), mode=mode).save(buf, format="PNG")
    return buf.getvalue()


def encode_pngs(arrays: np.ndarray | Sequence[np.ndarray]) -> list[bytes]:
    return [encode_png(a) for a in arrays]


def _is_tensor(x: Any) -> bool:
    torch = sys.modules.get("torch")  # never import torch just to ask: numpy callers stay light
    return torch is not None and isinstance(x, torch.Tensor)


def to_float(images: Any) -> Any:
    """uint8 pixels -> float32 in [0, 1] (numpy array or torch tensor, same kind out)."""
    if _is_tensor(images):
        torch = sys.modules["torch"]  # loaded already (what _is_tensor checked): never import it here
        if images.dtype != torch.uint8:
            raise ValueError(f"to_float needs uint8 pixels, got {images.dtype}")
        return images.to(torch.float32) / 255.0
    arr = np.asarray(images)
    if arr.dtype != np.uint8:
        raise ValueError(f"to_float needs uint8 pixels, got {arr.dtype}")
    return arr.astype(np.float32) / np.float32(255.0)


def from_float(images: Any) -> Any:
    """Float pixels in [0, 1] -> uint8: clipped, then rounded to the nearest level (not truncated,
    which would bias every image darker by half a level)."""
    if _is_tensor(images):
        torch = sys.modules["torch"]  # loaded already (what _is_tensor checked): never import it here
        return torch.round(images.detach().clamp(0.0, 1.0) * 255.0).to(torch.uint8)
    arr = np.asarray(images, dtype=np.float64)
    if not np.all(np.isfinite(arr)):
        raise ValueError("from_float got NaN or infinite pixels")
    return np.rint(np.clip(arr, 0.0, 1.0) * 255.0).astype(np.uint8)
