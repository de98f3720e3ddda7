"""Artifacts passed between DAG nodes: a Dataset (lazy Ray Dataset), a Model, a Report."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from raypress.schema import ArtifactType

if TYPE_CHECKING:  # pragma: no cover
    import ray.data


@dataclass
class DatasetArtifact:
    """Live rows only (tombstones already routed away) unless ``has_tombstones``."""

    ds: "ray.data.Dataset"
    path: str | None = None  # where it is materialized, when it is
    rows: int | None = None
    type: ArtifactType = field(default=ArtifactType.DATASET, init=False)


@dataclass
class ModelArtifact:
    """A checkpoint directory with a ``raypress_model.json`` describing how to load it."""

    path: str
    config: dict[str, Any] = field(default_factory=dict)
    type: ArtifactType = field(default=ArtifactType.MODEL, init=False)

    MANIFEST = "raypress_model.json"

    def save_manifest(self) -> None:
        Path(self.path).mkdir(parents=True, exist_ok=True)
        (Path(self.path) / self.MANIFEST).write_text(json.dumps(self.config, indent=2))

    @classmethod
    def load(cls, path: str) -> "ModelArtifact":
        cfg = json.loads((Path(path) / cls.MANIFEST).read_text())
        return cls(path=path, config=cfg)


@dataclass
class ReportArtifact:
    """Metrics JSON (+ optional figures beside it)."""

    path: str
    metrics: dict[str, Any] = field(default_factory=dict)
    type: ArtifactType = field(default=ArtifactType.REPORT, init=False)

    def save(self) -> None:
        Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        Path(self.path).write_text(json.dumps(self.metrics, indent=2, default=str))

    @classmethod
    def load(cls, path: str) -> "ReportArtifact":
        return cls(path=path, metrics=json.loads(Path(path).read_text()))


Artifact = DatasetArtifact | ModelArtifact | ReportArtifact
