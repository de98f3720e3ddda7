"""``purify``: protected images -> purified images with a trained BridgePure model (a Model input).

The op is stateful: each actor of its pool loads the network once (``load_bridge``) and purifies
many batches with it.  A model trained with ``objective: bridge`` runs DDBM's hybrid sampler from
the protected image (the paper samples 40 steps, 119 network calls with churn; ``churn_step_ratio:
0`` is the deterministic sampler); one trained with ``objective: one_step`` is a single network
call (``VEBridge.one_step_inverse``): an ablation added here, not a baseline of the paper.

Noise is per row: row ``i``'s sampler noise comes from its own generator, seeded by a hash of the
op's seed and the row's id, so a row gets the same noise whatever batch Ray put it in (the network
sees whole batches; only the few noise draws are per row, which costs nothing next to the
network).  :func:`sample_rows` is therefore ``VEBridge.sample`` with the stochastic ("churn") step
written out so that its noise can be drawn per row; its Heun steps are ``ddbm.sampler_step``
itself, and a unit test pins each row's result to ``VEBridge.sample`` run on that row alone.
The same rows in the same batches give the same bytes; in other batches a rare pixel may move by
one level, because batched convolutions round differently (~1e-6) and DDBM's first steps, next to
t = T, amplify that (the guidance term divides by T^2 - t^2).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar, Literal

import pyarrow as pa
import torch
from pydantic import Field

from raypress.artifacts import Artifact
from raypress.image_codecs import decode_images, encode_pngs, from_float, to_float
from raypress.models.bridge_unet import load_bridge
from raypress.models.device import choose_device
from raypress.models.ddbm import (
    SAMPLER_T_OFFSET,
    VEBridge,
    karras_schedule,
    prenoise_mix,
    sampler_step,
    sde_drift,
)
from raypress.operators.base import Mapper, Params, Resources
from raypress.operators.purification.purifiers.rows import PURIFIED_BY, replace_images
from raypress.operators.registry import register
from raypress.schema import ID_COL, ArtifactType

OBJECTIVES = ("bridge", "one_step")


class PurifyParams(Params):
    steps: int = Field(10, ge=1, description="sampler steps (network calls: 3 per step, 2 for the last, with "
                                             "churn). The paper uses 40 (119 calls); 10 (29 calls) costs a "
                                             "quarter of that, which matters on CPU")
    churn_step_ratio: float = Field(0.33, ge=0, lt=1, description="fraction of each step taken as a "
                                                                  "stochastic Euler step (DDBM/BridgePure: 0.33)")
    guidance: float = Field(0.5, ge=0, description="weight of the pull toward the protected image in the "
                                                   "Heun steps (DDBM/BridgePure: 0.5)")
    batch_size: int = Field(256, ge=1, description="images per network call")
    seed: int = Field(0, ge=0, description="with the row id, seeds each row's sampler noise")
    device: Literal["auto", "cpu", "cuda"] = Field("auto", description="auto: cuda when available")


def row_seed(seed: int, row_id: str) -> int:
    """A 64-bit generator seed from the op's seed and a row id (stable across processes, unlike hash())."""
    digest = hashlib.blake2b(f"{seed}\x00{row_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def row_generators(seed: int, row_ids: Sequence[str]) -> list[torch.Generator]:
    """One CPU generator per row: noise drawn on the CPU is the same on every device."""
    return [torch.Generator(device="cpu").manual_seed(row_seed(seed, rid)) for rid in row_ids]


@torch.no_grad()
def sample_rows(
    bridge: VEBridge,
    model: torch.nn.Module,
    x_T: torch.Tensor,
    generators: Sequence[torch.Generator],
    steps: int = 10,
    churn_step_ratio: float = 0.33,
    guidance: float = 0.5,
) -> torch.Tensor:
    """``VEBridge.sample`` (clip_denoised) with row ``i``'s noise drawn from ``generators[i]`` only,
    and BridgePure's official pre-noise sqrt(1-beta) x_T + sqrt(beta) eps when beta > 0.

    Draws happen in ``VEBridge.sample``'s order (pre-noise, then one per churn step), each shaped
    like one row, so row ``i`` gets exactly what ``VEBridge.sample(x_T[i:i+1], generator=g_i)``
    would get."""
    if len(generators) != x_T.shape[0]:
        raise ValueError(f"{len(generators)} generators for {x_T.shape[0]} images")
    if not 0 <= churn_step_ratio < 1:
        raise ValueError(f"churn_step_ratio must be in [0, 1), got {churn_step_ratio}")

    def noise(like: torch.Tensor) -> torch.Tensor:
        draws = [torch.randn((1, *like.shape[1:]), generator=g) for g in generators]
        return torch.cat(draws).to(device=like.device, dtype=like.dtype)

    if bridge.beta > 0:  # BridgePure's official pre-noise, with this function's generators
        x_T = prenoise_mix(x_T, bridge.beta, noise(x_T))

    def denoiser(x: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
        return bridge.denoise(model, x, sigma, x_T).clamp(-1, 1)

    ones = x_T.new_ones(x_T.shape[0])
    sigmas = karras_schedule(steps, bridge.sigma_min, bridge.sigma_max - SAMPLER_T_OFFSET).tolist()
    x = x_T
    for sigma, sigma_next in zip(sigmas[:-1], sigmas[1:]):
        if churn_step_ratio > 0:  # sampler_step's churn branch, with per-row noise
            sigma_hat = (sigma_next - sigma) * churn_step_ratio + sigma
            d_1, gt2 = sde_drift(x, sigma, denoiser(x, sigma * ones))
            dt = sigma_hat - sigma
            x = x + d_1 * dt + noise(x) * abs(dt) ** 0.5 * gt2**0.5
            sigma = sigma_hat
        x, _ = sampler_step(denoiser, x, x_T, sigma, sigma_next, sigma_max=bridge.sigma_max,
                            churn_step_ratio=0.0, guidance=guidance)
    return x.clamp(-1, 1)


@register("purify", requires={"torch": "purify", "PIL": "purify"})
class Purify(Mapper[PurifyParams]):
    """Purify protected images with a trained BridgePure model (DDBM sampler, or the one-step ablation)."""

    stateful = True
    reads = (ID_COL, "image")
    writes = ("image", PURIFIED_BY)
    batch_size: ClassVar[int | None] = 256
    resources: ClassVar[Resources] = Resources(num_cpus=1)
    inputs: ClassVar[dict[str, ArtifactType]] = {"data": ArtifactType.DATASET, "model": ArtifactType.MODEL}

    def __init__(self, params: PurifyParams, artifacts: dict[str, Artifact] | None = None):
        super().__init__(params, artifacts)
        model = self.artifacts.get("model")
        if model is None:
            raise ValueError("purify needs a Model input named 'model' (e.g. a train_bridge node)")
        path = getattr(model, "path", None)
        if path is None:
            raise ValueError(f"purify's 'model' input is a {type(model).__name__}, not a Model")
        self.device = torch.device(choose_device(self.params.device))
        try:
            self.net, config = load_bridge(path, self.device)
        except ValueError as exc:  # names the kind found, e.g. a classifier wired in by mistake
            raise ValueError(f"purify: {exc}") from exc
        self.objective = config.get("objective", "bridge")
        if self.objective not in OBJECTIVES:
            raise ValueError(f"purify: model at {path} has objective {self.objective!r}, expected one of {OBJECTIVES}")
        self.bridge = VEBridge.from_dict(config.get("bridge", {}))
        size = self.net.config.image_size
        self.image_size = (size, size)
        self.label = f"{Path(path).name}:{self.objective}"

    def purify(self, x_T: torch.Tensor, row_ids: Sequence[str]) -> torch.Tensor:
        """Protected images in [-1, 1] (B, 1, H, W) -> purified ones, ``batch_size`` at a time."""
        p = self.params
        out = []
        for lo in range(0, x_T.shape[0], p.batch_size):
            chunk = x_T[lo : lo + p.batch_size].to(self.device)
            if self.objective == "one_step":
                y = self.bridge.one_step_inverse(self.net, chunk)
            else:
                gens = row_generators(p.seed, row_ids[lo : lo + p.batch_size])
                y = sample_rows(self.bridge, self.net, chunk, gens, p.steps, p.churn_step_ratio, p.guidance)
            out.append(y.cpu())
        return torch.cat(out) if out else x_T

    def process_batch(self, table: pa.Table) -> pa.Table:
        ids = [str(i) for i in table.column(ID_COL).to_pylist()]
        pixels = decode_images(table.column("image").to_pylist(), ids, self.image_size, "L")
        x_T = torch.from_numpy(to_float(pixels))[:, None] * 2 - 1
        purified = self.purify(x_T, ids)
        return replace_images(table, encode_pngs(from_float((purified[:, 0] + 1) / 2).numpy()), self.label)
