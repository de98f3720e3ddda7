"""``reasoning_report``: the paper-style table (Mulberry Table 2/4) from ``comcts_search`` rows.

Per run: questions, success rate with a percentile-bootstrap 95% interval (resampling questions),
mean model calls and rounds over all questions and over the solved ones, tokens, failed calls,
the share of solved paths that contain a step the exact checker calls wrong, *sound* success
(solved by a path whose every step the exact checker accepts: a right final answer reached by
wrong arithmetic is a lucky guess, common where answers are small integers, and worthless as SFT
data) with its own interval, and success per family. An ``ablation`` list of run names (e.g. CoMCTS with 1, 2, 3 policies) is reported in
order. Evaluation Reports (``evaluate_reasoning``: before / after SFT, after SFT with reflection,
the compute-matched control) and the leakage check (``question_overlap``) are folded in when given.

Model judges: per run, the judges' per-step agreement with the exact checker (precision / recall
of "wrong", per judge and for the collective score). Claims: each Mulberry claim is a pair
(claimed better, other), of search runs (paired by question) or of evaluations (paired by policy and
held-out question); the paired bootstrap 95% interval of the difference gives a machine verdict:
holds (interval above 0), fails (below 0), inconclusive (covers 0). Read "search vs best-of-n" with
its asymmetry: CoMCTS and independent sampling stop at the first path whose answer the ground truth
accepts (as Mulberry's search does to build training data), best-of-n must pick without it.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from raypress.artifacts import Artifact, ReportArtifact
from raypress.operators.base import Params, Resources, RunContext, Stage
from raypress.operators.reasoning.stats.bootstrap import bootstrap_interval, paired_bootstrap, verdict
from raypress.operators.reasoning.search.comcts import precision_recall
from raypress.operators.registry import register
from raypress.operators.shared.claims_table import claims_table
from raypress.schema import ArtifactType


EVALUATIONS = ("before", "after", "after_reflection", "control")


class ClaimSpec(BaseModel):
    """One claim: ``better`` beats ``other``, both search runs or both evaluation slots (``eval:<slot>``)."""

    model_config = ConfigDict(extra="forbid")

    claim: str
    better: str
    other: str


class ReasoningReportParams(Params):
    ablation: list[str] = Field(default_factory=list, description="run names, in order, for the ablation table")
    claims: list[ClaimSpec] = Field(default_factory=list, description="claims with a machine verdict each")
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
        "judges": json.loads(rows[0].get("judges") or "[]"),
        "judge_calls_mean": _mean([r.get("judge_calls", 0) for r in rows]),
        "judge_agreement": judge_agreement(rows),
        "success_by_family": {f: float(np.mean(v)) for f, v in sorted(families.items())},
        "sound_success_by_family": {f: float(np.mean(v)) for f, v in sorted(sound_families.items())},
    }


def judge_agreement(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Summed per-step agreement counts of the rows' ``judge_audit`` -> precision/recall of "wrong"."""
    total: dict[str, dict[str, int]] = {}
    for r in rows:
        for name, c in json.loads(r.get("judge_audit") or "{}").items():
            t = total.setdefault(name, {"tp": 0, "fp": 0, "fn": 0, "tn": 0})
            for k in t:
                t[k] += int(c.get(k, 0))
    return {name: precision_recall(c) for name, c in sorted(total.items())}


def run_outcomes(rows: list[dict[str, Any]]) -> dict[str, int]:
    return {str(r["task_id"]): int(bool(r["solved"])) for r in rows}


def eval_outcomes(metrics: dict[str, Any]) -> dict[str, int]:
    """(policy, question) -> correct, over every policy of an evaluation Report."""
    return {f"{name}/{task}": int(v) for name, res in metrics.get("policies", {}).items()
            for task, v in res.get("outcomes", {}).items()}


def judge_claim(claim: ClaimSpec, a: dict[str, int], b: dict[str, int], resamples: int,
                rng: np.random.Generator) -> dict[str, Any]:
    """The paired difference (better - other) on the keys both have, its interval and verdict."""
    keys = sorted(set(a) & set(b))
    diff, low, high = paired_bootstrap(np.array([a[k] for k in keys]), np.array([b[k] for k in keys]), resamples, rng)
    return {"claim": claim.claim, "better": claim.better, "other": claim.other, "paired": len(keys),
            "better_rate": float(np.mean([a[k] for k in keys])) if keys else None,
            "other_rate": float(np.mean([b[k] for k in keys])) if keys else None,
            "difference": diff, "ci95": [low, high], "verdict": verdict(low, high)}


def judges_table(table: list[dict[str, Any]]) -> str:
    head = "| run | judge | steps | precision (wrong) | recall (wrong) | agreement |\n|---|---|---|---|---|---|\n"
    body = ""
    for line in table:
        for name, a in line["judge_agreement"].items():
            f = [("–" if a[k] is None else f"{a[k]:.2f}") for k in ("precision_wrong", "recall_wrong", "agreement")]
            body += f"| {line['run']} | {name} | {a['steps']} | {f[0]} | {f[1]} | {f[2]} |\n"
    return head + body


def markdown_table(lines: list[dict[str, Any]]) -> str:
    head = ("| run | method | policies | judges | n | success (95% CI) | sound success (95% CI) | calls (all / solved) "
            "| judge calls | rounds (all / solved) | tokens | solved with a wrong step |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|---|\n")

    def f(x: float | None, digits: int = 2) -> str:
        return "–" if x is None else f"{x:.{digits}f}"

    body = ""
    for s in lines:
        wrong = s["solved_with_wrong_step_rate"]
        judges = ", ".join(s.get("judges") or []) if s["method"] in ("comcts", "best_of_n") else "–"
        body += (f"| {s['run']} | {s['method']} | {', '.join(s['policies'])} | {judges} | {s['questions']} | "
                 f"{100 * s['success_rate']:.1f}% ({100 * s['ci95'][0]:.1f}–{100 * s['ci95'][1]:.1f}) | "
                 f"{100 * s['sound_success_rate']:.1f}% ({100 * s['sound_ci95'][0]:.1f}–{100 * s['sound_ci95'][1]:.1f}) | "
                 f"{f(s['calls_mean'])} / {f(s['calls_mean_solved'])} | {f(s.get('judge_calls_mean'))} | "
                 f"{f(s['rounds_mean'])} / "
                 f"{f(s['rounds_mean_solved'])} | {f(s['tokens_mean'], 0)} | "
                 f"{'–' if wrong is None else f'{100 * wrong:.1f}%'} |\n")
    return head + body


@register("reasoning_report")
class ReasoningReport(Stage[ReasoningReportParams]):
    """The Mulberry-style table from comcts_search rows: success with bootstrap 95% CIs, calls, rounds, tokens, ablation."""

    inputs: ClassVar[dict[str, ArtifactType]] = {
        "data": ArtifactType.DATASET, "before": ArtifactType.REPORT, "after": ArtifactType.REPORT,
        "after_reflection": ArtifactType.REPORT, "control": ArtifactType.REPORT, "leakage": ArtifactType.REPORT,
    }
    optional_inputs: ClassVar[frozenset[str]] = frozenset({*EVALUATIONS, "leakage"})
    output: ClassVar[ArtifactType] = ArtifactType.REPORT
    resources: ClassVar[Resources] = Resources(num_cpus=0)

    def _claim(self, claim: ClaimSpec, by_run: dict[str, list[dict[str, Any]]], evaluation: dict[str, Any],
               rng: np.random.Generator, node_id: str) -> dict[str, Any]:
        sides = []
        for name in (claim.better, claim.other):
            if name.startswith("eval:"):
                slot = name.split(":", 1)[1]
                if slot not in evaluation:
                    raise ValueError(f"node {node_id!r}: claim {claim.claim!r} names {name} but input {slot!r} "
                                     f"is missing (have {sorted(evaluation)})")
                sides.append(eval_outcomes(evaluation[slot]))
            elif name in by_run:
                sides.append(run_outcomes(by_run[name]))
            else:
                raise ValueError(f"node {node_id!r}: claim {claim.claim!r} names unknown run {name!r} "
                                 f"(runs: {sorted(by_run)})")
        return judge_claim(claim, sides[0], sides[1], self.params.bootstrap, rng)

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
        evaluation = {slot: inputs[slot].metrics for slot in EVALUATIONS  # type: ignore[union-attr]
                      if slot in inputs}
        claims = [self._claim(c, by_run, evaluation, rng, ctx.node_id) for c in p.claims]
        leakage = inputs["leakage"].metrics if "leakage" in inputs else None  # type: ignore[union-attr]
        metrics = {"table": table, "ablation": [by_name[n] for n in p.ablation], "evaluation": evaluation,
                   "claims": claims, "leakage_overlap": leakage["overlap"] if leakage else None,
                   "sft_steps": {slot: (evaluation[slot].get("sft") or {}).get("steps") for slot in evaluation},
                   "bootstrap_resamples": p.bootstrap}
        markdown = markdown_table(table)
        if p.ablation:
            markdown += "\nAblation\n\n" + markdown_table(metrics["ablation"])
        if any(line["judge_agreement"] for line in table):
            markdown += "\nJudges vs the exact checker (per step; positive = wrong)\n\n" + judges_table(table)
        if claims:
            markdown += ("\nMulberry's claims (paired bootstrap 95% CI of the difference; search and sampling "
                         "stop on the ground-truth answer check, best-of-n picks without it)\n\n" + claims_table(claims))
        if leakage is not None:
            markdown += (f"\nEvaluated questions also in training/SFT/dev data: {leakage['overlap']} "
                         f"(of {leakage['evaluated']})\n")
        md_path = ctx.path("reports", ctx.node_id, "table.md")
        md_path.write_text(markdown)
        metrics["markdown"] = str(md_path)
        report = ReportArtifact(str(ctx.path("reports", ctx.node_id, "report.json")), metrics)
        report.save()
        return report
