"""``evaluate_classifier``: the accuracy of ``train_classifier``'s models on a labelled image set.

This is the test BridgePure's purified data must pass: each seed's classifier is run on the
(clean) test rows, and the Report holds the accuracy per seed, its mean and std over seeds, and
per class, named by ``name`` so that ``bridgepure_report`` can put the rows of its table together.

Rows whose image does not decode, has the wrong size, or whose label is outside
[0, num_classes) stop the stage with a ValueError naming the row.
"""

from __future__ import annotations

import time
from typing import Any, ClassVar

import numpy as np
import torch
from pydantic import Field

from raypress.artifacts import Artifact, ModelArtifact, ReportArtifact
from raypress.models.device import choose_device
from raypress.models.image_classifier import ImageClassifier, classifier_set_members, load_classifier
from raypress.operators.base import Params, Resources, RunContext, Stage
from raypress.operators.purification.classifiers.data import gather_rows
from raypress.operators.registry import register
from raypress.schema import ID_COL, ArtifactType


@torch.no_grad()
def predict(model: ImageClassifier, images: np.ndarray, batch_size: int = 1000,
            device: torch.device | str = "cpu") -> np.ndarray:
    """Predicted class per image (uint8 (N, H, W) in), batched; the model must be in eval mode."""
    device = torch.device(device)
    model = model.to(device).eval()
    out = [model(torch.tensor(images[i:i + batch_size], device=device).unsqueeze(1).float() / 255.0).argmax(1).cpu()
           for i in range(0, len(images), batch_size)]
    return torch.cat(out).numpy() if out else np.zeros(0, np.int64)


def accuracy_summary(per_seed: dict[int, np.ndarray], labels: np.ndarray, num_classes: int) -> dict[str, Any]:
    """Per-seed, mean and std (sample std, ddof=1, from 2 seeds on; 0 for one) of the accuracy,
    and per-class accuracy (per seed and its mean over seeds), from each seed's predictions."""
    acc = {seed: float((pred == labels).mean()) if len(labels) else 0.0 for seed, pred in per_seed.items()}
    values = np.array(list(acc.values()), dtype=np.float64)
    per_class_seed: dict[str, dict[str, float | None]] = {}
    for seed, pred in per_seed.items():
        per_class_seed[str(seed)] = {
            str(c): float((pred[labels == c] == c).mean()) if (labels == c).any() else None
            for c in range(num_classes)}
    per_class = {}
    for c in range(num_classes):
        seen = [v[str(c)] for v in per_class_seed.values() if v[str(c)] is not None]
        per_class[str(c)] = float(np.mean(seen)) if seen else None
    return {"accuracy": {str(s): a for s, a in acc.items()},
            "accuracy_mean": float(values.mean()) if len(values) else 0.0,
            "accuracy_std": float(values.std(ddof=1)) if len(values) >= 2 else 0.0,
            "per_class_accuracy": per_class, "per_seed_per_class_accuracy": per_class_seed}


class EvaluateClassifierParams(Params):
    name: str | None = Field(None, description="the row name in result tables (default: the node id)")
    batch_size: int = Field(1000, ge=1, description="images per forward pass")
    device: str | None = Field(None, description="torch device (default: cuda when available, else cpu)")
    image_key: str = Field("image", description="column holding the PNG bytes")
    label_key: str = Field("label", description="column holding the integer class")


@register("evaluate_classifier", requires={"torch": "purify", "PIL": "purify"})
class EvaluateClassifier(Stage[EvaluateClassifierParams]):
    """Accuracy of each seed's classifier on a labelled image Dataset (mean, std, per class) -> Report."""

    inputs: ClassVar[dict[str, ArtifactType]] = {"data": ArtifactType.DATASET, "model": ArtifactType.MODEL}
    output: ClassVar[ArtifactType] = ArtifactType.REPORT
    resources: ClassVar[Resources] = Resources(num_cpus=1)

    def columns_read(self) -> tuple[str, ...]:
        return (ID_COL, self.params.image_key, self.params.label_key)

    def run(self, inputs: dict[str, Artifact], ctx: RunContext) -> ReportArtifact:
        p = self.params
        model_art = inputs["model"]
        if not isinstance(model_art, ModelArtifact):
            raise ValueError(f"node {ctx.node_id!r}: `model` must be a Model artifact")
        members = classifier_set_members(model_art.path)
        device = choose_device(p.device)
        models = {seed: load_classifier(path, device)[0] for seed, path in members.items()}
        first = next(iter(models.values())).config
        start = time.perf_counter()
        rows = gather_rows(inputs["data"], p.image_key, p.label_key, first.image_size, first.num_classes)
        predictions = {seed: predict(m, rows.images, p.batch_size, device) for seed, m in models.items()}
        metrics = {"name": p.name or ctx.node_id, "model": model_art.path, "rows": len(rows.ids),
                   "train_rows": model_art.config.get("rows"),
                   "seeds": list(models), "arch": first.arch, "label_counts": rows.label_counts(),
                   **accuracy_summary(predictions, rows.labels, first.num_classes),
                   "seconds": time.perf_counter() - start}
        ctx.event("evaluated", name=metrics["name"], rows=metrics["rows"], accuracy_mean=metrics["accuracy_mean"],
                  accuracy_std=metrics["accuracy_std"])
        report = ReportArtifact(str(ctx.path("reports", ctx.node_id, "report.json")), metrics)
        report.save()
        return report
