"""``bridgepure_report`` (verdict, table, sweep, probes, figures) and ``purification_quality``'s numbers,
from hand-made Reports: no Ray, no training."""

from __future__ import annotations

import json
import textwrap

import numpy as np
import pytest

from raypress.artifacts import ReportArtifact
from raypress.dag.validate import PipelineInvalid, load_pipeline
from raypress.operators.base import RunContext
from raypress.operators.purification.bridgepure_report import BridgePureReport, judge_claim

ACC = {"clean": (0.88, 0.01), "leaked-only": (0.75, 0.01), "protected": (0.30, 0.02), "jpeg": (0.70, 0.01),
       "bit-depth": (0.50, 0.03), "gaussian-blur": (0.60, 0.01), "median": (0.65, 0.01), "one-step": (0.84, 0.01),
       "bridgepure": (0.85, 0.01), "bridgepure-100": (0.80, 0.02), "leaked-only-100": (0.62, 0.02),
       "probe-classwise-8": (0.87, 0.01)}


def result(tmp_path, name: str, mean: float, std: float) -> ReportArtifact:
    art = ReportArtifact(str(tmp_path / "in" / f"{name}.json"),
                         {"name": name, "accuracy_mean": mean, "accuracy_std": std, "seeds": [0, 1, 2],
                          "accuracy": {"0": mean, "1": mean, "2": mean}, "train_rows": 10000})
    art.save()
    return art


def quality(tmp_path, name: str, psnr: float, with_protected: bool) -> ReportArtifact:
    rng = np.random.default_rng(len(name))
    arrays = {"ids": np.array([f"r{i}" for i in range(4)]), "clean": rng.integers(0, 255, (4, 28, 28), np.uint8),
              "image": rng.integers(0, 255, (4, 28, 28), np.uint8), "labels": np.arange(4)}
    if with_protected:
        arrays["protected"] = rng.integers(0, 255, (4, 28, 28), np.uint8)
    path = tmp_path / "in" / f"{name}.npz"
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, **arrays)
    art = ReportArtifact(str(tmp_path / "in" / f"q-{name}.json"), {"name": name, "psnr_mean": psnr,
                                                                    "examples": str(path)})
    art.save()
    return art


def params(**over):
    base = dict(protection="LSP, eps 32/255", baselines=["jpeg", "bit-depth", "gaussian-blur", "median"],
                sweep=[{"pairs": 100, "bridgepure": "bridgepure-100", "leaked_only": "leaked-only-100"},
                       {"pairs": 500, "bridgepure": "bridgepure", "leaked_only": "leaked-only"}],
                probes=[{"name": "probe-classwise-8", "protection": "class-wise, eps 8/255"}])
    return BridgePureReport.Params(**{**base, **over})


def rows(**changes):
    return {n: {"accuracy_mean": changes.get(n, m), "accuracy_std": s} for n, (m, s) in ACC.items()}


def test_the_claim_holds_when_every_part_holds():
    v = judge_claim(rows(), params())
    assert v["validated"] and v["protected_drop"] == pytest.approx(0.58)
    assert v["within_of_clean"] and v["gap_to_clean"] == pytest.approx(0.03)
    assert v["above_every_baseline"] and v["best_baseline"] == "jpeg"
    assert v["clearly_above_leaked_only"] and v["above_leaked_only_by"] == pytest.approx(0.10)
    assert v["holds"] is True
    # one-step 0.84 vs 0.85, both +-0.01: a difference inside the spread says neither wins
    assert not v["bridge_beats_one_step"] and not v["one_step_beats_bridge"]


@pytest.mark.parametrize("changes, failed", [
    ({"bridgepure": 0.82}, "within_of_clean"),  # 6 points below clean
    ({"jpeg": 0.86}, "above_every_baseline"),
    ({"leaked-only": 0.82}, "clearly_above_leaked_only"),  # 3 points < the 5-point margin
])
def test_each_part_of_the_claim_can_fail_it(changes, failed):
    v = judge_claim(rows(**changes), params())
    assert v[failed] is False and v["holds"] is False


def test_an_unvalidated_protection_is_not_judged():
    v = judge_claim(rows(protected=0.70), params())
    assert v["validated"] is False and v["holds"] is None
    assert "only 18.0 points below clean (validation needs 25)" in v["why"]


def test_report_stage_writes_table_sweep_probes_and_figures(tmp_path):
    results = [result(tmp_path, n, m, s) for n, (m, s) in ACC.items()]
    qual = [quality(tmp_path, "protected", 20.0, False), quality(tmp_path, "jpeg", 22.5, True),
            quality(tmp_path, "bridgepure", 27.25, True)]
    events: list[dict] = []
    ctx = RunContext(run_dir=str(tmp_path / "run"), node_id="report", emit=events.append)
    report = BridgePureReport(params()).run({"results": results, "quality": qual}, ctx)
    m = json.loads((tmp_path / "run" / "reports" / "report" / "report.json").read_text())
    assert m == report.metrics | {"verdict": m["verdict"]} and m["verdict"]["holds"] is True
    assert [r["name"] for r in m["table"]][:3] == ["clean", "leaked-only", "protected"]
    assert "probe-classwise-8" not in [r["name"] for r in m["table"]]
    assert m["probes"] == [{"name": "probe-classwise-8", "protection": "class-wise, eps 8/255",
                            "accuracy_mean": 0.87, "accuracy_std": 0.01, "drop": pytest.approx(0.01),
                            "validated": False}]
    assert m["sweep"][0] == {"pairs": 100, "bridgepure": {"name": "bridgepure-100", "mean": 0.80, "std": 0.02},
                             "leaked_only": {"name": "leaked-only-100", "mean": 0.62, "std": 0.02}}
    table = (tmp_path / "run" / "reports" / "report" / "table.md").read_text()
    assert "| bridgepure | 85.0 ± 1.0 | 3 | 10000 | 27.25 |" in table and "| clean | 88.0 ± 1.0 | 3 | 10000 | — |" in table
    for name in ("examples", "sweep"):
        with open(m["figures"][name], "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    assert events[-1]["event"] == "bridgepure_report" and events[-1]["holds"] is True


def test_missing_or_duplicate_rows_are_named(tmp_path):
    ctx = RunContext(run_dir=str(tmp_path / "run"), node_id="report")
    some = [result(tmp_path, n, m, s) for n, (m, s) in ACC.items() if n not in ("jpeg", "median")]
    with pytest.raises(ValueError, match=r"no result named \['jpeg', 'median'\] among the `results` inputs"):
        BridgePureReport(params()).run({"results": some}, ctx)
    twice = [result(tmp_path, n, m, s) for n, (m, s) in ACC.items()] + [result(tmp_path, "clean", 0.1, 0.0)]
    with pytest.raises(ValueError, match="two `results` Reports are named 'clean'"):
        BridgePureReport(params()).run({"results": twice}, ctx)


PIPE = textwrap.dedent("""\
    nodes:
      - {id: test, op: idx_images, with: {dataset: fashion-mnist-test}}
      - {id: clf, op: train_classifier, input: test}
      - {id: ev_a, op: evaluate_classifier, input: {data: test, model: clf}, with: {name: clean}}
      - {id: ev_b, op: evaluate_classifier, input: {data: test, model: clf}, with: {name: protected}}
      - id: report
        op: bridgepure_report
        input: {results: [ev_a, ev_b]}
        with: {protection: x}
      - id: bad
        op: evaluate_classifier
        input: {data: test, model: [clf, clf]}
    """)


def test_a_list_of_reports_is_accepted_only_where_the_op_takes_one(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text(PIPE)
    with pytest.raises(PipelineInvalid) as info:
        load_pipeline(path)
    (problem,) = info.value.problems
    assert problem.node == "bad" and "input 'model' takes one Model, got a list" in problem.message
    path.write_text(PIPE.split("  - id: bad")[0])
    vp = load_pipeline(path)
    assert vp.nodes["report"].slots["results"] == ["ev_a", "ev_b"]


def test_steps_curve_strength_and_the_one_step_ablation_note(tmp_path):
    extra = {"bridgepure-6": (0.80, 0.02), "bridgepure-det": (0.86, 0.01)}
    results = [result(tmp_path, n, m, s) for n, (m, s) in {**ACC, **extra}.items()]
    qual = [quality(tmp_path, "bridgepure", 27.25, True), quality(tmp_path, "bridgepure-6", 21.0, True)]
    strength = ReportArtifact(str(tmp_path / "in" / "strength.json"), {
        "method": "lsp", "chosen": {"method": "lsp", "options": {"l2": 3.5}}, "reached": True,
        "clean_accuracy": 0.86, "min_drop": 0.25, "train_rows": 1500, "validation_rows": 1000,
        "candidates": [{"options": {"l2": 0.66}, "accuracy_mean": 0.85, "drop": 0.01,
                        "budget": {"l2_mean": 0.6, "linf": 9}},
                       {"options": {"l2": 3.5}, "accuracy_mean": 0.6, "drop": 0.26,
                        "budget": {"l2_mean": 3.2, "linf": 40}}]})
    ctx = RunContext(run_dir=str(tmp_path / "run"), node_id="report", emit=lambda e: None)
    curve = [{"steps": 40, "name": "bridgepure"}, {"steps": 40, "churn": 0.0, "name": "bridgepure-det"},
             {"steps": 6, "name": "bridgepure-6"}]
    report = BridgePureReport(params(steps_curve=curve)).run(
        {"results": results, "quality": qual, "strength": strength}, ctx)
    m = report.metrics
    assert [(c["name"], c["nfe"], c["psnr_mean"]) for c in m["steps_curve"]] == [
        ("bridgepure-6", 17, 21.0), ("bridgepure", 119, 27.25), ("bridgepure-det", 79, None)]
    assert m["strength"]["chosen"]["options"] == {"l2": 3.5}
    table = (tmp_path / "run" / "reports" / "report" / "table.md").read_text()
    assert "| bridgepure-det | 40 | 0.0 | 79 | 86.0 ± 1.0 | — |" in table
    assert "`one-step` is an ablation added here" in table and "not a baseline of the paper" in table
    assert "**{'l2': 3.5}**" in table and "| {'l2': 0.66} | 85.0 | 1.0 | 0.600 | 9 |" in table
    assert open(m["figures"]["steps"], "rb").read(4) == b"\x89PNG"
    with pytest.raises(ValueError, match="no result named \\['bridgepure-12'\\]"):
        BridgePureReport(params(steps_curve=[{"steps": 12, "name": "bridgepure-12"}])).run(
            {"results": results}, ctx)
