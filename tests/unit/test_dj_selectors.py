"""Data-Juicer's five selectors: random, range / topk / frequency / tags _specified_field_selector.

Data-Juicer's own cases (tests/ops/selector/*.py at c07c2d7: the samples, params and expected
rows; the random cases check only the count), then real rows (the files under /usr/share/doc: sizes
with many ties, suffixes) against Data-Juicer's ``process`` written out here from its source, on
the rows shuffled and cut into blocks (ties go by input order, which raypress reads from the ids).
Without Ray: the three passes on tables (``select_locally``); one test runs them through ``apply``
on the shared Ray session.  Data-Juicer returns the selected rows sorted by the field (topk) or
grouped by value (frequency); raypress keeps them in input order, so rows are compared as sets.
"""

from __future__ import annotations

import heapq
import json
import random
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from pydantic import ValidationError

from raypress.dag.validate import load_pipeline
from raypress.operators.base import OpKind, RunContext
from raypress.operators.general.selection.order import order_key
from raypress.operators.general.selection.passes import select_locally
from raypress.operators.general.selection.values import value_key
from raypress.operators.registry import get_op
from raypress.schema import DETAIL_COL, KIND_COL, NODE_COL, REASON_COL, TombstoneKind

DOC = Path("/usr/share/doc")
SELECTORS = ("random_selector", "range_specified_field_selector", "topk_specified_field_selector",
             "frequency_specified_field_selector", "tags_specified_field_selector")

# Data-Juicer's sample: (text, count, meta.suffix, meta.key1.key2.count, meta.key1.count)
BASE = [("Today is Sun", 101, ".pdf", 34, 5), ("a v s e c s f e f g a a a  ", 16, ".docx", 243, 63),
        ("中文也是一个字算一个长度", 162, ".txt", None, 23),
        ("，。、„”“«»１」「《》´∶：？！", None, ".html", 18, 48),
        ("他的英文名字叫Harry Potter", 88, ".pdf", 551, 78), ("这是一个测试", None, ".py", 89, 3),
        ("我出生于2023年12月15日", None, ".java", 354.32, 67),
        ("emoji表情测试下😊，😸31231\n", 2, ".html", 354.32, 32),
        ("a=1\nb\nc=1+2+3+5\nd=6", 178, ".pdf", 33, 33),
        ("使用片段分词器对每个页面进行分词，使用语言", 666, ".xml", 18, 48)]


def sample(key2: dict | list | None = None) -> list[dict]:
    """Data-Juicer's ten rows, with ``meta.key1.key2.count`` replaced at some positions (a dict) or
    everywhere (a list), as its tests do."""
    rows = []
    for i, (text, count, suffix, k2, k1) in enumerate(BASE):
        if isinstance(key2, list):
            k2 = key2[i]
        elif key2 and i in key2:
            k2 = key2[i]
        rows.append({"id": f"{i:04d}", "text": text, "count": count,
                     "meta": {"suffix": suffix, "key1": {"key2": {"count": k2}, "count": k1}}})
    return rows


def select(name: str, rows: list[dict] | pa.Table, blocks: int = 2, seed: int = 0, **params):
    """(kept rows, tombstones, summary) of ``name`` over ``rows`` cut into ``blocks`` tables."""
    cls = get_op(name)
    table = rows if isinstance(rows, pa.Table) else pa.Table.from_pylist(rows)
    step = -(-table.num_rows // blocks) or 1
    parts = [table.slice(i, step) for i in range(0, max(table.num_rows, 1), step)]
    out, summary = select_locally(cls(cls.Params(**params)), parts, node="sel", seed=seed)
    rows_out = out.to_pylist()
    return [r for r in rows_out if r[NODE_COL] is None], [r for r in rows_out if r[NODE_COL] is not None], summary


def positions(rows: list[dict]) -> list[int]:
    return [int(r["id"]) for r in rows]


# -- Data-Juicer's cases ---------------------------------------------------------------------------

KEY2_TIES = {3: 34, 8: 34}  # test_frequency_specified_field_selector's topk/reverse samples
DJ_CASES = [
    ("frequency_specified_field_selector", None, dict(field_key="meta.suffix", top_ratio=0.3, topk=5, reverse=True),
     [0, 4, 8, 3, 7]),
    ("frequency_specified_field_selector", KEY2_TIES,
     dict(field_key="meta.key1.key2.count", top_ratio=0.4, topk=2, reverse=True), [0, 3, 8, 6, 7]),
    ("frequency_specified_field_selector", KEY2_TIES,
     dict(field_key="meta.key1.key2.count", top_ratio=0.4, topk=2, reverse=False), [1, 2]),
    ("range_specified_field_selector", None, dict(field_key="meta.key1.count", lower_percentile=0.78,
                                                  upper_percentile=0.9, lower_rank=5, upper_rank=10), [1, 6]),
    ("range_specified_field_selector", None, dict(field_key="meta.key1.key2.count", lower_percentile=0.3,
                                                  upper_percentile=1.0, lower_rank=7, upper_rank=9), [6, 7]),
    ("range_specified_field_selector", {9: 2}, dict(field_key="meta.key1.key2.count", lower_percentile=0.7,
                                                    upper_percentile=1.0, lower_rank=3, upper_rank=9), [6, 7]),
    ("range_specified_field_selector", [[34.0], [243.0], [], None, [551.0], [89.0], [354.32], [354.32], [33.0, 33.0],
                                        [2.0, 2.0]],
     dict(field_key="meta.key1.key2.count", lower_percentile=0.0, upper_percentile=0.5, lower_rank=2, upper_rank=4),
     [8, 9]),
    ("topk_specified_field_selector", None, dict(field_key="meta.key1.key2.count", top_ratio=0.2, topk=5,
                                                 reverse=True), [4, 6]),
    ("topk_specified_field_selector", None, dict(field_key="meta.key1.key2.count", top_ratio=0.5, topk=4,
                                                 reverse=True), [4, 6, 7, 1]),
    ("topk_specified_field_selector", {9: 2}, dict(field_key="meta.key1.key2.count", top_ratio=0.5, topk=3,
                                                   reverse=False), [9, 3, 8]),
    ("topk_specified_field_selector", ["34", "243", "", None, "551", "89", "354.32", "354.32", "33", "2"],
     dict(field_key="meta.key1.key2.count", top_ratio=0.5, topk=3, reverse=False), [9, 8, 0]),
]


@pytest.mark.parametrize("name,key2,params,expected", DJ_CASES,
                         ids=[f"{c[0].split('_')[0]}-{i}" for i, c in enumerate(DJ_CASES)])
def test_data_juicer_cases(name, key2, params, expected):
    kept, dropped, summary = select(name, sample(key2), **params)
    assert sorted(positions(kept)) == sorted(expected)
    assert positions(kept) == sorted(positions(kept))  # kept in input order
    assert summary["rows"] == 10 and len(kept) + len(dropped) == 10
    assert all(r[KIND_COL] == TombstoneKind.FILTERED.value and r[NODE_COL] == "sel" for r in dropped)


def test_data_juicer_tag_case():
    rows = [{"id": str(i), "text": t, "meta": {"sentiment": s}}
            for i, (t, s) in enumerate([("a", "happy"), ("b", "happy"), ("c", "sad"), ("d", "angry")])]
    kept, dropped, _ = select("tags_specified_field_selector", rows, field_key="meta.sentiment",
                              target_tags=["happy", "sad"])
    assert [r["text"] for r in kept] == ["a", "b", "c"]
    assert [(r["text"], r[REASON_COL], json.loads(r[DETAIL_COL])) for r in dropped] == \
        [("d", "meta.sentiment not in target_tags", {"value": "angry"})]


@pytest.mark.parametrize("params,count", [(dict(select_ratio=0.2, select_num=5), 2),
                                          (dict(select_ratio=0.5, select_num=4), 4)])
def test_data_juicer_random_cases(params, count):
    kept, dropped, summary = select("random_selector", sample(), **params)
    assert len(kept) == count and summary["selected"] == count
    assert {r[REASON_COL] for r in dropped} == {f"not in random sample of {count}"}


def test_reasons_name_the_rule():
    _, dropped, _ = select("topk_specified_field_selector", sample(), field_key="meta.key1.count", topk=3)
    assert {r[REASON_COL] for r in dropped} == {"not in top 3 by meta.key1.count"}
    assert json.loads(dropped[0][DETAIL_COL]) == {"value": 5.0}
    _, dropped, _ = select("topk_specified_field_selector", sample(), field_key="count", topk=3, reverse=False)
    assert {r[REASON_COL] for r in dropped} == {"not in lowest 3 by count"}
    assert {json.dumps(json.loads(r[DETAIL_COL])) for r in dropped if r["count"] is None} == {'{"value": null}'}
    _, dropped, _ = select("range_specified_field_selector", sample(), field_key="meta.key1.count",
                           lower_rank=2, upper_rank=5)
    assert sorted({r[REASON_COL] for r in dropped}) == ["above ranks 3-5 by meta.key1.count (ascending)",
                                                        "below ranks 3-5 by meta.key1.count (ascending)"]
    _, dropped, _ = select("frequency_specified_field_selector", sample(), field_key="meta.suffix", topk=1,
                           reverse=False)
    assert {r[REASON_COL] for r in dropped} == {"meta.suffix not among the 1 least frequent values"}


# -- which rows keep everything, as in Data-Juicer ------------------------------------------------------

@pytest.mark.parametrize("name,params", [
    ("random_selector", {}), ("random_selector", dict(select_ratio=0.05)),  # int(0.5) = 0: random_sample keeps all
    ("random_selector", dict(select_num=50)),  # more than the rows: kept once each (Data-Juicer repeats rows)
    ("topk_specified_field_selector", dict(field_key="", topk=2)),
    ("topk_specified_field_selector", dict(field_key="count")),
    ("range_specified_field_selector", dict(field_key="count", lower_rank=2)),
    ("range_specified_field_selector", dict(field_key="count", upper_percentile=0.5)),
    ("frequency_specified_field_selector", dict(field_key="meta.suffix", top_ratio=0.0)),
    ("frequency_specified_field_selector", dict(field_key="meta.suffix", topk=100)),
    ("tags_specified_field_selector", dict(field_key="", target_tags=["x"])),
])
def test_params_that_keep_every_row(name, params):
    kept, dropped, _ = select(name, sample(), **params)
    assert len(kept) == 10 and not dropped


@pytest.mark.parametrize("name,params", [
    ("random_selector", dict(select_num=1)), ("topk_specified_field_selector", dict(field_key="count", topk=1)),
    ("range_specified_field_selector", dict(field_key="count", lower_rank=1, upper_rank=1)),
    ("frequency_specified_field_selector", dict(field_key="count", topk=1)),
    ("tags_specified_field_selector", dict(field_key="text", target_tags=["nothing"])),
])
def test_one_row_is_kept_whatever_the_rule(name, params):
    kept, dropped, _ = select(name, sample()[:1], blocks=1, **params)
    assert len(kept) == 1 and not dropped
    kept, _, _ = select(name, pa.Table.from_pylist(sample()).slice(0, 0), blocks=1, **params)
    assert kept == []


def test_a_count_of_zero_keeps_no_row():
    kept, dropped, _ = select("topk_specified_field_selector", sample(), field_key="count", top_ratio=0.05)
    assert kept == [] and len(dropped) == 10
    kept, _, _ = select("range_specified_field_selector", sample(), field_key="count", lower_rank=4, upper_rank=2)
    assert kept == []
    kept, _, _ = select("frequency_specified_field_selector", sample(), field_key="meta.suffix", top_ratio=0.1)
    assert kept == []  # int(0.1 * 7 values) = 0


# -- values ----------------------------------------------------------------------------------------

def test_missing_fields_read_as_null_and_values_that_cannot_be_compared_are_quarantined():
    rows = [{"id": "0", "meta": {"tag": "x"}}, {"id": "1", "meta": {"tag": "y"}}, {"id": "2", "meta": {}},
            {"id": "3", "meta": None}, {"id": "4", "meta": {"tag": "x"}}]
    kept, dropped, _ = select("tags_specified_field_selector", rows, field_key="meta.tag", target_tags=["x"])
    assert positions(kept) == [0, 4]
    assert [(r["id"], r[REASON_COL]) for r in dropped] == [("1", "meta.tag not in target_tags"),
                                                            ("2", "meta.tag missing"), ("3", "meta.tag missing")]
    kept, _, _ = select("frequency_specified_field_selector", rows, field_key="meta.tag", topk=1, reverse=False)
    assert positions(kept) == [1]  # a missing tag is the value null, as frequent as y and seen after it
    kept, _, _ = select("topk_specified_field_selector", rows, field_key="meta.nothing", topk=2)
    assert positions(kept) == [0, 1]  # every value the sentinel: input order decides
    listed = [{"id": str(i), "meta": {"tag": v}} for i, v in enumerate([["a"], ["a", "b"], None, ["a"]])]
    for name, extra in (("frequency_specified_field_selector", dict(topk=1)),
                        ("tags_specified_field_selector", dict(target_tags=["a"]))):
        kept, dropped, _ = select(name, listed, field_key="meta.tag", **extra)
        errors = [r for r in dropped if r[KIND_COL] == TombstoneKind.ERROR.value]
        assert [r["id"] for r in errors] == ["0", "1", "3"] and {r[REASON_COL] for r in errors} == {"TypeError"}
        assert "holds a list" in errors[0][DETAIL_COL]


def test_frequency_groups_values_with_pythons_equality():
    keys = [value_key(v) for v in (1, 1.0, True, "1", None, 2.5, float("nan"))]
    assert keys[0] == keys[1] == keys[2] and len(set(keys)) == 5  # 1 == 1.0 == True; "1", None, 2.5, nan apart
    rows = [{"id": str(i), "n": v} for i, v in enumerate([1.0, 1.0, 2.0, 2.0, 2.0, 3.5])]
    kept, _, summary = select("frequency_specified_field_selector", rows, field_key="n", topk=1)
    assert positions(kept) == [2, 3, 4] and summary["values"] == 3


def test_input_tombstones_pass_through_untouched():
    table = pa.Table.from_pylist(sample())
    table = table.append_column(NODE_COL, pa.array(["up" if i == 4 else None for i in range(10)], pa.string()))
    kept, dropped, summary = select("topk_specified_field_selector", table, field_key="meta.key1.key2.count", topk=2)
    assert summary["rows"] == 9 and sorted(positions(kept)) == [6, 7]  # 551 (row 4) was dropped upstream
    assert [r[NODE_COL] for r in dropped if r["id"] == "0004"] == ["up"]


# -- ties and input order ------------------------------------------------------------------------------

def test_input_order_comes_from_the_ids_with_numbers_compared_as_numbers():
    ids = ["a.jsonl:10", "a.jsonl:9", "a.jsonl:0", "b.jsonl:1", "a.jsonl:100", "a.jsonl:09"]
    assert sorted(ids, key=order_key) == ["a.jsonl:0", "a.jsonl:09", "a.jsonl:9", "a.jsonl:10", "a.jsonl:100",
                                          "b.jsonl:1"]
    rows = [{"id": f"part:{i}", "v": 1} for i in range(12)]
    random.Random(0).shuffle(rows)
    kept, _, _ = select("topk_specified_field_selector", rows, blocks=3, field_key="v", topk=3)
    assert sorted(r["id"] for r in kept) == ["part:0", "part:1", "part:2"]  # all tied: the first three


# -- Data-Juicer's process, written out from its source, on real rows ---------------------------------

def dj_number(s, reverse=True):
    try:
        if isinstance(s, str):
            return float(s)
        if s is None or s == []:
            raise ValueError("empty value")
        return float(np.asarray(s).mean())
    except Exception:
        return -sys.maxsize if reverse else sys.maxsize


def dj_field(row: dict, field_key: str):
    value = row
    for key in field_key.split("."):
        value = value[key]
    return value


def dj_select_num(top_ratio, topk, total):
    if not top_ratio:
        return topk
    select_num = top_ratio * total
    if topk and topk < select_num:
        select_num = topk
    return select_num


def dj_topk(rows, field_key, top_ratio=None, topk=None, reverse=True):
    select_num = dj_select_num(top_ratio, topk, len(rows))
    values = [dj_number(dj_field(r, field_key), reverse) for r in rows]
    pick = heapq.nlargest if reverse else heapq.nsmallest
    return pick(int(select_num), range(len(rows)), values.__getitem__)


def dj_range(rows, field_key, lower_percentile=None, upper_percentile=None, lower_rank=None, upper_rank=None):
    n = len(rows)
    lower, upper = 0, n
    if lower_percentile is not None:
        lower = int(lower_percentile * n)
    if lower_rank is not None:
        lower = max(lower, lower_rank)
    if upper_percentile is not None:
        upper = int(upper_percentile * n)
    if upper_rank is not None:
        upper = min(upper, upper_rank)
    upper = max(lower, upper)
    values = [dj_number(dj_field(r, field_key)) for r in rows]
    sub = heapq.nsmallest(int(upper), range(n), values.__getitem__)
    sub_values = [values[i] for i in sub]
    return [sub[i] for i in heapq.nlargest(int(upper - lower), range(len(sub)), sub_values.__getitem__)]


def dj_frequency(rows, field_key, top_ratio=None, topk=None, reverse=True):
    groups: dict = {}
    for i, r in enumerate(rows):
        groups.setdefault(dj_field(r, field_key), []).append(i)
    select_num = dj_select_num(top_ratio, topk, len(groups))
    return sum(sorted(groups.values(), key=lambda x: len(x), reverse=reverse)[:int(select_num)], [])


def dj_tags(rows, field_key, target_tags):
    return [i for i, r in enumerate(rows) if dj_field(r, field_key) in set(target_tags)]


@pytest.fixture(scope="module")
def doc_rows() -> list[dict]:
    files = sorted(p for p in DOC.rglob("*") if p.is_file() and not p.is_symlink())[:700] if DOC.is_dir() else []
    if len(files) < 50:
        pytest.skip("/usr/share/doc has too few files")
    return [{"id": f"usr-share-doc:{i}", "text": str(p.relative_to(DOC)),
             "meta": {"suffix": p.suffix, "size": p.stat().st_size, "bucket": p.stat().st_size % 7,
                      "package": p.relative_to(DOC).parts[0]}} for i, p in enumerate(files)]


REAL_CASES = [
    ("topk_specified_field_selector", dj_topk, dict(field_key="meta.size", top_ratio=0.1)),
    ("topk_specified_field_selector", dj_topk, dict(field_key="meta.bucket", top_ratio=0.37, topk=300)),
    ("topk_specified_field_selector", dj_topk, dict(field_key="meta.bucket", topk=111, reverse=False)),
    ("range_specified_field_selector", dj_range, dict(field_key="meta.size", lower_percentile=0.25,
                                                      upper_percentile=0.75)),
    ("range_specified_field_selector", dj_range, dict(field_key="meta.bucket", lower_percentile=0.33, lower_rank=50,
                                                      upper_percentile=0.81, upper_rank=600)),
    ("range_specified_field_selector", dj_range, dict(field_key="meta.bucket", lower_rank=101, upper_rank=10_000)),
    ("frequency_specified_field_selector", dj_frequency, dict(field_key="meta.suffix", top_ratio=0.2)),
    ("frequency_specified_field_selector", dj_frequency, dict(field_key="meta.bucket", topk=3, reverse=False)),
    ("frequency_specified_field_selector", dj_frequency, dict(field_key="meta.package", top_ratio=0.5, topk=40)),
    ("tags_specified_field_selector", dj_tags, dict(field_key="meta.suffix", target_tags=[".gz", ".html"])),
]


@pytest.mark.parametrize("name,reference,params", REAL_CASES,
                         ids=[f"{c[0].split('_')[0]}-{i}" for i, c in enumerate(REAL_CASES)])
def test_real_files_select_what_data_juicer_selects(doc_rows, name, reference, params):
    shuffled = list(doc_rows)
    random.Random(len(params)).shuffle(shuffled)  # input order is read from the ids, not the position
    kept, dropped, _ = select(name, shuffled, blocks=4, **params)
    expected = reference(doc_rows, **params)
    assert 0 < len(expected) < len(doc_rows)
    assert sorted(int(r["id"].rsplit(":", 1)[1]) for r in kept) == sorted(expected)
    assert len(kept) + len(dropped) == len(doc_rows)


def test_random_sample_is_reproducible_and_follows_the_seed(doc_rows):
    def sample_ids(rows, blocks, seed):
        kept, _, _ = select("random_selector", rows, blocks=blocks, seed=seed, select_ratio=0.3, select_num=150)
        return sorted(r["id"] for r in kept)

    first = sample_ids(doc_rows, 1, 7)
    shuffled = list(doc_rows)
    random.Random(1).shuffle(shuffled)
    assert len(first) == 150 and sample_ids(shuffled, 5, 7) == first
    assert sample_ids(doc_rows, 1, 8) != first


# -- the op: params, kind, recipes, Ray --------------------------------------------------------------

def test_registered_with_data_juicers_params_as_a_global_op():
    defaults = {
        "random_selector": dict(select_ratio=None, select_num=None),
        "range_specified_field_selector": dict(field_key="", lower_percentile=None, upper_percentile=None,
                                               lower_rank=None, upper_rank=None),
        "topk_specified_field_selector": dict(field_key="", top_ratio=None, topk=None, reverse=True),
        "frequency_specified_field_selector": dict(field_key="", top_ratio=None, topk=None, reverse=True),
    }
    for name in SELECTORS:
        cls = get_op(name)
        assert cls.kind == OpKind.DEDUPLICATOR
        if name in defaults:
            assert cls.Params().model_dump() == defaults[name]
    assert get_op("tags_specified_field_selector").Params(target_tags=["a"]).field_key == ""
    for name, bad in (("random_selector", dict(select_ratio=1.5)), ("random_selector", dict(select_num=0)),
                      ("topk_specified_field_selector", dict(topk=-1)),
                      ("range_specified_field_selector", dict(lower_rank=0)),
                      ("tags_specified_field_selector", {})):
        with pytest.raises(ValidationError):
            get_op(name).Params(**bad)


def test_one_op_data_juicer_recipes_validate(tmp_path):
    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps({"text": t, "meta": {"score": i}}) + "\n" for i, t in enumerate("abcd")))
    for process in ("random_selector: {select_ratio: 0.5}",
                    "range_specified_field_selector: {field_key: meta.score, lower_rank: 1, upper_rank: 3}",
                    "topk_specified_field_selector: {field_key: meta.score, topk: 2, reverse: false}",
                    "frequency_specified_field_selector: {field_key: meta.score, top_ratio: 0.5}",
                    "tags_specified_field_selector: {field_key: text, target_tags: [a, b]}"):
        path = tmp_path / "recipe.yaml"
        path.write_text(f"dataset_path: {data}\nexport_path: {tmp_path / 'out.jsonl'}\nprocess:\n  - {process}\n")
        vp = load_pipeline(path)
        assert process.split(":")[0] in {n.op_cls.name for n in vp.nodes.values()}


@pytest.mark.integration
def test_on_ray_the_passes_give_what_they_give_on_tables(ray_session, doc_rows):
    import ray

    rows = doc_rows[:300]
    for name, params in (("topk_specified_field_selector", dict(field_key="meta.bucket", top_ratio=0.3)),
                         ("frequency_specified_field_selector", dict(field_key="meta.suffix", topk=2)),
                         ("random_selector", dict(select_num=40))):
        events: list[dict] = []
        op = get_op(name)(get_op(name).Params(**params))
        ctx = RunContext(run_dir="/tmp", node_id="sel", seed=5, emit=events.append)
        out = op.apply(ray.data.from_items(rows, override_num_blocks=3), ctx).take_all()
        kept, dropped, _ = select(name, rows, blocks=2, seed=5, **params)
        assert sorted(r["id"] for r in out) == sorted(r["id"] for r in rows)
        assert sorted(r["id"] for r in out if r[NODE_COL] is None) == sorted(r["id"] for r in kept)
        assert {r[REASON_COL] for r in out if r[NODE_COL]} == {r[REASON_COL] for r in dropped}
        assert [e["event"] for e in events] == ["selection"] and events[0]["selected"] == len(kept)
