"""A field's value per row, read the way Data-Juicer's selectors read it.

``field_column``: a column named exactly ``field_key`` (dots included) wins, as in
``specified_field_filter``; otherwise the dotted path through struct columns (``meta.key1.count``).
A row that lacks the field reads as null: Arrow gives a block one schema, so a struct row without
the key is already null there, and a block without the column reads as all null.  (Data-Juicer
asserts that the key exists and stops the whole run; it treats a None value as below.)

Three readings:
- ``numbers``: Data-Juicer's ``stats_to_number`` (a string through ``float``, a list through its
  mean, None / ``[]`` / anything that fails to the sentinel ``-sys.maxsize``, or ``sys.maxsize``
  when ``reverse`` is false), with NaN also read as the sentinel, so that NaN's broken ordering
  cannot make the selection depend on the input order;
- ``value_keys``: group keys with Python's equality, as the keys of Data-Juicer's dict
  (``1 == 1.0 == True``, a string never equals a number, None is a value of its own);
- ``tag_matches``: whether the value is one of the target tags (strings; a number never is one).
The last two accept what Data-Juicer asserts (strings, numbers, None); any other value (a list,
a struct, bytes, a date) is returned as an error message: the row is quarantined, the run goes on.
"""

from __future__ import annotations

import decimal
import json
import math
import numbers as _numbers
import sys
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

NULL_KEY = "null"


def field_column(table: pa.Table, field_key: str) -> pa.ChunkedArray:
    """The field's values, null where a row lacks it."""
    if field_key in table.column_names:
        return table.column(field_key)
    head, *path = field_key.split(".")
    missing = pa.chunked_array([pa.nulls(table.num_rows)])
    if head not in table.column_names:
        return missing
    col = table.column(head)
    for key in path:
        if not pa.types.is_struct(col.type) or col.type.get_field_index(key) < 0:
            return missing
        col = pc.struct_field(col, key)
    return col


def sentinel(reverse: bool = True) -> float:
    """The number Data-Juicer gives a value that is not one: last in the order it selects from."""
    return float(-sys.maxsize if reverse else sys.maxsize)


def to_number(value: Any, reverse: bool = True) -> float:
    """Data-Juicer's ``stats_to_number`` for one value (NaN also reads as the sentinel)."""
    try:
        if isinstance(value, str):
            number = float(value)
        elif value is None or (isinstance(value, list) and not value):
            return sentinel(reverse)
        else:
            with np.errstate(all="ignore"):
                number = float(np.asarray(value).mean())
    except Exception:  # whatever Data-Juicer's except catches: not a number
        return sentinel(reverse)
    return sentinel(reverse) if math.isnan(number) else number


def number_detail(number: float, reverse: bool = True) -> str:
    """A dropped row's detail: its number, or null where it had none (the sentinel)."""
    return json.dumps({"value": None if number == sentinel(reverse) else float(number)})


def numbers(col: pa.ChunkedArray, reverse: bool = True) -> np.ndarray:
    """``to_number`` of every value, as float64; numeric and boolean columns without a Python loop."""
    t = col.type
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t) or pa.types.is_decimal(t):
        values = pc.cast(col, pa.float64(), safe=False).to_numpy()  # nulls arrive as NaN
        return np.where(np.isnan(values), sentinel(reverse), values)
    if pa.types.is_null(t):
        return np.full(len(col), sentinel(reverse))
    return np.array([to_number(v, reverse) for v in col.to_pylist()], dtype=np.float64)


def scalar_error(value: Any, field_key: str, op: str) -> str | None:
    """Why ``value`` is not what ``op`` compares (Data-Juicer asserts: a string, a number or None)."""
    if value is None or isinstance(value, (str, _numbers.Number)):
        return None
    return f"{field_key} holds a {type(value).__name__}: {op} compares strings, numbers and null only"


def value_key(value: Any) -> str:
    """The group key of a string, a number or None: equal under Python's ``==`` exactly when equal here."""
    if value is None:
        return NULL_KEY
    if isinstance(value, str):
        return "s:" + value
    if isinstance(value, (bool, int)):
        return f"n:{int(value)}"
    if isinstance(value, float):
        return f"n:{int(value)}" if value.is_integer() else f"n:{value!r}"
    if isinstance(value, decimal.Decimal) and value.is_finite() and value == value.to_integral_value():
        return f"n:{int(value)}"
    return f"n:{value!r}" if isinstance(value, decimal.Decimal) else f"n:{float(value)!r}"


def value_keys(col: pa.ChunkedArray, field_key: str, op: str) -> tuple[pa.Array, list[str | None] | None]:
    """Each row's group key (null where the value cannot be grouped) and, when any cannot, the error
    message per row."""
    t = col.type
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        keys = pc.binary_join_element_wise(pa.scalar("s:", t), col, pa.scalar("", t))
        return pc.fill_null(pc.cast(keys, pa.string()), NULL_KEY).combine_chunks(), None
    if pa.types.is_integer(t) or pa.types.is_boolean(t):
        digits = pc.cast(pc.cast(col, pa.int64()) if pa.types.is_boolean(t) else col, pa.string())
        keys = pc.binary_join_element_wise(pa.scalar("n:"), digits, pa.scalar(""))
        return pc.fill_null(keys, NULL_KEY).combine_chunks(), None
    if pa.types.is_null(t):
        return pa.array([NULL_KEY] * len(col), pa.string()), None
    keys: list[str | None] = []
    errors: list[str | None] = []
    for value in col.to_pylist():
        error = scalar_error(value, field_key, op)
        errors.append(error)
        keys.append(None if error else value_key(value))
    return pa.array(keys, pa.string()), errors if any(errors) else None


def tag_matches(col: pa.ChunkedArray, tags: list[str], field_key: str,
                op: str) -> tuple[np.ndarray, np.ndarray, list[str | None] | None]:
    """Per row: whether the value is one of ``tags``, whether it is null (or missing), and the error
    messages when some value is neither a string, a number nor null."""
    t = col.type
    missing = col.is_null().to_numpy(zero_copy_only=False) if len(col) else np.zeros(0, bool)
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        found = pc.fill_null(pc.is_in(col, value_set=pa.array(tags, t)), False)
        return found.to_numpy(zero_copy_only=False), missing, None
    if (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)
            or pa.types.is_decimal(t) or pa.types.is_null(t)):
        return np.zeros(len(col), bool), missing, None  # a number is never a (string) tag
    wanted = set(tags)
    values = col.to_pylist()
    errors = [scalar_error(v, field_key, op) for v in values]
    found_list = [isinstance(v, str) and v in wanted for v in values]
    return np.array(found_list, bool), missing, errors if any(errors) else None


def key_value(key: str) -> Any:
    """The value a group key stands for (a number as int or float), for a tombstone's detail."""
    if key == NULL_KEY:
        return None
    kind, _, text = key.partition(":")
    if kind == "s":
        return text
    try:
        return int(text)
    except ValueError:
        return text if text.startswith("Decimal") else float(text)
