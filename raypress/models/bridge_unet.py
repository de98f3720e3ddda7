"""The denoiser network of BridgePure's diffusion bridge: a small U-Net for 28x28 grayscale images.

Why this shape: DDBM conditions its ADM U-Net on the bridge's end point by concatenating ``x_T``
to the (``c_in``-scaled) noisy input channel-wise, embeds the noise level ``c_noise`` with a
sinusoidal embedding + MLP, and uses residual blocks with GroupNorm+SiLU, attention at low
resolution and a zero-initialised output convolution (so an untrained network predicts 0 and the
preconditioned denoiser starts as ``c_skip * x_t``). This file keeps those choices at a size that
trains on a few hundred Fashion-MNIST pairs: resolutions 28 -> 14 -> 7 (stride-2 convs down,
nearest-neighbour + conv up), so no padding to 32 is needed.

A saved model is a directory with ``config.json`` (``kind``, the U-Net config and whatever the
trainer adds, e.g. the bridge's parameters) and ``model.pt`` (a torch state dict, loaded with
``weights_only=True``). ``kind`` is checked on load so a directory holding another Model (a
classifier, the MoE) fails with a clear message instead of a state-dict key error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import torch
import torch.nn.functional as F
from torch import nn

from raypress.models.config_dict import checked_fields, config_to_dict, read_model_config, save_model_dir

KIND = "bridgepure_ddbm"  # the `kind` in config.json of a saved bridge model
CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.pt"


@dataclass
class BridgeUNetConfig:
    """Everything needed to rebuild the network (JSON-able, so a Model dir can carry it)."""

    image_size: int = 28
    in_channels: int = 1  # channels of x_t; x_T has the same, so the first conv sees 2x this
    base_channels: int = 64
    channel_mult: tuple[int, ...] = (1, 2, 2)  # one entry per resolution: 28, 14, 7
    num_res_blocks: int = 2
    attention: bool = True  # self-attention at the lowest resolution (as DDBM's middle block)
    num_heads: int = 4
    norm_groups: int = 8
    dropout: float = 0.0
    # Pixels per side folded into channels before the first conv and unfolded after the last
    # (pixel_unshuffle / pixel_shuffle, lossless): 2 runs the U-Net at 14x14 for a quarter of the
    # FLOPs, which is what makes 6,000 training steps and 10k purified images fit a CPU budget.
    patch_size: int = 1

    def __post_init__(self) -> None:
        self.channel_mult = tuple(int(m) for m in self.channel_mult)
        levels = len(self.channel_mult)
        if levels < 1:
            raise ValueError("channel_mult needs at least one resolution level")
        if self.patch_size < 1 or self.image_size % self.patch_size:
            raise ValueError(f"patch_size {self.patch_size} must be >= 1 and divide image_size {self.image_size}")
        inner = self.image_size // self.patch_size
        if inner % (2 ** (levels - 1)):
            raise ValueError(
                f"image_size {self.image_size} / patch_size {self.patch_size} = {inner} must be divisible by "
                f"2**{levels - 1} for {levels} resolution levels (channel_mult={self.channel_mult})"
            )
        for mult in self.channel_mult:
            width = self.base_channels * mult
            if width % self.norm_groups:
                raise ValueError(f"channel width {width} is not divisible by norm_groups {self.norm_groups}")
            if self.attention and width % self.num_heads:
                raise ValueError(f"channel width {width} is not divisible by num_heads {self.num_heads}")

    def to_dict(self) -> dict[str, Any]:
        return config_to_dict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "BridgeUNetConfig":
        return cls(**checked_fields(cls, data))


def timestep_embedding(c_noise: torch.Tensor, dim: int, max_period: float = 10000.0) -> torch.Tensor:
    """Sinusoidal embedding of the (log-scaled) noise level, as in ADM/DDBM: [cos | sin]."""
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(half, device=c_noise.device, dtype=torch.float32) / half)
    args = c_noise.float()[:, None] * freqs[None]
    emb = torch.cat([torch.cos(args), torch.sin(args)], dim=-1)
    if dim % 2:
        emb = F.pad(emb, (0, 1))
    return emb


def _zero(module: nn.Module) -> nn.Module:
    """Zero a layer's parameters: residual branches and the output start as the identity / 0."""
    for p in module.parameters():
        nn.init.zeros_(p)
    return module


class ResBlock(nn.Module):
    """GroupNorm-SiLU-conv twice, the noise embedding added in between, a skip connection."""

    def __init__(self, in_ch: int, out_ch: int, emb_dim: int, groups: int, dropout: float) -> None:
        super().__init__()
        self.norm1 = nn.GroupNorm(groups, in_ch)
        self.conv1 = nn.Conv2d(in_ch, out_ch, 3, padding=1)
        self.emb = nn.Linear(emb_dim, out_ch)
        self.norm2 = nn.GroupNorm(groups, out_ch)
        self.dropout = nn.Dropout(dropout)
        self.conv2 = _zero(nn.Conv2d(out_ch, out_ch, 3, padding=1))
        self.skip = nn.Identity() if in_ch == out_ch else nn.Conv2d(in_ch, out_ch, 1)

    def forward(self, x: torch.Tensor, emb: torch.Tensor) -> torch.Tensor:
        h = self.conv1(F.silu(self.norm1(x)))
        h = h + self.emb(F.silu(emb))[:, :, None, None]
        h = self.conv2(self.dropout(F.silu(self.norm2(h))))
        return self.skip(x) + h


class AttentionBlock(nn.Module):
    """Multi-head self-attention over pixels (cheap at 7x7), residual, zero-initialised output."""

    def __init__(self, ch: int, heads: int, groups: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm = nn.GroupNorm(groups, ch)
        self.qkv = nn.Conv2d(ch, 3 * ch, 1)
        self.proj = _zero(nn.Conv2d(ch, ch, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, c, h, w = x.shape
        q, k, v = self.qkv(self.norm(x)).reshape(b, 3, self.heads, c // self.heads, h * w).unbind(1)
        out = F.scaled_dot_product_attention(q.transpose(-1, -2), k.transpose(-1, -2), v.transpose(-1, -2))
        return x + self.proj(out.transpose(-1, -2).reshape(b, c, h, w))


class BridgeUNet(nn.Module):
    """F_theta(c_in * x_t, c_noise, x_T) -> the raw network output that the bridge preconditions.

    The bridge (``raypress.models.ddbm.VEBridge.denoise``) turns it into an x_0 estimate:
    ``x0_hat = c_skip * x_t + c_out * F``.
    """

    def __init__(self, config: BridgeUNetConfig | None = None) -> None:
        super().__init__()
        cfg = self.config = config or BridgeUNetConfig()
        ch0, groups, emb_dim = cfg.base_channels, cfg.norm_groups, 4 * cfg.base_channels
        self.time_embed = nn.Sequential(nn.Linear(ch0, emb_dim), nn.SiLU(), nn.Linear(emb_dim, emb_dim))
        folded = cfg.in_channels * cfg.patch_size ** 2
        self.input_conv = nn.Conv2d(2 * folded, ch0 * cfg.channel_mult[0], 3, padding=1)

        widths = [ch0 * m for m in cfg.channel_mult]
        last = len(widths) - 1
        self.down = nn.ModuleList()
        self.downsample = nn.ModuleList()
        skips: list[int] = []
        ch = widths[0]
        for level, width in enumerate(widths):
            blocks = nn.ModuleList()
            for _ in range(cfg.num_res_blocks):
                blocks.append(ResBlock(ch, width, emb_dim, groups, cfg.dropout))
                ch = width
                skips.append(ch)
            self.down.append(blocks)
            self.downsample.append(nn.Conv2d(ch, ch, 3, stride=2, padding=1) if level < last else nn.Identity())

        self.mid1 = ResBlock(ch, ch, emb_dim, groups, cfg.dropout)
        self.mid_attn = AttentionBlock(ch, cfg.num_heads, groups) if cfg.attention else nn.Identity()
        self.mid2 = ResBlock(ch, ch, emb_dim, groups, cfg.dropout)

        self.up = nn.ModuleList()
        self.upsample = nn.ModuleList()
        for level in reversed(range(len(widths))):
            blocks = nn.ModuleList()
            for _ in range(cfg.num_res_blocks):
                blocks.append(ResBlock(ch + skips.pop(), widths[level], emb_dim, groups, cfg.dropout))
                ch = widths[level]
            self.up.append(blocks)
            self.upsample.append(nn.Conv2d(ch, ch, 3, padding=1) if level > 0 else nn.Identity())

        self.out_norm = nn.GroupNorm(groups, ch)
        self.out_conv = _zero(nn.Conv2d(ch, folded, 3, padding=1))

    def forward(self, x: torch.Tensor, c_noise: torch.Tensor, x_T: torch.Tensor) -> torch.Tensor:
        """x: c_in-scaled x_t (B, C, H, W); c_noise: (B,) log-scaled noise level; x_T: (B, C, H, W)."""
        emb = self.time_embed(timestep_embedding(c_noise, self.config.base_channels).to(x.dtype))
        patch = self.config.patch_size
        h = torch.cat([x, x_T], dim=1)
        h = self.input_conv(F.pixel_unshuffle(h, patch) if patch > 1 else h)
        hs: list[torch.Tensor] = []
        for blocks, down in zip(self.down, self.downsample):
            for block in blocks:
                h = block(h, emb)
                hs.append(h)
            h = down(h)
        h = self.mid2(self.mid_attn(self.mid1(h, emb)), emb)
        for blocks, up in zip(self.up, self.upsample):
            for block in blocks:
                h = block(torch.cat([h, hs.pop()], dim=1), emb)
            if not isinstance(up, nn.Identity):
                h = up(F.interpolate(h, scale_factor=2.0, mode="nearest"))
        out = self.out_conv(F.silu(self.out_norm(h)))
        return F.pixel_shuffle(out, patch) if patch > 1 else out


def save_bridge(model: BridgeUNet, config: Mapping[str, Any] | None, directory: str | Path) -> Path:
    """Write ``config.json`` (kind + U-Net config + ``config``) and ``model.pt`` into ``directory``.

    ``config`` is what the trainer wants a loader to know besides the network (the bridge's
    sigma_max/sigma_data/beta, sampler defaults, training metadata); it must be JSON-able.
    Save the EMA weights (``ema.module``) when training keeps them: those are the ones to sample with.
    """
    return save_model_dir(model, directory, KIND, "unet", config, "save_bridge", CONFIG_FILE, WEIGHTS_FILE)


def load_bridge(directory: str | Path, device: str | torch.device = "cpu") -> tuple[BridgeUNet, dict[str, Any]]:
    """Rebuild a network written by :func:`save_bridge`, in eval mode, with the saved config dict.

    Refuses (ValueError) a directory whose ``config.json`` names another kind of model, so a
    pipeline wired to the wrong Model fails with the reason rather than with a key mismatch.
    """
    path = Path(directory)
    config = read_model_config(path, CONFIG_FILE, KIND, "unet", "bridge model", "save_bridge", " (a BridgePure DDBM)")
    model = BridgeUNet(BridgeUNetConfig.from_dict(config["unet"]))
    state = torch.load(path / WEIGHTS_FILE, map_location="cpu", weights_only=True)
    model.load_state_dict(state)
    return model.to(device).eval(), config
