"""``loop_report``: one report over a whole model-making run — data per source, training, serving,
search, fine-tuning and the MoE-CAP comparison — linking every stage's own files.

Why a stage: the loop's claim is that one DAG with one ledger covers the whole of making a model; a
reader should find in one place what each stage did and the file behind each number.  Counts come
from the run's ledger (``ctx.ledger``: per source and per rule, ``settings.source_key``) and from the
stages' own Reports; nothing is recomputed here but the per-source token sums.  Every link is a path
relative to the report's folder, and the report says whether each one resolved when it was written.
The SFT verdicts are the search report's own (``reasoning_report``: paired bootstrap intervals; a
claim holds only when its interval is above 0).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field

from raypress.artifacts import Artifact, DatasetArtifact, ModelArtifact, ReportArtifact
from raypress.operators.base import Params, Resources, RunContext, Stage
from raypress.operators.general.loop.sections import (
    cap_section,
    search_section,
    sft_section,
    sources_section,
    tokens_section,
    training_section,
)
from raypress.operators.registry import register
from raypress.operators.shared.claims_table import claims_table
from raypress.schema import ArtifactType

SLOTS = {"train": ArtifactType.DATASET, "validation": ArtifactType.DATASET, "model": ArtifactType.MODEL,
         "endpoint": ArtifactType.REPORT, "search": ArtifactType.REPORT, "sft": ArtifactType.MODEL,
         "final_endpoint": ArtifactType.REPORT, "cap": ArtifactType.REPORT, "final_cap": ArtifactType.REPORT}


class LoopReportParams(Params):
    title: str = "One DAG: data -> model -> serving -> search -> improvement"
    token_key: str = Field("n_token", description="the token count column of the train/validation rows")
    search_op: str = Field("comcts_search", description="the op whose ledger counts are the search's calls")
    curated: str | None = Field(None, description="the node whose output is the curated corpus: rows per source "
                                                  "and rule are counted over the nodes leading to it (None: every "
                                                  "node that counts sources)")


@register("loop_report", requires={"matplotlib": "moe"})
class LoopReport(Stage[LoopReportParams]):
    """The whole run in one report: rows per source and rule, tokens, loss curve, serving, search calls, SFT verdicts, MoE-CAP first vs final."""

    inputs: ClassVar[dict[str, ArtifactType]] = dict(SLOTS)
    optional_inputs: ClassVar[frozenset[str]] = frozenset(SLOTS)
    output: ClassVar[ArtifactType] = ArtifactType.REPORT
    resources: ClassVar[Resources] = Resources(num_cpus=0)

    def run(self, inputs: dict[str, Artifact], ctx: RunContext) -> ReportArtifact:
        p = self.params
        folder = ctx.path("reports", ctx.node_id, "report.json").parent
        ledger = ctx.ledger()
        source_key = str(ctx.settings.get("source_key") or "corpus")
        links: dict[str, str] = {"ledger": str(Path(ctx.run_dir) / "ledger.json"),
                                 "events": str(Path(ctx.run_dir) / "events.jsonl")}
        metrics: dict[str, Any] = {"title": p.title, "sources": sources_section(ledger, ctx.data_inputs, p.curated)}
        sides = {side: inputs[side] for side in ("train", "validation") if isinstance(inputs.get(side), DatasetArtifact)}
        if sides:
            rows = {side: art.ds.select_columns([c for c in (source_key, p.token_key)  # type: ignore[union-attr]
                                                 if c in art.ds.columns()]).take_all()  # type: ignore[union-attr]
                    for side, art in sides.items()}
            metrics["tokens"] = tokens_section(rows, source_key, p.token_key)
            links.update({f"data_{side}": art.path for side, art in sides.items() if art.path})
        if isinstance(inputs.get("model"), ModelArtifact):
            model = inputs["model"]
            metrics["training"] = training_section(model.config or ModelArtifact.load(model.path).config)  # type: ignore[union-attr]
            links["model"] = model.path  # type: ignore[union-attr]
            if metrics["training"]["curve"]:
                links["loss_curve"] = str(loss_curve(folder / "loss_curve.png", metrics["training"]["curve"]))
        for slot in ("endpoint", "final_endpoint"):
            if slot in inputs:
                m = inputs[slot].metrics  # type: ignore[union-attr]
                metrics.setdefault("serving", {})[slot] = {k: m.get(k) for k in ("url", "base_url", "model",
                                                                                 "model_path", "deploy_seconds")}
                links[slot] = inputs[slot].path  # type: ignore[union-attr]
        if "search" in inputs:
            report = inputs["search"].metrics  # type: ignore[union-attr]
            counts: dict[str, int] = {}
            for e in ledger.values():
                if e.get("op") == p.search_op:
                    for k, n in (e.get("counts") or {}).items():
                        counts[k] = counts.get(k, 0) + n
            metrics["search"] = search_section(report, counts)
            metrics["sft"] = sft_section(report)
            links["search_report"] = inputs["search"].path  # type: ignore[union-attr]
            if report.get("markdown"):
                links["search_table"] = report["markdown"]
        if isinstance(inputs.get("sft"), ModelArtifact):
            links["sft_model"] = inputs["sft"].path  # type: ignore[union-attr]
        caps = {name: inputs[slot].metrics for name, slot in (("first", "cap"), ("final", "final_cap"))  # type: ignore[union-attr]
                if slot in inputs}
        if caps:
            metrics["cap"] = cap_section(caps)
            for name, slot in (("first", "cap"), ("final", "final_cap")):
                if slot in inputs:
                    links[f"cap_{name}"] = inputs[slot].path  # type: ignore[union-attr]
                    if caps[name].get("radar"):
                        links[f"cap_{name}_radar"] = caps[name]["radar"]
        metrics["links"] = {name: os.path.relpath(target, folder) for name, target in links.items()}
        metrics["links_resolve"] = {name: (folder / rel).exists() for name, rel in metrics["links"].items()}
        (folder / "report.md").write_text(markdown(metrics))
        report_artifact = ReportArtifact(str(folder / "report.json"), metrics)
        report_artifact.save()
        return report_artifact


def loss_curve(path: Path, curve: list[dict[str, float]]) -> Path:
    """The training loss against the step, as a PNG (matplotlib's object API, no global backend)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(6.0, 3.5), dpi=100)
    FigureCanvasAgg(figure)
    ax = figure.add_subplot()
    ax.plot([c["step"] for c in curve], [c["loss"] for c in curve])
    ax.set_xlabel("step")
    ax.set_ylabel("training loss (nats/token)")
    ax.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(path)
    return path


def _num(value: Any, digits: int) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def markdown(m: dict[str, Any]) -> str:
    """The report as Markdown: one section per stage, each with its links."""
    lines = [f"# {m['title']}", ""]
    links = m.get("links", {})
    if m.get("sources"):
        lines += ["## Data per source", "", "| source | read | kept | removed by rules | duplicates within | "
                  "duplicates lost to another source | quarantined | adds up |", "|---|---|---|---|---|---|---|---|"]
        for src, s in m["sources"].items():
            lines.append(f"| {src} | {s['rows_read']} | {s['rows_kept']} | {sum(r['rows'] for r in s['removed'])} | "
                         f"{s['duplicates_within']} | {s['duplicates_across_sources']} | {s['quarantined']} | "
                         f"{'yes' if s['adds_up'] else 'NO'} |")
        lines += ["", "Rules (node: rule = rows):", ""]
        for src, s in m["sources"].items():
            rules = ", ".join(f"{r['node']}: {r['rule']} = {r['rows']}" for r in s["removed"]) or "none"
            dups = ", ".join(f"{d['node']}: {d['rows']} kept by {d['kept_by']}" for d in s["duplicates"]) or "none"
            lines.append(f"- **{src}**: {rules}; duplicates: {dups}")
        lines.append("")
    if m.get("tokens"):
        lines += ["## Tokens", ""]
        for side, t in m["tokens"].items():
            per = ", ".join(f"{src} {v['tokens']:,} ({v['rows']} rows)" for src, v in t["by_source"].items())
            lines.append(f"- {side}: {t['tokens']:,} tokens in {t['rows']} rows — {per}")
        lines.append("")
    if m.get("training"):
        t = m["training"]
        lines += ["## Training", "", f"{t['steps']} steps over {t['tokens']} tokens; loss {t['initial_loss']:.3f} → "
                  f"{t['final_loss']:.3f}." + (f" ![loss curve]({links['loss_curve']})" if "loss_curve" in links else ""), ""]
    if m.get("serving"):
        lines += ["## Serving", ""] + [f"- {slot}: `{s['model']}` at {s['base_url']} (deployed in "
                                        f"{s['deploy_seconds']} s)" for slot, s in m["serving"].items()] + [""]
    if m.get("search"):
        s = m["search"]
        lines += ["## Search", "", "| run | questions | success | 95% CI | mean calls |", "|---|---|---|---|---|"]
        for r in s["runs"]:
            ci = r.get("ci95") or [None, None]
            lines.append(f"| {r['run']} | {r['questions']} | {r['success_rate']:.3f} | {ci[0]:.3f}–{ci[1]:.3f} | "
                         f"{r['calls_mean']:.1f} |")
        lines += ["", f"Model calls per policy (search side): {json.dumps(s['calls'])}; answered by the server "
                  f"(its /metrics): {json.dumps(s['served_requests'])}", ""]
    if m.get("sft") and m["sft"]["claims"]:
        lines += ["## Collective SFT (paired bootstrap 95% CI of the difference; a claim holds only when its "
                  "interval is above 0)", "", claims_table(m["sft"]["claims"])]
    if m.get("cap"):
        lines += ["## MoE-CAP: first model vs final", "", "| model | accuracy | tokens/s | TPOT p50 (s) | decode S-MBU "
                  "| decode S-MFU |", "|---|---|---|---|---|---|"]
        for name, c in m["cap"].items():
            lines.append(f"| {name} | {_num(c['accuracy'], 3)} | {_num(c['throughput_tokens_per_s'], 1)} | "
                         f"{_num(c['tpot_p50_s'], 4)} | {_num(c['decode_s_mbu'], 4)} | {_num(c['decode_s_mfu'], 4)} |")
        lines.append("")
    lines += ["## Links", ""] + [f"- [{name}]({rel}){'' if m['links_resolve'][name] else ' (missing)'}"
                                 for name, rel in links.items()]
    return "\n".join(lines) + "\n"
