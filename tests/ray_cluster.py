"""A private local Ray cluster for tests: a head and optional worker nodes, each a `ray start --block`
process on fresh ports, sharing one temp dir and one auth token, stopped by signalling only the
processes it started.

`ray stop` would kill every Ray on the machine, the test session's own included, so a cluster is
stopped through /proc: the trees below the `ray start` processes it launched (the job drivers, which
Ray starts in sessions of their own, are in them) plus anything whose command line names the
cluster's private temp dir (what a crash orphaned).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

NODE_STARTED = "Ray runtime started."  # printed by `ray start` once the node is registered
START_TIMEOUT_S = 300
START_ATTEMPTS = 2
OBJECT_STORE_BYTES = 200 * 1024 * 1024


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


def ray_executable() -> str:
    ray_exe = Path(sys.executable).with_name("ray")
    return str(ray_exe) if ray_exe.exists() else shutil.which("ray") or "ray"


def _node_ports(taken: Sequence[int] = ()) -> list[str]:
    """Every port a node opens, fresh: the suite's own Ray and the other nodes run beside it.
    ``taken``: ports the node was already given (the head's GCS, dashboard, client server)."""
    low = free_port()
    while any(low <= t <= low + 200 for t in taken):
        low = free_port()
    high = min(low + 200, 65535)

    def outside_workers() -> int:  # Ray refuses a component port inside the worker range
        port = free_port()
        while low <= port <= high:
            port = free_port()
        return port

    return [f"--node-manager-port={outside_workers()}",
            f"--object-manager-port={outside_workers()}",
            f"--dashboard-agent-listen-port={outside_workers()}",
            f"--dashboard-agent-grpc-port={outside_workers()}",
            f"--runtime-env-agent-port={outside_workers()}",
            f"--metrics-export-port={outside_workers()}",
            # worker processes: a small range above a free port (taken ones are skipped by Ray)
            f"--min-worker-port={low}", f"--max-worker-port={high}"]


def _resources(resources: dict[str, float] | None) -> list[str]:
    return [f"--resources={json.dumps(resources)}"] if resources else []


def processes_of(roots: Sequence[int], temp_dir: str | None) -> list[int]:
    """The process trees below `roots` (ppid links survive the setsid Ray does for job drivers),
    plus any process naming `temp_dir` that a crash orphaned; both from /proc, nothing else."""
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
        if temp_dir and temp_dir.encode() in cmdline:
            orphans.append(int(entry))
    found, todo = set(), [*roots, *orphans]
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo += children.get(pid, [])
    found.discard(os.getpid())
    return sorted(found)


def stop_processes(procs: Sequence[subprocess.Popen], temp_dir: str | None) -> None:
    """SIGTERM the nodes' processes, SIGKILL what is left after a grace period (`temp_dir`: also
    the processes naming it; None: the trees only).

    The grace is short: the processes that stop on SIGTERM do so within half a second, and some
    never do (`ray start --block`, the raylets, the runtime-env agent stayed up 8 s after it, every
    time), so a longer grace only delayed each cluster's teardown by its whole length."""
    pids = processes_of([p.pid for p in procs], temp_dir)
    for sig, grace_s in ((signal.SIGTERM, 1.0), (signal.SIGKILL, 5.0)):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):  # already gone
                os.kill(pid, sig)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            for p in procs:
                p.poll()  # reap our direct children so they do not linger as zombies
            pids = [p for p in pids if _alive(p)]
            if not pids:
                return
            time.sleep(0.2)


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def api_get(url: str, token: str, timeout_s: float = 10) -> dict:
    """GET a dashboard endpoint with the cluster's token; the decoded JSON."""
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=timeout_s) as response:
        return json.loads(response.read())


def alive_nodes(url: str, token: str) -> list[dict]:
    """The cluster's ALIVE nodes from the state API (node_id, resources_total, ...)."""
    data = api_get(f"{url}/api/v0/nodes?limit=100&detail=1", token)
    return [n for n in data["data"]["result"]["result"] if n.get("state") == "ALIVE"]


def _wait_up(proc: subprocess.Popen, log: Path, ready, deadline: float) -> bool:
    """Until `ray start` reports the node up and `ready()` holds (the dashboard serves before the
    raylet has registered, and `ray start` tears everything down if that takes over 30 s, which a
    loaded 2-core machine can miss); False if it gave up."""
    while time.monotonic() < deadline and proc.poll() is None:
        if NODE_STARTED in log.read_text(errors="replace"):
            try:
                if ready():
                    return True
            except (OSError, ValueError):  # refused, reset, an HTTP error or half an answer while modules start
                pass
        time.sleep(1)
    return False


@dataclass
class Cluster:
    url: str  # the dashboard / Jobs API
    gcs: str  # HOST:PORT for `ray start --address` and drivers
    token: str
    env: dict[str, str]  # what a client process needs: the cluster's token, no other cluster
    node_env: dict[str, str]  # what the nodes run with
    temp_dir: str
    procs: list[subprocess.Popen] = field(default_factory=list)
    logs: list[Path] = field(default_factory=list)

    def explain(self, output: str) -> str:
        """A failed submission's output tail with the nodes' logs, for an assertion message."""
        tails = "".join(f"\n--- {log.name} ---\n{log.read_text(errors='replace')[-2000:]}" for log in self.logs)
        return f"{output[-4000:]}{tails}"

    def add_worker(self, num_cpus: int, resources: dict[str, float] | None = None) -> None:
        """Join a worker node (`ray start --address`) and wait until the head lists it."""
        before = len(alive_nodes(self.url, self.token))
        for attempt in range(START_ATTEMPTS):
            log = Path(self.temp_dir) / f"worker{len(self.procs)}-{attempt}.log"
            cmd = [ray_executable(), "start", "--block", f"--address={self.gcs}",
                   "--node-ip-address=127.0.0.1", f"--num-cpus={num_cpus}", *_resources(resources),
                   f"--object-store-memory={OBJECT_STORE_BYTES}", *_node_ports(),
                   f"--temp-dir={self.temp_dir}"]
            proc = _launch(cmd, log, self.node_env)
            up = _wait_up(proc, log, lambda: len(alive_nodes(self.url, self.token)) > before,
                          time.monotonic() + START_TIMEOUT_S)
            self.procs.append(proc)
            self.logs.append(log)
            if up:
                return
            stop_processes([proc], None)  # only this node's tree: the head shares the temp dir
        raise RuntimeError(f"no worker node after {START_ATTEMPTS} tries:\n{log.read_text()[-3000:]}")


def _launch(cmd: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen:
    with open(log, "wb") as log_file:
        return subprocess.Popen(cmd, stdout=log_file, stderr=subprocess.STDOUT, env=env, start_new_session=True)


def _start_head(temp_dir: str, env: dict[str, str], token: str, num_cpus: int,
                resources: dict[str, float] | None) -> tuple[subprocess.Popen, Path, str, str]:
    for attempt in range(START_ATTEMPTS):
        log = Path(temp_dir) / f"head-{attempt}.log"
        dash_port, gcs_port, client_port = free_port(), free_port(), free_port()
        cmd = [ray_executable(), "start", "--head", "--block",
               f"--port={gcs_port}",
               "--node-ip-address=127.0.0.1",
               f"--dashboard-port={dash_port}",
               "--dashboard-host=127.0.0.1",
               "--include-dashboard=true",
               f"--ray-client-server-port={client_port}",
               *_node_ports((dash_port, gcs_port, client_port)),
               f"--num-cpus={num_cpus}", *_resources(resources),
               f"--object-store-memory={OBJECT_STORE_BYTES}",
               "--disable-usage-stats",
               f"--temp-dir={temp_dir}"]
        url = f"http://127.0.0.1:{dash_port}"
        head = _launch(cmd, log, env)
        if _wait_up(head, log, lambda: isinstance(api_get(f"{url}/api/jobs/", token), list),
                    time.monotonic() + START_TIMEOUT_S):
            return head, log, url, f"127.0.0.1:{gcs_port}"
        stop_processes([head], temp_dir)
    raise RuntimeError(f"no ray head after {START_ATTEMPTS} tries:\n{log.read_text()[-3000:]}")


@contextlib.contextmanager
def local_cluster(num_cpus: int = 2, resources: dict[str, float] | None = None,
                  env: dict[str, str] | None = None) -> Iterator[Cluster]:
    """A private local Ray head with token auth from its own token file (as Ray 2.60 sets up a head
    wherever a token exists); add nodes with `Cluster.add_worker`; all torn down on exit.

    `env` replaces `clean_env()` as the nodes' environment (the token path is added to it)."""
    temp_dir = tempfile.mkdtemp(prefix="rps", dir="/tmp")  # short: Unix socket paths are capped
    token = secrets.token_hex(32)
    token_path = Path(temp_dir) / "auth_token"
    token_path.write_text(token)
    node_env = (env if env is not None else clean_env()) | {"RAY_AUTH_TOKEN_PATH": str(token_path),
                                                            "RAY_AUTH_MODE": "token"}  # a joining node must say so
    client_env = clean_env(RAY_AUTH_TOKEN_PATH=str(token_path))
    cluster = None
    try:
        head, log, url, gcs = _start_head(temp_dir, node_env, token, num_cpus, resources)
        cluster = Cluster(url, gcs, token, client_env, node_env, temp_dir, [head], [log])
        yield cluster
    finally:
        if cluster is not None:
            stop_processes(cluster.procs, temp_dir)
        shutil.rmtree(temp_dir, ignore_errors=True)
