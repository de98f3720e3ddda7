"""text_chunk_mapper (Data-Juicer): cut each text into chunks, one row per chunk.

Data-Juicer's three ways, lengths counted in characters:

- ``split_pattern`` only (``max_len: null``): the text split at every match of the pattern; the
  matched separators are chunks too, and chunks that are empty or whitespace are dropped (so a
  row of blank text leaves no row at all).
- ``max_len`` only (``split_pattern: null``): windows of ``max_len`` characters starting every
  ``max_len - overlap_len`` characters; a text of at most ``max_len`` stays whole.
- both: while the rest is longer than ``max_len``, its first ``max_len`` characters are cut at
  the start of the last match of the pattern among them (the match itself dropped, the rest
  going on after it); with no match there, they are cut whole and the rest starts
  ``overlap_len`` characters before the cut.

Every other column is copied to each of a row's chunks, as Data-Juicer does; a row cut into
several chunks gives them the ids ``<id>#0``, ``<id>#1``, ... (raypress ids stay unique), a row
kept whole keeps its id.  A null text stays one row.

One row in, several rows out: raypress's Mapper kind keeps rows 1:1 (``dag/batch_exec.py`` checks
it), so this op is an Aggregator, the kind whose Dataset output may hold any number of rows; it
maps the batches of its (materialized) input lazily, and the ledger counts it as a node that
transforms (rows in and rows out need not match).

Data-Juicer's ``tokenizer`` (lengths in tokens of a Hugging Face, tiktoken or DashScope tokenizer
it downloads or calls) is refused at validation.  Where Data-Juicer would recurse forever (a
pattern whose only match in the window is empty and at its start, e.g. ``^``), the window is cut
whole instead."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
from pydantic import Field, ValidationInfo, field_validator

from raypress.artifacts import DatasetArtifact
from raypress.operators.base import Aggregator, RunContext, TextParams
from raypress.operators.registry import register
from raypress.operators.shared.unicode_regex import check_pattern, compile_pattern
from raypress.schema import ID_COL

if TYPE_CHECKING:  # pragma: no cover
    import ray.data

BATCH_ROWS = 256


def chunk_text(text: str, max_len: int | None, split_pattern: str | None, overlap_len: int = 0) -> list[str]:
    """The chunks of ``text``, Data-Juicer's rules (module docstring), lengths in characters."""
    if max_len is None:
        assert split_pattern is not None
        pieces = compile_pattern(f"({split_pattern})").split(text)
        return [p for p in pieces if p is not None and p.strip()]  # None: a group of the user's that did not take part
    if len(text) <= max_len:
        return [text]
    if split_pattern is None:
        return [text[start:start + max_len] for start in range(0, len(text), max_len - overlap_len)]
    separator = compile_pattern(split_pattern)
    chunks = []
    while len(text) > max_len:
        window = text[:max_len]
        matches = list(separator.finditer(window))
        last = matches[-1] if matches else None  # the window's last separator
        if last is None or last.end() == 0:
            chunks.append(window)
            text = text[max_len - overlap_len:]
        else:
            chunks.append(window[:last.start()])
            text = text[last.end():]
    chunks.append(text)
    return chunks


def chunk_rows(table: pa.Table, text_key: str, max_len: int | None, split_pattern: str | None,
               overlap_len: int) -> pa.Table:
    """``table`` with each row repeated once per chunk of its text (a batch function for Ray Data)."""
    texts = table.column(text_key).to_pylist()
    chunks = [[None] if t is None else chunk_text(t, max_len, split_pattern, overlap_len) for t in texts]
    counts = np.fromiter((len(c) for c in chunks), np.int64, len(chunks))
    out = table.take(pa.array(np.repeat(np.arange(table.num_rows), counts)))
    out = out.set_column(out.schema.get_field_index(text_key), text_key,
                         pa.array([c for cs in chunks for c in cs], pa.string()))
    if ID_COL in out.column_names and text_key != ID_COL:
        ids = [None if i is None else f"{i}#{k}" if n > 1 else str(i)
               for i, n in zip(table.column(ID_COL).to_pylist(), counts.tolist()) for k in range(n)]
        out = out.set_column(out.schema.get_field_index(ID_COL), ID_COL, pa.array(ids, pa.string()))
    return out


class TextChunkParams(TextParams):
    max_len: int | None = Field(default=None, gt=0, description="longest chunk in characters (None: cut only at "
                                        "split_pattern)")
    split_pattern: str | None = Field(default=r"\n\n", description="regular expression to cut at (None: cut "
                                      "every max_len characters)")
    overlap_len: int = Field(default=0, ge=0, description="characters a chunk repeats from the previous one "
                                        "when it was cut at max_len rather than at split_pattern")
    tokenizer: str | None = Field(default=None, description="Data-Juicer's token-length mode: not available in "
                                  "raypress (lengths are characters); leave it unset")
    trust_remote_code: bool = Field(default=False, description="Data-Juicer's option for its tokenizer; unused")

    @field_validator("split_pattern")
    @classmethod
    def _pattern(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None:
            if info.data.get("max_len") is None and "max_len" in info.data:
                raise ValueError("max_len and split_pattern cannot both be null: set one of them")
            return None
        return check_pattern(value)

    @field_validator("overlap_len")
    @classmethod
    def _overlap(cls, value: int, info: ValidationInfo) -> int:
        max_len = info.data.get("max_len")
        if max_len is not None and value >= max_len:
            raise ValueError(f"overlap_len ({value}) must be less than max_len ({max_len})")
        return value

    @field_validator("tokenizer")
    @classmethod
    def _no_tokenizer(cls, value: str | None) -> str | None:
        if value is not None:
            raise ValueError(f"chunk lengths in tokens of {value!r} need Data-Juicer's tokenizer loading (a Hugging "
                             "Face or tiktoken download, or the DashScope API), which raypress does not offer; "
                             "leave tokenizer unset to count characters")
        return value


@register("text_chunk_mapper")
class TextChunkMapper(Aggregator[TextChunkParams]):
    """Split each text into chunks by max_len / split_pattern / overlap_len, one row per chunk
    (Data-Juicer text_chunk_mapper; an Aggregator, since a row becomes several)."""

    batch_size = BATCH_ROWS

    def columns_written(self) -> tuple[str, ...]:
        return (self.params.text_key,)

    def chunk_batch(self, table: pa.Table) -> pa.Table:
        p = self.params
        return chunk_rows(table, p.text_key, p.max_len, p.split_pattern, p.overlap_len)

    def apply(self, ds: "ray.data.Dataset", ctx: RunContext) -> Any:
        p = self.params
        chunked = ds.map_batches(chunk_rows, batch_format="pyarrow", batch_size=BATCH_ROWS,
                                 fn_kwargs=dict(text_key=p.text_key, max_len=p.max_len,
                                                split_pattern=p.split_pattern, overlap_len=p.overlap_len))
        return DatasetArtifact(chunked)
