"""``drop_questions``: the rows of a task set whose question is not in ``exclude`` (exact text).

Why: generator seeds do not make disjoint question sets in small task spaces; dropping the
evaluated questions from every set a policy learns from (training, search, dev) is what lets
``question_overlap`` pass with 0.
"""

from __future__ import annotations

from typing import ClassVar

from raypress.artifacts import Artifact, DatasetArtifact
from raypress.operators.base import Params, Resources, RunContext, Stage
from raypress.operators.reasoning.question_overlap import question_key
from raypress.operators.registry import register
from raypress.schema import ArtifactType


class DropQuestionsParams(Params):
    """No parameters: what is dropped is whatever the `exclude` input holds."""


@register("drop_questions")
class DropQuestions(Stage[DropQuestionsParams]):
    """Task rows (`data`) minus those whose question text is in `exclude` -> Dataset."""

    inputs: ClassVar[dict[str, ArtifactType]] = {"data": ArtifactType.DATASET, "exclude": ArtifactType.DATASET}
    output: ClassVar[ArtifactType] = ArtifactType.DATASET
    resources: ClassVar[Resources] = Resources(num_cpus=0)

    def run(self, inputs: dict[str, Artifact], ctx: RunContext) -> DatasetArtifact:
        import ray.data

        banned = {question_key(r)
                  for r in inputs["exclude"].ds.select_columns(["question"]).take_all()}  # type: ignore[union-attr]
        rows = inputs["data"].ds.take_all()  # type: ignore[union-attr]
        kept = [r for r in rows if question_key(r) not in banned]
        ctx.event("drop_questions", kept=len(kept), dropped=len(rows) - len(kept))
        if not kept:
            raise ValueError(f"node {ctx.node_id!r}: every row's question is in `exclude`")
        return DatasetArtifact(ray.data.from_items(kept), rows=len(kept))
