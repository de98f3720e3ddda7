"""Start (or join) Ray once per process: embedded by default, a cluster when an address is given."""

from __future__ import annotations

import logging
import os


def ensure_ray(address: str | None = None, num_cpus: int | None = None) -> None:
    """Connect to ``address`` / ``RAY_ADDRESS`` if given, else start an embedded, quiet Ray."""
    import ray

    if ray.is_initialized():
        return
    os.environ.setdefault("RAY_DEDUP_LOGS", "1")
    os.environ.setdefault("RAY_TRAIN_V2_ENABLED", "1")
    # Ray Train's controller polls its workers every 2 s by default, so every training stage waited up to
    # 2 s at each state change (start, finish); 0.5 s took 4-5 s off a run here.
    os.environ.setdefault("RAY_TRAIN_HEALTH_CHECK_INTERVAL_S", "0.5")
    address = address or os.environ.get("RAY_ADDRESS") or None
    kwargs: dict = dict(
        logging_level=logging.WARNING,
        log_to_driver=True,
        configure_logging=True,
        ignore_reinit_error=True,
    )
    if address:
        ray.init(address=address, **kwargs)
    else:
        # A loaded 2-core machine sometimes misses Ray's fixed start-up deadlines: try again.
        for attempt in range(3):
            try:
                ray.init(num_cpus=num_cpus, include_dashboard=False, **kwargs)
                break
            except Exception:  # noqa: BLE001 - "node timed out during startup" and kin
                ray.shutdown()
                if attempt == 2:
                    raise
    import ray.data

    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = os.environ.get("RAYPRESS_PROGRESS", "1") == "1"
    ctx.print_on_execution_start = False
