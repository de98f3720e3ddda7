"""Labelled image rows -> uint8 arrays, the input side of ``train_classifier``, ``evaluate_classifier``
and ``purification_quality``.

Why a module of its own: the three ops each pull a small labelled image set (70k 28x28 images
are 55 MB) to the driver and decode it once, and they must agree on the order (by id, so a seed
gives the same model whatever order Ray delivered the blocks in) and on the error for a bad row
(a ValueError naming it: a result computed on silently fewer rows would be wrong, not smaller).
Numpy and Arrow only, no torch, so measuring PSNR does not load it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from raypress.artifacts import Artifact
from raypress.image_codecs import decode_image
from raypress.schema import ID_COL


@dataclass
class LabelledImages:
    """Decoded rows, sorted by id: ``images`` uint8 (N, H, W), ``labels`` int64 (N,)."""

    ids: list[str]
    images: np.ndarray
    labels: np.ndarray

    def label_counts(self) -> dict[str, int]:
        return {str(k): int(v) for k, v in sorted(Counter(self.labels.tolist()).items())}


def decode_table(table: pa.Table, image_key: str, label_key: str, image_size: tuple[int, int],
                 num_classes: int) -> LabelledImages:
    """Every row of ``table`` decoded, in id order (so a seed gives the same model whatever order
    Ray delivered the blocks in); a bad image or label raises ValueError naming the row."""
    missing = [c for c in (ID_COL, image_key, label_key) if c not in table.column_names]
    if missing:
        raise ValueError(f"the input lacks columns {missing} (it has {table.column_names})")
    if table.num_rows:
        table = table.take(pc.sort_indices(table, [(ID_COL, "ascending")]))
    ids = [str(i) for i in table.column(ID_COL).to_pylist()]
    images = np.zeros((len(ids), *image_size), np.uint8)
    labels = np.zeros(len(ids), np.int64)
    for i, (rid, blob, label) in enumerate(zip(ids, table.column(image_key).to_pylist(),
                                               table.column(label_key).to_pylist())):
        if isinstance(label, bool) or not isinstance(label, (int, np.integer)) or not 0 <= label < num_classes:
            raise ValueError(f"row {rid!r}: label {label!r} is not an integer in [0, {num_classes})")
        images[i] = decode_image(blob, rid, tuple(image_size), "L")
        labels[i] = int(label)
    return LabelledImages(ids, images, labels)


def gather_rows(data: Artifact, image_key: str, label_key: str, image_size: tuple[int, int],
                num_classes: int) -> LabelledImages:
    """A Dataset artifact's rows, pulled to the driver as Arrow and decoded (small image sets only)."""
    import ray

    # The columns are picked here rather than by a select_columns task: on an already materialized
    # input that task was most of the gathering time (a Ray Data execution for a projection).
    columns = [ID_COL, image_key, label_key]
    tables = [t.select([c for c in columns if c in t.column_names])
              for t in ray.get(data.ds.to_arrow_refs()) if t.num_rows]  # type: ignore[union-attr]
    table = pa.concat_tables(tables, promote_options="default") if tables else pa.table(
        {ID_COL: pa.array([], pa.string()), image_key: pa.array([], pa.binary()),
         label_key: pa.array([], pa.int64())})
    return decode_table(table, image_key, label_key, image_size, num_classes)
