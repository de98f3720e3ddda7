"""The CoMCTS search tree: reasoning steps as nodes, and the tree operations of the search
(backpropagation, UCB selection).

Why its own module: the tree outlives the search: it is written to the output rows
(``to_rows``) and read back (``from_rows``) by reflection, which splices reflective paths out of
it without running any search.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

ROOT_ID = 0


@dataclass
class Node:
    """One reasoning step. ``score`` is R (the collective judge score), ``value`` V, ``visits`` N.

    ``answer`` is set on the last step of a path whose final answer solved the task (the answer is
    never a node of its own)."""

    id: int
    parent: int | None
    text: str
    policy: str
    score: float
    value: float
    visits: int
    depth: int
    round: int = 0
    judge_scores: list[float] = field(default_factory=list)
    children: list[int] = field(default_factory=list)
    answer: str | None = None
    exhausted: bool = False  # expanded once and nothing survived: skipped by the fallback selection
    pruned: bool = False  # the step a candidate was cut at (score < t): kept as reflection's negative
    # sibling, never selected, never part of backpropagation


class Tree:
    """The search tree: node 0 is the root (the question, no step), ids are creation order."""

    def __init__(self, question: str) -> None:
        self.question = question
        self.nodes: list[Node] = [Node(ROOT_ID, None, "", "", 0.0, 0.0, 0, 0)]

    @property
    def root(self) -> Node:
        return self.nodes[ROOT_ID]

    def __getitem__(self, node_id: int) -> Node:
        return self.nodes[node_id]

    def __len__(self) -> int:
        return len(self.nodes)

    def add_path(
        self,
        parent_id: int,
        steps: Sequence[str],
        scores: Sequence[float],
        policy: str,
        judge_scores: Sequence[Sequence[float]] | None = None,
        round: int = 0,
        pruned: bool = False,
    ) -> list[Node]:
        """Append a chain of steps under ``parent_id``; each new node starts with V = R, N = 1.

        A step whose text equals a child of its parent with the same ``pruned`` flag is merged
        into that child (the existing node is returned in its place, keeping its R): two policies
        writing the same step make one node, so a step is never its own sibling (reflection would
        otherwise splice "4 + 3 = 7 / wrong / 4 + 3 = 7").
        ``judge_scores[i]`` are the per-judge scores of step i (kept for the output rows)."""
        if len(steps) != len(scores):
            raise ValueError(f"{len(steps)} steps but {len(scores)} scores")
        added: list[Node] = []
        parent = self.nodes[parent_id]
        for i, (text, score) in enumerate(zip(steps, scores)):
            same = next((self.nodes[c] for c in parent.children
                         if self.nodes[c].text == text and self.nodes[c].pruned == pruned), None)
            if same is not None:
                added.append(same)
                parent = same
                continue
            node = Node(
                id=len(self.nodes),
                parent=parent.id,
                text=text,
                policy=policy,
                score=float(score),
                value=float(score),
                visits=1,
                depth=parent.depth + 1,
                round=round,
                judge_scores=[float(s) for s in judge_scores[i]] if judge_scores is not None else [],
                pruned=pruned,
            )
            self.nodes.append(node)
            parent.children.append(node.id)
            added.append(node)
            parent = node
        return added

    def path_to(self, node_id: int) -> list[Node]:
        """The nodes from the root's child down to ``node_id`` (empty for the root)."""
        path: list[Node] = []
        node = self.nodes[node_id]
        while node.parent is not None:
            path.append(node)
            node = self.nodes[node.parent]
        return path[::-1]

    def steps_to(self, node_id: int) -> list[str]:
        """The step texts from the root down to ``node_id``: the prefix a policy continues."""
        return [n.text for n in self.path_to(node_id)]

    def siblings(self, node_id: int) -> list[Node]:
        """The other children of ``node_id``'s parent, in creation order."""
        node = self.nodes[node_id]
        if node.parent is None:
            return []
        return [self.nodes[i] for i in self.nodes[node.parent].children if i != node_id]

    def ucb(self, node_id: int, c: float = 0.5) -> float:
        """V(s) + c·sqrt(log N(parent(s)) / (1 + N(s))); the root (no parent) scores its V."""
        node = self.nodes[node_id]
        if node.parent is None:
            return node.value
        parent_visits = self.nodes[node.parent].visits
        explore = math.sqrt(math.log(parent_visits) / (1 + node.visits)) if parent_visits > 1 else 0.0
        return node.value + c * explore

    def to_rows(self) -> list[dict[str, Any]]:
        """One dict per node with fixed keys and no nulls, so a list of them is one Arrow column
        (root: parent -1, text/policy ""; no answer: "")."""
        return [
            {
                "id": n.id,
                "parent": -1 if n.parent is None else n.parent,
                "depth": n.depth,
                "round": n.round,
                "text": n.text,
                "policy": n.policy,
                "score": n.score,
                "judge_scores": list(n.judge_scores),
                "value": n.value,
                "visits": n.visits,
                "answer": "" if n.answer is None else n.answer,
                "exhausted": n.exhausted,
                "pruned": n.pruned,
            }
            for n in self.nodes
        ]

    @classmethod
    def from_rows(cls, rows: Sequence[dict[str, Any]], question: str = "") -> "Tree":
        """Rebuild a tree from ``to_rows`` output (e.g. a later reflection stage reading the column)."""
        tree = cls(question)
        tree.nodes = []
        for row in sorted(rows, key=lambda r: int(r["id"])):
            parent = int(row["parent"])
            tree.nodes.append(
                Node(
                    id=int(row["id"]),
                    parent=None if parent < 0 else parent,
                    text=row["text"],
                    policy=row["policy"],
                    score=float(row["score"]),
                    value=float(row["value"]),
                    visits=int(row["visits"]),
                    depth=int(row["depth"]),
                    round=int(row.get("round", 0)),
                    judge_scores=[float(s) for s in row.get("judge_scores") or []],
                    answer=row.get("answer") or None,
                    exhausted=bool(row.get("exhausted", False)),
                    pruned=bool(row.get("pruned", False)),
                )
            )
        for i, node in enumerate(tree.nodes):
            if node.id != i:
                raise ValueError(f"tree rows are not ids 0..{len(rows) - 1}: found id {node.id} at {i}")
            if node.parent is not None:
                tree.nodes[node.parent].children.append(node.id)
        return tree


def backpropagate(tree: Tree, selected_id: int, new_paths: Sequence[Sequence[Node]]) -> None:
    """Backpropagation (paper step 3) after a round expanded ``selected_id`` (s_m).

    Inside each new chain, bottom-up, a new node's new parent gets V ← (N·V + R_child)/(N + 1),
    N ← N + 1. Then s_m and every ancestor up to the root get
    V ← (N·V + Σ R of s_m's new children)/(N + #new children), N ← N + #new children."""
    for path in new_paths:
        for i in range(len(path) - 2, -1, -1):
            parent, child = path[i], path[i + 1]
            parent.value = (parent.visits * parent.value + child.score) / (parent.visits + 1)
            parent.visits += 1
    firsts = [path[0] for path in new_paths if path]
    if not firsts:
        return
    total, count = sum(n.score for n in firsts), len(firsts)
    node: Node | None = tree[selected_id]
    while node is not None:
        node.value = (node.visits * node.value + total) / (node.visits + count)
        node.visits += count
        node = tree[node.parent] if node.parent is not None else None


def select(tree: Tree, added: Sequence[Node], c: float, max_depth: int) -> int:
    """Selection (paper step 4): the highest-UCB selectable node among those added this round;
    when none, among all non-root nodes not exhausted; when none, the root. A node is selectable
    when its depth is below ``max_depth`` and it is not exhausted. Ties go to the earlier node."""

    def selectable(n: Node) -> bool:
        return n.parent is not None and n.depth < max_depth and not n.exhausted and not n.pruned

    for pool in (added, tree.nodes):
        candidates = sorted((n for n in pool if selectable(n)), key=lambda n: n.id)
        if candidates:
            best, best_ucb = candidates[0], tree.ucb(candidates[0].id, c)
            for n in candidates[1:]:
                u = tree.ucb(n.id, c)
                if u > best_ucb:
                    best, best_ucb = n, u
            return best.id
    return ROOT_ID
