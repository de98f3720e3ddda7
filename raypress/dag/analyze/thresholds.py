"""Which param is a filter's threshold on which stat, and thresholds suggested from data.

A filter's ``min_*`` / ``max_*`` params are its thresholds (Data-Juicer's convention). A filter with
one stat owns them all; with several, a param belongs to the stat whose name holds every word of
the param's name (``max_symbol_word_ratio`` -> ``gopher_symbol_word_ratio``), the closest such stat
when there are several; a param no stat name covers (a per-line rule) is not a stat's threshold."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Threshold:
    stat: str
    side: str  # "min": keep value >= threshold; "max": keep value <= threshold
    param: str
    value: float


def _words(name: str) -> set[str]:
    return {w[:-1] if w.endswith("s") and len(w) > 3 else w for w in name.lower().split("_") if w}


def stat_thresholds(stat_names: tuple[str, ...], params: dict[str, Any]) -> list[Threshold]:
    """Every numeric ``min*`` / ``max*`` param matched to the stat it bounds."""
    out = []
    for param, value in params.items():
        side = "min" if param.startswith("min") else "max" if param.startswith("max") else None
        if side is None or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if not np.isfinite(value) or abs(value) >= 2 ** 62:  # "no bound" sentinels (sys.maxsize)
            continue
        stat = owner_stat(param, stat_names)
        if stat is not None:
            out.append(Threshold(stat, side, param, float(value)))
    return out


def owner_stat(param: str, stat_names: tuple[str, ...]) -> str | None:
    if len(stat_names) == 1:
        return stat_names[0]
    wanted = _words(param) - {"min", "max"}
    covering = [s for s in stat_names if wanted and wanted <= _words(s)]
    if not covering:
        return None
    return min(covering, key=lambda s: (len(_words(s) - wanted), s))


def suggestions(side: str, mean: float, std: float, quantiles: dict[str, float]) -> list[dict[str, Any]]:
    """k-sigma and quantile cut-offs on the side the filter bounds (a ``min`` cuts the low tail)."""
    out: list[dict[str, Any]] = []
    sign = -1 if side == "min" else 1
    for k in (2, 3):
        if np.isfinite(std):
            out.append({"method": f"mean {'−' if sign < 0 else '+'} {k}σ", "value": mean + sign * k * std})
    for q in (("p1", "p5") if side == "min" else ("p95", "p99")):
        if q in quantiles and np.isfinite(quantiles[q]):
            out.append({"method": q, "value": quantiles[q]})
    return out
