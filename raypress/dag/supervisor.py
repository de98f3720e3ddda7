"""`raypress run` as two processes: a small supervisor that holds the run directory's lock, and
the run itself in a child.  Why: when Ray's raylet dies, Ray's C++ core ends the driver process
from below Python (no `except`, no `finally`), so a run that drove Ray itself left exit 1, no
message and no `ledger.json`.  The supervisor outlives that: when the child ends without a final
ledger it writes one with `status: failed` and the reason it found in what the child printed, and
says so.  It costs one extra Python start (~0.3 s) and nothing while the run works.

The terminal is the supervisor's too: the run sends its events as marked lines (``event_lines``),
which a :class:`RunOutput` (the CLI's ``progress_view``) draws; Ray's own lines go to
``RUN_DIR/logs/ray.log`` (``ray_logs``), and to the terminal as well only when ``verbose``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Protocol

from raypress.dag.cancel import CANCEL_SIGNALS
from raypress.dag.cpu_meter import stat_fields
from raypress.dag.event_lines import decode
from raypress.dag.progress_view import PlainLines
from raypress.dag.ray_deaths import SETTLE_S, WATCHED, death_line
from raypress.dag.ray_logs import RayLines, RayLog
from raypress.dag.resolve import ResolvedPipeline
from raypress.dag.run_lock import RunLock
from raypress.dag.run_log import RunLog

TAIL_LINES = 400
RUN_ENDS = ("run_finished", "run_failed", "run_cancelled")  # the runner's last event
IN_PROCESS_FLAG = "--in-process"
EVENT_LINES_FLAG = "--event-lines"  # the child sends its events as lines for us to draw
COLUMNS_FLAG = "--columns"  # the terminal's width, for the child's tables

# What Ray and Python print when the run dies under the runner, most telling first.
CAUSES: tuple[tuple[str, str], ...] = (
    (r"LocalRayletDiedError|local raylet died|Raylet is terminated", "Ray's raylet (this node's Ray process "
     "manager) died"),
    (r"GcsRpcError|Failed to connect to GCS|GCS.*(died|unavailable)", "Ray's GCS (the cluster's head service) "
     "became unreachable"),
    (r"OutOfMemoryError|MemoryError|out of memory", "the machine ran out of memory"),
    (r"ObjectStoreFullError|object store is full", "Ray's object store is full"),
)
_EXCEPTION_LINE = re.compile(r"^(?:\S+\.)?([A-Z]\w*(?:Error|Exception|Exit))(?::\s*(.*))?$")


class RunOutput(Protocol):
    """Where a supervised run's output goes: its events, and the lines it printed itself."""

    def event(self, event: dict[str, Any]) -> None: ...

    def line(self, text: str, stream: str = "stderr") -> None: ...


def run_supervised(argv: list[str], resolved: ResolvedPipeline, output: RunOutput, verbose: bool = False) -> int:
    """Write the resolved pipeline into its run directory and run ``raypress <argv> --in-process``
    (``argv`` names that file) in a child under the run directory's lock; return the child's exit
    code, after making sure ``ledger.json`` says how the run ended.  Raises RunDirLocked.

    What crosses to the child: the resolved file (the child parses it, once) and flags; the
    environment only carries ``FORCE_COLOR`` when the terminal is ours (the child writes to pipes, so
    it cannot tell that its output ends on a terminal; rich reads that variable).  What comes back:
    its events (to ``output.event``), its own lines (``output.line``) and Ray's lines (to
    ``logs/ray.log``; to ``output.line`` as well when ``verbose``)."""
    run_dir = resolved.run_dir
    lock = RunLock(run_dir, command="raypress " + " ".join(argv[:2])).acquire()
    try:
        resolved.write()
        env = dict(os.environ)
        if sys.stdout.isatty() or sys.stderr.isatty():  # the child writes to pipes, read by a terminal
            env.setdefault("FORCE_COLOR", "1")
            argv = [*argv, COLUMNS_FLAG, str(shutil.get_terminal_size().columns)]
        # both streams pass through us: Ray prints its own processes' deaths (a raylet's included)
        # to the driver's stdout, Python's errors go to stderr
        child = subprocess.Popen([sys.executable, "-m", "raypress.cli", *argv, IN_PROCESS_FLAG, EVENT_LINES_FLAG],
                                 env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 preexec_fn=_hang_up_with_parent(os.getpid()))
        tail: deque[str] = deque(maxlen=TAIL_LINES)
        log = RunLog(run_dir, resolved.vp.order)
        relay = Relay(output, tail, log, RayLog(run_dir), verbose)
        readers = [threading.Thread(target=relay.stream, args=(stream, name), daemon=True)
                   for stream, name in ((child.stdout, "stdout"), (child.stderr, "stderr"))]
        for reader in readers:
            reader.start()
        watch = RayProcessWatch(child.pid)
        watch.start()
        rc = _wait(child, relay.ended)
        watch.stop()
        watch.end_leftovers()  # a child killed with -9 left Ray's agents running for 20 s and more
        for reader in readers:  # Ray's processes may hold the pipes a little longer
            reader.join(timeout=5)
        # a raylet/GCS gone in the same poll as the run is evidence only when the run failed with
        # Ray's own exit code 1 and nothing better was printed (it is listed last: weakest first found)
        late = watch.late_deaths if rc == 1 else []
        code = _settle(run_dir, rc, [*tail, *watch.deaths, *late], list(resolved.vp.order),
                       lambda line: (output.line(line, "stderr"), log.write(line, "supervisor")))
        log.close()
        relay.ray_log.close()
        return code
    finally:
        lock.release()


class Relay:
    """Sorts what the child prints, line by line, per stream: an event (to ``output.event``, and its
    plain text to ``logs/run.jsonl``), one of Ray's lines (to ``logs/ray.log``; shown only when
    ``verbose``), or one of the run's own lines (shown).  Every printed line goes to ``run.jsonl``
    as before, and to the tail the supervisor reads a death's cause from."""

    def __init__(self, output: RunOutput, tail: deque[str], log: RunLog, ray_log: RayLog, verbose: bool) -> None:
        self.output, self.tail, self.log, self.ray_log, self.verbose = output, tail, log, ray_log, verbose
        self.plain = PlainLines()  # the events' text in run.jsonl: what a log reader would have seen
        self._plain_lock = threading.Lock()
        self.ended = threading.Event()  # the child's run said how it ended (its last event)

    def stream(self, stream, name: str) -> None:
        is_ray = RayLines()
        for text in _lines(stream):
            event = decode(text)
            if event is not None:
                if event.get("event") in RUN_ENDS:
                    self.ended.set()
                with self._plain_lock:
                    shown = self.plain.lines(event)
                for line in shown:
                    self.log.write(line.plain, name)
                self._show(self.output.event, event)
                continue
            self.tail.extend(part for part in text.split("\r") if part.strip())
            self.log.write(text, name)
            if is_ray(text):
                self.ray_log.write(text)
                if not self.verbose:
                    continue
            self._show(self.output.line, text, name)

    @staticmethod
    def _show(show: Callable[..., None], *args: Any) -> None:
        """Show, unless our own terminal is gone (``raypress run ... | head``): the child's pipes
        must still be drained, or it blocks on a full one."""
        with contextlib.suppress(BrokenPipeError, ValueError):  # our terminal is gone: drop the line
            show(*args)


def _lines(stream) -> Iterator[str]:
    """A binary pipe's lines as they come (decoded; the last one even without its newline)."""
    pending = b""
    for chunk in iter(lambda: stream.read1(65536), b""):
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            yield line.decode("utf-8", "replace")
    if pending.strip():
        yield pending.decode("utf-8", "replace")


class RayProcessWatch(threading.Thread):
    """Notes when the embedded Ray's raylet or GCS (descendants of the run process) ends while the
    run still runs.  Why: Ray does not always print its raylet's death before it ends the driver
    (it depends on timing), so the printed tail alone cannot be relied on for the cause.  Reads
    /proc once every ``interval`` s; elsewhere (no /proc) it watches nothing."""

    WATCHED = WATCHED
    # A SIGKILLed raylet closes its sockets (and the driver exits) before the kernel has finished
    # tearing it down and its /proc state says so: wait this long for the watched to be seen dead.
    SETTLE_S = SETTLE_S

    def __init__(self, root_pid: int, interval: float = 0.1) -> None:
        super().__init__(daemon=True)
        self.root_pid, self.interval = root_pid, interval
        self.seen: dict[int, str] = {}
        self.started: dict[int, str] = {}  # every process seen below the run: pid -> its start time
        self.session_dirs: set[str] = set()  # the run's own Ray sessions' folders (its raylet's)
        self.deaths: list[str] = []
        self.late_deaths: list[str] = []  # gone in the same poll as the run itself: order unknown
        self._stop_event = threading.Event()

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=2)

    def run(self) -> None:
        while not self._stop_event.wait(self.interval):
            try:
                self._look()
            except OSError:
                return

    def _settled(self) -> set[int]:
        """The watched processes dead now or within ``SETTLE_S``."""
        deadline = time.monotonic() + self.SETTLE_S
        gone = {pid for pid in self.seen if not _alive(pid)}
        while len(gone) < len(self.seen) and time.monotonic() < deadline:
            time.sleep(0.05)
            gone |= {pid for pid in self.seen if not _alive(pid)}
        return gone

    def _look(self) -> None:
        alive = descendants(self.root_pid)
        if self.root_pid not in alive:  # the run itself ended: what happens to Ray after that is not a cause,
            if not self.late_deaths:     # but one gone between the last poll and this one may be
                gone = self._settled()
                self.late_deaths = [f"{self.WATCHED[name]}: Ray's {name} process (pid {pid}) ended within "
                                    f"{self.interval + self.SETTLE_S:g} s of the run (it may have ended it)"
                                    for pid, name in self.seen.items() if pid in gone]
            self._stop_event.set()
            return
        for pid, name in alive.items():
            if pid != self.root_pid and pid not in self.started:
                self.started[pid] = _start_time(pid)
            if name in self.WATCHED and pid not in self.seen:
                self.seen[pid] = name
                self.session_dirs.update(_SESSION_DIR.findall(_cmdline(pid)))
        for pid, name in list(self.seen.items()):
            if alive.get(pid) != name:
                self.deaths.append(death_line(name, pid))
                del self.seen[pid]

    def end_leftovers(self, grace_s: float = 2.0) -> list[int]:
        """SIGTERM, then after ``grace_s`` SIGKILL, every process seen below the run that still runs
        (the same process: same pid and start time) now that the run has ended; the pids signalled.
        Orphans of a killed run are re-parented away from it, so they are found by what was seen and,
        for one started since the last look (a new Ray worker), by its command line naming the run's
        Ray session folder."""
        left = [pid for pid, start in self.started.items() if _alive(pid) and _start_time(pid) == start]
        me = os.getpid()
        for session in self.session_dirs:
            left += [pid for pid in session_processes(session) if pid not in left and pid != me]
        signalled = list(left)
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for pid in left:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, sig)
            deadline = time.monotonic() + grace_s  # after SIGKILL too: until the kernel has ended them
            while time.monotonic() < deadline and any(_alive(p) for p in left):
                time.sleep(0.05)
            left = [pid for pid in left if _alive(pid)]
            if not left:
                break
        return signalled


def _hang_up_with_parent(parent: int) -> Callable[[], None] | None:
    """For Popen's ``preexec_fn``: the child gets SIGHUP when ``parent`` dies (Linux's
    ``PR_SET_PDEATHSIG``), so a run whose supervisor was killed ends (``status: cancelled``) within a
    second instead of at its next print, of a broken pipe.  None where there is no prctl."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    pr_set_pdeathsig = 1

    def hang_up() -> None:
        libc.prctl(pr_set_pdeathsig, signal.SIGHUP)
        if os.getppid() != parent:  # it died before the call: the signal will never come
            os.kill(os.getpid(), signal.SIGHUP)

    return hang_up


# what a Ray session's folder looks like in its processes' command lines
_SESSION_DIR = re.compile(r"/session_\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d_\d+_\d+")


def _pids() -> list[int]:
    return [int(e.name) for e in os.scandir("/proc") if e.name.isdigit()]


def session_processes(session_dir: str) -> list[int]:
    """Live processes of a Ray session, those re-parented away from the run included: their command
    line names the session's folder, or Ray titled them (``ray::...``) and they hold a file in it.

    Why both: Ray's agents and workers rewrite their command line to a title (``ray::DashboardAgent``),
    which names no folder; they keep their logs open there.  A DashboardAgent re-parented away from a
    killed run outlived it by 30 s and more on a loaded machine, found by neither the process tree
    nor its command line.  Only titled processes count by their files: a user's ``tail -f`` of a
    session log is not the run's to end."""
    folder = re.compile(re.escape(session_dir.rstrip("/")) + r"(?![\w.-])")
    return _processes_of(lambda text: folder.search(text) is not None)


def processes_of_sessions_started_by(driver_pid: int) -> list[int]:
    """Live processes of every Ray session ``driver_pid`` started, found as :func:`session_processes`
    finds them: Ray names a session's folder ``session_<date>_<time>_<usec>_<driver pid>``.  Why not
    only the driver's current session: a start-up that Ray gave up on (the embedded start is tried
    again on a loaded machine) leaves a session the driver no longer knows, whose agents outlived
    the run."""
    folder = re.compile(rf"/session_\d{{4}}-\d\d-\d\d_\d\d-\d\d-\d\d_\d+_{driver_pid}(?!\d)")
    return _processes_of(lambda path: folder.search(path) is not None)


def _processes_of(in_session: Callable[[str], bool]) -> list[int]:
    """Live processes whose command line, or (titled ``ray::...`` ones only) one of whose open files'
    paths, ``in_session`` accepts."""
    found = []
    for pid in _pids():
        cmdline = _cmdline(pid)
        if (in_session(cmdline) or (cmdline.startswith("ray::") and _holds_file(pid, in_session))) and _alive(pid):
            found.append(pid)
    return found


def _holds_file(pid: int, in_session: Callable[[str], bool]) -> bool:
    """Whether ``pid`` has a file open whose path ``in_session`` accepts (False where its fds cannot
    be read)."""
    try:
        fds = os.scandir(f"/proc/{pid}/fd")
    except OSError:
        return False
    with fds:
        for fd in fds:
            try:
                if in_session(os.readlink(fd.path)):
                    return True
            except OSError:
                continue
    return False


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return ""


def _start_time(pid: int) -> str:
    """A process's start time in clock ticks since boot (/proc/PID/stat field 22); '' if gone."""
    fields = stat_fields(pid) or []
    return fields[19] if len(fields) > 19 else ""


DEAD_STATES = ("Z", "X", "")  # zombie, dead, or a stat line that could not be read


def _state(stat: str) -> str:
    """A /proc/PID/stat line's state letter (after the command name, which may hold spaces)."""
    fields = stat[stat.rfind(")") + 2:].split()
    return fields[0] if fields else ""


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs: a killed process stays a zombie in /proc until its parent reaps it,
    and a raylet killed under a run that died from it is often still one when the run has ended."""
    try:
        return _state(Path(f"/proc/{pid}/stat").read_text()) not in DEAD_STATES
    except OSError:
        return False


def descendants(root: int) -> dict[int, str]:
    """{pid: command name} of ``root`` and every live (not zombie) process below it, from /proc."""
    parent: dict[int, int] = {}
    names: dict[int, str] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        if _state(stat) not in DEAD_STATES:
            name_end = stat.rfind(")")
            fields = stat[name_end + 2:].split()
            if len(fields) < 2 or not fields[1].isdigit():  # a line cut short as its process ended
                continue
            pid = int(entry.name)
            names[pid] = stat[stat.find("(") + 1:name_end]
            parent[pid] = int(fields[1])
    found = {root} if root in names else set()
    frontier = list(found)
    children: dict[int, list[int]] = {}
    for pid, ppid in parent.items():
        children.setdefault(ppid, []).append(pid)
    while frontier:
        for kid in children.get(frontier.pop(), []):
            if kid not in found:
                found.add(kid)
                frontier.append(kid)
    return {pid: names[pid] for pid in found}


RESEND_S = 3.0  # a cancel signal the run has not acknowledged by then is sent again


def _wait(child: subprocess.Popen, ended: threading.Event, resend_s: float = RESEND_S) -> int:
    """Wait for the child, passing SIGINT and SIGTERM on (a terminal's Ctrl-C reaches it too: its
    second copy is only noted).  Until the child says how its run ended (``ended``: its last event),
    the first signal is sent again every ``resend_s``: one that reached it while Python was still
    starting, or inside Ray's start-up code, was seen lost once in a dozen tries."""
    received: list[int] = []

    def forward(signum: int, _frame) -> None:
        received.append(signum)
        with contextlib.suppress(ProcessLookupError):
            child.send_signal(signum)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        while True:
            try:
                return child.wait(timeout=resend_s)
            except subprocess.TimeoutExpired:
                if received and not ended.is_set():
                    with contextlib.suppress(ProcessLookupError):
                        child.send_signal(received[0])
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _settle(run_dir: Path, rc: int, tail: list[str], node_order: list[str], echo: Callable[[str], None]) -> int:
    ledger_path = run_dir / "ledger.json"
    try:
        ledger = json.loads(ledger_path.read_text())
    except (OSError, ValueError):
        ledger = None
    if ledger is not None and ledger.get("status") in ("succeeded", "failed", "cancelled"):
        return rc  # the run said how it ended
    signum = -rc if rc < 0 else rc - 128  # killed by a signal, or ended as if (the run's early handler)
    if signum in CANCEL_SIGNALS:  # a signal ended it before the runner's own handlers were in place
        return _settle_cancelled(run_dir, signal.Signals(signum), ledger, node_order, echo)
    reason = died_reason(rc, tail)
    ledger = ledger if isinstance(ledger, dict) else {"nodes": {}, "problems": []}
    ledger.update(status="failed", adds_up=False, error=reason,
                  unfinished=[n for n in node_order if n not in ledger.get("nodes", {})])
    _write_ledger(run_dir, ledger)
    with open(run_dir / "events.jsonl", "a") as fh:
        fh.write(json.dumps({"ts": round(time.time(), 3), "event": "run_failed", "error": reason,
                             "by": "supervisor", "exit_code": rc}) + "\n")
    echo(f"run failed: {reason}")
    echo(f"ledger: {ledger_path} (status: failed; unfinished: {', '.join(ledger['unfinished']) or 'none'})")
    return rc if rc > 0 else 1


def _settle_cancelled(run_dir: Path, sig: signal.Signals, ledger: dict | None, node_order: list[str],
                      echo: Callable[[str], None]) -> int:
    """The ledger and the one line of a run a cancel signal ended before it could say so itself
    (while Python started, before the runner set its handlers)."""
    ledger = ledger if isinstance(ledger, dict) else {"nodes": {}, "problems": []}
    error = f"cancelled by {sig.name}"
    ledger.update(status="cancelled", adds_up=False, error=error,
                  unfinished=[n for n in node_order if n not in ledger.get("nodes", {})])
    _write_ledger(run_dir, ledger)
    with open(run_dir / "events.jsonl", "a") as fh:
        fh.write(json.dumps({"ts": round(time.time(), 3), "event": "run_cancelled", "error": error,
                             "by": "supervisor"}) + "\n")
    echo(f"run {error} (ledger: {run_dir / 'ledger.json'})")
    return 128 + sig


def _write_ledger(run_dir: Path, ledger: dict) -> None:
    path = run_dir / "ledger.json"
    tmp = path.with_name("ledger.json.tmp")
    run_dir.mkdir(parents=True, exist_ok=True)
    tmp.write_text(json.dumps(ledger, indent=2, default=str))
    tmp.replace(path)


def died_reason(rc: int, tail: Iterable[str]) -> str:
    """One line: how the run process ended and the likeliest cause in what it printed last."""
    lines = list(tail)
    how = (f"killed by {signal.Signals(-rc).name}" if rc < 0 and -rc in signal.Signals._value2member_map_
           else f"exit code {rc}")
    text = "\n".join(lines)
    for pattern, cause in CAUSES:
        match = re.search(pattern, text)
        if match:
            line = next((ln.strip() for ln in reversed(lines) if re.search(pattern, ln)), "")
            return f"the run process ended before finishing ({how}): {cause} — {_short(line)}"
    for line in reversed(lines):
        m = _EXCEPTION_LINE.match(line.strip())
        if m:
            return f"the run process ended before finishing ({how}): {_short(line.strip())}"
    return f"the run process ended before finishing ({how}) without reporting an error"


def _short(line: str, limit: int = 300) -> str:
    line = re.sub(r"\x1b\[[0-9;]*m", "", line)
    return line if len(line) <= limit else line[: limit - 1] + "…"
