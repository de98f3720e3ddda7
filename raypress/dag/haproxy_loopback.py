"""Ray Serve's HAProxy ingress, kept on loopback when the embedded Ray is.

Why: with ``RAY_SERVE_ENABLE_HA_PROXY=1`` Serve puts HAProxy (C, multi-threaded) in front of the
replicas instead of its Python proxy: requests go straight to the replica's own HTTP server, which
took the served throughput from 0.53x to 0.80x the in-process engine on the MoE-CAP systems radar
here (README, issue 31).  The replica's port and HAProxy's frontend follow Serve's ``host``
(loopback by default), but Ray 2.60's HAProxy template binds its Prometheus exporter (``bind
:9101``) and its stats page (``bind *:8404``) on every interface, with no setting to change that.
Serve runs the binary that ``RAY_SERVE_HAPROXY_BINARY_PATH`` names (``haproxy -db -f CONFIG``, and
``-sf PIDS`` on reloads): this module installs a small wrapper there that rewrites those two
``bind`` lines to 127.0.0.1 in a copy of the config and runs the real haproxy on it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

HA_PROXY_ENV = "RAY_SERVE_ENABLE_HA_PROXY"
BINARY_ENV = "RAY_SERVE_HAPROXY_BINARY_PATH"
DRAIN_ENV = "RAY_SERVE_DIRECT_INGRESS_MIN_DRAINING_PERIOD_S"
EMBEDDED_DRAIN_S = "2"
INGRESSES = ("proxy", "haproxy", "auto")  # a pipeline's settings.serve_ingress
NO_BINARY = "needs the haproxy binary (Debian/Ubuntu: apt-get install haproxy)"  # what each interface says

# `bind :PORT` / `bind *:PORT` (every interface) -> `bind 127.0.0.1:PORT`; explicit hosts stay
_WRAPPER = r"""#!/bin/bash
# raypress: Ray Serve's HAProxy with its every-interface binds on 127.0.0.1 (raypress/dag/haproxy_loopback.py)
set -e
args=()
while [ $# -gt 0 ]; do
  if [ "$1" = "-f" ] && [ $# -gt 1 ]; then
    sed -E 's/^([[:space:]]*bind[[:space:]]+)\*?:([0-9]+)/\1127.0.0.1:\2/' "$2" > "$2.loopback"
    args+=("-f" "$2.loopback")
    shift 2
  else
    args+=("$1")
    shift
  fi
done
exec REAL_HAPROXY "${args[@]}"
"""


def ha_proxy_requested() -> bool:
    """Whether this process's environment (which the embedded Ray's processes inherit) asks Serve
    for its HAProxy ingress."""
    return os.environ.get(HA_PROXY_ENV, "0") == "1"


def haproxy_binary() -> str | None:
    """The real haproxy on this machine (Debian installs it in /usr/sbin, often off a user's PATH)."""
    return shutil.which("haproxy") or shutil.which("haproxy", path="/usr/sbin:/usr/local/sbin")


def wrapper_text(real: str) -> str:
    """The wrapper script for the haproxy at ``real``."""
    return _WRAPPER.replace("REAL_HAPROXY", real)


def install_wrapper(real: str, folder: Path | None = None) -> Path:
    """Write the wrapper for ``real`` (once per content: a second Ray session reuses it) and return it."""
    text = wrapper_text(real)
    folder = folder or Path(tempfile.gettempdir()) / f"raypress-{os.getuid()}"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"haproxy-loopback-{hashlib.sha256(text.encode()).hexdigest()[:12]}"
    if not path.is_file() or path.read_text() != text:
        staging = path.with_suffix(f".{os.getpid()}.tmp")
        staging.write_text(text)
        staging.chmod(0o755)
        staging.replace(path)
    return path


def keep_on_loopback() -> str | None:
    """Where the HAProxy ingress is asked for and no binary is named, name the wrapper (before Ray
    starts: its processes inherit the variable); the wrapper's path, or None when nothing was done
    (an operator's own binary, or no haproxy here: Serve then says it is missing)."""
    if not ha_proxy_requested() or os.environ.get(BINARY_ENV):
        return None
    real = haproxy_binary()
    if real is None:
        return None
    path = str(install_wrapper(real))
    os.environ[BINARY_ENV] = path
    return path


def short_drain_when_embedded() -> bool:
    """Behind HAProxy, Serve holds every stopping replica open for at least 30 s (Ray 2.60's
    ``RAY_SERVE_DIRECT_INGRESS_MIN_DRAINING_PERIOD_S``) so that a load balancer in front of the
    *replicas* can deregister them. In the embedded Ray the only party in front of them is Serve's
    own HAProxy on this node, which hears of a stopping replica at once and retries refused
    connections, so the wait only delayed the end of every serving run and of ``raypress serve``
    by 30 s. Set it to 2 s there (before Ray starts; an operator's own value stands). True when set."""
    if not ha_proxy_requested() or DRAIN_ENV in os.environ:
        return False
    os.environ[DRAIN_ENV] = EMBEDDED_DRAIN_S
    return True


def choose_ingress(setting: str) -> str:
    """Ask the embedded Ray (not started yet) for the ingress ``settings.serve_ingress`` names and
    return the one it gets: "haproxy" sets the variable Serve's processes read (an error when the
    binary is missing), "auto" does so where haproxy is installed; "proxy" leaves the environment
    as it is (a caller's ``RAY_SERVE_ENABLE_HA_PROXY=1`` still counts)."""
    if setting == "proxy":
        return "haproxy" if ha_proxy_requested() else "proxy"
    if haproxy_binary() is None:
        if setting == "haproxy":
            raise RuntimeError(f"settings.serve_ingress: haproxy {NO_BINARY}, or use 'auto' or 'proxy'")
        return "haproxy" if ha_proxy_requested() else "proxy"
    os.environ[HA_PROXY_ENV] = "1"
    return "haproxy"
