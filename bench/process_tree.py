"""What a run costs the machine: CPU seconds, peak memory and spilled bytes of a whole process tree.

Why PSS: Ray's object store is shared memory mapped by the raylet and every worker, so summed RSS
counts each of its pages once per process that touched it; summed PSS (each shared page split
between the processes mapping it, from ``/proc/<pid>/smaps_rollup``) counts it once.  Both are
reported.  The tree is this process and every descendant: an embedded Ray's raylet, GCS and
workers are its children and grandchildren.
"""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path

import psutil


def _pss(pid: int) -> int:
    """The process's PSS in bytes; 0 for one that ended since it was listed."""
    with contextlib.suppress(OSError):  # ended between the listing and this read
        with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    return 0


def tree(root: int) -> list[psutil.Process]:
    """``root`` and its descendants (an embedded Ray's raylet, GCS and workers among them)."""
    try:
        me = psutil.Process(root)
        return [me, *me.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def dir_bytes(path: Path) -> int:
    """Bytes of the files under ``path`` (a file removed while walking counts 0)."""
    total = 0
    for dirpath, _, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):  # removed while walking (spill files come and go)
                total += os.lstat(os.path.join(dirpath, name)).st_size
    return total


class TreeSampler:
    """Every ``every`` s: summed PSS and RSS of the tree, the spill folder's size, each process's CPU
    time (so the run's CPU seconds are known however busy the machine is)."""

    def __init__(self, root: int | None = None, spill_dir: Path | None = None, every: float = 1.0):
        self.root, self.spill_dir, self.every = root or os.getpid(), spill_dir, every
        self.peak_pss = self.peak_rss = self.peak_spill = 0
        self.peak_one = self.procs = 0  # the largest single RSS; the most processes at once
        self._cpu_first: dict[int, float] = {}
        self._cpu_last: dict[int, float] = {}
        self._opening = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def sample(self) -> None:
        pss = rss = count = 0
        for p in tree(self.root):
            try:
                with p.oneshot():
                    one = p.memory_info().rss
                    t = p.cpu_times()
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
            rss, count, self.peak_one = rss + one, count + 1, max(self.peak_one, one)
            pss += _pss(p.pid)
            self._cpu_first.setdefault(p.pid, t.user + t.system if self._opening else 0.0)
            self._cpu_last[p.pid] = t.user + t.system
        self.peak_pss, self.peak_rss = max(self.peak_pss, pss), max(self.peak_rss, rss)
        self.procs = max(self.procs, count)
        if self.spill_dir is not None and self.spill_dir.exists():
            self.peak_spill = max(self.peak_spill, dir_bytes(self.spill_dir))

    def cpu_seconds(self) -> float:
        return sum(self._cpu_last[k] - self._cpu_first.get(k, 0.0) for k in self._cpu_last)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.sample()

    def __enter__(self) -> "TreeSampler":
        self._opening = True
        self.sample()  # CPU times at the start
        self._opening = False  # a process first seen later started during the run: all its time counts
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()
