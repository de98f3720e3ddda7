"""Reasoning task families (reasoning-gym backed) and the ``reasoning_tasks`` reader, without Ray."""

from __future__ import annotations

import json
from random import Random

import pyarrow as pa
import pytest

from raypress.operators.reasoning import reasoning_tasks
from raypress.operators.reasoning.tasks.families.countdown import reachable
from raypress.operators.reasoning.tasks.families.flaws import FLAW_KINDS
from raypress.operators.reasoning.tasks.families.gsm_symbolic import arithmetic_claims
from raypress.operators.reasoning.tasks.families.step_text import safe_eval, solution_text
from raypress.operators.reasoning.reasoning_tasks import ReasoningTasks, read_family
from raypress.operators.reasoning.tasks.rows import task_from_row, task_to_row
from raypress.operators.reasoning.tasks.catalog import FAMILIES, flawed_solution, get_family, make_tasks, worked_solution
from raypress.operators.reasoning.search.types import Task, TaskFamily
from raypress.operators.registry import get_op

N_TASKS = 20


@pytest.fixture(scope="module")
def tasks() -> dict[str, list[Task]]:
    return {name: make_tasks(name, N_TASKS, seed=11) for name in FAMILIES}


def _full(task: Task) -> tuple:
    """Task equality ignores metadata; tests compare it too."""
    return task.id, task.family, task.question, task.answer, json.dumps(task.metadata, sort_keys=True)


# ---- worked and flawed solutions on seeded tasks ------------------------------------------


@pytest.mark.parametrize("family", list(FAMILIES))
def test_worked_solution_passes_checker_scorer_and_round_trips(tasks, family):
    fam = get_family(family)
    assert isinstance(fam, TaskFamily) and fam.name == family
    for task in tasks[family]:
        steps, final = worked_solution(task)
        assert steps, task.id
        verdicts = [fam.check_step(task, steps[:i], s) for i, s in enumerate(steps)]
        if family == "gsm_symbolic":  # no exact checker: never wrong, None for prose
            assert -1 not in verdicts and set(verdicts) <= {None}, (task.id, steps, verdicts)
        else:
            assert verdicts == [1] * len(steps), (task.id, steps, verdicts)
        assert fam.score(task, final), (task.id, final, task.answer)
        assert fam.split(solution_text(steps, final)) == (steps, final)


@pytest.mark.parametrize("kind", FLAW_KINDS)
@pytest.mark.parametrize("family", list(FAMILIES))
def test_flawed_solution_fails_the_checker_at_the_flawed_step(tasks, family, kind):
    fam = get_family(family)
    made = 0
    for i, task in enumerate(tasks[family]):
        good, good_final = worked_solution(task)
        try:
            steps, final = flawed_solution(task, Random(i), kind)
        except ValueError:  # a gsm solution without any checkable arithmetic (rare)
            assert family == "gsm_symbolic"
            continue
        made += 1
        k = next(j for j, (a, b) in enumerate(zip(steps, good + [None] * len(steps))) if a != b)
        assert steps[:k] == good[:k]  # the steps before the flaw are the worked solution's
        assert fam.check_step(task, steps[:k], steps[k]) == -1, (task.id, kind, steps, k)
        skipped = len(steps) < len(good)  # else a one-step solution: skipped_step falls back to a slip
        if kind == "skipped_step" and skipped and family != "gsm_symbolic":
            assert final == good_final  # the claimed result is right, one step early
        elif family in ("chain_arithmetic", "simple_equations"):
            assert not fam.score(task, final), (task.id, kind, final)  # the error carries to the answer
    assert made >= N_TASKS - 3


def test_unknown_flaw_kind_and_family():
    task = make_tasks("chain_arithmetic", 1, seed=0)[0]
    with pytest.raises(ValueError, match="unknown flaw kind"):
        flawed_solution(task, Random(0), "typo")
    with pytest.raises(ValueError, match="did you mean 'countdown'"):
        get_family("countdwn")


# ---- countdown --------------------------------------------------------------------------------


def _countdown(numbers: list[int], target: int, answer: str) -> Task:
    return Task("cd", "countdown", f"make {target} from {numbers}", answer, {"numbers": numbers, "target": target})


def test_countdown_checker_requires_arithmetic_availability_and_reachability():
    fam = get_family("countdown")
    task = _countdown([2, 3, 5], 25, "(2 + 3) * 5")
    assert fam.check_step(task, [], "2 + 3 = 5") == 1  # 5, 5 -> 5 * 5 = 25
    assert fam.check_step(task, [], "2 + 3 = 6") == -1  # arithmetic
    # right arithmetic, available operands, but 6, 5 can only make 11, 30, 1, -1: unreachable
    assert fam.check_step(task, [], "2 * 3 = 6") == -1
    assert fam.check_step(task, [], "3 + 5 = 8") == -1  # 8, 2 -> 10, 16, 6, -6, 4
    assert fam.check_step(task, [], "3 * 3 = 9") == -1  # 3 is given once
    assert fam.check_step(task, [], "2 + 7 = 9") == -1  # 7 is not given
    assert fam.check_step(task, ["2 + 3 = 5"], "5 * 5 = 25") == 1
    assert fam.check_step(task, ["2 + 3 = 5"], "5 * 2 = 10") == -1  # 2 is used up
    assert fam.check_step(task, ["2 + 3 = 6"], "6 * 5 = 30") == -1  # the prefix does not replay
    assert fam.check_step(task, [], "two plus three") == -1
    assert fam.check_step(task, [], "2 × 3 = 6") == -1 and fam.check_step(task, [], "2 x 3 = 5") == -1
    assert (reachable((5, 5), 25), reachable((6, 5), 25)) == (True, False)


def test_countdown_score_goes_through_reasoning_gym_but_only_for_plain_arithmetic():
    fam = get_family("countdown")
    task = _countdown([2, 3, 5], 25, "(2 + 3) * 5")
    assert fam.score(task, "(2 + 3) * 5") and fam.score(task, "5*(3+2)")
    assert not fam.score(task, "2 * 3 + 5")  # 11
    assert not fam.score(task, "5 * 5")  # not all numbers
    assert not fam.score(task, "__import__('os').getcwd()")
    assert not fam.score(task, "")


def test_countdown_worked_solution_is_the_expected_text():
    # the solver tries pairs in order, natural moves first; the expression is rebuilt from the steps
    assert worked_solution(_countdown([2, 3, 5], 25, "(2 + 3) * 5")) == (["3 + 2 = 5", "5 * 5 = 25"], "5 * (3 + 2)")
    steps, final = worked_solution(_countdown([94, 4, 61, 6], 309, "94*4 - 61 - 6"))
    assert (steps, final) == (["61 + 6 = 67", "94 * 4 = 376", "376 - 67 = 309"], "94 * 4 - (61 + 6)")


# ---- chain arithmetic -------------------------------------------------------------------------


def test_chain_checker_wants_the_next_operation_on_the_previous_result():
    fam = get_family("chain_arithmetic")
    task = Task("ch", "chain_arithmetic", "4 - 1 - 7 =", "-4", {"expression": "4 - 1 - 7"})
    assert worked_solution(task) == (["4 - 1 = 3", "3 - 7 = -4"], "-4")
    assert fam.check_step(task, [], "4 - 1 = 3") == 1
    assert fam.check_step(task, ["4 - 1 = 3"], "3 - 7 = -4") == 1
    assert fam.check_step(task, ["4 - 1 = 3"], "3 - 7 = -3") == -1  # arithmetic
    assert fam.check_step(task, ["4 - 1 = 3"], "3 + 7 = 10") == -1  # not the chain's operation
    assert fam.check_step(task, [], "4 - 7 = -3") == -1  # skips an operation
    assert fam.check_step(task, ["4 - 1 = 3", "3 - 7 = -4"], "-4 - 0 = -4") == -1  # past the end
    assert fam.score(task, "-4") and not fam.score(task, "-3")


# ---- simple equations -------------------------------------------------------------------------


def _equation() -> Task:
    meta = {"equation": "56 - 98*e = -1218", "variable": "e"}
    return Task("eq", "simple_equations", "Solve for e: 56 - 98*e = -1218", "13", meta)


def test_simple_equations_worked_steps_and_checker():
    fam = get_family("simple_equations")
    task = _equation()
    assert worked_solution(task) == (["-98*e = -1218 - 56 = -1274", "e = -1274 / -98 = 13"], "13")
    assert fam.check_step(task, [], "-98*e = -1218 - 56 = -1274") == 1
    assert fam.check_step(task, [], "e = 13") == 1
    assert fam.check_step(task, [], "-98*e = -1218 - 56 = -1174") == -1  # wrong intermediate
    assert fam.check_step(task, [], "-98*e = -1218 + 56") == -1  # sign error
    assert fam.check_step(task, [], "e = 12") == -1
    assert fam.check_step(task, [], "13") == -1  # no '='
    assert fam.check_step(task, [], "e = __import__('os').getpid()") == -1
    assert fam.check_step(task, [], "e = 2**100") == -1  # only + - * /
    assert fam.check_step(task, [], "98e = 1274") == -1  # unparsable side
    assert fam.score(task, "13") and not fam.score(task, "14")


def test_safe_eval_allows_only_arithmetic():
    assert safe_eval("2*(3+4) - -1/2") == pytest.approx(14.5)
    assert safe_eval("x / 4", {"x": safe_eval("10")}) == safe_eval("2.5")
    for bad in ("__import__('os')", "2**10", "y + 1", "1/0", "(1" * 400, "", "True + 1", "[1][0]"):
        with pytest.raises(ValueError):
            safe_eval(bad)


# ---- gsm_symbolic -----------------------------------------------------------------------------


def test_gsm_checker_flags_only_wrong_arithmetic_claims():
    fam = get_family("gsm_symbolic")
    task = make_tasks("gsm_symbolic", 1, seed=0)[0]
    check = lambda line: fam.check_step(task, [], line)  # noqa: E731
    assert check("So she has 3 * 4 = 12 apples.") is None
    assert check("So she has 3 * 4 = 13 apples.") == -1
    assert check("100 ladybugs + 200 bees = 300 insects") is None
    assert check("100 ladybugs + 200 bees = 301 insects") == -1
    assert check("He paid $810000 x 5/100 = $40500 in fees") is None
    assert check("Robert has €28.44 - €13.44 = €14 left.") == -1  # a real reasoning-gym slip
    assert check("so that's 0.52*40 = 20 students") is None  # GSM floors counts
    assert check("the total - 3 + 2 = 10") is None  # 3 + 2 is part of a longer expression
    assert check("it takes 14÷1/2=28 minutes") is None  # ambiguous division chain
    assert check("5 / 10 = 50.0%") is None
    assert check("He went home happy.") is None
    assert [(c.value, c.stated) for c in arithmetic_claims("or 400*0.75=300 ogres")] == [(300, 300)]


def test_gsm_flawed_solution_needs_a_claim():
    task = Task("g", "gsm_symbolic", "q", "5", {"answer_cot": "He has five apples.\n#### 5"})
    assert worked_solution(task) == (["He has five apples."], "5")
    with pytest.raises(ValueError, match="no arithmetic claim"):
        flawed_solution(task, Random(0), "arithmetic_slip")


# ---- the shared format ------------------------------------------------------------------------


def test_prompt_is_question_header_and_steps():
    task = Task("t", "chain_arithmetic", "What is 4 - 1 - 7?", "-4", {"expression": "4 - 1 - 7"})
    for fam in FAMILIES.values():
        assert fam.prompt(task, []) == "What is 4 - 1 - 7?\nSolution:\n"
        assert fam.prompt(task, ["4 - 1 = 3", "3 - 7 = -4"]) == "What is 4 - 1 - 7?\nSolution:\n4 - 1 = 3\n3 - 7 = -4\n"


def test_solution_text_and_split():
    fam = get_family("countdown")
    assert solution_text(["a", "b"], "5") == "a\nb\nAnswer: 5"
    assert solution_text([], "5") == "Answer: 5"
    assert fam.split("") == ([], None)
    assert fam.split("  \n\n ") == ([], None)
    assert fam.split("lorem ipsum dolor") == (["lorem ipsum dolor"], None)
    assert fam.split("1 + 2 = 3\n") == (["1 + 2 = 3"], None)
    assert fam.split(" a \n\n b\nAnswer: 5 \nc\nAnswer: 6") == (["a", "b"], "5")  # the first Answer wins
    assert fam.split("answer: 7") == ([], "7")
    assert fam.split("x = 1\nAnswer:   \nmore") == (["x = 1"], None)  # an empty answer is no answer


# ---- make_tasks -------------------------------------------------------------------------------


@pytest.mark.parametrize("family", list(FAMILIES))
def test_make_tasks_is_deterministic_prefix_stable_and_seeds_do_not_overlap(tasks, family):
    five = make_tasks(family, 5, seed=11)
    assert [_full(t) for t in five] == [_full(t) for t in tasks[family][:5]]
    assert [t.id for t in five] == [f"{family}-11-{i}" for i in range(5)]
    for t in five:
        assert json.loads(json.dumps(t.metadata)) == t.metadata and t.family == family
    other = {t.question for t in make_tasks(family, 5, seed=12)}
    assert len(other & {t.question for t in tasks[family]}) <= 1  # reasoning-gym alone would share 19


def test_make_tasks_difficulty():
    three = make_tasks("countdown", 4, seed=1, min_numbers=3, max_numbers=3)
    assert [len(t.metadata["numbers"]) for t in three] == [3, 3, 3, 3]
    chains = make_tasks("chain_arithmetic", 4, seed=1, min_terms=2, max_terms=2)
    assert [len(t.metadata["expression"].split()) for t in chains] == [3, 3, 3, 3]
    with pytest.raises(ValueError, match="unknown difficulty settings"):
        make_tasks("countdown", 1, seed=1, numbers=3)
    with pytest.raises(ValueError, match="invalid difficulty"):
        make_tasks("countdown", 1, seed=1, min_numbers=4, max_numbers=3)


# ---- the reader -------------------------------------------------------------------------------


def test_reader_is_registered_and_validates_params():
    assert get_op("reasoning_tasks") is ReasoningTasks
    P = ReasoningTasks.Params
    assert P().families == list(FAMILIES)
    with pytest.raises(ValueError, match="did you mean 'gsm_symbolic'"):
        P(families=["gsm_symbolc"])
    with pytest.raises(ValueError, match="listed twice"):
        P(families=["countdown", "countdown"])
    with pytest.raises(ValueError, match="not read"):
        P(families=["countdown"], difficulty={"chain_arithmetic": {}})
    with pytest.raises(ValueError, match="unknown difficulty settings"):
        P(families=["countdown"], difficulty={"countdown": {"numbers": 3}})
    with pytest.raises(ValueError):
        P(families=["countdown"], n_per_family=0)


def test_reader_rows_round_trip_to_tasks(tasks):
    (table,) = list(read_family({"family": "simple_equations", "difficulty": {}}, n=3, seed=11))
    assert table.column_names[:5] == ["id", "family", "question", "answer", "metadata"]
    rows = table.to_pylist()
    assert [_full(task_from_row(r)) for r in rows] == [_full(t) for t in tasks["simple_equations"][:3]]
    assert task_to_row(tasks["countdown"][0])["metadata"] == json.dumps(tasks["countdown"][0].metadata, sort_keys=True)


def test_reader_fans_out_one_read_per_family(monkeypatch):
    seen = []

    def fake_map_items(items, read_one, ctx):
        seen.extend(items)
        return pa.concat_tables([t for item in items for t in read_one(item)], promote_options="default")

    monkeypatch.setattr(reasoning_tasks, "map_items", fake_map_items)
    params = ReasoningTasks.Params(families=["chain_arithmetic", "countdown"], n_per_family=2, seed=3,
                                   difficulty={"countdown": {"min_numbers": 3, "max_numbers": 3}})
    table = ReasoningTasks(params).read(ctx=None)
    assert seen == [{"family": "chain_arithmetic", "difficulty": {}},
                    {"family": "countdown", "difficulty": {"min_numbers": 3, "max_numbers": 3}}]
    ids = ["chain_arithmetic-3-0", "chain_arithmetic-3-1", "countdown-3-0", "countdown-3-1"]
    assert table.column("id").to_pylist() == ids
    assert [len(json.loads(m)["numbers"]) for m in table.column("metadata").to_pylist()[2:]] == [3, 3]
