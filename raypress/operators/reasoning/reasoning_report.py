"""``reasoning_report``: the paper-style table (Mulberry Table 2/4) from ``comcts_search`` rows.

Per run: questions, success rate with a percentile-bootstrap 95% interval (resampling questions),
mean model calls and rounds over all questions and over the solved ones, tokens, failed calls,
the share of solved paths that contain a step the exact checker calls wrong, *sound* success
(solved by a path whose every step the exact checker accepts: a right final answer reached by
wrong arithmetic is a lucky guess, common where answers are small integers, and worthless as SFT
data) with its own interval, and success per family. An ``ablation`` list of run names (e.g. CoMCTS with 1, 2, 3 policies) is reported in
order. Evaluation Reports (``evaluate_reasoning``: before / after SFT) are folded in when given.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any, ClassVar

import numpy as np
from pydantic import Field

from raypress.artifacts import Artifact, ReportArtifact
from raypress.operators.base import Params, Resources, RunContext, Stage
from raypress.operators.reasoning.bootstrap import bootstrap_interval
from raypress.operators.registry import register
from raypress.schema import ArtifactType


class ReasoningReportParams(Params):
    ablation: list[str] = Field(default_factory=list, description="run names, in order, for the ablation table")
    bootstrap: int = Field(2000, ge=100, description="bootstrap resamples for the 95% intervals")
    seed: int = 0


def _mean(values: list[float]) -> float | None:
    return float(np.mean(values)) if values else None


def summarise_run(rows: list[dict[str, Any]], resamples: int, rng: np.random.Generator) -> dict[str, Any]:
    """One line of the table."""
    solved = np.array([bool(r["solved"]) for r in rows], dtype=float)
    low, high = bootstrap_interval(solved, resamples, rng)
    sound = np.array([bool(r["solved"]) and r.get("path_has_wrong_step") is False for r in rows], dtype=float)
    sound_low, sound_high = bootstrap_interval(sound, resamples, rng)
    solved_rows = [r for r in rows if r["solved"]]
    wrong_known = [r["path_has_wrong_step"] for r in solved_rows if r.get("path_has_wrong_step") is not None]
    families: dict[str, list[bool]] = defaultdict(list)
    sound_families: dict[str, list[bool]] = defaultdict(list)
    for r in rows:
        families[r["family"]].append(bool(r["solved"]))
        sound_families[r["family"]].append(bool(r["solved"]) and r.get("path_has_wrong_step") is False)
    failures: dict[str, int] = defaultdict(int)
    for r in rows:
        for name, count in json.loads(r.get("failures") or "{}").items():
            failures[name] += int(count)
    return {
        "run": rows[0]["run"], "method": rows[0]["method"], "policies": json.loads(rows[0]["policies"]),
        "questions": len(rows), "solved": int(solved.sum()), "success_rate": float(solved.mean()),
        "ci95": [low, high],
        "sound_success_rate": float(sound.mean()), "sound_ci95": [sound_low, sound_high],
        "calls_mean": _mean([r["calls"] for r in rows]), "calls_mean_solved": _mean([r["calls"] for r in solved_rows]),
        "rounds_mean": _mean([r["rounds"] for r in rows]),
        "rounds_mean_solved": _mean([r["rounds"] for r in solved_rows]),
        "tokens_mean": _mean([r["tokens"] for r in rows]),
        "failed_calls": dict(failures),
        "solved_with_wrong_step_rate": _mean([float(w) for w in wrong_known]),
        "solved_with_wrong_step_known": len(wrong_known),
        "reflective_paths": sum(1 for r in solved_rows if r.get("reflective_path")),
        "success_by_family": {f: float(np.mean(v)) for f, v in sorted(families.items())},
        "sound_success_by_family": {f: float(np.mean(v)) for f, v in sorted(sound_families.items())},
    }


def markdown_table(lines: list[dict[str, Any]]) -> str:
    head = ("| run | method | policies | n | success (95% CI) | sound success (95% CI) | calls (all / solved) "
            "| rounds (all / solved) | tokens | solved with a wrong step |\n|---|---|---|---|---|---|---|---|---|---|\n")

    def f(x: float | None, digits: int = 2) -> str:
        return "–" if x is None else f"{x:.{digits}f}"

    body = ""
    for s in lines:
        wrong = s["solved_with_wrong_step_rate"]
        body += (f"| {s['run']} | {s['method']} | {', '.join(s['policies'])} | {s['questions']} | "
                 f"{100 * s['success_rate']:.1f}% ({100 * s['ci95'][0]:.1f}–{100 * s['ci95'][1]:.1f}) | "
                 f"{100 * s['sound_success_rate']:.1f}% ({100 * s['sound_ci95'][0]:.1f}–{100 * s['sound_ci95'][1]:.1f}) | "
                 f"{f(s['calls_mean'])} / {f(s['calls_mean_solved'])} | {f(s['rounds_mean'])} / "
                 f"{f(s['rounds_mean_solved'])} | {f(s['tokens_mean'], 0)} | "
                 f"{'–' if wrong is None else f'{100 * wrong:.1f}%'} |\n")
    return head + body


@register("reasoning_report")
class ReasoningReport(Stage[ReasoningReportParams]):
    """The Mulberry-style table from comcts_search rows: success with bootstrap 95% CIs, calls, rounds, tokens, ablation."""

    inputs: ClassVar[dict[str, ArtifactType]] = {
        "data": ArtifactType.DATASET, "before": ArtifactType.REPORT, "after": ArtifactType.REPORT,
        "after_reflection": ArtifactType.REPORT,
    }
    optional_inputs: ClassVar[frozenset[str]] = frozenset({"before", "after", "after_reflection"})
    output: ClassVar[ArtifactType] = ArtifactType.REPORT
    resources: ClassVar[Resources] = Resources(num_cpus=0)

    def run(self, inputs: dict[str, Artifact], ctx: RunContext) -> ReportArtifact:
        p = self.params
        rows = inputs["data"].ds.drop_columns(["tree", "sft"]).take_all()  # type: ignore[union-attr]
        by_run: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for row in rows:
            by_run[row["run"]].append(row)
        missing = [name for name in p.ablation if name not in by_run]
        if missing:
            raise ValueError(f"node {ctx.node_id!r}: ablation runs {missing} are not in the input "
                             f"(runs: {sorted(by_run)})")
        rng = np.random.default_rng(p.seed)
        table = [summarise_run(run_rows, p.bootstrap, rng) for run_rows in by_run.values()]
        by_name = {line["run"]: line for line in table}
        evaluation = {slot: inputs[slot].metrics for slot in ("before", "after", "after_reflection")  # type: ignore[union-attr]
                      if slot in inputs}
        metrics = {"table": table, "ablation": [by_name[n] for n in p.ablation], "evaluation": evaluation,
                   "bootstrap_resamples": p.bootstrap}
        markdown = markdown_table(table)
        if p.ablation:
            markdown += "\nAblation\n\n" + markdown_table(metrics["ablation"])
        md_path = ctx.path("reports", ctx.node_id, "table.md")
        md_path.write_text(markdown)
        metrics["markdown"] = str(md_path)
        report = ReportArtifact(str(ctx.path("reports", ctx.node_id, "report.json")), metrics)
        report.save()
        return report
