"""`python_lambda_mapper`: a user's Python lambda as a Mapper (Data-Juicer's name and params).

A pipeline file is data: validation only parses the lambda (nothing is evaluated by `validate`
or `plan`), and the op compiles it on the worker, on its first batch, and only when the run
allows code (`settings.allow_code: true`, which validation hands over as ``allow_code``).
"""

from __future__ import annotations

import ast
from typing import Any, Callable

import pyarrow as pa
from pydantic import Field, field_validator

from raypress.operators.base import Mapper, Params
from raypress.operators.registry import register
from raypress import ast_safe

LAMBDA_HINT = "lambda_str must be a lambda expression, e.g. `lambda sample: {**sample, ...}`"


class CodeNotAllowed(PermissionError):
    """The run did not allow code from the pipeline file (`settings.allow_code`)."""


def check_lambda_syntax(source: str) -> None:
    """Parse, never evaluate: `source` must be one lambda expression taking exactly one argument
    (the row, or with ``batched`` the batch), as Data-Juicer checks: ``lambda x, y: ...`` would
    otherwise be accepted here and fail on every row."""
    tree = ast_safe.parse(source, mode="eval")
    if not isinstance(tree.body, ast.Lambda):
        raise ValueError(LAMBDA_HINT)
    args = tree.body.args
    positional = len(args.posonlyargs) + len(args.args)
    required_kw = [a.arg for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is None]
    if positional != 1 or args.vararg is not None or required_kw:
        given = ast_safe.unparse(args)
        raise ValueError(f"lambda_str must take exactly one argument (the row, or with batched: true the "
                         f"batch); it takes ({given}), so it would fail on every row")


def compile_lambda(source: str) -> Callable[[Any], Any]:
    """Evaluate `source`, which must be a lambda expression (Data-Juicer's contract); run time only."""
    check_lambda_syntax(source)
    return eval(source, {"__builtins__": __builtins__})  # noqa: S307 - allowed by settings.allow_code


class PythonLambdaParams(Params):
    lambda_str: str = Field(description="A Python lambda: sample dict -> sample dict (or, when batched, "
                                        "dict of column lists -> dict of column lists).")
    batched: bool = Field(False, description="Call the lambda once per batch instead of once per row.")
    allow_code: bool = Field(False, description="Set by validation from `settings.allow_code`; "
                                                "not a pipeline parameter.")

    @field_validator("lambda_str")
    @classmethod
    def _parses(cls, v: str) -> str:
        try:
            check_lambda_syntax(v)
        except SyntaxError as exc:
            raise ValueError(f"lambda_str is not valid Python: {exc.msg}") from None
        except (RecursionError, MemoryError):
            raise ValueError("lambda_str is nested too deeply") from None
        return v


@register("python_lambda_mapper")
class PythonLambdaMapper(Mapper[PythonLambdaParams]):
    """Apply a user-written Python lambda to each row (or batch); rows it raises on are quarantined.

    Runs code from the pipeline file, so it needs `settings.allow_code: true`."""

    writes = None  # whatever the lambda returns
    takes_code = True

    def __init__(self, params: PythonLambdaParams, artifacts=None):
        super().__init__(params, artifacts)
        self.fn: Callable[[Any], Any] | None = None  # compiled on the first batch, on the worker

    def __getstate__(self):  # lambdas do not pickle; recompile on the worker
        state = dict(self.__dict__)
        state["fn"] = None
        return state

    def columns_written(self):
        return None

    def _lambda(self) -> Callable[[Any], Any]:
        if self.fn is None:
            if not self.params.allow_code:
                raise CodeNotAllowed("python_lambda_mapper runs code from the pipeline file; "
                                     "it needs `settings.allow_code: true`")
            self.fn = compile_lambda(self.params.lambda_str)
        return self.fn

    def process_batch(self, table: pa.Table) -> pa.Table:
        fn = self._lambda()
        if self.params.batched:
            out = fn(table.to_pydict())
            if not isinstance(out, dict):
                raise TypeError(f"batched lambda must return a dict of columns, got {type(out).__name__}")
            return pa.table(out)
        rows = []
        for sample in table.to_pylist():
            result = fn(sample)
            if not isinstance(result, dict):
                raise TypeError(f"lambda must return a dict (the sample), got {type(result).__name__}")
            rows.append(result)
        return pa.Table.from_pylist(rows)
