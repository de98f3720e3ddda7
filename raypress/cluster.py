"""Run a pipeline YAML on a Ray cluster through the Ray Jobs API (`raypress submit`).

The job runs the same file with the same CLI (`raypress.cli run ... --address auto`) on the head
node, so a pipeline behaves the same on a laptop and on a cluster. The runtime env ships what the
job needs: this package (`py_modules`, no network needed), the pipeline's folder (`working_dir`,
so relative paths in the YAML resolve), and optionally extra pip packages.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shlex
import socket
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import yaml

if TYPE_CHECKING:
    from ray.job_submission import JobSubmissionClient

PACKAGE_DIR = Path(__file__).resolve().parent
# Never uploaded: environments, VCS data, caches and earlier runs' outputs.
ALWAYS_EXCLUDED = [".git", ".venv", "venv", "__pycache__", "*.pyc", "runs/", ".pytest_cache"]
# Files at least this big stay behind: Ray caps an upload at 512 MiB and warns from 10 MiB; data
# this large belongs on storage the cluster reads directly (S3, NFS, file_mounts in cluster.yaml).
LARGE_FILE_BYTES = 100 * 1024 * 1024
JOB_ENV_VARS = {
    "RAY_TRAIN_V2_ENABLED": "1",  # stages use the Ray Train V2 API
    "PYTHONUNBUFFERED": "1",  # so log lines stream while the job runs, not at exit
}
ADDRESS_ENV_VARS = ("RAY_API_SERVER_ADDRESS", "RAY_ADDRESS")
CONNECT_TIMEOUT_S = 5.0
POLL_INTERVAL_S = 1.0
SUBMIT_RETRY_S = 120.0
NO_AGENT = "No available agent to submit job"


class ClusterError(RuntimeError):
    """A submission problem the user can fix (bad file, unreachable cluster); one line, no trace."""


def submit_pipeline(
    pipeline_path: str,
    address: str | None,
    run_dir: str | None,
    overrides: Sequence[str],
    extra_pip: list[str] | None = None,
    follow: bool = True,
    echo: Callable[[str], Any] = print,
) -> str:
    """Submit `pipeline_path` as a Ray job at `address`; with `follow`, stream its logs and return
    the final status ("SUCCEEDED", "FAILED", "STOPPED"), else return the status right after
    submission.

    `address` is the head's dashboard URL (http://HEAD:8265) or a Ray address (HOST:6379,
    ray://HOST:10001); None falls back to RAY_API_SERVER_ADDRESS / RAY_ADDRESS. `run_dir` is a
    path on the cluster: give an absolute path on storage you can read back.
    """
    pipeline = _checked_pipeline(pipeline_path)
    client = connect(address)
    if run_dir is None or not os.path.isabs(run_dir):
        echo(
            f"note: run dir {run_dir or '(default runs/...)'} is relative to the job's working "
            "directory on the head node; pass --run-dir with an absolute path to keep outputs"
        )
    runtime_env = build_runtime_env(pipeline.parent, extra_pip, echo=echo)
    entrypoint = build_entrypoint(pipeline.name, run_dir, overrides)
    try:
        job_id = _submit(
            client,
            pipeline.stem,
            entrypoint=entrypoint,
            runtime_env=runtime_env,
            metadata={"raypress_pipeline": pipeline.name},
        )
    except Exception as e:  # upload refused, job server error, connection dropped
        raise ClusterError(f"submitting to {address} failed: {_one_line(e)}") from e
    echo(f"submitted job {job_id} to {client.get_address()}: {entrypoint}")
    try:
        if not follow:
            echo(f"follow it with: ray job logs --follow {job_id} --address {client.get_address()}")
            return client.get_job_status(job_id).value
        return follow_job(client, job_id, echo=echo)
    except OSError as e:  # requests' ConnectionError: the cluster went away mid-run
        raise ClusterError(
            f"lost contact with {address} ({_one_line(e)}); job {job_id} may still be running"
        ) from e


def _submit(client: JobSubmissionClient, name: str, **job: Any) -> str:
    """`submit_job`, retried for a while when the head cannot take it yet.

    A fresh head refuses jobs until its job agent registers, and a busy dashboard can drop the
    connection before answering. The submission id is chosen here, so a retry after a dropped
    answer cannot start the job twice: Ray rejects a reused id, which then means it landed.
    """
    submission_id = f"raypress_{re.sub(r'[^A-Za-z0-9_-]', '-', name)[:40]}_{uuid.uuid4().hex[:8]}"
    deadline = time.monotonic() + SUBMIT_RETRY_S
    while True:
        try:
            return client.submit_job(submission_id=submission_id, **job)
        except RuntimeError as e:
            if f"{submission_id} already exists" in str(e):
                return submission_id
            if NO_AGENT not in str(e) or time.monotonic() > deadline:
                raise
        except OSError:  # requests' ConnectionError
            if time.monotonic() > deadline:
                raise
        time.sleep(POLL_INTERVAL_S)


def build_entrypoint(pipeline_name: str, run_dir: str | None, overrides: Sequence[str]) -> str:
    """The shell command the job runs: the local `raypress run`, joined to the cluster."""
    args = ["python", "-m", "raypress.cli", "run", pipeline_name]
    if run_dir is not None:
        args += ["--run-dir", run_dir]
    for override in overrides:
        args += ["--set", override]
    args += ["--address", "auto"]
    return shlex.join(args)


def build_runtime_env(
    working_dir: Path, extra_pip: list[str] | None = None, echo: Callable[[str], Any] = print
) -> dict[str, Any]:
    """Runtime env that installs raypress and the pipeline's folder on the cluster."""
    large = list(_large_files(working_dir))
    for rel in large:
        echo(f"note: not uploading {rel} (>= {LARGE_FILE_BYTES >> 20} MiB); put it where the cluster can read it")
    env: dict[str, Any] = {
        "working_dir": str(working_dir),
        "py_modules": [str(PACKAGE_DIR)],
        "excludes": ALWAYS_EXCLUDED + ["/" + _escape_glob(rel) for rel in large],
        "env_vars": dict(JOB_ENV_VARS),
    }
    if extra_pip:
        env["pip"] = list(extra_pip)
    return env


def connect(address: str | None) -> JobSubmissionClient:
    """A Jobs API client for `address`, or a one-line ClusterError naming it.

    An explicit address wins over RAY_ADDRESS (Ray's client would silently prefer the variable).
    """
    from ray.exceptions import AuthenticationError
    from ray.job_submission import JobSubmissionClient

    address = address or next((os.environ[v] for v in ADDRESS_ENV_VARS if os.environ.get(v)), None)
    if not address:
        raise ClusterError(
            "no cluster address: pass --address http://HEAD:8265 or set RAY_ADDRESS"
        )
    _check_reachable(address)
    try:
        with _without_env(ADDRESS_ENV_VARS):
            try:
                return JobSubmissionClient(address)
            except AuthenticationError:
                if not _use_local_token():
                    raise
                return JobSubmissionClient(address)
    except Exception as e:  # Ray raises ConnectionError/RuntimeError/ValueError with multi-line text
        raise ClusterError(f"cannot use the Ray cluster at {address}: {_one_line(e)}") from e


def _use_local_token() -> bool:
    """Turn on token auth when RAY_AUTH_MODE is unset and a token is at hand (RAY_AUTH_TOKEN,
    RAY_AUTH_TOKEN_PATH, ~/.ray/auth_token), as `ray start` and `ray.init` do; False if neither.

    Ray 2.60 protects clusters started where a token exists, but its Jobs client only sends the
    token when RAY_AUTH_MODE=token, so without this a local `ray start` head answers 401.
    """
    if os.environ.get("RAY_AUTH_MODE"):
        return False
    from ray._private.authentication.authentication_token_setup import (
        maybe_enable_token_auth_if_token_available,
    )

    return maybe_enable_token_auth_if_token_available(warn_if_disabled=False)


def follow_job(client: JobSubmissionClient, job_id: str, echo: Callable[[str], Any] = print) -> str:
    """Echo the job's log chunks as they come, then wait for a terminal status and return it."""
    streamed = False
    try:
        streamed = asyncio.run(_tail_logs(client, job_id, echo))
    except RuntimeError as e:  # the log stream broke; the job itself may still be fine
        echo(f"log stream interrupted ({_one_line(e)}); waiting for the job to finish")
    except KeyboardInterrupt:
        echo(f"detached; job {job_id} keeps running (stop it with: ray job stop {job_id})")
        raise
    while not (status := client.get_job_status(job_id)).is_terminal():
        time.sleep(POLL_INTERVAL_S)
    message = client.get_job_info(job_id).message if status.value != "SUCCEEDED" else None
    if message:
        # Ray repeats the log tail in the message: after streaming only its head is news, but a
        # job that never started (runtime env setup failed) has nothing else to show.
        echo(message.strip().splitlines()[0].split(", last available logs")[0] if streamed else message.strip())
    echo(f"job {job_id} {status.value}")
    return status.value


async def _tail_logs(client: JobSubmissionClient, job_id: str, echo: Callable[[str], Any]) -> bool:
    """Echo log chunks until the job ends; whether any came."""
    streamed = False
    async for chunk in client.tail_job_logs(job_id):
        if chunk:
            streamed = True
            echo(chunk.rstrip("\n"))
    return streamed


def _checked_pipeline(pipeline_path: str) -> Path:
    """The pipeline file, resolved; a ClusterError before anything is uploaded if it is unusable."""
    path = Path(pipeline_path).expanduser()
    if not path.is_file():
        raise ClusterError(f"pipeline file not found: {pipeline_path}")
    try:
        spec = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise ClusterError(f"{pipeline_path} is not valid YAML: {_one_line(e)}") from e
    if not isinstance(spec, dict):
        raise ClusterError(f"{pipeline_path} is not a pipeline (expected a mapping at the top)")
    return path.resolve()


def _check_reachable(address: str) -> None:
    """Fail in seconds on a dead or firewalled address (Ray's client would wait minutes)."""
    if address == "auto":
        return
    parts = urlsplit(address if "://" in address else f"//{address}")
    default_port = {"http": 80, "https": 443}.get(parts.scheme)
    try:
        port = parts.port or default_port
    except ValueError:
        raise ClusterError(f"not a valid Ray address: {address}") from None
    if not parts.hostname or port is None:
        raise ClusterError(f"not a valid Ray address (expected http://HOST:PORT): {address}")
    try:
        socket.create_connection((parts.hostname, port), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as e:
        reason = e.strerror or type(e).__name__
        raise ClusterError(
            f"cannot reach the Ray cluster at {address} ({reason}); is the head running and its "
            "dashboard port (default 8265) open?"
        ) from None


def _large_files(root: Path) -> Iterator[str]:
    """Paths (relative to root) of files too big to upload, skipping always-excluded folders."""
    skip = {p.rstrip("/") for p in ALWAYS_EXCLUDED if "*" not in p}
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in skip]
        for name in files:
            path = Path(folder, name)
            with contextlib.suppress(OSError):
                if path.stat().st_size >= LARGE_FILE_BYTES:
                    yield path.relative_to(root).as_posix()


def _escape_glob(text: str) -> str:
    """Escape gitignore wildcard characters so a file name matches only itself."""
    return re.sub(r"([*?\[\]!#\\])", r"\\\1", text)


@contextlib.contextmanager
def _without_env(names: Sequence[str]) -> Iterator[None]:
    saved = {n: os.environ.pop(n) for n in names if n in os.environ}
    try:
        yield
    finally:
        os.environ.update(saved)


def _one_line(error: object) -> str:
    return " ".join(str(error).split())
