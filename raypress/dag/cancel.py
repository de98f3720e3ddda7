"""A run stopped by a signal ends as ``status: cancelled`` with the signal's name, in one line.

Why: SIGTERM reached Ray's C++ failure handler, which printed a stack dump (~30 lines through the
supervisor) before Ray's Python handler turned it into ``SystemExit: 15``, recorded as a failure;
SIGINT was recorded as ``KeyboardInterrupt:`` with nothing after the colon.  Python's own handlers,
set again once Ray is up, replace Ray's at the C level (so no dump) and raise :class:`RunCancelled`
where the run is, which unwinds it like any error, cleanups included."""

from __future__ import annotations

import contextlib
import os
import signal
import threading

CANCEL_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class RunCancelled(BaseException):
    """The run was stopped on purpose (a BaseException, like KeyboardInterrupt: no op's
    ``except Exception`` may swallow it)."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        self.signal_name = signal.Signals(signum).name
        super().__init__(f"cancelled by {self.signal_name}")

    @property
    def exit_code(self) -> int:
        """The shell's convention for a process ended by a signal."""
        return 128 + self.signum


def _raise(signum: int, _frame) -> None:
    for sig in CANCEL_SIGNALS:  # the run is cancelling: a second signal must not cut its ledger short
        signal.signal(sig, signal.SIG_IGN)
    raise RunCancelled(signum)


def cancel_on_signals() -> None:
    """Make SIGINT, SIGTERM and SIGHUP raise :class:`RunCancelled` in the main thread (call again
    after ``ray.init``: Ray installs handlers of its own).  Elsewhere than the main thread, nothing."""
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in CANCEL_SIGNALS:
        signal.signal(sig, _raise)


def end_now(exit_code: int) -> None:
    """End this process and the Ray processes it started at once (SIGKILL, no ``ray.shutdown``).

    For a run whose supervisor died (SIGHUP): nobody reads its output or waits for it, its ledger
    and events are written, and Ray's orderly shutdown took 2-4 s more; a connected cluster's
    processes are not this process's children and are left alone."""
    from raypress.dag.supervisor import descendants

    me = os.getpid()
    for pid in descendants(me):
        if pid != me:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
    os._exit(exit_code)
