"""How a purifier hands back its rows: the ``image`` column replaced, ``purified_by`` naming the method.

Why a module of its own: ``purify`` (the learned bridge) and ``purify_baseline`` (the
training-free filters) must write their output the same way, so that ``purification_quality``
and the classifier stages read any purified set alike; neither op should import the other.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

PURIFIED_BY = "purified_by"


def replace_images(table: pa.Table, pngs: Sequence[bytes], purified_by: str) -> pa.Table:
    """``table`` with its ``image`` column replaced by ``pngs`` and ``purified_by`` set on every row
    (overwritten when an earlier purification set it); every other column is kept as is."""
    out = table.set_column(table.schema.get_field_index("image"), "image", pa.array(list(pngs), pa.binary()))
    label = pa.array([purified_by] * table.num_rows, pa.string())
    if PURIFIED_BY in out.column_names:
        return out.set_column(out.schema.get_field_index(PURIFIED_BY), PURIFIED_BY, label)
    return out.append_column(PURIFIED_BY, label)
