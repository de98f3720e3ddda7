"""``reasoning_tasks``: generated reasoning questions (reasoning-gym) as a Dataset, the search's input.

One read task per family: each generates its ``n_per_family`` questions from the seed, so a rerun
gives the same rows, and families are generated in parallel. The rows are ``tasks.rows``'
(``metadata`` as a JSON string); ``task_rows.task_from_row`` turns a row back into a ``Task``.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Iterator

import pyarrow as pa
from pydantic import Field, field_validator, model_validator

from raypress.operators.base import Params, Reader, RunContext
from raypress.operators.reasoning.tasks.families.rg_family import rg_dataset
from raypress.operators.reasoning.tasks.rows import COLUMNS, tasks_table
from raypress.operators.reasoning.tasks.catalog import FAMILIES, get_family, make_tasks
from raypress.operators.registry import register
from raypress.operators.shared.files import map_items
from raypress.operators.shared.rows import combine


class ReasoningTasksParams(Params):
    families: list[str] = Field(
        default_factory=lambda: list(FAMILIES), min_length=1,
        description=f"task families, any of {', '.join(FAMILIES)}",
    )
    n_per_family: int = Field(default=100, ge=1, le=100_000, description="questions per family")
    seed: int = Field(default=0, ge=0, description="the same seed gives the same questions; seeds never overlap")
    difficulty: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="per family: keyword arguments of its reasoning-gym config, e.g. "
        "{countdown: {min_numbers: 3, max_numbers: 3}}",
    )

    @field_validator("families")
    @classmethod
    def _known(cls, value: list[str]) -> list[str]:
        for name in value:
            get_family(name)  # ValueError with a did-you-mean
        if len(set(value)) != len(value):
            raise ValueError(f"families listed twice: {value}")
        return value

    @model_validator(mode="after")
    def _difficulty(self):
        extra = sorted(set(self.difficulty) - set(self.families))
        if extra:
            raise ValueError(f"difficulty given for families not read: {extra}")
        for name, kwargs in self.difficulty.items():
            rg_dataset(get_family(name), self.seed, **kwargs)  # ValueError naming the valid settings
        return self


@register("reasoning_tasks", requires={"reasoning_gym": "reasoning"})
class ReasoningTasks(Reader[ReasoningTasksParams]):
    """Generate reasoning questions (countdown, chain arithmetic, simple equations, GSM-symbolic) with reasoning-gym."""

    writes = COLUMNS

    def read(self, ctx: RunContext):
        p = self.params
        items = [{"family": f, "difficulty": p.difficulty.get(f, {})} for f in p.families]
        return map_items(items, partial(read_family, n=p.n_per_family, seed=p.seed), ctx)


def read_family(item: dict[str, Any], n: int, seed: int) -> Iterator[pa.Table]:
    """One family's questions as one table."""
    tasks = make_tasks(item["family"], n, seed, **item["difficulty"])
    yield combine(tasks_table(tasks), None)
