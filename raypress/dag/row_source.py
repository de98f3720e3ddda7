"""Where a reader found a row, read back from the row's id (readers derive ids from the file and
the row's line or byte offset): what `raypress rejects`, the run page and the analyzer show."""

from __future__ import annotations

import re
from typing import Any

_SOURCE = re.compile(r"^(?P<file>.+?)[:#@](?P<offset>\d+)$")


def source_of(row_id: str | None) -> dict[str, Any] | None:
    """``{"file", "offset"}`` from an id (``path:line``, ``path#offset``, ``path@offset``, or a bare
    path); None for ids a reader did not derive from a file."""
    if not row_id:
        return None
    match = _SOURCE.match(row_id)
    if match and ("/" in match["file"] or "." in match["file"]):
        return {"file": match["file"], "offset": int(match["offset"])}
    if "/" in row_id:
        return {"file": row_id, "offset": None}
    return None
