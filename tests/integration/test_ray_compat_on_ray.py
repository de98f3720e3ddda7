"""The Ray behaviours raypress.dag.ray_compat relies on that need a running Ray (the session's
shared one): each test is named after the assumption it checks."""

from __future__ import annotations

import contextlib
import time

import pyarrow as pa
import pytest

from raypress.dag import ray_compat

pytestmark = pytest.mark.integration


def test_fused_task_name__a_chain_ending_in_the_sink_carries_its_name(ray_session):
    import ray.data

    class SegmentSink:  # named as the engine's sink: what Ray calls the fused task (defined here: pickled by value)
        def __call__(self, table: pa.Table) -> pa.Table:
            return table

    def _seen_name(table: pa.Table) -> pa.Table:
        return pa.table({"name": [ray_compat.current_task_name()] * table.num_rows,
                         "fused": [ray_compat.runs_fused_with_sink()] * table.num_rows})

    assert SegmentSink.__name__ == ray_compat.SINK_CLASS_NAME
    ds = ray.data.from_arrow(pa.table({"x": list(range(8))}))
    rows = ds.map_batches(_seen_name, batch_format="pyarrow").map_batches(
        SegmentSink(), batch_size=None, batch_format="pyarrow").take_all()
    assert rows and all(r["fused"] for r in rows), rows[0]
    assert ray_compat.FUSED_TASK_NAME in rows[0]["name"]


def test_worker_processes_are_reused__a_module_cache_outlives_a_task(ray_session):
    """Assumption 5: tasks run one after another reuse worker processes (worker_ops keeps ops there)."""
    import os

    import ray

    def worker_pid() -> int:
        return os.getpid()

    pid = ray.remote(num_cpus=1)(worker_pid)
    pids = [ray.get(pid.remote()) for _ in range(6)]
    assert len(set(pids)) < len(pids), pids


@contextlib.contextmanager
def rows_in_order():
    """Assumption 6 applied for the block, the context's own setting restored after it."""
    import ray.data

    context = ray.data.DataContext.get_current()
    saved = context.execution_options.preserve_order
    try:
        ray_compat.keep_rows_in_order()
        yield
    finally:
        context.execution_options.preserve_order = saved


def test_keep_rows_in_order__results_come_back_in_block_order(ray_session):
    """Assumption 6: with preserve_order, take_all returns blocks in input order however they finish."""
    import ray.data

    def slow_first(table: pa.Table) -> pa.Table:
        if table["x"][0].as_py() == 0:
            time.sleep(1.0)
        return table

    with rows_in_order():
        ds = ray.data.from_items([{"x": i} for i in range(4)], override_num_blocks=4)
        out = ds.map_batches(slow_first, batch_size=None, batch_format="pyarrow").take_all()
    assert [r["x"] for r in out] == [0, 1, 2, 3]


def test_keep_rows_in_order__iter_batches_yields_blocks_in_order_as_they_come(ray_session):
    """Assumption 6: with preserve_order, ``iter_batches(batch_size=None)`` yields blocks in input order
    however they finish, each once it and those before it are done (not all at the end): what the
    segment's live progress relies on."""
    import ray.data

    def slow_last(table: pa.Table) -> pa.Table:
        if table["x"][0].as_py() == 3:
            time.sleep(2.0)
        return table

    arrivals = []
    with rows_in_order():
        ds = ray.data.from_items([{"x": i} for i in range(4)], override_num_blocks=4)
        for batch in ds.map_batches(slow_last, batch_size=None, batch_format="pyarrow").iter_batches(
                batch_size=None, batch_format="pyarrow"):
            arrivals.append((batch["x"][0].as_py(), time.monotonic()))
    assert [x for x, _ in arrivals] == [0, 1, 2, 3]
    assert arrivals[3][1] - arrivals[0][1] > 1.0  # the first block came while the last one still ran


def test_start_every_core_at_once__the_first_tasks_of_a_chain_overlap(ray_session):
    """Assumption 7: without the resource-budget policy, a fused chain's first two tasks run at the
    same time (with it, the second waited for the first to finish)."""
    import ray.data
    from ray.data._internal.execution import backpressure_policy as policies

    def busy(table: pa.Table) -> pa.Table:
        start = time.time()
        while time.time() - start < 0.5:  # keep a CPU busy
            sum(range(1000))
        return pa.table({"start": [start], "end": [time.time()]})

    context = ray.data.DataContext.get_current()
    saved = context.get_config(policies.ENABLED_BACKPRESSURE_POLICIES_CONFIG_KEY, None)
    try:
        ray_compat.start_every_core_at_once()
        rows = ray.data.from_items([{"i": i} for i in range(4)], override_num_blocks=4).map_batches(
            busy, batch_size=1, batch_format="pyarrow").take_all()
    finally:
        context.set_config(policies.ENABLED_BACKPRESSURE_POLICIES_CONFIG_KEY,
                           saved if saved is not None else policies.ENABLED_BACKPRESSURE_POLICIES)
    first, second = sorted(rows, key=lambda r: r["start"])[:2]
    assert second["start"] < first["end"], rows  # both cores started at once


def test_node_raylet_pid__a_workers_parent_is_the_raylet(ray_session):
    """Assumption 8: a task's worker process is a child of its node's raylet."""
    import ray

    def parent_name() -> str:
        from pathlib import Path

        return Path(f"/proc/{ray_compat.node_raylet_pid()}/comm").read_text().strip()

    assert ray.get(ray.remote(num_cpus=1)(parent_name).remote()) == "raylet"


def test_cpu_meter_sees_a_busy_segment(ray_session):
    """The meter reads the workers' CPU: two tasks busy for a while show up as CPU seconds."""
    import ray

    from raypress.dag.cpu_meter import CpuMeter

    def spin() -> None:
        start = time.process_time()
        while time.process_time() - start < 0.4:  # keep a CPU busy
            sum(range(1000))

    meter = CpuMeter()
    before = meter._read()
    ray.get([ray.remote(num_cpus=1)(spin).remote() for _ in range(2)])
    assert before is not None and meter._read() - before >= 0.7


def test_cpu_meter_counts_an_embedded_driver_once(ray_session):
    """The driver of an embedded Ray is not under the raylet: its CPU is added (Ray Data's executor
    runs there); the driver of a submitted job is, and must not be added twice."""
    import os

    import ray

    from raypress.dag.cpu_meter import CpuMeter

    from raypress.dag.cpu_meter import NodeCpuProbe

    meter = CpuMeter()
    assert meter.count_driver is True
    local = meter.probes[0]  # the node this driver started is probed from here, no actor
    assert isinstance(local, NodeCpuProbe) and local.holds(os.getpid()) is False
    def pid() -> int:
        return os.getpid()

    worker_pid = ray.get(ray.remote(num_cpus=0)(pid).remote())
    assert local.holds(worker_pid) is True
    assert CpuMeter().probes[0] is local  # kept for the next run: one sampling thread per raylet

    from raypress.dag.cpu_meter import raylet_above

    def above() -> tuple[int | None, int]:  # a job's driver runs below the raylet as a worker does
        return raylet_above(os.getpid()), os.getppid()

    found, parent = ray.get(ray.remote(num_cpus=0)(above).remote())
    assert found == parent == local.raylet
    assert raylet_above(os.getpid()) is None  # this driver started its raylet: it is above it


def test_dead_ray_processes__the_driver_sees_its_own_live_raylet_and_nothing_dead(ray_session):
    """Assumption 11: the session's node lists its processes by Ray's type names (a dead raylet shows
    as "raylet"); a healthy session has none dead."""
    from ray._private import worker

    live = {kind for kind, _ in worker._global_node.live_processes()}
    assert {"raylet", "gcs_server"} <= live, live
    assert ray_compat.dead_ray_processes() == []


def test_own_session_dir__every_process_of_the_session_names_it(ray_session):
    """Assumption 11: a run ends its own session's processes by the folder their command lines name
    (`cancel.end_now`), those re-parented away from it included."""
    import os

    from ray._private import worker

    from raypress.dag.supervisor import _cmdline, session_processes

    session = ray_compat.own_session_dir()
    assert session and os.path.isdir(session)
    found = set(session_processes(session))
    raylets = {p.pid for kind, p in worker._global_node.live_processes() if kind == "raylet"}
    assert raylets and raylets <= found and os.getpid() not in found
    # Ray's agents title themselves (no folder in their command line left): found by their open logs
    titled = {pid for pid in found if _cmdline(pid).startswith(("ray::DashboardAgent", "ray::RuntimeEnvAgent"))}
    assert len(titled) == 2, {pid: _cmdline(pid)[:60] for pid in found}
