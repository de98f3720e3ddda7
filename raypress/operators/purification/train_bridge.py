"""``train_bridge``: leaked (protected, clean) pairs -> a BridgePure model, trained with Ray Train.

BridgePure's threat model: an attacker holds a few hundred images both protected and clean (a
leak) and learns the map back. The input is ``protect``'s output with ``keep_clean: true``: rows
with ``image`` (protected PNG) and ``clean_image`` (clean PNG).

- ``objective: bridge`` trains DDBM's VE diffusion bridge (``VEBridge.training_loss``) from
  x_T = protected to x_0 = clean; ``objective: one_step`` trains an ablation added here (not a
  baseline of the paper): the same U-Net asked for x_0 in one call
  (``VEBridge.one_step_inverse_loss``, plain MSE), to tell what the bridge adds over a direct
  supervised inverse on the same pairs.
- ``beta`` is BridgePure's pre-noise as its official code applies it, sqrt(1-beta) x_T +
  sqrt(beta) eps (``ddbm.prenoise_mix``), drawn afresh each step for the bridge objective.
- ``pairs: N`` keeps the first N rows in id order, so the 100/250/500/1000-pair models of the
  paper's sweep all come from one leaked set, nested.
- The pairs are decoded once on the driver (1000 pairs of 28x28 are 1.5 MB of uint8) and handed
  to the train loop through the object store: no Ray Data sharding at this size. Each step draws a
  batch from an endless stream of shuffles, with its own stream per worker; with ``num_workers``
  > 1 the U-Net is wrapped in DDP (``prepare_model``) so the workers' gradients are averaged.
- Paired horizontal flips (``flips``) flip clean and protected image together, so the pair still
  says what the protection did; they double a small leak's variety.
- AdamW at a constant learning rate, gradient clipping, an EMA of the weights updated every step
  (the EMA is what is saved and sampled from: diffusion models sample better from averaged weights).
- Progress (``train_progress``: step, loss, elapsed_s) flows from rank 0 through a Ray queue into
  the run's events while ``fit`` runs; rank 0 reports one checkpoint at the end, written by
  ``save_bridge`` (kind ``bridgepure_ddbm``, the U-Net config, the objective, the bridge's
  constants and the training summary), which becomes ``models/<node>/``.

A row without ``clean_image``, or whose image does not decode or has the wrong size, stops the
stage with a ValueError naming the row: a model silently trained on fewer pairs than asked for
would be a wrong point of the pairs sweep.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import torch
from pydantic import Field, field_validator, model_validator

from raypress.artifacts import Artifact, ModelArtifact
from raypress.image_codecs import decode_image
from raypress.models.bridge_unet import KIND, BridgeUNet, BridgeUNetConfig, save_bridge
from raypress.models.ddbm import VEBridge, ema_model, prenoise_mix
from raypress.operators.base import Params, Resources, RunContext, Stage
from raypress.operators.registry import register
from raypress.training.storage import all_sum, checkpoint_folder
from raypress.schema import ID_COL, ArtifactType

PAIRS_NEEDED = ("train_bridge needs leaked pairs: rows with image and clean_image "
                "(protect with keep_clean: true)")


# ---------------------------------------------------------------------------------------------
# rows -> pairs (Ray-free)


@dataclass
class LeakedPairs:
    """Decoded pairs in id order: ``clean`` and ``protected`` uint8 (N, H, W)."""

    ids: list[str]
    clean: np.ndarray
    protected: np.ndarray


def decode_pairs(table: pa.Table, pairs: int | None, image_size: int) -> LeakedPairs:
    """The first ``pairs`` rows of ``table`` by id (all when None), decoded; see the module doc for errors."""
    missing = [c for c in (ID_COL, "image", "clean_image") if c not in table.column_names]
    if missing:
        raise ValueError(f"{PAIRS_NEEDED}; the input lacks columns {missing} (it has {table.column_names})")
    if table.num_rows:
        table = table.take(pc.sort_indices(table, [(ID_COL, "ascending")]))
    if pairs is not None:
        if table.num_rows < pairs:
            raise ValueError(f"pairs={pairs} but the input holds only {table.num_rows} leaked pairs")
        table = table.slice(0, pairs)
    if table.num_rows < 1:
        raise ValueError(f"{PAIRS_NEEDED}; the input has no rows")
    ids = [str(i) for i in table.column(ID_COL).to_pylist()]
    size = (image_size, image_size)
    clean = np.zeros((len(ids), *size), np.uint8)
    protected = np.zeros((len(ids), *size), np.uint8)
    for i, (rid, blob, clean_blob) in enumerate(zip(ids, table.column("image").to_pylist(),
                                                    table.column("clean_image").to_pylist())):
        if not clean_blob:
            raise ValueError(f"row {rid!r}: no clean_image; {PAIRS_NEEDED}")
        protected[i] = decode_image(blob, rid, size, "L")
        try:
            clean[i] = decode_image(clean_blob, rid, size, "L")
        except ValueError as exc:
            raise ValueError(f"{exc} (in clean_image)") from exc
    return LeakedPairs(ids, clean, protected)


def gather_pairs(data: Artifact, pairs: int | None, image_size: int) -> LeakedPairs:
    """A Dataset artifact's leaked pairs pulled to the driver (a few hundred small images)."""
    import ray

    ds = data.ds  # type: ignore[union-attr]
    schema = ds.schema()
    names = schema.names if schema is not None else []
    wanted = [c for c in (ID_COL, "image", "clean_image") if c in names]
    tables = [t for t in ray.get(ds.select_columns(wanted).to_arrow_refs()) if t.num_rows] if wanted else []
    table = pa.concat_tables(tables, promote_options="default") if tables else pa.table(
        {c: pa.array([], pa.string() if c == ID_COL else pa.binary()) for c in wanted})
    return decode_pairs(table, pairs, image_size)  # missing columns / no rows: the error says what is needed


def to_model_space(images: np.ndarray) -> torch.Tensor:
    """uint8 (N, H, W) -> float (N, 1, H, W) in [-1, 1], the bridge's pixel scale."""
    return torch.tensor(np.asarray(images, np.uint8)).float().div(127.5).sub(1.0).unsqueeze(1)  # a copy: read-only arrays are fine


# ---------------------------------------------------------------------------------------------
# batches (Ray-free)


def index_batches(n: int, batch_size: int, generator: torch.Generator) -> Iterator[torch.Tensor]:
    """Endless batches of row indices from back-to-back shuffles of ``range(n)``: every pair is seen
    once per ``n`` draws, and ``batch_size`` may exceed ``n`` (a batch then spans shuffles)."""
    pending = torch.empty(0, dtype=torch.long)
    while True:
        while len(pending) < batch_size:
            pending = torch.cat([pending, torch.randperm(n, generator=generator)])
        yield pending[:batch_size]
        pending = pending[batch_size:]


def paired_flip(clean: torch.Tensor, protected: torch.Tensor,
                generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Flip each pair horizontally with probability 1/2, the same flip for both images."""
    flip = (torch.rand(clean.shape[0], generator=generator) < 0.5).to(clean.device)[:, None, None, None]
    return torch.where(flip, clean.flip(-1), clean), torch.where(flip, protected.flip(-1), protected)


# ---------------------------------------------------------------------------------------------
# the Ray Train loop (runs on every worker)


def _train_loop(config: dict[str, Any]) -> dict[str, Any] | None:
    """Train for ``steps`` (or until ``max_minutes``); rank 0 saves the EMA model and returns the history."""
    import ray
    import ray.train
    import ray.train.torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    rank = ray.train.get_context().get_world_rank()
    device = ray.train.torch.get_device()
    distributed = dist.is_available() and dist.is_initialized()
    pairs = ray.get(config["pairs"])
    clean, protected = to_model_space(pairs.clean).to(device), to_model_space(pairs.protected).to(device)

    torch.manual_seed(config["seed"])  # the initial weights (DDP broadcasts rank 0's anyway)
    net = BridgeUNet(BridgeUNetConfig.from_dict(config["unet"]))
    worker_seed = config["seed"] * 1_000_003 + rank
    torch.manual_seed(worker_seed)  # the loss's t and noise draws: different on every worker
    generator = torch.Generator().manual_seed(worker_seed)  # batches and flips: likewise
    model = ray.train.torch.prepare_model(net)
    net = model.module if isinstance(model, DistributedDataParallel) else model
    net.train()
    ema = ema_model(net, config["ema_decay"])
    bridge = VEBridge.from_dict(config["bridge"])
    beta = bridge.beta
    loss_bridge = dataclasses.replace(bridge, beta=0.0)  # the pre-noise is applied above it, officially
    optimizer = torch.optim.AdamW(net.parameters(), lr=config["lr"], weight_decay=config["weight_decay"])
    budget_s = config["max_minutes"] * 60 if config["max_minutes"] else math.inf
    queue = config.get("progress_queue")

    history: list[dict[str, Any]] = []
    window = [0.0, 0.0]  # loss sum, steps (this worker, since the last log)
    recent: deque[float] = deque(maxlen=config["log_every"])
    step, stopped_by = 0, "steps"
    start = time.perf_counter()

    def log() -> None:
        nonlocal window
        loss_sum, steps = all_sum(window, device)
        metrics = {"step": step, "loss": loss_sum / steps, "elapsed_s": time.perf_counter() - start}
        history.append(metrics)
        if rank == 0 and queue is not None:
            queue.put(metrics)
        window = [0.0, 0.0]

    batches = index_batches(len(pairs.ids), config["batch_size"], generator)
    while step < config["steps"]:
        clock = torch.tensor([time.perf_counter() - start], dtype=torch.float64, device=device)
        if distributed:  # one clock for all workers, so they all stop at the same step
            dist.all_reduce(clock, op=dist.ReduceOp.MAX)
        if step > 0 and float(clock) >= budget_s:
            stopped_by = "time"
            break
        idx = next(batches).to(device)
        x0, xT = clean[idx], protected[idx]
        if config["flips"]:
            x0, xT = paired_flip(x0, xT, generator)
        if config["objective"] == "bridge":
            xT = prenoise_mix(xT, beta, torch.randn_like(xT))
            loss = loss_bridge.training_loss(model, x0, xT, log_share=config.get("t_log_share", 0.0))
        else:
            loss = bridge.one_step_inverse_loss(model, x0, xT)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), config["grad_clip"])
        optimizer.step()
        ema.update_parameters(net)
        step += 1
        recent.append(float(loss.detach()))
        window = [window[0] + recent[-1], window[1] + 1]
        if step == 1 or step % config["log_every"] == 0:
            log()
    if window[1]:
        log()
    recent_sum, recent_n = all_sum([sum(recent), float(len(recent))], device)
    summary = {"steps": step, "stopped_by": stopped_by, "initial_loss": history[0]["loss"],
               "final_loss": recent_sum / recent_n,  # mean of the last log_every steps: less noisy than one
               "seconds": time.perf_counter() - start, "pairs": len(pairs.ids),
               "first_id": pairs.ids[0], "last_id": pairs.ids[-1], "device": device.type}
    if rank == 0:
        with checkpoint_folder(config["local_mode"]) as tmp:
            save_bridge(ema.module, {"objective": config["objective"], "bridge": config["bridge"],
                                     "training": summary}, tmp)
            ray.train.report(summary, checkpoint=ray.train.Checkpoint.from_directory(tmp))
        return {"history": history, "summary": summary}
    ray.train.report(summary)  # a barrier: every worker calls it once
    return None


# ---------------------------------------------------------------------------------------------
# the stage


class TrainBridgeParams(Params):
    objective: Literal["bridge", "one_step"] = Field(
        "bridge", description="bridge: DDBM's diffusion bridge (BridgePure); one_step: an added ablation, "
        "not the paper's baseline: the same U-Net as a one-call supervised inverse (plain MSE)")
    pairs: int | None = Field(None, ge=1, description="use only the first N rows by id (None: all)")
    steps: int = Field(6000, ge=1, description="optimizer steps")
    batch_size: int = Field(64, ge=1, description="pairs per worker per step")
    lr: float = Field(
        1e-3, gt=0, description="constant AdamW learning rate. DDBM uses 1e-4 for its 100M-parameter "
        "U-Nets; this 0.8M-parameter one learns much faster with more: on 1000 classwise-protected "
        "Fashion-MNIST pairs (batch 32, 200 steps) the held-out bridge loss reached 0.035 / 0.016 / "
        "0.0087 / 0.0078 at lr 2e-4 / 5e-4 / 1e-3 / 2e-3. 1e-3 is nearly as fast as 2e-3 with half "
        "the step for a long run at a constant rate (the EMA averages out the rest)")
    weight_decay: float = Field(0.0, ge=0, description="AdamW weight decay (DDBM: 0)")
    grad_clip: float = Field(1.0, gt=0, description="max global gradient norm")
    ema_decay: float = Field(0.999, ge=0, lt=1, description="EMA of the weights, saved and sampled from; "
                             "its horizon ~1/(1-decay) steps should be well below `steps`")
    base_channels: int = Field(32, ge=4, description="U-Net width at 28x28")
    channel_mult: tuple[int, ...] = Field((1, 2, 2), description="width multipliers per resolution level "
                                                                 "(28, 14, 7 pixels with patch_size 1)")
    patch_size: int = Field(1, ge=1, description="pixels per side folded into channels around the U-Net "
                                                 "(2: it runs at 14x14, a quarter of the FLOPs)")
    num_res_blocks: int = Field(1, ge=1, description="residual blocks per resolution")
    attention: bool = Field(True, description="self-attention at the lowest resolution")
    num_heads: int = Field(4, ge=1)
    norm_groups: int = Field(8, ge=1)
    dropout: float = Field(0.0, ge=0, lt=1)
    image_size: int = Field(28, ge=4, description="height = width every image must have")
    beta: float = Field(0.0, ge=0, lt=1, description="BridgePure's pre-noise sqrt(1-beta) x_T + sqrt(beta) eps, "
                                                   "as its official code (paper: 0 or 0.02)")
    t_log_share: float = Field(0.0, ge=0, le=1, description="share of the training times t drawn log-uniformly "
                               "on [sigma_min, T] instead of uniformly (DDBM: 0); more training at small t, "
                               "where the sampler's last steps are")
    sigma_min: float = Field(0.002, gt=0, description="DDBM's VE bridge: smallest noise level")
    sigma_max: float = Field(80.0, gt=0, description="DDBM's VE bridge: T")
    sigma_data: float = Field(0.5, gt=0, description="DDBM: assumed data std for the preconditioning")
    flips: bool = Field(True, description="random horizontal flips, the same for a pair's two images")
    max_minutes: float | None = Field(None, gt=0, description="wall-clock budget of the training loop")
    num_workers: int = Field(1, ge=0, description="Ray Train workers (DDP when > 1). 0: Ray Train's local mode "
                                                  "(the loop runs in the driver; no actors to start)")
    use_gpu: bool | None = Field(None, description="None: when the cluster has a GPU per worker")
    seed: int | None = Field(None, ge=0, description="None: the run's seed")
    log_every: int = Field(50, ge=1, description="steps between train_progress events")

    @field_validator("channel_mult")
    @classmethod
    def _mult(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        if not value or min(value) < 1:
            raise ValueError(f"channel_mult needs positive entries, got {value}")
        return value

    @model_validator(mode="after")
    def _buildable(self):
        self.unet_config()  # widths vs norm_groups/num_heads, image_size vs levels: caught by `validate`
        self.bridge()  # sigma_min < sigma_max
        return self

    def unet_config(self) -> BridgeUNetConfig:
        return BridgeUNetConfig(image_size=self.image_size, in_channels=1, base_channels=self.base_channels,
                                channel_mult=self.channel_mult, num_res_blocks=self.num_res_blocks,
                                attention=self.attention, num_heads=self.num_heads,
                                norm_groups=self.norm_groups, dropout=self.dropout, patch_size=self.patch_size)

    def bridge(self) -> VEBridge:
        return VEBridge(sigma_min=self.sigma_min, sigma_max=self.sigma_max, sigma_data=self.sigma_data,
                        beta=self.beta)


@register("train_bridge", requires={"torch": "purify", "PIL": "purify"})
class TrainBridge(Stage[TrainBridgeParams]):
    """Train BridgePure (a DDBM diffusion bridge, or the one-step ablation) on leaked protected/clean pairs -> Model."""

    reads = (ID_COL, "image", "clean_image")
    inputs: ClassVar[dict[str, ArtifactType]] = {"data": ArtifactType.DATASET}
    output: ClassVar[ArtifactType] = ArtifactType.MODEL
    resources: ClassVar[Resources] = Resources(num_cpus=0)  # the Ray Train workers ask for their own

    def run(self, inputs: dict[str, Artifact], ctx: RunContext) -> ModelArtifact:
        os.environ.setdefault("RAY_TRAIN_V2_ENABLED", "1")  # read when ray.train is first imported
        import ray

        from raypress.training.storage import fit_with_progress

        p = self.params
        seed = ctx.seed if p.seed is None else p.seed
        unet, bridge = p.unet_config(), p.bridge()
        start = time.perf_counter()
        pairs = gather_pairs(inputs["data"], p.pairs, p.image_size)
        ctx.event("train_data", pairs=len(pairs.ids), first_id=pairs.ids[0], last_id=pairs.ids[-1],
                  seconds=time.perf_counter() - start)
        use_gpu = p.use_gpu if p.use_gpu is not None else ray.cluster_resources().get("GPU", 0) >= max(p.num_workers, 1)
        fitted = fit_with_progress(_train_loop, {
            "pairs": ray.put(pairs), "unet": unet.to_dict(), "bridge": bridge.to_dict(),
            "objective": p.objective, "seed": seed, "steps": p.steps, "batch_size": p.batch_size,
            "t_log_share": p.t_log_share,
            "lr": p.lr, "weight_decay": p.weight_decay, "grad_clip": p.grad_clip,
            "ema_decay": p.ema_decay, "flips": p.flips, "max_minutes": p.max_minutes,
            "log_every": p.log_every,
        }, ctx, p.num_workers, use_gpu)
        result, model_dir, fit_seconds = fitted.result, fitted.model_dir, fitted.seconds
        history, summary = result.return_value["history"], result.return_value["summary"]
        artifact = ModelArtifact(str(model_dir), config={
            "kind": KIND, "objective": p.objective, "bridge": bridge.to_dict(), "unet": unet.to_dict(),
            "training": {**summary, "fit_seconds": fit_seconds, "batch_size": p.batch_size, "lr": p.lr,
                         "ema_decay": p.ema_decay, "flips": p.flips, "t_log_share": p.t_log_share,
                         "num_workers": p.num_workers, "use_gpu": use_gpu, "seed": seed},
            "history": history,
        })
        artifact.save_manifest()
        return artifact
