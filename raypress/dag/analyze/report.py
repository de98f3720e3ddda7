"""Write a stats-mode run's analysis: ``analysis.json`` (the numbers) and ``report.html`` (the same
numbers drawn, one self-contained file that opens from disk and in the run page)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from raypress.dag.analyze.collect import analyze_run
from raypress.dag.validate import ValidatedPipeline

REPORT_FOLDER = ("reports", "analysis")


def analyze_and_report(vp: ValidatedPipeline, run_dir: Path, ledger: dict[str, Any],
                       report_dir: str | None = None) -> Path:
    """Analyze the run and write both files; returns their folder."""
    from raypress.dag.analyze.report_html import render

    folder = Path(report_dir) if report_dir else Path(run_dir).joinpath(*REPORT_FOLDER)
    folder.mkdir(parents=True, exist_ok=True)
    analysis = analyze_run(vp, Path(run_dir), ledger)
    analysis["ledger"] = {"status": ledger.get("status"), "adds_up": ledger.get("adds_up"),
                          "nodes": {nid: {k: e.get(k) for k in ("op", "rows_in", "rows_out", "duplicates",
                                                               "quarantined", "seconds")}
                                    for nid, e in (ledger.get("nodes") or {}).items()}}
    analysis["driver_peak_rss_bytes"] = peak_rss_bytes()
    _write(folder / "analysis.json", json.dumps(analysis, indent=1, ensure_ascii=False, allow_nan=False))
    _write(folder / "report.html", render(analysis))
    return folder


def peak_rss_bytes() -> int:
    """This process's peak resident memory so far (the driver: the pipeline run and the merge)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def _write(path: Path, text: str) -> None:
    tmp = path.with_name("." + path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
