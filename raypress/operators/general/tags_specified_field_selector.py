"""``tags_specified_field_selector`` (Data-Juicer): keep the rows whose field holds one of the target tags.

As in Data-Juicer: ``field_key`` names the field (dots for nested keys, e.g. ``meta.sentiment``), a
row is kept when its value is one of ``target_tags`` (case-sensitive strings; a number is never a
tag, nor is null), and an empty ``field_key`` or an input of at most one row keeps every row.
Data-Juicer's ``target_tags`` defaults to None, which fails when the op is built: here it is a
required parameter.  Rows not kept leave with the reason ``<field> not in target_tags``, or
``<field> missing`` when the value is null or the row lacks the field (where Data-Juicer's
assertion stops the run).  A value that is not a string, a number or null (a list, a struct) makes
that row an error tombstone, quarantined with the message, where Data-Juicer's assertion stops the
run.

The rule is per row, but the one-row case needs the count of the whole input, so this is a
global op like the other selectors; each block counts its rows and its matches, one task adds
them up.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field

from raypress.operators.general.selection.passes import FieldParams, FieldSelector, Keys, PassInfo, Verdict
from raypress.operators.general.selection.values import field_column, tag_matches
from raypress.operators.registry import register

MATCH_COL = "_rp_match"
MISSING_COL = "_rp_missing"
VALUE_COL = "_rp_tag"


class TagsSelectorParams(FieldParams):
    target_tags: list[str] = Field(description="the tags to keep (case-sensitive)")


def _as_text(col: pa.ChunkedArray) -> pa.ChunkedArray:
    """The values as text for the tombstones' detail (null where they are not strings or numbers)."""
    t = col.type
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_integer(t) or \
            pa.types.is_floating(t) or pa.types.is_boolean(t) or pa.types.is_decimal(t):
        return pc.cast(col, pa.string())
    return pa.chunked_array([pa.nulls(len(col), pa.string())])


@register("tags_specified_field_selector")
class TagsSpecifiedFieldSelector(FieldSelector[TagsSelectorParams]):
    """Keep the rows whose `field_key` value (dots for nested keys) is one of `target_tags`; the
    others drop as `<field> not in target_tags` / `<field> missing`."""

    def keys(self, live: pa.Table, info: PassInfo) -> Keys:
        p = self.params
        col = field_column(live, p.field_key)
        found, missing, errors = tag_matches(col, p.target_tags, p.field_key, self.name)
        return Keys(pa.table({MATCH_COL: pa.array(found, pa.bool_()), MISSING_COL: pa.array(missing, pa.bool_()),
                              VALUE_COL: _as_text(col)}), errors)

    def project(self, keys: Keys) -> pa.Table:  # every row counts, as in Data-Juicer's len(dataset)
        matches = pc.sum(keys.table.column(MATCH_COL)).as_py() or 0
        return pa.table({"rows": [keys.table.num_rows], "matches": [int(matches)]})

    def decide(self, projected: pa.Table):
        total = pc.sum(projected.column("rows")).as_py() or 0
        matches = pc.sum(projected.column("matches")).as_py() or 0
        if total <= 1:
            return {"rows": total, "selected": total}, None
        return {"rows": total, "selected": matches}, True

    def verdict(self, keys: pa.Table, decision, info: PassInfo) -> Verdict:
        field = self.params.field_key
        rows = zip(keys.column(MATCH_COL).to_pylist(), keys.column(MISSING_COL).to_pylist(),
                   keys.column(VALUE_COL).to_pylist())
        reasons, details = [], []
        for found, missing, value in rows:
            reasons.append(None if found else f"{field} missing" if missing else f"{field} not in target_tags")
            details.append(None if found or missing else json.dumps({"value": value}))
        return Verdict(reasons, details)
