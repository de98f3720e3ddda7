"""`raypress submit` against a real Ray head, and the submit errors a user sees.

The head is a separate `ray start --head --block` process with its own ports, temp dir and auth
token, so it never meets the in-process Ray that the `ray_session` fixture starts for other tests
(this file does not use that fixture). `ray stop` would kill every Ray on the machine, the test
session's included, so the head is stopped by signalling only its own processes, found in /proc:
the tree below that `ray start` (the job driver, which Ray starts in a session of its own, is in
it) plus anything whose command line names the head's private temp dir.
"""

from __future__ import annotations

import contextlib

import json
import os
import re
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from ray._private.thirdparty.pathspec import PathSpec  # what Ray applies `excludes` with

from raypress.cluster import (
    LARGE_FILE_BYTES,
    ClusterError,
    build_entrypoint,
    build_runtime_env,
    submit_pipeline,
)

REPO = Path(__file__).resolve().parents[2]
HEAD_START_TIMEOUT_S = 300
HEAD_START_ATTEMPTS = 2
HEAD_STARTED = "Ray runtime started."  # printed by `ray start` once the node is registered
JOB_TIMEOUT_S = 600

ROWS = ["hello", "hello world", "a quick brown fox", "ok"]
KEPT = ["a quick brown fox"]  # words_num_filter with min_num 3, set on the command line

PIPELINE = """\
name: submit-smoke
nodes:
  - id: docs
    op: read_jsonl
    with: {paths: ["docs.jsonl"]}   # relative: resolves in the job's working_dir on the cluster
  - id: long
    op: words_num_filter
    input: docs
    with: {min_num: 2}
  - id: out
    op: write_jsonl
    input: long
    with: {path: "{run_dir}/out"}
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def clean_env(**extra: str) -> dict[str, str]:
    """This process's env minus any cluster address or auth setting, with the venv's bin first on
    PATH (so the job's `python` is this interpreter)."""
    dropped = ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS", "RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env | extra


def write_pipeline(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "docs.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in ROWS))
    path = folder / "pipeline.yaml"
    path.write_text(PIPELINE)
    return path


def head_processes(head: subprocess.Popen, temp_dir: str) -> list[int]:
    """`ray start`'s process tree (ppid links survive the setsid Ray does for job drivers), plus
    any process naming our temp dir that a crash orphaned; both from /proc, nothing else."""
    children: dict[int, list[int]] = {}
    orphans = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        children.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(entry))
        if temp_dir.encode() in cmdline:
            orphans.append(int(entry))
    found, todo = set(), [head.pid, *orphans]
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo += children.get(pid, [])
    found.discard(os.getpid())
    return sorted(found)


def stop_head(head: subprocess.Popen, temp_dir: str) -> None:
    """SIGTERM the head's processes, SIGKILL what is left after a grace period."""
    pids = head_processes(head, temp_dir)
    for sig, grace_s in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):  # already gone
                os.kill(pid, sig)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            head.poll()  # reap our direct child so it does not linger as a zombie
            pids = [p for p in pids if _alive(p)]
            if not pids:
                return
            time.sleep(0.2)


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def head_up(head: subprocess.Popen, url: str, token: str, log: Path) -> bool:
    """Wait until `ray start` reports the node up and the Jobs API answers a listing (the
    dashboard serves before the raylet has registered, and `ray start` tears everything down if
    that takes over 30 s, which a loaded 2-core machine can miss); False if it gave up."""
    request = urllib.request.Request(f"{url}/api/jobs/", headers={"Authorization": f"Bearer {token}"})
    deadline = time.monotonic() + HEAD_START_TIMEOUT_S
    while time.monotonic() < deadline and head.poll() is None:
        if HEAD_STARTED in log.read_text(errors="replace"):
            try:
                with urllib.request.urlopen(request, timeout=10) as response:
                    if response.status == 200:
                        return True
            except OSError:  # refused, reset, or an HTTP error while modules start
                time.sleep(1)
                continue
        time.sleep(1)
    return False


def start_head(temp_dir: str, log: Path, env: dict[str, str]) -> tuple[subprocess.Popen, str]:
    """`ray start --head --block` on fresh ports, detached into its own session."""
    ray_exe = Path(sys.executable).with_name("ray")
    dash_port = free_port()
    cmd = [str(ray_exe) if ray_exe.exists() else shutil.which("ray") or "ray",
           "start", "--head", "--block",
           f"--port={free_port()}",
           f"--dashboard-port={dash_port}",
           "--dashboard-host=127.0.0.1",
           "--include-dashboard=true",
           f"--dashboard-agent-listen-port={free_port()}",
           f"--dashboard-agent-grpc-port={free_port()}",  # every port fresh: the suite's own Ray runs beside it
           f"--runtime-env-agent-port={free_port()}",
           f"--ray-client-server-port={free_port()}",
           f"--metrics-export-port={free_port()}",
           "--num-cpus=2",
           f"--object-store-memory={200 * 1024 * 1024}",
           "--disable-usage-stats",
           f"--temp-dir={temp_dir}"]
    with open(log, "wb") as log_file:
        head = subprocess.Popen(cmd, stdout=log_file, stderr=subprocess.STDOUT,
                                env=env, start_new_session=True)
    return head, f"http://127.0.0.1:{dash_port}"


@dataclass
class Head:
    url: str  # the dashboard / Jobs API
    env: dict[str, str]  # what a client process needs: the head's token, no other cluster
    log: Path  # `ray start` output: says when and why the head went down

    def explain(self, output: str) -> str:
        """A failed submission's output tail with the head's, for the assertion message."""
        return f"{output[-4000:]}\n--- ray head log ---\n{self.log.read_text()[-2000:]}"


@pytest.fixture(scope="module")
def ray_head() -> Iterator[Head]:
    """A private local Ray head (2 CPUs) with token auth from its own token file, as Ray 2.60
    sets up a head wherever a token exists; torn down after the module."""
    temp_dir = tempfile.mkdtemp(prefix="rps", dir="/tmp")  # short: Unix socket paths are capped
    token = secrets.token_hex(32)
    token_path = Path(temp_dir) / "auth_token"
    token_path.write_text(token)
    env = clean_env(RAY_AUTH_TOKEN_PATH=str(token_path))
    head = None
    try:
        for attempt in range(HEAD_START_ATTEMPTS):
            log = Path(temp_dir) / f"head-{attempt}.log"
            head, url = start_head(temp_dir, log, env)
            if head_up(head, url, token, log):
                break
            stop_head(head, temp_dir)
        else:
            pytest.fail(f"no ray head after {HEAD_START_ATTEMPTS} tries:\n{log.read_text()[-3000:]}")
        yield Head(url, env, log)
    finally:
        if head is not None:
            stop_head(head, temp_dir)
        shutil.rmtree(temp_dir, ignore_errors=True)


def submit(head: Head, pipeline: Path, *args: str) -> tuple[int, str]:
    proc = subprocess.run(
        [sys.executable, "-m", "raypress.cli", "submit", str(pipeline), "--address", head.url, *args],
        cwd=REPO, env=head.env, capture_output=True, text=True, timeout=JOB_TIMEOUT_S,
    )
    return proc.returncode, proc.stdout + proc.stderr


@pytest.mark.integration
def test_submit_runs_pipeline_on_a_ray_head(ray_head, tmp_path):
    pipeline = write_pipeline(tmp_path / "pipeline")
    run_dir = tmp_path / "run"
    code, output = submit(ray_head, pipeline, "--run-dir", str(run_dir), "--set", "long.min_num=3")
    assert code == 0, ray_head.explain(output)
    assert "SUCCEEDED" in output
    assert re.search(r"submitted job raypress_pipeline_[0-9a-f]{8}", output)
    assert "ledger adds up" in output, "the job's own log lines should stream back"

    written = sorted(
        json.loads(line)["text"]
        for part in sorted((run_dir / "out").glob("*.jsonl"))
        for line in part.read_text().splitlines()
    )
    assert written == KEPT
    ledger = json.loads((run_dir / "ledger.json").read_text())
    assert ledger["adds_up"] is True
    assert ledger["nodes"]["long"]["rows_in"] == len(ROWS)
    assert ledger["nodes"]["long"]["rows_out"] == len(KEPT)


@pytest.mark.integration
def test_a_job_that_fails_on_the_cluster_fails_the_command(ray_head, tmp_path):
    pipeline = write_pipeline(tmp_path / "pipeline")
    (pipeline.parent / "docs.jsonl").unlink()  # valid YAML, but the input is not there
    code, output = submit(ray_head, pipeline, "--run-dir", str(tmp_path / "run"))
    assert code == 1, ray_head.explain(output)
    assert "FAILED" in output and "SUCCEEDED" not in output
    assert "docs.jsonl" in output, "the cluster-side error should stream back"


def test_unreachable_address_is_a_one_line_error_naming_it(tmp_path):
    pipeline = write_pipeline(tmp_path)
    address = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    started = time.monotonic()
    with pytest.raises(ClusterError) as err:
        submit_pipeline(str(pipeline), address, None, [], echo=lambda s: None)
    assert time.monotonic() - started < 10
    message = str(err.value)
    assert address in message and "\n" not in message


def test_cli_reports_an_unreachable_address_without_a_traceback(tmp_path):
    pipeline = write_pipeline(tmp_path)
    address = f"http://127.0.0.1:{free_port()}"
    proc = subprocess.run(
        [sys.executable, "-m", "raypress.cli", "submit", str(pipeline), "--address", address],
        cwd=REPO, env=clean_env(), capture_output=True, text=True, timeout=120,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert address in output
    assert "Traceback" not in output, output


def test_missing_pipeline_file_is_reported_before_connecting(tmp_path):
    with pytest.raises(ClusterError, match="pipeline file not found"):
        submit_pipeline(str(tmp_path / "nope.yaml"), "http://127.0.0.1:1", None, [])


def test_entrypoint_quotes_overrides_and_joins_the_cluster():
    entry = build_entrypoint("my pipe.yaml", "/runs/a b", ["clean.text_key=it's", "f.min_num=3"])
    assert shlex.split(entry) == [
        "python", "-m", "raypress.cli", "run", "my pipe.yaml",
        "--run-dir", "/runs/a b",
        "--set", "clean.text_key=it's", "--set", "f.min_num=3",
        "--address", "auto",
    ]


def test_runtime_env_ships_package_and_folder_but_not_large_files(tmp_path):
    write_pipeline(tmp_path)
    (tmp_path / "data").mkdir()
    with open(tmp_path / "data" / "big[1].bin", "wb") as f:
        f.truncate(LARGE_FILE_BYTES)  # sparse: costs no disk
    notes: list[str] = []
    env = build_runtime_env(tmp_path, ["reasoning-gym"], echo=notes.append)
    assert env["working_dir"] == str(tmp_path)
    assert [Path(p).name for p in env["py_modules"]] == ["raypress"]
    assert (Path(env["py_modules"][0]) / "cluster.py").is_file()
    assert {".venv", ".git", "runs/"} <= set(env["excludes"])
    # matched the way Ray matches `excludes` (gitwildmatch): the big file only, not its neighbours
    excluded = PathSpec.from_lines("gitwildmatch", env["excludes"]).match_file
    assert excluded("data/big[1].bin") and excluded("runs/x/ledger.json")
    assert not excluded("docs.jsonl") and not excluded("data/big1.bin")
    assert any("data/big[1].bin" in n for n in notes)
    assert env["pip"] == ["reasoning-gym"]
    assert env["env_vars"]["RAY_TRAIN_V2_ENABLED"] == "1"
    assert "pip" not in build_runtime_env(tmp_path, None, echo=notes.append)
