"""The ``comcts_search`` stage's run logic (every method, `@best`, copies, rows, reflection, SFT)
with rule-based solver policies and no Ray; then the report stage's table over those rows."""

from __future__ import annotations

import asyncio
import json

import pytest

pytest.importorskip("reasoning_gym")

from raypress.operators.base import RunContext  # noqa: E402
from raypress.operators.reasoning.comcts_search import ComctsSearch, SearchStageParams  # noqa: E402
from raypress.operators.reasoning.reasoning_report import summarise_run  # noqa: E402
from raypress.operators.reasoning.tasks.catalog import make_tasks  # noqa: E402
from reasoning_fixtures import RuleSolver  # noqa: E402

RUNS = [
    {"name": "direct-good", "method": "direct", "policies": ["good"]},
    {"name": "direct-sloppy", "method": "direct", "policies": ["sloppy"]},
    {"name": "independent", "method": "independent", "policies": ["good", "sloppy", "broken"]},
    {"name": "mcts-best", "method": "comcts", "policies": ["@best"], "judges": ["exact"]},
    {"name": "copies", "method": "comcts", "policies": ["@best", "@best"], "judges": ["exact"]},
    {"name": "comcts", "method": "comcts", "policies": ["sloppy", "broken", "good"], "judges": ["exact"]},
]


def test_every_run_over_every_question_with_equal_accounting(tmp_path):
    import numpy as np

    tasks = make_tasks("chain_arithmetic", 12, seed=4) + make_tasks("countdown", 6, seed=4)
    policies = {"good": RuleSolver("good", tasks, error_rate=0.1, seed=1),
                "sloppy": RuleSolver("sloppy", tasks, error_rate=0.7, seed=2),
                "broken": RuleSolver("broken", tasks, garbage=True)}
    stage = ComctsSearch(SearchStageParams(runs=RUNS, search={"budget": 6, "max_tokens": 64}, seed=0))
    events: list[dict] = []
    ctx = RunContext(run_dir=str(tmp_path), node_id="search", emit=events.append)
    rows = asyncio.run(stage._all_runs(tasks, policies, ctx))

    assert len(rows) == len(RUNS) * len(tasks)
    by_run = {run["name"]: [r for r in rows if r["run"] == run["name"]] for run in RUNS}
    assert all(len(v) == len(tasks) for v in by_run.values())
    assert all(r["calls"] <= 6 for r in rows)  # exact judges: the budget is never exceeded
    assert all(r["calls"] == 1 for r in by_run["direct-good"])
    # @best resolved to the more accurate direct policy, and copies run as separate policies
    assert json.loads(by_run["mcts-best"][0]["policies"]) == ["good"]
    assert json.loads(by_run["copies"][0]["policies"]) == ["good", "good"]
    # the garbage policy's calls are counted as failures, and the others still solve
    comcts = by_run["comcts"]
    assert sum(json.loads(r["failures"]).get("broken", 0) for r in comcts) >= len(tasks)
    assert sum(r["solved"] for r in comcts) >= len(tasks) - 1
    # solved CoMCTS rows carry their tree, best path, SFT records (correct + reflective when built)
    solved = [r for r in comcts if r["solved"]]
    for row in solved:
        kinds = [rec["kind"] for rec in json.loads(row["sft"])]
        assert kinds[0] == "correct" and kinds.count("reflective") == (1 if row["reflective_path"] else 0)
        assert row["tree"][0]["parent"] == -1 and row["best_steps"]
    assert any(r["reflective_path"] for r in solved)  # sloppy steps were pruned: negatives exist
    assert [e["run"] for e in events if e["event"] == "search_run"] == [r["name"] for r in RUNS]

    line = summarise_run(comcts, 500, np.random.default_rng(0))
    assert line["questions"] == len(tasks) and line["calls_mean"] <= 6
    assert line["failed_calls"]["broken"] >= len(tasks)


def test_bad_run_specs_are_named(tmp_path):
    stage = ComctsSearch(SearchStageParams(runs=[{"name": "r", "method": "comcts", "policies": ["nope"]}]))
    with pytest.raises(ValueError, match="run 'r': unknown policies \\['nope'\\]"):
        stage._check_names({"a": "/x"}, "search")
    stage = ComctsSearch(SearchStageParams(runs=[{"name": "r", "method": "comcts", "policies": ["a"],
                                                  "judges": ["oracle"]}]))
    with pytest.raises(ValueError, match="judges must be"):
        stage._check_names({"a": "/x"}, "search")
    early_best = ComctsSearch(SearchStageParams(runs=[{"name": "r", "method": "comcts", "policies": ["@best"]}]))
    ctx = RunContext(run_dir=str(tmp_path), node_id="search")
    with pytest.raises(ValueError, match="no single-policy `direct` run came before it"):
        asyncio.run(early_best._all_runs(make_tasks("chain_arithmetic", 1, seed=0), {}, ctx))
