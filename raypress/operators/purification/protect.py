"""``protect``: apply one availability attack to a Dataset of images (the data BridgePure purifies).

Why a Stage and not a streaming Mapper: OPS searches its pixels over each class's images and EM
optimises its noise against a surrogate trained on the whole set, so the methods need every row
at once; the inputs are small (Fashion-MNIST: 70k images of 28x28, a few MB of PNG), so the stage
gathers them, protects them in one call, and hands back an in-memory Dataset.  Rows are sorted by
id first, so the same rows and seed give the same bytes whatever order Ray delivered them in.

The strength can come from a ``choose_protection`` Report wired to the optional ``strength``
input: its chosen budget (picked on a validation split carved from the training side, never on
the test set) replaces the budget params here, so the pipeline protects with what validation chose
without anyone copying a number by hand. Its method must match ``method``.

A row whose image does not decode, has the wrong size, or whose label is outside
[0, num_classes) is not protected: it leaves as an error tombstone naming the row and the
problem, so the runner quarantines it and counts it in the ledger (the run's max_error_ratio
still applies), and the remaining rows are protected without it.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field, model_validator

from raypress.artifacts import Artifact, DatasetArtifact
from raypress.image_codecs import decode_image, encode_pngs
from raypress.operators.base import Params, Resources, RunContext, Stage
from raypress.operators.purification.protections.attacks import Method, measure_budget, method_params, protect_images
from raypress.operators.registry import register
from raypress.operators.shared.rows import combine, tombstones
from raypress.schema import ID_COL, ArtifactType

ROWS_PER_BLOCK = 2_000
# Params that belong to one method or another; only those set are passed on (and checked) there.
METHOD_KEYS = ("eps", "l2", "grid", "class_sep", "crop", "pixels", "steps", "step_size", "rounds", "train_steps",
               "stop_acc", "batch_size", "lr", "width", "device")


class ProtectParams(Params):
    method: Method = Field(description="classwise | lsp (sample-wise, APBench) | lsp_classwise | ar | ops | em")
    seed: int | None = Field(None, ge=0, description="default: the run's seed")
    num_classes: int = Field(10, ge=2, description="labels must lie in [0, num_classes)")
    keep_clean: bool = Field(False, description="keep the clean PNG in 'clean_image' (the leaked pairs "
                                                "BridgePure trains on)")
    image_size: tuple[int, int] = Field((28, 28), description="(height, width) every image must have")
    mode: Literal["L", "RGB"] = Field("L", description="PIL mode images are decoded to")
    eps: float | None = Field(None, description="classwise/lsp_classwise/em: Linf budget in /255 levels (8 means 8/255)")
    l2: float | None = Field(None, description="lsp/ar: L2 budget per image in the [0, 1] pixel scale")
    grid: int | None = Field(None, description="lsp/lsp_classwise: patches per side")
    class_sep: float | None = Field(None, description="lsp: class cluster separation (APBench: 10)")
    crop: int | None = Field(None, description="ar: rows/columns of the random start dropped")
    pixels: int | None = Field(None, description="ops: pixels set per class")
    steps: int | None = Field(None, description="em: PGD steps per round")
    step_size: float | None = Field(None, description="em: PGD step in /255 levels")
    rounds: int | None = Field(None, description="em: most rounds")
    train_steps: int | None = Field(None, description="em: surrogate SGD steps per round")
    stop_acc: float | None = Field(None, description="em: stop once the surrogate's accuracy exceeds this")
    batch_size: int | None = Field(None, description="em: batch size")
    lr: float | None = Field(None, description="em: surrogate learning rate")
    width: int | None = Field(None, description="em: surrogate width")
    device: str | None = Field(None, description="em: torch device (default auto: cuda when available)")

    def method_options(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in METHOD_KEYS if getattr(self, k) is not None}

    @model_validator(mode="after")
    def _applies(self):
        method_params(self.method, self.method_options())  # ValueError naming what the method takes
        return self


@register("protect", requires={"torch": "purify", "PIL": "purify"})
class Protect(Stage[ProtectParams]):
    """Protect images with an availability attack (classwise noise, LSP, AR, OPS, EM); bad rows are quarantined."""

    reads = (ID_COL, "image", "label")
    inputs: ClassVar[dict[str, ArtifactType]] = {"data": ArtifactType.DATASET, "strength": ArtifactType.REPORT}
    optional_inputs: ClassVar[frozenset[str]] = frozenset({"strength"})
    output: ClassVar[ArtifactType] = ArtifactType.DATASET
    resources: ClassVar[Resources] = Resources(num_cpus=1)

    def columns_written(self) -> tuple[str, ...] | None:
        return None  # every input column passes through (plus image/protection/clean_image): unknown here

    def run(self, inputs: dict[str, Artifact], ctx: RunContext) -> DatasetArtifact:
        import ray
        import ray.data

        data = inputs["data"]
        refs = data.ds.to_arrow_refs()  # type: ignore[union-attr]
        tables = [t for t in ray.get(refs) if t.num_rows]
        table = pa.concat_tables(tables, promote_options="default") if tables else pa.table({})
        p = with_strength(self.params, inputs.get("strength"), ctx.node_id)
        seed = ctx.seed if p.seed is None else p.seed
        out, live_rows, budget = protect_table(table, p, ctx.node_id, seed)
        ctx.event("protected", method=p.method, rows=live_rows, quarantined=out.num_rows - live_rows, **budget)
        blocks = [out.slice(i, ROWS_PER_BLOCK) for i in range(0, out.num_rows, ROWS_PER_BLOCK)] or [out]
        return DatasetArtifact(ray.data.from_arrow(blocks), rows=live_rows)


def with_strength(p: ProtectParams, strength: Artifact | None, node: str) -> ProtectParams:
    """``p`` with the budget chosen by a ``choose_protection`` Report (when wired) in place of its own."""
    if strength is None:
        return p
    metrics = getattr(strength, "metrics", None) or {}
    chosen = metrics.get("chosen")
    if not isinstance(chosen, dict) or "method" not in chosen:
        raise ValueError(f"node {node!r}: the `strength` Report has no chosen protection "
                         "(wire a choose_protection node to it)")
    if chosen["method"] != p.method:
        raise ValueError(f"node {node!r}: `strength` chose for method {chosen['method']!r}, "
                         f"but this node protects with {p.method!r}")
    budget = {k: None for k in METHOD_KEYS if k in ("eps", "l2", "pixels")}
    return ProtectParams.model_validate({**p.model_dump(), **budget, **chosen.get("options", {})})


def _label_ok(label: Any, num_classes: int) -> bool:
    try:
        return label is not None and int(label) == label and 0 <= int(label) < num_classes
    except (TypeError, ValueError):
        return False


def protect_table(table: pa.Table, p: ProtectParams, node: str, seed: int) -> tuple[pa.Table, int, dict[str, Any]]:
    """Protect every good row of ``table``; returns (live rows + error tombstones, live count,
    the measured budget).  Ray-free, so tests call it directly."""
    missing = [c for c in (ID_COL, "image", "label") if c not in table.column_names]
    if missing and table.num_rows == 0:  # nothing came (e.g. all filtered upstream): nothing to protect
        empty = np.zeros((0, *p.image_size), np.uint8)
        return combine(pa.table({ID_COL: pa.array([], pa.string())}), None), 0, measure_budget(empty, empty)
    if missing:
        raise ValueError(f"node {node!r}: input lacks columns {missing} (has {table.column_names})")
    if table.num_rows:
        table = table.take(pc.sort_indices(table, [(ID_COL, "ascending")]))
    ids = [str(i) for i in table.column(ID_COL).to_pylist()]
    blobs = table.column("image").to_pylist()
    labels = table.column("label").to_pylist()
    good, arrays, dead_ids, reasons, details = [], [], [], [], []
    for i, (rid, blob, label) in enumerate(zip(ids, blobs, labels)):
        if not _label_ok(label, p.num_classes):
            dead_ids.append(rid)
            reasons.append("bad_label")
            details.append(f"row {rid!r}: label {label!r} is outside [0, {p.num_classes})")
            continue
        try:
            arrays.append(decode_image(blob, rid, tuple(p.image_size), p.mode))
        except ValueError as exc:  # its message names the row and the problem
            dead_ids.append(rid)
            reasons.append("bad_image")
            details.append(str(exc))
            continue
        good.append(i)
    live = table.take(pa.array(good, pa.int64()))
    clean = np.stack(arrays) if arrays else np.zeros((0, *p.image_size), np.uint8)
    y = np.asarray([int(labels[i]) for i in good], dtype=np.int64)
    protected = protect_images(p.method, clean, y, p.num_classes, p.method_options(), seed) if len(good) else clean
    budget = measure_budget(clean, protected)
    image_idx = live.schema.get_field_index("image")
    clean_col = live.column("image")
    live = live.set_column(image_idx, "image", pa.array(encode_pngs(protected), pa.binary()))
    live = live.append_column("protection", pa.array([p.method] * live.num_rows, pa.string()))
    if p.keep_clean:
        live = live.append_column("clean_image", clean_col.cast(pa.binary()))
    dead = tombstones(dead_ids, node, reasons, details) if dead_ids else None
    return combine(live, dead), live.num_rows, budget
