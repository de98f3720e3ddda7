"""A real `raypress server` on a private local Ray cluster, for the API, browser and bench tests.

The cluster is a `ray start --head` process of its own (tests/ray_cluster.py: free ports, its own
temp dir and token), so the server's Serve app and its runs never meet the in-process Ray of the
`ray_session` fixture; the server is a subprocess attached to it with `--address`, so it can be
stopped and started again (restart recovery) while the cluster and its jobs go on.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from ray_cluster import Cluster, clean_env, free_port, local_cluster

REPO = Path(__file__).resolve().parents[1]
START_TIMEOUT_S = 180
TOKEN = "test-token-0123456789"

# Four rows, one filter that drops two with a reason, a writer: done in seconds on a cluster.
SMALL_PIPELINE = """\
name: api-small
settings: {keep_rejects: true}
nodes:
  - id: docs
    op: read_jsonl
    with: {paths: ["docs.jsonl"]}
  - id: long_enough
    op: words_num_filter
    input: docs
    with: {min_num: 3}
  - id: out
    op: write_jsonl
    input: long_enough
    with: {path: "{run_dir}/out"}
"""
SMALL_ROWS = ["hello", "hello world", "a quick brown fox", "the lazy dog sleeps all day"]


@dataclass
class Server:
    cluster: Cluster
    runs_root: Path
    base_dir: Path
    log: Path
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def client(self, token: str | None = TOKEN, timeout: float = 60.0) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=timeout)

    def start(self) -> None:
        env = self.cluster.env | {"RAYPRESS_SERVER_TOKEN": TOKEN}
        cmd = [sys.executable, "-m", "raypress.cli", "server", "--address", self.cluster.gcs,
               "--port", str(self.port), "--runs-root", str(self.runs_root), "--token-env", "RAYPRESS_SERVER_TOKEN",
               "--cancel-grace", "20"]
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(cmd, cwd=self.base_dir, env=env, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"raypress server exited {self.proc.returncode}:\n{self.tail()}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}/health", timeout=2).status_code == 200:
                    return
            time.sleep(0.5)
        raise RuntimeError(f"raypress server not up after {START_TIMEOUT_S} s:\n{self.tail()}")

    def stop(self) -> None:
        """Stop the server as Ctrl-C does (its app is deleted; the cluster and its jobs stay)."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def tail(self, n: int = 4000) -> str:
        try:
            return self.log.read_text(errors="replace")[-n:]
        except OSError:
            return ""


def write_small_inputs(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "docs.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in SMALL_ROWS))


def write_slow_inputs(folder: Path, rows: int = 150_000) -> str:
    """A pipeline that runs long enough to cancel (a minute and more on 2 cores): many distinct
    documents through a filter and MinHash near-dedup; its input file written into ``folder``."""
    rng = random.Random(0)  # distinct documents (random 60-word draws): the dedup keeps nearly all
    words = [f"w{i}" for i in range(5000)]
    with open(folder / "slow.jsonl", "w") as fh:
        for i in range(rows):
            fh.write(json.dumps({"id": f"doc-{i}", "text": " ".join(rng.choices(words, k=60))}) + "\n")
    return SLOW_PIPELINE


SLOW_PIPELINE = """\
name: api-slow
nodes:
  - id: docs
    op: read_jsonl
    with: {paths: ["slow.jsonl"]}
  - id: long_enough
    op: words_num_filter
    input: docs
    with: {min_num: 10}
  - id: dedup
    op: document_minhash_deduplicator
    input: long_enough
  - id: out
    op: write_jsonl
    input: dedup
    with: {path: "{run_dir}/out"}
"""


@contextlib.contextmanager
def running_server(tmp: Path, node_env: dict[str, str] | None = None) -> Iterator[Server]:
    """A cluster and a server on it, with the small inputs in the server's working directory;
    ``node_env``: more environment for the cluster's nodes (e.g. Serve's HAProxy ingress)."""
    base = tmp / "work"
    write_small_inputs(base)
    with local_cluster(num_cpus=2, env=clean_env() | node_env if node_env else None) as cluster:
        server = Server(cluster, runs_root=tmp / "runs", base_dir=base, log=tmp / "server.log")
        server.start()
        try:
            yield server
        finally:
            server.stop()


def wait_for_state(client: httpx.Client, run_id: str, states: tuple[str, ...], timeout_s: float = 300) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        run = client.get(f"/v1/runs/{run_id}").json()
        if run["state"] in states:
            return run
        time.sleep(0.5)
    raise AssertionError(f"run {run_id} not in {states} after {timeout_s} s: {run}")
