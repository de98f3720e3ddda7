"""The pieces behind "nothing lost at the edges", without Ray: a writer's destination (manifest,
foreign files, journaled commit), the run-directory lock, input fingerprints, the supervisor's
reading of how a run died."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from raypress.dag.destination import Destination, DestinationConflict
from raypress.dag.fingerprint import input_change, input_files, output_change
from raypress.dag.run_lock import held_by_parent, RunLock
from raypress.dag import ray_deaths
from raypress.dag.supervisor import _settle, died_reason, session_processes

OWNER = {"pipeline": "p", "node": "out", "op": "write_jsonl"}


def stage(dest: Destination, files: dict[str, str]) -> None:
    staging = dest.reset_staging()
    for name, text in files.items():
        (staging / name).parent.mkdir(parents=True, exist_ok=True)
        (staging / name).write_text(text)


def test_commit_moves_staged_parts_and_lists_them(tmp_path):
    dest = Destination(tmp_path / "out", False, OWNER)
    stage(dest, {"part-a.jsonl": "1\n", "sub/part-b.jsonl": "2\n"})
    committed = dest.commit()
    assert sorted(Path(p).relative_to(dest.target).as_posix() for p in committed) == ["part-a.jsonl", "sub/part-b.jsonl"]
    assert not dest.staging.exists()
    assert json.loads(dest.manifest_path.read_text())["pending"] == []
    stage(dest, {"part-c.jsonl": "3\n"})  # a re-run replaces its own files only
    dest.commit()
    assert sorted(p.name for p in dest.target.rglob("*")) == ["part-c.jsonl"]


def test_foreign_files_are_an_error_and_stay(tmp_path):
    target = tmp_path / "out"
    target.mkdir()
    (target / "part-0.parquet").write_text("user data")
    dest = Destination(target, False, OWNER)
    with pytest.raises(DestinationConflict, match="1 file.*raypress did not write: part-0.parquet.*overwrite: true"):
        dest.check()
    stage(dest, {"part-x.jsonl": "1\n"})
    with pytest.raises(DestinationConflict):
        dest.commit()
    assert (target / "part-0.parquet").read_text() == "user data"


def test_another_nodes_files_are_foreign_too(tmp_path):
    first = Destination(tmp_path / "out.jsonl", True, OWNER)
    stage(first, {"out.jsonl": "1\n"})
    first.commit()
    other = Destination(tmp_path / "out.jsonl", True, {**OWNER, "node": "other"})
    with pytest.raises(DestinationConflict, match="written by pipeline 'p', node 'out'"):
        other.check()
    replacing = Destination(tmp_path / "out.jsonl", True, {**OWNER, "node": "other"}, overwrite=True)
    stage(replacing, {"out.jsonl": "2\n"})
    replacing.commit()
    assert (tmp_path / "out.jsonl").read_text() == "2\n"


def test_a_commit_interrupted_after_its_journal_entry_still_owns_its_files(tmp_path):
    dest = Destination(tmp_path / "out", False, OWNER)
    stage(dest, {"part-a.jsonl": "1\n"})
    dest.commit()
    # a crash between "pending" and the final manifest: a new part is in place, listed only as pending
    (dest.target / "part-b.jsonl").write_text("2\n")
    dest._write_manifest(["part-a.jsonl"], pending=["part-b.jsonl"])
    dest.check()  # both are ours: no conflict
    stage(dest, {"part-c.jsonl": "3\n"})
    dest.commit()
    assert sorted(p.name for p in dest.target.iterdir()) == ["part-c.jsonl"]


def test_a_file_where_a_folder_goes_is_an_error(tmp_path):
    (tmp_path / "out").write_text("x")
    with pytest.raises(DestinationConflict, match="is a file"):
        Destination(tmp_path / "out", False, OWNER).check()


def test_lock_refuses_a_second_holder_and_names_the_first(tmp_path):
    first = RunLock(tmp_path).acquire()
    try:
        # another process (flock is per open file: the same process would share it)
        code = ("import sys\nfrom raypress.dag.run_lock import RunLock, RunDirLocked\n"
                f"try:\n    RunLock({str(tmp_path)!r}).acquire()\nexcept RunDirLocked as e:\n    print(e)\n    sys.exit(2)\n")
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2 and f"PID {os.getpid()}" in proc.stdout
    finally:
        first.release()
    RunLock(tmp_path).acquire().release()  # free again


def test_a_dead_holders_lock_is_stale(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", f"from raypress.dag.run_lock import RunLock\n"
                             f"l = RunLock({str(tmp_path)!r}).acquire()\nimport os\nos._exit(0)"])
    proc.wait()
    holder = json.loads((tmp_path / ".lock").read_text())
    assert holder["pid"] == proc.pid  # the dead run's file is still there...
    lock = RunLock(tmp_path).acquire()  # ...and the next run takes over
    assert json.loads((tmp_path / ".lock").read_text())["pid"] == os.getpid()
    lock.release()


def test_a_child_of_the_holder_is_told_so_and_a_stranger_is_not(tmp_path):
    """The CLI's child runs under its supervisor's lock: ``held_by_parent`` says so from the lock
    file alone (no environment variable), and no other process is let in."""
    lock = RunLock(tmp_path).acquire()
    try:
        code = (f"from raypress.dag.run_lock import RunLock, held_by_parent\nprint(held_by_parent({str(tmp_path)!r}))\n"
                f"RunLock({str(tmp_path)!r}).acquire()")
        child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        assert child.stdout.strip() == "True"  # its parent (this process) holds the lock...
        assert child.returncode != 0 and "RunDirLocked" in child.stderr  # ...so it must not take it again
        grandchild = subprocess.run([sys.executable, "-c", f"import subprocess, sys\n"
                                     f"print(subprocess.run([sys.executable, '-c', {code!r}], capture_output=True, "
                                     f"text=True).stdout)"], capture_output=True, text=True, timeout=60)
        assert grandchild.stdout.strip().startswith("False")  # not its parent: a stranger
    finally:
        lock.release()
    assert not held_by_parent(tmp_path)


def test_input_fingerprints_see_content_size_and_new_files(tmp_path):
    (tmp_path / "a.jsonl").write_text("x" * 100)
    params = {"paths": [f"{tmp_path}/*.jsonl"], "lang": "en", "min_num": 5}
    before = input_files(params)
    assert list(before) == [str(tmp_path / "a.jsonl")]
    (tmp_path / "a.jsonl").write_text("x" * 400)
    assert "size 100 → 400 bytes" in input_change(before, input_files(params))
    mid = input_files(params)
    stat = os.stat(tmp_path / "a.jsonl")
    (tmp_path / "a.jsonl").write_text("y" * 400)
    os.utime(tmp_path / "a.jsonl", ns=(stat.st_atime_ns, stat.st_mtime_ns))  # same size, same mtime
    assert "content differs" in input_change(mid, input_files(params))
    now = input_files(params)
    (tmp_path / "b.jsonl").write_text("z")
    assert "new input file" in input_change(now, input_files(params))
    assert input_files(params, exclude=[tmp_path]) == {}  # a run's own outputs are not inputs


def test_only_path_parameters_are_fingerprinted(tmp_path, monkeypatch):
    """A `route_prefix: /` once walked the whole file system and blocked reading /dev/console."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "en").write_text("a file named like a language code")
    (tmp_path / "words.txt").write_text("w")
    os.mkfifo(tmp_path / "pipe")
    sigs = input_files({"route_prefix": "/", "lang": "en", "host": "127.0.0.1",
                        "stopwords_dir": str(tmp_path), "options": {"data_files": {"train": ["words.txt"]}}})
    assert sorted(Path(p).name for p in sigs) == ["en", "words.txt"]  # the folder's regular files, no FIFO
    assert input_files({"root": "/"}) == {}


def test_output_change_names_the_missing_file(tmp_path):
    f = tmp_path / "part-1.parquet"
    f.write_bytes(b"1234")
    assert output_change({str(f): 4}) is None
    f.unlink()
    assert "is missing" in output_change({str(f): 4})


def test_died_reason_finds_the_raylet_in_what_the_run_printed():
    tail = ["▶ out (write_jsonl)", "\x1b[33m(raylet)\x1b[0m Raylet is terminated. Termination is unexpected.",
            "ray.exceptions.LocalRayletDiedError: The task's local raylet died."]
    reason = died_reason(1, tail)
    assert "raylet" in reason and "exit code 1" in reason and "\x1b" not in reason
    assert "killed by SIGKILL" in died_reason(-9, ["ValueError: boom"])
    assert "ValueError: boom" in died_reason(1, ["x", "ValueError: boom", "more"])
    assert "without reporting an error" in died_reason(1, [])


def test_a_failed_ledger_keeps_its_error_when_ray_ends_after_it(tmp_path):
    """A run that failed on its own (an error budget) then shut its Ray down while its process still
    ran; the supervisor named that shutdown as the cause: `Raylet is terminated ... (the run saw: ...)`."""
    ledger = {"status": "failed", "error": "node 'src' (read_jsonl): 200 of 2000 rows raised errors", "nodes": {}}
    (tmp_path / "ledger.json").write_text(json.dumps(ledger))
    tail = [ray_deaths.death_line("raylet", 4242)]
    assert _settle(tmp_path, 1, tail, ["src"], echo=lambda line: None) == 1
    assert json.loads((tmp_path / "ledger.json").read_text()) == ledger


def test_the_run_names_its_own_dead_raylet_and_waits_for_it_only_after_a_ray_loss(monkeypatch):
    from ray.exceptions import ActorDiedError

    monkeypatch.setattr(ray_deaths, "SETTLE_S", 0.3)
    deaths: list[tuple[str, int]] = []
    monkeypatch.setattr(ray_deaths, "dead_ray_processes", lambda: list(deaths))
    assert ray_deaths.ray_process_deaths(ValueError("an op's own error")) == []
    start = time.monotonic()
    assert ray_deaths.ray_process_deaths(RuntimeError("wrapped")) == []
    assert time.monotonic() - start < 0.1  # nothing of Ray's in the chain: no wait
    wrapped = RuntimeError("a Ray Data task failed")
    wrapped.__cause__ = ActorDiedError()
    start = time.monotonic()
    assert ray_deaths.ray_process_deaths(wrapped) == [] and time.monotonic() - start >= 0.3
    deaths.append(("raylet", 4242))
    deaths.append(("dashboard_agent", 4243))
    assert ray_deaths.ray_process_deaths(wrapped) == [
        "Raylet is terminated: Ray's raylet process (pid 4242) ended while the run was still running"]


def test_the_watch_notes_a_raylet_that_ends_under_a_running_run(tmp_path):
    """Ray does not always print its raylet's death before it ends the driver; the supervisor's own
    watch of the run's process tree must see it.  A copy of `sleep` named `raylet` stands in."""
    import shutil
    import signal
    import time

    from raypress.dag.supervisor import RayProcessWatch, descendants

    fake = tmp_path / "raylet"
    shutil.copy(shutil.which("sleep"), fake)
    run = subprocess.Popen(["sh", "-c", f"{fake} 30 & wait; sleep 30"])
    try:
        watch = RayProcessWatch(run.pid, interval=0.05)
        watch.start()
        deadline = time.time() + 10
        while not watch.seen and time.time() < deadline:
            time.sleep(0.05)
        (raylet_pid,) = watch.seen
        assert descendants(run.pid)[raylet_pid] == "raylet"
        os.kill(raylet_pid, signal.SIGKILL)
        while not watch.deaths and time.time() < deadline:
            time.sleep(0.05)
        watch.stop()
        assert died_reason(1, watch.deaths).startswith("the run process ended before finishing (exit code 1): "
                                                       "Ray's raylet")
    finally:
        run.kill()
        run.wait()


def test_a_raylet_killed_just_before_the_run_ended_is_named_though_still_a_zombie(tmp_path):
    """The raylet dies, the run dies of it within one poll, and the killed raylet is still a zombie
    in /proc (nobody reaped it yet): the watch must count it as gone, not alive."""
    import shutil
    import signal
    import time

    from raypress.dag.supervisor import RayProcessWatch, descendants

    fake = tmp_path / "raylet"
    shutil.copy(shutil.which("sleep"), fake)
    # run -> keeper (starts the raylet, never reaps it, outlives the run) -> raylet
    keeper = f"import subprocess, time; subprocess.Popen([{str(fake)!r}, '60']); time.sleep(60)"
    run = subprocess.Popen(["sh", "-c", f"{sys.executable} -c \"{keeper}\" & wait"])
    keeper_pid = None
    try:
        watch = RayProcessWatch(run.pid)
        deadline = time.time() + 10
        while not watch.seen and time.time() < deadline:
            watch._look()
            time.sleep(0.05)
        (raylet_pid,) = watch.seen
        keeper_pid = next(pid for pid, name in descendants(run.pid).items() if pid not in (run.pid, raylet_pid))
        os.kill(raylet_pid, signal.SIGKILL)
        while Path(f"/proc/{raylet_pid}/stat").read_text().split(")")[1].split()[0] != "Z":
            time.sleep(0.01)  # a zombie now: its parent, the keeper, does not reap it
        run.kill()
        run.wait()
        watch._look()  # the run is gone; the raylet is still in /proc
        assert not watch.deaths and len(watch.late_deaths) == 1 and "raylet" in watch.late_deaths[0]
    finally:
        run.kill()
        run.wait()
        if keeper_pid is not None:
            os.kill(keeper_pid, signal.SIGKILL)


def test_a_full_disk_is_said_plainly_without_colour_codes():
    """Issue 32 case 4. Before: ``RayTaskError(UserCodeException): [36mray::MapBatches(...)`` with ANSI
    codes, in the message and the ledger, "No space left on device" only in later lines."""
    import errno as errno_

    from raypress.dag.error_budget import describe_error

    class TaskError(Exception):  # Ray's RayTaskError keeps the worker's exception as ``cause``
        def __init__(self, message: str, cause: BaseException) -> None:
            super().__init__(message)
            self.cause = cause

    disk = OSError(errno_.ENOSPC, "No space left on device", "/mnt/small/out/part-0.jsonl")
    wrapped = TaskError("\x1b[36mray::MapBatches(StreamingOpRunner)\x1b[39m (pid=1)\n  more", disk)
    assert describe_error(wrapped) == "no space left on device at /mnt/small/out/part-0.jsonl"
    chained = RuntimeError("\x1b[36mray::Write()\x1b[39m failed")
    chained.__cause__ = OSError(errno_.ENOSPC, "No space left on device")
    text_only = RuntimeError("\x1b[31mboom\x1b[0m\nOSError: [Errno 28] No space left on device: '/data/x.parquet'")
    assert describe_error(text_only) == "no space left on device at /data/x.parquet"
    assert describe_error(chained).startswith("no space left on device")
    assert describe_error(RuntimeError("\x1b[36mray::Map()\x1b[39m: bad row")) == "RuntimeError: ray::Map(): bad row"


def test_a_session_process_is_found_by_its_open_logs_once_ray_titled_it(tmp_path):
    """A Ray agent rewrites its command line to ``ray::DashboardAgent`` (no session folder left in
    it): a run whose raylet went first found it neither below itself nor by command line, and it
    outlived the run.  It holds its logs open in the session folder; a process Ray did not title
    (a user's ``tail -f`` of those logs) is not the run's."""
    session = tmp_path / "session_1"
    (session / "logs").mkdir(parents=True)
    def start(title: str, out: Path) -> subprocess.Popen:  # the file's path in the environment, not argv
        return subprocess.Popen(["bash", "-c", f'exec {title} sleep 30 > "$OUT"'], env={**os.environ, "OUT": str(out)})

    titled = start("-a ray::DashboardAgent", session / "logs" / "agent.out")
    plain = start("", session / "logs" / "tail.out")
    elsewhere = start("-a ray::IDLE", tmp_path / "other.out")
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and titled.pid not in session_processes(str(session)):
            time.sleep(0.05)  # until bash has exec'd
        found = session_processes(str(session))
        assert titled.pid in found
        assert plain.pid not in found and elsewhere.pid not in found
    finally:
        for proc in (titled, plain, elsewhere):
            proc.kill()
            proc.wait()


def test_every_session_a_driver_started_is_found_by_the_pid_in_its_folder_name(tmp_path):
    """A DashboardAgent outlived a killed run in CI: besides its current session, a driver may have
    started one that Ray gave up on (the embedded start is tried again when a loaded machine misses
    Ray's deadlines).  Ray ends every session folder's name with the pid of the driver that made it;
    another driver's session, and a folder that only starts with the same digits, are not its."""
    from raypress.dag.supervisor import processes_of_sessions_started_by

    driver = 4242
    mine = tmp_path / f"session_2026-12-07_18-28-15_639477_{driver}"
    theirs = tmp_path / f"session_2026-12-07_18-28-15_639477_{driver}7"
    for folder in (mine, theirs):
        (folder / "logs").mkdir(parents=True)
    def start(title: str, out: Path) -> subprocess.Popen:
        return subprocess.Popen(["bash", "-c", f'exec {title} sleep 30 > "$OUT"'], env={**os.environ, "OUT": str(out)})

    agent = start("-a ray::DashboardAgent", mine / "logs" / "dashboard_agent.out")
    other = start("-a ray::DashboardAgent", theirs / "logs" / "dashboard_agent.out")
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and (agent.pid not in processes_of_sessions_started_by(driver)
                                               or other.pid not in processes_of_sessions_started_by(int(f"{driver}7"))):
            time.sleep(0.05)
        found = processes_of_sessions_started_by(driver)
        assert agent.pid in found and other.pid not in found
        assert other.pid in processes_of_sessions_started_by(int(f"{driver}7"))
    finally:
        for proc in (agent, other):
            proc.kill()
            proc.wait()
