"""The three passes of a selector, on Ray (``Selector.apply``) or on tables in hand (``select_locally``).

1. project, per block and in parallel: each live row's slim keys (an order key and the field's
   number, group key or tag match), reduced where the op can (``project``), e.g. value counts;
2. decide, once, in one Ray task over all the projections (never in the driver): how many rows
   there are, and which are selected, as a small decision (a :class:`~.order.Cut` or a set of
   group keys); the driver receives only a summary for the events log;
3. mark, streamed over the input again: each worker fetches the decision once, recomputes each
   row's keys and turns the unselected rows into ``filtered`` tombstones whose reason names the
   rule (``not in top 10 by meta.score``), so the ledger counts them as dropped by that reason.

Rows whose value cannot be judged (a list where Data-Juicer asserts a string, a number or None)
leave as ``error`` tombstones, quarantined with the message; Data-Juicer stops the run there.
Tombstones already in the input pass through untouched.
"""

from __future__ import annotations

import threading
import uuid
from abc import abstractmethod
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field

from raypress.operators.base import Deduplicator, Params, RunContext
from raypress.schema import (
    DETAIL_COL,
    ID_COL,
    KIND_COL,
    NODE_COL,
    REASON_COL,
    TombstoneKind,
    alive_mask,
    ensure_tombstone_columns,
)

if TYPE_CHECKING:  # pragma: no cover
    import ray.data

P = TypeVar("P", bound=Params)


@dataclass(frozen=True)
class PassInfo:
    """What the passes know of the run: the node that drops rows, and the run's seed."""

    node: str
    seed: int = 0


class Keys(NamedTuple):
    """A selector's keys of some live rows: ``table`` aligned with them, and per row the message of
    a value that cannot be judged (None: the row is fine), or None when every row is."""

    table: pa.Table
    errors: list[str | None] | None = None


class Verdict(NamedTuple):
    """Per judged row: None to keep it, else the drop reason (the rule); and the row's detail."""

    reasons: list[str | None]
    details: list[str | None]


class Selector(Deduplicator[P]):
    """A Data-Juicer selector: global, keeps the selected rows and tombstones the others.

    Subclasses say why their params keep every row (``keeps_everything``), what a row's keys are
    (``keys``), how a block's keys reduce (``project``), what the reduced keys of the whole input
    decide (``decide``) and which rows that drops (``verdict``)."""

    reads = (ID_COL,)
    # the params that set how many to keep (a ratio, a number): with neither set, every row is kept
    count_params: ClassVar[tuple[str, ...]] = ()

    def keeps_everything(self) -> str | None:
        """Why these params select every row whatever the data (then no pass runs), or None."""
        if self.count_params and not any(getattr(self.params, name) for name in self.count_params):
            return f"neither {' nor '.join(self.count_params)} is set"
        return None

    @abstractmethod
    def keys(self, live: pa.Table, info: PassInfo) -> Keys: ...

    def project(self, keys: Keys) -> pa.Table:
        """A block's keys as the decision needs them (default: those of the rows that can be judged).
        The count of the rows that cannot be judged matters too where Data-Juicer counts them."""
        if keys.errors is None:
            return keys.table
        return keys.table.filter(pa.array([e is None for e in keys.errors], pa.bool_()))

    @abstractmethod
    def decide(self, projected: pa.Table) -> tuple[dict[str, Any], Any]:
        """(summary for the events log, decision) from every block's projection concatenated;
        a decision of None keeps every row, unjudged, as Data-Juicer returns its input before
        looking at a value (at most one row, nothing to select)."""

    @abstractmethod
    def verdict(self, keys: pa.Table, decision: Any, info: PassInfo) -> Verdict: ...

    # -- the passes, on one table -------------------------------------------------------------
    def project_batch(self, table: pa.Table, info: PassInfo) -> pa.Table:
        return self.project(self.keys(_live_rows(table), info))

    def decide_tables(self, tables: list[pa.Table]) -> tuple[dict[str, Any], Any]:
        if not tables:  # an input without blocks: decide on no rows
            tables = [self.project_batch(pa.table({ID_COL: pa.array([], pa.string())}), PassInfo(""))]
        return self.decide(pa.concat_tables(tables))

    def mark(self, table: pa.Table, decision: Any, info: PassInfo) -> pa.Table:
        """``table`` with the rows ``decision`` drops (and those that cannot be judged) as tombstones."""
        if decision is None:
            return table
        table = ensure_tombstone_columns(table)
        alive = alive_mask(table)
        rows = np.arange(table.num_rows) if alive is None else np.flatnonzero(alive.to_numpy(zero_copy_only=False))
        if not rows.size:
            return table
        keys = self.keys(table.take(pa.array(rows)), info)
        errors = keys.errors or [None] * len(rows)
        judged = np.array([e is None for e in errors], bool)
        verdict = self.verdict(keys.table.filter(pa.array(judged)) if not judged.all() else keys.table,
                               decision, info)
        marks: dict[int, tuple[str, str, str | None]] = {}
        for row, error in zip(rows[~judged], (e for e in errors if e is not None)):
            marks[int(row)] = (TombstoneKind.ERROR.value, "TypeError", error)
        for row, reason, detail in zip(rows[judged], verdict.reasons, verdict.details):
            if reason is not None:
                marks[int(row)] = (TombstoneKind.FILTERED.value, reason, detail)
        return set_tombstones(table, marks, info.node)

    # -- on Ray ----------------------------------------------------------------------------------
    def apply(self, ds: "ray.data.Dataset", ctx: RunContext) -> "ray.data.Dataset":
        why = self.keeps_everything()
        if why is not None:
            ctx.event("selection", selected="all", why=why)
            return ds
        import ray

        info = PassInfo(ctx.node_id, ctx.seed)
        projected = ds.map_batches(_Project(self, info), batch_format="pyarrow", batch_size=None).materialize()
        decide = ray.remote(_decide).options(num_returns=2)
        summary_ref, decision_ref = decide.remote(self, projected.to_arrow_refs())
        summary = ray.get(summary_ref)
        ctx.event("selection", **summary)
        return ds.map_batches(_Mark(self, info, decision_ref), batch_format="pyarrow", batch_size=None)


def select_locally(op: Selector, blocks: pa.Table | list[pa.Table], node: str = "select",
                   seed: int = 0) -> tuple[pa.Table, dict[str, Any]]:
    """The three passes over ``blocks`` in this process (what ``apply`` does on Ray): the rows with
    their tombstone columns, and the decision's summary."""
    blocks = [blocks] if isinstance(blocks, pa.Table) else list(blocks)
    why = op.keeps_everything()
    if why is not None:
        return pa.concat_tables([ensure_tombstone_columns(b) for b in blocks]), {"selected": "all", "why": why}
    info = PassInfo(node, seed)
    summary, decision = op.decide_tables([op.project_batch(b, info) for b in blocks])
    return pa.concat_tables([ensure_tombstone_columns(op.mark(b, decision, info)) for b in blocks]), summary


def _live_rows(table: pa.Table) -> pa.Table:
    alive = alive_mask(table)
    return table if alive is None else table.filter(alive)


def set_tombstones(table: pa.Table, marks: dict[int, tuple[str, str, str | None]], node: str) -> pa.Table:
    """Turn the rows ``marks`` names (row -> kind, reason, detail) into ``node``'s tombstones, in place."""
    if not marks:
        return table
    order = sorted(marks)
    mask = np.zeros(table.num_rows, bool)
    mask[order] = True
    columns = ((NODE_COL, [node] * len(order)), (KIND_COL, [marks[i][0] for i in order]),
               (REASON_COL, [marks[i][1] for i in order]), (DETAIL_COL, [marks[i][2] for i in order]))
    for name, values in columns:
        i = table.schema.get_field_index(name)
        col = table.column(i).combine_chunks()
        table = table.set_column(i, name, pc.replace_with_mask(col, pa.array(mask), pa.array(values, pa.string())))
    return table


class _Project:
    """Projection pass for ``map_batches``."""

    def __init__(self, op: Selector, info: PassInfo):
        self.op, self.info = op, info

    def __call__(self, table: pa.Table) -> pa.Table:
        return self.op.project_batch(table, self.info)


def _decide(op: Selector, refs: list) -> tuple[dict[str, Any], Any]:
    """Decision task: every projection block, fetched here rather than in the driver."""
    import ray

    return op.decide_tables(list(ray.get(list(refs))))


MAX_DECISIONS_PER_WORKER = 4
_decisions: "OrderedDict[str, Any]" = OrderedDict()
_decisions_lock = threading.Lock()


def _decision(token: str, ref: Any) -> Any:
    """The decision of the run ``token``, fetched once per worker process."""
    with _decisions_lock:
        if token in _decisions:
            _decisions.move_to_end(token)
            return _decisions[token]
    import ray

    decision = ray.get(ref)
    with _decisions_lock:
        _decisions[token] = decision
        while len(_decisions) > MAX_DECISIONS_PER_WORKER:
            _decisions.popitem(last=False)
    return decision


class _Mark:
    """Marking pass for ``map_batches``: holds the decision's object ref, not the decision."""

    def __init__(self, op: Selector, info: PassInfo, ref: Any):
        self.op, self.info, self.ref = op, info, ref
        self.token = uuid.uuid4().hex  # pickled with the callable: one fetch per process and run

    def __call__(self, table: pa.Table) -> pa.Table:
        return self.op.mark(table, _decision(self.token, self.ref), self.info)


class FieldParams(Params):
    """What every field selector takes: the field, as Data-Juicer names it."""

    field_key: str = Field("", description="the field to select by; nested fields joined with dots "
                                           "(e.g. meta.score); empty: keep every row (Data-Juicer's default)")


FP = TypeVar("FP", bound=FieldParams)


class FieldSelector(Selector[FP]):
    """A selector by the value of ``field_key``: without one, it keeps every row (as in Data-Juicer)."""

    def columns_read(self) -> tuple[str, ...]:
        key = self.params.field_key
        return (ID_COL, key.partition(".")[0]) if key else (ID_COL,)

    def keeps_everything(self) -> str | None:
        return "field_key is empty" if not self.params.field_key else super().keeps_everything()


def dj_select_count(ratio: float | None, num: int | None, total: int) -> int | None:
    """Data-Juicer's count rule of its selectors: ``ratio * total`` (truncated), lowered to ``num``
    when both are set; ``num`` alone when the ratio is unset or 0; None when neither is set."""
    if not ratio:
        return num or None
    count = ratio * total
    if num and num < count:
        count = num
    return int(count)
