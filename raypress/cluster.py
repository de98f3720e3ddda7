"""Run a pipeline YAML on a Ray cluster through the Ray Jobs API (`raypress submit`).

The pipeline is resolved here, once, as `run` resolves it (``dag.resolve``: overrides applied,
relative paths and the run directory made absolute against the directory `submit` runs in), and
the job runs that resolved file as it is with the same CLI (`raypress.cli run pipeline.yaml
--address auto`) on the head node, so a pipeline behaves the same on a laptop and on a cluster and
the job's own working directory never matters. The runtime env ships this package (`py_modules`,
no network needed), the resolved file alone (`working_dir`) and optionally extra pip packages. Before the pipeline goes, a probe job
with the same runtime env checks that the job's Python imports what the pipeline needs and sees its
inputs, so a cluster that cannot run it is named with the fix instead of failing with a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import glob
import json
import os
import re
import shlex
import socket
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from raypress.dag.fingerprint import is_path_key

if TYPE_CHECKING:
    from ray.job_submission import JobSubmissionClient

    from raypress.dag.resolve import ResolvedPipeline
    from raypress.dag.spec import PipelineSpec

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
# Import names of the core install (pyproject `dependencies`): what every pipeline needs.
CORE_MODULES = ("ray", "pyarrow", "pydantic", "yaml", "typer", "rich", "numpy", "xxhash", "httpx", "emoji", "numba",
                "datasketches", "regex")
RAYPRESS_ENTRY = "raypress.cli"  # what the job's entrypoint imports
RESOLVED_FILE = "pipeline.yaml"  # the resolved pipeline, the job's whole working_dir with the probe
PROBE_FILE = "_raypress_probe.py"
PROBE_SPEC = "_raypress_probe.json"
PROBE_MARKER = "RAYPRESS_PROBE "
PROBE_TIMEOUT_S = 900.0  # a --pip runtime env installs packages first
LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1", "0.0.0.0"}
# Run on the cluster as `python _raypress_probe.py _raypress_probe.json`, stdlib only: it must
# report on a Python that lacks everything else.
PROBE_SCRIPT = '''\
"""raypress submit's check, run as a Ray job just before the pipeline with the same runtime env:
does the job's Python import what the pipeline needs, see its inputs and reach its outputs?"""
import glob, importlib, json, os, platform, sys

spec = json.load(open(sys.argv[1]))
missing = {}
for module in spec["modules"]:
    try:
        importlib.import_module(module)
    except BaseException as e:  # a broken install can raise anything, SystemExit included
        missing[module] = f"{type(e).__name__}: {e}"


def seen(path):
    if any(c in path for c in "*?["):
        return bool(glob.glob(path, recursive=True))
    return os.path.exists(path)


def writable(path):
    while not os.path.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            return False
        path = parent
    return os.path.isdir(path) and os.access(path, os.W_OK | os.X_OK)


print("%s" + json.dumps({
    "python": sys.executable, "version": platform.python_version(), "missing": missing,
    "unseen": [label for label, path in spec["inputs"] if not seen(path)],
    "unwritable": [label for label, path in spec["outputs"] if not writable(path)],
}), flush=True)
''' % PROBE_MARKER


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
    check: bool = True,
) -> str:
    """Resolve `pipeline_path` with `overrides` here (relative paths, the run directory included,
    mean what they mean to `run` in this directory) and submit it: see :func:`submit_resolved`."""
    from raypress.dag.resolve import resolve_pipeline
    from raypress.dag.validate import PipelineInvalid

    try:  # model files are found on the cluster, where the ops run: not pinned here
        resolved = resolve_pipeline(pipeline_path, list(overrides), run_dir, cluster_address=address or "auto",
                                    inputs_here=False)  # the cluster's probe checks its own
    except PipelineInvalid as e:
        first = e.problems[0]
        more = f" (and {len(e.problems) - 1} more: raypress validate lists every problem)" if len(e.problems) > 1 else ""
        raise ClusterError(f"{first}{more}") from None
    return submit_resolved(resolved, address, extra_pip=extra_pip, follow=follow, echo=echo, check=check)


def submit_resolved(
    resolved: ResolvedPipeline,
    address: str | None,
    extra_pip: list[str] | None = None,
    follow: bool = True,
    echo: Callable[[str], Any] = print,
    check: bool = True,
) -> str:
    """Submit a resolved pipeline as a Ray job at `address`; with `follow`, stream its logs and
    return the final status ("SUCCEEDED", "FAILED", "STOPPED"), else return the status right
    after submission.

    `address` is the head's dashboard URL (http://HEAD:8265) or a Ray address (HOST:6379,
    ray://HOST:10001); None falls back to RAY_API_SERVER_ADDRESS / RAY_ADDRESS. The job runs the
    resolved file as it is (`raypress run pipeline.yaml --address auto`): its paths are absolute,
    so on a multi-node cluster they must be on storage every node mounts at the same path. With
    `check`, a probe job first verifies the cluster's environment.
    """
    client = connect(address)
    job_id = start_job(client, resolved, extra_pip=extra_pip, echo=echo, check=check)
    run_dir = str(resolved.run_dir)
    entrypoint = build_entrypoint(RESOLVED_FILE)
    echo(f"submitted job {job_id} to {client.get_address()}: {entrypoint} (run directory {run_dir})")
    try:
        if not follow:
            echo(f"follow it with: ray job logs --follow {job_id} --address {client.get_address()}")
            return client.get_job_status(job_id).value
        return follow_job(client, job_id, echo=echo)
    except OSError as e:  # requests' ConnectionError: the cluster went away mid-run
        raise ClusterError(
            f"lost contact with {address} ({_one_line(e)}); job {job_id} may still be running"
        ) from e


def start_job(
    client: JobSubmissionClient,
    resolved: ResolvedPipeline,
    extra_pip: list[str] | None = None,
    echo: Callable[[str], Any] = print,
    check: bool = True,
    env_vars: dict[str, str] | None = None,
    metadata: dict[str, str] | None = None,
    python: str = "python",
    command: str = "run",
) -> str:
    """Submit the resolved pipeline as a job through `client` and return its id at once: the one
    path `raypress submit` and the pipelines service share. With `check`, a probe job first
    verifies the cluster's environment (ClusterError naming the fix). `env_vars` join the job's
    runtime env; `metadata` joins the job's own (what the service finds its runs by); `python`:
    the interpreter the job runs (a server on the cluster knows its own); `command`: `run`, or
    `analyze` for a run resolved in stats mode."""
    spec = resolved.vp.spec
    run_dir = str(resolved.run_dir)
    if not _is_local(client.get_address()):
        echo(f"note: inputs and the run directory ({run_dir}) must be on storage the cluster's nodes "
             "mount at the same path (NFS/EFS), or on S3")
    entrypoint = build_entrypoint(RESOLVED_FILE, python, command)
    with tempfile.TemporaryDirectory(prefix="raypress-submit-") as folder:
        working_dir = Path(folder)
        (working_dir / RESOLVED_FILE).write_text(resolved.text, encoding="utf-8")  # the file alone
        needed = _modules_needed(spec)
        if check:
            _write_probe(working_dir, needed, *io_paths(spec, run_dir))
        runtime_env = build_runtime_env(working_dir, extra_pip, echo=echo)
        runtime_env["env_vars"].update(env_vars or {})
        if check:
            check_cluster(client, spec.name, runtime_env, needed, extra_pip, echo=echo)
        source = Path(resolved.resolution.source).name
        try:
            return _submit(
                client,
                Path(source).stem,
                entrypoint=entrypoint,
                runtime_env=runtime_env,
                metadata={"raypress_pipeline": source, "raypress_run_dir": run_dir, **(metadata or {})},
            )
        except Exception as e:  # upload refused, job server error, connection dropped
            raise ClusterError(f"submitting to {client.get_address()} failed: {_one_line(e)}") from e


def resolve_path(text: str, cwd: str | None = None) -> str:
    """`text` as `run` started in `cwd` reads it: `~` expanded, relative made absolute; URLs and
    `{run_dir}` paths as they are."""
    if not text or "://" in text or "{run_dir}" in text:
        return text
    expanded = os.path.expanduser(text)
    return expanded if os.path.isabs(expanded) else os.path.normpath(os.path.join(cwd or os.getcwd(), expanded))


def io_paths(spec: PipelineSpec, run_dir: str) -> tuple[list[list[str]], list[list[str]]]:
    """([label, path] of each input that exists here, [label, path] of each output to reach).

    An input missing here too is left to the run (its reader says "no file matches"): only what
    this machine sees and the cluster does not is a visibility problem worth stopping for."""
    from raypress.operators.base import OpKind
    from raypress.operators.registry import add_op_package, get_op

    add_op_package("raypress.serving")  # a pipeline may name serving's ops (serve_llm)
    inputs, outputs = [], [[f"--run-dir {run_dir}", run_dir]]
    for node in spec.nodes:
        try:
            writer = (cls := get_op(node.op)) is not None and cls.kind == OpKind.WRITER
        except Exception:  # the op cannot load here; validation said so already
            writer = False
        for key, value in node.params.items():
            if not is_path_key(str(key)):
                continue
            for text in _path_strings(value):
                path = resolve_path(text).replace("{run_dir}", run_dir)
                label = f"{node.id}.{key}: {path}"
                if writer:
                    outputs.append([label, path])
                elif os.path.isabs(path) and _exists_here(path):
                    inputs.append([label, path])
    return inputs, outputs


def _path_strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _path_strings(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _path_strings(v)


def _exists_here(path: str) -> bool:
    if any(c in path for c in "*?["):
        return bool(glob.glob(path, recursive=True))
    return os.path.exists(path)


def _modules_needed(spec: PipelineSpec) -> dict[str, tuple[str, str] | None]:
    """Import name -> (op, extra) that needs it, None for the core install and raypress itself."""
    from raypress.operators.registry import add_op_package, requirements

    add_op_package("raypress.serving")
    needed: dict[str, tuple[str, str] | None] = dict.fromkeys(CORE_MODULES)
    for node in spec.nodes:
        for module, extra in requirements(node.op).items():
            needed.setdefault(module, (node.op, extra))
    needed[RAYPRESS_ENTRY] = None  # raypress itself (from py_modules), last: it imports the others
    return needed


def _write_probe(folder: Path, modules: dict[str, tuple[str, str] | None], inputs: list[list[str]],
                 outputs: list[list[str]]) -> None:
    """The probe and what it checks, into the job's working_dir (`python _raypress_probe.py ...`)."""
    (folder / PROBE_FILE).write_text(PROBE_SCRIPT)
    spec = {"modules": list(modules), "inputs": inputs, "outputs": outputs}
    (folder / PROBE_SPEC).write_text(json.dumps(spec))


def check_cluster(
    client: JobSubmissionClient,
    name: str,
    runtime_env: dict[str, Any],
    needed: dict[str, tuple[str, str] | None],
    extra_pip: list[str] | None,
    echo: Callable[[str], Any] = print,
) -> dict[str, Any]:
    """Run the probe (already in the runtime env's working_dir) as a job with the pipeline's runtime
    env and wait for its report; a ClusterError naming the fix when the pipeline could not run.

    The same runtime env means the same Python, packages and files the pipeline's job gets (Ray
    caches the env, so the job does not pay for it twice). `needed`: see `_modules_needed`."""
    try:
        job_id = _submit(client, f"probe_{name}", entrypoint=f"python {PROBE_FILE} {PROBE_SPEC}",
                         runtime_env=runtime_env, metadata={"raypress_probe": name})
    except Exception as e:
        raise ClusterError(f"submitting to {client.get_address()} failed: {_one_line(e)}") from e
    try:
        report = _probe_report(client, job_id)
    finally:
        with contextlib.suppress(Exception):  # its record is of no use once read
            client.delete_job(job_id)
    problems = cluster_problems(report, needed, extra_pip)
    if problems:
        raise ClusterError(" | ".join(problems))
    echo(f"cluster check: ok (python {report['version']} at {report['python']})")
    return report


def cluster_problems(report: dict[str, Any], needed: dict[str, tuple[str, str] | None],
                     extra_pip: list[str] | None = None) -> list[str]:
    """What in the probe's report stops the pipeline from running there, each with its fix."""
    problems = []
    if report["missing"]:
        problems.append(missing_packages_message(report, needed, extra_pip))
    if report["unseen"]:
        problems.append("the cluster cannot see these inputs, which this machine can: "
                        + "; ".join(report["unseen"])
                        + " (on a multi-node cluster inputs must be on storage every node mounts at the same "
                        "path, e.g. NFS/EFS, or on S3)")
    if report["unwritable"]:
        problems.append("the cluster cannot create these outputs: " + "; ".join(report["unwritable"])
                        + " (give --run-dir, and writers' paths, on storage the cluster can write)")
    return problems


def _probe_report(client: JobSubmissionClient, job_id: str) -> dict[str, Any]:
    """The probe's JSON line, once it ends; a ClusterError saying why there is none."""
    deadline = time.monotonic() + PROBE_TIMEOUT_S
    while not (status := client.get_job_status(job_id)).is_terminal():
        if time.monotonic() > deadline:
            with contextlib.suppress(Exception):
                client.stop_job(job_id)
            raise ClusterError(f"the cluster did not run the environment check in {PROBE_TIMEOUT_S:.0f} s "
                               f"(job {job_id}); is it short of CPUs or stuck installing --pip packages?")
        time.sleep(POLL_INTERVAL_S / 2)
    logs = client.get_job_logs(job_id)
    for line in logs.splitlines():
        if line.startswith(PROBE_MARKER):
            return json.loads(line[len(PROBE_MARKER):])
    message = client.get_job_info(job_id).message or ""
    detail = _one_line(message.split(", last available logs")[0] or logs[-500:])
    if "not found" in logs and "python" in logs:
        detail = f"there is no `python` on the head node's PATH ({_one_line(logs[-300:])})"
    raise ClusterError(f"the cluster could not run the environment check ({status.value}): {detail}")


def missing_packages_message(report: dict[str, Any], needed: dict[str, tuple[str, str] | None],
                             extra_pip: list[str] | None = None) -> str:
    """What the job's Python lacks and the two ways to fix it, in one line."""
    missing = [m for m in report["missing"] if m != RAYPRESS_ENTRY]
    if not missing:  # every package imports, raypress itself does not
        return (f"the cluster's Python ({report['python']}) cannot import raypress: "
                f"{report['missing'][RAYPRESS_ENTRY]}")
    core = [m for m in missing if not needed.get(m)]
    by_ops = {m: needed[m] for m in missing if needed.get(m)}
    lacks = ", ".join([*([f"{', '.join(core)} (raypress's dependencies)"] if core else []),
                       *(f"{m} (op {op}, extra {extra})" for m, (op, extra) in by_ops.items())])
    extras = sorted({extra for _, extra in by_ops.values()})
    install = f'pip install -e "$HOME/raypress{"[" + ",".join(extras) + "]" if extras else ""}"'
    text = (f"the cluster's Python ({report['python']}, {report['version']}) lacks {lacks}, so the pipeline "
            f"cannot run there. Fix: install raypress on every node into the Python Ray runs with "
            f"(cluster.yaml's setup_commands: {install})")
    if "ray" in missing:
        return text + "; this Python has no ray at all, so it is not the one Ray runs with: check PATH on the head"
    pips = [*(extra_pip or []), *(_pip_requirement(m) for m in missing)]
    return text + ", or add them to this job: " + " ".join(f"--pip {shlex.quote(p)}" for p in pips)


def _pip_requirement(module: str) -> str:
    """The requirement raypress's metadata pins for the package that provides `module`
    ('yaml' -> 'PyYAML>=6'); the bare name when unknown."""
    import importlib.metadata

    dists = importlib.metadata.packages_distributions().get(module, [module])
    wanted = {_normalise(d) for d in dists}
    with contextlib.suppress(importlib.metadata.PackageNotFoundError):
        for req in importlib.metadata.requires("raypress") or []:
            spec = req.split(";")[0].strip()
            name = re.split(r"[\[<>=!~ ]", spec, maxsplit=1)[0]
            if _normalise(name) in wanted:
                return re.sub(r"\[[^\]]*\]", "", spec)  # ray[data,...]==2.60.* -> ray==2.60.*
    return dists[0]


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _is_local(address: str) -> bool:
    """Whether the cluster's address is this machine (its head sees this machine's files)."""
    host = urlsplit(address if "://" in address else f"//{address}").hostname or ""
    return host in LOCAL_HOSTS or host == socket.gethostname()


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


JOB_COMMANDS = ("run", "analyze")  # what a job may run of the resolved file


def build_entrypoint(resolved_file: str, python: str = "python", command: str = "run") -> str:
    """The shell command the job runs: the resolved pipeline as it is, joined to the cluster (its
    run directory is recorded in the file); ``analyze`` runs it in stats mode and writes the report."""
    if command not in JOB_COMMANDS:
        raise ValueError(f"a job runs one of {JOB_COMMANDS}, not {command!r}")
    return shlex.join([python, "-m", "raypress.cli", command, resolved_file, "--address", "auto"])


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

    from raypress.dag.cluster_auth import refused_message

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
    except AuthenticationError:  # what to set and where the token is, not Ray's 401 text
        raise ClusterError(refused_message(address)) from None
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
    from raypress.dag.ray_compat import enable_token_auth_if_available

    return enable_token_auth_if_available()


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
