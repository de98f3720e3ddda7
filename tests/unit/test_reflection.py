"""Reflection splice and SFT records on hand-built trees (UCB values computed by hand)."""

from __future__ import annotations

import random

import pytest

from raypress.operators.reasoning.tasks.families.step_text import solution_text
from raypress.operators.reasoning.search.reflection import DEFAULT_PHRASE, negative_siblings, reflective_path, sft_records
from raypress.operators.reasoning.search.result import BestPath, SearchResult
from raypress.operators.reasoning.search.tree import Tree
from raypress.operators.reasoning.search.types import Task

TASK = Task(id="q7", family="fake", question="make 7", answer="7")


class PromptFamily:
    """Only ``prompt`` matters here."""

    name = "fake"

    def prompt(self, task: Task, steps: list[str]) -> str:
        return f"Q: {task.question}\nSolution:\n" + "".join(f"{s}\n" for s in steps)


def solved_tree() -> tuple[Tree, list[int]]:
    """root -> A -> B -> C (answer 7 on C); A has siblings A1 (V -0.2, N 1), A2 (V -0.1, N 5) and
    A3 (V 0.05, N 50, a correct alternative); root N 8.
    UCB(A1) = -0.2 + 0.5·sqrt(ln 8 / 2) = 0.309833, UCB(A2) = -0.1 + 0.5·sqrt(ln 8 / 6) = 0.194353,
    UCB(A3) = 0.05 + 0.5·sqrt(ln 8 / 51) = 0.150962: A3 has the lowest UCB but is not negative, so
    the negative sibling is A2 (the lowest UCB among the negatives) though A1 has the lowest value."""
    tree = Tree("make 7")
    a, b, c = tree.add_path(0, ["A", "B", "C"], [1.0, 1.0, 1.0], "P")
    (a1,) = tree.add_path(0, ["A1"], [-0.2], "Q")
    (a2,) = tree.add_path(0, ["A2"], [-0.1], "Q")
    (a3,) = tree.add_path(0, ["A3"], [0.05], "Q")
    a2.visits = 5
    a3.visits = 50
    tree.root.visits = 8
    c.answer = "7"
    return tree, [a.id, b.id, c.id]


def test_lowest_ucb_negative_sibling_and_exact_splice():
    tree, path = solved_tree()
    assert tree.ucb(4) == pytest.approx(0.309833, abs=1e-6)
    assert tree.ucb(5) == pytest.approx(0.194353, abs=1e-6)
    assert tree.ucb(6) == pytest.approx(0.150962, abs=1e-6)
    ref = reflective_path(tree, path, rng=random.Random(3))
    assert ref is not None
    assert (ref.step_index, ref.negative_node_id, ref.correct_node_id) == (0, 5, path[0])
    assert ref.text == "A2\nThe previous step is wrong, let's rethink it.\nA\nB\nC\nAnswer: 7"


def test_no_reflection_when_no_sibling_is_negative():
    """Two correct alternatives (values >= 0) are not a mistake to reflect on."""
    tree = Tree("q")
    good = tree.add_path(0, ["4 + 3 = 7", "7 * 1 = 7"], [1.0, 1.0], "A")
    tree.add_path(0, ["3 + 4 = 7"], [0.0], "B")  # value 0 is not below t = 0
    tree.add_path(good[0].id, ["7 / 1 = 7"], [0.5], "B")
    good[-1].answer = "7"
    assert negative_siblings(tree, good[0].id) == []
    assert reflective_path(tree, [n.id for n in good]) is None
    tree.add_path(0, ["3 + 3 = 7"], [-1.0], "C")  # now a negative exists at step 0 only
    ref = reflective_path(tree, [n.id for n in good], rng=random.Random(0))
    assert ref is not None and ref.step_index == 0 and ref.steps[0] == "3 + 3 = 7"


def test_identical_steps_are_merged_so_a_step_is_never_its_own_negative():
    tree = Tree("q")
    first = tree.add_path(0, ["4 + 3 = 7", "Z"], [1.0, 1.0], "A")
    again = tree.add_path(0, ["4 + 3 = 7", "Y"], [1.0, 1.0], "B")  # same first step: merged
    assert again[0] is first[0] and len(tree.root.children) == 1 and len(tree) == 4
    assert tree[first[0].id].children == [first[1].id, again[1].id]
    # a pruned copy of a kept step is a different node (the flag differs), and is never its negative
    (cut,) = tree.add_path(0, ["4 + 3 = 7"], [-1.0], "C", pruned=True)
    assert cut is not first[0] and cut.pruned and not first[0].pruned
    assert negative_siblings(tree, first[0].id) == []
    first[-1].answer = "7"
    assert reflective_path(tree, [n.id for n in first]) is None


def test_splice_in_the_middle_with_custom_phrase_and_root_in_ids():
    tree = Tree("make 7")
    a, b, c = tree.add_path(0, ["A", "B", "C"], [1.0, 1.0, 1.0], "P")
    tree.add_path(a.id, ["B'"], [-1.0], "Q")  # only B has a (negative) sibling
    c.answer = "7"
    ref = reflective_path(tree, [0, a.id, b.id, c.id], phrase="Wait, that is wrong.")
    assert ref.step_index == 1
    assert ref.steps == ["A", "B'", "Wait, that is wrong.", "B", "C"]
    assert ref.text == "A\nB'\nWait, that is wrong.\nB\nC\nAnswer: 7"


def test_seeded_choice_covers_every_step_with_siblings():
    tree, path = solved_tree()
    tree.add_path(path[1], ["C'"], [-1.0], "Q")  # C gets a negative sibling too: positions 0 and 2 qualify
    chosen = {reflective_path(tree, path, rng=random.Random(s)).step_index for s in range(20)}
    assert chosen == {0, 2}
    again = [reflective_path(tree, path, rng=random.Random(5)).text for _ in range(2)]
    assert again[0] == again[1]


def test_none_without_siblings():
    tree = Tree("q")
    nodes = tree.add_path(0, ["A", "B"], [1.0, 1.0], "P")
    nodes[-1].answer = "7"
    assert reflective_path(tree, [n.id for n in nodes]) is None


def test_answer_required():
    tree = Tree("q")
    nodes = tree.add_path(0, ["A"], [1.0], "P")
    tree.add_path(0, ["A'"], [-0.5], "P")
    with pytest.raises(ValueError):
        reflective_path(tree, [nodes[0].id])
    assert reflective_path(tree, [nodes[0].id], answer="3").text == f"A'\n{DEFAULT_PHRASE}\nA\nAnswer: 3"


def test_reflection_survives_tree_rows_round_trip():
    tree, path = solved_tree()
    again = Tree.from_rows(tree.to_rows())
    assert reflective_path(again, path, rng=random.Random(1)).text == reflective_path(
        tree, path, rng=random.Random(1)
    ).text


def _result(solved: bool, tree: Tree, path: list[int]) -> SearchResult:
    best = BestPath(["A", "B", "C"], ["P", "P", "P"], "7", path) if solved else None
    return SearchResult("q7", "comcts", solved, "7" if solved else None, 1, 3, 0, 9, {}, tree, best)


def test_sft_records_shape():
    tree, path = solved_tree()
    ref = reflective_path(tree, path)
    prompt = "Q: make 7\nSolution:\n"
    records = sft_records(TASK, PromptFamily(), _result(True, tree, path), ref)
    assert records == [
        {
            "messages": [
                {"role": "user", "content": prompt},
                {"role": "assistant", "content": "A\nB\nC\nAnswer: 7"},
            ],
            "kind": "correct",
            "task_id": "q7",
        },
        {
            "messages": [
                {"role": "user", "content": prompt},
                {"role": "assistant", "content": f"A2\n{DEFAULT_PHRASE}\nA\nB\nC\nAnswer: 7"},
            ],
            "kind": "reflective",
            "task_id": "q7",
        },
    ]
    assert sft_records(TASK, PromptFamily(), _result(False, tree, path), None) == []
    assert solution_text([], "5") == "Answer: 5"


def test_a_pruned_negative_step_is_the_spliced_sibling():
    tree = Tree("q")
    good = tree.add_path(0, ["good", "next"], [1.0, 1.0], "A")
    bad = tree.add_path(0, ["bad"], [-1.0], "B")[0]
    bad.pruned = True
    good[-1].answer = "7"
    path = reflective_path(tree, [n.id for n in good], phrase="Wrong; again.", rng=random.Random(0))
    assert path is not None and path.negative_node_id == bad.id and path.step_index == 0
    assert path.text == "bad\nWrong; again.\ngood\nnext\nAnswer: 7"
