"""Per-node accounting computed from sink tallies, and the check that it adds up.

For every row-preserving node: rows_in = rows_out + sum(dropped) + duplicates + quarantined,
and a node's rows_in equals the rows_out of what feeds it.  Stages and aggregators transform
artifacts (e.g. rows -> a model), so only their own emitted rows are checked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from raypress.dag.sink import LIVE, TOTAL
from raypress.dag.source_tallies import by_source_entries, check_source_edges
from raypress.operators.base import OpKind
from raypress.schema import TombstoneKind


@dataclass
class Ledger:
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    status: str = "running"  # running | succeeded | failed | cancelled (by a signal): never more than the run did
    error: str | None = None  # why a failed run stopped
    unfinished: list[str] = field(default_factory=list)  # nodes a failed run did not finish
    warnings: list[str] = field(default_factory=list)  # the run added up, but a node did something suspect

    def to_json(self) -> dict:
        """``adds_up`` holds only for a finished run: a failed one did not account for every row."""
        out: dict[str, Any] = {"status": self.status, "nodes": self.nodes,
                               "adds_up": self.status == "succeeded" and not self.problems,
                               "problems": self.problems}
        if self.error is not None:
            out["error"] = self.error
        if self.unfinished:
            out["unfinished"] = self.unfinished
        if self.warnings:
            out["warnings"] = self.warnings
        return out

    @classmethod
    def from_json(cls, data: dict) -> "Ledger":
        return cls(nodes=dict(data.get("nodes", {})), problems=list(data.get("problems", [])),
                   status=str(data.get("status", "succeeded")), error=data.get("error"),
                   unfinished=list(data.get("unfinished", [])), warnings=list(data.get("warnings", [])))


def entry(op: str, kind: OpKind, rows_in: int, rows_out: int, dropped: dict[str, int] | None = None,
          duplicates: int = 0, quarantined: int = 0, seconds: float = 0.0, **extra: Any) -> dict[str, Any]:
    return {"op": op, "kind": kind.value, "rows_in": rows_in, "rows_out": rows_out,
            "dropped": dict(sorted((dropped or {}).items())), "duplicates": duplicates,
            "quarantined": quarantined, "seconds": round(seconds, 3), **extra}


def segment_entries(chain: list[tuple[str, str, OpKind]], totals: dict[tuple[str, str, str], int],
                    expected_in: int | None, seconds: dict[str, float]) -> tuple[dict[str, dict], list[str]]:
    """Ledger entries for a segment `chain` of (node id, op name, kind) from its sink's tallies.

    `expected_in` is the independently counted number of rows that entered the segment's head
    from upstream (None when the head reads files itself)."""
    problems: list[str] = []
    total = totals.get(("", TOTAL, ""), 0)
    live = totals.get(("", LIVE, ""), 0)
    chain_ids = {nid for nid, _, _ in chain}
    strangers = {k[0] for k in totals if k[0] and k[0] not in chain_ids}
    if strangers:
        problems.append(f"segment ending at '{chain[-1][0]}' received tombstones of nodes outside it: "
                        f"{sorted(strangers)}")
    head_id, _, head_kind = chain[0]
    if expected_in is not None and head_kind != OpKind.STAGE and total != expected_in:
        problems.append(f"node '{head_id}': {total} rows arrived but its inputs produced {expected_in}")
    entries: dict[str, dict] = {}
    rows = total
    for nid, op, kind in chain:
        dropped = {r: n for (node, k, r), n in totals.items() if node == nid and k == TombstoneKind.FILTERED.value}
        dups = sum(n for (node, k, _), n in totals.items() if node == nid and k == TombstoneKind.DUPLICATE.value)
        errs = sum(n for (node, k, _), n in totals.items() if node == nid and k == TombstoneKind.ERROR.value)
        out = rows - sum(dropped.values()) - dups - errs
        entries[nid] = entry(op, kind, rows, out, dropped, dups, errs, seconds.get(nid, 0.0))
        rows = out
    if rows != live:
        problems.append(f"segment ending at '{chain[-1][0]}': {live} live rows reached the sink but the "
                        f"per-node counts leave {rows} (an op changed the row count)")
    by_source, source_problems = by_source_entries([nid for nid, _, _ in chain], totals)
    for nid, split in by_source.items():
        entries[nid]["by_source"] = split
    return entries, problems + source_problems


def check_edges(ledger: Ledger, inputs_of: dict[str, list[str]], kinds: dict[str, OpKind]) -> None:
    """rows_in of a row-preserving node == sum of its Dataset inputs' rows_out; equations hold."""
    for nid, e in ledger.nodes.items():
        if e.get("transforms"):
            continue
        removed = sum(e["dropped"].values()) + e["duplicates"] + e["quarantined"]
        if e["rows_in"] != e["rows_out"] + removed:
            ledger.problems.append(f"node '{nid}': in {e['rows_in']} != out {e['rows_out']} + removed {removed}")
        ins = inputs_of.get(nid) or []
        if ins and kinds.get(nid) != OpKind.STAGE and all(i in ledger.nodes for i in ins):
            upstream = sum(ledger.nodes[i]["rows_out"] for i in ins)
            if upstream != e["rows_in"]:
                msg = f"node '{nid}': rows_in {e['rows_in']} but its inputs produced {upstream}"
                if msg not in ledger.problems:
                    ledger.problems.append(msg)
    ledger.problems.extend(p for p in check_source_edges(ledger.nodes, inputs_of) if p not in ledger.problems)
