"""The sections of the loop report (``loop_report``), each from what one stage left: pure functions
over ledger entries and Report metrics, so each is tested without a run.

Why separate: the stage gathers artifacts and writes files; what a section says (which counts make
"rows kept per source and per rule", which numbers a claim's verdict rests on) is decided here.
"""

from __future__ import annotations

from typing import Any

from raypress.schema import NO_SOURCE as UNKNOWN


def sources_section(ledger: dict[str, dict[str, Any]], data_inputs: dict[str, list[str]],
                    curated: str | None) -> dict[str, Any]:
    """Per source, over the nodes that lead to ``curated`` (every node counting sources, if None): rows
    read, every rule that removed rows (node, op, rule, n), duplicates by the source that kept the
    twin, quarantined rows, and rows left at ``curated``.  Rows a branch dropped before it tagged
    them (a reader's unreadable records) count for the one source that branch tags."""
    nodes = [n for n in ledger if "by_source" in ledger[n]]
    if curated is not None:
        lineage = _ancestors(curated, data_inputs) | {curated}
        nodes = [n for n in nodes if n in lineage]
    owner = _branch_sources(nodes, ledger, data_inputs)
    out: dict[str, dict[str, Any]] = {}
    for nid in nodes:
        e = ledger[nid]
        for src, c in e["by_source"].items():
            if src == UNKNOWN and len(owner[nid]) == 1:
                src = next(iter(owner[nid]))
            s = out.setdefault(src, {"rows_read": 0, "removed": [], "duplicates": [], "quarantined": 0,
                                     "rows_kept": 0})
            if not [i for i in data_inputs.get(nid, []) if i in ledger]:  # a reader: rows enter here
                s["rows_read"] += c["rows_in"]
            for rule, n in c["dropped"].items():
                s["removed"].append({"node": nid, "op": e["op"], "rule": rule, "rows": n})
            for kept_by, n in c["lost_to"].items():
                s["duplicates"].append({"node": nid, "op": e["op"], "kept_by": kept_by, "rows": n,
                                        "across_sources": kept_by != src})
            s["quarantined"] += c["quarantined"]
            if nid == (curated or nodes[-1]):
                s["rows_kept"] += c["rows_out"]
    for src, s in out.items():
        s["duplicates_across_sources"] = sum(d["rows"] for d in s["duplicates"] if d["across_sources"])
        s["duplicates_within"] = sum(d["rows"] for d in s["duplicates"] if not d["across_sources"])
        removed = sum(r["rows"] for r in s["removed"]) + s["duplicates_across_sources"] + s["duplicates_within"]
        s["adds_up"] = s["rows_read"] == s["rows_kept"] + removed + s["quarantined"]
    return dict(sorted(out.items()))


def _ancestors(node: str, data_inputs: dict[str, list[str]]) -> set[str]:
    seen: set[str] = set()
    todo = list(data_inputs.get(node, []))
    while todo:
        n = todo.pop()
        if n not in seen:
            seen.add(n)
            todo.extend(data_inputs.get(n, []))
    return seen


def _branch_sources(nodes: list[str], ledger: dict[str, dict[str, Any]],
                    data_inputs: dict[str, list[str]]) -> dict[str, set[str]]:
    """Each node's sources: those it names itself, or (a node before its branch's tagger names
    none) those of the nodes its rows go to (among ``nodes``)."""
    own = {n: {s for s in ledger[n]["by_source"] if s != UNKNOWN} for n in nodes}
    found = {n: set(own[n]) for n in nodes}
    for n in reversed(nodes):  # ledger order is the run's topological order: children come later
        for parent in data_inputs.get(n, []):
            if parent in found and not own[parent]:
                found[parent] |= found[n]
    return found


def tokens_section(rows: dict[str, list[dict[str, Any]]], source_key: str, token_key: str) -> dict[str, Any]:
    """Rows and tokens per source on each side of the split ({side: [{source, tokens}]})."""
    out: dict[str, Any] = {}
    for side, side_rows in rows.items():
        per: dict[str, dict[str, int]] = {}
        for r in side_rows:
            s = per.setdefault(str(r.get(source_key)), {"rows": 0, "tokens": 0})
            s["rows"] += 1
            s["tokens"] += int(r.get(token_key) or 0)
        out[side] = {"by_source": dict(sorted(per.items())), "rows": sum(v["rows"] for v in per.values()),
                     "tokens": sum(v["tokens"] for v in per.values())}
    return out


def training_section(config: dict[str, Any]) -> dict[str, Any]:
    """Tokens trained on, steps and the loss curve of a ``train_moe_lm`` Model's config (its
    ``history``: the logged steps)."""
    training = config.get("training") or {}
    keep = ("steps", "epochs", "tokens", "initial_loss", "final_loss", "seconds", "tokens_per_s", "device")
    return {**{k: training.get(k) for k in keep},
            "curve": [{"step": h["step"], "loss": h["loss"]} for h in config.get("history") or training.get("history") or []
                      if "step" in h and "loss" in h]}


def search_section(report: dict[str, Any], counts: dict[str, int]) -> dict[str, Any]:
    """Success per search run (with its interval) and every model call, as the search counted them
    and (for served policies) as the server counted them."""
    runs = [{k: line.get(k) for k in ("run", "method", "policies", "questions", "solved", "success_rate", "ci95",
                                      "sound_success_rate", "calls_mean", "failed_calls")}
            for line in report.get("table", [])]
    calls = {k.split(".", 1)[1]: n for k, n in counts.items() if k.startswith("calls.")}
    served = {k.split(".", 1)[1]: n for k, n in counts.items() if k.startswith("served_requests.")}
    return {"runs": runs, "calls": calls, "failed_calls": {k.split(".", 1)[1]: n for k, n in counts.items()
                                                            if k.startswith("failed_calls.")},
            "served_requests": served,
            "served_calls_match": {name: served[name] == calls.get(name) for name in served}}


def sft_section(report: dict[str, Any]) -> dict[str, Any]:
    """The SFT claims of the search report (machine verdicts from paired bootstrap intervals) and the
    evaluations they rest on."""
    evaluation = report.get("evaluation") or {}
    return {"claims": report.get("claims", []),
            "evaluation": {slot: {name: {k: r.get(k) for k in ("questions", "accuracy", "ci95")}
                                  for name, r in (m.get("policies") or {}).items()}
                           for slot, m in evaluation.items()},
            "sft_steps": report.get("sft_steps")}


def cap_section(reports: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """S-MBU / S-MFU, throughput and accuracy of each benchmarked model at its top concurrency."""
    out: dict[str, Any] = {}
    for name, m in reports.items():
        levels = m.get("levels") or []
        top = max(levels, key=lambda lv: lv.get("concurrency", 0)) if levels else {}
        choice = m.get("accuracy_choice") or {}
        out[name] = {"concurrency": top.get("concurrency"),
                     "accuracy": choice.get("acc", top.get("accuracy")),
                     "throughput_tokens_per_s": top.get("throughput_tokens_per_s"),
                     "tpot_p50_s": (top.get("tpot_s") or {}).get("p50"),
                     "decode_s_mbu": (top.get("decode") or {}).get("s_mbu"),
                     "decode_s_mfu": (top.get("decode") or {}).get("s_mfu"),
                     "prefill_s_mbu": (top.get("prefill") or {}).get("s_mbu"),
                     "radar": m.get("radar")}
    return out
