"""``ray_bts_minhash_deduplicator``: Data-Juicer's Ray MinHash op, as the same near-dedup.

Data-Juicer's Ray op takes the ``document_minhash_deduplicator`` parameters plus knobs of its own
BTS union-find actors.  Each is either honoured or refused at validation, never dropped:

- ``union_find_parallel_num`` (``'auto'`` or a count): the number of shuffle partitions, which is
  what the union-find parallelism is here (``'auto'``: raypress's default, one per 100,000 rows);
- ``minhash_batch_size`` (``'auto'`` or a count): documents per signature computation;
- ``union_threshold``, ``max_pending_edge_buffer_task``, ``num_edge_buffer_task_returns``,
  ``max_pending_filter_tasks``, ``num_filter_task_returns``, ``merge_batch_size`` pace Data-Juicer's
  actor RPCs and ``memory_per_sample`` sizes its GPU batches: nothing here has that shape (the
  components run as stateless shuffle tasks), so any value but Data-Juicer's default is refused
  with the knob's name; the default (what a recipe copied from Data-Juicer spells out) is
  accepted and reported in the run's events as having no effect;
- ``accelerator`` (``cpu``/``cuda``): ``cuda`` computes the signatures with raypress's Triton kernel
  (bit-identical to the CPU path), each signature task asking Ray for one GPU; a cluster without
  GPUs is an error when the node starts, not a hang.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, PositiveInt, ValidationInfo, field_validator, model_validator

from raypress.operators.base import RunContext
from raypress.operators.dedup.minhash.deduplicator import MinhashDeduplicator, MinhashParams
from raypress.operators.dedup.minhash.lsh import LSHConfig
from raypress.operators.registry import register

if TYPE_CHECKING:  # pragma: no cover
    import ray.data

# Data-Juicer's defaults of the knobs that only pace its union-find actors or size its GPU batches
ACTOR_KNOBS: dict[str, Any] = {
    "union_threshold": 256,
    "max_pending_edge_buffer_task": 20,
    "num_edge_buffer_task_returns": 10,
    "max_pending_filter_tasks": 20,
    "num_filter_task_returns": 10,
    "merge_batch_size": 1000,
    "memory_per_sample": 0.1,
}
_WHAT = {"memory_per_sample": "sizes Data-Juicer's cuDF MinHash batches, which raypress does not have"}
_ACTORS = "tunes Data-Juicer's union-find actors, which raypress does not have (its components run as shuffle tasks)"


class RayBtsMinhashParams(MinhashParams):
    union_find_parallel_num: Literal["auto"] | PositiveInt = Field(
        "auto", description="shuffle partitions of the connected components ('auto': one per 100,000 rows)")
    minhash_batch_size: Literal["auto"] | PositiveInt = Field(
        "auto", description="documents per signature computation ('auto': 4096)")
    union_threshold: int | None = Field(256, description="Data-Juicer actor pacing: only its default is accepted")
    max_pending_edge_buffer_task: int | None = Field(20, description="Data-Juicer actor pacing: only its default")
    num_edge_buffer_task_returns: int | None = Field(10, description="Data-Juicer actor pacing: only its default")
    max_pending_filter_tasks: int | None = Field(20, description="Data-Juicer actor pacing: only its default")
    num_filter_task_returns: int | None = Field(10, description="Data-Juicer actor pacing: only its default")
    merge_batch_size: int | None = Field(1000, description="Data-Juicer actor pacing: only its default")
    memory_per_sample: float | None = Field(0.1, description="Data-Juicer GPU batch sizing: only its default")
    accelerator: Literal["cpu", "cuda"] = Field(
        "cpu", description="cuda: the MinHash signatures are computed by raypress's Triton kernel, each "
        "signature task on one GPU of the Ray cluster (bit-identical to the CPU path)")

    @field_validator(*ACTOR_KNOBS)
    @classmethod
    def _only_data_juicers_default(cls, value: Any, info: ValidationInfo) -> Any:
        knob, default = info.field_name, ACTOR_KNOBS[str(info.field_name)]
        if value != default:
            raise ValueError(f"{knob}={value!r} {_WHAT.get(str(knob), _ACTORS)}, so it cannot be honoured; remove it "
                             f"(Data-Juicer's default {default!r} is accepted)")
        return value

    @model_validator(mode="after")
    def _one_partition_count(self) -> "RayBtsMinhashParams":
        parallel = self.union_find_parallel_num
        if parallel != "auto" and self.num_partitions is not None and parallel != self.num_partitions:
            raise ValueError(f"union_find_parallel_num={parallel} and num_partitions={self.num_partitions} both set "
                             "the shuffle partitions; give one")
        return self


@register("ray_bts_minhash_deduplicator",
          requires_when={"accelerator": {"torch": "torch", "triton": "kernels"}})
class RayBtsMinhashDeduplicator(MinhashDeduplicator[RayBtsMinhashParams]):
    """Data-Juicer's Ray MinHash-LSH near-dedup (its knobs honoured or refused): each cluster keeps
    its smallest id; the others leave as duplicates naming it."""

    def partitions(self, ctx: RunContext) -> int:
        parallel = self.params.union_find_parallel_num
        return parallel if parallel != "auto" else super().partitions(ctx)

    def chunk_rows(self) -> int:
        size = self.params.minhash_batch_size
        return size if size != "auto" else super().chunk_rows()

    def config(self, ctx: RunContext) -> LSHConfig:
        return dataclasses.replace(super().config(ctx), device=self.params.accelerator)

    def apply(self, ds: "ray.data.Dataset", ctx: RunContext) -> "ray.data.Dataset":
        if self.params.accelerator == "cuda":
            import ray

            gpus = ray.cluster_resources().get("GPU", 0)
            if gpus < 1:
                raise ValueError(f"{self.name}: accelerator='cuda' runs the signature tasks on GPUs, and this Ray "
                                 f"cluster has none (resources: {gpus} GPU); use accelerator: cpu, or run on a "
                                 "cluster with GPUs (--address)")
        spelt = sorted(k for k in ACTOR_KNOBS if k in self.params.model_fields_set)
        if spelt:
            ctx.event("knobs_without_effect", knobs=spelt,
                      why="they tune Data-Juicer's union-find actors or GPU batches, which raypress does not have")
        return super().apply(ds, ctx)
