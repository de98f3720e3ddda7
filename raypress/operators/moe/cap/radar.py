"""The CAP radar (MoE-CAP, Jiang et al., arXiv:2412.07067): cost, accuracy, performance on one figure.

Why a radar: MoE systems tend to win two of the three CAP dimensions and lose the third; one
triangle per system shows which.  Each axis is normalised to the best system on it (the best
scores 1), and cost is inverted (cheapest / cost) so that bigger is better on every axis.  Raw
values are written in the legend, because a normalised figure alone hides the scale.

Uses matplotlib's object API with the Agg canvas directly — no ``pyplot``, no global backend
switch — so it is safe inside Ray workers and threads.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Mapping, Sequence

AXES = ("accuracy", "throughput", "cost")
_LABELS = {"accuracy": "Accuracy", "throughput": "Performance\n(throughput)", "cost": "Cost\n(inverted: cheaper = out)"}
LOWER_IS_BETTER = frozenset({"cost", "tpot", "ttft"})


def normalise(systems: Mapping[str, Mapping[str, float]], axes: Sequence[str] = AXES) -> dict[str, dict[str, float]]:
    """Per-axis scores in [0, 1]: value / best where higher is better, best / value where lower is
    better (cost, TPOT, TTFT).

    A zero on a lower-is-better axis counts as the best (score 1); an axis whose best value is 0
    scores 0 for all.
    """
    scores: dict[str, dict[str, float]] = {name: {} for name in systems}
    for axis in axes:
        values = {name: float(metrics[axis]) for name, metrics in systems.items()}
        if any(v < 0 or not math.isfinite(v) for v in values.values()):
            raise ValueError(f"{axis} values must be finite and >= 0: {values}")
        if axis in LOWER_IS_BETTER:
            positive = [v for v in values.values() if v > 0]
            lowest = min(positive) if positive else 0.0
            for name, v in values.items():
                scores[name][axis] = 1.0 if v == 0 else lowest / v
        else:
            best = max(values.values())
            for name, v in values.items():
                scores[name][axis] = v / best if best > 0 else 0.0
    return scores


def cap_radar(
    path: str | Path,
    systems: Mapping[str, Mapping[str, float]],
    title: str = "MoE-CAP",
    cost_unit: str = "USD/Mtok",
    axes: Sequence[str] = AXES,
    labels: Mapping[str, str] | None = None,
) -> Path:
    """Draw the C-A-P radar for ``systems`` ({name: {axis: value}}) to a PNG at ``path``.

    Default axes: accuracy (a fraction), throughput (tokens/s), cost (``cost_unit``); ``axes`` and
    ``labels`` choose others (lower-is-better ones: ``LOWER_IS_BETTER``). Raw values are in the legend.
    """
    if not systems:
        raise ValueError("cap_radar needs at least one system")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    names = {**_LABELS, **(labels or {})}
    scores = normalise(systems, axes)
    angles = [2 * math.pi * i / len(axes) for i in range(len(axes))]
    figure = Figure(figsize=(6.0, 6.0), dpi=100)
    FigureCanvasAgg(figure)
    ax = figure.add_subplot(projection="polar")
    ax.set_theta_offset(math.pi / 2)
    ax.set_theta_direction(-1)
    ax.set_xticks(angles)
    ax.set_xticklabels([names.get(a, a) for a in axes])
    ax.set_ylim(0.0, 1.05)
    ax.set_yticks([0.25, 0.5, 0.75, 1.0])
    ax.set_yticklabels(["0.25", "0.5", "0.75", "1"], fontsize=7)
    for name, metrics in systems.items():
        values = [scores[name][a] for a in axes]
        if tuple(axes) == AXES:
            label = (
                f"{name}: acc {float(metrics['accuracy']):.3g}, "
                f"{float(metrics['throughput']):.3g} tok/s, {float(metrics['cost']):.3g} {cost_unit}"
            )
        else:
            label = f"{name}: " + ", ".join(f"{a} {float(metrics[a]):.3g}" for a in axes)
        ax.plot(angles + angles[:1], values + values[:1], marker="o", linewidth=1.5, label=label)
        ax.fill(angles + angles[:1], values + values[:1], alpha=0.15)
    ax.set_title(title, pad=20)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.08), fontsize=8, frameon=False)
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, format="png", bbox_inches="tight")
    return out
