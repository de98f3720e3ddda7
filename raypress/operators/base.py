"""The operator contract: one base class per kind, typed params, declared columns and resources.

An operator is a small class with a pydantic ``Params`` model.  The runner (``raypress.dag``)
decides how to execute it from its kind: streaming kinds (Mapper, Filter) run inside Ray Data
``map_batches`` on Arrow tables; global kinds (Deduplicator, Aggregator) get the whole Ray
Dataset; a Stage gets artifacts; a Writer gets batches to put in files.  An operator never needs
to know about tombstones, quarantine or the ledger: the runner wraps it.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Generic, Sequence, TypeVar, get_args

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field

from raypress.schema import ArtifactType

if TYPE_CHECKING:  # pragma: no cover
    import ray.data

    from raypress.artifacts import Artifact


class OpKind(str, Enum):
    READER = "reader"
    MAPPER = "mapper"
    FILTER = "filter"
    DEDUPLICATOR = "deduplicator"
    AGGREGATOR = "aggregator"
    STAGE = "stage"
    WRITER = "writer"


STREAMING_KINDS = (OpKind.MAPPER, OpKind.FILTER)


class Params(BaseModel):
    """Base of every op's parameter model: unknown keys are errors, not silently ignored."""

    model_config = ConfigDict(extra="forbid")

    def with_model_files(self, op: str) -> "Params":
        """These params with every model file the op finds by name (a Data-Juicer model, a
        tokenizer) resolved to its path on this machine; FileNotFoundError saying how to provide a
        missing one.  A local run pins the paths before Ray starts, so the answer is one line, not
        an actor's traceback an hour in, and the workers load exactly the files found here."""
        return self

    def missing_model_files(self, op: str) -> str | None:
        """Why ``with_model_files`` fails here (how to provide the file), or None."""
        try:
            self.with_model_files(op)
        except FileNotFoundError as exc:
            return str(exc)
        return None


class TextParams(Params):
    """Params of an op that reads one text column."""

    text_key: str = Field(default="text", description="column holding the text")


P = TypeVar("P", bound=Params)
TP = TypeVar("TP", bound=TextParams)


class Resources(BaseModel):
    """What one task/actor of this op asks Ray for."""

    num_cpus: float = 1.0
    num_gpus: float = 0.0
    memory: int | None = Field(default=None, description="bytes of heap memory per task/actor")


@dataclass
class RunContext:
    """What an op may know of the run: where to write, its node id, the seed, an event sink."""

    run_dir: str
    node_id: str
    seed: int = 0
    emit: Callable[[dict[str, Any]], None] = field(default=lambda event: None)
    settings: dict[str, Any] = field(default_factory=dict)
    input_rows: int | None = None  # rows of the main Dataset input, when counted (global ops, stages)
    timer: Any = None  # has `report(node_id, seconds, rows)`: readers report the time spent reading
    base_dir: str | None = None  # what the pipeline's relative paths meant (ids keep paths relative to it)
    cleanups: list[Callable[[], None]] = field(default_factory=list)  # shared by the run's nodes
    # the ledger entries of the nodes finished so far (a copy): a report over the whole run reads the
    # counts of the nodes upstream of it, which are final when it runs
    ledger: Callable[[], dict[str, dict[str, Any]]] = field(default=lambda: {})
    data_inputs: dict[str, list[str]] = field(default_factory=dict)  # node -> the nodes its rows come from

    def shuffle_partitions(self, rows_per_partition: int = 100_000, cap: int = 200) -> int:
        """How many partitions a shuffle over the input deserves: each one costs a task and a file,
        so a tiny input gets one, a large one up to ``cap``."""
        if self.input_rows is None:
            return cap
        return max(1, min(cap, -(-self.input_rows // rows_per_partition)))

    def event(self, kind: str, **fields: Any) -> None:
        """Report progress (steps, loss, tokens/s) into the run's ``events.jsonl``."""
        self.emit({"event": kind, "node": self.node_id, **fields})

    def count(self, **counts: int) -> None:
        """Add to the counts the run's ledger keeps for this node (``counts`` in its entry), e.g. the
        model calls a search made per policy: the ledger, not only the events, says what a stage spent.
        Counts of one name add up over calls."""
        self.emit({"event": "counted", "node": self.node_id, "counts": {k: int(v) for k, v in counts.items()}})

    def defer(self, cleanup: Callable[[], None]) -> None:
        """Run ``cleanup`` when the whole run ends (also on failure), e.g. take down an endpoint
        that later nodes used."""
        self.cleanups.append(cleanup)

    def path(self, *parts: str) -> Path:
        p = Path(self.run_dir).joinpath(*parts)
        p.parent.mkdir(parents=True, exist_ok=True)
        return p


class Operator(ABC, Generic[P]):
    """Every operator: a name, a kind, typed params, declared columns/resources, artifact types.

    An op declares its params one way, as the type argument: ``class WordsNum(TextFilter[WordsNumParams])``.
    ``self.params`` is then typed as that model, and the class attribute ``Params`` (what validation
    builds from the YAML's ``with:``) is set from it."""

    name: ClassVar[str] = ""
    kind: ClassVar[OpKind]
    Params: ClassVar[type[Params]] = Params
    params: P
    # Python packages the op needs beyond the core install (import name -> the raypress extra that
    # installs it), declared in its `@register(name, requires={...})`; validation reads them from the
    # source and reports a missing one with its pip line before anything runs
    requires: ClassVar[dict[str, str]] = {}
    # the same, needed only when a parameter is not its default (`requires_when={"param": {...}}`)
    requires_when: ClassVar[dict[str, dict[str, str]]] = {}
    reads: ClassVar[tuple[str, ...]] = ()
    writes: ClassVar[tuple[str, ...]] = ()
    resources: ClassVar[Resources] = Resources()
    stateful: ClassVar[bool] = False  # True: loads something heavy once -> runs in an actor pool
    resumable: ClassVar[bool] = True  # False: a rerun never reuses the last output (e.g. a live endpoint)
    # True: starts a Ray Serve HTTP app; the run chooses Serve's ingress (settings.serve_ingress) for it
    serves_http: ClassVar[bool] = False
    # True: runs code written in the pipeline file; validation requires `settings.allow_code: true` and
    # passes the grant as an `allow_code` field of Params, which the op checks before compiling
    takes_code: ClassVar[bool] = False
    batch_size: ClassVar[int | None] = 1024
    inputs: ClassVar[dict[str, ArtifactType]] = {"data": ArtifactType.DATASET}
    optional_inputs: ClassVar[frozenset[str]] = frozenset()  # slots of ``inputs`` a pipeline may leave out
    # Model/Report slots that take a list of producers, handed to ``run`` as a list in the YAML's order
    # (a list of Datasets is always their union instead)
    list_inputs: ClassVar[frozenset[str]] = frozenset()
    output: ClassVar[ArtifactType] = ArtifactType.DATASET

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for base in cls.__dict__.get("__orig_bases__", ()):
            for arg in get_args(base):
                if isinstance(arg, type) and issubclass(arg, Params):
                    cls.Params = arg

    @classmethod
    def planned_workers(cls, params: Any) -> str:
        """What a stage asks Ray for beyond its driver-side node (Ray Train workers, Serve replicas,
        policy actors), as `raypress plan` shows it: where the work of a training or serving node
        would run on a cluster.  "" for ops that run as the node's own tasks."""
        return ""

    def __init__(self, params: P, artifacts: dict[str, "Artifact"] | None = None):
        self.params = params
        self.artifacts = artifacts or {}

    @classmethod
    def summary(cls) -> str:
        """The docstring's first paragraph on one line: what `raypress ops` prints."""
        doc = (cls.__doc__ or "").strip()
        return " ".join(doc.split("\n\n")[0].split()) if doc else ""

    def columns_read(self) -> tuple[str, ...]:
        """Columns this op needs in its input (``text_key`` params count)."""
        cols = list(self.reads)
        for key in ("text_key",):
            value = getattr(self.params, key, None)
            if isinstance(value, str) and value not in cols:
                cols.append(value)
        return tuple(cols)

    def columns_written(self) -> tuple[str, ...] | None:
        """Columns this op adds (None: unknown until it runs, e.g. a jsonl reader)."""
        return self.writes

    def batch_counts(self, out: pa.Table) -> dict[str, int] | None:
        """Counters of one processed batch (its live output rows) that the run sums per node, e.g.
        images seen and resolved; None: the op counts nothing."""
        return None

    @classmethod
    def count_warnings(cls, params: Any, counts: dict[str, int]) -> list[str]:
        """What the summed counters say is suspect (a warning per line in the CLI, events and the
        ledger), e.g. no image URL resolved: the run adds up but is not what the user meant."""
        return []

    def columns_dropped(self) -> tuple[str, ...]:
        """Input columns this op removes (e.g. raw HTML once it is parsed), so that validation
        rejects a later node reading them."""
        return ()


class Reader(Operator[P]):
    """Files/URIs -> a Dataset; every row gets a stable string ``id``."""

    kind = OpKind.READER
    inputs: ClassVar[dict[str, ArtifactType]] = {}

    @abstractmethod
    def read(self, ctx: RunContext) -> "ray.data.Dataset":
        """Return a lazy Ray Dataset.  Unreadable records may be returned as tombstones
        (see ``raypress.schema.with_tombstones``) with kind ``error``: they go to quarantine."""


class Mapper(Operator[P]):
    """Arrow batch -> Arrow batch with the same rows (1:1), e.g. cleaning text."""

    kind = OpKind.MAPPER

    @abstractmethod
    def process_batch(self, table: pa.Table) -> pa.Table: ...


class TextMapper(Mapper[TP]):
    """A Mapper that rewrites one text column row by row."""

    @abstractmethod
    def process_text(self, text: str) -> str: ...

    def process_batch(self, table: pa.Table) -> pa.Table:
        key = self.params.text_key
        texts = table.column(key).to_pylist()
        out = [None if t is None else self.process_text(t) for t in texts]
        return table.set_column(table.schema.get_field_index(key), key, pa.array(out, pa.string()))


class Filter(Operator[P]):
    """Compute stats into the ``stats`` struct column, then keep or drop each row with a reason.

    The two halves are separate so that the same op can run in a stats-only (analyze) mode."""

    kind = OpKind.FILTER
    stat_names: ClassVar[tuple[str, ...]] = ()
    # True: the op judges its stat with ``self.range_rule`` (Data-Juicer's Filter keys
    # min_closed_interval / max_closed_interval / reversed_range are honoured on it)
    honours_range_rule: ClassVar[bool] = False
    range_rule: "RangeRule"  # set below: the closed interval, unless a node's keys say otherwise

    @abstractmethod
    def compute_stats(self, table: pa.Table) -> dict[str, Sequence[Any]]:
        """One list per stat name, aligned with the rows of ``table``."""

    @abstractmethod
    def drop_reasons(self, stats: dict[str, Sequence[Any]]) -> list[str | None]:
        """Per row: None to keep, or the reason (a short, stable category) to drop."""

    def columns_written(self) -> tuple[str, ...]:
        return ("stats",)


class TextFilter(Filter[TP]):
    """A Filter whose stats come from one text column, one row at a time."""

    @abstractmethod
    def text_stats(self, text: str) -> dict[str, Any]: ...

    @abstractmethod
    def reject(self, stats: dict[str, Any]) -> str | None:
        """None to keep the row, else the drop reason."""

    def compute_stats(self, table: pa.Table) -> dict[str, Sequence[Any]]:
        key = self.params.text_key
        rows = [self.text_stats(t if t is not None else "") for t in table.column(key).to_pylist()]
        return {name: [r[name] for r in rows] for name in self.stat_names}

    def drop_reasons(self, stats: dict[str, Sequence[Any]]) -> list[str | None]:
        names = list(stats)
        n = len(stats[names[0]]) if names else 0
        return [self.reject({k: stats[k][i] for k in names}) for i in range(n)]


def range_reason(value: float, stat: str, lo: float | None, hi: float | None) -> str | None:
    """Data-Juicer's closed-interval rule: keep ``lo <= value <= hi``; name the side that failed."""
    if lo is not None and value < lo:
        return f"{stat} < min"
    if hi is not None and value > hi:
        return f"{stat} > max"
    return None


@dataclass(frozen=True)
class RangeRule:
    """Data-Juicer's ``Filter.get_keep_boolean``: each bound closed or open, and the kept range
    reversed.  As there, ``reversed_range`` also flips which bounds are closed, so a reversed
    ``[lo, hi]`` keeps ``value < lo or value > hi``."""

    min_closed: bool = True
    max_closed: bool = True
    reversed: bool = False

    @classmethod
    def of(cls, min_closed: bool = True, max_closed: bool = True, reversed_range: bool = False) -> "RangeRule":
        """The rule a Data-Juicer filter built with these keys applies."""
        if reversed_range:
            min_closed, max_closed = not min_closed, not max_closed
        return cls(min_closed, max_closed, reversed_range)

    def reason(self, value: float, stat: str, lo: float | None, hi: float | None) -> str | None:
        """None to keep ``value``, else the drop reason naming the side that failed."""
        if self == _CLOSED:
            return range_reason(value, stat, lo, hi)
        below = lo is not None and (value < lo if self.min_closed else value <= lo)
        above = hi is not None and (value > hi if self.max_closed else value >= hi)
        if self.reversed:
            return None if (below or above) else f"{stat} within range (reversed_range)"
        if below:
            return f"{stat} < min" if self.min_closed else f"{stat} <= min"
        if above:
            return f"{stat} > max" if self.max_closed else f"{stat} >= max"
        return None


_CLOSED = RangeRule()
Filter.range_rule = _CLOSED


class Deduplicator(Operator[P]):
    """Global: sees the whole Dataset; duplicates leave as tombstones naming the kept twin's id."""

    kind = OpKind.DEDUPLICATOR
    batch_size = None

    @abstractmethod
    def apply(self, ds: "ray.data.Dataset", ctx: RunContext) -> "ray.data.Dataset": ...


class Aggregator(Operator[P]):
    """Global: the whole Dataset -> a Dataset or a Report (counts, histograms, statistics)."""

    kind = OpKind.AGGREGATOR
    batch_size = None

    @abstractmethod
    def apply(self, ds: "ray.data.Dataset", ctx: RunContext) -> "Artifact": ...


class Stage(Operator[P]):
    """Non-streaming: artifacts in, an artifact out (training, evaluation, search, benchmarks)."""

    kind = OpKind.STAGE
    batch_size = None

    @abstractmethod
    def run(self, inputs: dict[str, "Artifact"], ctx: RunContext) -> "Artifact": ...


class WriterParams(Params):
    """What every writer takes: where, and whether it may replace files raypress did not write."""

    path: str = Field(description="output directory ('{run_dir}' expands to the run directory)")
    overwrite: bool = Field(default=False, description="replace whatever the destination holds, even files "
                            "raypress did not write (default: a destination with such files is an error, "
                            "and nothing is deleted)")


WP = TypeVar("WP", bound=WriterParams)


class Writer(Operator[WP]):
    """Dataset -> files.  ``write_batch`` runs once per batch on workers, into a staging folder;
    ``finalize`` once on the driver, turning the staged parts into the final layout there; the
    runner then commits the staging folder to the destination (see ``raypress.dag.destination``)."""

    kind = OpKind.WRITER
    writes = ()
    Params: ClassVar[type[Params]] = WriterParams  # until a writer names its own (Writer[XParams])

    def destination(self, ctx: RunContext | None = None) -> str:
        """The final path: a folder, or one file when ``single_file()``."""
        return str(self.params.path)

    def single_file(self) -> bool:
        """True when ``path`` names one file (e.g. ``out.jsonl``) rather than a folder of parts."""
        return False

    @abstractmethod
    def write_batch(self, table: pa.Table, dest: str, part: str) -> None:
        """Write ``table`` (live rows, tombstone columns removed) as part ``part`` under folder ``dest``."""

    def finalize(self, dest: str, ctx: RunContext) -> None:
        """Runs once after every batch was written into folder ``dest`` (e.g. join the parts into
        one file, build an index); what ``dest`` then holds is what gets committed."""


def json_detail(values: dict[str, Any]) -> str:
    return json.dumps(values, default=str, sort_keys=True)
