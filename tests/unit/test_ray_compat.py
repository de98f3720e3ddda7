"""One test per Ray-private assumption of raypress.dag.ray_compat that can be checked without a
running Ray: each fails by the assumption's name when a Ray upgrade breaks it (the behaviours that
need a running Ray are in tests/integration/test_ray_compat_on_ray.py)."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

import raypress
from raypress.dag import ray_compat

ROOT = Path(raypress.__file__).parent


def test_fused_task_name__task_context_has_op_name():
    """Assumption 1: Ray Data's TaskContext exists where ray_compat imports it and names its operator."""
    from ray.data._internal.execution.interfaces.task_context import TaskContext

    assert "op_name" in {f.name for f in __import__("dataclasses").fields(TaskContext)}
    assert hasattr(TaskContext, "get_current")
    assert ray_compat.current_task_name() == ""  # outside a task: no name, no error


def test_loopback_node_ip__the_constant_decides_localhost_resolution():
    """Assumption 2: with ENABLE_RAY_CLUSTER off, Ray keeps 127.0.0.1 as the node IP (its 'local
    Ray' mode); on, it swaps it for the outward IP. Checked in a fresh interpreter."""
    code = ("from ray._private import ray_constants, services\n"
            "from raypress.dag.ray_compat import loopback_node_ip\n"
            "assert isinstance(ray_constants.ENABLE_RAY_CLUSTER, bool)\n"
            "with loopback_node_ip():\n"
            "    assert ray_constants.ENABLE_RAY_CLUSTER is False\n"
            "    print(services.resolve_ip_for_localhost('127.0.0.1'))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "127.0.0.1"


def test_enable_token_auth_if_available__rays_reader_takes_warn_if_disabled():
    """Assumption 3: Ray's own token reader is where ray_compat imports it, with its keyword."""
    from ray._private.authentication.authentication_token_setup import maybe_enable_token_auth_if_token_available

    assert "warn_if_disabled" in inspect.signature(maybe_enable_token_auth_if_token_available).parameters


def test_serve_start__takes_a_configs_options_and_its_client_deploys_apps():
    """Assumption 4: serve_start takes http/proxy/gRPC options; its client has deploy_apps."""
    from ray.serve._private import api as serve_api
    from ray.serve._private.client import ServeControllerClient

    params = inspect.signature(serve_api.serve_start).parameters
    assert {"http_options", "proxy_location", "grpc_options"} <= set(params)
    assert callable(getattr(ServeControllerClient, "deploy_apps", None))


def test_keep_rows_in_order__preserve_order_is_an_execution_option():
    """Assumption 6 (its setting; the order itself is checked with Ray running)."""
    import ray.data

    options = ray.data.DataContext.get_current().execution_options
    saved = options.preserve_order
    try:
        ray_compat.keep_rows_in_order()
        assert ray.data.DataContext.get_current().execution_options.preserve_order is True
    finally:
        options.preserve_order = saved


def test_only_ray_compat_imports_rays_private_modules():
    """`grep -rn "ray._private|ray.data._internal|ray.serve._private" raypress` finds one file."""
    pattern = ("ray._private", "ray.data._internal", "ray.serve._private")
    found = sorted(str(p.relative_to(ROOT)) for p in ROOT.rglob("*.py")
                   if any(s in p.read_text(encoding="utf-8") for s in pattern))
    assert found == ["dag/ray_compat.py"], found


def test_start_every_core_at_once__the_policies_and_their_config_key():
    """Assumption 7: Ray Data's backpressure policies are listed under one config key, and the
    resource-budget one is the class ray_compat leaves out."""
    import ray.data
    from ray.data._internal.execution import backpressure_policy as policies

    names = [p.__name__ for p in policies.ENABLED_BACKPRESSURE_POLICIES]
    assert "ResourceBudgetBackpressurePolicy" in names and len(names) >= 2
    context = ray.data.DataContext.get_current()
    saved = context.get_config(policies.ENABLED_BACKPRESSURE_POLICIES_CONFIG_KEY, None)
    try:
        ray_compat.start_every_core_at_once()
        kept = context.get_config(policies.ENABLED_BACKPRESSURE_POLICIES_CONFIG_KEY)
        assert [p.__name__ for p in kept] == [n for n in names if n != "ResourceBudgetBackpressurePolicy"]
    finally:
        context.set_config(policies.ENABLED_BACKPRESSURE_POLICIES_CONFIG_KEY,
                           saved if saved is not None else policies.ENABLED_BACKPRESSURE_POLICIES)


def test_notice_finished_tasks_sooner__the_loop_reads_its_wait_from_a_module_global():
    """Assumption 9: Ray Data's ``process_completed_tasks`` passes the module global
    ``WAIT_FOR_TASK_COMPLETION_TIMEOUT_S`` to ``ray.wait`` at each call (so setting it takes effect)."""
    import inspect

    from ray.data._internal.execution import streaming_executor_state as state

    assert "timeout=WAIT_FOR_TASK_COMPLETION_TIMEOUT_S" in inspect.getsource(state.process_completed_tasks)
    saved = state.WAIT_FOR_TASK_COMPLETION_TIMEOUT_S
    try:
        state.WAIT_FOR_TASK_COMPLETION_TIMEOUT_S = 0.1  # Ray's default (a run in this process may have set it)
        ray_compat.notice_finished_tasks_sooner()
        assert state.WAIT_FOR_TASK_COMPLETION_TIMEOUT_S == ray_compat.TASK_WAIT_S < 0.1
    finally:
        state.WAIT_FOR_TASK_COMPLETION_TIMEOUT_S = saved
