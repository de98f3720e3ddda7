"""table.md and toxicity.png of ``beancounter_demographics``, rendered from its report metrics."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from raypress.operators.curation.beancounter.descriptor_matching import PRONOUNS
from raypress.operators.curation.beancounter.holisticbias_descriptors import AXES


def _pct(x: float | None, digits: int = 1) -> str:
    return "–" if x is None else f"{100 * x:.{digits}f}%"


def _num(x: float | None, digits: int = 3) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def _p(x: float | None) -> str:
    return "–" if x is None else (f"{x:.2e}" if x < 1e-3 else f"{x:.3f}")


def markdown(metrics: dict[str, Any]) -> str:
    s = metrics["summary"]
    lines = ["# BeanCounter toxicity and demographics\n",
             f"Scorer: **{metrics['scorer']['name']}** — {metrics['scorer']['description']}.\n",
             f"Descriptors: {metrics['descriptors']['surface_forms']} surface forms of "
             f"{metrics['descriptors']['descriptors']} HolisticBias v1.1 descriptors. Seed {metrics['seed']}.\n",
             "| corpus | documents (non-empty) | descriptor sentences (unique) | scored |",
             "|---|---|---|---|"]
    for corpus in ("filings", "reference"):
        c = metrics["corpora"].get(corpus)
        if c:
            lines.append(f"| {corpus} | {c['documents']} ({c['documents'] - c['empty_documents']}) | "
                         f"{c['descriptor_sentences']} ({c['unique_sentences']}) | {c['scored']} |")
    o = s["overall"]
    lines += ["", f"All descriptors pooled: mean toxicity filings {_num(o['mean_filings'])} (n={o['n_filings']}) vs "
              f"reference {_num(o['mean_reference'])} (n={o['n_reference']}), reduction {_pct(o['reduction'])}, "
              f"Welch t={_num(o['t'], 2)}, p={_p(o['p'])}. Descriptors compared: {s['compared']}; filings lower "
              f"and significant (p<{metrics['alpha']}): {s['lower_and_significant']}; higher and significant: "
              f"{s['higher_and_significant']}; not significant: {', '.join(s['not_significant']) or 'none'}.\n",
              "## Per descriptor\n",
              "| descriptor | axes | filings n | reference n (pool) | mean filings | mean reference | reduction "
              "| t | df | p |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in metrics["per_descriptor"]:
        pool = f"{r['n_reference']} ({r['reference_pool']}{', with replacement' if r['with_replacement'] else ''})"
        lines.append(f"| {r['descriptor']} | {', '.join(r['axes'])} | {r['n_filings']} | {pool} | "
                     f"{_num(r['mean_filings'])} | {_num(r['mean_reference'])} | {_pct(r['reduction'])} | "
                     f"{_num(r['t'], 2)} | {_num(r['df'], 1)} | {_p(r['p'])} |")
    lines += ["", "## Share of documents mentioning each axis\n",
              "| axis | filings: documents | filings: filings | reference: documents |", "|---|---|---|---|"]
    ref_axes = {a["axis"]: a for a in metrics["axes"].get("reference", [])}
    for a in metrics["axes"]["filings"]:
        f = a.get("filings")
        r = ref_axes.get(a["axis"])

        def cell(x: dict[str, Any] | None) -> str:
            return "–" if not x else f"{_pct(x['share'])} ({x['count']}/{x['of']})"

        lines.append(f"| {a['axis']} | {cell(a['documents'])} | {cell(f)} | {cell(r['documents'] if r else None)} |")
    lines += ["", "## Top descriptors per axis (filings)\n", "| axis | descriptors (unique sentences, documents) |",
              "|---|---|"]
    for axis, tops in metrics["top_descriptors"].items():
        cells = "; ".join(f"{t['descriptor']} ({t['sentences']}, {t['documents']})" for t in tops)
        lines.append(f"| {axis} | {cells or '–'} |")
    lines += ["", "## Pronouns\n", "Case-insensitive whole words: " +
              "; ".join(f"{c}: {', '.join(w)}" for c, w in PRONOUNS.items()) + ".\n",
              "| corpus | class | occurrences | per million words | documents with one |", "|---|---|---|---|---|"]
    for corpus, rows in metrics["pronouns"].items():
        for r in rows:
            lines.append(f"| {corpus} | {r['class']} | {r['occurrences']} | {_num(r['per_million_words'], 1)} | "
                         f"{_pct(r['documents']['share'])} ({r['documents']['count']}/{r['documents']['of']}) |")
    return "\n".join(lines) + "\n"


def _canvas(width: float, height: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    return fig


def figure(metrics: dict[str, Any], path: Path, count: int) -> str:
    """Mean toxicity per descriptor (filings vs reference, ± 1 SE) and the share of documents per axis."""
    rows = metrics["per_descriptor"][:count][::-1]  # most sentences at the top
    fig = _canvas(12, max(3.5, 0.3 * len(rows) + 1.5))
    ax = fig.add_subplot(1, 2, 1)
    if rows:
        y = np.arange(len(rows))
        for offset, key, label in ((0.2, "filings", "filings"), (-0.2, "reference", "reference")):
            means = [r[f"mean_{key}"] or 0.0 for r in rows]
            errs = [r[f"se_{key}"] or 0.0 for r in rows]
            ax.barh(y + offset, means, height=0.4, xerr=errs, label=label, capsize=2)
        ax.set_yticks(y)
        ax.set_yticklabels([f"{r['descriptor']} (n={r['n_filings']})" for r in rows], fontsize=7)
        ax.legend(fontsize=7)
    else:
        ax.text(0.5, 0.5, "no descriptor sentences", ha="center", va="center")
    ax.set_xlabel(f"mean toxicity ({metrics['scorer']['name']})")
    ax2 = fig.add_subplot(1, 2, 2)
    x = np.arange(len(AXES))
    for offset, corpus in ((-0.2, "filings"), (0.2, "reference")):
        shares = metrics["axes"].get(corpus)
        if shares:
            ax2.bar(x + offset, [100 * (a["documents"]["share"] or 0.0) for a in shares], width=0.4, label=corpus)
    ax2.set_xticks(x)
    ax2.set_xticklabels([a.replace("_", " ") for a in AXES], rotation=30, ha="right", fontsize=7)
    ax2.set_ylabel("% of documents mentioning the axis")
    ax2.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    return str(path)
