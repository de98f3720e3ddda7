"""A run stopped by a signal ends as ``status: cancelled`` with the signal's name, in one line.

Why: SIGTERM reached Ray's C++ failure handler, which printed a stack dump (~30 lines through the
supervisor) before Ray's Python handler turned it into ``SystemExit: 15``, recorded as a failure;
SIGINT was recorded as ``KeyboardInterrupt:`` with nothing after the colon.  Python's own handlers,
set again once Ray is up, replace Ray's at the C level (so no dump) and raise :class:`RunCancelled`
where the run is, which unwinds it like any error, cleanups included."""

from __future__ import annotations

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
    raise RunCancelled(signum)


def cancel_on_signals() -> None:
    """Make SIGINT, SIGTERM and SIGHUP raise :class:`RunCancelled` in the main thread (call again
    after ``ray.init``: Ray installs handlers of its own).  Elsewhere than the main thread, nothing."""
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in CANCEL_SIGNALS:
        signal.signal(sig, _raise)
