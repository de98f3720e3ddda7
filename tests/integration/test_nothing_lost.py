"""Nothing lost at the edges, on real Ray: writers never delete what they did not write, resume
trusts data on disk rather than saved state, one run at a time per run directory, and a run that
dies says so in its ledger.  Each test reproduces a case that lost data on the old main."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from raypress.dag.runner import RunFailed, run_pipeline
from raypress.dag.validate import PipelineInvalid, load_pipeline

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
RAYPRESS = [sys.executable, "-m", "raypress.cli"]


def corpus(path: Path, n: int) -> Path:
    with open(path, "w") as fh:
        for i in range(n):
            fh.write(json.dumps({"doc": f"d{i:05d}", "text": f"document {i} " + "word " * (i % 7 + 1)}) + "\n")
    return path


def pipeline(tmp_path: Path, data: Path, out: str = "{run_dir}/out", extra: str = "",
             settings: str = "{}") -> Path:
    path = tmp_path / "p.yaml"
    path.write_text(textwrap.dedent(f"""\
        name: edges
        settings: {settings}
        nodes:
          - id: src
            op: read_jsonl
            with: {{paths: ["{data}"], id_key: doc}}
          - id: clean
            op: whitespace_normalization_mapper
            input: src
          - id: out
            op: write_jsonl
            input: clean
            with: {{path: "{out}"{extra}}}
        """))
    return path


def rows_in(folder: Path) -> list[dict]:
    return [json.loads(line) for f in sorted(folder.glob("part-*.jsonl")) for line in f.read_text().splitlines()]


def events(run_dir: Path) -> list[dict]:
    return [json.loads(x) for x in (run_dir / "events.jsonl").read_text().splitlines()]


def test_two_writers_with_one_path_are_refused_at_validation(tmp_path):
    path = tmp_path / "two.yaml"
    path.write_text(textwrap.dedent(f"""\
        name: two
        nodes:
          - id: src
            op: read_jsonl
            with: {{paths: ["{tmp_path}/x.jsonl"]}}
          - id: a
            op: write_jsonl
            input: src
            with: {{path: "{{run_dir}}/out"}}
          - id: b
            op: write_parquet
            input: src
            with: {{path: "{{run_dir}}/out/"}}
          - id: c
            op: write_parquet
            input: src
            with: {{path: "{{run_dir}}/out/inner"}}
        """))
    with pytest.raises(PipelineInvalid) as err:
        load_pipeline(path)
    messages = [str(p) for p in err.value.problems]
    assert any("node 'b'" in m and "same destination of node 'a'" in m and ":13" in m for m in messages), messages
    assert any("node 'c'" in m and "overlapping" in m for m in messages), messages


def test_foreign_files_refuse_the_run_and_survive(ray_session, tmp_path):
    data = corpus(tmp_path / "in.jsonl", 50)
    dest = tmp_path / "mine"
    dest.mkdir()
    (dest / "part-0000.jsonl").write_text('{"id": "users own"}\n')
    (dest / "notes.txt").write_text("keep me")
    with pytest.raises(RunFailed, match=r"raypress did not write: notes.txt, part-0000.jsonl.*overwrite: true"):
        run_pipeline(str(pipeline(tmp_path, data, out=str(dest))), run_dir=str(tmp_path / "run"))
    assert (dest / "part-0000.jsonl").read_text() == '{"id": "users own"}\n' and (dest / "notes.txt").exists()
    ledger = json.loads((tmp_path / "run" / "ledger.json").read_text())
    assert ledger["status"] == "failed" and not ledger["adds_up"] and "overwrite" in ledger["error"]

    ledger = run_pipeline(str(pipeline(tmp_path, data, out=str(dest), extra=", overwrite: true")),
                          run_dir=str(tmp_path / "run2"))
    assert ledger["status"] == "succeeded" and ledger["adds_up"]
    assert sorted(r["id"] for r in rows_in(dest)) == [f"d{i:05d}" for i in range(50)]
    assert not (dest / "notes.txt").exists()  # overwrite: true replaces, as asked


def test_rerun_replaces_only_its_own_files_and_leaves_no_temp(ray_session, tmp_path):
    data = corpus(tmp_path / "in.jsonl", 40)
    dest = tmp_path / "out"
    p = pipeline(tmp_path, data, out=str(dest))
    run_pipeline(str(p), run_dir=str(tmp_path / "run1"))
    first = sorted(f.name for f in dest.iterdir())
    # a crashed attempt's half-written part, where the old writer left it for good
    staging = tmp_path / ".out.raypress-staging"
    staging.mkdir()
    (staging / ".part-dead.jsonl.123.tmp").write_bytes(b"x" * 10_000)
    corpus(data, 60)
    ledger = run_pipeline(str(p), run_dir=str(tmp_path / "run2"))  # same pipeline and node: its own files
    assert ledger["nodes"]["out"]["rows_out"] == 60 == len(rows_in(dest))
    assert not set(first) & {f.name for f in dest.iterdir()}  # the first run's parts were replaced
    assert not staging.exists() and not list(tmp_path.rglob("*.tmp"))


def test_changed_input_reruns_the_affected_nodes(ray_session, tmp_path):
    data = corpus(tmp_path / "in.jsonl", 5_000)
    p, run_dir = pipeline(tmp_path, data), tmp_path / "run"
    assert run_pipeline(str(p), run_dir=str(run_dir))["nodes"]["out"]["rows_out"] == 5_000
    before = len(events(run_dir))
    corpus(data, 20_000)
    ledger = run_pipeline(str(p), run_dir=str(run_dir))
    assert ledger["nodes"]["src"]["rows_in"] == 20_000 == ledger["nodes"]["out"]["rows_out"]
    assert len(rows_in(run_dir / "out")) == 20_000
    new = events(run_dir)[before:]
    rerun = [e for e in new if e["event"] == "node_rerun"]
    assert rerun and "changed (size" in rerun[0]["reason"] and str(data) in rerun[0]["reason"]
    assert not [e for e in new if e["event"] == "node_skipped"]


def test_deleted_output_is_written_again(ray_session, tmp_path):
    data = corpus(tmp_path / "in.jsonl", 300)
    p, run_dir = pipeline(tmp_path, data), tmp_path / "run"
    run_pipeline(str(p), run_dir=str(run_dir))
    before = len(events(run_dir))
    ledger = run_pipeline(str(p), run_dir=str(run_dir))  # nothing changed: skipped
    assert {e["node"] for e in events(run_dir)[before:] if e["event"] == "node_skipped"} == {"src", "clean", "out"}
    for f in (run_dir / "out").iterdir():
        f.unlink()
    before = len(events(run_dir))
    ledger = run_pipeline(str(p), run_dir=str(run_dir))
    assert ledger["adds_up"] and len(rows_in(run_dir / "out")) == 300
    rerun = [e for e in events(run_dir)[before:] if e["event"] == "node_rerun"]
    assert rerun and "is missing" in rerun[0]["reason"]


def test_second_run_into_a_locked_run_dir_exits_2_naming_the_holder(tmp_path):
    data = corpus(tmp_path / "in.jsonl", 10)
    run_dir = tmp_path / "run"
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""\
        import sys, time
        from raypress.dag.run_lock import RunLock
        lock = RunLock({str(run_dir)!r}).acquire()
        print("locked", flush=True)
        time.sleep(60)
        """)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        proc = subprocess.run([*RAYPRESS, "run", str(pipeline(tmp_path, data)), "--run-dir", str(run_dir)],
                              capture_output=True, text=True, timeout=120, cwd=REPO)
        assert proc.returncode == 2, proc.stderr
        assert f"PID {holder.pid}" in proc.stderr and "Traceback" not in proc.stderr
        assert not (run_dir / "events.jsonl").exists()  # nothing was written into the locked directory
    finally:
        holder.kill()
        holder.wait()


def _raylet_of(root: psutil.Process, timeout: float = 60) -> psutil.Process:
    deadline = time.time() + timeout
    while time.time() < deadline:
        for p in root.children(recursive=True):
            try:
                if p.name() == "raylet" or "raylet/raylet" in " ".join(p.cmdline()[:1]):
                    return p
            except psutil.NoSuchProcess:
                continue
        time.sleep(0.2)
    raise AssertionError("the run's raylet never started")


def _wait_for_event(run_dir: Path, kind: str, timeout: float = 90) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        path = run_dir / "events.jsonl"
        if path.exists() and f'"{kind}"' in path.read_text():
            return
        time.sleep(0.1)
    raise AssertionError(f"no {kind} event in {timeout} s")


def test_a_killed_raylet_leaves_a_failed_ledger_with_the_reason(tmp_path):
    """Its own embedded Ray in a subprocess (never the suite's shared session's raylet)."""
    data = corpus(tmp_path / "in.jsonl", 20_000)
    run_dir = tmp_path / "run"
    env = {**os.environ, "RAYPRESS_PROGRESS": "0", "RAY_ADDRESS": ""}
    # 20-row blocks: ~1,000 tasks, so the run is still going when its raylet is killed (uncut, the
    # cheap mapper finished 20,000 rows before the kill landed)
    slow = pipeline(tmp_path, data, settings="{rows_per_block: 20}")
    proc = subprocess.Popen([*RAYPRESS, "run", str(slow), "--run-dir", str(run_dir)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO, env=env)
    try:
        raylet = _raylet_of(psutil.Process(proc.pid))
        _wait_for_event(run_dir, "node_started")
        raylet.send_signal(signal.SIGKILL)
        out, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, err[-3000:]
    ledger = json.loads((run_dir / "ledger.json").read_text())
    assert ledger["status"] == "failed" and ledger["adds_up"] is False
    assert "raylet" in ledger["error"].lower(), ledger["error"]
    assert "out" in ledger["unfinished"]
    assert "run failed" in err and "raylet" in err.lower()


def test_an_empty_input_warns_and_a_lone_surrogate_keeps_its_row(ray_session, tmp_path):
    """Issue 32 case 6: an empty file ran to 0 rows without a word, and a row with a lone surrogate
    was quarantined as "str value does not fit the column type string" without its text."""
    (tmp_path / "empty.jsonl").write_text("")
    (tmp_path / "odd.jsonl").write_text('{"id": "a", "text": "fine"}\n{"id": "b", "text": "half \\ud800 pair"}\n'
                                        '{"id": "c", "text": "whole \\ud83d\\ude00 pair"}\n')
    path = tmp_path / "p.yaml"
    path.write_text(textwrap.dedent(f"""\
        name: inputs
        nodes:
          - {{id: empty, op: read_jsonl, with: {{paths: ["{tmp_path}/empty.jsonl"]}}}}
          - {{id: odd, op: read_jsonl, with: {{paths: ["{tmp_path}/odd.jsonl"]}}}}
          - {{id: out_empty, op: write_jsonl, input: empty, with: {{path: "{{run_dir}}/empty"}}}}
          - {{id: out_odd, op: write_jsonl, input: odd, with: {{path: "{{run_dir}}/odd"}}}}
        """))
    ledger = run_pipeline(str(path), run_dir=str(tmp_path / "run"))
    assert ledger["adds_up"] and ledger["nodes"]["odd"]["quarantined"] == 0
    assert ledger["nodes"]["odd"]["surrogates_replaced"] == 1
    assert {r["id"]: r["text"] for r in rows_in(tmp_path / "run" / "odd")} == {
        "a": "fine", "b": "half \ufffd pair", "c": "whole \U0001F600 pair"}
    warnings = ledger["warnings"]
    assert any(w.startswith(f"empty: read 0 rows from {tmp_path}/empty.jsonl") for w in warnings), warnings
    assert any(w.startswith("odd: 1 row(s) held a lone surrogate") for w in warnings), warnings
    assert not any(w.startswith("odd: read 0") for w in warnings)


def _slow_run(tmp_path: Path, **popen) -> tuple[subprocess.Popen, Path]:
    """`raypress run` (supervisor and child) of a run that is still working ~10 s after its start."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    data = corpus(tmp_path / "in.jsonl", 20_000)
    run_dir = tmp_path / "run"
    env = {**os.environ, "RAYPRESS_PROGRESS": "0", "RAY_ADDRESS": ""}
    slow = pipeline(tmp_path, data, settings="{rows_per_block: 20}")
    proc = subprocess.Popen([*RAYPRESS, "run", str(slow), "--run-dir", str(run_dir)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=REPO, env=env, **popen)
    _raylet_of(psutil.Process(proc.pid))
    _wait_for_event(run_dir, "node_started")
    return proc, run_dir


def _run_child(supervisor: psutil.Process) -> psutil.Process:
    return next(p for p in supervisor.children() if "--in-process" in p.cmdline())


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_cancels_the_run_in_one_line(tmp_path, sig):
    """Issue 32 case 3: SIGTERM printed ~30 lines of Ray's C++ stack dumps and recorded `SystemExit: 1`;
    SIGINT recorded `KeyboardInterrupt:` with nothing after the colon."""
    proc, run_dir = _slow_run(tmp_path, start_new_session=True)
    try:
        os.killpg(proc.pid, sig) if sig == signal.SIGINT else proc.send_signal(sig)  # Ctrl-C: the whole group
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    ledger = json.loads((run_dir / "ledger.json").read_text())
    said = (ledger.get("error"), err[-3000:])
    assert ledger["status"] == "cancelled" and ledger["error"] == f"cancelled by {sig.name}", said
    assert proc.returncode == 128 + sig, (proc.returncode, err[-3000:])
    assert f"run cancelled by {sig.name}" in err
    for noise in ("SIGTERM received", "PC: @", "Traceback", "SystemExit", "KeyboardInterrupt"):
        assert noise not in out + err, (out + err)[-3000:]


def test_a_killed_supervisor_ends_its_run_and_a_killed_run_ends_its_ray(tmp_path):
    """Issue 32 case 3: after `kill -9` of the CLI its run went on until its next print; after
    `kill -9` of the run, Ray's DashboardAgent and RuntimeEnvAgent stayed for over 20 s."""
    proc, run_dir = _slow_run(tmp_path / "a")
    child = _run_child(psutil.Process(proc.pid))
    tree = [child, *child.children(recursive=True)]
    proc.kill()
    _gone([child], within_s=2.0)  # the run ends, its Ray processes with it (40-170 ms here; Ray's own
    ledger = json.loads((run_dir / "ledger.json").read_text())  # shutdown alone takes 2-4 s)
    assert ledger["status"] == "cancelled" and ledger["error"] == "cancelled by SIGHUP", ledger.get("error")
    # its Ray processes end too, at once nearly always. In about one full suite run in three a
    # DashboardAgent outlived the run's own kill: re-parented away, its command line rewritten to
    # `ray::DashboardAgent` (no session folder in it); `session_processes` now finds it by its open
    # logs. The slack stays for an agent that ends by itself once its raylet is gone
    _gone(tree, within_s=30)

    proc, run_dir = _slow_run(tmp_path / "b")
    supervisor = psutil.Process(proc.pid)
    child = _run_child(supervisor)
    tree = child.children(recursive=True)
    assert any(p.name().startswith("ray::") for p in tree)  # workers and agents
    child.kill()
    proc.communicate(timeout=60)
    _gone(tree, within_s=1)  # the supervisor ended them before it exited
    assert json.loads((run_dir / "ledger.json").read_text())["status"] == "failed"


def _gone(processes: list[psutil.Process], within_s: float) -> None:
    deadline = time.monotonic() + within_s
    while True:
        left = [p for p in processes if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        if not left:
            return
        assert time.monotonic() < deadline, [f"{p.pid} {p.status()} {' '.join(p.cmdline())[:200]}" for p in left]
        time.sleep(0.1)


@pytest.fixture
def small_disk(tmp_path) -> Iterator[Path]:
    """A real 20 MB filesystem (tmpfs; needs the right to mount, else the test skips)."""
    mount = tmp_path / "small"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=20m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_disk_names_the_destination_and_leaves_no_staging_folder(ray_session, tmp_path, small_disk):
    """Issue 32 case 4: the message was Ray's task error with colour codes, "No space left on device"
    only in later lines, and an empty `.<name>.raypress-staging` folder stayed in the destination."""
    data = tmp_path / "in.jsonl"
    with open(data, "w") as fh:
        for i in range(60_000):
            fh.write(json.dumps({"doc": f"d{i:05d}", "text": f"row {i} " + "filler words " * 35}) + "\n")
    dest = small_disk / "dest"
    with pytest.raises(BaseException):
        run_pipeline(str(pipeline(tmp_path, data, out=str(dest))), run_dir=str(tmp_path / "run"))
    ledger = json.loads((tmp_path / "run" / "ledger.json").read_text())
    assert ledger["status"] == "failed" and ledger["error"] == f"no space left on device at {dest}", ledger
    assert "\x1b[" not in json.dumps(ledger) and "\x1b[" not in (tmp_path / "run" / "events.jsonl").read_text()
    assert sorted(p.name for p in small_disk.iterdir()) == []  # no staging folder, no parts
