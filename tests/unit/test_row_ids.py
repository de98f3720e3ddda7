"""read_jsonl keeps a row's own `id` so the output joins back to the input; `path:line` only where
the id is missing, null, empty or repeated in its file, and the count of those is reported."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

import raypress.operators.io.read_jsonl as jsonl
from raypress.operators.io.read_jsonl import ReaderTally, ReadJsonlParams, own_id, read_jsonl_file
from raypress.schema import REASON_COL


class _Remote:
    """Stands in for the reader's ``TallyRef``: ``counter.add(m, r, rep)`` calls the plain object."""

    def __init__(self, target: ReaderTally):
        self.add = target.add


def rows_of(path, **kwargs) -> list[dict]:
    tables = list(read_jsonl_file(path.name, str(path), node="r", id_key=None, **kwargs))
    return [r for t in tables for r in t.to_pylist()]


def write(path, records) -> None:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))


def test_own_ids_are_kept_and_assigned_only_where_missing_null_empty_or_repeated(tmp_path, monkeypatch):
    import ray

    monkeypatch.setattr(ray, "get", lambda ref: ref)  # the reader waits for its counter call; no Ray here
    path = tmp_path / "in.jsonl"
    write(path, [{"id": "doc00000", "text": "a"}, {"text": "no id"}, {"id": None, "text": "null"},
                 {"id": "", "text": "empty"}, {"id": "doc00000", "text": "repeat"}, {"id": 7, "text": "int"},
                 {"id": "usr/share/doc/x#0", "text": "path-like"}])
    totals = ReaderTally()
    rows = rows_of(path, counter=_Remote(totals))
    assert [r["id"] for r in rows] == ["doc00000", "in.jsonl:2", "in.jsonl:3", "in.jsonl:4", "in.jsonl:5", "7",
                                       "usr/share/doc/x#0"]
    assert all(r[REASON_COL] is None for r in rows)  # mixed id types are no schema conflict
    assert totals.totals() == {"assigned": 4, "missing": 3, "repeated": 1, "repaired": 0}


def test_a_lone_surrogate_is_replaced_and_counted_and_a_pair_is_not(tmp_path, monkeypatch):
    """Issue 32 case 6: such a row was quarantined as a schema conflict, its text lost."""
    import ray

    monkeypatch.setattr(ray, "get", lambda ref: ref)
    path = tmp_path / "in.jsonl"
    path.write_text('{"id": "a", "text": "lone \\udc80 low", "tags": ["\\ud800"]}\n'
                    '{"id": "b", "text": "pair \\ud83d\\ude00"}\n{"id": "c", "\\ud801": 1}\n')
    totals = ReaderTally()
    rows = rows_of(path, counter=_Remote(totals))
    assert [r[REASON_COL] for r in rows] == [None, None, None]
    assert rows[0]["text"] == "lone \ufffd low" and rows[0]["tags"] == ["\ufffd"]
    assert rows[1]["text"] == "pair \U0001F600" and rows[2]["\ufffd"] == 1
    assert totals.totals()["repaired"] == 2


def test_repeats_are_found_across_the_chunks_of_one_file(tmp_path, monkeypatch):
    monkeypatch.setattr(jsonl, "CHUNK_LINES", 2)
    path = tmp_path / "in.jsonl"
    write(path, [{"id": f"d{i % 3}"} for i in range(6)])
    assert [r["id"] for r in rows_of(path)] == ["d0", "d1", "d2", "in.jsonl:4", "in.jsonl:5", "in.jsonl:6"]


def test_first_occurrence_in_file_order_keeps_the_id_and_reruns_agree(tmp_path):
    path = tmp_path / "in.jsonl"
    write(path, [{"id": "x", "n": 1}, "not json", {"id": "x", "n": 2}])
    first = rows_of(path)
    assert [(r["id"], r.get("n")) for r in first if r[REASON_COL] is None] == [("x", 1), ("in.jsonl:3", 2)]
    assert rows_of(path) == first


def test_no_counter_call_when_every_row_has_its_own_unique_id(tmp_path):
    path = tmp_path / "in.jsonl"
    write(path, [{"id": "a"}, {"id": "b"}])

    class Fail:
        class add:  # noqa: N801 - mimics an actor method
            @staticmethod
            def remote(*_):
                raise AssertionError("nothing was assigned")

    assert [r["id"] for r in rows_of(path, counter=Fail())] == ["a", "b"]


def test_assign_ids_forces_path_line_ids(tmp_path):
    path = tmp_path / "in.jsonl"
    write(path, [{"id": "a"}, {"id": "b"}])
    assert [r["id"] for r in rows_of(path, assign_ids=True)] == ["in.jsonl:1", "in.jsonl:2"]


def test_assign_ids_and_id_key_exclude_each_other():
    with pytest.raises(ValidationError, match="set one of them"):
        ReadJsonlParams(paths=["x.jsonl"], id_key="doc", assign_ids=True)


@pytest.mark.parametrize("value, expected", [
    ("a", "a"), (7, "7"), (1.5, "1.5"), (True, "true"), ({"b": 1, "a": 2}, '{"a": 2, "b": 1}'), (None, None),
    ("", None),
])
def test_own_id_as_a_string(value, expected):
    assert own_id(value) == expected
