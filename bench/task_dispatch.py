"""Task dispatch: how busy Ray Data keeps the CPUs when each task of a fused chain is short.

A reader segment that only parses JSON Lines and writes parquet runs one task per span of a file,
about 0.16 s each here.  Ray Data's scheduling loop waits up to 0.1 s in ``ray.wait`` for *all* its
running tasks' outputs, and a task's last block and its end are usually seen one wait apart, so a
finished task's CPU stayed idle for up to ~0.2 s before the next task started.  raypress shortens
that wait (``ray_compat.notice_finished_tasks_sooner``).  This bench runs the same chain -- short
CPU-bound tasks that yield four blocks each, then a sink, ``np`` tasks at once, rows kept in order, the
resource-budget policy off (what a raypress run sets) -- with Ray's default wait and with
raypress's, in one Ray session, alternating, and prints each one's CPU utilisation (task seconds /
wall / CPUs).

    python bench/task_dispatch.py                    # 0.16 s tasks, 3 rounds
    python bench/task_dispatch.py --task-s 1.0       # longer tasks lose less

The last line is ``ratio N.NN``: raypress's utilisation / Ray's default's.
"""

from __future__ import annotations

import argparse
import statistics
import time

import pyarrow as pa

CPUS = 2
RAY_DEFAULT_WAIT_S = 0.1


def chain_utilisation(task_s: float, total_s: float) -> float:
    """Run ``total_s`` seconds of work cut into ``task_s`` tasks; the share of the CPUs they kept busy."""
    import ray.data

    def busy(seconds: float) -> None:
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline:  # spin: the work is CPU time on purpose
            continue

    def read(batch: pa.Table):  # like a reader's span: a few blocks, CPU-bound
        for _ in range(4):
            busy(task_s / 4)
            yield pa.table({"x": list(range(1000))})

    def sink(table: pa.Table) -> pa.Table:
        return pa.table({"rows": [table.num_rows]})

    n = max(CPUS, round(total_s / task_s))
    pool = {"compute": ray.data.TaskPoolStrategy(size=CPUS)}
    ds = ray.data.from_items([{"i": i} for i in range(n)], override_num_blocks=n)
    ds = ds.map_batches(read, batch_size=1, batch_format="pyarrow", **pool)
    ds = ds.map_batches(sink, batch_size=None, batch_format="pyarrow", **pool)
    start = time.perf_counter()
    ds.take_all()
    return n * task_s / (time.perf_counter() - start) / CPUS


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--task-s", type=float, default=0.16, help="seconds of work per task")
    ap.add_argument("--total-s", type=float, default=12.0, help="seconds of work per run")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)

    import ray

    from raypress.dag import ray_compat

    ray.init(num_cpus=CPUS, include_dashboard=False, log_to_driver=False)
    ray_compat.keep_rows_in_order()
    ray_compat.start_every_core_at_once()
    chain_utilisation(args.task_s, 2.0)  # warm the workers
    results: dict[str, list[float]] = {"ray default": [], "raypress": []}
    for _ in range(args.rounds):
        for name, wait in (("ray default", RAY_DEFAULT_WAIT_S), ("raypress", ray_compat.TASK_WAIT_S)):
            ray_compat.notice_finished_tasks_sooner(wait)
            results[name].append(chain_utilisation(args.task_s, args.total_s))
    ray.shutdown()
    print(f"{args.task_s:.2f} s tasks on {CPUS} CPUs, CPU utilisation (median of {args.rounds}):")
    for name, values in results.items():
        print(f"  {name:12s} wait {RAY_DEFAULT_WAIT_S if name == 'ray default' else ray_compat.TASK_WAIT_S:.2f} s: "
              f"{statistics.median(values):.0%}  ({', '.join(f'{v:.0%}' for v in values)})")
    print(f"ratio {statistics.median(results['raypress']) / statistics.median(results['ray default']):.2f}")


if __name__ == "__main__":
    main()
