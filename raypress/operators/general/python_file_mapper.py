"""`python_file_mapper`: a function from a user's Python file as a Mapper (Data-Juicer's name and params).

The file is code, so the op needs `settings.allow_code: true`, like `python_lambda_mapper`.  What
can be known without running it is checked at validation, by reading the file with ``ast``
(nothing is imported or executed): it exists, ends in ``.py``, parses, binds ``function_name`` at
its top level, and, when that is a ``def`` or a lambda, takes exactly one positional parameter
(Data-Juicer's rule); a name bound to a literal is "not callable".  The module itself is loaded
on the worker, on the first batch, and only with the grant; Data-Juicer's own checks (callable,
one argument) run again on the loaded function.

As in Data-Juicer: the function gets a row (a dict) and returns one, or with ``batched: true``
gets a dict of column lists and returns one; a result that is not a dict raises ("Function must
return a dictionary, got int instead.") and the runner quarantines the row; an empty
``file_path`` is the identity.  raypress's mappers keep their rows 1:1, so a batched function that
returns another number of rows than it got fails that batch (Data-Juicer lets it add or remove
rows).
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import inspect
import os
import sys
from typing import Any, Callable

import pyarrow as pa
from pydantic import Field, model_validator

from raypress.operators.base import Mapper, Params
from raypress.operators.general.python_lambda_mapper import CodeNotAllowed
from raypress.operators.registry import register


def _positional_count(args: ast.arguments) -> int:
    """What ``inspect.getfullargspec(f).args`` counts: positional-only and ordinary parameters."""
    return len(args.posonlyargs) + len(args.args)


_COMPOUND = (ast.If, ast.Try, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith) + (
    (ast.TryStar,) if hasattr(ast, "TryStar") else ())


def _binds(node: ast.AST, name: str) -> bool:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return node.name == name
    if isinstance(node, ast.alias):
        return (node.asname or node.name.split(".")[0]) == name or node.name == "*"
    return isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Store)


def _top_level_binding(tree: ast.Module, name: str) -> ast.AST | None:
    """The last top-level statement of ``tree`` that binds ``name`` (a def, a class, an import, an
    assignment, or an if/try/for/with holding one), or None."""
    found: ast.AST | None = None
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            hit = stmt.name == name
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            hit = any(_binds(alias, name) for alias in stmt.names)
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            hit = any(_binds(node, name) for target in targets for node in ast.walk(target))
        else:  # bound inside an if/try/for/with at top level: checked only when loaded
            hit = isinstance(stmt, _COMPOUND) and any(_binds(node, name) for node in ast.walk(stmt))
        if hit:
            found = stmt
    return found


def check_function_file(file_path: str, function_name: str) -> None:
    """Data-Juicer's load-time checks, as far as the source alone can answer them (never imports)."""
    if not os.path.isfile(file_path):
        raise FileNotFoundError(f"The file '{file_path}' does not exist.")
    if not file_path.endswith(".py"):
        raise ValueError(f"The file '{file_path}' is not a Python file.")
    with open(file_path, "rb") as f:
        source = f.read()
    try:
        tree = ast.parse(source, filename=file_path)
    except SyntaxError as exc:
        raise ValueError(f"The file '{file_path}' is not valid Python: {exc.msg} (line {exc.lineno})") from None
    except (RecursionError, MemoryError):
        raise ValueError(f"The file '{file_path}' is nested too deeply to parse") from None
    binding = _top_level_binding(tree, function_name)
    if binding is None:
        raise ValueError(f"Function '{function_name}' not found in '{file_path}'.")
    value: ast.AST | None = binding
    if isinstance(binding, (ast.Assign, ast.AnnAssign)):  # `name = <value>` says what it is; `a, name = ...` not
        targets = binding.targets if isinstance(binding, ast.Assign) else [binding.target]
        plain = any(isinstance(t, ast.Name) and t.id == function_name for t in targets)
        value = binding.value if plain else None
    if isinstance(value, (ast.Constant, ast.JoinedStr, ast.List, ast.Tuple, ast.Dict, ast.Set)):
        raise ValueError(f"The attribute '{function_name}' is not callable.")
    decorated = isinstance(value, (ast.FunctionDef, ast.AsyncFunctionDef)) and value.decorator_list
    if isinstance(value, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and not decorated:
        if _positional_count(value.args) != 1:
            raise ValueError(f"The function '{function_name}' must take exactly one argument")


def load_function(file_path: str, function_name: str) -> Callable[[Any], Any]:
    """Import the file and return its function (run time only, under `settings.allow_code`)."""
    check_function_file(file_path, function_name)
    digest = hashlib.sha256(os.path.abspath(file_path).encode()).hexdigest()[:12]
    module_name = f"raypress_user_code.{os.path.splitext(os.path.basename(file_path))[0]}_{digest}"
    spec = importlib.util.spec_from_file_location(module_name, file_path)
    if spec is None or spec.loader is None:
        raise ValueError(f"The file '{file_path}' cannot be loaded as a Python module.")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # so that dataclasses, pickle and the like find it
    spec.loader.exec_module(module)
    if not hasattr(module, function_name):
        raise ValueError(f"Function '{function_name}' not found in '{file_path}'.")
    func = getattr(module, function_name)
    if not callable(func):
        raise ValueError(f"The attribute '{function_name}' is not callable.")
    if len(inspect.getfullargspec(func).args) != 1:
        raise ValueError(f"The function '{function_name}' must take exactly one argument")
    return func


class PythonFileParams(Params):
    file_path: str = Field("", description="the Python file (.py) defining the function; empty: rows pass "
                                           "unchanged")
    function_name: str = Field("process_single", description="the function to call: one parameter (a row as "
                               "a dict, or with batched a dict of column lists), returns the same kind")
    batched: bool = Field(False, description="call the function once per batch instead of once per row")
    allow_code: bool = Field(False, description="Set by validation from `settings.allow_code`; "
                                                "not a pipeline parameter.")

    @model_validator(mode="after")
    def _function_is_there(self) -> "PythonFileParams":
        if self.file_path:
            try:
                check_function_file(self.file_path, self.function_name)
            except FileNotFoundError as exc:
                raise ValueError(str(exc)) from None
        return self


def _as_dict(result: Any) -> dict:
    if not isinstance(result, dict):
        raise ValueError(f"Function must return a dictionary, got {type(result).__name__} instead.")
    return result


@register("python_file_mapper")
class PythonFileMapper(Mapper[PythonFileParams]):
    """Apply a function from a user's Python file to each row (or batch); rows it raises on are
    quarantined.

    Runs code from outside the pipeline file, so it needs `settings.allow_code: true`."""

    writes = None  # whatever the function returns
    takes_code = True

    def __init__(self, params: PythonFileParams, artifacts=None):
        super().__init__(params, artifacts)
        self.func: Callable[[Any], Any] | None = None  # loaded on the first batch, on the worker

    def __getstate__(self):  # the user's module is not importable by name elsewhere: load it again there
        state = dict(self.__dict__)
        state["func"] = None
        return state

    def function(self) -> Callable[[Any], Any]:
        if self.func is None:
            p = self.params
            if not p.file_path:
                self.func = lambda sample: sample
            elif not p.allow_code:
                raise CodeNotAllowed("python_file_mapper runs code from a Python file; "
                                     "it needs `settings.allow_code: true`")
            else:
                self.func = load_function(p.file_path, p.function_name)
        return self.func

    def process_batch(self, table: pa.Table) -> pa.Table:
        func = self.function()
        if not self.params.file_path:
            return table
        if self.params.batched:
            return pa.table(_as_dict(func(table.to_pydict())))
        return pa.Table.from_pylist([_as_dict(func(sample)) for sample in table.to_pylist()])
