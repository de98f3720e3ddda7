"""`quality_classifier_filter`: score each text with a trained classifier, keep a score range.

The Model comes from another node of the same pipeline (usually ``train_quality_classifier``):
the runner hands it to the constructor as ``artifacts["model"]``.  The op is stateful, so each
actor of its pool loads the weights once and scores many batches with them.
"""

from __future__ import annotations

from typing import Any, ClassVar, Sequence

import pyarrow as pa
from pydantic import Field

from raypress.artifacts import Artifact
from raypress.models.ngram_classifier import KIND, load
from raypress.operators.base import Filter, Params, range_reason
from raypress.operators.registry import register
from raypress.schema import ArtifactType


class QualityClassifierFilterParams(Params):
    text_key: str = Field("text", description="column holding the text to score")
    positive_label: str | int | bool | None = Field(
        None,
        description="the label that means 'good'; its probability is the score. None: the last "
        "label in sorted order (True for bool labels, 1 for 0/1); name it for string labels",
    )
    min_score: float | None = Field(0.5, description="keep rows whose quality_score >= this")
    max_score: float | None = Field(1.0, description="keep rows whose quality_score <= this")


def positive_index(labels: list[Any], positive: Any) -> int:
    """Class index of ``positive``; a label also matches by its string form (``"1"`` -> 1)."""
    if positive is None:
        return len(labels) - 1
    for i, label in enumerate(labels):
        if type(label) is type(positive) and label == positive:
            return i
    for i, label in enumerate(labels):
        if str(label) == str(positive):
            return i
    raise ValueError(f"positive_label {positive!r} is not one of the model's labels {labels!r}")


@register("quality_classifier_filter", requires={"torch": "quality"})
class QualityClassifierFilter(Filter[QualityClassifierFilterParams]):
    """Keep rows whose classifier probability of the positive label lies in [min_score, max_score]."""

    stateful = True
    stat_names = ("quality_score",)
    inputs: ClassVar[dict[str, ArtifactType]] = {"data": ArtifactType.DATASET, "model": ArtifactType.MODEL}

    def __init__(self, params: QualityClassifierFilterParams, artifacts: dict[str, Artifact] | None = None):
        super().__init__(params, artifacts)
        model = self.artifacts.get("model")
        if model is None:
            raise ValueError("quality_classifier_filter needs a Model input named 'model'")
        kind = getattr(model, "config", {}).get("kind")
        if kind != KIND:
            raise ValueError(f"model at {model.path} is a {kind!r}, not a {KIND!r}")
        self.model = load(model.path)
        self.positive = positive_index(self.model.config.labels, self.params.positive_label)

    def compute_stats(self, table: pa.Table) -> dict[str, Sequence[Any]]:
        texts = ["" if t is None else t for t in table.column(self.params.text_key).to_pylist()]
        probs = self.model.predict_proba(texts)[:, self.positive]
        return {"quality_score": probs.tolist()}

    def drop_reasons(self, stats: dict[str, Sequence[Any]]) -> list[str | None]:
        p = self.params
        return [range_reason(s, "quality_score", p.min_score, p.max_score) for s in stats["quality_score"]]
