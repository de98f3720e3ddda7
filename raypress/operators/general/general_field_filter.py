"""``general_field_filter`` (Data-Juicer): keep rows for which a condition on their fields holds.

The condition is parsed, never evaluated as Python: as in Data-Juicer it is read with ``ast`` and
walked by a small interpreter that knows only these forms, so a pipeline file cannot run code
through it (no ``settings.allow_code`` needed):

- ``and`` / ``or`` (Python's truthiness; parentheses group);
- comparisons ``<  <=  >  >=  ==  !=``, chained (``10 < num <= 30``); a comparison where either
  side is missing (None) is false, as in Data-Juicer;
- field names (``num``, ``text``), nested keys with dots (``meta.lang``, ``__dj__meta__.a``), and
  constants (``'nothing here'``, ``3``, ``True``, ``None``).

Anything else (calls, arithmetic, subscripts, ``not``, ``in``, lambdas...) is a parameter error at
validation; Data-Juicer accepts it at start-up and fails on the first row.  Two additions: a
negative number literal (``num > -5``, which Data-Juicer's walker refuses) and surrounding spaces.

Names: a column of that name; Data-Juicer's ``__dj__stats__`` and ``__dj__meta__`` mean raypress's
``stats`` and ``meta`` columns when the row has no column of the Data-Juicer name.  An attribute of
a non-struct value is read only when it is a public, non-callable attribute (e.g. a timestamp's
``year``), never a dunder.  A comparison between values Python cannot order (``'a' < 3``) raises,
and the runner quarantines that row with the message (Data-Juicer fails the run).

The verdict is the bool stat ``general_field_filter_condition``.  As in Data-Juicer, a row that
already carries it keeps it (raypress's runner carries the stats of every Data-Juicer filter): a
second ``general_field_filter`` in one pipeline therefore keeps every row the first one kept.  An
empty condition keeps every row.
"""

from __future__ import annotations

import ast
import operator
from typing import Any, Callable, ClassVar, Sequence

import pyarrow as pa
from pydantic import Field, field_validator

from raypress.operators.base import Filter, Params
from raypress.operators.registry import register
from raypress.schema import STATS_COL
from raypress import ast_safe

STAT = "general_field_filter_condition"
_ALIASES = {"__dj__stats__": STATS_COL, "__dj__meta__": "meta"}  # Data-Juicer's field -> raypress's column

_COMPARE: dict[type, Callable[[Any, Any], Any]] = {
    ast.Gt: operator.gt, ast.Lt: operator.lt, ast.Eq: operator.eq,
    ast.NotEq: operator.ne, ast.GtE: operator.ge, ast.LtE: operator.le,
}
_SYMBOLS = {ast.Gt: ">", ast.Lt: "<", ast.Eq: "==", ast.NotEq: "!=", ast.GtE: ">=", ast.LtE: "<=",
            ast.In: "in", ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not"}


class ConditionError(ValueError):
    """The filter condition is not one Data-Juicer's grammar (and so this op) can evaluate."""


def _negative_number(node: ast.AST) -> bool:
    return (isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd))
            and isinstance(node.operand, ast.Constant) and type(node.operand.value) in (int, float))


def check_node(node: ast.AST) -> None:
    """Raise ConditionError at the first form the interpreter does not evaluate."""
    if isinstance(node, ast.BoolOp):
        for child in node.values:
            check_node(child)
    elif isinstance(node, ast.Compare):
        for op in node.ops:
            if type(op) not in _COMPARE:
                raise ConditionError(f"unsupported comparison {_SYMBOLS.get(type(op), type(op).__name__)!r}: "
                                     f"use one of {', '.join(_SYMBOLS[t] for t in _COMPARE)}")
        for child in (node.left, *node.comparators):
            check_node(child)
    elif isinstance(node, ast.Attribute):
        check_node(node.value)
    elif isinstance(node, (ast.Name, ast.Constant)) or _negative_number(node):
        return
    else:
        raise ConditionError(f"unsupported expression {ast_safe.unparse(node)!r} ({type(node).__name__}): a condition "
                             "is fields and constants compared with < <= > >= == !=, joined by and/or")


def parse_condition(condition: str) -> ast.expr | None:
    """The condition's expression tree (None for an empty condition); ConditionError if it is not
    valid Python or uses a form outside the grammar."""
    text = condition.strip()
    if not text:
        return None
    try:
        tree = ast_safe.parse(text, mode="eval")
    except SyntaxError as exc:
        raise ConditionError(f"invalid filter condition {condition!r}: {exc.msg}") from None
    except (RecursionError, MemoryError):
        raise ConditionError("filter condition is nested too deeply") from None
    check_node(tree.body)
    return tree.body


def evaluate(node: ast.expr, row: dict[str, Any]) -> Any:
    """The value of ``node`` for ``row`` (a dict of column values), by Data-Juicer's rules."""
    if isinstance(node, ast.BoolOp):
        values = (evaluate(child, row) for child in node.values)
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.Compare):
        left = evaluate(node.left, row)
        for op, right_node in zip(node.ops, node.comparators):
            right = evaluate(right_node, row)
            if left is None or right is None or not _COMPARE[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.Name):
        if node.id not in row and node.id in _ALIASES:
            return row.get(_ALIASES[node.id])
        return row.get(node.id)
    if isinstance(node, ast.Attribute):
        value = evaluate(node.value, row)
        if isinstance(value, dict):
            return value.get(node.attr)
        if value is None or node.attr.startswith("_"):
            return None
        found = getattr(value, node.attr, None)
        return None if callable(found) else found
    if isinstance(node, ast.Constant):
        return node.value
    if _negative_number(node):
        return -node.operand.value if isinstance(node.op, ast.USub) else node.operand.value
    raise ConditionError(f"unsupported expression {type(node).__name__}")  # check_node refused it already


class GeneralFieldParams(Params):
    filter_condition: str = Field("", description="e.g. \"10 < num <= 30 and text != 'nothing here' and "
                                  "meta.lang == 'en'\": fields and constants compared with < <= > >= == !=, "
                                  "joined by and/or (parsed, never run as code); empty: keep every row")

    @field_validator("filter_condition")
    @classmethod
    def _parses(cls, value: str) -> str:
        parse_condition(value)
        return value


@register("general_field_filter")
class GeneralFieldFilter(Filter[GeneralFieldParams]):
    """Keep rows for which `filter_condition` holds, e.g. "10 < num <= 30 and meta.lang == 'en'"
    (comparisons, and/or, dotted fields; parsed safely, never run as code)."""

    stat_names: ClassVar[tuple[str, ...]] = (STAT,)

    def __init__(self, params: GeneralFieldParams, artifacts: dict | None = None) -> None:
        super().__init__(params, artifacts)
        self.tree = parse_condition(self.params.filter_condition)

    def columns_read(self) -> tuple[str, ...]:
        return ()  # a field a row lacks is None (the comparison is false), as in Data-Juicer

    def compute_stats(self, table: pa.Table) -> dict[str, Sequence[Any]]:
        if self.tree is None:
            return {STAT: [True] * table.num_rows}
        return {STAT: [bool(evaluate(self.tree, row)) for row in table.to_pylist()]}

    def drop_reasons(self, stats: dict[str, Sequence[Any]]) -> list[str | None]:
        return [None if held else "filter_condition false" for held in stats[STAT]]
