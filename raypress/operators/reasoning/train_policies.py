"""``train_policies``: K small policy LMs, each trained with Ray Train on worked solutions from its own
data mix, so that their error profiles are learned and differ (what collective search exploits).

Each policy's corpus is generated from the input task rows: for each example a task of a family
drawn by the policy's mix weights, then its worked solution, or (with probability
``flawed_rate``) a solution with one flawed step of the policy's ``flawed_kinds``. The text is
exactly what the search later asks for: the family's prompt followed by the solution and
``Answer:`` line; the loss is on the solution only (the prompt's numbers are random, learning to
predict them only takes capacity away). Training reuses ``train_moe_lm`` (a dense model is an MoE
with one expert).
"""

from __future__ import annotations

import dataclasses
import random
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from raypress.artifacts import Artifact, DatasetArtifact, ModelArtifact
from raypress.operators.base import Params, Resources, RunContext, Stage
from raypress.operators.reasoning.tasks.families.step_text import solution_text
from raypress.operators.reasoning.policies.model_set import KIND
from raypress.operators.reasoning.tasks.rows import task_from_row
from raypress.operators.reasoning.search.types import Task
from raypress.operators.registry import register
from raypress.operators.shared.moe_lm_trainer import train_workers
from raypress.operators.shared.moe_lm_trainer import MoELMTrainer, TrainMoELMParams
from raypress.schema import ArtifactType


class PolicySpec(BaseModel):
    """One policy: its name, its data mix and how often its training solutions carry a flaw."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    mix: dict[str, float] = Field(description="family -> weight (normalised)")
    flawed_rate: float = Field(0.0, ge=0.0, le=1.0, description="share of solutions with one flawed step")
    flawed_kinds: list[str] = Field(default_factory=lambda: ["arithmetic_slip"])
    seed: int = 0

    @field_validator("mix")
    @classmethod
    def _positive(cls, mix: dict[str, float]) -> dict[str, float]:
        if not mix or any(w < 0 for w in mix.values()) or sum(mix.values()) <= 0:
            raise ValueError("mix needs at least one family with a positive weight")
        return mix


class TrainPoliciesParams(Params):
    policies: list[PolicySpec] = Field(min_length=1)
    examples_per_policy: int = Field(20_000, ge=10, description="solutions generated for each policy")
    # the network (shared by the policies): small and dense by default
    vocab_size: int = Field(320, ge=300, description="BPE vocabulary (digits always split)")
    hidden_size: int = Field(128, ge=8)
    intermediate_size: int = Field(256, ge=1)
    num_hidden_layers: int = Field(3, ge=1)
    num_attention_heads: int = Field(4, ge=1)
    num_key_value_heads: int = Field(2, ge=1)
    num_local_experts: int = Field(1, ge=1, description="1: a dense model")
    num_experts_per_tok: int = Field(1, ge=1)
    context_length: int = Field(256, ge=16)
    batch_size: int = Field(16, ge=1)
    lr: float = Field(3e-3, gt=0)
    max_steps: int = Field(2000, ge=1)
    max_minutes: float = Field(3.0, gt=0, description="training budget of EACH policy")
    use_gpu: bool | None = Field(None, description="a GPU per Ray Train worker (None: where the cluster has one per worker)")
    num_workers: int = Field(1, ge=0, description="Ray Train workers per policy; 0: Ray Train's local "
                                                  "mode (the loop runs in the driver; no actors to start)")
    parallel: int = Field(2, ge=1, description="policies trained at the same time")
    judge_rate: float = Field(0.0, ge=0.0, le=1.0, description="share of each policy's examples that teach it "
                              "to judge a path (``judges.ModelJudge``'s format; labels from the exact checker)")

    @model_validator(mode="after")
    def _one_local_training_at_a_time(self):
        if self.num_workers == 0 and self.parallel > 1:
            raise ValueError(f"parallel {self.parallel} needs num_workers >= 1: Ray Train's local mode "
                             "(num_workers 0) keeps one training's state per process, so use parallel: 1")
        return self


def without_questions(tasks: list[Task], banned: set[str]) -> list[Task]:
    """The tasks whose question text is not in ``banned`` (exact text: the same numbers, the same
    words), so no evaluated question was seen in training."""
    return [t for t in tasks if t.question not in banned]


def judging_example(family, task: Task, rng: random.Random) -> tuple[str, str]:
    """One judging example: a worked or (half the time) flawed solution of ``task`` as the path to
    judge, the verdict lines as the target. The exact checker only labels the example here; the
    search never consults it."""
    from raypress.operators.reasoning.tasks.families.flaws import FLAW_KINDS
    from raypress.operators.reasoning.search.judges import exact_labels, judging_prompt, verdict_lines

    steps, _ = family.worked_solution(task)
    if rng.random() < 0.5:
        with suppress(ValueError):
            steps, _ = family.flawed_solution(task, rng, rng.choice(FLAW_KINDS))
    steps = list(steps)
    return judging_prompt(family, task, [], steps), verdict_lines(exact_labels(family, task, steps))


def policy_corpus(spec: PolicySpec, tasks: list[Task], n: int, judge_rate: float = 0.0) -> list[tuple[str, str]]:
    """``n`` training examples ``(prompt, solution)`` for one policy, deterministic for ``spec.seed``;
    a ``judge_rate`` share of them are judging examples (``judging_example``)."""
    from raypress.operators.reasoning.tasks.catalog import get_family

    by_family: dict[str, list[Task]] = {}
    for task in tasks:
        by_family.setdefault(task.family, []).append(task)
    missing = [f for f, w in spec.mix.items() if w > 0 and f not in by_family]
    if missing:
        raise ValueError(f"policy {spec.name!r}: no input tasks of famil{'y' if len(missing) == 1 else 'ies'} "
                         f"{missing}; the input has {sorted(by_family)}")
    families = [f for f, w in spec.mix.items() if w > 0]
    weights = [spec.mix[f] for f in families]
    rng = random.Random(spec.seed)
    texts = []
    for _ in range(n):
        name = rng.choices(families, weights)[0]
        family = get_family(name)
        task = rng.choice(by_family[name])
        if judge_rate and rng.random() < judge_rate:
            texts.append(judging_example(family, task, rng))
            continue
        steps, final = family.worked_solution(task)
        if rng.random() < spec.flawed_rate:
            with suppress(ValueError):  # nothing in this solution can be flawed that way: it stays correct
                steps, final = family.flawed_solution(task, rng, rng.choice(spec.flawed_kinds))
        texts.append((family.prompt(task, []), solution_text(steps, final)))
    return texts


@register("train_policies", requires={"torch": "reasoning", "tokenizers": "reasoning", "safetensors": "reasoning",
                                    "reasoning_gym": "reasoning"})
class TrainPolicies(Stage[TrainPoliciesParams]):
    """Train K small policy LMs (Ray Train), each on worked solutions from its own data mix -> a policy-set Model."""

    @classmethod
    def planned_workers(cls, params: Any) -> str:
        return train_workers(params.num_workers, params.use_gpu, len(params.policies))

    inputs: ClassVar[dict[str, ArtifactType]] = {"data": ArtifactType.DATASET, "exclude": ArtifactType.DATASET}
    # `exclude`: questions never to train on (the search and held-out sets): small task spaces
    # (two single-digit steps) repeat questions across generator seeds
    optional_inputs: ClassVar[frozenset[str]] = frozenset({"exclude"})
    output: ClassVar[ArtifactType] = ArtifactType.MODEL
    resources: ClassVar[Resources] = Resources(num_cpus=0)

    def run(self, inputs: dict[str, Artifact], ctx: RunContext) -> ModelArtifact:
        import ray.data

        p = self.params
        names = [spec.name for spec in p.policies]
        if len(set(names)) != len(names):
            raise ValueError(f"node {ctx.node_id!r}: policy names must be unique, got {names}")
        tasks = [task_from_row(row) for row in inputs["data"].ds.take_all()]  # type: ignore[union-attr]
        if not tasks:
            raise ValueError(f"node {ctx.node_id!r}: the task input is empty")
        if "exclude" in inputs:
            banned = {r["question"] for r in inputs["exclude"].ds.select_columns(["question"]).take_all()}  # type: ignore[union-attr]
            before = len(tasks)
            tasks = without_questions(tasks, banned)
            ctx.event("policy_tasks", kept=len(tasks), excluded=before - len(tasks), exclude_questions=len(banned))
            if not tasks:
                raise ValueError(f"node {ctx.node_id!r}: every training task is in `exclude`")
        def train(spec: PolicySpec) -> ModelArtifact:
            examples = policy_corpus(spec, tasks, p.examples_per_policy, p.judge_rate)
            ctx.event("policy_corpus", policy=spec.name, texts=len(examples), mix=spec.mix,
                      flawed_rate=spec.flawed_rate)
            sub = dataclasses.replace(ctx, node_id=f"{ctx.node_id}-{spec.name}")
            trainer = MoELMTrainer(TrainMoELMParams(
                vocab_size=p.vocab_size, split_digits=True, hidden_size=p.hidden_size,
                intermediate_size=p.intermediate_size, num_hidden_layers=p.num_hidden_layers,
                num_attention_heads=p.num_attention_heads, num_key_value_heads=p.num_key_value_heads,
                num_local_experts=p.num_local_experts, num_experts_per_tok=p.num_experts_per_tok,
                context_length=p.context_length, batch_size=p.batch_size, lr=p.lr, max_steps=p.max_steps,
                max_minutes=p.max_minutes, num_workers=p.num_workers, use_gpu=p.use_gpu, seed=spec.seed, warmup_steps=20,
                prompt_key="prompt",
            ))
            rows = [{"prompt": prompt, "text": solution} for prompt, solution in examples]
            return trainer.run({"data": DatasetArtifact(ray.data.from_items(rows))}, sub)

        # Trainings overlap (each Ray Train run spends most of a minute starting up); Ray queues
        # the workers that do not fit the cluster.
        with ThreadPoolExecutor(max_workers=p.parallel) as pool:
            artifacts = list(pool.map(train, p.policies))
        trained = {spec.name: {"path": a.path, "spec": spec.model_dump(), "training": a.config.get("training", {}),
                               "judge_rate": p.judge_rate}
                   for spec, a in zip(p.policies, artifacts)}
        out_dir = Path(ctx.path("models", ctx.node_id))
        artifact = ModelArtifact(str(out_dir), config={"kind": KIND, "policies": trained, "order": names})
        artifact.save_manifest()
        return artifact
