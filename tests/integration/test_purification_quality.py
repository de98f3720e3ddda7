"""``purification_quality`` on a Ray Dataset: PSNR by hand, the example arrays joined to the
protected input by id, and a clear error when the clean twin is missing."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from raypress.artifacts import DatasetArtifact
from raypress.operators.base import RunContext
from raypress.image_codecs import encode_png
from raypress.operators.purification.purification_quality import PurificationQuality

pytestmark = pytest.mark.integration


def rows(images: list[np.ndarray], clean: list[np.ndarray] | None, ids: list[str]) -> DatasetArtifact:
    import ray.data

    columns = {"id": ids, "image": pa.array([encode_png(i) for i in images], pa.binary()),
               "label": pa.array([0, 1, 0][:len(ids)], pa.int64())}
    if clean is not None:
        columns["clean_image"] = pa.array([encode_png(i) for i in clean], pa.binary())
    table = pa.table(columns)
    return DatasetArtifact(ray.data.from_arrow([table.slice(1), table.slice(0, 1)]))  # blocks out of id order


def test_psnr_and_examples_by_hand(ray_session, tmp_path):
    clean = [np.full((28, 28), 100, np.uint8) for _ in range(3)]
    judged = [clean[0] + 10, clean[1] + 1, clean[2].copy()]  # MSE 100, 1, 0
    protected = [c + 32 for c in clean]
    ids = ["a", "b", "c"]
    stage = PurificationQuality(PurificationQuality.Params(name="bp", examples=2))
    ctx = RunContext(run_dir=str(tmp_path), node_id="q")
    report = stage.run({"data": rows(judged, clean, ids), "protected": rows(protected, None, ids)}, ctx)
    expected = [10 * np.log10(255**2 / 100), 10 * np.log10(255**2), 100.0]  # identical: the 100 dB cap
    assert report.metrics["psnr_mean"] == pytest.approx(np.mean(expected))
    assert report.metrics["psnr_per_class"] == pytest.approx({"0": (expected[0] + expected[2]) / 2,
                                                              "1": expected[1]})
    examples = np.load(report.metrics["examples"])
    assert examples["ids"].tolist() == ["a", "b"]
    assert np.array_equal(examples["protected"], np.stack(protected[:2]))
    assert np.array_equal(examples["image"], np.stack(judged[:2]))


def test_rows_without_a_clean_twin_are_refused(ray_session, tmp_path):
    img = [np.zeros((28, 28), np.uint8)]
    stage = PurificationQuality(PurificationQuality.Params())
    with pytest.raises(ValueError, match="node 'q': rows have no 'clean_image' column to compare with "
                                         r"\(protect with keep_clean: true keeps it\)"):
        stage.run({"data": rows(img, None, ["a"])}, RunContext(run_dir=str(tmp_path), node_id="q"))
