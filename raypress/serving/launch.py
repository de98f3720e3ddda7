"""Start serving from the command line: a Model directory, or a Ray Serve config file.

Why Serve's own config path for files: ``raypress serve CONFIG.yaml`` deploys exactly what
``serve deploy CONFIG.yaml`` deploys on a cluster (the controller's ``apply_config``, as
``serve run`` does), so a file tested here works there unchanged — except the HTTP host: a file
that sets none listens on 127.0.0.1 here (Serve's own default is every interface).
"""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path
from typing import Any, Callable

import yaml

from raypress.dag.ray_session import is_loopback


class ServeConfigError(ValueError):
    """The Serve config file is unreadable or invalid; the message names the file and the field."""


def exposure_warning(host: str, has_api_key: bool) -> str | None:
    """The warning for an API that listens beyond this machine with no bearer token, else ``None``."""
    if has_api_key or is_loopback(host):
        return None
    return (f"warning: listening on {host}, which is not loopback, without authentication: anyone who can "
            "reach this port can use the API (set a key with --api-key-env, or bind 127.0.0.1)")


def config_exposure_warning(config: Any) -> str | None:
    """``exposure_warning`` for a Serve config: its HTTP host, and whether every application's args
    name a key (``api_key`` / ``api_key_env``)."""
    keyed = all(isinstance(a.args, dict) and (a.args.get("api_key") or a.args.get("api_key_env"))
                for a in config.applications)
    return exposure_warning(http_options(config)["host"], bool(keyed))


def http_options(config: Any) -> dict[str, Any]:
    """The config's ``http_options``; a host the file leaves unset is loopback, not Serve's 0.0.0.0."""
    options = config.http_options.model_dump()
    if "host" not in config.http_options.model_fields_set:
        options["host"] = "127.0.0.1"
    return options


def load_serve_config(path: str | Path) -> Any:
    """Parse and validate a Serve config file (``ServeDeploySchema``)."""
    from pydantic import ValidationError
    from ray.serve.schema import ServeDeploySchema

    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text())
    except OSError as error:
        raise ServeConfigError(f"{path}: cannot read: {error}") from error
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        raise ServeConfigError(f"{path}{where}: not valid YAML: {getattr(error, 'problem', error)}") from error
    if not isinstance(raw, dict) or "applications" not in raw:
        raise ServeConfigError(f"{path}: a Serve config needs an `applications:` list")
    try:
        return ServeDeploySchema.model_validate(raw)
    except ValidationError as error:
        first = error.errors()[0]
        loc = ".".join(str(part) for part in first["loc"])
        raise ServeConfigError(f"{path}: {loc}: {first['msg']}") from error


def deploy_config(path: str | Path, timeout_s: float = 300.0,
                  on_status: Callable[[str], None] | None = None) -> dict[str, str]:
    """Deploy every application of the config; wait until all run; ``{app name: URL}``."""
    from ray import serve
    from ray.serve.config import gRPCOptions

    from raypress.dag.ray_compat import serve_start
    from raypress.serving.llm_deployment import http_url

    config = load_serve_config(path)
    http = http_options(config)
    client = serve_start(http_options=http, proxy_location=config.proxy_location,
                                   grpc_options=gRPCOptions(**config.grpc_options.model_dump()))
    client.deploy_apps(config)
    names = [app.name for app in config.applications]
    deadline = time.monotonic() + timeout_s
    while True:
        apps = serve.status().applications
        states = {name: apps[name].status.value if name in apps else "NOT_STARTED" for name in names}
        failed = {n: apps[n].message for n, s in states.items() if s in {"DEPLOY_FAILED", "UNHEALTHY"}}
        if failed:
            raise RuntimeError("; ".join(f"application {n!r} failed: {m}" for n, m in failed.items()))
        if all(state == "RUNNING" for state in states.values()):
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"applications not running after {timeout_s:.0f} s: {states}")
        if on_status is not None:
            on_status(", ".join(f"{n}: {s}" for n, s in states.items()))
        time.sleep(1.0)
    base = http_url(http["host"], http["port"])
    return {app.name: base + (app.route_prefix or "/").rstrip("/") for app in config.applications}


def wait_until_interrupted() -> None:
    """Block the main thread until SIGINT or SIGTERM."""
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    while not stop.wait(1.0):
        continue
