"""Reflective reasoning paths and SFT records from a solved search (Mulberry's reflection data).

Why splice from the tree: the search already produced, next to each step of the correct path, the
alternatives it weighed; among the siblings judged *negative* (value below the threshold, or cut
there by the judges) the lowest-UCB one is the step the search trusted least, so "that step, a
reflection phrase, the correct step" teaches a policy to notice and undo a bad step without
generating anything new. A sibling that is not negative is never used (Mulberry's code requires a
negative value): a correct alternative followed by "the previous step is wrong" would teach the
policy to distrust right steps. No negative sibling anywhere on the path: no reflective path.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Sequence

from raypress.operators.reasoning.tasks.families.step_text import solution_text
from raypress.operators.reasoning.search.result import SearchResult
from raypress.operators.reasoning.search.tree import ROOT_ID, Node, Tree
from raypress.operators.reasoning.search.types import Task, TaskFamily

DEFAULT_PHRASE = "The previous step is wrong, let's rethink it."


@dataclass
class ReflectivePath:
    """A solved path with one detour spliced in: ``steps`` already holds the negative sibling and
    the phrase before the correct step at ``step_index``."""

    steps: list[str]
    answer: str
    step_index: int  # position (in the solved path) of the correct step the detour precedes
    negative_node_id: int
    correct_node_id: int

    @property
    def text(self) -> str:
        return solution_text(self.steps, self.answer)


def reflective_path(
    tree: Tree,
    solved_path_node_ids: Sequence[int],
    phrase: str = DEFAULT_PHRASE,
    rng: random.Random | None = None,
    c: float = 0.5,
    answer: str | None = None,
    threshold: float = 0.0,
) -> ReflectivePath | None:
    """Splice (steps before, the lowest-UCB negative sibling, ``phrase``, the correct step, the
    rest, the answer) at a step of the solved path chosen by ``rng`` among those with at least one
    negative sibling (``negative_siblings``).

    ``answer`` defaults to the one the search recorded on the path's last node. None when no step
    of the path has a negative sibling."""
    ids = [i for i in solved_path_node_ids if i != ROOT_ID]
    if answer is None and ids:
        answer = tree[ids[-1]].answer
    if answer is None:
        raise ValueError("no final answer: pass answer= or a path whose last node holds one")
    with_negatives = [k for k, node_id in enumerate(ids) if negative_siblings(tree, node_id, threshold)]
    if not with_negatives:
        return None
    k = (rng or random.Random(0)).choice(with_negatives)
    correct = ids[k]
    negative = min(negative_siblings(tree, correct, threshold), key=lambda n: (tree.ucb(n.id, c), n.id))
    texts = [tree[i].text for i in ids]
    steps = texts[:k] + [negative.text, phrase] + texts[k:]
    return ReflectivePath(steps, answer, k, negative.id, correct)


def negative_siblings(tree: Tree, node_id: int, threshold: float = 0.0) -> list[Node]:
    """The siblings of ``node_id`` the search judged wrong: cut there (``pruned``) or valued below
    ``threshold``; never one with the same text (the tree merges those, this guards trees built
    otherwise)."""
    text = tree[node_id].text
    return [n for n in tree.siblings(node_id) if (n.pruned or n.value < threshold) and n.text != text]


def sft_records(
    task: Task, family: TaskFamily, result: SearchResult, reflective: ReflectivePath | None = None
) -> list[dict[str, Any]]:
    """Chat-format SFT rows: the correct path (when solved) and the reflective path (when built)."""
    prompt = family.prompt(task, [])
    records: list[dict[str, Any]] = []

    def record(content: str, kind: str) -> dict[str, Any]:
        return {
            "messages": [{"role": "user", "content": prompt}, {"role": "assistant", "content": content}],
            "kind": kind,
            "task_id": task.id,
        }

    if result.solved and result.best_path is not None:
        records.append(record(solution_text(result.best_path.steps, result.best_path.answer), "correct"))
    if reflective is not None:
        records.append(record(reflective.text, "reflective"))
    return records
