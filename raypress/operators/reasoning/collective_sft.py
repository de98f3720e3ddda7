"""``collective_sft``: fine-tune a policy on the search output (Mulberry's collective SFT).

The SFT records of ``comcts_search`` rows (correct paths, and reflective paths when
``include_reflection``) become training examples (the question prompt, then the solution, learned
with the loss on the solution only) and
``train_moe_lm`` continues training the chosen policy from its weights, on 2 Ray Train workers.
"""

from __future__ import annotations

import dataclasses
import json
from typing import ClassVar

from pydantic import Field

from raypress.artifacts import Artifact, DatasetArtifact, ModelArtifact
from raypress.operators.base import Params, Resources, RunContext, Stage
from raypress.operators.reasoning.policy_set import policy_dirs
from raypress.operators.registry import register
from raypress.operators.shared.moe_lm_training import MoELMTrainer, TrainMoELMParams
from raypress.schema import ArtifactType


CONTEXT = 256  # tokens per training block (capped by the policy's own context)
CHARS_PER_TOKEN_BOUND = 4  # a byte-level BPE with split digits never packs more characters per token


class CollectiveSFTParams(Params):
    policy: str | None = Field(None, description="policy to fine-tune (default: the first of the Model)")
    runs: list[str] | None = Field(None, description="search runs whose records are used (default: every comcts run)")
    include_reflection: bool = Field(True, description="also train on reflective paths")
    repeat: int = Field(4, ge=1, description="copies of each record (a small corpus needs several passes)")
    batch_size: int = Field(16, ge=1)
    lr: float = Field(1e-3, gt=0)
    max_steps: int = Field(500, ge=1)
    max_minutes: float = Field(2.0, gt=0)
    num_workers: int = Field(2, ge=0, description="Ray Train workers; 0: local mode (no actors to start)")
    seed: int = 0


def sft_texts(rows: list[dict], include_reflection: bool) -> tuple[list[tuple[str, str]], dict[str, int]]:
    """Training examples ``(prompt, response)`` from the rows' SFT records, and how many of each kind."""
    texts, kinds = [], {"correct": 0, "reflective": 0}
    for row in rows:
        for record in json.loads(row.get("sft") or "[]"):
            if record["kind"] == "reflective" and not include_reflection:
                continue
            user, assistant = record["messages"][0]["content"], record["messages"][1]["content"]
            texts.append((user, assistant))
            kinds[record["kind"]] = kinds.get(record["kind"], 0) + 1
    return texts, kinds


@register("collective_sft", requires={"torch": "reasoning", "tokenizers": "reasoning", "safetensors": "reasoning"})
class CollectiveSFT(Stage[CollectiveSFTParams]):
    """Fine-tune a policy on comcts_search's SFT records (correct and, optionally, reflective paths) -> Model."""

    inputs: ClassVar[dict[str, ArtifactType]] = {"data": ArtifactType.DATASET, "model": ArtifactType.MODEL}
    output: ClassVar[ArtifactType] = ArtifactType.MODEL
    resources: ClassVar[Resources] = Resources(num_cpus=0)

    def run(self, inputs: dict[str, Artifact], ctx: RunContext) -> ModelArtifact:
        import ray.data

        p = self.params
        dirs = policy_dirs(inputs["model"])  # type: ignore[arg-type]
        name = p.policy or next(iter(dirs))
        if name not in dirs:
            raise ValueError(f"node {ctx.node_id!r}: unknown policy {name!r}; the Model has {sorted(dirs)}")
        rows = inputs["data"].ds.select_columns(["run", "method", "sft"]).take_all()  # type: ignore[union-attr]
        rows = [r for r in rows if (r["run"] in p.runs if p.runs is not None else r["method"] == "comcts")]
        texts, kinds = sft_texts(rows, p.include_reflection)
        if not texts:
            raise ValueError(f"node {ctx.node_id!r}: no SFT records in the selected runs (nothing was solved)")
        ctx.event("sft_corpus", policy=name, records=len(texts), **kinds)
        # a small corpus (few solved questions) is repeated until it fills a batch on every worker
        chars_needed = max(p.num_workers, 1) * p.batch_size * CONTEXT * CHARS_PER_TOKEN_BOUND
        repeat = max(p.repeat, -(-chars_needed // max(1, sum(len(q) + len(a) for q, a in texts))))
        corpus = ray.data.from_items([{"prompt": q, "text": a} for q, a in texts * repeat])
        trainer = MoELMTrainer(TrainMoELMParams(
            init_from=dirs[name], prompt_key="prompt", context_length=CONTEXT, batch_size=p.batch_size, lr=p.lr, warmup_steps=10,
            max_steps=p.max_steps, max_minutes=p.max_minutes, num_workers=p.num_workers, seed=p.seed))
        artifact = trainer.run({"data": DatasetArtifact(corpus)}, dataclasses.replace(ctx))
        artifact.config["sft"] = {"base_policy": name, "records": kinds, "include_reflection": p.include_reflection}
        artifact.save_manifest()
        return artifact
