"""Execute a validated pipeline on Ray: segments stream through Ray Data, stages run on the driver.

The runner owns everything an operator should not have to think about: tombstones, quarantine,
materialization, the run directory, resume, the ledger and the error budget.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

from raypress.artifacts import Artifact, DatasetArtifact, ModelArtifact, ReportArtifact
from raypress.dag.destination import Destination, DestinationConflict
from raypress.dag.fingerprint import digest, files_under, input_change, input_files, output_change
from raypress.dag.ledger import Ledger, check_edges, entry, segment_entries
from raypress.dag.plan import Plan, Segment, make_plan
from raypress.dag.run_lock import RunLock
from raypress.dag.store import RunStore, config_hashes, default_run_dir
from raypress.dag.validate import ValidatedPipeline, VNode, load_pipeline
from raypress.operators.base import STREAMING_KINDS, OpKind, RunContext
from raypress.schema import ArtifactType


# What the run directory holds of its own: never an input of a step (another writer's destination
# inside it may be: a reader of it is fingerprinted like any other file)
RUN_DIR_INTERNALS = ("nodes", "state", "rejects", "quarantine", "models", "reports", "events.jsonl",
                     "ledger.json", "ledger.json.tmp", "pipeline.yaml", ".lock")


class RunFailed(Exception):
    """The run stopped on purpose (error budget exceeded, a stage failed); the message says why."""


def run_pipeline(path: str, run_dir: str | None = None, overrides=(), address: str | None = None,
                 on_event: Callable[[dict], None] | None = None) -> dict:
    """Validate, then run `path`; return the ledger JSON.  Raises PipelineInvalid / RunFailed."""
    vp = load_pipeline(path, overrides)
    runner = Runner(vp, run_dir or default_run_dir(vp.spec.name), address=address, on_event=on_event)
    return runner.run().to_json()


def expand_run_dir(value: Any, run_dir: str) -> Any:
    if isinstance(value, str):
        return value.replace("{run_dir}", run_dir)
    if isinstance(value, list):
        return [expand_run_dir(v, run_dir) for v in value]
    if isinstance(value, dict):
        return {k: expand_run_dir(v, run_dir) for k, v in value.items()}
    return value


class Runner:
    def __init__(self, vp: ValidatedPipeline, run_dir: str, address: str | None = None,
                 on_event: Callable[[dict], None] | None = None):
        self.vp = vp
        self.store = RunStore(run_dir)
        self.address = address
        self.on_event = on_event
        self.settings = vp.spec.settings
        self.hashes = config_hashes(vp)
        self.ledger = Ledger()
        self.artifacts: dict[str, Artifact] = {}
        self.cleanups: list[Callable[[], None]] = []
        root = str(self.store.root)
        for node in vp.nodes.values():  # `{run_dir}` in a parameter expands to the run directory
            node.params = node.op_cls.Params.model_validate(  # only what was set: validators may ask
                expand_run_dir(node.params.model_dump(exclude_unset=True), root))
        self.destinations = {nid: self._destination(node) for nid, node in vp.nodes.items()
                             if node.kind == OpKind.WRITER}
        self.output_digests: dict[str, str] = {}  # node -> digest of its output files (this run's view)

    def _destination(self, node: VNode) -> Destination:
        writer = node.make_op()
        return Destination(Path(writer.destination()), writer.single_file(),
                           {"pipeline": self.vp.spec.name, "node": node.id, "op": node.op_cls.name},
                           overwrite=bool(getattr(node.params, "overwrite", False)))

    # -- events ---------------------------------------------------------------
    def emit(self, event: dict) -> None:
        self.store.event(event)
        if event.get("event") == "ids_assigned" and event.get("node") in self.ledger.nodes:
            # how many rows a reader gave an id (theirs was missing or repeated): the ledger says so
            self.ledger.nodes[event["node"]]["ids_assigned"] = event.get("assigned", 0)
        if self.on_event is not None:
            self.on_event(event)

    def warn(self, node: str, message: str) -> None:
        """Something a user must see although the ledger adds up: in the CLI, events and ledger."""
        self.ledger.warnings.append(f"{node}: {message}")
        self.emit({"event": "warning", "node": node, "message": message})

    def _warn_total_drops(self) -> None:
        """A node that took rows in and let none through is a bug until shown otherwise: say so."""
        for nid in self.vp.order:
            e = self.ledger.nodes.get(nid)
            if not e or e.get("transforms") or e["kind"] in ("writer", "reader") or not e["rows_in"]:
                continue
            if e["rows_out"] == 0:
                why = ", ".join(f"{r}: {n}" for r, n in sorted(e["dropped"].items(), key=lambda kv: -kv[1])[:3])
                extra = [f"{e['duplicates']} duplicates"] if e["duplicates"] else []
                extra += [f"{e['quarantined']} quarantined"] if e["quarantined"] else []
                self.warn(nid, f"dropped all {e['rows_in']} of its input rows ({', '.join(filter(None, [why, *extra]))})")

    def ctx(self, nid: str) -> RunContext:
        return RunContext(run_dir=str(self.store.root), node_id=nid, seed=int(self.settings.get("seed", 0)),
                          emit=self.emit, settings=dict(self.settings), timer=getattr(self, "timer", None),
                          cleanups=self.cleanups)

    # -- the run --------------------------------------------------------------
    def run(self) -> Ledger:
        """Run under the run directory's lock; the ledger says `running` until it says how it ended."""
        with RunLock(self.store.root):
            return self._run_locked()

    def _run_locked(self) -> Ledger:
        from raypress.dag.ray_session import ensure_ray

        self.store.write_pipeline(self.vp.spec.resolved_yaml())
        plan = make_plan(self.vp)
        self.store.write_ledger(self.ledger.to_json())  # status: running (a killed run still says so)
        self.emit({"event": "run_started", "pipeline": self.vp.spec.name, "run_dir": str(self.store.root),
                   "steps": len(plan.steps)})
        start = time.perf_counter()
        try:
            self._check_destinations()
            address = self.address or self.vp.spec.ray_address
            if not address:  # on a cluster the files are looked up where the op runs, not here
                self._check_model_files()
            ensure_ray(address)  # --address wins over a recipe's ray_address
            import ray.data

            # rows leave in the order they came in: blocks of a segment run in parallel, but their
            # tallies come back in order and number the parts (sink.number_parts)
            ray.data.DataContext.get_current().execution_options.preserve_order = True
            from raypress.dag.timer import OpTimer

            self.timer = OpTimer.remote()
            self._run_steps(plan)
        except BaseException as exc:
            self._cleanup()
            self._fail(exc, time.perf_counter() - start)
            raise
        self._cleanup()
        self.ledger.status = "succeeded"
        self._warn_total_drops()
        self._finish_ledger()
        self.emit({"event": "run_finished", "seconds": round(time.perf_counter() - start, 3),
                   "adds_up": not self.ledger.problems})
        return self.ledger

    def _fail(self, exc: BaseException, seconds: float) -> None:
        import traceback

        self.ledger.status = "failed"
        self.ledger.error = describe_error(exc)
        self.ledger.unfinished = [nid for nid in self.vp.order if nid not in self.ledger.nodes]
        self._finish_ledger()
        self.emit({"event": "run_failed", "error": self.ledger.error,
                   "traceback": traceback.format_exc(limit=8), "seconds": round(seconds, 3)})

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

    def _check_model_files(self) -> None:
        """Every model file an op finds by name (Data-Juicer's sentencepiece/KenLM models, a
        tokenizer), resolved before Ray starts and pinned in the node's params, so the workers load
        the files found here; a missing one is one line per node naming its YAML line and how to
        provide the file, instead of an actor's traceback after the nodes before it have run."""
        spec, problems = self.vp.spec, []
        by_id = {n.id: n for n in spec.nodes}
        for nid in self.vp.order:
            node = self.vp.nodes[nid]
            if node.params is None:
                continue
            try:
                node.params = node.params.with_model_files(node.op_cls.name)
            except FileNotFoundError as exc:
                line = spec.line(by_id[nid].path) if nid in by_id else None
                problems.append(f"{spec.doc.file}:{line} node '{nid}': {exc}" if line else f"node '{nid}': {exc}")
        if problems:
            raise RunFailed("\n".join(problems))

    def _run_step(self, plan: Plan, step: Segment | str) -> None:
        if isinstance(step, Segment):
            self._run_segment(plan, step)
        else:
            self._run_artifact_step(step)

    def _run_steps(self, plan: Plan) -> None:
        """Run the plan's steps; with ``settings.concurrent_steps`` > 1, independent ones at once.

        Why: a DAG's branches (five bridges, twenty classifiers) need not wait for each other, and
        one step rarely fills the machine (a one-worker training leaves a core idle). Ray arbitrates
        the CPUs; a step starts once every node it reads is done, in the plan's order (the YAML's,
        where the dependencies allow: the author decides what goes first); on a failure no new step
        starts, the running ones finish and the first error is raised."""
        limit = int(self.settings.get("concurrent_steps", 1))
        if limit <= 1:
            for step in plan.steps:
                self._run_step(plan, step)
            return
        import ray.data

        # Ray Data's progress bars of concurrent executions interleave on the terminal and slowed two
        # small concurrent jobs 5x here (1.8 s against 0.3 s): the node events still show progress.
        data_context = ray.data.DataContext.get_current()
        bars, data_context.enable_progress_bars = data_context.enable_progress_bars, False
        try:
            self._run_concurrently(plan, limit)
        finally:
            data_context.enable_progress_bars = bars

    def _run_concurrently(self, plan: Plan, limit: int) -> None:
        from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

        reads = [step_reads(plan, step) for step in plan.steps]
        pending = list(range(len(plan.steps)))
        running: dict[Future, int] = {}
        done: set[str] = set()
        failure: BaseException | None = None
        with ThreadPoolExecutor(max_workers=limit, thread_name_prefix="raypress-step") as pool:
            while pending or running:
                if failure is None:
                    for i in [i for i in pending if reads[i] <= done][:limit - len(running)]:
                        pending.remove(i)
                        running[pool.submit(self._run_step, plan, plan.steps[i])] = i
                if not running:
                    break  # only after a failure: what is left waits on it
                finished, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in finished:
                    i = running.pop(future)
                    if future.exception() is not None:
                        failure = failure or future.exception()
                    else:
                        done.update(step_nodes(plan.steps[i]))
        if failure is not None:
            raise failure

    def _cleanup(self) -> None:
        """What nodes deferred to the end of the run (last first); a failing one is reported, not raised."""
        while self.cleanups:
            cleanup = self.cleanups.pop()
            try:
                cleanup()
            except Exception as exc:  # noqa: BLE001 - the run's own outcome matters more
                self.emit({"event": "cleanup_failed", "error": f"{type(exc).__name__}: {exc}"})

    def _finish_ledger(self) -> None:
        inputs_of = {nid: n.slots.get("data", []) for nid, n in self.vp.nodes.items()}
        kinds = {nid: n.kind for nid, n in self.vp.nodes.items()}
        check_edges(self.ledger, inputs_of, kinds)
        ordered = {nid: self.ledger.nodes[nid] for nid in self.vp.order if nid in self.ledger.nodes}
        self.ledger.nodes = ordered
        self.store.write_ledger(self.ledger.to_json())

    # -- inputs -----------------------------------------------------------------
    def _inputs(self, node: VNode, side_only: bool = False) -> dict[str, Artifact]:
        """Artifacts for each input slot (a list of Datasets becomes their union; a list slot of
        Models/Reports stays a list, in the YAML's order)."""
        out: dict[str, Any] = {}
        for slot, producers in node.slots.items():
            if side_only and slot == "data":
                continue
            arts = [self.artifacts[p] for p in producers]
            if slot in node.op_cls.list_inputs:
                out[slot] = arts
            elif len(arts) == 1:
                out[slot] = arts[0]
            else:
                ds = arts[0].ds.union(*[a.ds for a in arts[1:]])
                out[slot] = DatasetArtifact(ds, rows=sum(a.rows or 0 for a in arts))
        return out

    def _side_artifacts(self, node: VNode) -> dict[str, Artifact]:
        return self._inputs(node, side_only=True)

    # -- segments ---------------------------------------------------------------
    def _run_segment(self, plan: Plan, seg: Segment) -> None:
        import ray.data

        nodes = [plan.node(n) for n in seg.nodes]
        sink = nodes[-1]
        consumed = self._consumed(seg.nodes)
        if self._resume(seg.sink, seg.nodes, consumed):
            return
        writer = sink.make_op() if sink.kind == OpKind.WRITER else None
        out_dir = None if writer else self.store.node_dir(sink.id)
        destination = self.destinations.get(sink.id)
        dest = str(destination.reset_staging()) if destination is not None else None
        self.store.clear_outputs(sink.id, *([out_dir] if out_dir else []))
        for n in nodes:
            self.emit({"event": "node_started", "node": n.id, "op": n.op_cls.name})
        start = time.perf_counter()
        ds, expected_in, streaming, cut = self._segment_source(nodes)
        for n in streaming:
            ds = self._apply_streaming(ds, n, cut)
        from raypress.dag.sink import SegmentSink, number_parts, parts_in_order, sum_tallies

        sink_fn = SegmentSink(sink.id, str(out_dir) if out_dir else None, writer, dest,
                              str(self.store.rejects_dir(sink.id)), str(self.store.quarantine_dir(sink.id)),
                              bool(self.settings.get("keep_rejects")), self.timer)
        tallies = ds.map_batches(sink_fn, batch_size=None, batch_format="pyarrow").take_all()
        number_parts([Path(p) for p in (dest, out_dir, self.store.rejects_dir(sink.id),
                                        self.store.quarantine_dir(sink.id)) if p is not None],
                     parts_in_order(tallies))
        chain = [(n.id, n.op_cls.name, n.kind) for n in nodes]
        counted, _ = segment_entries(chain, sum_tallies(tallies), expected_in, {})
        try:  # before anything is committed: a run over its error budget leaves no (empty) export behind
            self._check_error_budget(nodes, counted, sink.id)
        except RunFailed:
            self.ledger.nodes.update(counted)
            if destination is not None:
                destination.discard_staging()
            raise
        written: dict[str, int] = {}
        commit_seconds = 0.0
        if writer is not None and destination is not None:
            commit_start = time.perf_counter()
            writer.finalize(dest, self.ctx(sink.id))
            written = destination.commit()
            commit_seconds = time.perf_counter() - commit_start
        wall = time.perf_counter() - start
        seconds = dict(ray.get(self.timer.snapshot.remote()))
        if writer is not None and sink.id in seconds:  # finalizing and committing are its own work too
            seconds[sink.id] += commit_seconds
        for n in nodes:
            if n.kind not in STREAMING_KINDS and n.id not in seconds:  # readers/writers time their own work
                seconds[n.id] = wall
        entries, problems = segment_entries(chain, sum_tallies(tallies), expected_in, seconds)
        head = nodes[0]
        if head.kind in (OpKind.STAGE, OpKind.AGGREGATOR):
            entries[head.id].update(rows_in=self._rows_in(head), transforms=True)
        self.ledger.nodes.update(entries)
        self.ledger.problems.extend(problems)
        live = entries[sink.id]["rows_out"]
        output_path = str(destination.target) if destination is not None else str(out_dir)
        if out_dir is not None:
            self.artifacts[sink.id] = self._read_materialized(out_dir, live)
        self._check_error_budget(nodes, entries, sink.id)
        produced = {**written, **files_under([p for p in (out_dir, self.store.rejects_dir(sink.id),
                                                           self.store.quarantine_dir(sink.id)) if p is not None])}
        self._save_state(sink.id, consumed, produced, {"entries": entries, "output_path": output_path, "rows": live,
                                                       "type": ArtifactType.DATASET.value,
                                                       "materialized": out_dir is not None})
        for n in nodes:
            self.emit({"event": "node_finished", "node": n.id, **{k: entries[n.id][k] for k in
                       ("rows_in", "rows_out", "dropped", "duplicates", "quarantined", "seconds")}})
        counts = ray.get(self.timer.counts.remote())
        for n in nodes:
            if n.id in counts:
                entries[n.id]["counts"] = counts[n.id]
                for message in n.op_cls.count_warnings(n.params, counts[n.id]):
                    self.warn(n.id, message)

    def _segment_source(self, nodes: list[VNode]):
        """The lazy Dataset entering the segment, the rows expected there, the ops to stream, and
        whether the rows were cut into ``rows_per_block`` blocks (the ops' batches then fit one)."""
        head = nodes[0]
        ctx = self.ctx(head.id)
        ctx.input_rows = self._rows_in(head) if head.kind != OpKind.READER else None
        if head.kind == OpKind.READER:
            ds, streaming = head.make_op().read(ctx), _streaming(nodes[1:])
            if self._cuts(streaming):
                from raypress.dag.blocks import cut_into_blocks

                return cut_into_blocks(ds, self._rows_per_block()), None, streaming, True  # a task per block
            return ds, None, streaming, False
        if head.kind == OpKind.DEDUPLICATOR:
            data = self._inputs(head)["data"]
            return head.make_op(self._side_artifacts(head)).apply(data.ds, ctx), data.rows, _streaming(nodes[1:]), False
        if head.kind in (OpKind.STAGE, OpKind.AGGREGATOR):
            op = head.make_op(self._side_artifacts(head))
            art = op.run(self._inputs(head), ctx) if head.kind == OpKind.STAGE else op.apply(
                self._inputs(head)["data"].ds, ctx)
            if not isinstance(art, DatasetArtifact):
                raise RunFailed(f"node '{head.id}' ({head.op_cls.name}) declares a Dataset output but returned "
                                f"{type(art).__name__}")
            return art.ds, None, _streaming(nodes[1:]), False
        data = self._inputs(head)["data"]  # a streaming head whose inputs are materialized
        return data.ds, data.rows, _streaming(nodes), False

    def _apply_streaming(self, ds, node: VNode, cut: bool = False):
        from raypress.dag.batch_exec import StreamingOpRunner
        from raypress.dag.worker_ops import PerWorkerOpRunner

        from raypress.dag.blocks import capped_batch_size

        res = node.op_cls.resources
        np_ = self.settings.get("np")
        batch_size = node.op_cls.batch_size
        if cut:
            batch_size = capped_batch_size(batch_size, self._rows_per_block())
        kwargs: dict[str, Any] = dict(batch_format="pyarrow", batch_size=batch_size, num_cpus=res.num_cpus)
        if res.num_gpus:
            kwargs["num_gpus"] = res.num_gpus
        if res.memory:
            kwargs["memory"] = res.memory
        runner_kwargs = dict(op_cls=node.op_cls, params=node.params, artifacts=self._side_artifacts(node),
                             node_id=node.id, stats_only=node.stats_only, timer=self.timer)
        if self._in_actor_pool(node):
            import ray
            import ray.data

            max_actors = np_ or max(1, int(ray.cluster_resources().get("CPU", 1) // max(res.num_cpus, 1)))
            return ds.map_batches(StreamingOpRunner, fn_constructor_kwargs=runner_kwargs,
                                  compute=ray.data.ActorPoolStrategy(min_size=1, max_size=max_actors), **kwargs)
        if np_:
            import ray.data

            kwargs["compute"] = ray.data.TaskPoolStrategy(size=np_)
        if node.op_cls.stateful:  # as tasks that keep the loaded op in each worker process
            return ds.map_batches(PerWorkerOpRunner(**runner_kwargs), **kwargs)
        return ds.map_batches(StreamingOpRunner(**runner_kwargs), **kwargs)

    def _in_actor_pool(self, node: VNode) -> bool:
        """A stateful op runs in an actor pool when it needs a GPU (the pool places and keeps it
        there) or ``settings.stateful_ops`` says ``actors``; otherwise as tasks that keep the loaded
        op per worker process (``PerWorkerOpRunner`` says why)."""
        return node.op_cls.stateful and bool(node.op_cls.resources.num_gpus or
                                             self.settings.get("stateful_ops") == "actors")

    def _cuts(self, streaming: list[VNode]) -> bool:
        """Whether a reader's rows are cut into blocks before ``streaming`` (``blocks.py`` says why).

        ``rows_per_block: auto`` cuts only where an op loads a model (per-row work in milliseconds:
        a block is worth a task); cheap text ops keep Ray Data's own blocks, which 256-row tasks made
        1.6x slower (``bench/engine_overhead.py``) and split into hundreds of part files.  A number
        cuts every reader-headed segment.  Never with an actor pool in the segment (not fused)."""
        if not streaming or any(self._in_actor_pool(n) for n in streaming):
            return False
        return self.settings.get("rows_per_block", "auto") != "auto" or any(n.op_cls.stateful for n in streaming)

    def _rows_per_block(self) -> int:
        from raypress.dag.blocks import DEFAULT_ROWS_PER_BLOCK

        rows = self.settings.get("rows_per_block", "auto")
        return DEFAULT_ROWS_PER_BLOCK if rows == "auto" else int(rows)

    def _read_materialized(self, out_dir: Path, rows: int) -> DatasetArtifact:
        import pyarrow as pa
        import ray.data

        files = sorted(out_dir.glob("part-*.parquet")) if out_dir.exists() else []
        if not files:
            ds = ray.data.from_arrow(pa.table({"id": pa.array([], pa.string())}))
        elif sum(f.stat().st_size for f in files) <= float(self.settings.get("in_memory_mb", 256)) * 2**20:
            # A small output goes into the object store once, one block per file, read here with
            # pyarrow: each consumer then starts from its blocks instead of running its own read
            # job, and no read job runs at all (`read_parquet(...).materialize()` took 2-3 s for a
            # few kB here, most of it Ray Data's start-up; a node may have many consumers).
            import pyarrow.parquet as pq

            # files written one per block of a cut segment are small: joined again here (blocks.py)
            from raypress.dag.blocks import coalesce_tables

            ds = ray.data.from_arrow(coalesce_tables([pq.read_table(f) for f in files], self._rows_per_block()))
        else:  # a large one stays lazy, read per consumer, so memory never holds it all
            ds = ray.data.read_parquet([str(f) for f in files])
        return DatasetArtifact(ds, path=str(out_dir), rows=rows)

    def _rows_in(self, node: VNode) -> int:
        total = 0
        for art in self._inputs(node).values():
            if isinstance(art, DatasetArtifact):
                total += art.rows or 0
        return total

    # -- stages making a Model / Report ------------------------------------------
    def _run_artifact_step(self, nid: str) -> None:
        node = self.vp.nodes[nid]
        consumed = self._consumed([nid])
        if node.op_cls.resumable and self._resume(nid, [nid], consumed):
            return
        self.store.clear_outputs(nid)
        self.emit({"event": "node_started", "node": nid, "op": node.op_cls.name})
        start = time.perf_counter()
        ctx = self.ctx(nid)
        ctx.input_rows = self._rows_in(node)
        op = node.make_op(self._side_artifacts(node))
        inputs = self._inputs(node)
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
        e = entry(node.op_cls.name, node.kind, self._rows_in(node), 0, seconds=time.perf_counter() - start,
                  transforms=True, artifact=art.path)
        self.ledger.nodes[nid] = e
        self._save_state(nid, consumed, files_under([art.path] if art.path else []),
                         {"entries": {nid: e}, "output_path": art.path, "type": expected.value})
        self.emit({"event": "node_finished", "node": nid, "artifact": art.path, "seconds": e["seconds"]})

    # -- resume / error budget ----------------------------------------------------
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
        self.output_digests[nid] = digest(produced)
        self.store.save_state(nid, {"hash": self.hashes[nid], "consumed": consumed, "produced": produced, **rest})

    def _stale(self, state: dict[str, Any], consumed: dict[str, Any]) -> str | None:
        """Why a finished step's saved state no longer describes the data (None: it still does)."""
        if state.get("hash") is None or "consumed" not in state or "produced" not in state:
            return "its saved state is from an older raypress"
        before = state["consumed"].get("upstream", {})
        for producer, now in consumed["upstream"].items():
            if before.get(producer) != now:
                return f"its input '{producer}' changed (re-run)"
        return input_change(state["consumed"].get("files", {}), consumed["files"]) or output_change(state["produced"])

    def _resume(self, sink: str, chain: list[str], consumed: dict[str, Any]) -> bool:
        state = self.store.load_state(sink)
        if state is None:
            return False
        if state.get("hash") != self.hashes[sink]:
            reason: str | None = "configuration changed"
        else:
            reason = self._stale(state, consumed)
        if reason is not None:
            self.emit({"event": "node_rerun", "node": sink, "nodes": chain, "reason": reason})
            return False
        self.ledger.nodes.update(state["entries"])
        kind = state.get("type")
        if kind == ArtifactType.MODEL.value:
            self.artifacts[sink] = ModelArtifact.load(state["output_path"])
        elif kind == ArtifactType.REPORT.value:
            self.artifacts[sink] = ReportArtifact.load(state["output_path"])
        elif state.get("materialized"):
            self.artifacts[sink] = self._read_materialized(Path(state["output_path"]), int(state["rows"]))
        self.output_digests[sink] = digest(state["produced"])
        for nid in chain:
            self.emit({"event": "node_skipped", "node": nid,
                       "reason": "output on disk, inputs and config unchanged"})
        return True

    def _check_error_budget(self, nodes: list[VNode], entries: dict[str, dict], sink: str) -> None:
        limit = float(self.settings.get("max_error_ratio", 0.01))
        for n in nodes:
            e = entries[n.id]
            if e["rows_in"] and e["quarantined"] / e["rows_in"] > limit:
                first = _first_error(self.store.quarantine_dir(sink), n.id)
                raise RunFailed(
                    f"node '{n.id}' ({n.op_cls.name}): {e['quarantined']} of {e['rows_in']} rows "
                    f"({e['quarantined'] / e['rows_in']:.1%}) raised errors, over max_error_ratio {limit}. "
                    f"First: {first}. All of them are in {self.store.quarantine_dir(sink)}/")


def describe_error(exc: BaseException) -> str:
    """One line for the ledger and the CLI: what stopped the run."""
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted (Ctrl-C / SIGINT)"
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    name = type(exc).__name__
    return text if isinstance(exc, RunFailed) else f"{name}: {text}" if text else name


def step_nodes(step: Segment | str) -> list[str]:
    return step.nodes if isinstance(step, Segment) else [step]


def step_reads(plan: Plan, step: Segment | str) -> set[str]:
    """The nodes outside ``step`` whose outputs it reads (every input slot of every node in it)."""
    own = set(step_nodes(step))
    return {p for nid in own for producers in plan.node(nid).slots.values() for p in producers} - own


def _streaming(nodes: list[VNode]) -> list[VNode]:
    return [n for n in nodes if n.kind in STREAMING_KINDS]


def _first_error(qdir: Path, node_id: str) -> str:
    import pyarrow.parquet as pq

    from raypress.schema import DETAIL_COL, ID_COL, NODE_COL

    for f in sorted(qdir.glob("*.parquet")):
        t = pq.read_table(f)
        for row in t.select([c for c in (ID_COL, NODE_COL, DETAIL_COL) if c in t.column_names]).to_pylist():
            if row.get(NODE_COL) == node_id:
                return f"row {row.get(ID_COL)!r}: {row.get(DETAIL_COL)}"
    return "(see quarantine)"
