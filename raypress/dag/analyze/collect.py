"""The analysis of a finished stats-mode run, computed inside Ray.

Each writer's output is read back with only the columns the analysis needs (ids, stats, text or a
token count, slice keys); Ray tasks turn its files into ``Partial`` sketches a batch at a time
(``sketch_tasks``); the driver merges them as they land (its memory is the sketches', not the
rows').  Deduplicators'
clusters come from their rejects, grouped by the kept twin in Ray."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Iterator

import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq

from raypress.dag.analyze.block import SLICE_COLUMNS, TOKEN_COLUMNS, FilterSpec, OutputPlan
from raypress.dag.analyze.finalize import output_report
from raypress.dag.analyze.partial import Partial
from raypress.dag.analyze.stat_sketch import KLL_K, rank_error
from raypress.dag.analyze.fine_bins import GAMMA
from raypress.dag.analyze.sketch_tasks import sketch_in_ray, sketch_locally
from raypress.dag.analyze.thresholds import stat_thresholds
from raypress.dag.validate import ValidatedPipeline
from raypress.operators.base import OpKind
from raypress.schema import ID_COL, KIND_COL, NODE_COL, REASON_COL

SCHEMA = "raypress.analysis/1"
LOCAL_BYTES = 32 * 2 ** 20  # outputs (or rejects) smaller than this are sketched in this process
SAMPLE_PAIRS = 5


def ancestors(vp: ValidatedPipeline, nid: str) -> set[str]:
    seen: set[str] = set()
    todo = [p for ps in vp.nodes[nid].slots.values() for p in ps]
    while todo:
        p = todo.pop()
        if p not in seen:
            seen.add(p)
            todo.extend(q for qs in vp.nodes[p].slots.values() for q in qs)
    return seen


def output_files(path: str) -> tuple[str, list[str]] | None:
    """(format, files) of a writer's destination: parquet or JSON Lines; None for other formats."""
    p = Path(path)
    if not p.exists():
        return None
    files = [p] if p.is_file() else sorted(x for x in p.rglob("*") if x.is_file() and not x.name.startswith("."))
    for fmt, suffixes in (("parquet", (".parquet",)), ("json", (".jsonl", ".json", ".jsonl.gz", ".json.gz"))):
        chosen = [str(f) for f in files if f.name.endswith(suffixes)]
        if chosen:
            return fmt, chosen
    return None


def file_columns(fmt: str, first: str) -> list[str]:
    if fmt == "parquet":
        return pq.read_schema(first).names
    opener = __import__("gzip").open if first.endswith(".gz") else open
    with opener(first, "rt") as fh:
        line = fh.readline()
    try:
        return list(json.loads(line)) if line.strip() else []
    except json.JSONDecodeError:
        return []


def make_plan(vp: ValidatedPipeline, writer: str, columns: list[str]) -> OutputPlan:
    above = ancestors(vp, writer)
    filters = []
    for nid in vp.order:
        node = vp.nodes[nid]
        if nid in above and node.kind == OpKind.FILTER:
            params = node.params.model_dump() if node.params is not None else {}
            names = tuple(getattr(node.op_cls, "stat_names", ()) or ())
            filters.append(FilterSpec(nid, node.op_cls.name, node.op_cls, node.params, names,
                                      stat_thresholds(names, params), node.runtime.range_rule))
    text_key = next((getattr(f.params, "text_key", None) for f in filters if getattr(f.params, "text_key", None)),
                    "text")
    return OutputPlan(writer, filters, text_key if text_key in columns else None,
                      next((c for c in TOKEN_COLUMNS if c in columns), None),
                      [k for k, c in SLICE_COLUMNS.items() if c in columns])


def analyze_output(plan: OutputPlan, fmt: str, files: list[str], columns: list[str],
                   on_ray: bool | None = None) -> Partial:
    """The merged sketches of an output: in Ray tasks (``sketch_tasks``), or here for an output
    smaller than ``LOCAL_BYTES`` (Ray's task start-ups would cost more than such a pass)."""
    wanted = [c for c in (ID_COL, "stats", plan.text_key, plan.token_column, *SLICE_COLUMNS.values())
              if c and c in columns]
    wanted = list(dict.fromkeys(wanted))
    if on_ray is None:
        on_ray = sum(Path(f).stat().st_size for f in files) > LOCAL_BYTES
    if on_ray:
        return sketch_in_ray(plan, fmt, files, wanted)
    return sketch_locally(plan, fmt, files, wanted)


def upstream_counts(vp: ValidatedPipeline, writer: str, ledger: dict[str, Any]) -> list[dict[str, Any]]:
    """The ledger's rows at each non-filter step before the writer that changed the count."""
    above = ancestors(vp, writer)
    steps = []
    for nid in vp.order:
        entry = (ledger.get("nodes") or {}).get(nid)
        node = vp.nodes[nid]
        if nid not in above or entry is None or node.kind == OpKind.FILTER:
            continue
        if node.kind == OpKind.READER or entry.get("rows_out") != entry.get("rows_in"):
            steps.append({"node": nid, "op": node.op_cls.name, "rows": entry.get("rows_out"), "tokens": None})
    return steps


def dedup_report(vp: ValidatedPipeline, run_dir: Path, nid: str) -> dict[str, Any]:
    """Cluster sizes (a kept row and the duplicates naming it) and a few pairs from the largest."""
    files = [str(f) for f in sorted((run_dir / "rejects").rglob("part-*.parquet"))]
    base = {"node": nid, "op": vp.nodes[nid].op_cls.name, "duplicates": 0, "clusters": 0, "cluster_sizes": [],
            "samples": []}
    if not files:
        return base
    sizes: dict[int, int] = {}
    largest: list[tuple[int, str]] = []
    for batch in _duplicates_per_twin(files, nid):
        counts = batch["count()"].to_pylist()
        for twin, n in zip(batch[REASON_COL].to_pylist(), counts):
            sizes[n + 1] = sizes.get(n + 1, 0) + 1
            largest = sorted(largest + [(n + 1, twin)], key=lambda x: (-x[0], x[1]))[:SAMPLE_PAIRS]
    base.update(duplicates=sum((s - 1) * c for s, c in sizes.items()), clusters=sum(sizes.values()),
                cluster_sizes=[{"size": s, "clusters": c} for s, c in sorted(sizes.items())])
    base["samples"] = _sample_pairs(vp, run_dir, nid, files, largest)
    return base


def _duplicates_per_twin(files: list[str], nid: str) -> Iterator[pa.Table]:
    """(kept twin id, duplicates naming it) batches: grouped by Ray's shuffle, or here for rejects
    smaller than ``LOCAL_BYTES``."""
    cols = [ID_COL, NODE_COL, KIND_COL, REASON_COL]
    mine = (pads.field(NODE_COL) == nid) & (pads.field(KIND_COL) == "duplicate")
    if sum(Path(f).stat().st_size for f in files) <= LOCAL_BYTES:
        table = pads.dataset(files, format="parquet").to_table(columns=cols, filter=mine)
        grouped = table.group_by(REASON_COL, use_threads=False).aggregate([(ID_COL, "count")])
        yield grouped.rename_columns([REASON_COL if c == REASON_COL else "count()" for c in grouped.column_names])
        return
    import ray.data
    from ray.data.expressions import col, lit

    dups = ray.data.read_parquet(files, columns=cols).filter(
        expr=(col(NODE_COL) == lit(nid)) & (col(KIND_COL) == lit("duplicate")))
    yield from dups.groupby(REASON_COL).count().iter_batches(batch_size=65536, batch_format="pyarrow")


def _sample_pairs(vp: ValidatedPipeline, run_dir: Path, nid: str, files: list[str],
                  largest: list[tuple[int, str]]) -> list[dict[str, Any]]:
    if not largest:
        return []
    twins = {twin for _, twin in largest}
    dup_of: dict[str, str] = {}
    table = pads.dataset(files, format="parquet").to_table(
        columns=[ID_COL, NODE_COL, REASON_COL],
        filter=(pads.field(NODE_COL) == nid) & pads.field(REASON_COL).isin(list(twins)))
    for row in table.to_pylist():
        dup_of.setdefault(row[REASON_COL], row[ID_COL])
    texts = _texts(vp, run_dir, nid, set(twins) | set(dup_of.values()))
    return [{"cluster_size": size, "kept_id": twin, "kept_text": texts.get(twin),
             "duplicate_id": dup_of.get(twin), "duplicate_text": texts.get(dup_of.get(twin, ""))}
            for size, twin in largest]


def _texts(vp: ValidatedPipeline, run_dir: Path, nid: str, ids: set[str]) -> dict[str, str]:
    """Texts of ``ids`` from the deduplicator's materialized input (where the run kept it)."""
    out: dict[str, str] = {}
    for parent in vp.nodes[nid].slots.get("data", []):
        folder = run_dir / "nodes" / parent
        parts = sorted(str(p) for p in folder.glob("part-*.parquet")) if folder.exists() else []
        if not parts:
            continue
        ds = pads.dataset(parts, format="parquet")
        text_col = "text" if "text" in ds.schema.names else None
        if text_col is None:
            continue
        for row in ds.to_table(columns=[ID_COL, text_col], filter=pads.field(ID_COL).isin(list(ids))).to_pylist():
            out[row[ID_COL]] = (row[text_col] or "")[:600]
    return out


def analyze_run(vp: ValidatedPipeline, run_dir: Path, ledger: dict[str, Any]) -> dict[str, Any]:
    """The whole analysis.json of a stats-mode run."""
    started = time.time()
    outputs, notes = [], []
    for nid in vp.order:
        node = vp.nodes[nid]
        if node.kind != OpKind.WRITER:
            continue
        dest = getattr(node.params, "path", None)
        found = output_files(dest) if dest else None
        if found is None:
            notes.append(f"{nid}: no parquet or JSON Lines output at {dest} to analyze")
            continue
        fmt, files = found
        columns = file_columns(fmt, files[0])
        plan = make_plan(vp, nid, columns)
        part = analyze_output(plan, fmt, files, columns)
        outputs.append(output_report(plan, part, upstream_counts(vp, nid, ledger)))
    dedup = [dedup_report(vp, run_dir, nid) for nid in vp.order if vp.nodes[nid].kind == OpKind.DEDUPLICATOR]
    return {"schema": SCHEMA, "pipeline": vp.spec.name, "run_dir": str(run_dir),
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "seconds": round(time.time() - started, 2),
            "sketch": {"quantiles": "KLL (Apache DataSketches)", "k": KLL_K, "rank_error": rank_error(),
                       "histogram": f"exact counts in fixed buckets {round((GAMMA - 1) * 100)}% wide, "
                                    "thresholds as edges"},
            "notes": notes + ["every filter sees every row that reached the writer (stats mode drops nothing); "
                              "a deduplicator ran on all of them, before the filters are applied here"],
            "outputs": outputs, "dedup": dedup}
