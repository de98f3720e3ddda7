"""The interleaved document (MINT-1T / OBELICS layout) as Arrow, and helpers every curation op shares.

A document is one row whose content is a sequence of positions; at each position exactly one of
``texts[i]`` / ``images[i]`` is non-null.  ``image_bytes`` and ``image_metadata`` run parallel to
``images`` (null at text positions, and ``image_bytes`` null while an image is only a reference).
``images[i]`` holds the image's URL (HTML), ``page_{p}_image_{xref}`` (PDF) or its path inside the
source tree (arXiv).  Keeping the four lists the same length makes removing a position (an
unresolvable image, a PII-free rewrite...) one index operation on every list.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

import pyarrow as pa

from raypress.schema import ID_COL

IMAGE_METADATA_TYPE = pa.struct(
    [
        ("height", pa.int32()),
        ("width", pa.int32()),
        ("sha256", pa.string()),
        ("page", pa.int32()),  # PDF page (0-based); null elsewhere
        ("xref", pa.int32()),  # PDF image xref; null elsewhere
        ("format", pa.string()),  # e.g. "jpeg", "png" as read from the bytes; null when unknown
    ]
)

DOCUMENT_SCHEMA = pa.schema(
    [
        (ID_COL, pa.string()),
        ("url", pa.string()),  # page URL, PDF path/URL, arXiv source path
        ("source", pa.string()),  # "html" | "pdf" | "arxiv"
        ("texts", pa.list_(pa.string())),
        ("images", pa.list_(pa.string())),
        ("image_bytes", pa.list_(pa.binary())),
        ("image_metadata", pa.list_(IMAGE_METADATA_TYPE)),
    ]
)
DOCUMENT_COLUMNS = tuple(DOCUMENT_SCHEMA.names)
CONTENT_COLUMNS = ("texts", "images", "image_bytes", "image_metadata")

# What document-level text filters look at: the text positions joined by a blank line.
TEXT_SEPARATOR = "\n\n"


@dataclass
class Document:
    """A document being built or edited in Python (one per row; ops convert whole batches)."""

    id: str
    url: str | None
    source: str
    texts: list[str | None] = field(default_factory=list)
    images: list[str | None] = field(default_factory=list)
    image_bytes: list[bytes | None] = field(default_factory=list)
    image_metadata: list[dict[str, Any] | None] = field(default_factory=list)

    def add_text(self, text: str) -> None:
        self.texts.append(text)
        self.images.append(None)
        self.image_bytes.append(None)
        self.image_metadata.append(None)

    def add_image(self, ref: str, data: bytes | None = None, metadata: dict[str, Any] | None = None) -> None:
        self.texts.append(None)
        self.images.append(ref)
        self.image_bytes.append(data)
        self.image_metadata.append(metadata)

    def keep_positions(self, keep: Iterable[bool]) -> None:
        """Drop every position whose flag is False, from all four lists at once."""
        flags = list(keep)
        for name in CONTENT_COLUMNS:
            values = getattr(self, name)
            setattr(self, name, [v for v, k in zip(values, flags) if k])

    def text(self) -> str:
        return document_text(self.texts)

    def image_count(self) -> int:
        return sum(1 for ref in self.images if ref is not None)

    def as_row(self) -> dict[str, Any]:
        return {
            ID_COL: self.id,
            "url": self.url,
            "source": self.source,
            "texts": self.texts,
            "images": self.images,
            "image_bytes": self.image_bytes,
            "image_metadata": [None if m is None else metadata_struct(m) for m in self.image_metadata],
        }


def metadata_struct(meta: dict[str, Any]) -> dict[str, Any]:
    """Every field of IMAGE_METADATA_TYPE present (missing ones null), extra keys refused."""
    names = IMAGE_METADATA_TYPE.names
    unknown = set(meta) - set(names)
    if unknown:
        raise ValueError(f"unknown image_metadata fields {sorted(unknown)}; known: {names}")
    return {name: meta.get(name) for name in names}


def document_text(texts: Iterable[str | None] | None) -> str:
    """The document's text as filters see it: its text positions joined by a blank line."""
    if not texts:
        return ""
    return TEXT_SEPARATOR.join(t for t in texts if t)


def documents_to_table(docs: list[Document], extra: dict[str, pa.Array | list] | None = None) -> pa.Table:
    """Documents as a table with DOCUMENT_SCHEMA (plus ``extra`` columns, aligned with ``docs``)."""
    table = pa.Table.from_pylist([d.as_row() for d in docs], schema=DOCUMENT_SCHEMA)
    for name, values in (extra or {}).items():
        table = table.append_column(name, values if isinstance(values, (pa.Array, pa.ChunkedArray)) else pa.array(values))
    return table


def table_to_documents(table: pa.Table) -> list[Document]:
    """Rows of a table holding at least DOCUMENT_COLUMNS as Documents (other columns ignored)."""
    cols = {name: table.column(name).to_pylist() for name in DOCUMENT_COLUMNS}
    docs = []
    for i in range(table.num_rows):
        n = len(cols["texts"][i] or [])
        docs.append(
            Document(
                id=cols[ID_COL][i],
                url=cols["url"][i],
                source=cols["source"][i],
                texts=list(cols["texts"][i] or []),
                images=list(cols["images"][i] or [None] * n),
                image_bytes=list(cols["image_bytes"][i] or [None] * n),
                image_metadata=list(cols["image_metadata"][i] or [None] * n),
            )
        )
    return docs


def replace_documents(table: pa.Table, docs: list[Document]) -> pa.Table:
    """``table`` with its content columns replaced by those of ``docs`` (same rows, same order)."""
    new = documents_to_table(docs)
    for name in CONTENT_COLUMNS:
        idx = table.schema.get_field_index(name)
        if idx < 0:
            table = table.append_column(name, new.column(name))
        else:
            table = table.set_column(idx, name, new.column(name))
    return table
