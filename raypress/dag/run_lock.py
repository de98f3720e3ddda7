"""One run at a time per run directory: a lock file held for the whole life of a run.

Why: two `raypress run` into one `--run-dir` interleave their part files (outputs doubled and
quadrupled) and then mark every node finished, so later runs keep the corruption.

The lock is an `flock` on `<run_dir>/.lock` (released by the kernel when the holder dies, so a
crashed run never blocks the next one) plus the holder's PID, host and start time written in the
file, which is what a refused run prints.  The CLI's supervisor holds the lock and runs the
pipeline in a child; the child checks with :func:`held_by_parent` that the lock file names its
parent as holder, and runs without taking the lock again.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

LOCK_NAME = ".lock"


class RunDirLocked(Exception):
    """Another live run holds the run directory; the message names it."""

    def __init__(self, run_dir: Path, holder: dict[str, Any]):
        self.run_dir, self.holder = run_dir, holder
        pid, host = holder.get("pid", "?"), holder.get("host", "?")
        since = holder.get("started")
        when = f" since {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(since))}" if since else ""
        super().__init__(f"run directory {run_dir} is in use by another run: PID {pid} on {host}{when} "
                         f"({holder.get('command', 'raypress run')}); wait for it, stop it, or choose another --run-dir")


@dataclass
class RunLock:
    """``with RunLock(run_dir): ...`` — raises :class:`RunDirLocked` when another run holds it."""

    run_dir: Path
    command: str = "raypress run"
    _fh: IO[str] | None = None

    @property
    def path(self) -> Path:
        return Path(self.run_dir) / LOCK_NAME

    def acquire(self) -> "RunLock":
        Path(self.run_dir).mkdir(parents=True, exist_ok=True)
        fh = open(self.path, "a+", encoding="utf-8")
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = read_holder(self.path)
            fh.close()
            raise RunDirLocked(Path(self.run_dir), holder) from None
        fh.seek(0)
        fh.truncate()
        fh.write(json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "started": round(time.time(), 3),
                             "command": self.command}))
        fh.flush()
        self._fh = fh
        return self

    def release(self) -> None:
        if self._fh is None:
            return
        try:
            self._fh.seek(0)
            self._fh.truncate()  # an empty lock file: nobody holds it
            fcntl.flock(self._fh.fileno(), fcntl.LOCK_UN)
        finally:
            self._fh.close()
            self._fh = None

    def __enter__(self) -> "RunLock":
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def read_holder(path: Path) -> dict[str, Any]:
    """What the lock file says about its holder ({} when empty or unreadable)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def held_by_parent(run_dir: str | Path) -> bool:
    """Whether the lock of ``run_dir`` is held by this process's parent on this host (the CLI's
    supervisor, for the child that runs the pipeline)."""
    holder = read_holder(Path(run_dir) / LOCK_NAME)
    return holder.get("pid") == os.getppid() and holder.get("host") == socket.gethostname()
