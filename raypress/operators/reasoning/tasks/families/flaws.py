"""What every family's ``flawed_solution`` shares: the kinds of flaw, the slips, and the rewrite
of a ``skipped_step``.

Why its own module: the flaw kinds are one vocabulary across families (a policy's
``flawed_kinds`` names them), so they are defined once.
"""

from __future__ import annotations

from raypress.operators.reasoning.tasks.families.step_text import Steps

FLAW_KINDS = ("arithmetic_slip", "wrong_operand", "skipped_step")
SLIPS = (-3, -2, -1, 1, 2, 3)


def check_kind(kind: str) -> None:
    if kind not in FLAW_KINDS:
        raise ValueError(f"unknown flaw kind {kind!r}; known: {', '.join(FLAW_KINDS)}")


def merge_next(steps: Steps, k: int, result: str) -> Steps:
    """``skipped_step``: step k claims the result of step k+1, which is left out."""
    head = steps[k].rsplit("=", 1)[0].rstrip()
    return [*steps[:k], f"{head} = {result}", *steps[k + 2:]]


def result_of(step: str) -> str:
    return step.rsplit("=", 1)[1].strip()
