"""`raypress server` with no cluster: its own embedded Ray, with a Jobs API that takes runs.

This is where ray_compat's assumptions 13 (``loopback_for_child_processes``) and 14
(``free_dashboard_agent_port``) show: without the first, the job agent of a loopback Ray connected
to the machine's outward IP and every job timed out after 300 s; without the second, an agent whose
fixed port (52365) was taken ran without its HTTP server and every job got "No available agent".
The test holds that port itself to prove the second.  Assumption 15 (``publish_cluster_address``)
shows when another Ray runs on the machine (the suite's own, a helper's): without it the jobs'
drivers resolved ``auto`` to another cluster's GCS and hung.  Assumption 12 (``dashboard_address``) is how
the server found the Jobs API it prints.
"""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import sys
import tempfile
import time

import httpx
import pytest
from pipelines_server import SMALL_PIPELINE, TOKEN, wait_for_state, write_small_inputs
from ray_cluster import clean_env, free_port

pytestmark = [pytest.mark.integration, pytest.mark.timeout(400)]
RAY_DEFAULT_AGENT_PORT = 52365


@contextlib.contextmanager
def holding_port(port: int):
    """Hold ``port`` on loopback (if it is free) for the block."""
    sock = socket.socket()
    with contextlib.suppress(OSError):  # someone else holds it already: the same situation
        sock.bind(("127.0.0.1", port))
        sock.listen()
    try:
        yield
    finally:
        sock.close()


def test_free_dashboard_agent_port__loopback_for_child_processes__publish_cluster_address(tmp_path):
    """An embedded server runs a job, with the agent's usual port taken and its own temp dir."""
    work = tmp_path / "work"
    write_small_inputs(work)
    port = free_port()
    ray_tmp = tempfile.TemporaryDirectory(prefix="rp-", dir="/tmp")  # Ray's socket paths must stay short
    env = clean_env(RAYPRESS_SERVER_TOKEN=TOKEN, RAY_TMPDIR=ray_tmp.name)
    log = tmp_path / "server.log"
    with ray_tmp, holding_port(RAY_DEFAULT_AGENT_PORT), open(log, "wb") as out:
        server = subprocess.Popen([sys.executable, "-m", "raypress.cli", "server", "--port", str(port),
                                   "--runs-root", str(tmp_path / "runs"), "--token-env", "RAYPRESS_SERVER_TOKEN"],
                                  cwd=work, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 180
            while time.monotonic() < deadline:
                assert server.poll() is None, log.read_text(errors="replace")[-3000:]
                if "pipelines server at" in log.read_text(errors="replace"):
                    break
                time.sleep(0.5)
            assert "jobs via http://127.0.0.1:" in log.read_text(errors="replace")
            assert httpx.get(f"{url}/health", timeout=5).status_code == 200
            with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60) as api:
                run_id = api.post("/v1/runs", json={"yaml": SMALL_PIPELINE}).json()["id"]
                run = wait_for_state(api, run_id, ("succeeded", "failed", "crashed", "cancelled"), timeout_s=150)
            assert run["state"] == "succeeded", (run, log.read_text(errors="replace")[-3000:])
        finally:
            server.send_signal(signal.SIGINT)
            try:
                server.wait(timeout=60)
            except subprocess.TimeoutExpired:
                server.kill()
