"""Run one segment: a head (a reader, a global op, a stage making a Dataset, or materialized
inputs), the streaming ops Ray fuses after it, and a sink that writes live rows to their
destination and tombstones to rejects/quarantine.  Returns the ledger entries counted from what
reached the sink, and the files the segment produced; resume and the ledger stay the runner's.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from raypress.artifacts import DatasetArtifact
from raypress.dag.blocks import cut_into_blocks
from raypress.dag.destination import Destination
from raypress.dag.error_budget import RunFailed, check_error_budget
from raypress.dag.execute import ExecutionPolicy, apply_streaming
from raypress.dag.fingerprint import files_under
from raypress.dag.ledger import segment_entries
from raypress.dag.run_artifacts import RunArtifacts, read_materialized
from raypress.dag.segment_progress import SegmentProgress, collect_tallies
from raypress.dag.sink import SegmentSink, number_parts, parts_in_order, sum_tallies
from raypress.dag.store import RunStore
from raypress.dag.validate import VNode
from raypress.operators.base import STREAMING_KINDS, OpKind, RunContext


@dataclass
class SegmentEnv:
    """What a segment needs of its run."""

    store: RunStore
    settings: dict[str, Any]
    policy: ExecutionPolicy
    artifacts: RunArtifacts
    timer: Any  # the run's OpTimer actor
    ctx: Callable[[str], RunContext]
    emit: Callable[[dict], None]
    cpu_meter: Any = None  # dag.cpu_meter.CpuMeter (None: not measured)


@dataclass
class SegmentResult:
    entries: dict[str, dict[str, Any]]
    problems: list[str]
    produced: dict[str, int]  # file -> size: the evidence resume checks
    output_path: str
    rows: int  # live rows out of the sink
    artifact: DatasetArtifact | None  # a materialized output (None: a writer's)
    warnings: list[tuple[str, str]] = field(default_factory=list)  # (node, message)


def run_segment(nodes: list[VNode], destination: Destination | None, env: SegmentEnv) -> SegmentResult:
    """Stream ``nodes`` (head first, sink last) through Ray Data and count what reached the sink."""
    import ray

    sink = nodes[-1]
    store = env.store
    writer = sink.make_op() if sink.kind == OpKind.WRITER else None
    out_dir = None if writer else store.node_dir(sink.id)
    dest = str(destination.reset_staging()) if destination is not None else None
    rejects, quarantine = store.rejects_root, store.quarantine_root  # the sink writes <root>/<node that dropped>/
    dropped_dirs = store.dropped_dirs(n.id for n in nodes)  # this segment's: another segment's stay as they are
    store.clear_outputs(sink.id, *([out_dir] if out_dir else []), nodes=[n.id for n in nodes])
    for n in nodes:
        env.emit({"event": "node_started", "node": n.id, "op": n.op_cls.name})
    start = time.perf_counter()
    if env.cpu_meter is not None:
        env.cpu_meter.start()
    chain = [(n.id, n.op_cls.name, n.kind) for n in nodes]
    try:  # whatever stops it before the commit (an error, a full disk, the error budget, a signal)
        # leaves nothing in the user's destination: no half export, no empty staging folder
        ds, expected_in, streaming, cut = _source(nodes, env)
        per_input = nodes[0].kind == OpKind.READER
        for n in streaming:
            ds = apply_streaming(ds, n, env.policy, env.artifacts.side(n), env.timer, cut, per_input)
        sink_fn = SegmentSink(sink.id, str(out_dir) if out_dir else None, writer, dest, str(rejects),
                              str(quarantine), bool(env.settings.get("keep_rejects")), env.timer,
                              env.settings.get("source_key"))
        compute = _sink_compute(env.policy, per_input)
        tallies = collect_tallies(ds.map_batches(sink_fn, batch_size=None, batch_format="pyarrow", **compute),
                                  SegmentProgress(chain, expected_in, env.emit))  # node_progress events on the way
        number_parts([Path(p) for p in (dest, out_dir) if p is not None] + dropped_dirs,
                     parts_in_order(tallies))
        busy = env.cpu_meter.utilisation() if env.cpu_meter is not None else None
        totals = sum_tallies(tallies)
        counted, _ = segment_entries(chain, totals, expected_in, {})
        check_error_budget(nodes, counted, float(env.settings.get("max_error_ratio", 0.01)), quarantine)
    except BaseException:
        if destination is not None:
            destination.discard_staging()
        raise
    written: dict[str, int] = {}
    commit_seconds = 0.0
    if writer is not None and destination is not None:
        commit_start = time.perf_counter()
        writer.finalize(dest, env.ctx(sink.id))
        written = destination.commit()
        commit_seconds = time.perf_counter() - commit_start
    entries, problems = segment_entries(chain, totals, expected_in,
                                        _seconds(nodes, env.timer, time.perf_counter() - start, commit_seconds))
    for e in entries.values():  # the segment's share of the cluster's CPUs, on each of its nodes
        e["cpu_utilisation"] = busy
    head = nodes[0]
    if head.kind in (OpKind.STAGE, OpKind.AGGREGATOR):
        entries[head.id].update(rows_in=env.artifacts.rows_in(head), transforms=True)
    live = entries[sink.id]["rows_out"]
    artifact = None
    if out_dir is not None:
        artifact = read_materialized(out_dir, live, float(env.settings.get("in_memory_mb", 64)),
                                     env.policy.block_rows)
    produced = {**written, **files_under([p for p in (out_dir, *dropped_dirs) if p is not None])}
    warnings = []
    counts = ray.get(env.timer.counts.remote())
    for n in nodes:
        if n.id in counts:
            entries[n.id]["counts"] = counts[n.id]
            warnings += [(n.id, message) for message in n.op_cls.count_warnings(n.params, counts[n.id])]
    return SegmentResult(entries, problems, produced, str(destination.target) if destination else str(out_dir),
                         live, artifact, warnings)


def _sink_compute(policy: ExecutionPolicy, after_reader: bool) -> dict[str, Any]:
    """The sink's compute strategy: the one Data-Juicer's ``np`` gave the reader and the streaming
    ops before it, so that Ray fuses the sink into their tasks.  With Ray's default the sink was an
    operator of its own: every block crossed the object store once more, sink tasks competed with
    the chain's for the CPUs (a text recipe's streaming segment kept 57-70% of them busy), and
    every op reported every batch's time to the OpTimer actor instead of once per block."""
    if not policy.np or not after_reader:
        return {}
    from raypress.operators.shared.files import np_task_pool

    return {"compute": np_task_pool(policy.np)}


def _seconds(nodes: list[VNode], timer: Any, wall: float, commit_seconds: float) -> dict[str, float]:
    """Each node's own time from the OpTimer; a writer's finalize + commit added, and the segment's
    wall time for a head or sink that did not time its own work."""
    import ray

    seconds = dict(ray.get(timer.snapshot.remote()))
    sink = nodes[-1]
    if sink.kind == OpKind.WRITER and sink.id in seconds:  # finalizing and committing are its own work too
        seconds[sink.id] += commit_seconds
    for n in nodes:
        if n.kind not in STREAMING_KINDS and n.id not in seconds:  # readers/writers time their own work
            seconds[n.id] = wall
    return seconds


def _source(nodes: list[VNode], env: SegmentEnv):
    """The lazy Dataset entering the segment, the rows expected there, the ops to stream, and
    whether the rows were cut into ``rows_per_block`` blocks (the ops' batches then fit one)."""
    head = nodes[0]
    ctx = env.ctx(head.id)
    ctx.input_rows = env.artifacts.rows_in(head) if head.kind != OpKind.READER else None
    if head.kind == OpKind.READER:
        ds, streaming = head.make_op().read(ctx), _streaming(nodes[1:])
        if env.policy.cuts(streaming):
            return cut_into_blocks(ds, env.policy.block_rows), None, streaming, True  # a task per block
        return ds, None, streaming, False
    if head.kind == OpKind.DEDUPLICATOR:
        data = env.artifacts.inputs(head)["data"]
        return head.make_op(env.artifacts.side(head)).apply(data.ds, ctx), data.rows, _streaming(nodes[1:]), False
    if head.kind in (OpKind.STAGE, OpKind.AGGREGATOR):
        op = head.make_op(env.artifacts.side(head))
        inputs = env.artifacts.inputs(head)
        art = op.run(inputs, ctx) if head.kind == OpKind.STAGE else op.apply(inputs["data"].ds, ctx)
        if not isinstance(art, DatasetArtifact):
            raise RunFailed(f"node '{head.id}' ({head.op_cls.name}) declares a Dataset output but returned "
                            f"{type(art).__name__}")
        return art.ds, None, _streaming(nodes[1:]), False
    data = env.artifacts.inputs(head)["data"]  # a streaming head whose inputs are materialized
    return data.ds, data.rows, _streaming(nodes), False


def _streaming(nodes: list[VNode]) -> list[VNode]:
    return [n for n in nodes if n.kind in STREAMING_KINDS]
