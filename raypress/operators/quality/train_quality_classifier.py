"""`train_quality_classifier`: a Dataset of labelled texts -> a Model, trained with Ray Train.

Training is a node of the same DAG as the filters that use its output: the stage reads the
upstream Dataset, trains the fastText-style classifier of ``raypress.models.ngram_classifier``
data-parallel on ``num_workers`` Ray Train workers (DDP over gloo), and writes the model to
``<run_dir>/models/<node id>/`` for ``quality_classifier_filter`` to load.

Validation rows are chosen by hashing each text (``val_fraction`` of the hash space), inside the
workers: no shuffle or split job, the same rows every epoch, and exact duplicate texts never
straddle the train/validation line.
"""

from __future__ import annotations

import os
import warnings
from contextlib import nullcontext
from dataclasses import asdict
from typing import Any, ClassVar, Iterator

import torch
import xxhash
from pydantic import Field

from raypress.artifacts import Artifact, ModelArtifact
from raypress.models.ngram_classifier import KIND, NgramClassifier, NgramConfig, featurize, save
from raypress.operators.base import Params, Resources, RunContext, Stage
from raypress.operators.registry import register
from raypress.training.storage import checkpoint_folder, fit_with_progress
from raypress.schema import ArtifactType

Features = tuple[torch.Tensor, torch.Tensor, torch.Tensor]  # ids, offsets, class indices


class TrainQualityClassifierParams(Params):
    text_key: str = Field("text", description="column holding the text to classify")
    label_key: str = Field("label", description="column holding the label (bool, int or string)")
    epochs: int = Field(5, ge=1, description="passes over the training rows")
    lr: float = Field(0.1, gt=0, description="Adagrad learning rate (sparse updates suit hashed features)")
    dim: int = Field(32, ge=1, description="embedding size")
    buckets: int = Field(1 << 18, ge=1, description="hash buckets for word n-grams (rows of the embedding)")
    word_ngrams: int = Field(2, ge=1, description="longest word n-gram used as a feature (fastText's wordNgrams)")
    batch_size: int = Field(64, ge=1, description="rows per training step on each worker")
    num_workers: int = Field(2, ge=0, description="Ray Train workers, one CPU each; 0 = Ray Train's local mode "
                             "(the loop runs in the driver: no actors to start, for small data and tests)")
    seed: int | None = Field(
        None, ge=0, description="seed for init, shuffling and the validation hash; None: the run's seed")
    val_fraction: float = Field(
        0.1, ge=0, lt=1, description="share of rows held out (by text hash) to measure validation accuracy")


def _labels(ds: Any, label_key: str) -> list[Any]:
    """The distinct labels in sorted order: class index i predicts ``labels[i]``."""
    values = [v.item() if hasattr(v, "item") else v for v in ds.unique(label_key, ignore_nulls=False)]
    if any(v is None for v in values):
        raise ValueError(f"column {label_key!r} has null labels: every training row needs one")
    if len(values) < 2:
        raise ValueError(f"column {label_key!r} has {len(values)} distinct label(s); need at least 2")
    return sorted(values)


def _held_out(text: str, seed: int, fraction: float) -> bool:
    return xxhash.xxh64_intdigest(text.encode(), seed=seed) < fraction * 2**64


def _batches(iterator: Any, config: dict[str, Any], **iter_kwargs: Any) -> Iterator[tuple[Features, Features]]:
    """Per batch of (text, label) rows: the featurized training rows and held-out rows."""
    model, seed, fraction = config["model"], config["seed"], config["val_fraction"]
    index = {label: i for i, label in enumerate(model["labels"])}
    for batch in iterator.iter_batches(batch_size=config["batch_size"], batch_format="numpy", **iter_kwargs):
        texts = ["" if t is None else str(t) for t in batch[config["text_key"]].tolist()]
        targets = [index[v] for v in batch[config["label_key"]].tolist()]
        val = [_held_out(t, seed, fraction) for t in texts]
        parts = []
        for side in (False, True):
            rows = [i for i, v in enumerate(val) if v == side]
            ids, offsets = featurize([texts[i] for i in rows], model["word_ngrams"], model["buckets"])
            parts.append((ids, offsets, torch.tensor([targets[i] for i in rows], dtype=torch.long)))
        yield parts[0], parts[1]


def _train_loop(config: dict[str, Any]) -> list[dict[str, Any]]:
    """Runs on every Ray Train worker; rank 0 writes the final checkpoint, returns the history."""
    import ray.train
    import ray.train.torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    warnings.filterwarnings("ignore", message="Sparse invariant checks")  # Adagrad, once per process
    torch.manual_seed(config["seed"])
    model = ray.train.torch.prepare_model(NgramClassifier(NgramConfig(**config["model"])))
    ddp = isinstance(model, DistributedDataParallel)
    net: NgramClassifier = model.module if ddp else model
    optimizer = torch.optim.Adagrad(model.parameters(), lr=config["lr"])
    rank = ray.train.get_context().get_world_rank()
    shard = ray.train.get_dataset_shard("train")
    held_out: list[Features] = []  # this worker's validation rows, collected in epoch 1
    history = []
    for epoch in range(1, config["epochs"] + 1):
        model.train()
        totals = torch.zeros(4, dtype=torch.float64)  # summed loss, train rows, right, val rows
        shuffle = {"local_shuffle_buffer_size": 4 * config["batch_size"],
                   "local_shuffle_seed": (config["seed"] * 100_003 + epoch * 101 + rank) % 2**32}
        # join(): if one worker runs out of batches first, DDP keeps the all-reduces matched.
        with model.join() if ddp else nullcontext():
            for (ids, offsets, targets), val in _batches(shard, config, **shuffle):
                if epoch == 1 and len(val[2]):
                    held_out.append(val)
                # A batch may hold only validation rows: it still steps (with zero loss), so
                # every worker takes the same number of DDP steps.
                loss = torch.nn.functional.cross_entropy(model(ids, offsets), targets, reduction="sum")
                optimizer.zero_grad()
                (loss / max(len(targets), 1)).backward()
                optimizer.step()
                totals[0] += loss.item()
                totals[1] += len(targets)
        net.eval()
        with torch.no_grad():
            for ids, offsets, targets in held_out:
                totals[2] += int((net(ids, offsets).argmax(-1) == targets).sum())
                totals[3] += len(targets)
        if dist.is_available() and dist.is_initialized():
            dist.all_reduce(totals)
        metrics = {"epoch": epoch, "loss": float(totals[0] / max(totals[1], 1.0)),
                   "train_rows": int(totals[1]), "val_rows": int(totals[3]),
                   "val_accuracy": float(totals[2] / totals[3]) if totals[3] else None}
        history.append(metrics)
        if epoch == config["epochs"] and rank == 0:
            with checkpoint_folder(config["local_mode"]) as tmp:
                save(net, tmp)
                ray.train.report(metrics, checkpoint=ray.train.Checkpoint.from_directory(tmp))
        else:
            ray.train.report(metrics)
    return history


@register("train_quality_classifier", requires={"torch": "quality"})
class TrainQualityClassifier(Stage[TrainQualityClassifierParams]):
    """Train a fastText-style n-gram text classifier on labelled rows with Ray Train -> Model."""

    inputs: ClassVar[dict[str, ArtifactType]] = {"data": ArtifactType.DATASET}
    output: ClassVar[ArtifactType] = ArtifactType.MODEL
    # The stage only coordinates from the driver; its Ray Train workers ask for num_workers CPUs
    # themselves, so holding one here could leave them unschedulable on a small machine.
    resources: ClassVar[Resources] = Resources(num_cpus=0)

    def columns_read(self) -> tuple[str, ...]:
        return (self.params.text_key, self.params.label_key)

    def run(self, inputs: dict[str, Artifact], ctx: RunContext) -> ModelArtifact:
        os.environ.setdefault("RAY_TRAIN_V2_ENABLED", "1")  # read when ray.train is first imported
        p = self.params
        seed = ctx.seed if p.seed is None else p.seed
        # Materialize the two columns once, while every CPU is free: the Train workers take
        # num_workers CPUs, and a lazy upstream plan would otherwise re-run every epoch.
        data = inputs["data"].ds.select_columns([p.text_key, p.label_key]).materialize()
        model_config = NgramConfig(labels=_labels(data, p.label_key), dim=p.dim, buckets=p.buckets,
                                   word_ngrams=p.word_ngrams)
        fitted = fit_with_progress(_train_loop, {
            "model": asdict(model_config), "text_key": p.text_key, "label_key": p.label_key,
            "epochs": p.epochs, "lr": p.lr, "batch_size": p.batch_size, "seed": seed,
            "val_fraction": p.val_fraction,
        }, ctx, p.num_workers, use_gpu=False, datasets={"train": data})
        history: list[dict[str, Any]] = fitted.result.return_value
        for m in history:
            ctx.event("train_progress", epoch=m["epoch"], loss=m["loss"], val_accuracy=m["val_accuracy"])

        model_dir = fitted.model_dir
        final = history[-1]
        artifact = ModelArtifact(str(model_dir), config={
            "kind": KIND, "labels": model_config.labels, "text_key": p.text_key,
            "label_key": p.label_key, "dim": p.dim, "buckets": p.buckets, "word_ngrams": p.word_ngrams,
            "metrics": {k: final[k] for k in ("epoch", "loss", "val_accuracy", "train_rows", "val_rows")},
        })
        artifact.save_manifest()
        return artifact
