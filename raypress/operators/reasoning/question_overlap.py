"""``question_overlap``: the leakage check: no evaluated question may appear in any data a policy
trained on (its training questions, the searched questions its SFT records come from, the dev set).

Why a stage of its own: small procedural task spaces repeat questions across generator seeds (13
of 600 held-out questions were once also searched and fine-tuned on), so the pipeline checks it
and the report states the count; an overlap fails the run, naming the ids.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from raypress.artifacts import Artifact, ReportArtifact
from raypress.operators.base import Params, Resources, RunContext, Stage
from raypress.operators.registry import register
from raypress.schema import ID_COL, ArtifactType


class QuestionOverlapParams(Params):
    fail: bool = Field(True, description="raise (naming the ids) when any evaluated question was trained on")
    shown: int = Field(20, ge=1, description="most overlapping ids named")


def question_key(row: dict[str, Any]) -> str:
    """What makes two task rows the same question: the question text, stripped."""
    return str(row["question"]).strip()


def overlapping(evaluated: list[dict[str, Any]], trained: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """``(evaluated id, trained id)`` for every evaluated question whose text (stripped) is also a
    trained question, in evaluated order."""
    seen: dict[str, str] = {}
    for row in trained:
        seen.setdefault(question_key(row), str(row[ID_COL]))
    return [(str(r[ID_COL]), seen[q]) for r in evaluated if (q := question_key(r)) in seen]


@register("question_overlap")
class QuestionOverlap(Stage[QuestionOverlapParams]):
    """Leakage check: evaluated questions (`data`) that also appear in training/SFT/dev data (`against`) -> Report; fails on any."""

    inputs: ClassVar[dict[str, ArtifactType]] = {"data": ArtifactType.DATASET, "against": ArtifactType.DATASET}
    output: ClassVar[ArtifactType] = ArtifactType.REPORT
    resources: ClassVar[Resources] = Resources(num_cpus=0)

    def run(self, inputs: dict[str, Artifact], ctx: RunContext) -> ReportArtifact:
        p = self.params
        evaluated = inputs["data"].ds.select_columns([ID_COL, "question"]).take_all()  # type: ignore[union-attr]
        trained = inputs["against"].ds.select_columns([ID_COL, "question"]).take_all()  # type: ignore[union-attr]
        pairs = overlapping(evaluated, trained)
        metrics = {"evaluated": len(evaluated), "against": len(trained), "overlap": len(pairs),
                   "ids": [e for e, _ in pairs[: p.shown]], "pairs": [list(x) for x in pairs[: p.shown]]}
        ctx.event("question_overlap", evaluated=len(evaluated), against=len(trained), overlap=len(pairs))
        if pairs and p.fail:
            raise ValueError(f"node {ctx.node_id!r}: {len(pairs)} evaluated question(s) also in the training/SFT "
                             f"data: evaluated ids {[e for e, _ in pairs[:p.shown]]} "
                             f"(trained ids {[t for _, t in pairs[:p.shown]]})")
        report = ReportArtifact(str(ctx.path("reports", ctx.node_id, "report.json")), metrics)
        report.save()
        return report
