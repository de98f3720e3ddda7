"""Where a training stage's Ray Train run keeps its files, turning its checkpoint into the Model dir,
and relaying the workers' progress to the run's events.

Why shared: every training stage wants the same life cycle — a fresh storage folder per node (a
rerun trains afresh), the final checkpoint copied to ``models/<node>``, and the Ray Train folder
removed afterwards so the Model dir is the one copy kept.
"""

from __future__ import annotations

import queue
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol


class TrainingRun(Protocol):
    """What a fit needs of the run (``operators.base.RunContext`` is one): training sits below the
    operators, so it names the four members it uses instead of importing the class."""

    run_dir: str
    node_id: str

    def event(self, kind: str, **fields: Any) -> None: ...

    def path(self, *parts: str) -> Path: ...


def fresh_storage(ctx: TrainingRun) -> Path:
    """The run's Ray Train storage folder, with this node's previous attempt removed."""
    storage = Path(ctx.run_dir).resolve() / "ray_train"
    shutil.rmtree(storage / ctx.node_id, ignore_errors=True)
    return storage


def scaling_config(num_workers: int, use_gpu: bool) -> Any:
    """Ray Train's ScalingConfig; ``num_workers=0`` is its local mode: the loop runs in this process
    with no controller or worker actors, which starts in well under a second instead of the 15-25 s
    those actors take here — for small runs and tests (one process, no DDP, CPU)."""
    import ray.train

    return ray.train.ScalingConfig(num_workers=num_workers, use_gpu=bool(use_gpu and num_workers))


@contextmanager
def checkpoint_folder(local_mode: bool) -> Iterator[str]:
    """A folder for the files a loop reports as its checkpoint. A Ray Train worker uploads it inside
    ``report``, so a temporary folder may go right after; local mode keeps only a reference, so
    there the folder must outlive the loop (``keep_checkpoint`` removes it once copied)."""
    if local_mode:
        yield tempfile.mkdtemp(prefix="raypress-checkpoint-")
        return
    with tempfile.TemporaryDirectory() as tmp:
        yield tmp


# Ray Train's local mode keeps one run's state per process: when the runner executes steps
# concurrently, local-mode fits take turns (runs with worker actors do not need to).
_LOCAL_MODE_LOCK = threading.Lock()


@dataclass
class Fitted:
    """A finished fit: the Ray Train result, the Model dir holding its final checkpoint, fit seconds."""

    result: Any
    model_dir: Path
    seconds: float


def fit_with_progress(loop: Callable[[dict[str, Any]], Any], config: dict[str, Any], ctx: TrainingRun,
                      num_workers: int, use_gpu: bool, datasets: dict[str, Any] | None = None) -> Fitted:
    """Run ``loop`` under a ``TorchTrainer`` and keep its checkpoint as ``models/<node>``.

    Why one function: every training stage wants the same life cycle — fresh storage, the workers'
    progress relayed to the run's events (``config`` gains ``progress_queue`` and ``local_mode``),
    ``num_workers=0`` as Ray Train's local mode (one at a time per process), the checkpoint copied
    out and the Ray Train folder removed."""
    import ray.train
    from ray.train.torch import TorchTrainer

    local_mode = num_workers == 0
    storage = fresh_storage(ctx)
    with _LOCAL_MODE_LOCK if local_mode else nullcontext(), ProgressPump(ctx, local_mode) as pump:
        trainer = TorchTrainer(
            loop,
            train_loop_config={**config, "progress_queue": pump.queue, "local_mode": local_mode},
            scaling_config=scaling_config(num_workers, use_gpu),
            run_config=ray.train.RunConfig(storage_path=str(storage), name=ctx.node_id),
            datasets=datasets,
        )
        start = time.perf_counter()
        result = trainer.fit()
        seconds = time.perf_counter() - start
    return Fitted(result, keep_checkpoint(result, ctx, storage), seconds)


def keep_checkpoint(result: Any, ctx: TrainingRun, storage: Path) -> Path:
    """Copy the run's final checkpoint to ``models/<node>`` and remove the Ray Train folder."""
    model_dir = ctx.path("models", ctx.node_id)
    shutil.rmtree(model_dir, ignore_errors=True)
    result.checkpoint.to_directory(str(model_dir))
    if result.path is None:  # local mode: the checkpoint is the loop's own folder (checkpoint_folder)
        shutil.rmtree(result.checkpoint.path, ignore_errors=True)
    shutil.rmtree(storage / ctx.node_id, ignore_errors=True)
    with suppress(OSError):
        storage.rmdir()  # when no other training node left files there
    return model_dir


class ProgressPump:
    """Drains the workers' progress queue into the run's events from a driver thread while ``fit`` runs."""

    def __init__(self, ctx: TrainingRun, local_mode: bool = False) -> None:
        if local_mode:  # the loop runs in this process: a plain queue, no queue actor to start
            self.queue: Any = _LocalQueue()
        else:
            from ray.util.queue import Queue

            self.queue = Queue(actor_options={"num_cpus": 0})  # must not take a CPU the workers need
        self.ctx = ctx
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _emit(self, metrics: dict[str, Any]) -> None:
        self.ctx.event("train_progress", **metrics)

    def _run(self) -> None:
        from ray.util.queue import Empty

        while not self._stop.is_set():
            with suppress(Empty, queue.Empty):
                self._emit(self.queue.get(timeout=0.5))

    def __enter__(self) -> "ProgressPump":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        with suppress(Exception):  # the queue actor may already be gone if Ray is shutting down
            for metrics in self.queue.get_nowait_batch(self.queue.qsize()):
                self._emit(metrics)
        with suppress(Exception):
            self.queue.shutdown()


class _LocalQueue(queue.Queue):
    """``queue.Queue`` with the two calls of Ray's Queue that ``ProgressPump`` uses on exit."""

    def get_nowait_batch(self, count: int) -> list[Any]:
        return [self.get_nowait() for _ in range(count)]

    def shutdown(self, immediate: bool = False) -> None:  # noqa: ARG002 - Ray's signature
        """Nothing to release: no actor behind it."""


def all_sum(values: list[float], device: Any) -> list[float]:
    """Sum ``values`` over the Ray Train workers (as float64 on ``device``); unchanged on one worker.

    Why here: every training loop logs means over all workers and agrees on one clock."""
    import torch
    import torch.distributed as dist

    t = torch.tensor(values, dtype=torch.float64, device=device)
    if dist.is_available() and dist.is_initialized():
        dist.all_reduce(t)
    return t.tolist()
