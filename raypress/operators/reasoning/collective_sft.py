"""``collective_sft``: fine-tune every policy on the search output (Mulberry's collective SFT), or,
as its compute-matched control, on more of its own original corpus.

Mulberry trains each π_k on the collective reasoning paths; here each policy of the Model continues
training from its weights on the SFT records of ``comcts_search`` rows (correct paths, and
reflective paths when ``include_reflection``) mixed with fresh examples of its own original corpus
(``original_ratio`` per record: without them a small search corpus makes the policy forget).
``mode: control`` trains the same policies for the same steps, batch, learning rate and number of
examples on the original corpus alone, so "CoMCTS data helps" is measured against "more training
helps". The loss is on the solution only; ``train_moe_lm`` trains, on Ray Train workers.
Output: a policy-set Model (one fine-tuned directory per policy), each with its actual steps.
"""

from __future__ import annotations

import dataclasses
import json
import random
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field

from raypress.artifacts import Artifact, DatasetArtifact, ModelArtifact
from raypress.operators.base import Params, Resources, RunContext, Stage
from raypress.operators.reasoning.policies.model_set import KIND, policy_dirs
from raypress.operators.registry import register
from raypress.operators.shared.moe_lm_trainer import MoELMTrainer, TrainMoELMParams
from raypress.schema import ArtifactType

CONTEXT = 256  # tokens per training block (capped by the policy's own context)
CHARS_PER_TOKEN_BOUND = 4  # a byte-level BPE with split digits never packs more characters per token


class CollectiveSFTParams(Params):
    policies: list[str] | None = Field(None, description="policies to fine-tune (default: every policy of the Model)")
    mode: Literal["comcts", "control"] = Field("comcts", description="comcts: search records + original data; "
                                               "control: the same number of examples, original data only")
    runs: list[str] | None = Field(None, description="search runs whose records are used (default: every comcts run)")
    include_reflection: bool = Field(True, description="also train on reflective paths")
    original_ratio: float = Field(1.0, ge=0.0, description="original-corpus examples mixed in per search record")
    repeat: int = Field(4, ge=1, description="copies of each example (a small corpus needs several passes)")
    batch_size: int = Field(16, ge=1)
    lr: float = Field(1e-3, gt=0)
    max_steps: int = Field(500, ge=1, description="the steps every policy trains (the compute both modes match)")
    max_minutes: float = Field(15.0, gt=0, description="safety stop; the actual steps are reported (a cut "
                                                       "run is no longer compute-matched)")
    num_workers: int = Field(2, ge=0, description="Ray Train workers; 0: local mode (no actors to start)")
    parallel: int = Field(1, ge=1, description="policies trained at the same time (needs num_workers >= 1 if > 1)")
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


def sft_record_ids(rows: list[dict]) -> set[str]:
    """Task ids of every SFT record in ``rows`` (what the leakage check compares)."""
    return {record["task_id"] for row in rows for record in json.loads(row.get("sft") or "[]")}


def mixed_corpus(records: list[tuple[str, str]], original: list[tuple[str, str]], mode: str,
                 ratio: float) -> list[tuple[str, str]]:
    """The examples one policy trains on: ``records`` + ``round(len(records)·ratio)`` original ones
    (comcts), or that many original ones alone (control): both modes see the same number."""
    n_original = round(len(records) * ratio)
    need = n_original + (len(records) if mode == "control" else 0)
    if len(original) < need:
        raise ValueError(f"{need} original examples needed, {len(original)} given")
    return original[:need] if mode == "control" else list(records) + original[:n_original]


def trainer_params(p: CollectiveSFTParams, init_from: str) -> TrainMoELMParams:
    """The training of one policy: identical in both modes but for the data (the step count, batch,
    learning rate and seed are the compute the control matches)."""
    return TrainMoELMParams(init_from=init_from, prompt_key="prompt", context_length=CONTEXT, batch_size=p.batch_size,
                            lr=p.lr, warmup_steps=10, max_steps=p.max_steps, max_minutes=p.max_minutes,
                            num_workers=p.num_workers, seed=p.seed)


def repeats(p: CollectiveSFTParams, examples: list[tuple[str, str]]) -> int:
    """Copies of the corpus so that it fills a batch on every worker at least ``p.repeat`` times."""
    chars_needed = max(p.num_workers, 1) * p.batch_size * CONTEXT * CHARS_PER_TOKEN_BOUND
    return max(p.repeat, -(-chars_needed // max(1, sum(len(q) + len(a) for q, a in examples))))


@register("collective_sft", requires={"torch": "reasoning", "tokenizers": "reasoning", "safetensors": "reasoning",
                                     "reasoning_gym": "reasoning"})
class CollectiveSFT(Stage[CollectiveSFTParams]):
    """Fine-tune every policy on comcts_search's SFT records mixed with its own data (or, mode control, its own data only) -> policy-set Model."""

    inputs: ClassVar[dict[str, ArtifactType]] = {"data": ArtifactType.DATASET, "model": ArtifactType.MODEL,
                                                 "tasks": ArtifactType.DATASET}
    # `tasks`: the policies' training questions (their original corpus is drawn from them)
    optional_inputs: ClassVar[frozenset[str]] = frozenset({"tasks"})
    output: ClassVar[ArtifactType] = ArtifactType.MODEL
    resources: ClassVar[Resources] = Resources(num_cpus=0)

    def run(self, inputs: dict[str, Artifact], ctx: RunContext) -> ModelArtifact:
        import ray.data

        from raypress.operators.reasoning.tasks.rows import task_from_row
        from raypress.operators.reasoning.train_policies import PolicySpec, policy_corpus

        p = self.params
        model = inputs["model"]
        dirs = policy_dirs(model)  # type: ignore[arg-type]
        names = p.policies or list(dirs)
        unknown = sorted(set(names) - set(dirs))
        if unknown:
            raise ValueError(f"node {ctx.node_id!r}: unknown policies {unknown}; the Model has {sorted(dirs)}")
        rows = inputs["data"].ds.select_columns(["run", "method", "sft"]).take_all()  # type: ignore[union-attr]
        rows = [r for r in rows if (r["run"] in p.runs if p.runs is not None else r["method"] == "comcts")]
        records, kinds = sft_texts(rows, p.include_reflection)
        if not records:
            raise ValueError(f"node {ctx.node_id!r}: no SFT records in the selected runs (nothing was solved)")
        needs_original = p.mode == "control" or p.original_ratio > 0
        if needs_original and "tasks" not in inputs:
            raise ValueError(f"node {ctx.node_id!r}: mode {p.mode!r} with original_ratio {p.original_ratio} needs "
                             "the policies' training questions as input `tasks`")
        tasks = [task_from_row(r) for r in inputs["tasks"].ds.take_all()] if needs_original else []  # type: ignore[union-attr]
        config = model.config or ModelArtifact.load(model.path).config  # type: ignore[union-attr]
        specs = config.get("policies", {}) if config.get("kind") == KIND else {}

        def train(name: str) -> ModelArtifact:
            original: list[tuple[str, str]] = []
            if needs_original:
                info = specs.get(name)
                if info is None:
                    raise ValueError(f"node {ctx.node_id!r}: policy {name!r} has no recorded training mix; "
                                     "the original corpus cannot be rebuilt (use original_ratio 0, mode comcts)")
                spec = PolicySpec(**{**info["spec"], "seed": info["spec"]["seed"] + 7919})  # fresh draws of its mix
                n = round(len(records) * p.original_ratio) + len(records)
                original = policy_corpus(spec, tasks, n, float(info.get("judge_rate", 0.0)))
            examples = mixed_corpus(records, original, p.mode, p.original_ratio)
            random.Random(p.seed).shuffle(examples)
            ctx.event("sft_corpus", policy=name, mode=p.mode, examples=len(examples), records=len(records), **kinds)
            corpus = ray.data.from_items([{"prompt": q, "text": a} for q, a in examples * repeats(p, examples)])
            sub = dataclasses.replace(ctx, node_id=f"{ctx.node_id}-{name}")
            trainer = MoELMTrainer(trainer_params(p, dirs[name]))
            return trainer.run({"data": DatasetArtifact(corpus)}, sub)

        with ThreadPoolExecutor(max_workers=p.parallel if p.num_workers > 0 else 1) as pool:
            artifacts = list(pool.map(train, names))
        trained = {}
        for name, artifact in zip(names, artifacts):
            steps = int(artifact.config.get("training", {}).get("steps", 0))
            trained[name] = {**specs.get(name, {}), "path": artifact.path,
                             "sft": {"mode": p.mode, "steps": steps, "max_steps": p.max_steps,
                                     "records": kinds, "include_reflection": p.include_reflection,
                                     "original_ratio": p.original_ratio}}
            if steps < p.max_steps:
                ctx.event("sft_cut_short", policy=name, steps=steps, max_steps=p.max_steps,
                          note="max_minutes stopped it: not compute-matched")
        out = ModelArtifact(str(Path(ctx.path("models", ctx.node_id))),
                            config={"kind": KIND, "policies": trained, "order": names,
                                    "sft": {"mode": p.mode, "records": kinds, "steps": {n: t["sft"]["steps"]
                                                                                         for n, t in trained.items()}}})
        out.save_manifest()
        return out
