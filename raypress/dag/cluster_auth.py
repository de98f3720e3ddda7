"""One line for a cluster that turns this machine's Ray token down, instead of ~20 s of C++
warnings and a bare ``ConnectionError`` (``ray.init``) or a 401 (the Jobs API).

Ray 2.60 protects a cluster started where a token exists (``ray start`` makes one); a client sends
``RAY_AUTH_TOKEN``, else the file ``RAY_AUTH_TOKEN_PATH`` names, else ``~/.ray/auth_token``, and
only when token auth is on (``RAY_AUTH_MODE=token``, or unset with a token at hand)."""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_TOKEN_FILE = Path("~/.ray/auth_token")


class ClusterAuthRefused(ConnectionError):
    """The cluster refused this process's Ray token (or its lack of one)."""


def token_sent() -> str:
    """Which token this process offers a cluster, in words."""
    if os.environ.get("RAY_AUTH_MODE", "").lower() == "disabled":
        return "none: RAY_AUTH_MODE=disabled"
    if os.environ.get("RAY_AUTH_TOKEN"):
        return "the one in RAY_AUTH_TOKEN"
    if os.environ.get("RAY_AUTH_TOKEN_PATH"):
        return f"the one in RAY_AUTH_TOKEN_PATH={os.environ['RAY_AUTH_TOKEN_PATH']}"
    if DEFAULT_TOKEN_FILE.expanduser().is_file():
        return f"the one in {DEFAULT_TOKEN_FILE}"
    return f"none: no RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or {DEFAULT_TOKEN_FILE}"


def refused_message(address: str) -> str:
    """What to set, and where the cluster's token is."""
    return (f"the Ray cluster at {address} uses token authentication and refused this machine's token "
            f"({token_sent()}): set RAY_AUTH_MODE=token and RAY_AUTH_TOKEN_PATH=<the cluster's token file> "
            f"(`ray start` keeps it in {DEFAULT_TOKEN_FILE} of the user who started the head; `ray "
            "get-auth-token` run there prints it), or RAY_AUTH_TOKEN=<the token>")


def check_cluster_token(address: str) -> None:
    """Raise :class:`ClusterAuthRefused` if the GCS at ``address`` (``host:port``) refuses the token
    this process would send; anything else is left to ``ray.init``."""
    from raypress.dag.ray_compat import enable_token_auth_if_available, gcs_refuses_token

    if "://" in address or ":" not in address:
        return  # `auto`, `ray://`: not a GCS address
    if not os.environ.get("RAY_AUTH_MODE"):
        enable_token_auth_if_available()  # what ray.init is about to do: probe with the same token
    if gcs_refuses_token(address):
        raise ClusterAuthRefused(refused_message(address))
