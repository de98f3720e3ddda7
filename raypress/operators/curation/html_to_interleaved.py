"""`html_to_interleaved`: HTML pages -> interleaved documents, one per row (the op; the
extraction itself, OBELICS-style, is in ``html.extract``).

The document columns replace the row's; the other columns pass through, and the HTML column is
dropped unless ``keep_html`` (it is by far the largest).
"""

from __future__ import annotations

from typing import ClassVar

import pyarrow as pa
from pydantic import Field

from raypress.operators.base import Mapper, Params
from raypress.operators.curation.html.extract import DROP_TAGS, INLINE_TAGS, html_document
from raypress.operators.registry import register
from raypress.operators.shared.documents import DOCUMENT_COLUMNS, documents_to_table
from raypress.schema import ID_COL


class HtmlToInterleavedParams(Params):
    html_key: str = Field("html", description="column holding the decoded HTML")
    url_key: str = Field("url", description="column holding the page URL (relative image URLs resolve against it)")
    drop_tags: list[str] = Field(sorted(DROP_TAGS), description="elements removed together with their content")
    inline_tags: list[str] = Field(sorted(INLINE_TAGS), description="formatting elements unwrapped into the surrounding text")
    keep_html: bool = Field(False, description="keep the html column in the output (it is large: dropped by default)")


@register("html_to_interleaved", requires={"selectolax": "curation"})
class HtmlToInterleaved(Mapper[HtmlToInterleavedParams]):
    """HTML pages -> interleaved documents (texts + image URLs in page order), OBELICS-style."""

    reads: ClassVar[tuple[str, ...]] = ("html", "url")
    writes = ("url", "source", "texts", "images", "image_bytes", "image_metadata")
    batch_size = 64  # pages are large; small batches keep memory flat and the row-by-row retry cheap

    def columns_read(self) -> tuple[str, ...]:
        return (self.params.html_key, self.params.url_key)

    def columns_dropped(self) -> tuple[str, ...]:
        return () if self.params.keep_html else (self.params.html_key,)

    def process_batch(self, table: pa.Table) -> pa.Table:
        p = self.params
        htmls = table.column(p.html_key).to_pylist()
        urls = table.column(p.url_key).to_pylist() if p.url_key in table.column_names else [None] * table.num_rows
        ids = table.column(ID_COL).to_pylist()
        docs = [html_document(i, u, h, p.drop_tags, p.inline_tags) for i, u, h in zip(ids, urls, htmls)]
        out = documents_to_table(docs)
        for name in table.column_names:
            if name in DOCUMENT_COLUMNS or (name == p.html_key and not p.keep_html):
                continue
            out = out.append_column(table.schema.field(name), table.column(name))
        return out
