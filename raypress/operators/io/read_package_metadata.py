"""Python package metadata (``*.dist-info/METADATA``) as text rows: the quickstart corpus.

Every virtual environment holds a hundred or so of these: real, varied English prose (the long
descriptions) with many near-copies of licence text, which is what a curation demo needs.
"""

from __future__ import annotations

import email.parser
import email.policy
import re
from functools import partial
from typing import Iterator

import pyarrow as pa
from pydantic import Field

from raypress.operators.base import Params, Reader, RunContext
from raypress.operators.shared.files import Globs, expand_globs, map_files
from raypress.operators.shared.rows import combine
from raypress.operators.registry import register
from raypress.schema import ID_COL, TombstoneKind, with_tombstones

COLUMNS = (ID_COL, "name", "version", "summary", "license", "text")
FIELDS = {"name": "Name", "version": "Version", "summary": "Summary"}
# How a multi-line Description header is folded: 7 spaces + '|' (the spec), 8 spaces (distutils).
_CONTINUATION = re.compile(r"\n(?: {7}\|| {8})")


class ReadPackageMetadataParams(Params):
    paths: Globs = Field(
        default=[".venv/lib/python*/site-packages/*.dist-info/METADATA"],
        description="glob patterns of METADATA files, relative to the current directory",
    )


@register("read_package_metadata")
class ReadPackageMetadata(Reader[ReadPackageMetadataParams]):
    """Read Python *.dist-info/METADATA files: name, version, summary, license and the long description."""

    writes = COLUMNS

    def read(self, ctx: RunContext):
        files = expand_globs(self.params.paths)
        return map_files(files, partial(read_metadata_file, node=ctx.node_id), ctx=ctx)


def read_metadata_file(path: str, abs_path: str, node: str) -> Iterator[pa.Table]:
    """One row per file; an empty description is kept as empty text (filters decide later)."""
    try:
        with open(abs_path, "rb") as f:
            raw = f.read()
        row = parse_metadata(raw.decode("utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        reason = "decode_error" if isinstance(exc, UnicodeDecodeError) else "unreadable_file"
        dead = _table(path, dict.fromkeys(COLUMNS[1:]))
        detail = f"{type(exc).__name__}: {exc}"
        yield with_tombstones(dead, node, TombstoneKind.ERROR, reasons=[reason], details=[detail])
        return
    yield combine(_table(path, row), None)


def parse_metadata(content: str) -> dict[str, str | None]:
    """The fields we keep from a METADATA file (core metadata spec, any version)."""
    msg = email.parser.Parser(policy=email.policy.compat32).parsestr(content)
    row: dict[str, str | None] = {col: _header(msg, key) for col, key in FIELDS.items()}
    row["license"] = _header(msg, "License") or _header(msg, "License-Expression")
    body = msg.get_payload()
    text = body if isinstance(body, str) else ""
    if not text.strip() and msg.get("Description"):  # Metadata < 2.1 kept it in a header
        text = _CONTINUATION.sub("\n", str(msg.get("Description")))
    row["text"] = text
    return row


def _header(msg, key: str) -> str | None:
    value = msg.get(key)
    if value is None:
        return None
    value = str(value).strip()
    return value if value and value != "UNKNOWN" else None


def _table(path: str, row: dict[str, str | None]) -> pa.Table:
    cols = {ID_COL: pa.array([path], pa.string())}
    cols.update({c: pa.array([row[c]], pa.string()) for c in COLUMNS[1:]})
    return pa.table(cols)
