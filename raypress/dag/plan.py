"""The execution plan: where the lazy Ray Data chain must be cut and persisted.

Streaming nodes (Mapper, Filter) fuse into one Ray Data plan.  A node's output is materialized
(written under `nodes/<id>/` and read back) only where it must be: several consumers, a global
op, a stage or a union reads it, or nothing reads it.  Each materialized node or writer is the
*sink* of one segment: a linear chain from one source to that sink, run as one Ray Data job.
"""

from __future__ import annotations

from dataclasses import dataclass

from raypress.dag.validate import ValidatedPipeline, VNode
from raypress.operators.base import STREAMING_KINDS, OpKind
from raypress.schema import ArtifactType


@dataclass
class Segment:
    """A linear chain `nodes[0] -> ... -> nodes[-1]` executed as one streaming job."""

    nodes: list[str]

    @property
    def sink(self) -> str:
        return self.nodes[-1]

    @property
    def head(self) -> str:
        return self.nodes[0]


@dataclass
class Plan:
    pipeline: ValidatedPipeline
    materialize: dict[str, str]  # node id -> why it is materialized
    steps: list  # in execution order: Segment, or a node id for a non-streaming step (stage/aggregator)

    def node(self, nid: str) -> VNode:
        return self.pipeline.nodes[nid]


def _materialize_reason(node: VNode, nodes: dict[str, VNode]) -> str | None:
    if node.op_cls.output != ArtifactType.DATASET or node.kind == OpKind.WRITER:
        return None
    consumers = [nodes[c] for c in node.consumers]
    if not consumers:
        return "leaf: nothing reads it"
    if len(consumers) > 1:
        return f"branch: read by {len(consumers)} nodes"
    c = consumers[0]
    if c.kind not in STREAMING_KINDS and c.kind != OpKind.WRITER:
        return f"input of {c.kind.value} '{c.id}'"
    data_producers = c.slots.get("data", [])
    if node.id not in data_producers:
        slot = next(s for s, producers in c.slots.items() if node.id in producers)
        return f"side input '{slot}' of '{c.id}'"  # read whole by each task/actor, so it must exist first
    if len(data_producers) > 1:
        return f"part of a union read by '{c.id}'"
    if node.kind == OpKind.STAGE:
        return "output of a stage"
    return None


def make_plan(vp: ValidatedPipeline) -> Plan:
    nodes = vp.nodes
    materialize = {nid: r for nid in vp.order if (r := _materialize_reason(nodes[nid], nodes))}
    steps: list = []
    for nid in vp.order:
        node = nodes[nid]
        if node.op_cls.output != ArtifactType.DATASET:  # a stage/aggregator making a Model/Report
            steps.append(nid)
            continue
        if nid in materialize or node.kind == OpKind.WRITER:
            steps.append(Segment(_chain_to(nid, nodes, materialize)))
    return Plan(vp, materialize, steps)


def _chain_to(sink: str, nodes: dict[str, VNode], materialize: dict[str, str]) -> list[str]:
    """Walk back from the sink through non-materialized, single-input dataset producers."""
    chain = [sink]
    cur = nodes[sink]
    while True:
        data_inputs = cur.slots.get("data", [])
        if cur.kind in (OpKind.READER, OpKind.STAGE, OpKind.DEDUPLICATOR, OpKind.AGGREGATOR):
            break  # a source: reads files, or runs on materialized inputs
        if len(data_inputs) != 1 or data_inputs[0] in materialize:
            break
        cur = nodes[data_inputs[0]]
        chain.append(cur.id)
    return list(reversed(chain))


def describe(plan: Plan) -> list[dict]:
    """Rows for `raypress plan`, in execution order: by step, and within a step as its nodes run
    (a segment head first); nodes in no step last.  Each row: step, node, op, kind, inputs,
    resources, materialized (why)."""
    step_of: dict[str, int | str] = {}  # insertion order is the row order
    for i, step in enumerate(plan.steps):
        for nid in (step.nodes if isinstance(step, Segment) else [step]):
            step_of.setdefault(nid, i + 1)
    for nid in plan.pipeline.order:
        step_of.setdefault(nid, "-")
    rows = []
    for nid, step in step_of.items():
        node = plan.node(nid)
        res = node.resources
        workers = node.op_cls.planned_workers(node.params)
        rows.append({
            "node": nid,
            "op": node.op_cls.name,
            "kind": node.kind.value,
            "inputs": ", ".join(f"{k}={'+'.join(v)}" if k != "data" else "+".join(v) for k, v in node.slots.items()),
            "step": step,
            "resources": f"cpu={res.num_cpus:g}" + (f" gpu={res.num_gpus:g}" if res.num_gpus else "")
                         + (" actors" if node.op_cls.stateful else "") + (f"; {workers}" if workers else ""),
            "materialized": plan.materialize.get(nid, "writes files" if node.kind == OpKind.WRITER else ""),
        })
    return rows
