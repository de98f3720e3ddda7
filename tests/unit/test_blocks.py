"""Block sizing between steps (dag/blocks.py) and the per-worker op cache (dag/worker_ops.py), without Ray."""

from __future__ import annotations

import pickle

import pyarrow as pa
import pytest

from raypress.dag import worker_ops
from raypress.dag.worker_ops import PerWorkerOpRunner, cached_tokens, drop_idle
from raypress.dag.blocks import capped_batch_size, coalesce_tables
from raypress.operators.base import Mapper, Params


def table(ids: list[str], **cols) -> pa.Table:
    return pa.table({"id": ids, **cols})


def test_small_tables_are_joined_in_order_until_a_block_has_enough_rows():
    parts = [table([f"{i}-{j}" for j in range(n)]) for i, n in enumerate([3, 2, 4, 1, 1])]
    blocks = coalesce_tables(parts, min_rows=5)
    assert [b.num_rows for b in blocks] == [5, 5, 1]
    assert [i for b in blocks for i in b.column("id").to_pylist()] == \
           [i for p in parts for i in p.column("id").to_pylist()]


def test_a_large_table_stays_alone_and_bytes_end_a_block_too():
    big = table([str(i) for i in range(10)])
    assert coalesce_tables([big], min_rows=5) == [big]
    blob = table(["a"], data=pa.array([b"x" * 1000], pa.binary()))
    assert len(coalesce_tables([blob, blob, blob], min_rows=100, max_bytes=1500)) == 2


def test_schemas_are_unified_never_cast_and_unjoinable_files_stay_apart():
    nulls = table(["a"], x=pa.nulls(1))  # a column all-null in one file: string in the next
    strings = table(["b"], x=["s"], y=[1])
    (joined,) = coalesce_tables([nulls, strings], min_rows=10)
    assert joined.to_pylist() == [{"id": "a", "x": None, "y": None}, {"id": "b", "x": "s", "y": 1}]
    ints = pa.table({"id": [1]})  # id is an integer here: no join, both kept whole
    assert coalesce_tables([nulls, ints], min_rows=10) == [nulls, ints]


@pytest.mark.parametrize("preferred, rows, expected", [(1024, 256, 256), (64, 256, 64), (None, 256, None)])
def test_batch_size_is_capped_at_one_block(preferred, rows, expected):
    assert capped_batch_size(preferred, rows) == expected


class CountingParams(Params):
    tag: str = "x"


class CountingMapper(Mapper[CountingParams]):
    """Counts its constructions: what a stateful op pays when it loads its model."""

    name = "counting_mapper_for_tests"
    built = 0

    def __init__(self, params, artifacts=None):
        super().__init__(params, artifacts)
        type(self).built += 1

    def process_batch(self, t: pa.Table) -> pa.Table:
        return t.append_column("tag", pa.array([self.params.tag] * t.num_rows))


def per_worker(tag: str) -> PerWorkerOpRunner:
    return PerWorkerOpRunner(op_cls=CountingMapper, params=CountingParams(tag=tag), artifacts=None,
                             node_id=f"n-{tag}")


def test_a_stateful_op_as_tasks_is_built_once_per_worker_process(monkeypatch):
    monkeypatch.setattr(worker_ops, "_ops", {})
    CountingMapper.built = 0
    fn = per_worker("a")
    shipped = [pickle.loads(pickle.dumps(fn)) for _ in range(3)]  # what each Ray task receives
    for f in shipped:
        assert f(table(["r"])).column("tag").to_pylist() == ["a"]
    assert CountingMapper.built == 1
    per_worker("b")(table(["r"]))  # another node (or run) has its own op
    assert CountingMapper.built == 2


def test_the_per_worker_cache_keeps_only_the_most_recently_used_ops(monkeypatch):
    monkeypatch.setattr(worker_ops, "_ops", {})
    monkeypatch.setattr(worker_ops, "MAX_OPS_PER_WORKER", 2)
    CountingMapper.built = 0
    a, b, c = per_worker("a"), per_worker("b"), per_worker("c")
    for f in (a, b, a, c):  # c evicts b, the least recently used; a stays
        f(table(["r"]))
    assert CountingMapper.built == 3 and cached_tokens() == [a.token, c.token]
    b(table(["r"]))
    assert CountingMapper.built == 4


def test_ops_left_idle_are_dropped(monkeypatch):
    monkeypatch.setattr(worker_ops, "_ops", {})
    a, b = per_worker("a"), per_worker("b")
    a(table(["r"]))
    b(table(["r"]))
    worker_ops._ops[a.token] = (worker_ops._ops[a.token][0], 0.0)  # a was last used long ago
    assert drop_idle(now=1000.0, idle_seconds=500.0) == 1 and cached_tokens() == [b.token]
