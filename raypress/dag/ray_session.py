"""Start (or join) Ray once per process: embedded by default, a cluster when an address is given.

The embedded Ray listens on loopback only (its GCS, raylet, object manager, workers' gRPC servers,
dashboard and runtime-env agents): on a shared or public machine nobody else can reach the
cluster and run code in it. ``--ray-host`` / ``RAYPRESS_RAY_HOST`` names another interface for a
node that other machines must reach (``0.0.0.0``: Ray's own default, every interface).  Serve's
HAProxy ingress (``RAY_SERVE_ENABLE_HA_PROXY=1``) stays on loopback too (``haproxy_loopback``).
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import os
from typing import Any

from raypress.dag import ray_logs
from raypress.dag.cancel import received as cancel_received
from raypress.dag.haproxy_loopback import keep_on_loopback, short_drain_when_embedded
from raypress.dag.ray_compat import (
    free_dashboard_agent_port,
    loopback_for_child_processes,
    loopback_node_ip,
    publish_cluster_address,
)

HOST_ENV = "RAYPRESS_RAY_HOST"
LOOPBACK = "127.0.0.1"
EVERY_INTERFACE = frozenset({"0.0.0.0", "::", "*", "all"})


def ray_host(host: str | None = None) -> str:
    """The interface the embedded Ray binds: ``host``, else ``$RAYPRESS_RAY_HOST``, else loopback."""
    return host or os.environ.get(HOST_ENV) or LOOPBACK


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reachable from this machine only (``localhost``, 127.0.0.0/8, ``::1``);
    a host name other than ``localhost`` may resolve to anything, so it is not."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _address_is_loopback(address: str) -> bool:
    """Whether a ``host:port`` cluster address names this machine's loopback (not ``auto``, not ``ray://``)."""
    if "://" in address or ":" not in address:
        return False
    host = address.rsplit(":", 1)[0]
    return host == "localhost" or is_loopback(host)


_WARMING: list[Any] = []  # the warm-up tasks' refs: kept, never waited for


def _import_task_modules() -> int:
    """What every raypress task imports first (Arrow, Ray Data's map task, the op runners and sink)."""
    import pyarrow  # noqa: F401
    import ray.data  # noqa: F401

    import raypress.dag.batch_exec  # noqa: F401
    import raypress.dag.sink  # noqa: F401
    import raypress.dag.worker_ops  # noqa: F401

    return os.getpid()


def _warm_workers() -> None:
    """Start a task worker per CPU now, in the background, while the driver reads and plans.

    Why: Ray prestarts a worker per CPU, but the first actors take them (the run's op timer, Ray
    Data's stats and autoscaling actors), so a run's first tasks waited for new worker processes to
    spawn and import Arrow and raypress: ``ray.timeline()`` of the MINT-1T bench showed both WARC
    reads on one worker, one after the other, and the second CPU idle for the run's first ~4 s."""
    import ray

    cpus = int(ray.cluster_resources().get("CPU", 0))
    warm = ray.remote(num_cpus=1)(_import_task_modules)
    _WARMING[:] = [warm.remote() for _ in range(cpus)]


def _start_embedded(host: str, num_cpus: int | None, kwargs: dict[str, Any], dashboard: bool = False) -> None:
    """``ray.init`` for a new local node bound to ``host``; ``dashboard``: with the dashboard (the
    Jobs API a pipelines server submits runs through), on ``host`` too."""
    import ray

    # No worker prestarted for a task backlog: a reader's segment keeps one task queued behind the
    # running ones (files.np_tasks_submitted), and the raylet started a worker for it that then took
    # turns with the others, each loading the ops (a 250 MB text recipe: 12 -> 17 s).  Workers still
    # start when a task needs one, and _warm_workers starts one per CPU at once.
    kwargs = {**kwargs, "_system_config": {"enable_worker_prestart": False}, "include_dashboard": dashboard}
    if dashboard:
        kwargs["dashboard_host"] = "0.0.0.0" if host in EVERY_INTERFACE else host
    if host in EVERY_INTERFACE:
        with free_dashboard_agent_port() if dashboard else contextlib.nullcontext():
            ray.init(num_cpus=num_cpus, **kwargs)
        if dashboard:
            publish_cluster_address()
        return
    if dashboard and is_loopback(host):  # its job agent and the jobs' drivers connect from processes of their own
        loopback_for_child_processes()
    guard = loopback_node_ip() if is_loopback(host) else contextlib.nullcontext()
    agent = free_dashboard_agent_port() if dashboard else contextlib.nullcontext()
    with guard, agent:
        ray.init(num_cpus=num_cpus, _node_ip_address=host, **kwargs)
    if dashboard:  # the Jobs API's drivers join "auto": this cluster, not another Ray on the machine
        publish_cluster_address()


def ray_is_up() -> bool:
    """Whether this process has started or joined Ray already."""
    import ray

    return ray.is_initialized()


def ensure_ray(address: str | None = None, num_cpus: int | None = None, host: str | None = None,
               dashboard: bool = False) -> None:
    """Connect to ``address`` / ``RAY_ADDRESS`` if given, else start an embedded, quiet Ray bound to
    ``ray_host(host)`` (loopback unless told otherwise), with its dashboard when ``dashboard``."""
    import ray

    if ray.is_initialized():
        return
    os.environ.setdefault("RAY_DEDUP_LOGS", "1")
    os.environ.setdefault("RAY_TRAIN_V2_ENABLED", "1")
    # Ray Train's controller polls its workers every 2 s by default, so every training stage waited up to
    # 2 s at each state change (start, finish); 0.5 s took 4-5 s off a run here.
    os.environ.setdefault("RAY_TRAIN_HEALTH_CHECK_INTERVAL_S", "0.5")
    address = address or os.environ.get("RAY_ADDRESS") or None
    ray_logs.reroute()  # a run whose terminal is not Ray's: its warnings while it starts go to the file too
    kwargs: dict = dict(
        logging_level=logging.WARNING,
        log_to_driver=True,
        configure_logging=True,
        ignore_reinit_error=True,
    )
    if address:
        # a loopback address (a local cluster, or the session's own Ray joined by a `raypress serve`):
        # keep 127.0.0.1, which Ray would otherwise swap for the outward IP, where nothing listens
        from raypress.dag.cluster_auth import check_cluster_token

        check_cluster_token(address)
        guard = loopback_node_ip() if _address_is_loopback(address) else contextlib.nullcontext()
        with guard:
            ray.init(address=address, **kwargs)
    else:
        if is_loopback(ray_host(host)):  # Serve's HAProxy ingress, if asked for, stays on loopback too
            keep_on_loopback()
        short_drain_when_embedded()
        # A loaded 2-core machine sometimes misses Ray's fixed start-up deadlines: try again.
        for attempt in range(3):
            try:
                _start_embedded(ray_host(host), num_cpus, kwargs, dashboard)
                break
            except Exception:  # noqa: BLE001 - "node timed out during startup" and kin
                ray.shutdown()
                if attempt == 2 or cancel_received() is not None:  # a cancel raised inside Ray's C code
                    raise  # surfaces as a SystemError: not a start-up failure to retry
        _warm_workers()
    import ray.data

    ray_logs.reroute()  # Ray Data's logger, configured when ray.data is first imported
    ctx = ray.data.DataContext.get_current()
    # raypress draws its own progress; Ray Data's bars are log lines when not on a terminal, and they
    # would go to the run's ray.log with the rest
    ctx.enable_progress_bars = os.environ.get("RAYPRESS_PROGRESS", "1") == "1" and ray_logs.routed() is None
    ctx.print_on_execution_start = False
