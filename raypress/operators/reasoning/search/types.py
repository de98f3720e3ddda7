"""The shared vocabulary of the reasoning ops: a task, its family's step format, policies and judges.

Why protocols: the search (``comcts.py``) must not care whether a policy is a local LM in a Ray
actor, an OpenAI-compatible endpoint or a rule-based test fixture, nor whether a judge is an exact
checker or a model; each only has to answer these calls.

Step format, common to every family: a response is one reasoning step per line, then a final line
``Answer: <value>``. The final answer is never a tree node.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

ANSWER_PREFIX = "Answer:"


@dataclass(frozen=True)
class Task:
    """One question of a family, with its ground truth (the scorer's input)."""

    id: str
    family: str
    question: str
    answer: str
    metadata: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)


@dataclass(frozen=True)
class PolicyReply:
    """What one policy call returned: the continuation text, its token count, or why it failed."""

    text: str
    tokens: int = 0
    error: str | None = None  # set when the call failed (timeout, HTTP error, garbage): text is ""


@runtime_checkable
class TaskFamily(Protocol):
    """A task family's format, scorer and (when it has one) exact step checker."""

    name: str

    def prompt(self, task: Task, steps: list[str]) -> str:
        """The text a policy continues: the question, the solution header, the steps so far
        (each ending in a newline)."""
        ...

    def split(self, text: str) -> tuple[list[str], str | None]:
        """A continuation -> (its steps, its final answer or None when there is no Answer line)."""
        ...

    def score(self, task: Task, final_answer: str) -> bool:
        """Is the final answer correct (the family's ground-truth scorer)?"""
        ...

    def check_step(self, task: Task, previous: list[str], step: str) -> int | None:
        """Exact step check: +1 correct, -1 wrong, None when this family cannot tell."""
        ...


class Policy(Protocol):
    """A model that continues prompts. Must not raise for a bad generation: it returns a
    ``PolicyReply`` with ``error`` set, and the search counts the failure and goes on."""

    name: str

    async def complete(self, prompt: str, max_tokens: int, temperature: float, seed: int | None = None) -> PolicyReply:
        ...


class Judge(Protocol):
    """Scores steps in {-1, 0, +1}; ``model_calls`` is how many model calls that cost (0 for an
    exact checker), so the search can charge them to its budget. ``calls_per_path`` (optional,
    default 0) is what judging one candidate path costs, so a round reserves it up front."""

    name: str

    async def score_steps(self, task: Task, previous: list[str], steps: list[str]) -> tuple[list[float], int]:
        """Scores of ``steps`` (continuing ``previous``) and the model calls spent."""
        ...
