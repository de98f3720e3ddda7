"""Small image classifiers for 28x28 grayscale images: the models BridgePure's evaluation trains.

Why small: the paper's question is whether a classifier trained on (protected, then purified)
images still generalises to clean test images, and the pipeline answers it for about a dozen
datasets times three seeds per protection, so each model must train in seconds to a minute on a
CPU. Two architectures:

- ``cnn``: conv(w) - pool - conv(2w) - pool - fc(4w) - fc(classes), BatchNorm after each conv
  (the classic MNIST-sized network; ~90% on Fashion-MNIST with enough data);
- ``resnet``: a stem conv and three stages of one pre-activation-free BasicBlock each
  (w, 2w, 4w channels at 28, 14, 7 pixels), global average pooling, fc: the "ResNet" family the
  availability-attack papers report, shrunk to this image size.

Inputs are float pixels in [0, 1] shaped (B, C, H, W); the network centres them itself
(``2x - 1``), so every caller feeds the same ``to_float`` output. A saved model is a directory
with ``config.json`` (``kind`` "image_classifier", the network config, whatever the trainer adds)
and ``model.pt`` (a state dict, loaded with ``weights_only=True``); ``kind`` is checked on load.
A *set* (kind "image_classifier_set") is a directory of such models, ``seed_<k>/``, one per
training seed, with a ``config.json`` listing them: evaluation reports mean and spread over seeds.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Mapping

import torch
import torch.nn.functional as F
from torch import nn

from raypress.models.config_dict import checked_fields, config_to_dict, read_model_config, save_model_dir

KIND = "image_classifier"
SET_KIND = "image_classifier_set"  # several seeds of one recipe: seed_<k>/ subdirectories
CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.pt"
ARCHS = ("cnn", "resnet")


@dataclass
class ClassifierConfig:
    """Everything needed to rebuild the network (JSON-able, so a Model dir can carry it)."""

    arch: Literal["cnn", "resnet"] = "cnn"
    width: int = 32  # channels of the first conv; later layers are multiples of it
    num_classes: int = 10
    in_channels: int = 1
    image_size: tuple[int, int] = (28, 28)  # (height, width)
    dropout: float = 0.0  # before the classifier head

    def __post_init__(self) -> None:
        self.image_size = (int(self.image_size[0]), int(self.image_size[1]))
        if self.arch not in ARCHS:
            raise ValueError(f"arch must be one of {ARCHS}, got {self.arch!r}")
        if self.width < 1 or self.num_classes < 2 or self.in_channels < 1:
            raise ValueError(f"need width >= 1, num_classes >= 2, in_channels >= 1; got {self.width}, "
                             f"{self.num_classes}, {self.in_channels}")
        if min(self.image_size) < 4:
            raise ValueError(f"image_size {self.image_size} is too small: both sides must be >= 4 (two 2x poolings)")
        if not 0 <= self.dropout < 1:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")

    def to_dict(self) -> dict[str, Any]:
        return config_to_dict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "ClassifierConfig":
        return cls(**checked_fields(cls, data))


def _conv_bn(in_ch: int, out_ch: int, stride: int = 1) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(in_ch, out_ch, 3, stride=stride, padding=1, bias=False),
                         nn.BatchNorm2d(out_ch))


class SmallCNN(nn.Module):
    """conv-BN-ReLU-pool twice, then two linear layers."""

    def __init__(self, cfg: ClassifierConfig) -> None:
        super().__init__()
        w = cfg.width
        self.features = nn.Sequential(
            _conv_bn(cfg.in_channels, w), nn.ReLU(inplace=True), nn.MaxPool2d(2),
            _conv_bn(w, 2 * w), nn.ReLU(inplace=True), nn.MaxPool2d(2),
        )
        h, wd = cfg.image_size[0] // 4, cfg.image_size[1] // 4
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(2 * w * h * wd, 4 * w), nn.ReLU(inplace=True),
                                  nn.Dropout(cfg.dropout), nn.Linear(4 * w, cfg.num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


class BasicBlock(nn.Module):
    """ResNet's two 3x3 convs with a skip (a 1x1 projection when the shape changes)."""

    def __init__(self, in_ch: int, out_ch: int, stride: int) -> None:
        super().__init__()
        self.conv1 = _conv_bn(in_ch, out_ch, stride)
        self.conv2 = _conv_bn(out_ch, out_ch)
        self.skip = (nn.Identity() if stride == 1 and in_ch == out_ch else
                     nn.Sequential(nn.Conv2d(in_ch, out_ch, 1, stride=stride, bias=False), nn.BatchNorm2d(out_ch)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.skip(x) + self.conv2(F.relu(self.conv1(x))))


class SmallResNet(nn.Module):
    """Stem conv, three one-block stages (w, 2w, 4w; strides 1, 2, 2), global average pool, fc."""

    def __init__(self, cfg: ClassifierConfig) -> None:
        super().__init__()
        w = cfg.width
        self.stem = nn.Sequential(_conv_bn(cfg.in_channels, w), nn.ReLU(inplace=True))
        self.stages = nn.Sequential(BasicBlock(w, w, 1), BasicBlock(w, 2 * w, 2), BasicBlock(2 * w, 4 * w, 2))
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(cfg.dropout),
                                  nn.Linear(4 * w, cfg.num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.stages(self.stem(x)))


class ImageClassifier(nn.Module):
    """[0, 1] pixels (B, C, H, W) -> class logits (B, num_classes), with the chosen body."""

    def __init__(self, config: ClassifierConfig | None = None) -> None:
        super().__init__()
        self.config = config or ClassifierConfig()
        self.body = SmallCNN(self.config) if self.config.arch == "cnn" else SmallResNet(self.config)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        expected = (self.config.in_channels, *self.config.image_size)
        if x.ndim != 4 or tuple(x.shape[1:]) != expected:
            raise ValueError(f"ImageClassifier expects (B, {', '.join(map(str, expected))}) inputs, "
                             f"got {tuple(x.shape)}")
        return self.body(x * 2.0 - 1.0)


def save_classifier(model: ImageClassifier, directory: str | Path,
                    extra: Mapping[str, Any] | None = None) -> Path:
    """Write ``config.json`` (kind + network config + ``extra``) and ``model.pt`` into ``directory``."""
    return save_model_dir(model, directory, KIND, "model", extra, "save_classifier", CONFIG_FILE, WEIGHTS_FILE)


def load_classifier(directory: str | Path,
                    device: str | torch.device = "cpu") -> tuple[ImageClassifier, dict[str, Any]]:
    """Rebuild a classifier written by :func:`save_classifier`, in eval mode, with its config dict.

    A directory holding another kind of model (a bridge, the MoE) raises ValueError naming the
    kind found, rather than failing later on mismatched state-dict keys."""
    path = Path(directory)
    config = read_model_config(path, CONFIG_FILE, KIND, "model", "image classifier", "save_classifier")
    model = ImageClassifier(ClassifierConfig.from_dict(config["model"]))
    state = torch.load(path / WEIGHTS_FILE, map_location="cpu", weights_only=True)
    model.load_state_dict(state)
    return model.to(device).eval(), config


def _read_config(directory: Path) -> dict[str, Any]:
    config_path = directory / CONFIG_FILE
    if not config_path.is_file():
        raise FileNotFoundError(f"{directory} is not a saved classifier: {CONFIG_FILE} is missing")
    config = json.loads(config_path.read_text())
    if not isinstance(config, dict):
        raise ValueError(f"{config_path} does not hold a JSON object")
    return config


def write_classifier_set(directory: str | Path, model_config: Mapping[str, Any], seeds: list[int],
                         extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Write the ``config.json`` of a set whose ``seed_<k>/`` models are already saved in
    ``directory``; each member's ``training`` summary is copied into ``per_seed``. Returns the config."""
    path = Path(directory)
    per_seed: dict[str, Any] = {}
    for seed in seeds:
        member = path / f"seed_{seed}"
        config = _read_config(member)
        if config.get("kind") != KIND:
            raise ValueError(f"{member} holds a model of kind {config.get('kind')!r}, expected {KIND!r}")
        per_seed[str(seed)] = config.get("training", {})
    manifest = {"kind": SET_KIND, "arch": model_config["arch"], "model": dict(model_config),
                "seeds": list(seeds), "per_seed": per_seed, **dict(extra or {})}
    (path / CONFIG_FILE).write_text(json.dumps(manifest, indent=2, sort_keys=True))
    return manifest


def classifier_set_members(directory: str | Path) -> dict[int, Path]:
    """seed -> model directory, for a set (its ``seed_<k>/``) or a single classifier (itself).

    Any other kind raises ValueError naming it, so an evaluation wired to a bridge model fails
    with the reason."""
    path = Path(directory)
    config = _read_config(path)
    kind = config.get("kind")
    if kind == KIND:
        return {int(config.get("seed", 0)): path}
    if kind != SET_KIND:
        raise ValueError(f"{path} holds a model of kind {kind!r}, expected {KIND!r} or {SET_KIND!r}")
    members = {int(seed): path / f"seed_{seed}" for seed in config.get("seeds", [])}
    if not members:
        raise ValueError(f"{path / CONFIG_FILE} lists no seeds")
    absent = [str(p) for p in members.values() if not (p / WEIGHTS_FILE).is_file()]
    if absent:
        raise FileNotFoundError(f"classifier set {path} lacks the models {absent}")
    return members


__all__ = ["ClassifierConfig", "ImageClassifier", "save_classifier", "load_classifier", "write_classifier_set",
           "classifier_set_members", "KIND", "SET_KIND"]
