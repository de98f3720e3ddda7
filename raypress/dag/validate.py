"""Check a pipeline spec completely before anything runs, reporting every problem at once.

Checks: unknown ops and params (with "did you mean"), mistyped params, duplicate ids, missing
inputs, wrong input slots, cycles, artifact types that do not fit an edge, unknown columns.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping
from pathlib import Path

from pydantic import ValidationError

from raypress.dag.dj_compat import unavailable_text
from raypress.dag.dj_op_keys import NO_RUNTIME, NodeRuntime, split_runtime_keys
from raypress.dag.spec import PipelineSpec, Problem, read_spec
from raypress.dag.haproxy_loopback import INGRESSES, NO_BINARY, haproxy_binary
from raypress.dag.yaml_lines import PipelineFileError
from raypress.operators.base import OpKind, Operator, Params, Resources
from raypress.operators.registry import (
    OpUnavailable,
    get_op,
    known_names,
    missing_for_params,
    missing_requirements,
    missing_text,
)
from raypress.suggest import did_you_mean, did_you_mean_op
from raypress.schema import ArtifactType, ID_COL


@dataclass
class VNode:
    """A validated node: its op class, parsed params and named input slots."""

    id: str
    op_cls: type[Operator]
    params: Params | None
    raw_params: dict
    slots: dict[str, list[str]]
    consumers: list[str] = field(default_factory=list)
    stats_only: bool = False  # `mode: stats`: a filter annotates, drops nothing
    runtime: NodeRuntime = NO_RUNTIME  # what Data-Juicer's per-op keys (batch_size, num_proc, ...) set
    _frozen: bool = field(default=False, repr=False, compare=False)

    def __setattr__(self, name: str, value: object) -> None:
        if getattr(self, "_frozen", False):
            raise AttributeError(f"node {self.id!r} is resolved and cannot change ({name}): resolve the "
                                 "pipeline again instead (dag.resolve)")
        object.__setattr__(self, name, value)

    def freeze(self) -> None:
        self.consumers = tuple(self.consumers)  # type: ignore[assignment]
        self._frozen = True

    @property
    def kind(self) -> OpKind:
        return self.op_cls.kind

    @property
    def batch_size(self) -> int | None:
        """Rows per call of the op: the node's Data-Juicer ``batch_size``, else the op's own."""
        return self.runtime.batch_size or self.op_cls.batch_size

    @property
    def resources(self) -> Resources:
        """What one task or actor of this node asks Ray for (the op's, with the node's overrides)."""
        return self.runtime.resources(self.op_cls.resources)

    def make_op(self, artifacts=None) -> Operator:
        op = self.op_cls(self.params, artifacts)
        if self.runtime.range_rule is not None:
            op.range_rule = self.runtime.range_rule
        return op


@dataclass
class ValidatedPipeline:
    spec: PipelineSpec
    nodes: Mapping[str, VNode]
    order: list[str]  # topological

    def freeze(self) -> None:
        """What a resolved pipeline becomes: its nodes can no longer be replaced or changed."""
        for node in self.nodes.values():
            node.freeze()
        self.nodes = MappingProxyType(dict(self.nodes))
        self.order = tuple(self.order)  # type: ignore[assignment]


class PipelineInvalid(Exception):
    def __init__(self, problems: list[Problem]):
        super().__init__("\n".join(str(p) for p in problems))
        self.problems = problems


class PipelineUnreadable(PipelineInvalid):
    """The file is no pipeline at all (missing, binary, too large, not YAML): one problem, one line."""


def read_pipeline_spec(path: str | Path, overrides=()) -> PipelineSpec:
    """Parse a pipeline file (the one YAML parse a process does); PipelineUnreadable when it is no
    pipeline at all."""
    try:
        return read_spec(path, overrides)
    except PipelineFileError as exc:
        raise PipelineUnreadable([Problem(exc.file, exc.line, exc.message)]) from None
    except OSError as exc:
        raise PipelineUnreadable([Problem(str(path), None, f"cannot read pipeline: {exc.strerror or exc}")]) from None


def load_pipeline(path: str | Path, overrides=()) -> ValidatedPipeline:
    """Read + validate (what `validate` and `plan` need; a run resolves: ``dag.resolve``); raise
    :class:`PipelineInvalid` listing every problem."""
    spec = read_pipeline_spec(path, overrides)
    try:
        return validate(spec)
    finally:  # the recipe's notices and those validation adds for its ops' Data-Juicer keys
        print_notices(spec)


def print_notices(spec: PipelineSpec) -> None:
    """One line per accepted Data-Juicer key that raypress handles its own way (stderr: not an error)."""
    for notice in spec.notices:
        print(f"note: {notice}", file=sys.stderr)


def validate(spec: PipelineSpec, run_dir: str | None = None, check_inputs: bool = False) -> ValidatedPipeline:
    """Every problem of ``spec`` at once; ``run_dir``: the run directory its ``{run_dir}`` became
    (a resolved file records its own), which no writer may hold or write into; ``check_inputs``:
    a reader pattern matching nothing on this machine is a problem too (a run's, not the file's:
    ``dag.input_check``)."""
    problems = list(spec.problems)
    f = spec.doc.file
    known = known_names()
    nodes: dict[str, VNode] = {}
    seen_ids: dict[str, int | None] = {}
    specs = {}

    for ns in spec.nodes:
        line = spec.line(ns.path)
        if ns.id in seen_ids:
            problems.append(Problem(f, spec.line(ns.path + ("id",)),
                                    f"duplicate node id (first defined at line {seen_ids[ns.id]})",
                                    node=ns.id, key="id"))
            continue
        seen_ids[ns.id] = spec.line(ns.path + ("id",))
        specs[ns.id] = ns
        missing = missing_requirements(ns.op) if ns.op else {}
        if missing:
            problems.append(Problem(f, spec.line(ns.path + ("op",)) or line, missing_text(ns.op, missing),
                                    node=ns.id, key="op"))
            continue
        try:
            op_cls = get_op(ns.op) if ns.op else None
        except OpUnavailable as exc:
            problems.append(Problem(f, spec.line(ns.path + ("op",)) or line, str(exc), node=ns.id, key="op"))
            continue
        if op_cls is None:
            if ns.op:
                problems.append(Problem(f, spec.line(ns.path + ("op",)) or line, unavailable_text(ns.op) or
                                        f"unknown op {ns.op!r}{did_you_mean_op(ns.op, known)}", node=ns.id, key="op"))
            continue
        if spec.text_key and ns.path[:1] == ("process",) and "text_key" not in ns.params \
                and "text_key" in op_cls.Params.model_fields:  # Data-Juicer's `text_keys`
            ns.params = {**ns.params, "text_key": spec.text_key}
        split = split_runtime_keys(op_cls, ns.params)
        for key, why in split.problems.items():
            problems.append(Problem(f, _key_line(spec, ns, key) or line, why, node=ns.id, key=key))
        for key, why in split.notices.items():
            where = _key_line(spec, ns, key)
            spec.notices.append(f"{f}:{where} `{ns.id}.{key}`: {why}" if where else f"{f} `{ns.id}.{key}`: {why}")
        params = _validate_params(op_cls, ns, spec, problems, split.params)  # None when invalid
        if split.problems:
            params = None
        for key, why in (missing_for_params(ns.op, params) if params is not None else []):
            problems.append(Problem(f, _key_line(spec, ns, key) or line, why, node=ns.id, key=key))
            params = None
        nodes[ns.id] = VNode(ns.id, op_cls, params, ns.params, ns.input_slots(), stats_only=ns.mode == "stats",
                             runtime=split.runtime)
        if ns.mode == "stats" and op_cls.kind != OpKind.FILTER:
            problems.append(Problem(f, spec.line(ns.path + ("mode",)), f"mode: stats applies to filters; "
                                    f"{ns.op} is a {op_cls.kind.value}", node=ns.id, key="mode"))

    # Inputs and artifact types.
    all_ids = set(specs)
    for node in nodes.values():
        ns = specs[node.id]
        in_line = spec.line(ns.path + ("input",)) or spec.line(ns.path)
        declared = node.op_cls.inputs
        if not declared and node.slots:
            problems.append(Problem(f, in_line, f"a {node.kind.value} takes no input", node=node.id, key="input"))
            continue
        if declared and not node.slots:
            problems.append(Problem(f, spec.line(ns.path), f"missing `input` (this op reads {_slots_text(declared)})",
                                    node=node.id, key="input"))
            continue
        for slot, producers in node.slots.items():
            if slot not in declared:
                problems.append(Problem(f, in_line, f"unknown input slot {slot!r}; this op reads "
                                        f"{_slots_text(declared)}{did_you_mean(slot, declared)}",
                                        node=node.id, key=f"input.{slot}"))
                continue
            want = declared[slot]
            if len(producers) > 1 and want != ArtifactType.DATASET and slot not in node.op_cls.list_inputs:
                problems.append(Problem(f, in_line, f"input {slot!r} takes one {want.value}, got a list",
                                        node=node.id, key=f"input.{slot}"))
            for pid in producers:
                if pid not in all_ids:
                    problems.append(Problem(f, in_line, f"input {pid!r} is not a node{did_you_mean(pid, all_ids)}",
                                            node=node.id, key="input"))
                    continue
                if pid == node.id:
                    problems.append(Problem(f, in_line, "a node cannot read itself", node=node.id, key="input"))
                    continue
                producer = nodes.get(pid)
                if producer is None:
                    continue  # its own problem is already reported
                if producer.kind == OpKind.WRITER:
                    problems.append(Problem(f, in_line, f"input {pid!r} is a writer (a sink); read what it "
                                            "writes with a reader instead", node=node.id, key="input"))
                    continue
                got = producer.op_cls.output
                if got != want:
                    problems.append(Problem(f, in_line, f"input {pid!r} gives a {got.value} but {slot!r} "
                                            f"needs a {want.value}", node=node.id, key=f"input.{slot}"))
                    continue
                producer.consumers.append(node.id)
        missing_slots = [s for s in declared if s not in node.slots and s not in node.op_cls.optional_inputs]
        if node.slots and missing_slots:
            problems.append(Problem(f, in_line, f"missing input slot(s) {missing_slots}; this op reads "
                                    f"{_slots_text(declared)}", node=node.id, key="input"))

    order, cycle = _toposort(nodes)
    if cycle:
        ns = specs[cycle[0]]
        problems.append(Problem(f, spec.line(ns.path + ("input",)) or spec.line(ns.path),
                                "cycle: " + " -> ".join(cycle + [cycle[0]]), node=cycle[0], key="input"))
    else:
        problems.extend(_check_columns(nodes, order, specs, spec))
    problems.extend(_check_settings(spec))
    problems.extend(_check_code(nodes, specs, spec))
    problems.extend(_check_writer_destinations(nodes, specs, spec, run_dir))
    if check_inputs:
        from raypress.dag.input_check import unmatched_inputs

        problems.extend(unmatched_inputs(nodes, specs, spec, run_dir or (
            spec.resolution.run_dir if spec.resolution is not None else None)))
    if problems:
        raise PipelineInvalid(sorted(problems, key=lambda p: (p.file != f, p.line or 0)))
    return ValidatedPipeline(spec=spec, nodes=nodes, order=order)


def _slots_text(declared: dict[str, ArtifactType]) -> str:
    return ", ".join(f"{k}: {v.value}" for k, v in declared.items()) or "nothing"


def _key_line(spec: PipelineSpec, ns, key: str) -> int | None:
    """The line of a node's parameter: under ``with:`` in a node list, directly under the op in a
    Data-Juicer ``process:`` item."""
    if ns.path[:1] == ("process",):
        return spec.line(ns.path + (key,))
    return spec.line(ns.path + ("with", key))


def _validate_params(op_cls, ns, spec, problems, given: dict) -> Params | None:
    f = spec.doc.file
    fields = op_cls.Params.model_fields
    ok = True
    for key in given:
        if key not in fields:
            ok = False
            problems.append(Problem(f, _key_line(spec, ns, key),
                                    f"unknown parameter for {op_cls.name}{did_you_mean(str(key), fields)}"
                                    f" (known: {', '.join(fields) or 'none'})", node=ns.id, key=str(key)))
    try:
        params = op_cls.Params.model_validate(given)
    except ValidationError as exc:
        for err in exc.errors():
            if err["type"] == "extra_forbidden":
                continue  # reported above with a suggestion
            loc = [str(x) for x in err["loc"]]
            key = loc[0] if loc else None
            line = _key_line(spec, ns, key) if key else spec.line(ns.path)
            if err["type"] == "missing":
                line = spec.line(ns.path)
                msg = f"missing required parameter for {op_cls.name}"
            else:
                msg = f"{err['msg']} (got {err.get('input')!r})"
            problems.append(Problem(f, line, msg, node=ns.id, key=".".join(loc) or None))
        return None
    return params if ok else None


def _toposort(nodes: dict[str, VNode]) -> tuple[list[str], list[str]]:
    """Nodes by depth (longest path from a source), each depth in declaration order -- the rounds
    of Kahn's algorithm -- in linear time; on a cycle, return the nodes of one cycle."""
    deps = {nid: {p for ps in n.slots.values() for p in ps if p in nodes} for nid, n in nodes.items()}
    consumers: dict[str, list[str]] = {nid: [] for nid in deps}
    for nid, d in deps.items():
        for p in d:
            consumers[p].append(nid)
    waiting = {nid: len(d) for nid, d in deps.items()}
    depth = {nid: 0 for nid, n in waiting.items() if n == 0}
    ready = list(depth)
    for nid in ready:  # grows while we walk it: each node enters once, when its last input is placed
        for c in consumers[nid]:
            depth[c] = max(depth.get(c, 0), depth[nid] + 1)
            waiting[c] -= 1
            if waiting[c] == 0:
                ready.append(c)
    index = {nid: i for i, nid in enumerate(deps)}
    order = sorted(ready, key=lambda nid: (depth[nid], index[nid]))
    if len(order) < len(deps):
        return order, _find_cycle({n: d for n, d in deps.items() if waiting[n]})
    return order, []


def _find_cycle(deps: dict[str, set[str]]) -> list[str]:
    """Walk inputs from a node that waits on another: among such nodes that walk must close a loop."""
    start = next(iter(deps))
    path, seen = [start], {start: 0}
    while True:
        nxt = min(p for p in deps[path[-1]] if p in deps)
        if nxt in seen:
            return path[seen[nxt]:]
        seen[nxt] = len(path)
        path.append(nxt)


def _check_columns(nodes, order, specs, spec) -> list[Problem]:
    """Follow known column sets along Dataset edges; a read of a column nobody wrote is an error."""
    problems = []
    columns: dict[str, set[str] | None] = {}
    for nid in order:
        node = nodes[nid]
        try:
            op = node.make_op() if node.params is not None else None
        except Exception:  # an op whose constructor needs a model: column info from the class
            op = None
        written = op.columns_written() if op is not None else node.op_cls.writes
        inputs = node.slots.get("data", [])
        if node.params is None:  # its own parameters are wrong (said above): what it writes is unknown,
            columns[nid] = None  # so nothing below it is blamed for columns it cannot see
            continue
        if node.kind == OpKind.READER:
            columns[nid] = None if written is None else {ID_COL, *written}
            continue
        known_sets = [columns.get(p) for p in inputs]
        available = None if (not inputs or any(s is None for s in known_sets)) else set.union(*known_sets)
        if available is not None and op is not None:
            for col in op.columns_read():
                if col not in available:
                    ns = specs[nid]
                    key_path = ns.path + ("with", "text_key") if "text_key" in ns.params else ns.path
                    problems.append(Problem(spec.doc.file, spec.line(key_path),
                                            f"reads column {col!r}, which no upstream node provides "
                                            f"(available: {', '.join(sorted(available))})", node=nid,
                                            key="text_key" if "text_key" in ns.params else None))
        if node.kind in (OpKind.MAPPER, OpKind.FILTER, OpKind.DEDUPLICATOR, OpKind.WRITER):
            dropped = set(op.columns_dropped()) if op is not None else set()
            columns[nid] = None if (available is None or written is None) else (available - dropped) | set(written)
        else:
            columns[nid] = None if written is None or node.op_cls.output != ArtifactType.DATASET else set(written)
    return problems


def _check_writer_destinations(nodes: dict[str, VNode], specs: dict, spec: PipelineSpec,
                               run_dir: str | None = None) -> list[Problem]:
    """Two writers with one destination (or one inside the other) would replace each other's files,
    and a writer in the run directory's own folders would replace the run's (``run_dir_clash``).

    Linear in the writers (times path depth): each path is looked up among those claimed before it,
    its ancestors among them, and it among their ancestors."""
    import os

    problems: list[Problem] = []
    claimed: dict[str, str] = {}  # normalized path -> node id, in the YAML's order
    below: dict[str, str] = {}  # every ancestor folder of a claimed path -> the node claiming inside it
    run_dir = run_dir or (spec.resolution.run_dir if spec.resolution is not None else None)
    for nid, node in nodes.items():
        path = getattr(node.params, "path", None) if node.kind == OpKind.WRITER else None
        if not isinstance(path, str) or not path:
            continue
        clash = run_dir_clash(path, run_dir)
        if clash is not None:
            ns = specs[nid]
            problems.append(Problem(spec.doc.file, spec.line(ns.path + ("with", "path")) or spec.line(ns.path),
                                    clash, node=nid, key="path"))
            continue
        norm = os.path.normpath(os.path.abspath(os.path.expanduser(path)))  # `{run_dir}` stays literal
        ancestors = _ancestors(norm)
        other = claimed.get(norm) or next((claimed[a] for a in ancestors if a in claimed), None) or below.get(norm)
        if other is not None:
            ns = specs[nid]
            how = "the same destination" if claimed.get(norm) == other else "a destination overlapping that"
            problems.append(Problem(spec.doc.file, spec.line(ns.path + ("with", "path")) or spec.line(ns.path),
                                    f"writes to {how} of node '{other}' (line "
                                    f"{spec.line(specs[other].path)}): {path!r}; each writer needs its own path",
                                    node=nid, key="path"))
            continue
        claimed[norm] = nid
        for a in ancestors:
            below.setdefault(a, nid)
    return problems


# What the run directory holds of its own (``store.RunStore``): never a writer's destination, never an
# input of a step (another writer's destination inside the run directory may be either)
RUN_DIR_INTERNALS = ("nodes", "state", "rejects", "quarantine", "models", "reports", "logs", "events.jsonl",
                     "ledger.json", "ledger.json.tmp", "pipeline.yaml", "pipeline.yaml.tmp", ".lock")
RUN_DIR_TOKEN = "{run_dir}"
_INTERNAL_WHAT = {"nodes": "materialized outputs", "state": "what each step read and wrote, for resume",
                  "rejects": "each node's filtered and duplicate rows, with their reasons",
                  "quarantine": "each node's failed rows, with their errors",
                  "models": "trained models", "reports": "reports", "logs": "the run's printed lines"}


def run_dir_clash(path: str, run_dir: str | None = None) -> str | None:
    """Why ``path`` may not be a writer's destination, or None: the run directory itself, one of its
    own folders or files (``{run_dir}/rejects``, ...), or (once the run directory is known) a folder
    holding it. Why: the run refused "files raypress did not write" there, and ``overwrite: true``
    deleted the run's rejected rows while the ledger still counted them."""
    import os

    def inside(rel: str, shown: str) -> str | None:
        parts = [p for p in rel.replace(os.sep, "/").split("/") if p not in ("", ".")]
        if not parts:
            return (f"{shown!r} is the run directory itself, which holds the run's own files; write to a "
                    f"folder of your own in it, e.g. '{RUN_DIR_TOKEN}/out'")
        if parts[0] in RUN_DIR_INTERNALS:
            where = "is" if len(parts) == 1 else "is inside"
            what = _INTERNAL_WHAT.get(parts[0], "its own files")
            return (f"{shown!r} {where} the run's own {parts[0]!r} (where the run keeps {what}); write "
                    f"to a folder of your own, e.g. '{RUN_DIR_TOKEN}/out/{'/'.join(parts)}'")
        return None

    if path == RUN_DIR_TOKEN or path.startswith(RUN_DIR_TOKEN + "/"):
        return inside(path[len(RUN_DIR_TOKEN):], path)
    if run_dir is None or RUN_DIR_TOKEN in path:
        return None
    norm = os.path.normpath(os.path.abspath(os.path.expanduser(path)))
    root = os.path.normpath(run_dir)
    if root == norm or root.startswith(norm.rstrip(os.sep) + os.sep):
        if root == norm:
            return inside("", path)
        return (f"{path!r} holds the run directory {root}: with overwrite the run's own files there would "
                f"be replaced; write to a folder of your own, e.g. '{RUN_DIR_TOKEN}/out'")
    if norm.startswith(root + os.sep):
        return inside(os.path.relpath(norm, root), path)
    return None


def _ancestors(path: str) -> list[str]:
    import os

    out = []
    parent = os.path.dirname(path)
    while parent and parent != path:
        out.append(parent)
        path, parent = parent, os.path.dirname(parent)
    return out


def _check_code(nodes: dict[str, VNode], specs: dict, spec: PipelineSpec) -> list[Problem]:
    """Ops that run code written in the file need `settings.allow_code: true`; the grant travels
    in their params (`allow_code`), which the op checks again before it compiles anything."""
    allowed = spec.settings.get("allow_code") is True
    problems = []
    for nid, node in nodes.items():
        if not node.op_cls.takes_code:
            continue
        ns = specs[nid]
        if "allow_code" in ns.params:
            problems.append(Problem(spec.doc.file, spec.line(ns.path + ("with", "allow_code")),
                                    "allow_code is a run-wide setting: set `settings.allow_code: true`, "
                                    "not a parameter", node=nid, key="allow_code"))
        elif not allowed:
            problems.append(Problem(spec.doc.file, spec.line(ns.path + ("op",)) or spec.line(ns.path),
                                    f"{node.op_cls.name} runs Python code given in the pipeline file; set "
                                    "`settings.allow_code: true` to run it (a service never does)",
                                    node=nid, key="op"))
        elif node.params is not None:
            node.params = node.params.model_copy(update={"allow_code": True})
    return problems


def _check_settings(spec: PipelineSpec) -> list[Problem]:
    problems = []
    s = spec.settings
    f = spec.doc.file
    ratio = s.get("max_error_ratio")
    if not isinstance(ratio, (int, float)) or isinstance(ratio, bool) or not 0 <= ratio <= 1:
        problems.append(Problem(f, spec.line(("settings", "max_error_ratio")),
                                f"max_error_ratio must be a number in [0, 1] (got {ratio!r})", key="settings.max_error_ratio"))
    if not isinstance(s.get("seed"), int) or isinstance(s.get("seed"), bool):
        problems.append(Problem(f, spec.line(("settings", "seed")), f"seed must be an integer (got {s.get('seed')!r})",
                                key="settings.seed"))
    if not isinstance(s.get("keep_rejects"), bool):
        problems.append(Problem(f, spec.line(("settings", "keep_rejects")), "keep_rejects must be true or false",
                                key="settings.keep_rejects"))
    mem = s.get("in_memory_mb")
    if not isinstance(mem, (int, float)) or isinstance(mem, bool) or mem < 0:
        problems.append(Problem(f, spec.line(("settings", "in_memory_mb")),
                                f"in_memory_mb must be a number >= 0 (got {mem!r})", key="settings.in_memory_mb"))
    source_key = s.get("source_key")
    if source_key is not None and (not isinstance(source_key, str) or not source_key):
        problems.append(Problem(f, spec.line(("settings", "source_key")),
                                f"source_key must name a column (got {source_key!r})", key="settings.source_key"))
    steps = s.get("concurrent_steps")
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
        problems.append(Problem(f, spec.line(("settings", "concurrent_steps")),
                                f"concurrent_steps must be an integer >= 1 (got {steps!r})",
                                key="settings.concurrent_steps"))
    rows = s.get("rows_per_block")
    if rows != "auto" and (not isinstance(rows, int) or isinstance(rows, bool) or rows < 1):
        problems.append(Problem(f, spec.line(("settings", "rows_per_block")),
                                f"rows_per_block must be 'auto' or an integer >= 1 (got {rows!r})",
                                key="settings.rows_per_block"))
    if s.get("stateful_ops") not in ("tasks", "actors"):
        problems.append(Problem(f, spec.line(("settings", "stateful_ops")),
                                f"stateful_ops must be 'tasks' or 'actors' (got {s.get('stateful_ops')!r})",
                                key="settings.stateful_ops"))
    if s.get("serve_ingress") not in INGRESSES:
        problems.append(Problem(f, spec.line(("settings", "serve_ingress")),
                                f"serve_ingress must be one of {', '.join(map(repr, INGRESSES))} "
                                f"(got {s.get('serve_ingress')!r})", key="settings.serve_ingress"))
    elif s.get("serve_ingress") == "haproxy" and haproxy_binary() is None:
        problems.append(Problem(f, spec.line(("settings", "serve_ingress")),
                                f"serve_ingress: haproxy {NO_BINARY}; 'auto' uses it where it is installed",
                                key="settings.serve_ingress"))
    if not isinstance(s.get("allow_code"), bool):
        problems.append(Problem(f, spec.line(("settings", "allow_code")), "allow_code must be true or false",
                                key="settings.allow_code"))
    np_ = s.get("np")
    if np_ is not None and (not isinstance(np_, int) or np_ < 1):
        problems.append(Problem(f, spec.line(("np",)) or spec.line(("settings", "np")),
                                f"np must be a positive integer (got {np_!r})", key="np"))
    return problems
