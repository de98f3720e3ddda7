"""Every place raypress leans on a private Ray module or on a Ray behaviour it does not promise.

Why one room: a Ray upgrade that moves or changes one of these would otherwise change timings,
order or security silently, somewhere in the code.  Each function here names what it depends on,
and ``tests/unit/test_ray_compat.py`` / ``tests/integration/test_ray_compat_on_ray.py`` (for 16 and 17,
``tests/unit/test_ray_compat_terminal.py``; 6's ``iter_batches`` order, in
``tests/integration/test_quiet_terminal.py``) have one test per assumption that fails by its name when
an upgrade breaks it.  Nothing outside this module imports
``ray._private``, ``ray.serve._private`` or ``ray.data._internal``.

The assumptions (Ray 2.60):
1. ``FUSED_TASK_NAME``: a Ray Data task that runs a ``map_batches(SegmentSink)`` carries
   ``MapBatches(SegmentSink)`` in its ``TaskContext.op_name`` (the fused chain's name), which tells a
   streaming op that its times can wait for the sink (``op_timing``).
2. ``loopback_node_ip``: ``ray_constants.ENABLE_RAY_CLUSTER`` off makes ``ray.init`` keep a loopback
   ``_node_ip_address`` (read when the node starts) instead of the machine's outward IP.
3. ``enable_token_auth_if_available``: Ray's own reader of a local auth token (``RAY_AUTH_TOKEN``,
   ``~/.ray/auth_token``), which the Jobs client needs and does not call itself.
4. ``serve_start``: ``ray.serve._private.api.serve_start`` starts Serve with a config's HTTP and gRPC
   options and returns a client with ``deploy_apps`` (what ``serve deploy`` does, in process).
5. ``worker processes are reused``: a Ray worker process runs many tasks of a job, one after another,
   so a module-level cache (``worker_ops``) keeps a loaded op for the next task.
7. ``start_every_core_at_once``: Ray Data's ``ResourceBudgetBackpressurePolicy`` (the per-operator
   resource reservation) admits one task of a fused chain until the first one finishes: four
   one-second tasks took 3.2 s on 2 CPUs with it, 2.1 s without.  The other policies (concurrency
   cap from the output queue, downstream capacity) are kept; the list is set through
   ``DataContext.set_config`` with Ray's own key.
8. ``node_raylet_pid``: a Ray worker process (a task's or an actor's) is a child of its node's raylet,
   so the raylet's process tree is that node's Ray work (``cpu_meter``).
9. ``notice_finished_tasks_sooner``: Ray Data's scheduling loop blocks in ``ray.wait`` on *every*
   running task's output (``num_returns`` = all of them) for up to
   ``streaming_executor_state.WAIT_FOR_TASK_COMPLETION_TIMEOUT_S`` (0.1 s), a module global read at
   each call; a task's output and its end are usually seen one such wait apart, so each task held
   its slot ~0.2 s after it finished.  Tasks as short as a JSON Lines span's (0.16 s) then kept half
   the CPUs busy: 50% at 0.1 s, 78% at 0.02 s (``python bench/task_dispatch.py``), for about the same
   driver CPU.
10. ``gcs_refuses_token``: a GCS answers ``NodeInfoGcsService/GetClusterId`` over a channel from
   ``ray._private.grpc_utils.init_grpc_channel`` (which adds this process's token, if any) with gRPC
   status UNAUTHENTICATED when token auth is on and the token is missing or wrong; ``ray.init``
   instead retried for ~20 s, printing a C++ warning a second, and raised a bare ``ConnectionError``.
6. ``keep_rows_in_order``: with ``preserve_order``, ``iter_batches(batch_size=None)`` yields a segment's
   per-block tallies in block order however the blocks finish, each block as soon as it and those
   before it are done (``take_all`` is ``iter_rows`` over the same iterator); ``sink.number_parts``
   numbers the parts by that order and ``segment_progress`` counts them as they come.
11. ``dead_ray_processes``: ``ray._private.worker._global_node`` is the node this driver started (none of
   its own when it joined a cluster), and its ``dead_processes()`` lists those of its processes that
   have exited and were not ended by Ray itself, as (process type, ``subprocess.Popen``) pairs; its
   ``all_processes`` is empty when it started none, and ``get_session_dir_path()`` is the session's
   folder, which every process of that session names in its command line.
13. ``loopback_for_child_processes``: ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` in the environment makes
   every Ray process that starts later (the dashboard agent's job manager, a job's driver connecting
   with ``address="auto"``) take ``ray_constants.ENABLE_RAY_CLUSTER`` off at import, so it, too, keeps
   a loopback GCS address instead of swapping it for the machine's outward IP, where nothing listens.
14. ``free_dashboard_agent_port``: ``ray.init`` gives the dashboard agent Ray's fixed default port
   (52365, ``RayParams.dashboard_agent_listen_port``) and offers no argument to change it; an agent
   that finds it taken (a second Ray on the machine, or one just ended) keeps running without its
   HTTP server, so the Jobs API answers "No available agent" for every job.  The node reads the
   port from its ``RayParams``, set here to a free one.
15. ``publish_cluster_address``: a job's driver started by the Jobs API finds its cluster through
   ``address="auto"``, which the job supervisor resolves from the node's temp dir's
   ``ray_current_cluster`` file (``ray._private.utils.write_ray_address``; written by ``ray start``,
   not by ``ray.init``) and, when that is missing, by picking any GCS process on the machine: with
   another Ray running there, an embedded server's jobs joined the wrong cluster and hung.
12. ``dashboard_address``: the head's dashboard (Jobs API) publishes its ``host:port`` in the GCS's
   internal KV under ``ray_constants.DASHBOARD_ADDRESS`` in the dashboard namespace, readable from any
   process connected to the cluster (a Serve replica included): what Ray's own Jobs client reads for
   ``address="auto"``.
16. ``move_ray_log_handlers``: Ray's Python logs reach the terminal through stream handlers on loggers
   named ``ray`` or ``ray.*`` with ``propagate`` off: ``ray`` (a ``PlainRayHandler`` to stderr, added at
   ``import ray`` by ``ray._private.log.generate_logging_config``; ``ray.init(configure_logging=True)``
   only sets its handlers' format and the logger's level), ``ray.data`` (a "console" handler next to a
   session-file handler, from ``ray.data._internal.logging.configure_logging`` at ``import ray.data``)
   and ``ray.serve``; every other Ray logger propagates to one of them.  The token-auth warning a new
   local cluster prints ("Token authentication is enabled for this Ray cluster") is logged inside
   ``ray.init`` by ``ray._private.authentication.authentication_token_setup``, which propagates to
   ``ray``.  Swapping those stream handlers for one on a file moves all of it there.
17. ``ray_init_keeps_signal_handlers``: ``ray.init`` and the node it starts install their SIGTERM
   handlers through the module attribute ``ray._private.utils.set_sigterm_handler`` (one raises
   ``SystemExit(15)``, the node's kills its processes and raises ``SystemExit(1)``); with that attribute
   a no-op during ``ray.init`` the caller's handlers stay, so a signal during Ray's start-up cancels
   the run (``cancel``) instead of failing it as ``SystemExit: 15`` with no message.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

SINK_CLASS_NAME = "SegmentSink"
FUSED_TASK_NAME = f"MapBatches({SINK_CLASS_NAME})"


def current_task_name() -> str:
    """The Ray Data operator name of the task running here ('' outside a Ray Data task)."""
    try:
        from ray.data._internal.execution.interfaces.task_context import TaskContext
    except ImportError:  # Ray moved it: callers fall back to reporting every batch
        return ""
    ctx = TaskContext.get_current()
    return (getattr(ctx, "op_name", None) or "") if ctx is not None else ""


def runs_fused_with_sink() -> bool:
    """Whether this task is a Ray Data task fused with the segment's sink (assumption 1)."""
    return FUSED_TASK_NAME in current_task_name()


@contextlib.contextmanager
def loopback_node_ip() -> Iterator[None]:
    """Let Ray keep a loopback node IP while it starts (assumption 2).

    Why: Ray 2.60 swaps a loopback ``_node_ip_address`` for the machine's outward IP
    (``services.resolve_ip_for_localhost``) unless ``ray_constants.ENABLE_RAY_CLUSTER`` is off —
    its "local Ray" mode on Windows/macOS, in which the node IP is 127.0.0.1 and every gRPC server
    (bound to the node IP) listens on loopback. The constant is read when the node starts (the
    raylet, GCS and agents get ``--node-ip-address``), so it is switched off for ``ray.init`` only.
    """
    from ray._private import ray_constants

    saved = ray_constants.ENABLE_RAY_CLUSTER
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = saved


def enable_token_auth_if_available() -> bool:
    """Turn on Ray's token auth when a token is at hand, as `ray start` and `ray.init` do (assumption 3);
    whether it did."""
    from ray._private.authentication.authentication_token_setup import (
        maybe_enable_token_auth_if_token_available,
    )

    return maybe_enable_token_auth_if_token_available(warn_if_disabled=False)


def gcs_refuses_token(address: str, timeout_s: float = 5.0) -> bool:
    """Whether the GCS at ``host:port`` turns this process's Ray token down (assumption 10): one
    call, ``timeout_s`` at most; any other failure (unreachable, not a GCS) is False, for
    ``ray.init`` to report as it does."""
    import grpc
    from ray._private.grpc_utils import init_grpc_channel
    from ray.core.generated import gcs_service_pb2, gcs_service_pb2_grpc

    channel = init_grpc_channel(address)
    try:
        gcs_service_pb2_grpc.NodeInfoGcsServiceStub(channel).GetClusterId(
            gcs_service_pb2.GetClusterIdRequest(), timeout=timeout_s)
    except grpc.RpcError as exc:
        return exc.code() == grpc.StatusCode.UNAUTHENTICATED
    finally:
        channel.close()
    return False


def serve_start(**options: Any) -> Any:
    """Start Ray Serve with a config's options and return its client (assumption 4)."""
    from ray.serve._private import api as serve_api

    return serve_api.serve_start(**options)


def keep_rows_in_order() -> None:
    """Blocks of a segment run in parallel, but their results come back in input order, each as soon
    as it and those before it are done (assumption 6)."""
    import ray.data

    ray.data.DataContext.get_current().execution_options.preserve_order = True


def start_every_core_at_once() -> None:
    """Run Ray Data without its resource-budget backpressure policy, keeping the others (assumption 7)."""
    import ray.data
    from ray.data._internal.execution import backpressure_policy as policies

    kept = [p for p in policies.ENABLED_BACKPRESSURE_POLICIES
            if p.__name__ != "ResourceBudgetBackpressurePolicy"]
    ray.data.DataContext.get_current().set_config(policies.ENABLED_BACKPRESSURE_POLICIES_CONFIG_KEY, kept)


TASK_WAIT_S = 0.02  # Ray Data's default is 0.1 s


def notice_finished_tasks_sooner(seconds: float = TASK_WAIT_S) -> None:
    """Shorten Ray Data's scheduling loop's wait for its running tasks (assumption 9): a finished task's
    CPU goes to the next task within ``seconds`` rather than 0.1-0.2 s later."""
    from ray.data._internal.execution import streaming_executor_state as state

    state.WAIT_FOR_TASK_COMPLETION_TIMEOUT_S = seconds


def node_raylet_pid() -> int:
    """The pid of this worker's node's raylet: its parent process (assumption 8)."""
    import os

    return os.getppid()


def _own_node():
    """The Ray node this driver started, or None (no Ray, or it joined a cluster and started none)."""
    try:
        from ray._private import worker
    except ImportError:
        return None
    node = getattr(worker, "_global_node", None)
    return node if node is not None and node.all_processes else None


def dead_ray_processes() -> list[tuple[str, int]]:
    """(process type, pid) of this driver's own Ray processes (raylet, gcs_server, ...) that died
    under the run (assumption 11); none where it started none (it joined a cluster)."""
    node = _own_node()
    return [(kind, process.pid) for kind, process in node.dead_processes()] if node is not None else []


def own_raylet_pid() -> int | None:
    """The pid of the raylet of the Ray node this driver started (assumption 11), which is this
    process's child; None when it started none (it joined a cluster) or the raylet is gone."""
    from ray._private import ray_constants

    node = _own_node()
    processes = node.all_processes.get(ray_constants.PROCESS_TYPE_RAYLET) if node is not None else None
    if not processes or processes[0].process.poll() is not None:
        return None
    return processes[0].process.pid


def own_session_dir() -> str | None:
    """The session folder of the Ray node this driver started (assumption 11); None when it started
    none (it joined a cluster, whose processes are not the run's to end)."""
    node = _own_node()
    return node.get_session_dir_path() if node is not None else None


def loopback_for_child_processes() -> None:
    """Make the Ray processes this one starts keep loopback addresses too (assumption 13): without
    it a loopback Ray's Jobs API accepted a job and timed out after 300 s, its agent connecting to
    the outward IP."""
    import os

    from ray._private import ray_constants

    os.environ[ray_constants.ENABLE_RAY_CLUSTERS_ENV_VAR] = "0"


@contextlib.contextmanager
def free_dashboard_agent_port() -> Iterator[int]:
    """While ``ray.init`` starts a node in this block, its dashboard agent listens on a free port
    (assumption 14), which is yielded."""
    import socket

    from ray._private import parameter, ray_constants

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    original = parameter.RayParams.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        if self.dashboard_agent_listen_port == ray_constants.DEFAULT_DASHBOARD_AGENT_LISTEN_PORT:
            self.dashboard_agent_listen_port = port

    parameter.RayParams.__init__ = init  # type: ignore[method-assign]
    try:
        yield port
    finally:
        parameter.RayParams.__init__ = original  # type: ignore[method-assign]


def publish_cluster_address() -> None:
    """Name this driver's own embedded cluster as the node's current one, as ``ray start --head``
    does, so that ``address="auto"`` in the jobs it runs finds it (assumption 15)."""
    from ray._private import utils, worker

    node = worker._global_node
    if node is not None:
        utils.write_ray_address(node.gcs_address, node._ray_params.temp_dir)


def dashboard_address() -> str | None:
    """``http://HOST:PORT`` of the connected cluster's dashboard (its Jobs API), or None when it runs
    none (assumption 12).  Call it from a process connected to Ray."""
    from ray._private import ray_constants
    from ray.experimental import internal_kv

    value = internal_kv._internal_kv_get(ray_constants.DASHBOARD_ADDRESS,
                                         namespace=ray_constants.KV_NAMESPACE_DASHBOARD)
    return f"http://{value.decode()}" if value else None


def move_ray_log_handlers(handler: Any) -> int:
    """Replace every stream handler (stderr/stdout) of Ray's own loggers with ``handler`` (assumption
    16); the number replaced.  Loggers Ray configures later (``ray.serve`` imported later) keep theirs
    until this is called again; ``handler`` itself is never added twice to one logger."""
    import importlib
    import logging

    importlib.import_module("ray")  # its import adds the "ray" logger's handler
    manager = logging.Logger.manager
    loggers = [logging.getLogger("ray")] + [lg for name, lg in list(manager.loggerDict.items())
                                            if name.startswith("ray.") and isinstance(lg, logging.Logger)]
    moved = 0
    for lg in loggers:
        streams = [h for h in lg.handlers if isinstance(h, logging.StreamHandler)
                   and not isinstance(h, logging.FileHandler) and h is not handler]
        for old in streams:
            lg.removeHandler(old)
            moved += 1
        if streams and handler not in lg.handlers:
            lg.addHandler(handler)
    return moved


@contextlib.contextmanager
def ray_init_keeps_signal_handlers() -> Iterator[None]:
    """Inside this block ``ray.init`` installs no SIGTERM handler of its own (assumption 17): the
    caller's (``cancel.cancel_on_signals``) stay in force while Ray starts."""
    from ray._private import utils

    saved = utils.set_sigterm_handler
    utils.set_sigterm_handler = lambda handler: None
    try:
        yield
    finally:
        utils.set_sigterm_handler = saved
