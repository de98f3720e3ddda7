"""What one question's search (or baseline) returns, and its output row.

Why its own module: the search, the baselines, reflection, the SFT records and the Serve app all
read a result; only the search writes one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from raypress.operators.reasoning.search.tree import Tree


@dataclass
class BestPath:
    """The solution a method returns: its steps, which policy wrote each, the node ids, the answer."""

    steps: list[str]
    policies: list[str]
    answer: str
    node_ids: list[int] = field(default_factory=list)  # empty for methods without a tree


@dataclass
class SearchResult:
    """What one question's search (or baseline) spent and found."""

    task_id: str
    method: str
    solved: bool
    final_answer: str | None  # the best path's answer; None when a tree method did not solve
    rounds: int
    policy_calls: int
    judge_calls: int  # model calls reported by judges (exact checkers report 0)
    tokens: int  # sum of PolicyReply.tokens over the policy calls
    failures: dict[str, int]  # failed policy calls (error or no steps and no answer) by policy name
    tree: Tree | None = None
    best_path: BestPath | None = None
    path_has_wrong_step: bool | None = None  # per family.check_step on the solved path; None: unknown

    @property
    def calls(self) -> int:
        """Model calls charged to the budget."""
        return self.policy_calls + self.judge_calls

    def to_row(self) -> dict[str, Any]:
        """JSON-serialisable columns. ``failures`` is a JSON string because its keys (policy names)
        differ between methods, which would not make one Arrow struct type."""
        best = self.best_path
        return {
            "task_id": self.task_id,
            "method": self.method,
            "solved": self.solved,
            "final_answer": self.final_answer,
            "rounds": self.rounds,
            "policy_calls": self.policy_calls,
            "judge_calls": self.judge_calls,
            "calls": self.calls,
            "tokens": self.tokens,
            "failures": json.dumps(self.failures, sort_keys=True),
            "failed_calls": sum(self.failures.values()),
            "tree": self.tree.to_rows() if self.tree is not None else [],
            "best_steps": list(best.steps) if best else [],
            "best_policies": list(best.policies) if best else [],
            "best_node_ids": list(best.node_ids) if best else [],
            "best_answer": best.answer if best else None,
            "path_has_wrong_step": self.path_has_wrong_step,
        }
