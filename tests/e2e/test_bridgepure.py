"""pipelines/bridgepure.yaml end to end on a small slice of real Fashion-MNIST: the shipped YAML with
every node kept and its sizes shrunk by ``--set`` (200 protected images, the 1,000-image leak, 500
test images, tiny U-Nets and classifiers trained in Ray Train's local mode). It checks the wiring
and the bookkeeping — every node runs, the ledger adds up, the report has every row, the sweep, the
probes, the steps curve, the validation-chosen strength, the figures — not the accuracies, which need the full-size run (README)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from raypress.dag.runner import run_pipeline
from raypress.operators.io.idx_images import dataset_files

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]
REPO = Path(__file__).resolve().parents[2]

SMALL = [
    "train_images.offset=9800", "train_images.limit=1200",  # 9,800-9,999 protected, 10,000-10,999 leaked
    "clean_set.offset=9800", "clean_set.limit=200", "test_set.limit=500", "validation_set.limit=100",
    "strength.width=4", "strength.epochs=1", "strength.batch_size=64",
    "bridge_*.steps=20", "bridge_*.batch_size=8", "bridge_*.base_channels=8", "bridge_*.norm_groups=4",
    "bridge_*.num_workers=0", "bridge_*.log_every=10",
    "purify_*.steps=2",
    "clf_*.width=4", "clf_*.epochs=1", "clf_*.batch_size=64", "clf_*.num_workers=0", "clf_leaked_*.steps=4",
]


def test_bridgepure_pipeline_small(ray_session, tmp_path):
    try:
        dataset_files("fashion-mnist-train")
    except FileNotFoundError as error:
        pytest.skip(str(error))
    events: list[dict] = []
    ledger = run_pipeline(str(REPO / "pipelines" / "bridgepure.yaml"), run_dir=str(tmp_path / "run"),
                          overrides=SMALL, on_event=events.append)
    assert ledger["adds_up"], ledger["problems"]
    nodes = ledger["nodes"]
    assert nodes["protected_set"]["rows_in"] == 1200 and nodes["protected_set"]["rows_out"] == 200
    assert nodes["leaked_pairs"]["rows_out"] == 1000

    report = json.loads(Path(nodes["report"]["artifact"]).read_text())
    names = [row["name"] for row in report["table"]]
    assert names[:15] == ["clean", "leaked-only", "protected", "jpeg", "bit-depth", "gaussian-blur", "median",
                          "one-step", "bridgepure", "bridgepure-det", "bridgepure-6", "bridgepure-12",
                          "bridgepure-24", "bridgepure-churn-0.8", "bridgepure+leaked"]
    assert not any(n.startswith("probe-") for n in names)  # probes are reported on their own
    for row in report["table"]:
        assert 0 <= row["accuracy_mean"] <= 1 and len(row["accuracy"]) == 3  # three seeds each
    psnr = {row["name"]: row["psnr_mean"] for row in report["table"]}
    assert psnr["protected"] is not None and psnr["jpeg"] is not None and psnr["clean"] is None
    assert [pt["pairs"] for pt in report["sweep"]] == [100, 250, 500, 1000]
    assert [p["name"] for p in report["probes"]] == ["probe-classwise-8", "probe-lsp-6", "probe-lsp-classwise-64",
                                                     "probe-ops", "probe-ar"]
    # the curve's calls come from the report's steps_curve param (the shipped 6/12/24/40 and 40 at churn 0)
    assert [(c["name"], c["nfe"]) for c in report["steps_curve"]] == [
        ("bridgepure-6", 17), ("bridgepure-12", 35), ("bridgepure-24", 71), ("bridgepure", 119), ("bridgepure-det", 79)]
    strength = report["strength"]
    assert strength["validation_rows"] == 100 and strength["train_rows"] == 200
    assert strength["chosen"]["method"] == "lsp" and len(strength["candidates"]) == 4
    assert nodes["protected_all"]["rows_out"] == 1200
    verdict = report["verdict"]
    assert verdict["validated"] == (verdict["protected_drop"] >= 0.25)
    assert (verdict["holds"] is None) == (not verdict["validated"])
    for figure in ("examples", "sweep", "steps"):
        assert Path(report["figures"][figure]).stat().st_size > 1000
    assert Path(report["markdown"]).read_text().startswith("BridgePure on LSP")

    trained = [e for e in events if e.get("event") == "train_data"]
    assert {e["pairs"] for e in trained if "pairs" in e} == {100, 250, 500, 1000}
    leaked_rows = {e["node"]: e["rows"] for e in trained if e["node"].startswith("clf_leaked_")}
    assert leaked_rows == {"clf_leaked_100": 100, "clf_leaked_250": 250, "clf_leaked_500": 500,
                           "clf_leaked_1000": 1000}
    union = next(e for e in trained if e["node"] == "clf_bridgepure_union")
    assert union["rows"] == 200 + 500
