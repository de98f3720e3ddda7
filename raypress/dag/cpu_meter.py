"""How busy the cluster's CPUs were during a segment: the ledger's ``cpu_utilisation``.

Why: a segment can be correct and still leave half the machine idle (a 4-file text recipe ran as
one task on one core); that is invisible in counts and per-op seconds, so every segment reports
CPU seconds used by Ray's worker processes / (wall seconds x the cluster's CPUs).

How: one probe actor per alive node (0 CPUs, pinned there) reads the CPU time of every process
under that node's raylet (the workers, which are the raylet's children) from /proc, every
``SAMPLE_EVERY`` seconds, and remembers each process (by pid and start time) with the last time it
saw: a worker that exits mid-segment (a shuffle's aggregator actors, idle workers the raylet stops)
keeps what it used.  Its exit cannot be left to the raylet's ``cutime``: the raylet does not wait
for its children, so the kernel adds nothing there (a segment with a hash shuffle read as 0%).
Where a parent does reap them, its ``cutime`` grows by what they used, and only the larger of that
growth and their remembered times counts, never both.  What a process used after the last sample
before it exited (< ``SAMPLE_EVERY`` s) is lost.  The
driver's own CPU during the segment counts too: Ray Data's streaming executor runs there and is
part of running the segment (on 2 cores it is ~5% of the machine, which an idle worker could not
have used); the raylet, GCS and dashboard processes do not.  Where /proc is missing the probes
report nothing and the ledger says ``null``.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
SAMPLE_EVERY = 0.5


def stat_fields(pid: int) -> list[str] | None:
    """/proc/PID/stat's fields from the state on (field 3 of proc(5)); None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rfind(")") + 2:].split()  # fields from the state on (field 3 of proc(5))


def tree_cpu_seconds(root: int) -> float | None:
    """CPU seconds of ``root``'s descendants (running and reaped) from /proc; None without /proc."""
    per_process = descendants_cpu(root)
    return None if per_process is None else sum(per_process.values())


def descendants_cpu(root: int) -> dict[tuple[int, int], float] | None:
    """CPU seconds per descendant of ``root`` (key: pid and start time, so a reused pid is another
    process), each with what its own reaped children used, plus ``root``'s reaped children under
    the key ``(root, -1)``; None without /proc or ``root``."""
    if not Path("/proc").is_dir():
        return None
    children: dict[int, list[int]] = {}
    fields: dict[int, list[str]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            f = stat_fields(int(entry.name))
            if f is not None:
                fields[int(entry.name)] = f
                children.setdefault(int(f[1]), []).append(int(entry.name))
    if root not in fields:
        return None
    found = {(root, -1): (int(fields[root][13]) + int(fields[root][14])) / TICKS}  # cutime + cstime
    frontier = list(children.get(root, []))
    while frontier:
        pid = frontier.pop()
        f = fields.get(pid)
        if f is None:
            continue
        ticks = int(f[11]) + int(f[12]) + int(f[13]) + int(f[14])  # utime stime cutime cstime
        found[(pid, int(f[19]))] = ticks / TICKS  # field 22 of proc(5): the start time
        frontier.extend(children.get(pid, []))
    return found


class NodeCpuProbe:
    """Lives on one node (a Ray actor) and samples that node's worker CPU time in a thread, keeping
    the last value seen of every process, exited ones included."""

    def __init__(self, raylet: int | None = None) -> None:
        from raypress.dag.ray_compat import node_raylet_pid

        self.raylet = raylet if raylet is not None else node_raylet_pid()
        self.root = (self.raylet, -1)
        self.seen: dict[tuple[int, int], float] = {}  # every process ever seen: its last CPU seconds
        self.live: set[tuple[int, int]] = set()
        self.reaped_at_start: float | None = None  # the raylet's cutime + cstime when first read
        self.lock = threading.Lock()
        self.readable = self._sample()
        threading.Thread(target=self._run, daemon=True).start()

    def _sample(self) -> bool:
        now = descendants_cpu(self.raylet)
        if now is None:
            return False
        with self.lock:
            if self.reaped_at_start is None:
                self.reaped_at_start = now[self.root]
            self.seen.update(now)
            self.live = set(now)
        return True

    def _run(self) -> None:
        """Sample until the raylet is gone (a probe kept in a driver outlives the Ray it watched
        when that driver starts another)."""
        while self.readable:
            time.sleep(SAMPLE_EVERY)
            if not self._sample():
                return

    def holds(self, pid: int) -> bool:
        """Whether process ``pid`` of this node runs under the raylet now."""
        self._sample()
        with self.lock:
            return any(key[0] == pid for key in self.live if key != self.root)

    def cpu_seconds(self) -> float | None:
        if not self._sample():
            return None
        with self.lock:
            running = sum(v for k, v in self.seen.items() if k in self.live and k != self.root)
            gone = sum(v for k, v in self.seen.items() if k not in self.live)
            start = self.reaped_at_start or 0.0
            return running + start + max(self.seen[self.root] - start, gone)


class CpuMeter:
    """``start()`` then ``utilisation()``: the share of the cluster's CPUs busy in between.

    The probes are kept for every run of this driver process (one actor per node, ``driver_actors``),
    and the driver's own node is probed from here, without an actor, when its raylet is known: the
    one this driver started (an embedded Ray), or the one above it (a job's driver runs below the
    raylet).  Starting the probes and waiting for them was ~0.8 s of every run."""

    def __init__(self) -> None:
        import ray

        from raypress.dag.ray_compat import own_raylet_pid

        here = ray.get_runtime_context().get_node_id()
        started = own_raylet_pid()
        above = None if started is not None else raylet_above(os.getpid())
        raylet = started if started is not None else above
        self.probes: list[Any] = []
        for node in ray.nodes():
            if not node.get("Alive"):
                continue
            if node["NodeID"] == here and raylet is not None:
                self.probes.append(_local_probe(raylet))
            else:
                self.probes.append(_probe_actor(node["NodeID"]))
        self.cpus = float(ray.cluster_resources().get("CPU", 0.0))
        # the driver's CPU counts where it is outside the raylet's tree (the probes count it
        # otherwise): a driver that started its node is the raylet's parent; one that joined is
        # below it (a job's) or not below any raylet at all (a shell's `raypress run --address`)
        self.count_driver = above is None
        self._start: tuple[float, float | None, float] | None = None

    def _read(self) -> float | None:
        """The cluster's worker CPU seconds so far; None when a probe cannot answer (a node gone:
        measuring never fails a run, and a dead raylet is the supervisor's to report)."""
        import ray

        try:
            here = [p.cpu_seconds() for p in self.probes if isinstance(p, NodeCpuProbe)]
            refs = [p.cpu_seconds.remote() for p in self.probes if not isinstance(p, NodeCpuProbe)]
            values = here + (ray.get(refs, timeout=30) if refs else [])
        except Exception:  # noqa: BLE001 - RayActorError, GetTimeoutError, a node lost
            forget_probes()  # a dead one is made again by the next run
            return None
        return None if not values or any(v is None for v in values) else float(sum(values))

    def start(self) -> None:
        self._start = (time.perf_counter(), self._read(), time.process_time())

    def utilisation(self) -> float | None:
        """CPU seconds used / (wall x CPUs) since ``start()``; None when it cannot be measured."""
        if self._start is None:
            return None
        began, cpu, driver = self._start
        now, wall = self._read(), time.perf_counter() - began
        if cpu is None or now is None or wall <= 0 or self.cpus <= 0:
            return None
        used = max(0.0, now - cpu) + (time.process_time() - driver if self.count_driver else 0.0)
        return round(used / (wall * self.cpus), 3)


def raylet_above(pid: int) -> int | None:
    """The nearest ancestor of ``pid`` that is a raylet (a Ray job's driver runs below its node's
    raylet, through the job supervisor); None when none is, or without /proc."""
    seen: set[int] = set()
    while pid > 1 and pid not in seen:
        seen.add(pid)
        fields = stat_fields(pid)
        if fields is None or len(fields) < 2:
            return None
        pid = int(fields[1])  # the parent
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() == "raylet":
                return pid
        except OSError:
            return None
    return None


def new_meter() -> Any:
    """A CpuMeter, or None where it cannot be made (no /proc, an unusual cluster)."""
    try:
        return CpuMeter()
    except Exception:  # noqa: BLE001 - measuring must never stop a run
        return None


_local: dict[int, NodeCpuProbe] = {}
_probe_names: set[str] = set()


def _local_probe(raylet: int) -> NodeCpuProbe:
    """The in-process probe of this driver's own node (one per raylet, kept: its thread samples
    for every run)."""
    probe = _local.get(raylet)
    if probe is None or not probe._sample():  # none yet, or its raylet went (and the pid came back)
        probe = _local[raylet] = NodeCpuProbe(raylet)
    return probe


def _probe_actor(node_id: str) -> Any:
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from raypress.operators.shared.driver_actors import driver_actor

    def make() -> Any:
        import ray

        strategy = NodeAffinitySchedulingStrategy(node_id, soft=False)
        return ray.remote(num_cpus=0)(NodeCpuProbe).options(scheduling_strategy=strategy).remote()

    name = f"cpu_probe/{node_id}"
    _probe_names.add(name)
    return driver_actor(name, make)


def forget_probes() -> None:
    from raypress.operators.shared.driver_actors import forget

    for name in _probe_names:
        forget(name)
