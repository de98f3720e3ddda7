"""Connected components by Large-Star / Small-Star, run in-process with the very per-partition step
functions the distributed driver sends to Ray tasks (no Ray here)."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest

from raypress.operators.dedup.graph.connected_components import (
    LABEL,
    NODE,
    connected_components,
    edges_table,
    large_star,
    normalize,
    small_star,
)
from raypress.operators.dedup.shuffle.tasks import concat, local_step, route_by_hash, split_by, stable_hash


def components_local(parts: list[list[pa.Table]], n: int) -> tuple[list[pa.Table], int]:
    """The distributed driver with its steps run here: the label pieces, rounds."""
    out, rounds, labelled = connected_components(parts, n, run=local_step, collect=sum)
    assert labelled == sum(t.num_rows for t in out)
    return out, rounds


def run(edges: list[tuple[str, str]], n: int = 1) -> tuple[dict[str, str], int]:
    """node -> label for every non-centre node, and the rounds it took."""
    a, b = [x for x, _ in edges], [y for _, y in edges]
    table = edges_table(pa.array(a, pa.string()), pa.array(b, pa.string()))
    out, rounds = components_local([[p] for p in route_by_hash(table, NODE, n)], n)
    found: dict[str, str] = {}
    for row in concat(out).to_pylist():
        assert row[NODE] not in found, "a node labelled twice"
        found[row[NODE]] = row[LABEL]
    return found, rounds


def union_find(edges: list[tuple[str, str]]) -> dict[str, str]:
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.get(x, x) != x:
            x = parent[x]
        return x

    for x, y in edges:
        rx, ry = find(x), find(y)
        if rx != ry:
            parent[max(rx, ry)] = min(rx, ry)
    nodes = {v for e in edges for v in e}
    return {v: find(v) for v in nodes if find(v) != v}


def chain(ids: list[str]) -> list[tuple[str, str]]:
    return list(zip(ids[:-1], ids[1:]))


@pytest.mark.parametrize("n", [1, 3, 7])
def test_chain_in_scrambled_order_collapses_to_its_smallest_id(n):
    ids = [f"d{i:04d}" for i in range(200)]
    random.Random(1).shuffle(ids)
    found, rounds = run(chain(ids), n)
    assert found == {v: "d0000" for v in ids if v != "d0000"}
    assert 2 <= rounds <= 20


def test_star_whose_centre_is_not_the_smallest():
    found, _ = run([("d5", leaf) for leaf in ("d1", "d7", "d9", "d3")], 3)
    assert found == {"d3": "d1", "d5": "d1", "d7": "d1", "d9": "d1"}


def test_two_clusters_merged_by_one_late_edge():
    left = chain(["d10", "d12", "d14", "d16"])
    right = [("d20", "d11"), ("d20", "d13"), ("d20", "d15")]
    apart, _ = run(left + right, 4)
    assert set(apart.values()) == {"d10", "d11"}
    merged, _ = run(left + right + [("d16", "d20")], 4)
    assert merged == {v: "d10" for v in ("d11", "d12", "d13", "d14", "d15", "d16", "d20")}


def test_isolated_nodes_and_self_loops_get_no_label():
    found, rounds = run([("d1", "d1"), ("d4", "d2"), ("d9", "d9")], 2)
    assert found == {"d4": "d2"} and rounds == 1


def test_empty_graph():
    table = edges_table(pa.array([], pa.string()), pa.array([], pa.string()))
    out, rounds = components_local([[table]], 1)
    assert rounds == 1 and concat(out).num_rows == 0


@pytest.mark.parametrize("seed", range(20))
def test_random_graphs_match_union_find_for_any_partition_count(seed):
    rng = random.Random(seed)
    ids = [f"d{rng.randrange(10**6):06d}" for _ in range(rng.randint(2, 80))]
    edges = [(rng.choice(ids), rng.choice(ids)) for _ in range(rng.randint(1, 120))]
    expected = union_find([e for e in edges if e[0] != e[1]])
    for n in (1, 4, 9):
        assert run(edges, n)[0] == expected


def test_integer_ids_compare_as_numbers():
    table = edges_table(pa.array([10, 9]), pa.array([9, 100]))
    out, _ = components_local([[p] for p in route_by_hash(table, NODE, 3)], 3)
    assert {r[NODE]: r[LABEL] for r in concat(out).to_pylist()} == {10: 9, 100: 9}


def test_each_star_step_keeps_connectivity_and_never_adds_edges():
    rng = random.Random(7)
    ids = [f"d{i:03d}" for i in range(60)]
    edges = [(rng.choice(ids), rng.choice(ids)) for _ in range(90)]
    table = normalize(edges_table(pa.array([a for a, _ in edges]), pa.array([b for _, b in edges])))
    expected = union_find(list(zip(table.column("node").to_pylist(), table.column("nbr").to_pylist())))
    for step in (large_star, small_star, large_star, small_star):
        out, _ = step(table)
        out = normalize(out)
        assert out.num_rows <= table.num_rows
        assert union_find(list(zip(out.column("node").to_pylist(), out.column("nbr").to_pylist()))) == expected
        table = out


def test_a_converged_star_forest_reports_no_change():
    stars = normalize(edges_table(pa.array(["d2", "d3", "d8"]), pa.array(["d1", "d1", "d5"])))
    assert large_star(stars)[1] == 0 and small_star(stars)[1] == 0
    path = normalize(edges_table(pa.array(["d1", "d2"]), pa.array(["d2", "d3"])))
    assert large_star(path)[1] > 0  # d2 has a smaller and a larger neighbour


def test_stable_hash_is_fixed_across_processes_and_string_types():
    values = ["", "a", "doc-1", "ünïcode", "x" * 300]
    h = stable_hash(pa.array(values, pa.string()))
    assert np.array_equal(h, stable_hash(pa.array(values, pa.large_string())))
    assert np.array_equal(h[1:3], stable_hash(pa.array(values, pa.string()).slice(1, 2)))
    assert len(set(h.tolist())) == len(values)
    # pinned: Python's str hash is salted per process; this one routes rows between processes
    assert int(h[2]) == int(stable_hash(pa.array(["doc-1"]))[0]) == 0xFB8CFEE7E8201EE5
    assert int(stable_hash(pa.array([5]))[0]) == 0x6C45141841D3019F
    assert np.array_equal(stable_hash(pa.array([7], pa.int32())), stable_hash(pa.array([7], pa.int64())))
    with pytest.raises(ValueError, match="null key"):
        stable_hash(pa.array(["a", None]))


def test_split_by_keeps_every_row_once():
    table = pa.table({"x": list(range(10))})
    parts = split_by(table, np.array([2, 0, 1, 2, 0, 0, 1, 2, 2, 0]), 3)
    assert [p.column("x").to_pylist() for p in parts] == [[1, 4, 5, 9], [2, 6], [0, 3, 7, 8]]
