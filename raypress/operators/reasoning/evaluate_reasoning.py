"""``evaluate_reasoning``: greedy direct-answer accuracy of policies on held-out questions -> Report.

Why direct answers: it is what a policy does without search, so "before SFT" and "after SFT"
compare the model itself (Mulberry's question: did training on search trees make the model
better at answering alone?).
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import Any, ClassVar

import numpy as np
from pydantic import Field

from raypress.artifacts import Artifact, ModelArtifact, ReportArtifact
from raypress.operators.base import Params, Resources, RunContext, Stage
from raypress.operators.reasoning.stats.bootstrap import bootstrap_interval
from raypress.operators.reasoning.policies.backends import start_local_policies, stop_local_policies
from raypress.operators.reasoning.policies.model_set import policy_dirs
from raypress.operators.reasoning.tasks.rows import task_from_row
from raypress.operators.reasoning.search.types import Policy, Task
from raypress.operators.registry import register
from raypress.schema import ArtifactType


class EvaluateReasoningParams(Params):
    policies: list[str] | None = Field(None, description="which policies of the Model (default: all)")
    limit: int | None = Field(None, ge=1, description="most questions")
    max_tokens: int = Field(128, ge=1)
    concurrency: int = Field(128, ge=1)
    actor_cpus: float = Field(0.5, ge=0)
    bootstrap: int = Field(2000, ge=100)
    samples: int = Field(5, ge=0, description="example answers kept per policy")
    seed: int = 0


async def direct_answers(policy: Policy, tasks: list[Task], max_tokens: int, concurrency: int) -> list[dict[str, Any]]:
    """Greedy answer per task, scored by its family."""
    from raypress.operators.reasoning.tasks.catalog import get_family

    gate = asyncio.Semaphore(concurrency)

    async def one(task: Task) -> dict[str, Any]:
        family = get_family(task.family)
        async with gate:
            out = await policy.complete(family.prompt(task, []), max_tokens, 0.0)
        _, final = family.split(out.text) if out.error is None else ([], None)
        correct = final is not None and family.score(task, final)
        return {"task": task.id, "family": task.family, "correct": bool(correct), "final": final,
                "error": out.error, "text": out.text}

    return list(await asyncio.gather(*(one(t) for t in tasks)))


@register("evaluate_reasoning", requires={"torch": "reasoning", "tokenizers": "reasoning", "safetensors": "reasoning",
                                         "reasoning_gym": "reasoning"})
class EvaluateReasoning(Stage[EvaluateReasoningParams]):
    """Greedy direct-answer accuracy (bootstrap 95% CI, per family) of each policy on held-out questions -> Report."""

    @classmethod
    def planned_workers(cls, params: Any) -> str:
        return f"a policy actor per policy × cpu={params.actor_cpus:g}"

    inputs: ClassVar[dict[str, ArtifactType]] = {"data": ArtifactType.DATASET, "model": ArtifactType.MODEL}
    output: ClassVar[ArtifactType] = ArtifactType.REPORT
    resources: ClassVar[Resources] = Resources(num_cpus=0)

    def run(self, inputs: dict[str, Artifact], ctx: RunContext) -> ReportArtifact:
        p = self.params
        ds = inputs["data"].ds  # type: ignore[union-attr]
        tasks = [task_from_row(r) for r in (ds.take_all() if p.limit is None else ds.take(p.limit))]
        model = inputs["model"]
        if not isinstance(model, ModelArtifact):
            raise ValueError(f"node {ctx.node_id!r}: `model` must be a Model artifact")
        dirs = policy_dirs(model)
        if p.policies is not None:
            unknown = sorted(set(p.policies) - set(dirs))
            if unknown:
                raise ValueError(f"node {ctx.node_id!r}: unknown policies {unknown}; the Model has {sorted(dirs)}")
            dirs = {n: dirs[n] for n in p.policies}
        policies = start_local_policies(dirs, p.actor_cpus)
        try:
            results = self._evaluate(policies, tasks, ctx)
        finally:
            stop_local_policies(policies)
        report = ReportArtifact(str(ctx.path("reports", ctx.node_id, "report.json")),
                                {"model": model.path, "policies": results,
                                 # the fine-tuning behind this Model (mode, steps actually trained), if any
                                 "sft": (model.config or ModelArtifact.load(model.path).config).get("sft")})
        report.save()
        return report

    def _evaluate(self, policies: dict[str, Policy], tasks: list[Task], ctx: RunContext) -> dict[str, Any]:
        p = self.params
        rng = np.random.default_rng(p.seed)
        results: dict[str, Any] = {}
        for name, policy in policies.items():
            answers = asyncio.run(direct_answers(policy, tasks, p.max_tokens, p.concurrency))
            correct = np.array([a["correct"] for a in answers], dtype=float)
            by_family: dict[str, list[bool]] = defaultdict(list)
            for a in answers:
                by_family[a["family"]].append(a["correct"])
            results[name] = {
                "questions": len(answers), "accuracy": float(correct.mean()) if answers else 0.0,
                "ci95": list(bootstrap_interval(correct, p.bootstrap, rng)),
                "by_family": {f: float(np.mean(v)) for f, v in sorted(by_family.items())},
                "failed_calls": sum(a["error"] is not None for a in answers),
                "samples": answers[: p.samples],
                # per question, so two evaluations of the same questions can be compared paired
                "outcomes": {a["task"]: int(a["correct"]) for a in answers},
            }
            ctx.event("evaluated", policy=name, accuracy=results[name]["accuracy"], questions=len(answers))
        return results
