"""Data-Juicer's ``np`` on Ray: the reader's segment keeps one task queued behind the running ones
(issue 30: the gap between a finished task and the next left 5-10% of the CPUs idle), while Ray's
CPUs keep ``np`` of them running and the reader, its ops and the sink stay one fused task."""

from __future__ import annotations

import time

import pyarrow as pa

from raypress.operators.base import RunContext
from raypress.operators.shared.files import map_items, np_task_pool, np_tasks_submitted


def test_one_task_is_queued_only_where_np_takes_every_cpu():
    assert np_tasks_submitted(2, 2) == 3  # both CPUs run, one waits at the raylet
    assert np_tasks_submitted(1, 2) == 1  # np below the CPUs: the cap is what keeps one running
    assert np_tasks_submitted(3, 2) == 3  # already one more than can run
    assert np_tasks_submitted(8, 2) == 8


def test_the_reader_and_the_op_after_it_stay_one_task_and_np_of_them_run_at_once(ray_session, tmp_path):
    import ray

    def read_one(item):
        start = time.time()
        time.sleep(0.15)
        yield pa.table({"item": [item["i"]], "reader_task": [ray.get_runtime_context().get_task_id()],
                        "start": [start], "end": [time.time()]})

    def op(table: pa.Table) -> pa.Table:
        return table.append_column("op_task", pa.array([ray.get_runtime_context().get_task_id()] * table.num_rows))

    ctx = RunContext(run_dir=str(tmp_path), node_id="src", settings={"np": 2})
    ds = map_items([{"i": i} for i in range(8)], read_one, ctx)
    rows = ds.map_batches(op, batch_size=None, batch_format="pyarrow", compute=np_task_pool(2)).take_all()

    assert sorted(r["item"] for r in rows) == list(range(8))
    assert all(r["reader_task"] == r["op_task"] for r in rows)  # fused: the op ran in the reader's task
    spans = [(r["start"], r["end"]) for r in rows]
    most = max(sum(1 for s, e in spans if s <= t < e) for t, _ in spans)
    assert most <= 2, spans  # np = 2 running, the third one queued
