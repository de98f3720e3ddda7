"""``purification_quality``: how close a purified (or protected, or baseline-filtered) set is to clean.

BridgePure's image-level claim is that its output is close to the clean images, not just that a
classifier learns from it; PSNR to the clean twin measures that. The rows carry their clean twin
in ``clean_image`` (``protect`` with ``keep_clean: true``; ``purify`` and ``purify_baseline``
replace ``image`` and pass the other columns through), so the comparison needs no join.

The Report also keeps the first few rows by id as arrays (``examples.npz``: ids, clean, this
set's images, and the protected images when the ``protected`` input is given) so a report can
draw clean | protected | purified side by side for every method on the same images.
"""

from __future__ import annotations

import time
from typing import ClassVar

import numpy as np
from pydantic import Field

from raypress.artifacts import Artifact, ReportArtifact
from raypress.operators.base import Params, Resources, RunContext, Stage
from raypress.operators.purification.classifiers.data import gather_rows
from raypress.operators.purification.metrics.psnr import DEFAULT_CAP_DB, psnr
from raypress.operators.registry import register
from raypress.schema import ID_COL, ArtifactType


class PurificationQualityParams(Params):
    name: str | None = Field(None, description="the row name in result tables (default: the node id)")
    examples: int = Field(8, ge=0, description="rows (first by id) kept as arrays for example figures")
    image_key: str = Field("image", description="column holding the image to judge (PNG bytes)")
    clean_key: str = Field("clean_image", description="column holding the clean twin (PNG bytes)")
    label_key: str = Field("label", description="column holding the integer class")
    num_classes: int = Field(10, ge=2)
    image_size: tuple[int, int] = Field((28, 28), description="(height, width) every image must have")


@register("purification_quality", requires={"PIL": "purify"})
class PurificationQuality(Stage[PurificationQualityParams]):
    """PSNR of each row's image to its clean twin (mean, std, per class) plus example arrays -> Report."""

    inputs: ClassVar[dict[str, ArtifactType]] = {"data": ArtifactType.DATASET, "protected": ArtifactType.DATASET}
    optional_inputs: ClassVar[frozenset[str]] = frozenset({"protected"})
    output: ClassVar[ArtifactType] = ArtifactType.REPORT
    resources: ClassVar[Resources] = Resources(num_cpus=0)

    def columns_read(self) -> tuple[str, ...]:
        p = self.params
        return (ID_COL, p.image_key, p.clean_key, p.label_key)

    def run(self, inputs: dict[str, Artifact], ctx: RunContext) -> ReportArtifact:
        p = self.params
        start = time.perf_counter()
        size = tuple(p.image_size)
        try:
            clean = gather_rows(inputs["data"], p.clean_key, p.label_key, size, p.num_classes)
        except ValueError as error:
            if "lacks columns" in str(error) and p.clean_key in str(error):
                raise ValueError(f"node {ctx.node_id!r}: rows have no {p.clean_key!r} column to compare with "
                                 "(protect with keep_clean: true keeps it)") from error
            raise
        judged = gather_rows(inputs["data"], p.image_key, p.label_key, size, p.num_classes)
        if not judged.ids:
            raise ValueError(f"node {ctx.node_id!r}: no rows to measure")
        values = psnr(clean.images, judged.images, cap=DEFAULT_CAP_DB)
        per_class = {str(c): float(values[judged.labels == c].mean()) for c in range(p.num_classes)
                     if (judged.labels == c).any()}
        name = p.name or ctx.node_id
        metrics = {"name": name, "rows": len(judged.ids), "psnr_mean": float(values.mean()),
                   "psnr_std": float(values.std()), "psnr_median": float(np.median(values)),
                   "psnr_per_class": per_class, "psnr_cap_db": DEFAULT_CAP_DB}
        report_path = ctx.path("reports", ctx.node_id, "report.json")
        if p.examples:
            keep = min(p.examples, len(judged.ids))
            arrays = {"ids": np.array(judged.ids[:keep]), "clean": clean.images[:keep], "image": judged.images[:keep],
                      "labels": judged.labels[:keep]}
            if "protected" in inputs:
                protected = gather_rows(inputs["protected"], "image", p.label_key, size, p.num_classes)
                where = {rid: i for i, rid in enumerate(protected.ids)}
                absent = [rid for rid in arrays["ids"].tolist() if rid not in where]
                if absent:
                    raise ValueError(f"node {ctx.node_id!r}: rows {absent[:3]} are not in the `protected` input")
                arrays["protected"] = protected.images[[where[rid] for rid in arrays["ids"].tolist()]]
            examples = report_path.parent / "examples.npz"
            np.savez_compressed(examples, **arrays)
            metrics["examples"] = str(examples)
        metrics["seconds"] = time.perf_counter() - start
        ctx.event("purification_quality", name=name, rows=metrics["rows"], psnr_mean=metrics["psnr_mean"])
        report = ReportArtifact(str(report_path), metrics)
        report.save()
        return report
