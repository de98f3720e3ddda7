"""``choose_protection``: pick a protection's strength on a validation split, never on the test set.

Why: CIFAR budgets do not make Fashion-MNIST unlearnable, so the budget has to be raised until the
protection works; choosing it by looking at test accuracy would tune the experiment on the data it
is judged on. This stage does what a data owner can do with its own data: protect a training-side
set with each candidate budget (weakest first), train the pipeline's classifier recipe on it,
score it on clean images held out from the training side (``validation``), and choose the weakest
candidate whose validation accuracy is at least ``min_drop`` below the same recipe trained on the
clean set. When none gets there the strongest is chosen and the Report says so (``reached``).

The Report's ``chosen`` (method and options) is what ``protect`` reads from its optional
``strength`` input. Training runs in this process (``train_one``, the classifier stage's loop):
a few small models on a few thousand images need no Ray Train start-up.
"""

from __future__ import annotations

import time
from typing import Any, ClassVar

import numpy as np
from pydantic import Field, field_validator

from raypress.artifacts import Artifact, ReportArtifact
from raypress.operators.base import Params, Resources, RunContext, Stage
from raypress.operators.purification.classifiers.data import LabelledImages, gather_rows
from raypress.operators.purification.protections.attacks import Method, measure_budget, method_params, protect_images
from raypress.operators.registry import register
from raypress.schema import ArtifactType


class ChooseProtectionParams(Params):
    method: Method = Field(description="the protection whose strength is chosen")
    candidates: list[dict[str, Any]] = Field(description="the method's budget options, weakest first, "
                                                         "e.g. [{l2: 0.66}, {l2: 1.76}, {l2: 3.5}]")
    min_drop: float = Field(0.25, ge=0, le=1, description="validation accuracy at least this far below clean")
    seed: int | None = Field(None, ge=0, description="protection seed (default: the run's seed, as protect)")
    seeds: list[int] = Field(default_factory=lambda: [0], description="classifier seeds per candidate")
    width: int = Field(16, ge=1, description="classifier width (the pipeline's recipe)")
    epochs: int = Field(3, ge=1)
    steps: int | None = Field(None, ge=1, description="optimizer steps instead of epochs")
    batch_size: int = Field(128, ge=1)
    lr: float = Field(3e-3, gt=0)
    weight_decay: float = Field(5e-4, ge=0)
    num_classes: int = Field(10, ge=2)
    image_size: tuple[int, int] = Field((28, 28))
    device: str = Field("cpu", description="torch device for the classifiers")

    @field_validator("candidates")
    @classmethod
    def _candidates(cls, value: list[dict[str, Any]], info) -> list[dict[str, Any]]:
        if not value:
            raise ValueError("candidates needs at least one budget")
        method = info.data.get("method")
        if method is not None:
            for options in value:
                method_params(method, options)  # a foreign or invalid key fails at validate time
        return value


def validation_accuracy(train: LabelledImages, images: np.ndarray, validation: LabelledImages,
                        p: ChooseProtectionParams) -> list[float]:
    """Per seed: the recipe trained on ``images`` (with ``train``'s labels), scored on ``validation``."""
    from raypress.models.image_classifier import ClassifierConfig
    from raypress.operators.purification.evaluate_classifier import predict
    from raypress.operators.purification.train_classifier import train_one

    config = ClassifierConfig(arch="cnn", width=p.width, num_classes=p.num_classes,
                              image_size=tuple(p.image_size)).to_dict()
    out = []
    for seed in p.seeds:
        model, _ = train_one(images, train.labels, config, seed, epochs=p.epochs, steps=p.steps,
                             batch_size=p.batch_size, lr=p.lr, weight_decay=p.weight_decay, augment=False,
                             device=p.device)
        out.append(float((predict(model, validation.images, device=p.device) == validation.labels).mean()))
    return out


def choose(clean: float, results: list[dict[str, Any]], min_drop: float) -> tuple[int, bool]:
    """Index of the weakest candidate reaching ``min_drop`` below ``clean`` (and True), else the
    strongest (and False). ``results`` are in candidate order, weakest first."""
    for i, r in enumerate(results):
        if clean - r["accuracy_mean"] >= min_drop:
            return i, True
    return len(results) - 1, False


@register("choose_protection", requires={"torch": "purify", "PIL": "purify"})
class ChooseProtection(Stage[ChooseProtectionParams]):
    """Choose a protection's budget on a training-side validation split (weakest that drops accuracy enough) -> Report."""

    inputs: ClassVar[dict[str, ArtifactType]] = {"data": ArtifactType.DATASET, "validation": ArtifactType.DATASET}
    output: ClassVar[ArtifactType] = ArtifactType.REPORT
    resources: ClassVar[Resources] = Resources(num_cpus=1)

    def run(self, inputs: dict[str, Artifact], ctx: RunContext) -> ReportArtifact:
        import torch

        p = self.params
        start = time.perf_counter()
        size = tuple(p.image_size)
        train = gather_rows(inputs["data"], "image", "label", size, p.num_classes)
        validation = gather_rows(inputs["validation"], "image", "label", size, p.num_classes)
        metrics = choose_on(train, validation, p, ctx.seed if p.seed is None else p.seed, torch.get_num_threads())
        for r in metrics["candidates"]:
            ctx.event("protection_candidate", method=p.method, options=r["options"],
                      accuracy_mean=r["accuracy_mean"], drop=r["drop"])
        metrics.update({"name": ctx.node_id, "seconds": time.perf_counter() - start})
        ctx.event("protection_chosen", **metrics["chosen"], reached=metrics["reached"])
        report = ReportArtifact(str(ctx.path("reports", ctx.node_id, "report.json")), metrics)
        report.save()
        return report


def choose_on(train: LabelledImages, validation: LabelledImages, p: ChooseProtectionParams, seed: int,
              threads: int = 1) -> dict[str, Any]:
    """The whole choice, Ray-free (tests call it): clean accuracy, each candidate's, the pick."""
    overlap = set(train.ids) & set(validation.ids)
    if overlap:
        raise ValueError(f"validation rows are also training rows (e.g. {sorted(overlap)[:3]}): "
                         "carve the validation split from other training-side images")
    if not len(train.ids) or not len(validation.ids):
        raise ValueError("choose_protection needs training and validation rows")
    clean_acc = validation_accuracy(train, train.images, validation, p)
    clean = float(np.mean(clean_acc))
    results = []
    for options in p.candidates:
        protected = protect_images(p.method, train.images, train.labels, p.num_classes, options, seed)
        acc = validation_accuracy(train, protected, validation, p)
        results.append({"options": dict(options), "accuracy": acc, "accuracy_mean": float(np.mean(acc)),
                        "drop": clean - float(np.mean(acc)), "budget": measure_budget(train.images, protected)})
    index, reached = choose(clean, results, p.min_drop)
    return {"method": p.method, "clean_accuracy": clean, "clean_accuracy_seeds": clean_acc,
            "min_drop": p.min_drop, "candidates": results, "reached": reached,
            "chosen": {"method": p.method, "options": dict(p.candidates[index])},
            "train_rows": len(train.ids), "validation_rows": len(validation.ids), "threads": threads}
