"""A run stopped by a signal ends as ``status: cancelled`` with the signal's name, in one line.

Why: SIGTERM reached Ray's C++ failure handler, which printed a stack dump (~30 lines through the
supervisor) before Ray's Python handler turned it into ``SystemExit: 15``, recorded as a failure;
SIGINT was recorded as ``KeyboardInterrupt:`` with nothing after the colon.  Python's own handlers,
set again once Ray is up, replace Ray's at the C level (so no dump) and raise :class:`RunCancelled`
where the run is, which unwinds it like any error, cleanups included.  While Ray starts, its own
SIGTERM handlers are kept out (``ray_compat.ray_init_keeps_signal_handlers``: one would end the run
as ``SystemExit: 15``), and before the runner sets its handlers a supervised run ends quietly
(:func:`exit_on_signals`); its supervisor records the cancellation then, and sends a signal again
that the run has not acknowledged."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator

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


_received: RunCancelled | None = None  # the first cancel signal of this process's current run
_before: dict[int, object] = {}  # the handlers a run found, put back when it ends


def _raise(signum: int, _frame) -> None:
    global _received
    hold_signals()  # the run is cancelling: a second signal must not cut its ledger short
    _received = RunCancelled(signum)
    raise _received


def _note(signum: int, _frame) -> None:
    global _received
    if _received is None:
        _received = RunCancelled(signum)


def cancel_on_signals(fresh: bool = False) -> None:
    """Make SIGINT, SIGTERM and SIGHUP raise :class:`RunCancelled` in the main thread (call again
    after ``ray.init``: Ray installs handlers of its own); ``fresh`` forgets an earlier run's signal.
    Elsewhere than the main thread, nothing."""
    global _received
    if threading.current_thread() is not threading.main_thread():
        return
    if fresh:
        _received = None
        _before.update({sig: signal.getsignal(sig) for sig in CANCEL_SIGNALS})
    for sig in CANCEL_SIGNALS:
        signal.signal(sig, _raise)


def exit_on_signals() -> None:
    """Until the runner sets its own handlers: a cancel signal ends this process at once, silently,
    with the shell's code for it (``128 + signum``).  For a supervised run's first second (imports,
    reading the pipeline), where Python's default would print a ``KeyboardInterrupt`` traceback; its
    supervisor records the cancellation and says so in one line."""
    if threading.current_thread() is threading.main_thread():
        for sig in CANCEL_SIGNALS:
            signal.signal(sig, lambda signum, _frame: os._exit(128 + signum))


def hold_signals() -> None:
    """From now on a cancel signal is noted (see :func:`received`), not raised: for the code that
    writes a stopping run's cleanups and ledger, which an exception in the middle would cut short."""
    if threading.current_thread() is threading.main_thread():
        for sig in CANCEL_SIGNALS:
            signal.signal(sig, _note)


def restore_signals() -> None:
    """Put back the handlers found by ``cancel_on_signals(fresh=True)`` (a notebook or a test that
    ran a pipeline gets its Ctrl-C back)."""
    if threading.current_thread() is threading.main_thread():
        for sig, handler in _before.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        _before.clear()


@contextlib.contextmanager
def cancel_deferred() -> Iterator[None]:
    """A cancel signal that arrives inside the block is held until it ends, then delivered again to
    this process's own handler: for a step that must not stop half-way (a writer's commit: its
    destination holds either its old parts or its new ones, never a mix of both).  Elsewhere than the
    main thread Python delivers no signal, so there is nothing to hold."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    before = {sig: signal.getsignal(sig) for sig in CANCEL_SIGNALS}
    for sig in CANCEL_SIGNALS:
        signal.signal(sig, lambda signum, _frame: held.append(signum))
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
    if held:
        os.kill(os.getpid(), held[0])


def received() -> RunCancelled | None:
    """The cancellation this run received, if any, whatever error it surfaced as: raised inside a C
    extension's call (Ray's Cython code), it reaches the run as ``SystemError: <built-in method ...>
    returned a result with an exception set``."""
    return _received


def end_now(exit_code: int) -> None:
    """End this process and the Ray processes it started at once (SIGKILL, no ``ray.shutdown``).

    For a run whose supervisor died (SIGHUP): nobody reads its output or waits for it, its ledger
    and events are written, and Ray's orderly shutdown took 2-4 s more; a connected cluster's
    processes are not this process's children and are left alone.  Whatever goes wrong while it
    looks for them, this process ends."""
    try:
        _kill_own_ray()
    finally:
        os._exit(exit_code)


def _kill_own_ray(rounds: int = 3, pause_s: float = 0.05) -> None:
    """SIGKILL this process's descendants and every process of a Ray session it started, those
    re-parented away included (a DashboardAgent outlived the run when its raylet went first), until
    a look finds none (one that forked while they were being killed is found by the next look)."""
    from raypress.dag.ray_compat import own_session_dir
    from raypress.dag.supervisor import descendants, processes_of_sessions_started_by, session_processes

    me = os.getpid()
    session = own_session_dir()
    for _ in range(rounds):
        doomed = set(descendants(me)) | set(processes_of_sessions_started_by(me))
        doomed |= set(session_processes(session)) if session else set()
        doomed.discard(me)
        if not doomed:
            return
        for pid in doomed:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(pause_s)
