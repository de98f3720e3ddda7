"""The base of every task family: a reasoning-gym dataset, the prompt, the step splitter and
reasoning-gym's own final-answer scorer.

Why reasoning-gym: it generates endless seeded questions and owns each family's final-answer
scorer, so the search and the evaluation judge answers exactly as that package does. What it does
not have is a step format, which each family adds (types.py: one step per line, then
``Answer: <value>``). ``reasoning_gym`` is imported lazily (about 2 s): validating a pipeline that
names no reasoning op must not pay for it.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from dataclasses import dataclass
from functools import lru_cache
from random import Random
from typing import Any, Callable, ClassVar

from raypress.operators.reasoning.tasks.families.step_text import Solution
from raypress.operators.reasoning.search.types import ANSWER_PREFIX, Task

# make_tasks(seed) reads reasoning-gym items seed*stride + i: its items are seeded seed+index, so
# plain consecutive seeds would share all but one question (a train set leaking into a test set).
SEED_STRIDE = 1_000_000


@dataclass(frozen=True)
class RgFamily(ABC):
    """What every family shares: a reasoning-gym dataset, the prompt, the splitter and the scorer.

    Subclasses add the step checker and the solution generators."""

    name: str
    rg_name: str
    defaults: ClassVar[dict[str, Any]] = {}

    def prompt(self, task: Task, steps: list[str]) -> str:
        return f"{task.question}\nSolution:\n" + "".join(f"{s}\n" for s in steps)

    def split(self, text: str) -> tuple[list[str], str | None]:
        """Steps are the non-blank lines before the first ``Answer:`` line (any case); its value,
        when not empty, is the final answer."""
        steps: list[str] = []
        for line in text.splitlines():
            line = line.strip()
            if not line:
                continue
            if line[: len(ANSWER_PREFIX)].lower() == ANSWER_PREFIX.lower():
                return steps, line[len(ANSWER_PREFIX):].strip() or None
            steps.append(line)
        return steps, None

    def score(self, task: Task, final_answer: str) -> bool:
        entry = {"question": task.question, "answer": task.answer, "metadata": task.metadata}
        return _scorer(self.rg_name)(final_answer.strip(), entry) == 1.0

    def accept(self, entry: dict[str, Any]) -> bool:
        """Keep this generated item? Not when reasoning-gym's own scorer rejects its own answer
        (gsm_symbolic's misses negative answers)."""
        return _scorer(self.rg_name)(str(entry["answer"]), entry) == 1.0

    @abstractmethod
    def check_step(self, task: Task, previous: list[str], step: str) -> int | None:
        """+1 / -1 / None (see types.TaskFamily)."""

    @abstractmethod
    def worked_solution(self, task: Task) -> Solution:
        """A correct solution (see ``tasks.worked_solution``)."""

    @abstractmethod
    def flawed_solution(self, task: Task, rng: Random, kind: str) -> Solution:
        """A solution with one flawed step (see ``tasks.flawed_solution``)."""


@lru_cache(maxsize=None)
def _scorer(rg_name: str) -> Callable[[str, dict[str, Any]], float]:
    import reasoning_gym as rg

    return rg.get_score_answer_fn(rg_name)


def rg_dataset(fam: RgFamily, seed: int, size: int = 1, **difficulty: Any):
    """The family's reasoning-gym dataset; bad difficulty arguments are a ValueError naming the
    config's fields."""
    import reasoning_gym as rg
    from reasoning_gym.factory import DATASETS

    kwargs = {**fam.defaults, **difficulty}
    fields = sorted(f.name for f in dataclasses.fields(DATASETS[fam.rg_name][1]) if f.name not in ("seed", "size"))
    unknown = sorted(set(kwargs) - set(fields))
    if unknown:
        raise ValueError(f"{fam.name}: unknown difficulty settings {unknown}; reasoning-gym's "
                         f"{fam.rg_name} takes {fields}")
    try:
        return rg.create_dataset(fam.rg_name, size=size, seed=seed * SEED_STRIDE, **kwargs)
    except (AssertionError, TypeError, ValueError) as exc:
        raise ValueError(f"{fam.name}: invalid difficulty {kwargs}: {exc}") from exc
