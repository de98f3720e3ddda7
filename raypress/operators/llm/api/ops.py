"""The bases of the LLM-backed ops: ask for every row of a batch at once, quarantine what cannot be
answered, count what it cost.

A row's work is ``answer_row``: build Data-Juicer's messages, ask (``ask``: up to ``try_num``
requests until the answer parses), turn the parsed answer into output values.  A batch's rows are
asked ``concurrency`` at a time, in threads sharing one connection pool.  A row whose answer never
parses raises ``UnparseableResponse``, whose message carries the raw answer: the runner retries a
failing batch row by row and quarantines the failing rows with that message.  The outcomes of a
failing batch are kept until the runner asks for its rows again, so no row is asked twice.

Counters (``batch_counts``, summed per node into the ledger's ``counts``): ``requests`` (HTTP
requests, retries included), ``retries``, ``request_errors`` (requests answered with an error or
lost), ``parse_failures`` (answers that did not parse), ``prompt_tokens`` and
``completion_tokens`` (as the endpoint reported them, for every answer).
"""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, ClassVar, Sequence, TypeVar

import pyarrow as pa

from raypress.operators.base import Filter, Mapper
from raypress.operators.llm.api.client import ChatRequestFailed
from raypress.operators.llm.api.endpoint import chat_client
from raypress.operators.llm.api.params import ApiParams
from raypress.schema import STATS_COL, ArtifactType

P = TypeVar("P", bound=ApiParams)
META_COL = "meta"
RAW_CHARS = 1500  # of the raw answer's repr in a quarantined row's detail (raypress keeps 2000 chars of it)
_MISSING = object()


class UnparseableResponse(ValueError):
    """The model's answer (after ``try_num`` requests) is not in the format the op parses."""

    def __init__(self, op: str, tries: int, raw: str, expected: str):
        self.raw = raw
        shown = repr(raw)
        if len(shown) > RAW_CHARS:
            shown = f"{shown[:RAW_CHARS]}... ({len(raw)} characters in all)"
        super().__init__(f"{op}: no answer in the expected format ({_short(expected)}) after {tries} "
                         f"request(s); last raw response: {shown}")


class RowsFailed(RuntimeError):
    """Some rows of a batch failed: the runner retries the batch row by row (answers kept)."""


def _short(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "..."


def system_and_user(system: str, user: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def row_key(row: dict[str, Any]) -> str:
    return json.dumps(row, sort_keys=True, default=str, ensure_ascii=False)


class LLMOp:
    """What an LLM mapper and an LLM filter share; mixed in before ``Mapper`` / ``Filter``.

    Subclasses set ``MODEL_FIELD`` (the param naming the model) and implement ``answer_row`` or
    the three steps of the default one: ``build_messages``, ``parse_output`` (None: the answer
    does not parse) and ``row_outputs``; ``expected`` names the format for error messages."""

    MODEL_FIELD: ClassVar[str] = "api_model"
    name: ClassVar[str]
    params: ApiParams
    artifacts: dict[str, Any]
    inputs: ClassVar[dict[str, ArtifactType]] = {"data": ArtifactType.DATASET, "endpoint": ArtifactType.REPORT}
    optional_inputs: ClassVar[frozenset[str]] = frozenset({"endpoint"})
    batch_size: ClassVar[int | None] = 64  # a failing batch is retried row by row; answers are kept
    expected: str = "the op's output pattern"
    output_pattern: re.Pattern

    def __init__(self, params: Any, artifacts: dict | None = None):
        super().__init__(params, artifacts)
        self.client = chat_client(self.name, params, self.MODEL_FIELD, self.artifacts.get("endpoint"))
        self._outcomes: dict[str, Any] = {}
        for name in type(params).model_fields:  # Data-Juicer's `self.x = x or self.DEFAULT_X`
            default = getattr(type(self), f"DEFAULT_{name.upper()}", None)
            if default is not None:
                value = getattr(params, name) or default
                # a pattern param compiles with the flags the op parses with (its Params' PATTERN_FLAGS)
                setattr(self, name, re.compile(value, params.PATTERN_FLAGS) if name.endswith("pattern") else value)
        if isinstance(getattr(self, "output_pattern", None), re.Pattern):
            self.expected = f"output_pattern {self.output_pattern.pattern!r}"

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_outcomes"] = {}
        return state

    # ---- one row --------------------------------------------------------------------------------

    def answer_row(self, row: dict[str, Any]) -> dict[str, Any]:
        """The row's output values (a column or meta field left out keeps its value); raise to quarantine."""
        return self.row_outputs(row, self.ask(self.build_messages(row), self.parse_output))

    # The three steps of the default ``answer_row``: an op implements them, or ``answer_row`` itself
    # (ops that ask several times per row), so they are not abstract.
    def build_messages(self, row: dict[str, Any]) -> list[dict[str, str]]:
        raise NotImplementedError(f"{type(self).__name__} implements neither build_messages nor answer_row")

    def parse_output(self, raw: str) -> Any:
        raise NotImplementedError(f"{type(self).__name__} implements neither parse_output nor answer_row")

    def row_outputs(self, row: dict[str, Any], parsed: Any) -> dict[str, Any]:
        raise NotImplementedError(f"{type(self).__name__} implements neither row_outputs nor answer_row")

    def request_fields(self) -> dict[str, Any]:
        """What every request sends besides the model and the messages."""
        return dict(self.params.sampling_params)

    def chat(self, messages: list[dict[str, str]]) -> str:
        """One answer's text, or the raw body when it has none at ``response_path`` (transient
        failures retried inside); ChatRequestFailed when there is no answer."""
        reply = self.client.chat(messages, **self.request_fields())
        return reply.text if reply.text is not None else reply.body

    def ask(self, messages: list[dict[str, str]], parse: Callable[[str], Any],
            send: Callable[[list[dict[str, str]]], str] | None = None) -> Any:
        """Data-Juicer's loop: up to ``try_num`` answers until ``parse`` returns other than None.

        A request that failed for good (after its retries) counts as a try, as Data-Juicer's client
        returns "" then; one refused for a reason asking again cannot fix (a 4xx) ends the loop."""
        tries = self.params.try_num
        raw: str | None = None
        error: ChatRequestFailed | None = None
        for _ in range(tries):
            try:
                raw = (send or self.chat)(messages)
            except ChatRequestFailed as exc:
                if not exc.transient:
                    raise
                error = exc
                continue
            parsed = parse(raw)
            if parsed is not None:
                return parsed
            self.client.counts.add(parse_failures=1)
        if raw is None:
            assert error is not None
            raise error
        raise UnparseableResponse(self.name, tries, raw, self.expected)

    # ---- a batch --------------------------------------------------------------------------------

    def answer_rows(self, table: pa.Table) -> list[dict[str, Any]]:
        """Every row's outputs, asked concurrently; raises when a row failed (see the module)."""
        rows = table.to_pylist()
        keys = [row_key(r) for r in rows]
        outcomes: dict[str, Any] = {}
        for key in keys:
            cached = self._outcomes.pop(key, _MISSING)
            if cached is not _MISSING:
                outcomes[key] = cached
        todo = {k: r for k, r in zip(keys, rows) if k not in outcomes}
        if todo:
            workers = min(len(todo), self.params.concurrency)
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"llm-{self.name}") as pool:
                outcomes.update(zip(todo, pool.map(self._outcome, todo.values())))
        failed = [outcomes[k] for k in keys if isinstance(outcomes[k], BaseException)]
        if failed:
            for key in todo:  # the runner asks for these rows one at a time next
                self._outcomes[key] = outcomes[key]
            if len(rows) == 1:
                raise failed[0]
            raise RowsFailed(f"{len(failed)} of {len(rows)} rows failed; first: {failed[0]}")
        return [outcomes[k] for k in keys]

    def _outcome(self, row: dict[str, Any]) -> Any:
        try:
            return self.answer_row(row)
        except Exception as exc:  # noqa: BLE001 - the row's own failure, quarantined by the runner
            return exc

    # ---- what the run sees ----------------------------------------------------------------------

    def batch_counts(self, out: pa.Table) -> dict[str, int] | None:
        counts = self.client.counts.take()
        return counts if any(counts.values()) else None

    @classmethod
    def count_warnings(cls, params: Any, counts: dict[str, int]) -> list[str]:
        answered = counts.get("requests", 0) - counts.get("request_errors", 0)
        out = []
        if answered and counts.get("parse_failures", 0) >= answered:
            out.append(f"none of the {answered} answers parsed: does the model follow the op's format "
                       "(its prompt templates and output pattern)?")
        if answered and not counts.get("prompt_tokens") and not counts.get("completion_tokens"):
            out.append("the endpoint reported no token usage")
        return out


class LLMMapper(LLMOp, Mapper[P]):
    """An LLM op that writes columns and/or fields of the ``meta`` struct (Data-Juicer's meta keys).

    ``output_columns`` / ``meta_fields``: name -> Arrow type of what ``row_outputs`` returns."""

    def output_columns(self) -> dict[str, pa.DataType]:
        return {}

    def meta_fields(self) -> dict[str, pa.DataType]:
        return {}

    def columns_written(self) -> tuple[str, ...]:
        return tuple(self.output_columns()) + ((META_COL,) if self.meta_fields() else ())

    def columns_dropped(self) -> tuple[str, ...]:
        return (self.params.text_key,) if getattr(self.params, "drop_text", False) else ()

    def answer_row(self, row: dict[str, Any]) -> dict[str, Any]:
        done = self.present_meta(row)
        return done if done is not None else super().answer_row(row)

    def present_meta(self, row: dict[str, Any]) -> dict[str, Any] | None:
        """Data-Juicer's "generated already": every meta field this op writes is set -> no request."""
        meta, names = row.get(META_COL), list(self.meta_fields())
        if names and isinstance(meta, dict) and all(meta.get(n) is not None for n in names):
            return {n: meta[n] for n in names}
        return None

    def process_batch(self, table: pa.Table) -> pa.Table:
        outcomes = self.answer_rows(table)
        for name, dtype in self.output_columns().items():
            old = table.column(name).to_pylist() if name in table.column_names else [None] * table.num_rows
            values = pa.array([o.get(name, v) for o, v in zip(outcomes, old)], dtype)
            table = (table.set_column(table.schema.get_field_index(name), name, values) if name in table.column_names
                     else table.append_column(name, values))
        if self.meta_fields():
            table = merge_meta(table, outcomes, self.meta_fields())
        for name in self.columns_dropped():
            if name in table.column_names:
                table = table.drop_columns([name])
        return table


def merge_meta(table: pa.Table, outcomes: Sequence[dict[str, Any]], types: dict[str, pa.DataType]) -> pa.Table:
    """Set fields of the ``meta`` struct column (made when absent); other fields are kept."""
    fields: dict[str, pa.Array] = {}
    if META_COL in table.column_names:
        col = table.column(META_COL).combine_chunks()
        if not pa.types.is_struct(col.type):
            raise TypeError(f"column {META_COL!r} is {col.type}, not a struct: cannot add {sorted(types)} to it")
        fields = {col.type.field(i).name: arr for i, arr in enumerate(col.flatten())}
    for name, dtype in types.items():
        old = fields[name].to_pylist() if name in fields else [None] * table.num_rows
        fields[name] = pa.array([o.get(name, v) for o, v in zip(outcomes, old)], dtype)
    struct = pa.StructArray.from_arrays(list(fields.values()), names=list(fields))
    if META_COL in table.column_names:
        return table.set_column(table.schema.get_field_index(META_COL), META_COL, struct)
    return table.append_column(META_COL, struct)


class LLMFilter(LLMOp, Filter[P]):
    """An LLM op that scores each row into ``stats`` and keeps a score range (Data-Juicer's
    ``min_score`` / ``max_score``, with its range keys); ``row_outputs`` returns the stats of
    ``stat_names``.  A null score keeps the row; a row that carries the score already is not asked."""

    score_stat: ClassVar[str] = ""

    def answer_row(self, row: dict[str, Any]) -> dict[str, Any]:
        stats = row.get(STATS_COL)
        if isinstance(stats, dict) and stats.get(self.score_stat) is not None:
            return {name: stats.get(name) for name in self.stat_names}
        return super().answer_row(row)

    def compute_stats(self, table: pa.Table) -> dict[str, Sequence[Any]]:
        outcomes = self.answer_rows(table)
        return {name: [o.get(name) for o in outcomes] for name in self.stat_names}

    def drop_reasons(self, stats: dict[str, Sequence[Any]]) -> list[str | None]:
        p = self.params
        return [None if score is None else self.range_rule.reason(score, self.score_stat, p.min_score, p.max_score)
                for score in stats[self.score_stat]]
