"""Where a training stage's Ray Train run keeps its files, and turning its checkpoint into the Model dir.

Why shared: every training stage wants the same life cycle — a fresh storage folder per node (a
rerun trains afresh), the final checkpoint copied to ``models/<node>``, and the Ray Train folder
removed afterwards so the Model dir is the one copy kept.
"""

from __future__ import annotations

import shutil
from contextlib import suppress
from pathlib import Path
from typing import Any

from raypress.operators.base import RunContext


def fresh_storage(ctx: RunContext) -> Path:
    """The run's Ray Train storage folder, with this node's previous attempt removed."""
    storage = Path(ctx.run_dir).resolve() / "ray_train"
    shutil.rmtree(storage / ctx.node_id, ignore_errors=True)
    return storage


def keep_checkpoint(result: Any, ctx: RunContext, storage: Path) -> Path:
    """Copy the run's final checkpoint to ``models/<node>`` and remove the Ray Train folder."""
    model_dir = ctx.path("models", ctx.node_id)
    shutil.rmtree(model_dir, ignore_errors=True)
    result.checkpoint.to_directory(str(model_dir))
    shutil.rmtree(storage / ctx.node_id, ignore_errors=True)
    with suppress(OSError):
        storage.rmdir()  # when no other training node left files there
    return model_dir
