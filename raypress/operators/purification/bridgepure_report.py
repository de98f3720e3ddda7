"""``bridgepure_report``: the BridgePure table for one protection, and the verdict on the paper's claim.

Inputs are the ``evaluate_classifier`` Reports of every row (each names itself with ``name``) and,
optionally, the ``purification_quality`` Reports (PSNR to clean, example arrays). The params say
which row plays which part, so the stage judges rather than guesses:

- **validation**: the protection counts only when the classifier trained on protected data is at
  least ``min_drop`` (default 25 points) below the clean one. Otherwise the claim is not
  evaluated: purifying data nobody needed to purify proves nothing. ``probes`` are further
  protected rows (other methods or budgets) judged the same way, so the report says which
  budgets failed.
- **the claim** (BridgePure, NeurIPS 2025, at this scale): protected much worse than clean;
  BridgePure within ``within`` (5 points) of clean; above every input-transformation baseline;
  clearly above leaked-only (by ``clear_margin`` and by more than both rows' std); and, reported
  separately, whether the diffusion bridge beats the one-step supervised inverse (an ablation
  added here, not one of the paper's baselines).
- **sweep**: accuracy against the number of leaked pairs (BridgePure and leaked-only per count).
- **steps**: accuracy and PSNR against the sampler's network calls (NFE = steps x 3 - 1 with
  churn, steps x 2 - 1 without: DDBM's hybrid sampler), e.g. 6 / 12 / 24 / 40 steps (the paper
  samples 40) and a deterministic row (churn 0).
- **strength**: the optional ``choose_protection`` Report, so the table says which budget was
  used and that validation (not the test set) chose it.

Outputs: ``report.json``, ``table.md``, ``examples.png`` (clean | protected | each purified set on
the same images) and ``sweep.png``.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from raypress.artifacts import Artifact, ReportArtifact
from raypress.operators.base import Params, Resources, RunContext, Stage
from raypress.operators.registry import register
from raypress.schema import ArtifactType


class SweepPoint(BaseModel):
    model_config = ConfigDict(extra="forbid")
    pairs: int = Field(ge=1, description="leaked pairs the row was made with")
    bridgepure: str = Field(description="the BridgePure row trained on that many pairs")
    leaked_only: str | None = Field(None, description="the leaked-only row for that many pairs")


class StepsPoint(BaseModel):
    model_config = ConfigDict(extra="forbid")
    steps: int = Field(ge=1, description="sampler steps of the row")
    churn: float = Field(0.33, ge=0, lt=1, description="its churn_step_ratio (0: deterministic)")
    name: str = Field(description="the row (classifier on that sampler's output; its PSNR row has the same name)")


def sampler_calls(steps: int, churn: float) -> int:
    """Network calls of DDBM's hybrid sampler (``raypress.models.ddbm.sampler_nfe``, without torch):
    a churn Euler step (when churn > 0) and a Heun step per step, the last step Euler only."""
    return steps * (2 + (churn > 0)) - 1


class Probe(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(description="a protected row (classifier trained on that protection's output)")
    protection: str = Field(description="what it is, e.g. 'class-wise noise, eps 8/255'")


class BridgePureReportParams(Params):
    protection: str = Field(description="the protection this table is about, e.g. 'LSP, eps 32/255'")
    clean: str = Field("clean", description="row: trained on the clean protected-set images")
    protected: str = Field("protected", description="row: trained on the protected images")
    leaked_only: str = Field("leaked-only", description="row: trained on the leaked clean images only")
    bridgepure: str = Field("bridgepure", description="row: trained on BridgePure's purified images")
    one_step: str | None = Field("one-step", description="row: the one-step supervised inverse (an added "
                                                         "ablation, not a baseline of the paper)")
    baselines: list[str] = Field(default_factory=lambda: ["jpeg", "bit-depth", "gaussian-blur", "median"],
                                 description="rows: input-transformation baselines")
    sweep: list[SweepPoint] = Field(default_factory=list, description="accuracy vs leaked pairs")
    steps_curve: list[StepsPoint] = Field(default_factory=list, description="accuracy/PSNR vs network calls")
    probes: list[Probe] = Field(default_factory=list, description="other protections to validate")
    min_drop: float = Field(0.25, ge=0, le=1, description="validation: protected at least this far below clean")
    within: float = Field(0.05, ge=0, le=1, description="claim: BridgePure at most this far below clean")
    clear_margin: float = Field(0.05, ge=0, le=1, description="claim: 'clearly above leaked-only' margin")
    examples: int = Field(8, ge=1, description="images per row of examples.png")


def _mean_std(report: dict[str, Any]) -> tuple[float, float]:
    return float(report["accuracy_mean"]), float(report.get("accuracy_std", 0.0))


def _fmt(report: dict[str, Any] | None) -> str:
    if report is None:
        return "—"
    mean, std = _mean_std(report)
    return f"{100 * mean:.1f} ± {100 * std:.1f}"


def judge_claim(rows: dict[str, dict[str, Any]], p: BridgePureReportParams) -> dict[str, Any]:
    """The verdict, one boolean per part of the claim plus the numbers behind it (fractions)."""
    clean, _ = _mean_std(rows[p.clean])
    protected, _ = _mean_std(rows[p.protected])
    drop = clean - protected
    verdict: dict[str, Any] = {"clean": clean, "protected": protected, "protected_drop": drop,
                               "validated": drop >= p.min_drop}
    if not verdict["validated"]:
        verdict["holds"] = None
        verdict["why"] = (f"not evaluated: protected accuracy is only {100 * drop:.1f} points below clean "
                          f"(validation needs {100 * p.min_drop:.0f})")
        return verdict
    bp, bp_std = _mean_std(rows[p.bridgepure])
    leaked, leaked_std = _mean_std(rows[p.leaked_only])
    best_baseline = max(p.baselines, key=lambda n: _mean_std(rows[n])[0]) if p.baselines else None
    baseline_acc = _mean_std(rows[best_baseline])[0] if best_baseline else -math.inf
    verdict.update({
        "bridgepure": bp, "gap_to_clean": clean - bp, "within_of_clean": clean - bp <= p.within,
        "best_baseline": best_baseline, "best_baseline_accuracy": None if best_baseline is None else baseline_acc,
        "above_every_baseline": bp > baseline_acc,
        "leaked_only": leaked, "above_leaked_only_by": bp - leaked,
        "clearly_above_leaked_only": bp - leaked >= max(p.clear_margin, bp_std + leaked_std),
    })
    verdict["holds"] = bool(verdict["within_of_clean"] and verdict["above_every_baseline"]
                            and verdict["clearly_above_leaked_only"])
    if p.one_step is not None and p.one_step in rows:
        one, one_std = _mean_std(rows[p.one_step])
        verdict.update({"one_step": one, "bridge_minus_one_step": bp - one,
                        "bridge_beats_one_step": bp - one > bp_std + one_std,
                        "one_step_beats_bridge": one - bp > bp_std + one_std})
    return verdict


def markdown_table(order: list[str], rows: dict[str, dict[str, Any]], quality: dict[str, dict[str, Any]]) -> str:
    lines = ["| row | test accuracy % (mean ± std) | seeds | train rows | PSNR to clean (dB) |",
             "|---|---|---|---|---|"]
    for name in order:
        r = rows[name]
        q = quality.get(name)
        psnr = f"{q['psnr_mean']:.2f}" if q else "—"
        lines.append(f"| {name} | {_fmt(r)} | {len(r.get('seeds', []))} | {r.get('train_rows', '—')} | {psnr} |")
    return "\n".join(lines) + "\n"


def _canvas(width: float, height: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    return fig


def examples_figure(quality: dict[str, dict[str, Any]], order: list[str], path: Path, count: int) -> str | None:
    """clean | protected | one row per purified set, the same images (first by id) in each column."""
    loaded = {}
    for name in order:
        file = quality.get(name, {}).get("examples")
        if file and Path(file).exists():
            loaded[name] = np.load(file)
    if not loaded:
        return None
    first = next(iter(loaded.values()))
    ids = first["ids"][:count].tolist()
    strips: list[tuple[str, np.ndarray]] = [("clean", first["clean"][:count])]
    protected = next((d["protected"] for d in loaded.values() if "protected" in d.files), None)
    if protected is not None:
        strips.append(("protected", protected[:count]))
    for name, arrays in loaded.items():
        if arrays["ids"][:count].tolist() != ids:
            raise ValueError(f"example rows of {name!r} are not the same images as the others")
        strips.append((name, arrays["image"][:count]))
    fig = _canvas(1.0 * len(ids) + 1.6, 1.0 * len(strips))
    for r, (label, images) in enumerate(strips):
        for c, image in enumerate(images):
            ax = fig.add_subplot(len(strips), len(ids), r * len(ids) + c + 1)
            ax.imshow(image, cmap="gray", vmin=0, vmax=255)
            ax.set_xticks([])
            ax.set_yticks([])
            if c == 0:
                ax.set_ylabel(label, rotation=0, ha="right", va="center", fontsize=8)
    fig.subplots_adjust(left=0.16, right=0.99, top=0.99, bottom=0.01, wspace=0.05, hspace=0.05)
    fig.savefig(path)
    return str(path)


def sweep_figure(points: list[dict[str, Any]], clean: float, protected: float, path: Path) -> str:
    fig = _canvas(5, 3.5)
    ax = fig.add_subplot(1, 1, 1)
    pairs = [pt["pairs"] for pt in points]
    for key, label in (("bridgepure", "BridgePure"), ("leaked_only", "leaked clean only")):
        have = [(pt["pairs"], pt[key]) for pt in points if pt.get(key) is not None]
        if have:
            ax.errorbar([h[0] for h in have], [100 * h[1]["mean"] for h in have],
                        yerr=[100 * h[1]["std"] for h in have], marker="o", capsize=3, label=label)
    ax.axhline(100 * clean, color="green", linestyle="--", label="clean")
    ax.axhline(100 * protected, color="red", linestyle=":", label="protected")
    ax.set_xscale("log")
    ax.set_xticks(pairs)
    ax.set_xticklabels([str(p) for p in pairs])
    ax.set_xlabel("leaked pairs")
    ax.set_ylabel("test accuracy %")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    return str(path)


@register("bridgepure_report", requires={"matplotlib": "purify"})
class BridgePureReport(Stage[BridgePureReportParams]):
    """The BridgePure table (accuracy mean ± std, PSNR), sweep, example figure and claim verdict -> Report."""

    inputs: ClassVar[dict[str, ArtifactType]] = {"results": ArtifactType.REPORT, "quality": ArtifactType.REPORT,
                                                 "strength": ArtifactType.REPORT}
    list_inputs: ClassVar[frozenset[str]] = frozenset({"results", "quality"})
    optional_inputs: ClassVar[frozenset[str]] = frozenset({"quality", "strength"})
    output: ClassVar[ArtifactType] = ArtifactType.REPORT
    resources: ClassVar[Resources] = Resources(num_cpus=0)

    def run(self, inputs: dict[str, Any], ctx: RunContext) -> ReportArtifact:
        p = self.params
        rows = _by_name(inputs["results"], "results", ctx)
        quality = _by_name(inputs.get("quality", []), "quality", ctx)
        needed = [p.clean, p.protected, p.leaked_only, p.bridgepure, *p.baselines,
                  *([p.one_step] if p.one_step else []), *[pt.bridgepure for pt in p.sweep],
                  *[pt.leaked_only for pt in p.sweep if pt.leaked_only], *[pr.name for pr in p.probes],
                  *[pt.name for pt in p.steps_curve]]
        missing = sorted({n for n in needed if n not in rows})
        if missing:
            raise ValueError(f"node {ctx.node_id!r}: no result named {missing} among the `results` inputs "
                             f"(they are {sorted(rows)}); evaluate_classifier's `name` sets it")
        verdict = judge_claim(rows, p)
        probes = []
        clean = _mean_std(rows[p.clean])[0]
        for probe in p.probes:
            acc, std = _mean_std(rows[probe.name])
            probes.append({"name": probe.name, "protection": probe.protection, "accuracy_mean": acc,
                           "accuracy_std": std, "drop": clean - acc, "validated": clean - acc >= p.min_drop})
        sweep = []
        for point in p.sweep:
            entry: dict[str, Any] = {"pairs": point.pairs}
            for key, name in (("bridgepure", point.bridgepure), ("leaked_only", point.leaked_only)):
                if name:
                    mean, std = _mean_std(rows[name])
                    entry[key] = {"name": name, "mean": mean, "std": std}
            sweep.append(entry)
        curve = steps_curve(p.steps_curve, rows, quality)
        strength = strength_summary(inputs.get("strength"))
        order = [n for n in rows if n not in {pr.name for pr in p.probes}]
        out_dir = ctx.path("reports", ctx.node_id, "report.json").parent
        text = f"BridgePure on {p.protection}\n\n{markdown_table(order, rows, quality)}"
        if p.one_step:
            text += (f"\n`{p.one_step}` is an ablation added here (the same U-Net trained as a one-call "
                     "supervised inverse on the same pairs), not a baseline of the paper.\n")
        if curve:
            text += "\n" + curve_markdown(curve)
        if strength:
            text += "\n" + strength_markdown(strength)
        (out_dir / "table.md").write_text(text)
        figures = {}
        shown = [n for n in order if n in quality and n not in (p.clean, p.protected)]  # those two lead
        example_png = examples_figure(quality, shown, out_dir / "examples.png", p.examples)
        if example_png:
            figures["examples"] = example_png
        if curve:
            figures["steps"] = curve_figure(curve, clean, out_dir / "steps.png")
        if sweep:
            figures["sweep"] = sweep_figure(sweep, clean, verdict["protected"], out_dir / "sweep.png")
        metrics = {
            "protection": p.protection, "verdict": verdict, "probes": probes, "sweep": sweep,
            "steps_curve": curve, "strength": strength,
            "table": [{"name": n, "accuracy_mean": rows[n]["accuracy_mean"],
                       "accuracy_std": rows[n].get("accuracy_std", 0.0), "accuracy": rows[n].get("accuracy"),
                       "psnr_mean": quality[n]["psnr_mean"] if n in quality else None} for n in order],
            "markdown": str(out_dir / "table.md"), "figures": figures,
        }
        ctx.event("bridgepure_report", protection=p.protection, validated=verdict["validated"],
                  holds=verdict["holds"])
        report = ReportArtifact(str(out_dir / "report.json"), metrics)
        report.save()
        return report


def steps_curve(points: list[StepsPoint], rows: dict[str, dict[str, Any]],
                quality: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per sampler setting, by network calls: accuracy mean/std and PSNR (when measured)."""
    out = []
    for pt in points:
        mean, std = _mean_std(rows[pt.name])
        q = quality.get(pt.name)
        out.append({"name": pt.name, "steps": pt.steps, "churn": pt.churn, "nfe": sampler_calls(pt.steps, pt.churn),
                    "accuracy_mean": mean, "accuracy_std": std, "psnr_mean": q["psnr_mean"] if q else None})
    return sorted(out, key=lambda e: (e["churn"] == 0, e["nfe"]))


def curve_markdown(curve: list[dict[str, Any]]) -> str:
    lines = ["| sampler | steps | churn | network calls | accuracy % | PSNR dB |", "|---|---|---|---|---|---|"]
    for e in curve:
        psnr = f"{e['psnr_mean']:.2f}" if e["psnr_mean"] is not None else "—"
        lines.append(f"| {e['name']} | {e['steps']} | {e['churn']} | {e['nfe']} | "
                     f"{100 * e['accuracy_mean']:.1f} ± {100 * e['accuracy_std']:.1f} | {psnr} |")
    return "\n".join(lines) + "\n"


def strength_summary(report: Artifact | None) -> dict[str, Any] | None:
    if report is None:
        return None
    m = getattr(report, "metrics", {}) or {}
    if "chosen" not in m:
        raise ValueError("the `strength` Report is not a choose_protection Report (no 'chosen')")
    return {k: m.get(k) for k in ("method", "chosen", "reached", "clean_accuracy", "min_drop", "candidates",
                                  "train_rows", "validation_rows")}


def strength_markdown(s: dict[str, Any]) -> str:
    lines = [f"Strength chosen on a validation split from the training side ({s['train_rows']} training, "
             f"{s['validation_rows']} validation images; clean {100 * s['clean_accuracy']:.1f}%; needs a drop of "
             f"{100 * s['min_drop']:.0f} points): **{s['chosen']['options']}**"
             + ("" if s["reached"] else " (no candidate reached the drop: the strongest is used)"), "",
             "| candidate | validation accuracy % | drop (points) | L2 mean | Linf levels |", "|---|---|---|---|---|"]
    for c in s["candidates"]:
        lines.append(f"| {c['options']} | {100 * c['accuracy_mean']:.1f} | {100 * c['drop']:.1f} | "
                     f"{c['budget']['l2_mean']:.3f} | {c['budget']['linf']:.0f} |")
    return "\n".join(lines) + "\n"


def curve_figure(curve: list[dict[str, Any]], clean: float, path: Path) -> str:
    fig = _canvas(5, 3.5)
    ax = fig.add_subplot(1, 1, 1)
    churned = [e for e in curve if e["churn"] > 0]
    if churned:
        ax.errorbar([e["nfe"] for e in churned], [100 * e["accuracy_mean"] for e in churned],
                    yerr=[100 * e["accuracy_std"] for e in churned], marker="o", capsize=3, label="BridgePure (churn)")
    for e in curve:
        if e["churn"] == 0:
            ax.errorbar([e["nfe"]], [100 * e["accuracy_mean"]], yerr=[100 * e["accuracy_std"]], marker="s",
                        capsize=3, linestyle="none", label=f"deterministic, {e['steps']} steps")
    ax.axhline(100 * clean, color="green", linestyle="--", label="clean")
    ax.set_xlabel("network calls (NFE)")
    ax.set_ylabel("test accuracy %")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    return str(path)


def _by_name(reports: list[Artifact], slot: str, ctx: RunContext) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for art in reports:
        if not isinstance(art, ReportArtifact):
            raise ValueError(f"node {ctx.node_id!r}: `{slot}` takes Reports")
        name = art.metrics.get("name")
        if not name:
            raise ValueError(f"node {ctx.node_id!r}: a `{slot}` Report ({art.path}) has no name")
        if name in out:
            raise ValueError(f"node {ctx.node_id!r}: two `{slot}` Reports are named {name!r}")
        out[name] = art.metrics
    return out
