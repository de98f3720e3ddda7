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
