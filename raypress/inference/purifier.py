"""A loaded BridgePure bridge and how to apply it to uint8 images: the ``purify`` app's model side.

Why apart from the app: loading the bridge (``load_bridge``), checking its objective and channels,
and running the one-step inverse or the DDBM sampler on a batch is inference, not HTTP; the Serve
app (``raypress.serving.purify_app``) only decodes requests, calls ``Purifier.purify`` in a thread
and encodes the answer.  Ray-free and thread-safe (one call at a time, behind a lock).
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import torch

from raypress.image_codecs import from_float, to_float
from raypress.models.bridge_unet import load_bridge
from raypress.models.ddbm import VEBridge, sampler_nfe

ONE_STEP = "one_step"  # the config "objective" of the supervised one-step baseline
OBJECTIVES = ("bridge", ONE_STEP)  # what train_bridge writes
_CHANNEL_MODES = {1: "L", 3: "RGB"}


class Purifier:
    """A loaded bridge and how to apply it to uint8 images; Ray-free and thread-safe (one call at a time)."""

    def __init__(self, model_dir: str | Path, device: str | torch.device = "cpu") -> None:
        self.model_dir = Path(model_dir)
        self.network, self.config = load_bridge(model_dir, device)
        self.device = torch.device(device)
        self.bridge = VEBridge.from_dict(self.config.get("bridge", {}))
        self.objective = str(self.config.get("objective", "bridge"))
        if self.objective not in OBJECTIVES:
            raise ValueError(f"{model_dir}: objective {self.objective!r}, expected one of {OBJECTIVES}")
        unet = self.config["unet"]
        self.image_size = (int(unet["image_size"]), int(unet["image_size"]))
        self.channels = int(unet["in_channels"])
        if self.channels not in _CHANNEL_MODES:
            raise ValueError(f"{model_dir}: a bridge over {self.channels}-channel images cannot take PNG input")
        self.mode = _CHANNEL_MODES[self.channels]
        self._lock = threading.Lock()

    def nfe(self, steps: int, churn_step_ratio: float) -> int:
        return 1 if self.objective == ONE_STEP else sampler_nfe(steps, churn_step_ratio)

    def purify(self, images: np.ndarray, steps: int, churn_step_ratio: float, guidance: float, seed: int) -> np.ndarray:
        """uint8 (N, H, W) or (N, H, W, C) -> purified uint8 of the same shape."""
        x = to_float(images) * 2.0 - 1.0  # the bridge works in [-1, 1]
        x = torch.from_numpy(x.reshape(len(images), *self.image_size, self.channels)).permute(0, 3, 1, 2)
        x = x.contiguous().to(self.device)
        generator = torch.Generator(device=self.device).manual_seed(seed)
        with self._lock:
            if self.objective == ONE_STEP:
                out = self.bridge.one_step_inverse(self.network, x)
            else:
                out = self.bridge.sample(self.network, x, steps=steps, churn_step_ratio=churn_step_ratio,
                                         guidance=guidance, generator=generator)
        pixels = from_float((out.float().cpu() + 1.0) / 2.0).permute(0, 2, 3, 1).numpy()
        return pixels.reshape(images.shape)
