"""Per-source accounting: the sink's tallies split by a row's source, and the ledger's ``by_source``.

Why: a pipeline that unions several corpora (a crawl, filings, package descriptions) and dedups
across them must say, per source, what each rule removed and which source a cross-source duplicate
lost its row to — the whole-run counts cannot.  The source is a column (``settings.source_key``,
set by ``tag_source_mapper``); a duplicate's kept twin names its source by the prefix of its id
(``tag_source_mapper`` writes ids ``<source>/<id>``), since a dedup tombstone carries only the
twin's id.  Counts come from the data at the sink, as every other ledger number.

Tally rows use the sink's schema with kind ``_src`` and reason ``source \\x1f kind \\x1f detail``
(detail: a filter's rule, a duplicate's twin source; kinds ``_total`` / ``_live`` at node "").
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from raypress.schema import KIND_COL, NO_SOURCE, NODE_COL, REASON_COL, TombstoneKind

SOURCE_TALLY = "_src"
SEP = "\x1f"
TOTAL, LIVE = "_total", "_live"
UNKNOWN = NO_SOURCE  # rows without a source: dropped before they were tagged, or by an op that lost the column


def twin_source(twin_id: str) -> str:
    """The source a kept twin's id names (``<source>/<id>``), or "" where it names none."""
    return twin_id.split("/", 1)[0] if "/" in twin_id else ""


def source_tallies(table: pa.Table, mask: pa.ChunkedArray | None, source_key: str) -> list[tuple[str, str, str, int]]:
    """Tally rows of ``table`` (every row of a sink call) by source: total, live, and each node's
    removals by kind and rule (duplicates by their twin's source)."""
    if source_key not in table.column_names:
        sources = pa.array([UNKNOWN] * table.num_rows, pa.string())
    else:
        sources = pc.fill_null(pc.cast(table.column(source_key), pa.string()), UNKNOWN)
    out: list[tuple[str, str, str, int]] = []
    for src, n in _counts(sources).items():
        out.append(("", SOURCE_TALLY, f"{src}{SEP}{TOTAL}{SEP}", n))
    live = sources if mask is None else pc.filter(sources, mask)
    for src, n in _counts(live).items():
        out.append(("", SOURCE_TALLY, f"{src}{SEP}{LIVE}{SEP}", n))
    if mask is None:
        return out
    dead = pc.invert(mask)
    nodes = pc.filter(table.column(NODE_COL), dead).to_pylist()
    kinds = pc.filter(table.column(KIND_COL), dead).to_pylist()
    reasons = pc.filter(table.column(REASON_COL), dead).to_pylist()
    grouped: dict[tuple[str, str], int] = {}
    for node, kind, reason, src in zip(nodes, kinds, reasons, pc.filter(sources, dead).to_pylist()):
        detail = twin_source(reason or "") if kind == TombstoneKind.DUPLICATE.value else (reason or "")
        key = (node, f"{src}{SEP}{kind}{SEP}{detail}")
        grouped[key] = grouped.get(key, 0) + 1
    out.extend((node, SOURCE_TALLY, reason, n) for (node, reason), n in grouped.items())
    return out


def _counts(values: pa.ChunkedArray | pa.Array) -> dict[str, int]:
    counted = pc.value_counts(values)
    return {str(v): int(n) for v, n in zip(counted.field("values").to_pylist(), counted.field("counts").to_pylist())}


def by_source_entries(chain: list[str], totals: dict[tuple[str, str, str], int]) -> tuple[dict[str, dict], list[str]]:
    """``by_source`` of each node of a segment's ``chain`` from its summed tallies, and problems.

    Per source: rows_in, rows_out, dropped by rule, duplicates with ``lost_to`` (the kept twins'
    sources, where their ids name one) and quarantined, walked down the chain as the whole-run
    counts are; the last node's rows_out must equal the live rows the sink counted per source."""
    split: dict[tuple[str, str, str, str], int] = {}
    for (node, kind, reason), n in totals.items():
        if kind == SOURCE_TALLY:
            src, what, detail = reason.split(SEP, 2)
            split[(node, src, what, detail)] = split.get((node, src, what, detail), 0) + n
    if not split:
        return {}, []
    rows = {src: n for (node, src, what, _), n in split.items() if not node and what == TOTAL}
    live = {src: n for (node, src, what, _), n in split.items() if not node and what == LIVE}
    known = set(rows)
    entries: dict[str, dict] = {}
    for nid in chain:
        mine: dict[str, dict[str, Any]] = {}
        for src in sorted(rows):
            dropped = {d: n for (node, s, what, d), n in split.items()
                       if node == nid and s == src and what == TombstoneKind.FILTERED.value}
            lost = {}
            for (node, s, what, d), n in split.items():
                if node == nid and s == src and what == TombstoneKind.DUPLICATE.value:
                    lost[d if d in known else UNKNOWN] = lost.get(d if d in known else UNKNOWN, 0) + n
            errors = sum(n for (node, s, what, _), n in split.items()
                         if node == nid and s == src and what == TombstoneKind.ERROR.value)
            out = rows[src] - sum(dropped.values()) - sum(lost.values()) - errors
            mine[src] = {"rows_in": rows[src], "rows_out": out, "dropped": dict(sorted(dropped.items())),
                         "duplicates": sum(lost.values()), "lost_to": dict(sorted(lost.items())),
                         "quarantined": errors}
            rows[src] = out
        entries[nid] = {src: counts for src, counts in mine.items() if counts["rows_in"]}
    problems = [f"segment ending at '{chain[-1]}': source {src!r} has {live.get(src, 0)} live rows at the sink "
                f"but its per-node counts leave {n}" for src, n in rows.items() if live.get(src, 0) != n]
    return entries, problems


def check_source_edges(nodes: dict[str, dict], inputs_of: dict[str, list[str]]) -> list[str]:
    """Per source, a node's rows_in equals what its inputs gave that source (where all keep counts)."""
    problems = []
    for nid, e in nodes.items():
        ins = inputs_of.get(nid) or []
        if e.get("transforms") or "by_source" not in e or not ins:
            continue
        if not all("by_source" in nodes.get(i, {}) for i in ins):
            continue
        given: dict[str, int] = {}
        for i in ins:
            for src, counts in nodes[i]["by_source"].items():
                given[src] = given.get(src, 0) + counts["rows_out"]
        if given.get(UNKNOWN):  # rows not tagged yet upstream (the tagger heads this node's segment)
            continue
        have = {src: c["rows_in"] for src, c in e["by_source"].items()}
        if set(have) == {UNKNOWN}:  # an op of this node's segment dropped the source column: no split to check
            continue
        for src in sorted(set(given) | set(have)):
            if given.get(src, 0) != have.get(src, 0):
                problems.append(f"node '{nid}': source {src!r} rows_in {have.get(src, 0)} but its inputs gave "
                                f"{given.get(src, 0)}")
    return problems
