"""Reasoning task families by name, and the tasks and solutions they generate.

The families (``families/``) are reasoning-gym datasets with a step format, an exact step checker
where the family allows one, and the solutions that train the policies: worked ones (every step
checks, the answer scores) and flawed ones (one step fails the checker), whose mix gives each
trained policy its own error profile. This module is what the ops call: a family by name,
``make_tasks``, ``worked_solution``, ``flawed_solution``.
"""

from __future__ import annotations

import json
from random import Random
from typing import Any

from raypress.operators.reasoning.tasks.families.chain_arithmetic import ChainArithmetic
from raypress.operators.reasoning.tasks.families.countdown import Countdown
from raypress.operators.reasoning.tasks.families.gsm_symbolic import GsmSymbolic
from raypress.operators.reasoning.tasks.families.rg_family import SEED_STRIDE, RgFamily, rg_dataset
from raypress.operators.reasoning.tasks.families.simple_equations import SimpleEquations
from raypress.operators.reasoning.tasks.families.step_text import Solution
from raypress.operators.reasoning.search.types import Task
from raypress.suggest import did_you_mean

FAMILIES: dict[str, RgFamily] = {
    f.name: f
    for f in (
        Countdown("countdown", "countdown"),
        ChainArithmetic("chain_arithmetic", "chain_sum"),
        SimpleEquations("simple_equations", "simple_equations"),
        GsmSymbolic("gsm_symbolic", "gsm_symbolic"),
    )
}


def get_family(name: str) -> RgFamily:
    """The family called ``name``; an unknown name is a ValueError (so pydantic reports it as a
    params error) that suggests the closest one."""
    if name not in FAMILIES:
        hint = did_you_mean(name, FAMILIES)
        raise ValueError(f"unknown reasoning task family {name!r}{hint}; known: {', '.join(FAMILIES)}")
    return FAMILIES[name]


def worked_solution(task: Task) -> Solution:
    """A correct solution: every step passes the family's checker and the answer scores."""
    return get_family(task.family).worked_solution(task)


def flawed_solution(task: Task, rng: Random, kind: str) -> Solution:
    """A solution with one step of the given kind of error (one of ``FLAW_KINDS``), which the
    family's checker rejects; the steps before it are the worked solution's."""
    return get_family(task.family).flawed_solution(task, rng, kind)


def make_tasks(family: str, n: int, seed: int, **difficulty: Any) -> list[Task]:
    """``n`` tasks of ``family``, the same for the same arguments; ``difficulty`` are the keyword
    arguments of the reasoning-gym dataset's config (over the family's defaults). A prefix of a
    longer list for the same seed; different seeds never share items (see ``SEED_STRIDE``)."""
    fam = get_family(family)
    if not 0 <= n < SEED_STRIDE // 2:
        raise ValueError(f"n must be in [0, {SEED_STRIDE // 2}), got {n}")
    ds = rg_dataset(fam, seed, size=2 * n + 16, **difficulty)
    tasks: list[Task] = []
    for idx in range(len(ds)):
        if len(tasks) == n:
            break
        entry = ds[idx]
        if fam.accept(entry):
            meta = json.loads(json.dumps(entry["metadata"], default=str))  # gsm has Fractions
            tasks.append(Task(f"{family}-{seed}-{len(tasks)}", family, entry["question"], str(entry["answer"]), meta))
    if len(tasks) < n:
        raise ValueError(f"{family}: only {len(tasks)} of {n} generated tasks are usable with {difficulty}")
    return tasks
