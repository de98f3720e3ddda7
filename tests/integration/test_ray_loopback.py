"""The embedded Ray that `raypress run` / `raypress serve` start listens on loopback only.

Started in a subprocess (not in the pytest process, which shares one Ray session with the other
tests), with a task, an actor and a Serve app, so the GCS, raylet, object manager, agents, workers,
the Serve controller, proxy and a replica all run; then every listening TCP socket of that
process tree is read with psutil.

The one exception, named: a Serve replica's inter-deployment gRPC server. Ray Serve 2.60 binds it
to the literal ``"[::]:0"`` (``ray/serve/_private/replica.py``, ``Replica._on_initialized``:
``add_port_to_grpc_server(self._server, "[::]:0")``), with no option or variable to change it; it
is a token-authenticated server (``create_grpc_server_with_interceptors``), like every Ray gRPC
server in 2.60, but it listens on every interface.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from ipaddress import ip_address

import pytest

from raypress.dag.haproxy_loopback import BINARY_ENV, HA_PROXY_ENV, haproxy_binary

psutil = pytest.importorskip("psutil")

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]
SERVE_REPLICA = "ray::ServeReplica"  # the named exception above

CHILD = textwrap.dedent("""
    import json, sys, time
    import psutil
    import ray
    from ray import serve
    from raypress.dag.ray_session import ensure_ray

    ensure_ray(num_cpus=2)

    @ray.remote
    def node_ip():
        return ray.util.get_node_ip_address()

    @ray.remote
    class Pinger:
        def ping(self):
            return "pong"

    pinger = Pinger.remote()
    assert ray.get(pinger.ping.remote()) == "pong"
    ip = ray.get(node_ip.remote())
    serve.start(http_options={"host": "127.0.0.1", "port": int(sys.argv[1])})

    @serve.deployment
    def hello(request):
        return "hi"

    serve.run(hello.bind(), blocking=False)
    time.sleep(2)  # agents open their last ports after start-up
    import httpx
    answer = None
    for _ in range(100):  # through the ingress (Serve's proxy, or HAProxy), once it routes
        try:
            answer = httpx.get(f"http://127.0.0.1:{sys.argv[1]}/", timeout=5).text
        except httpx.HTTPError as exc:  # not listening yet: what it said is the answer if it never does
            answer = f"{type(exc).__name__}: {exc}"
        if answer == "hi":
            break
        time.sleep(0.2)
    me = psutil.Process()
    sockets = []
    for proc in [me, *me.children(recursive=True)]:
        try:
            name = proc.name()
            for conn in proc.net_connections(kind="tcp"):
                if conn.status == psutil.CONN_LISTEN:
                    sockets.append({"pid": proc.pid, "name": name, "ip": conn.laddr.ip, "port": conn.laddr.port})
        except psutil.Error:
            pass
    print("RESULT " + json.dumps({"node_ip": ip, "gcs": ray.get_runtime_context().gcs_address,
                                  "sockets": sockets, "answer": answer}))
    serve.shutdown()
    ray.shutdown()
""")


def _loopback(ip: str) -> bool:
    address = ip_address(ip.split("%")[0])
    mapped = getattr(address, "ipv4_mapped", None)  # ::ffff:127.0.0.1 (a dual-stack socket)
    return (mapped or address).is_loopback


def _run_child(env: dict[str, str]) -> dict:
    from raypress.serving.uvicorn_thread import free_port

    done = subprocess.run([sys.executable, "-c", CHILD, str(free_port())], env=env, capture_output=True,
                          text=True, timeout=200)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, done.stderr[-3000:]
    return json.loads(lines[-1][len("RESULT "):])


def test_embedded_ray_listens_on_loopback_only():
    env = {k: v for k, v in os.environ.items() if k not in {"RAY_ADDRESS", "RAYPRESS_RAY_HOST"}}
    result = _run_child(env)
    sockets = result["sockets"]
    names = {s["name"] for s in sockets}
    assert {"gcs_server", "raylet"} <= names and any(n.startswith("ray::") for n in names), names
    assert result["node_ip"] == "127.0.0.1" and result["gcs"].startswith("127.0.0.1:")
    exposed = [s for s in sockets if not _loopback(s["ip"]) and not s["name"].startswith(SERVE_REPLICA)]
    assert not exposed, f"listening beyond loopback: {exposed}"
    replica_wildcards = [s for s in sockets if s["name"].startswith(SERVE_REPLICA) and not _loopback(s["ip"])]
    assert len(replica_wildcards) <= 1  # only the inter-deployment gRPC port; its actor gRPC is loopback



@pytest.mark.skipif(not haproxy_binary(), reason="needs haproxy (Debian: apt-get install haproxy)")
def test_serves_haproxy_ingress_stays_on_loopback_too():
    """Issue 31: Serve's HAProxy ingress (``RAY_SERVE_ENABLE_HA_PROXY=1``) takes Serve's Python proxy
    off the token path, but Ray's HAProxy config binds its Prometheus exporter (:9101) and stats page
    (:8404) on every interface; the embedded Ray runs haproxy through a wrapper that keeps them on
    127.0.0.1, and requests still go through."""
    env = {k: v for k, v in os.environ.items() if k not in {"RAY_ADDRESS", "RAYPRESS_RAY_HOST", BINARY_ENV}}
    result = _run_child({**env, HA_PROXY_ENV: "1"})
    sockets = result["sockets"]
    assert result["answer"] == "hi"
    haproxy = [s for s in sockets if s["name"] == "haproxy"]
    assert len(haproxy) >= 3, sockets  # the frontend, the exporter and the stats page
    exposed = [s for s in sockets if not _loopback(s["ip"]) and not s["name"].startswith(SERVE_REPLICA)]
    assert not exposed, f"listening beyond loopback: {exposed}"
