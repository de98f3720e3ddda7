"""A Data-Juicer recipe run keeps the input's ids, exports without `stats` (Data-Juicer's
default), reports the ids it had to assign, and a failed run leaves no export file."""

from __future__ import annotations

import json
import textwrap

import pytest

from raypress.dag.runner import RunFailed, run_pipeline

pytestmark = pytest.mark.integration


def write_recipe(tmp_path, head: str = "", process: str = "") -> str:
    docs = [{"id": "doc00000", "text": "one two three four five six"},
            {"id": "usr/share/doc/pkg#0", "text": "too short"},
            {"text": "a row without an id has seven words here"},
            {"id": "doc00000", "text": "a repeated id gets a line id of its own"},
            {"id": 42, "text": "numeric ids become strings in the output rows"}]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(f"dataset_path: {tmp_path}/in.jsonl\nexport_path: {tmp_path}/out/result.jsonl\n"
                      + textwrap.dedent(head) + "process:\n"
                      + (process or "  - words_num_filter:\n      min_num: 5\n"))
    return str(recipe)


def test_recipe_keeps_ids_drops_stats_and_counts_assigned_ids(ray_session, tmp_path):
    ledger = run_pipeline(write_recipe(tmp_path), run_dir=str(tmp_path / "run"))
    assert ledger["adds_up"], ledger["problems"]
    rows = [json.loads(line) for line in (tmp_path / "out" / "result.jsonl").read_text().splitlines()]
    assert sorted(r["id"] for r in rows) == sorted(["doc00000", f"{tmp_path}/in.jsonl:3", f"{tmp_path}/in.jsonl:4", "42"])
    assert all("stats" not in r for r in rows)  # keep_stats_in_res_ds defaults to false, as in Data-Juicer
    events = [json.loads(line) for line in (tmp_path / "run" / "events.jsonl").read_text().splitlines()]
    (assigned,) = [e for e in events if e["event"] == "ids_assigned"]
    assert (assigned["node"], assigned["assigned"], assigned["missing"], assigned["repeated"]) == ("dataset", 2, 1, 1)
    assert ledger["nodes"]["dataset"]["ids_assigned"] == 2  # and the ledger says how many
    assert json.loads((tmp_path / "run" / "ledger.json").read_text())["nodes"]["dataset"]["ids_assigned"] == 2


def test_keep_stats_in_res_ds_true_exports_the_stats(ray_session, tmp_path):
    run_pipeline(write_recipe(tmp_path, "keep_stats_in_res_ds: true\n"), run_dir=str(tmp_path / "run"))
    rows = [json.loads(line) for line in (tmp_path / "out" / "result.jsonl").read_text().splitlines()]
    assert rows and all(r["stats"]["num_words"] >= 5 for r in rows)


def test_a_failed_run_leaves_no_export_file(ray_session, tmp_path):
    # every row fails (the text column does not exist), so the run fails over max_error_ratio
    recipe = write_recipe(tmp_path, "text_keys: no_such_column\n")
    with pytest.raises(RunFailed, match="max_error_ratio"):
        run_pipeline(recipe, run_dir=str(tmp_path / "run"))
    out = tmp_path / "out"
    left = sorted(p.name for p in out.iterdir()) if out.exists() else []
    assert "result.jsonl" not in left, left
    assert not [n for n in left if "staging" in n or n.endswith(".tmp")], left
