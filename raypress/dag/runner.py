"""Conduct a resolved pipeline on Ray: step order, resume, the ledger and the run's end.

The runner receives the final pipeline (``dag.resolve``) and never edits it.  How a segment runs
is ``dag.segment``'s job, how a node becomes Ray Data work ``dag.execute``'s; the runner decides
which step runs next, whether its saved output still holds, and what the ledger says.
"""

from __future__ import annotations

import copy

import contextlib
import time
from pathlib import Path
from typing import Any, Callable

from raypress.artifacts import Artifact, ModelArtifact, ReportArtifact
from raypress.dag.ray_deaths import ray_process_deaths
from raypress.dag.cancel import RunCancelled, cancel_on_signals, hold_signals, received, restore_signals
from raypress.dag.destination import Destination, DestinationConflict
from raypress.dag.error_budget import RunFailed, describe_error, without_ansi
from raypress.dag.execute import ExecutionPolicy
from raypress.dag.fingerprint import digest, files_under, input_change, input_files, output_change
from raypress.dag.ledger import Ledger, check_edges, entry
from raypress.dag.op_timing import TimeReporter
from raypress.dag.plan import Plan, Segment, make_plan
from raypress.dag.resolve import ResolvedPipeline, resolve_pipeline
from raypress.dag.run_artifacts import RunArtifacts, read_materialized
from raypress.dag.run_lock import RunLock
from raypress.dag.schedule import run_steps, step_nodes, step_reads
from raypress.dag.store import RunStore, config_hashes
from raypress.dag.validate import RUN_DIR_INTERNALS, VNode
from raypress.operators.base import OpKind, RunContext
from raypress.schema import ArtifactType

__all__ = ["RunFailed", "Runner", "describe_error", "run_pipeline", "step_nodes", "step_reads"]



def run_pipeline(path: str, run_dir: str | None = None, overrides=(), address: str | None = None,
                 on_event: Callable[[dict], None] | None = None) -> dict:
    """Resolve, then run ``path`` in this process; return the ledger JSON.  Raises PipelineInvalid /
    RunFailed."""
    resolved = resolve_pipeline(path, overrides, run_dir, cluster_address=address)
    return Runner(resolved, address=address, on_event=on_event).run().to_json()


class Runner:
    def __init__(self, resolved: ResolvedPipeline, address: str | None = None, ray_host: str | None = None,
                 on_event: Callable[[dict], None] | None = None):
        self.resolved = resolved
        self.vp = resolved.vp
        self.store = RunStore(resolved.run_dir)
        self.address = address
        self.ray_host = ray_host
        self.on_event = on_event
        self.settings = self.vp.spec.settings
        self.hashes = config_hashes(self.vp)
        self.ledger = Ledger()
        self.artifacts = RunArtifacts()
        self.cleanups: list[Callable[[], None]] = []
        self.ray_started = False  # Ray starts with the first step that has work to do
        self.timer: Any = None  # the run's OpTimer actor, once Ray is up
        self.cpu_meter: Any = None  # measures each segment's CPU utilisation (dag.cpu_meter)
        self.destinations = {nid: self._destination(node) for nid, node in self.vp.nodes.items()
                             if node.kind == OpKind.WRITER}
        self.output_digests: dict[str, str] = {}  # node -> digest of its output files (this run's view)
        self.data_inputs = {nid: list(n.slots.get("data", [])) for nid, n in self.vp.nodes.items()}
        self.pending_counts: dict[str, dict[str, int]] = {}  # ctx.count() of nodes whose entry is not made yet

    def _destination(self, node: VNode) -> Destination:
        writer = node.make_op()
        return Destination(Path(writer.destination()), writer.single_file(),
                           {"pipeline": self.vp.spec.name, "node": node.id, "op": node.op_cls.name},
                           overwrite=bool(getattr(node.params, "overwrite", False)))

    # -- events ---------------------------------------------------------------
    def emit(self, event: dict) -> None:
        self.store.event(event)
        if event.get("event") == "counted":
            self._add_counts(str(event.get("node")), event.get("counts") or {})
        if event.get("event") == "ids_assigned" and event.get("node") in self.ledger.nodes:
            # how many rows a reader gave an id (theirs was missing or repeated): the ledger says so
            self.ledger.nodes[event["node"]]["ids_assigned"] = event.get("assigned", 0)
        if event.get("event") == "surrogates_replaced" and event.get("node") in self.ledger.nodes:
            rows = event.get("rows", 0)
            self.ledger.nodes[event["node"]]["surrogates_replaced"] = rows
            self.warn(event["node"], f"{rows} row(s) held a lone surrogate (half of a UTF-16 pair, escaped in "
                                     "the JSON), which no UTF-8 text can hold: kept, with U+FFFD in its place")
        if self.on_event is not None:
            self.on_event(event)

    def _add_counts(self, node: str, counts: dict[str, int]) -> None:
        """``ctx.count`` of a node: kept until its ledger entry exists (a stage counts while it runs,
        its entry is made when it returns), then merged into the entry's ``counts``."""
        held = self.pending_counts.setdefault(node, {})
        for name, n in counts.items():
            held[name] = held.get(name, 0) + int(n)
        self._attach_counts(node)

    def _attach_counts(self, node: str) -> None:
        if node in self.ledger.nodes and node in self.pending_counts:
            mine = self.ledger.nodes[node].setdefault("counts", {})
            for name, n in self.pending_counts.pop(node).items():
                mine[name] = mine.get(name, 0) + n

    def warn(self, node: str, message: str) -> None:
        """Something a user must see although the ledger adds up: in the CLI, events and ledger."""
        self.ledger.warnings.append(f"{node}: {message}")
        self.emit({"event": "warning", "node": node, "message": message})

    def _warn_total_drops(self) -> None:
        """A node that took rows in and let none through is a bug until shown otherwise, and a reader
        that gave none is usually the wrong file: say so."""
        for nid in self.vp.order:
            e = self.ledger.nodes.get(nid)
            if e and e["kind"] == "reader" and e["rows_out"] == 0:  # an empty file, or every record bad
                bad = f" ({e['quarantined']} records quarantined)" if e["quarantined"] else ""
                paths = getattr(self.vp.nodes[nid].params, "paths", None) or []
                self.warn(nid, f"read 0 rows{bad} from {', '.join(map(str, paths[:3])) or 'its input'}"
                               f"{' ...' if len(paths) > 3 else ''}: everything below it ran on nothing")
                continue
            if not e or e.get("transforms") or e["kind"] in ("writer", "reader") or not e["rows_in"]:
                continue
            if e["rows_out"] == 0:
                why = ", ".join(f"{r}: {n}" for r, n in sorted(e["dropped"].items(), key=lambda kv: -kv[1])[:3])
                extra = [f"{e['duplicates']} duplicates"] if e["duplicates"] else []
                extra += [f"{e['quarantined']} quarantined"] if e["quarantined"] else []
                self.warn(nid, f"dropped all {e['rows_in']} of its input rows ({', '.join(filter(None, [why, *extra]))})")

    def ctx(self, nid: str) -> RunContext:
        return RunContext(run_dir=str(self.store.root), node_id=nid, seed=int(self.settings.get("seed", 0)),
                          emit=self.emit, settings=dict(self.settings), cleanups=self.cleanups,
                          timer=TimeReporter(self.timer) if self.timer is not None else None,
                          base_dir=self.resolved.resolution.base_dir,
                          ledger=lambda: copy.deepcopy(self.ledger.nodes), data_inputs=self.data_inputs)

    # -- the run --------------------------------------------------------------
    def run(self, take_lock: bool = True) -> Ledger:
        """Run under the run directory's lock (``take_lock=False``: the caller's process holds it, as
        the CLI's supervisor does for its child); the ledger says `running` until it says how it ended."""
        if not take_lock:
            return self._run_locked()
        with RunLock(self.store.root):
            return self._run_locked()

    def _run_locked(self) -> Ledger:
        self.resolved.write()
        plan = make_plan(self.vp)
        self.store.write_ledger(self.ledger.to_json())  # status: running (a killed run still says so)
        self.emit({"event": "run_started", "pipeline": self.vp.spec.name, "run_dir": str(self.store.root),
                   "steps": len(plan.steps)})
        start = time.perf_counter()
        try:
            cancel_on_signals(fresh=True)
            self._check_destinations()
            if int(self.settings.get("concurrent_steps", 1)) > 1:
                self._ray_up()  # before steps start in threads (ray.init sets signal handlers)
            self._run_steps(plan)
        except BaseException as exc:
            hold_signals()
            cancelled = received()  # the signal, whatever error it surfaced as
            self._cleanup()
            self._fail(cancelled or exc, time.perf_counter() - start)
            if cancelled is not None and cancelled is not exc:
                raise cancelled from exc
            raise
        finally:
            restore_signals()
        self._cleanup()
        self.ledger.status = "succeeded"
        self._warn_total_drops()
        self._finish_ledger()
        self.emit({"event": "run_finished", "seconds": round(time.perf_counter() - start, 3),
                   "adds_up": not self.ledger.problems})
        return self.ledger

    def _ray_up(self) -> None:
        """Start or join Ray once, when the first step that has work to do needs it: a run whose
        steps all resume from disk ends in about a second instead of starting Ray (4-8 s)."""
        if self.ray_started:
            return
        from raypress.dag.cpu_meter import new_meter
        from raypress.dag.op_timing import new_timer
        from raypress.dag.ray_compat import (
            keep_rows_in_order,
            notice_finished_tasks_sooner,
            ray_init_keeps_signal_handlers,
            start_every_core_at_once,
        )
        from raypress.dag.haproxy_loopback import choose_ingress
        from raypress.dag.ray_session import ensure_ray, ray_is_up

        address = self.address or self.vp.spec.ray_address  # --address wins
        serves = any(node.op_cls.serves_http for node in self.vp.nodes.values())
        if serves and address is None and not ray_is_up():  # the embedded Ray's Serve reads it at start
            ingress = choose_ingress(self.settings["serve_ingress"])  # defaults filled by read_spec
            self.emit({"event": "serve_ingress", "ingress": ingress})
        with ray_init_keeps_signal_handlers():  # a signal while Ray starts cancels the run, as after
            ensure_ray(address, host=self.ray_host)
        cancel_on_signals()  # again: Ray's core worker set a C++ handler for SIGTERM (a stack dump)
        if received() is not None:  # raised inside ray.init, where Ray's own code caught it
            raise received()
        keep_rows_in_order()
        start_every_core_at_once()
        notice_finished_tasks_sooner()
        self.cpu_meter = new_meter()
        self.timer = new_timer()
        self.ray_started = True

    def _fail(self, exc: BaseException, seconds: float) -> None:
        import traceback

        self.ledger.status = "cancelled" if isinstance(exc, RunCancelled) else "failed"
        self.ledger.error = describe_error(exc)
        deaths = [] if isinstance(exc, RunCancelled) else ray_process_deaths(exc)
        if deaths:  # the run saw only the consequence (an actor or a task lost): the cause first
            self.ledger.error = f"{deaths[0]} (the run saw: {self.ledger.error})"
        self.ledger.unfinished = [nid for nid in self.vp.order if nid not in self.ledger.nodes]
        self._finish_ledger()
        self.emit({"event": f"run_{self.ledger.status}", "error": self.ledger.error,
                   "traceback": without_ansi(traceback.format_exc(limit=8)), "seconds": round(seconds, 3)})

    def _check_destinations(self) -> None:
        """Every writer's destination, before any work: a conflict found after an hour of work
        would waste it; nothing is deleted either way."""
        problems = []
        for nid, dest in self.destinations.items():
            try:
                dest.check()
            except DestinationConflict as exc:
                problems.append(f"node '{nid}': {exc}")
        if problems:
            raise RunFailed("; ".join(problems))

    def _run_steps(self, plan: Plan) -> None:
        run_steps(plan, self._run_step, int(self.settings.get("concurrent_steps", 1)))

    def _run_step(self, plan: Plan, step: Segment | str) -> None:
        if isinstance(step, Segment):
            self._run_segment(plan, step)
        else:
            self._run_artifact_step(step)

    def _cleanup(self) -> None:
        """What nodes deferred to the end of the run (last first); a failing one is reported, not raised.
        The shared op timer forgets the run's figures last (deferred reports may still read them)."""
        while self.cleanups:
            cleanup = self.cleanups.pop()
            try:
                cleanup()
            except Exception as exc:  # noqa: BLE001 - the run's own outcome matters more
                self.emit({"event": "cleanup_failed", "error": f"{type(exc).__name__}: {exc}"})
        if self.timer is not None:
            with contextlib.suppress(Exception):  # Ray already gone (a failed run): nothing to forget
                self.timer.end.remote()

    def _finish_ledger(self) -> None:
        inputs_of = self.data_inputs
        kinds = {nid: n.kind for nid, n in self.vp.nodes.items()}
        check_edges(self.ledger, inputs_of, kinds)
        ordered = {nid: self.ledger.nodes[nid] for nid in self.vp.order if nid in self.ledger.nodes}
        self.ledger.nodes = ordered
        self.store.write_ledger(self.ledger.to_json())

    # -- steps ------------------------------------------------------------------
    def _run_segment(self, plan: Plan, seg: Segment) -> None:
        from raypress.dag.segment import SegmentEnv, run_segment

        nodes = [plan.node(n) for n in seg.nodes]
        consumed = self._consumed(seg.nodes)
        if self._resume(seg.sink, seg.nodes, consumed):
            return
        self._ray_up()
        env = SegmentEnv(self.store, self.settings, ExecutionPolicy.from_settings(self.settings), self.artifacts,
                         self.timer, self.ctx, self.emit, self.cpu_meter)
        try:
            result = run_segment(nodes, self.destinations.get(seg.sink), env)
        except RunFailed as exc:
            self.ledger.nodes.update(exc.entries)
            raise
        self.ledger.nodes.update(result.entries)
        for n in nodes:
            self._attach_counts(n.id)
        self.ledger.problems.extend(result.problems)
        if result.artifact is not None:
            self.artifacts[seg.sink] = result.artifact
        self._save_state(seg.sink, consumed, result.produced,
                         {"entries": result.entries, "output_path": result.output_path, "rows": result.rows,
                          "type": ArtifactType.DATASET.value, "materialized": result.artifact is not None})
        for n in nodes:
            self.emit({"event": "node_finished", "node": n.id, **{k: result.entries[n.id][k] for k in
                       ("rows_in", "rows_out", "dropped", "duplicates", "quarantined", "seconds")}})
        for node, message in result.warnings:
            self.warn(node, message)

    def _run_artifact_step(self, nid: str) -> None:
        """A stage or aggregator making a Model or a Report."""
        node = self.vp.nodes[nid]
        consumed = self._consumed([nid])
        if node.op_cls.resumable and self._resume(nid, [nid], consumed):
            return
        self._ray_up()
        self.store.clear_outputs(nid)
        self.emit({"event": "node_started", "node": nid, "op": node.op_cls.name})
        start = time.perf_counter()
        ctx = self.ctx(nid)
        ctx.input_rows = self.artifacts.rows_in(node)
        op = node.make_op(self.artifacts.side(node))
        inputs = self.artifacts.inputs(node)
        if node.kind == OpKind.STAGE:
            art = op.run(inputs, ctx)
        elif node.kind == OpKind.AGGREGATOR:
            art = op.apply(inputs["data"].ds, ctx)
        else:
            raise RunFailed(f"node '{nid}': a {node.kind.value} cannot produce a {node.op_cls.output.value}")
        expected = node.op_cls.output
        if getattr(art, "type", None) != expected:
            raise RunFailed(f"node '{nid}' ({node.op_cls.name}) declares a {expected.value} output but returned "
                            f"{type(art).__name__}")
        self.artifacts[nid] = art
        e = entry(node.op_cls.name, node.kind, self.artifacts.rows_in(node), 0,
                  seconds=time.perf_counter() - start, transforms=True, artifact=art.path)
        self.ledger.nodes[nid] = e
        self._attach_counts(nid)
        self._save_state(nid, consumed, files_under([art.path] if art.path else []),
                         {"entries": {nid: e}, "output_path": art.path, "type": expected.value})
        self.emit({"event": "node_finished", "node": nid, "artifact": art.path, "seconds": e["seconds"]})

    # -- resume -------------------------------------------------------------------
    def _consumed(self, chain: list[str]) -> dict[str, Any]:
        """What a step reads: the files its nodes' parameters name, and its upstream outputs' digests."""
        internal = [self.store.root / name for name in RUN_DIR_INTERNALS]  # tracked by the steps' own states
        files: dict[str, Any] = {}
        for nid in chain:
            dest = self.destinations.get(nid)  # a writer's destination is its output, not its input
            own = [dest.target, dest.staging, dest.manifest_path] if dest is not None else []
            files.update(input_files(self.vp.nodes[nid].params.model_dump(mode="json"), exclude=internal + own))
        upstream = sorted({p for nid in chain for ps in self.vp.nodes[nid].slots.values() for p in ps} - set(chain))
        return {"files": files, "upstream": {p: self.output_digests.get(p) for p in upstream}}

    def _save_state(self, nid: str, consumed: dict[str, Any], produced: dict[str, int], rest: dict[str, Any]) -> None:
        self.output_digests[nid] = self._output_digest(nid, consumed, produced)
        self.store.save_state(nid, {"hash": self.hashes[nid], "consumed": consumed, "produced": produced, **rest})

    def _resume(self, sink: str, chain: list[str], consumed: dict[str, Any]) -> bool:
        """Whether the step ending at ``sink`` can be skipped: its saved state has this config hash and
        still describes its inputs and outputs (then its artifact is taken from disk)."""
        state = self.store.load_state(sink)
        if state is None:
            return False
        reason = self.stale_reason(sink, state, consumed)
        if reason is not None:
            self.emit({"event": "node_rerun", "node": sink, "nodes": chain, "reason": reason})
            return False
        self.ledger.nodes.update(state["entries"])
        self._restore_artifact(sink, state)
        self.output_digests[sink] = self._output_digest(sink, state["consumed"], state["produced"])
        for nid in chain:
            self.emit({"event": "node_skipped", "node": nid,
                       "reason": "output on disk, inputs and config unchanged"})
        return True

    def stale_reason(self, sink: str, state: dict[str, Any], consumed: dict[str, Any]) -> str | None:
        """Why the step ending at ``sink`` must run again although it finished once (None: it need not)."""
        if not self.vp.nodes[sink].op_cls.resumable:
            return "it serves a live endpoint: started again"
        return "configuration changed" if state.get("hash") != self.hashes[sink] else _stale(state, consumed)

    def _output_digest(self, sink: str, consumed: dict[str, Any], produced: dict[str, int]) -> str:
        """What the steps after ``sink`` compare to tell whether its output changed: its files, or for an
        op that is started again on every run (a live endpoint) its configuration and inputs: a
        redeployed endpoint of the same model is the same service, and the nodes after it stay done."""
        if self.vp.nodes[sink].op_cls.resumable:
            return digest(produced)
        return digest({"config": self.hashes[sink], **{f"upstream:{k}": v for k, v in consumed["upstream"].items()}})

    def _restore_artifact(self, sink: str, state: dict[str, Any]) -> None:
        kind = state.get("type")
        if kind == ArtifactType.MODEL.value:
            self.artifacts[sink] = ModelArtifact.load(state["output_path"])
        elif kind == ArtifactType.REPORT.value:
            self.artifacts[sink] = ReportArtifact.load(state["output_path"])
        elif state.get("materialized"):
            self.artifacts.defer(sink, lambda: self._read_materialized(state))

    def _read_materialized(self, state: dict[str, Any]) -> Artifact:
        self._ray_up()  # a Ray dataset of the parts on disk
        policy = ExecutionPolicy.from_settings(self.settings)
        return read_materialized(Path(state["output_path"]), int(state["rows"]),
                                 float(self.settings.get("in_memory_mb", 64)), policy.block_rows)


def _stale(state: dict[str, Any], consumed: dict[str, Any]) -> str | None:
    """Why a finished step's saved state no longer describes the data (None: it still does)."""
    if state.get("hash") is None or "consumed" not in state or "produced" not in state:
        return "its saved state is from an older raypress"
    before = state["consumed"].get("upstream", {})
    for producer, now in consumed["upstream"].items():
        if before.get(producer) != now:
            return f"its input '{producer}' changed (re-run)"
    return input_change(state["consumed"].get("files", {}), consumed["files"]) or output_change(state["produced"])
