"""Connected components of a graph too big for one machine: alternating Large-Star / Small-Star.

Algorithm (Kiveris et al., "Connected Components in MapReduce and Beyond", SoCC 2014).  The graph
is a table of directed rows ``(node, nbr)``, every undirected edge present both ways.  Rows are
partitioned by a hash of ``node``, so a partition holds whole neighbourhoods.  With ``m(v)`` the smallest of ``v`` and its
neighbours:

- Large-Star: each ``v`` re-links every *larger* neighbour ``u`` to ``m(v)``;
- Small-Star: each ``v`` re-links its *smaller* neighbours, and itself, to the smallest of them.

Both keep the connectivity and never add edges (each undirected edge is handled by one of its
ends and maps to one edge).  Alternating them turns every component into a star around its
smallest node in O(log^2 n) rounds (in practice a handful for MinHash graphs, which start as stars
of band buckets).  A round changed nothing exactly when no node has both a smaller and a larger
neighbour, and none has two smaller ones: that is the stopping test, one integer per task.  The
label of a node is then its star's centre: the smallest id of its component.

Cost: each round is two shuffles of the edge table; bytes in flight per undirected edge are two
rows of two ids.  A task holds one partition (edges / n).  The
result does not depend on the partition count: the final star forest is a function of the
components only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from raypress.operators.dedup.shuffle.tasks import concat, route_by_hash, run_step, total

if TYPE_CHECKING:  # pragma: no cover
    from ray import ObjectRef

NODE, NBR = "node", "nbr"
LABEL = "label"
MAX_ROUNDS = 200  # O(log^2 n) rounds; this many means a bug, not a big graph


def edges_table(a: pa.Array | pa.ChunkedArray, b: pa.Array | pa.ChunkedArray) -> pa.Table:
    """Undirected edges ``a -- b`` as directed rows both ways (self loops dropped)."""
    fwd = pa.table({NODE: a, NBR: b})
    back = pa.table({NODE: b, NBR: a})
    both = pa.concat_tables([fwd, back], promote_options="permissive")
    return both.filter(pc.not_equal(both.column(NODE), both.column(NBR)))


def normalize(table: pa.Table) -> pa.Table:
    """Sorted by (node, nbr), without repeated rows or self loops."""
    if table.num_rows == 0:
        return table
    table = table.filter(pc.not_equal(table.column(NODE), table.column(NBR)))
    table = table.sort_by([(NODE, "ascending"), (NBR, "ascending")])
    n = table.num_rows
    if n < 2:
        return table
    node, nbr = table.column(NODE), table.column(NBR)
    same = pc.and_(pc.equal(node.slice(1), node.slice(0, n - 1)), pc.equal(nbr.slice(1), nbr.slice(0, n - 1)))
    keep = np.ones(n, dtype=bool)
    keep[1:] = ~same.to_numpy(zero_copy_only=False)
    return table if keep.all() else table.filter(pa.array(keep))


def _groups(table: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """Per row of a normalized table: is it its node's first row, and that first row's index."""
    n = table.num_rows
    node = table.column(NODE)
    first = np.ones(n, dtype=bool)
    if n > 1:
        first[1:] = pc.not_equal(node.slice(1), node.slice(0, n - 1)).to_numpy(zero_copy_only=False)
    head = np.maximum.accumulate(np.where(first, np.arange(n), 0))
    return first, head


def _centres(table: pa.Table, head: np.ndarray) -> tuple[pa.ChunkedArray, np.ndarray]:
    """Per row: ``m`` = the smaller of its node and the node's smallest neighbour (the group's
    first row, the table being sorted), and whether m is a neighbour (not the node)."""
    min_nbr = table.column(NBR).take(pa.array(head))
    has_smaller = pc.less(min_nbr, table.column(NODE))
    m = pc.if_else(has_smaller, min_nbr, table.column(NODE))
    return m, has_smaller.to_numpy(zero_copy_only=False)


def _relink(table: pa.Table, rows: np.ndarray, ends: Sequence[str], m) -> pa.Table:
    """Edges ``end -- m`` for the selected rows, for each column in ``ends``."""
    sel = pa.array(rows)
    m = pc.filter(m, sel)
    parts = [edges_table(pc.filter(table.column(c), sel), m) for c in ends]
    return concat(parts) if parts else table.slice(0, 0)


def large_star(table: pa.Table) -> tuple[pa.Table, int]:
    """Each node links its larger neighbours to m(node).  Returns (new edges, rows that moved)."""
    table = normalize(table)
    if table.num_rows == 0:
        return table, 0
    _, head = _groups(table)
    m, has_smaller = _centres(table, head)
    larger = pc.greater(table.column(NBR), table.column(NODE)).to_numpy(zero_copy_only=False)
    out = _relink(table, larger, [NBR], m)
    return out, int(np.count_nonzero(larger & has_smaller))


def small_star(table: pa.Table) -> tuple[pa.Table, int]:
    """Each node links its smaller neighbours and itself to the smallest of them.  Returns (new
    edges, rows beyond a node's first smaller neighbour: non-zero iff some node had two)."""
    table = normalize(table)
    if table.num_rows == 0:
        return table, 0
    first, head = _groups(table)
    m, _ = _centres(table, head)
    smaller = pc.less(table.column(NBR), table.column(NODE)).to_numpy(zero_copy_only=False)
    out = _relink(table, smaller, [NBR, NODE], m)
    return out, int(np.count_nonzero(smaller & ~first))


def labels(table: pa.Table) -> pa.Table:
    """From a star forest: ``(node, label)`` for every node that is not its star's centre."""
    table = normalize(table)
    leaf = pc.less(table.column(NBR), table.column(NODE))
    out = table.filter(leaf)
    return pa.table({NODE: out.column(NODE), LABEL: out.column(NBR)})


# -- the per-partition steps the distributed driver runs (and the unit tests run in-process) -------

def large_star_step(tables: list[pa.Table], n: int) -> tuple[list[pa.Table], int]:
    out, changed = large_star(concat(tables))
    return route_by_hash(out, NODE, n), changed


def small_star_step(tables: list[pa.Table], n: int) -> tuple[list[pa.Table], int]:
    out, changed = small_star(concat(tables))
    return route_by_hash(out, NODE, n), changed


def labels_step(tables: list[pa.Table]) -> tuple[list[pa.Table], int]:
    out = labels(concat(tables))
    return [out], out.num_rows


def connected_components(
    parts: list[list["ObjectRef"]], n: int, run: Callable = run_step, collect: Callable = total,
    folder: str | None = None,
) -> tuple[list["ObjectRef"], int, int]:
    """``parts[p]`` are the edge pieces routed to partition p by ``node`` (refs for Ray tasks; tables
    with ``run=local_step, collect=sum``, which runs the same steps in this process).  With a
    ``folder``, the rounds' edge pieces travel through files there (their size grows with the input).

    Returns the label pieces (one per partition: ``(node, label)`` of every non-centre node), the
    rounds run and the number of labelled nodes.  Only refs and one integer per task reach the
    driver."""
    for rounds in range(1, MAX_ROUNDS + 1):
        parts, c1 = run(large_star_step, parts, n, n=n, folder=folder)
        parts, c2 = run(small_star_step, parts, n, n=n, folder=folder)
        if collect(c1) + collect(c2) == 0:
            out, counts = run(labels_step, parts, 1)
            return out[0], rounds, collect(counts)
    raise RuntimeError(f"connected components did not converge in {MAX_ROUNDS} rounds")
