"""Parts written by parallel sink tasks are numbered in the order their rows arrived."""

from __future__ import annotations

from pathlib import Path

from raypress.dag.sink import LIVE, PART, number_parts, parts_in_order, sum_tallies


def tally(kind: str, reason: str = "", n: int = 0) -> dict:
    return {"node": "", "kind": kind, "reason": reason, "n": n}


def test_part_tallies_give_the_order_and_do_not_count_rows():
    rows = [tally(PART, "bbbbbbbbbbbbbbbb"), tally(LIVE, n=3), tally(PART, "aaaaaaaaaaaaaaaa"), tally(LIVE, n=2)]
    assert parts_in_order(rows) == ["bbbbbbbbbbbbbbbb", "aaaaaaaaaaaaaaaa"]
    assert sum_tallies(rows) == {("", LIVE, ""): 5}


def test_parts_are_renamed_so_that_name_order_is_arrival_order(tmp_path: Path):
    out, rejects = tmp_path / "out", tmp_path / "rejects"
    (out / "nested").mkdir(parents=True)
    rejects.mkdir()
    late, early = "ffffffffffffffff", "0000000000000000"
    for folder in (out, out / "nested"):
        (folder / f"part-{late}.jsonl").write_text("late\n")
        (folder / f"part-{early}.jsonl").write_text("early\n")
    (rejects / f"part-{late}.parquet").write_text("r")
    (out / "README").write_text("not a part")
    assert number_parts([out, rejects, tmp_path / "missing"], [late, early]) == 5
    assert [p.read_text() for p in sorted(out.glob("part-*"))] == ["late\n", "early\n"]
    assert sorted(p.name for p in (out / "nested").glob("part-*")) == [
        f"part-00000000-{late}.jsonl", f"part-00000001-{early}.jsonl"]
    assert [p.name for p in rejects.iterdir()] == [f"part-00000000-{late}.parquet"]
    assert (out / "README").exists()
