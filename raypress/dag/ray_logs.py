"""Ray's own log lines go to the run directory (``RUN_DIR/logs/ray.log``), not to the terminal.

Why: ``make demo`` printed ~20 lines of Ray's (INFO progress logs, a token-auth warning, "execution
finished", a truncated operator name) between raypress's own, and a signal during Ray's start-up
dumped its C++ stack; none of it tells a user what the run did.  ``raypress run --verbose`` shows them
again.  Two routes lead to the one file:

- in the run's process, Ray's Python loggers write to it (:func:`send_ray_logs_to`, through
  ``ray_compat.move_ray_log_handlers``);
- what still reaches the run's stdout/stderr (Ray's C++ log lines, its workers' lines that
  ``log_to_driver`` prints, a failure handler's stack dump) is recognised by the supervisor with
  :class:`RayLines` and appended by :class:`RayLog`.
"""

from __future__ import annotations

import logging
import re
import sys
import threading
from pathlib import Path

from raypress.dag.run_log import LOG_DIR, clean_line

RAY_LOG_FILE = "ray.log"
RAY_FORMAT = "%(asctime)s\t%(levelname)s %(filename)s:%(lineno)s -- %(message)s"  # Ray's own

_LEVEL = r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)"
_STAMP = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}"
_RAY_PATTERNS = (
    rf"^{_STAMP}\s+{_LEVEL} \S+:\d+ -- ",  # Ray's Python loggers (RAY_FORMAT)
    rf"^\[{_STAMP} [DIWEF] \d+ \d+\] ",  # Ray's C++ (glog-style) lines
    rf"^{_LEVEL} {_STAMP} ",  # Ray Serve's and Ray Train's loggers
    r"^\((?:raylet|gcs_server|autoscaler|monitor|log_monitor|dashboard\w*)(?:[ ,][^)]*)?\)",  # a Ray process
    r"^\([^()]*(?:\([^()]*\)[^()]*)*\bpid=\d+(?:, ip=[^)\s]+)?\)",  # a worker's line: (Name pid=N, ip=...)
    r"^\*\*\* SIG\w+ received at time=",  # a failure handler's stack dump
    r"^PC: @ ",
    r"^\s+@\s+0x[0-9a-f]+ ",
    r"^\S*(?:site|dist)-packages/ray/\S+\.py:\d+: \w*Warning: ",  # a Python warning raised in Ray's code
)
_RAY_LINE = re.compile("|".join(f"(?:{p})" for p in _RAY_PATTERNS))


def ray_log_path(run_dir: str | Path) -> Path:
    return Path(run_dir) / LOG_DIR / RAY_LOG_FILE


def is_ray_line(text: str) -> bool:
    """Whether one printed line (colours and all) is Ray's rather than raypress's."""
    return bool(_RAY_LINE.search(clean_line(text)))


class RayLines:
    """Tells Ray's lines in one stream: :func:`is_ray_line`, and the indented or empty lines that
    follow one (a multi-line message, the source line under a warning)."""

    def __init__(self) -> None:
        self._in_ray = False

    def __call__(self, text: str) -> bool:
        plain = clean_line(text)
        if _RAY_LINE.search(plain):
            self._in_ray = True
        elif not (self._in_ray and (not plain.strip() or plain[:1].isspace())):
            self._in_ray = False
        return self._in_ray


class RayLog:
    """Appends lines to ``logs/ray.log`` from several threads; the file is made at the first line."""

    def __init__(self, run_dir: str | Path) -> None:
        self.path = ray_log_path(run_dir)
        self._lock = threading.Lock()
        self._file = None

    def write(self, text: str) -> None:
        line = clean_line(text)
        with self._lock:
            if self._file is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - closed by close()
            if not self._file.closed:
                self._file.write(line + "\n")
                self._file.flush()

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()


class _RunFileHandler(logging.Handler):
    """A logging handler that appends to the current run's ``ray.log`` (one handler for the
    process: a second run in it moves the target, not the handlers)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.setFormatter(logging.Formatter(RAY_FORMAT))
        self.path: Path | None = None
        self._file = None

    def point_at(self, path: Path) -> None:
        self.acquire()
        try:
            if self._file is not None:
                self._file.close()
                self._file = None
            self.path = path
        finally:
            self.release()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record)
            if self._file is None and self.path is not None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - kept for the run
            if self._file is not None:
                self._file.write(line + "\n")
                self._file.flush()
        except Exception:  # noqa: BLE001 - logging must never break the run
            self.handleError(record)


_HANDLER = _RunFileHandler()


def send_ray_logs_to(path: str | Path) -> None:
    """From now on, Ray's Python loggers in this process write to ``path`` instead of the terminal.
    Cheap before Ray is imported: the handlers move when :func:`reroute` runs (``ensure_ray`` calls
    it before and after ``ray.init``)."""
    _HANDLER.point_at(Path(path))
    if "ray" in sys.modules:
        reroute()


def reroute() -> None:
    """Move the handlers of Ray's loggers configured since the last call (nothing when not routed)."""
    if _HANDLER.path is None:
        return
    from raypress.dag.ray_compat import move_ray_log_handlers

    move_ray_log_handlers(_HANDLER)


def routed() -> Path | None:
    """The file Ray's logs go to in this process (None: the terminal, Ray's default)."""
    return _HANDLER.path
