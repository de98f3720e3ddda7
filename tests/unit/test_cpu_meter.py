"""dag/cpu_meter.py reads a process tree's CPU time from /proc (no Ray)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from raypress.dag.cpu_meter import tree_cpu_seconds


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs /proc")
def test_a_childs_cpu_time_counts_while_it_runs_and_after_it_is_reaped():
    before = tree_cpu_seconds(os.getpid())
    child = subprocess.Popen([sys.executable, "-c", "import time\nt=time.process_time()\n"
                              "while time.process_time()-t<0.5: pass\nimport sys; sys.stdin.read()"],
                             stdin=subprocess.PIPE)
    deadline = time.monotonic() + 60
    try:
        while tree_cpu_seconds(os.getpid()) - before < 0.45:  # running: counted as our descendant
            assert time.monotonic() < deadline, "the child's CPU time never showed"
            time.sleep(0.05)
    finally:
        child.communicate(b"")
    assert tree_cpu_seconds(os.getpid()) - before >= 0.45  # reaped: counted in our cutime
    assert tree_cpu_seconds(2 ** 22 + 7) is None  # no such process


BUSY = "import time\nt=time.process_time()\nwhile time.process_time()-t<0.5: pass\n"


def _probe(monkeypatch):
    import raypress.dag.ray_compat as ray_compat
    from raypress.dag.cpu_meter import NodeCpuProbe

    monkeypatch.setattr(ray_compat, "node_raylet_pid", os.getpid)  # this process plays the raylet
    return NodeCpuProbe()


FLOAT_NOISE = 1e-6  # the probe sums tick counts as floats in varying order: 0.45 may read 0.4499999


def _wait_for(probe, before: float, seconds: float) -> float:
    """Waits until the probe shows ``seconds`` more than ``before``; returns the growth it saw."""
    deadline = time.monotonic() + 60
    while (seen := probe.cpu_seconds() - before) < seconds:
        assert time.monotonic() < deadline, "the CPU time never showed"
        time.sleep(0.05)
    return seen


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs /proc")
def test_the_probe_counts_a_reaped_worker_once(monkeypatch):
    probe = _probe(monkeypatch)
    before = probe.cpu_seconds()
    child = subprocess.Popen([sys.executable, "-c", BUSY + "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    seen = _wait_for(probe, before, 0.45)
    child.communicate(b"")  # reaped: its time moves into our cutime, and must not count twice
    assert seen - FLOAT_NOISE <= probe.cpu_seconds() - before < 0.85


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs /proc")
def test_the_probe_keeps_the_time_of_a_worker_that_left_unreaped(monkeypatch):
    """A raylet does not wait for its workers: one that exits leaves no trace in its cutime."""
    probe = _probe(monkeypatch)
    before = probe.cpu_seconds()
    parent = subprocess.Popen(
        [sys.executable, "-c", "import subprocess, sys\n"
         f"p = subprocess.Popen([sys.executable, '-c', {BUSY + 'import time; time.sleep(60)'!r}],"
         " stdout=subprocess.DEVNULL)\n"
         "print(p.pid, flush=True)\nsys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    orphan = int(parent.stdout.readline())
    try:
        seen = _wait_for(probe, before, 0.45)
        parent.communicate("")  # the busy grandchild is re-parented away from us, never reaped here
        assert probe.cpu_seconds() - before >= seen - FLOAT_NOISE  # what it used stays counted
    finally:
        os.kill(orphan, 9)
