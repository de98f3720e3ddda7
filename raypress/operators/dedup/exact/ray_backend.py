"""Data-Juicer's ``backend`` / ``redis_address`` of its Ray-mode deduplicators, and what they mean here.

Data-Juicer's Ray deduplicators are filters that ask a store, row by row, whether a hash was seen:
a pool of Ray actors holding sets (``ray_actor``) or a Redis server (``redis``).  raypress decides
duplicates with a hash shuffle inside Ray Data instead, with the same groups and a deterministic
winner, so neither store is needed: both values are accepted (a Data-Juicer recipe validates as it
is) and mean the same; ``redis`` adds a line in the log and an event saying no Redis server is used.
"""

from __future__ import annotations

import logging
from typing import Literal

from pydantic import Field

from raypress.operators.base import Params, RunContext

log = logging.getLogger(__name__)


class RayBackendParams(Params):
    backend: Literal["ray_actor", "redis"] = Field(
        "ray_actor", description="Data-Juicer's store of seen hashes; raypress decides duplicates with a hash "
        "shuffle inside Ray either way (redis: no Redis server is used)")
    redis_address: str = Field("redis://localhost:6379", description="Data-Juicer's Redis server for "
                               "backend: redis; accepted and not used (raypress needs no Redis)")


def note_backend(params: RayBackendParams, ctx: RunContext) -> None:
    """Say, once per run, that a ``redis`` backend is not contacted."""
    if params.backend == "redis":
        log.info("%s: backend 'redis' (%s): raypress decides duplicates with a hash shuffle inside Ray and "
                 "uses no Redis server", ctx.node_id, params.redis_address)
        ctx.event("dedup_backend_not_used", backend=params.backend, redis_address=params.redis_address)
