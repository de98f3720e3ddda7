"""`python_lambda_mapper`: a user's Python lambda as a Mapper (Data-Juicer's name and params)."""

from __future__ import annotations

from typing import Any, Callable

import pyarrow as pa
from pydantic import Field, field_validator

from raypress.operators.base import Mapper, Params
from raypress.operators.registry import register


def compile_lambda(source: str) -> Callable[[Any], Any]:
    """Evaluate `source`, which must be a lambda expression (Data-Juicer's contract)."""
    fn = eval(source, {"__builtins__": __builtins__})  # noqa: S307 - the user's own pipeline code
    if not callable(fn) or getattr(fn, "__name__", "") != "<lambda>":
        raise ValueError("lambda_str must be a lambda expression, e.g. `lambda sample: {**sample, ...}`")
    return fn


class PythonLambdaParams(Params):
    lambda_str: str = Field(description="A Python lambda: sample dict -> sample dict (or, when batched, "
                                        "dict of column lists -> dict of column lists).")
    batched: bool = Field(False, description="Call the lambda once per batch instead of once per row.")

    @field_validator("lambda_str")
    @classmethod
    def _compiles(cls, v: str) -> str:
        try:
            compile_lambda(v)
        except SyntaxError as exc:
            raise ValueError(f"lambda_str is not valid Python: {exc.msg}") from None
        return v


@register("python_lambda_mapper")
class PythonLambdaMapper(Mapper):
    """Apply a user-written Python lambda to each row (or batch); rows it raises on are quarantined."""

    Params = PythonLambdaParams
    writes = None  # whatever the lambda returns

    def __init__(self, params: PythonLambdaParams, artifacts=None):
        super().__init__(params, artifacts)
        self.fn = compile_lambda(params.lambda_str)

    def __getstate__(self):  # lambdas do not pickle; recompile on the worker
        state = dict(self.__dict__)
        state.pop("fn", None)
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.fn = compile_lambda(self.params.lambda_str)

    def columns_written(self):
        return None

    def process_batch(self, table: pa.Table) -> pa.Table:
        if self.params.batched:
            out = self.fn(table.to_pydict())
            if not isinstance(out, dict):
                raise TypeError(f"batched lambda must return a dict of columns, got {type(out).__name__}")
            return pa.table(out)
        rows = []
        for sample in table.to_pylist():
            result = self.fn(sample)
            if not isinstance(result, dict):
                raise TypeError(f"lambda must return a dict (the sample), got {type(result).__name__}")
            rows.append(result)
        return pa.Table.from_pylist(rows)
