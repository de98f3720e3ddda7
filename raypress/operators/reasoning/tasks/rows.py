"""A ``Task`` as a Dataset row and back.

Why its own module: ``reasoning_tasks`` writes these rows and the search, the evaluation and the
policy training read them, so the row format is defined once. ``metadata`` travels as a JSON
string (each family's is shaped differently).
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa

from raypress.operators.reasoning.search.types import Task
from raypress.schema import ID_COL

COLUMNS = (ID_COL, "family", "question", "answer", "metadata")


def tasks_table(tasks: list[Task]) -> pa.Table:
    rows = [task_to_row(t) for t in tasks]
    return pa.table({c: pa.array([r[c] for r in rows], pa.string()) for c in COLUMNS})


def task_to_row(task: Task) -> dict[str, str]:
    return {ID_COL: task.id, "family": task.family, "question": task.question, "answer": task.answer,
            "metadata": json.dumps(task.metadata, sort_keys=True)}


def task_from_row(row: dict[str, Any]) -> Task:
    """A Dataset row of ``reasoning_tasks`` (extra columns ignored) back into the ``Task`` it came from."""
    return Task(str(row[ID_COL]), row["family"], row["question"], row["answer"], json.loads(row["metadata"]))
