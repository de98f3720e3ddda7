"""What a run is now, from its record, its run directory and its job's status.

Why derived on every request, not tracked: the run's own files (``events.jsonl`` as it goes,
``ledger.json`` at the end) and the Jobs API are the truth; a server that kept its own copy would
disagree with them after a restart, a crash or a second replica.  Terminal states never change,
so only live runs cost a look at the Jobs API (one cached listing for all of them).
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from raypress.serving.pipelines.records import RunRecord
from raypress.serving.pipelines.run_files import LEDGER_FILE, all_events, read_json

TERMINAL = ("succeeded", "failed", "cancelled", "crashed")
STATES = ("queued", "running", *TERMINAL)
NODE_STATES = ("pending", "running", "succeeded", "skipped", "failed", "cancelled")
LEDGER_FINAL = ("succeeded", "failed", "cancelled")
SUBMIT_LOST_S = 600.0  # an attempt with no job id this long after it began: its server died submitting
CLOCK_SLACK_S = 2.0


@dataclass(frozen=True)
class JobState:
    status: str | None  # PENDING | RUNNING | SUCCEEDED | FAILED | STOPPED; None: the Jobs API does not know it
    message: str | None = None


def _ledger_of_attempt(run_dir: Path, record: RunRecord) -> dict[str, Any] | None:
    """The run directory's ledger when the latest attempt wrote it (not an earlier attempt's)."""
    path = run_dir / LEDGER_FILE
    latest = record.latest
    try:
        written = path.stat().st_mtime
    except OSError:
        return None
    if latest is not None and written + CLOCK_SLACK_S < latest.submitted:
        return None
    ledger = read_json(path)
    return ledger if isinstance(ledger, dict) else None


def run_state(record: RunRecord, job: JobState, ledger: dict[str, Any] | None,
              now: float | None = None) -> tuple[str, str | None]:
    """(state, why) for a run: ``queued`` until its job runs, ``running``, then what its ledger
    says; ``cancelled`` when its job was stopped; ``crashed`` when its job ended (or vanished)
    without the ledger the run writes even when it fails: its process died."""
    latest = record.latest
    if latest is None:
        return "queued", None
    if latest.error:
        return "failed", latest.error
    if latest.job_id is None:
        if (now or time.time()) - latest.submitted > SUBMIT_LOST_S:
            return "crashed", "the server stopped before the job was submitted"
        return "queued", None
    status = job.status
    if status == "PENDING":
        return "queued", None
    if status == "RUNNING":
        return "running", None
    final = (ledger or {}).get("status")
    if status == "STOPPED":
        return "cancelled", "stopped through the API" if record.cancel_requested else "the job was stopped"
    if final in LEDGER_FINAL:
        return final, (ledger or {}).get("error")
    if status is None:
        return "crashed", "the cluster has no record of the run's job and the run left no final ledger"
    return "crashed", job_failure(job.message) or f"the job ended {status} without writing the run's ledger"


def job_failure(message: str | None) -> str | None:
    """Ray's job message in one line: its head, and the last line of the log tail it quotes (the error)."""
    lines = [line.strip() for line in (message or "").strip().splitlines() if line.strip()]
    if not lines:
        return None
    head = lines[0].split(", last available logs")[0]
    return head if len(lines) == 1 else f"{head}: {lines[-1]}"


def read_dag(run_dir: Path) -> list[dict[str, Any]]:
    """The resolved pipeline's nodes: id, op, the ids they read (parsed once per version of the file:
    every poll of a run page asks for it; shared, so read-only)."""
    path = run_dir / "pipeline.yaml"
    try:
        stat = path.stat()
    except OSError:
        return []
    return _parsed_dag(str(path), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=256)
def _parsed_dag(path: str, _mtime_ns: int, _size: int) -> list[dict[str, Any]]:
    try:
        doc = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return []
    nodes = []
    for item in (doc or {}).get("nodes", []) if isinstance(doc, dict) else []:
        if not isinstance(item, dict) or "id" not in item:
            continue
        raw = item.get("input")
        inputs = [raw] if isinstance(raw, str) else list(raw.values()) if isinstance(raw, dict) else list(raw or [])
        nodes.append({"id": str(item["id"]), "op": str(item.get("op")), "inputs": [str(i) for i in inputs],
                      "mode": item.get("mode"), "params": item.get("with") or {}})
    return nodes


def node_params(run_dir: Path, node: str) -> dict[str, Any] | None:
    return next((n["params"] for n in read_dag(run_dir) if n["id"] == node), None)


def _counts(entry: dict[str, Any]) -> dict[str, Any]:
    keys = ("rows_in", "rows_out", "dropped", "duplicates", "quarantined", "seconds")
    out: dict[str, Any] = {k: entry[k] for k in keys if k in entry}
    if "rows_in" in out and "rows_out" in out:
        removed = sum(out.get("dropped", {}).values()) + out.get("duplicates", 0) + out.get("quarantined", 0)
        out["adds_up"] = bool(entry.get("transforms")) or out["rows_in"] == out["rows_out"] + removed
        out["keep_fraction"] = out["rows_out"] / out["rows_in"] if out["rows_in"] else None
        seconds = out.get("seconds") or 0
        out["rows_per_s"] = round(out["rows_in"] / seconds, 1) if seconds > 0 else None
    for extra in ("artifact", "transforms"):
        if extra in entry:
            out[extra] = entry[extra]
    return out


def node_views(dag: list[dict[str, Any]], events: list[dict], ledger: dict[str, Any] | None,
               run: str) -> list[dict[str, Any]]:
    """Per node: state, counts (the ledger's when the run is done, else what ``node_finished``
    said), start and end times, warnings."""
    views: dict[str, dict[str, Any]] = {
        n["id"]: {"id": n["id"], "op": n["op"], "inputs": n["inputs"], "state": "pending", "started": None,
                  "finished": None, "counts": None, "warnings": []} for n in dag}
    for event in events:
        node = event.get("node")
        view = views.get(node) if isinstance(node, str) else None
        if view is None:
            continue
        kind = event.get("event")
        if kind == "node_started":
            view.update(state="running", started=event.get("ts"), finished=None)
        elif kind == "node_finished":
            view.update(state="succeeded", finished=event.get("ts"))
            view["counts"] = _counts(event)
        elif kind == "node_skipped":
            view.update(state="skipped", finished=event.get("ts"))
        elif kind == "warning":
            view["warnings"].append(str(event.get("message")))
    entries = (ledger or {}).get("nodes", {})
    unfinished = set((ledger or {}).get("unfinished", []))
    for nid, view in views.items():
        if nid in entries:
            view["counts"] = _counts(entries[nid])
            if view["state"] in ("pending", "running"):
                view["state"] = "succeeded"
        elif run in TERMINAL and view["state"] in ("pending", "running"):
            view["state"] = "cancelled" if run == "cancelled" else ("failed" if nid in unfinished or
                                                                   view["state"] == "running" else "pending")
    return list(views.values())


def summary(record: RunRecord, state: str, why: str | None, ledger: dict[str, Any] | None) -> dict[str, Any]:
    latest = record.latest
    return {"id": record.id, "name": record.name, "state": state, "reason": why, "created": record.created,
            "run_dir": record.run_dir, "mode": record.mode, "attempts": len(record.attempts),
            "job_id": latest.job_id if latest else None,
            "cancel_requested": record.cancel_requested is not None and state not in TERMINAL,
            "adds_up": (ledger or {}).get("adds_up") if ledger else None,
            "unfinished": len((ledger or {}).get("unfinished", [])) if ledger else None}


def full_view(record: RunRecord, job: JobState, now: float | None = None) -> dict[str, Any]:
    """Everything the run page shows: the summary, the DAG with per-node state and counts, the
    timeline, and the ledger once the run is done."""
    run_dir = Path(record.run_dir)
    ledger = _ledger_of_attempt(run_dir, record)
    state, why = run_state(record, job, ledger, now)
    events = all_events(run_dir)
    nodes = node_views(read_dag(run_dir), events, ledger, state)
    started = next((e.get("ts") for e in events if e.get("event") == "run_started"), None)
    finished = next((e.get("ts") for e in reversed(events) if e.get("event") in ("run_finished", "run_failed",
                                                                                  "run_cancelled")),
                    None)
    out = summary(record, state, why, ledger)
    out.update({"nodes": nodes, "started": started, "finished": finished,
                "attempt_history": [a.__dict__ for a in record.attempts], "overrides": record.overrides,
                "ledger": ledger if state in TERMINAL else None})
    return out


def quick_state(record: RunRecord, job: JobState, now: float | None = None) -> tuple[str, str | None, dict | None]:
    ledger = _ledger_of_attempt(Path(record.run_dir), record)
    state, why = run_state(record, job, ledger, now)
    return state, why, ledger
