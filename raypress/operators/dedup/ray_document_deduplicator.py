"""``ray_document_deduplicator``: Data-Juicer's Ray-mode exact document dedup, on raypress's
``document_deduplicator``.

Data-Juicer's Ray variant hashes what its ``document_deduplicator`` hashes (md5 of the text,
optionally lowercased and without whitespace, digits and ASCII punctuation, then stripped) and
differs in two ways that this op keeps:

- where it keeps a record of the hashes seen (``backend``): a pool of Ray actors, or a Redis server
  at ``redis_address``.  raypress decides duplicates with a hash shuffle inside Ray Data (see
  ``document_deduplicator``), so both values are accepted and mean the same; ``redis`` starts no
  Redis client, only a line in the log and a ``dedup_backend_not_used`` event saying so
  (``exact/ray_backend.py``);
- a row whose text is missing or empty (null or ``""``) hashes to the constant ``EMPTY``: all such
  rows are one group, of which one is kept (``document_deduplicator`` quarantines a null text).
  A whitespace-only text is not empty there: it hashes as ``""`` does after ``strip()``, in a group
  of its own, and so it does here.  Duplicates of that group name ``{"md5": "EMPTY"}``.

Which row of a group stays: Data-Juicer's Ray variant keeps whichever a worker saw first (it
depends on scheduling); raypress keeps the smallest ``id``, on every run.

How empty texts become one group without touching ``document_deduplicator``: before it runs, a
null or empty text is replaced by a marker text (which no real text equals: it holds NUL bytes
and survives both normalizations) and its row tagged; afterwards each tagged row gets its own
text back (null, ``""``, or no column at all where the input had none).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from raypress.operators.base import Deduplicator, RunContext, json_detail
from raypress.operators.dedup.document_deduplicator import DocumentDeduplicator, DocumentDedupParams
from raypress.operators.dedup.exact.ray_backend import RayBackendParams, note_backend
from raypress.operators.registry import register
from raypress.schema import DETAIL_COL, KIND_COL, TombstoneKind

if TYPE_CHECKING:  # pragma: no cover
    import ray.data

EMPTY_TEXT = "\x00raypress empty document\x00"  # what a missing or empty text is hashed as
EMPTY_COL = "_rp_empty_text"  # per row: how its text was empty (see _KEPT ... _ABSENT)
_KEPT, _NULL, _BLANK, _ABSENT = 0, 1, 2, 3  # had a text; null; ""; the input had no text column
EMPTY_DETAIL = json_detail({"md5": "EMPTY"})  # Data-Juicer's hash value for those rows


def mark_empty_texts(table: pa.Table, text_key: str) -> pa.Table:
    """Replace each null or empty text by :data:`EMPTY_TEXT`, recording which it was in ``EMPTY_COL``."""
    n = table.num_rows
    if text_key not in table.column_names:
        table = table.append_column(text_key, pa.array([EMPTY_TEXT] * n, pa.string()))
        return table.append_column(EMPTY_COL, pa.array(np.full(n, _ABSENT, np.int8)))
    texts = table.column(text_key)
    null = texts.is_null().to_numpy(zero_copy_only=False)
    blank = pc.fill_null(pc.equal(texts, ""), False).to_numpy(zero_copy_only=False)
    how = np.where(null, _NULL, np.where(blank, _BLANK, _KEPT)).astype(np.int8)
    if how.any():
        marker = pa.scalar(EMPTY_TEXT, texts.type)
        texts = pc.if_else(pa.array(how != _KEPT), marker, texts)
        table = table.set_column(table.schema.get_field_index(text_key), text_key, texts)
    return table.append_column(EMPTY_COL, pa.array(how))


def restore_empty_texts(table: pa.Table, text_key: str) -> pa.Table:
    """Undo :func:`mark_empty_texts`; duplicates of the empty group get Data-Juicer's ``EMPTY`` hash."""
    if EMPTY_COL not in table.column_names:
        return table
    how = table.column(EMPTY_COL).to_numpy()
    table = table.drop_columns([EMPTY_COL])
    if not how.any():
        return table
    if (how == _ABSENT).all():
        table = table.drop_columns([text_key])
    else:
        i = table.schema.get_field_index(text_key)
        texts = table.column(i)
        blank = pa.scalar("", texts.type)
        texts = pc.if_else(pa.array(how == _BLANK), blank, texts)
        texts = pc.if_else(pa.array((how == _NULL) | (how == _ABSENT)), pa.scalar(None, texts.type), texts)
        table = table.set_column(i, text_key, texts)
    if KIND_COL in table.column_names and DETAIL_COL in table.column_names:
        duplicate = pc.fill_null(pc.equal(table.column(KIND_COL), TombstoneKind.DUPLICATE.value), False)
        empty_dup = pc.and_(duplicate, pa.array(how != _KEPT))
        i = table.schema.get_field_index(DETAIL_COL)
        detail = pc.if_else(empty_dup, pa.scalar(EMPTY_DETAIL, table.schema.field(i).type), table.column(i))
        table = table.set_column(i, DETAIL_COL, detail)
    return table


# document_deduplicator's params, backend and redis_address.  No docstring: it would become the
# description of the op's param schema.
class RayDocumentDedupParams(RayBackendParams, DocumentDedupParams):
    pass


@register("ray_document_deduplicator")
class RayDocumentDeduplicator(DocumentDeduplicator, Deduplicator[RayDocumentDedupParams]):
    """Exact document dedup under Data-Juicer's Ray name: md5 of the normalized text, each group
    keeps its smallest id; missing or empty texts are one group (Data-Juicer's EMPTY hash).

    `backend` and `redis_address` are accepted for Data-Juicer recipes: raypress always decides
    duplicates with a hash shuffle inside Ray, with no actors' hash sets and no Redis."""

    def apply(self, ds: "ray.data.Dataset", ctx: RunContext) -> "ray.data.Dataset":
        note_backend(self.params, ctx)
        kwargs = dict(text_key=self.params.text_key)
        marked = ds.map_batches(mark_empty_texts, batch_format="pyarrow", fn_kwargs=kwargs)
        deduped = super().apply(marked, ctx)
        return deduped.map_batches(restore_empty_texts, batch_format="pyarrow", fn_kwargs=kwargs)

