"""`attach_images`: fill each image position's bytes and metadata from local sources, never the network.

Sources, tried in this order: the ``images`` input (a Dataset of ``url`` + ``image_bytes`` rows,
e.g. ``read_warc`` with ``content: images`` over the same WARCs), then ``image_dir``: a local
folder mirroring the site, where an image URL starting with ``url_prefix`` maps to
``image_dir/<rest of the URL path>``.

Each actor indexes the images input once: only the ``url`` column is loaded (URL -> file, row
group, row), and the bytes of the rows a batch needs are read per batch, so memory holds the
URLs, not the images (roughly 150 bytes per URL for the Python dict).

Positions whose image cannot be found (``images_unresolved``) or whose bytes are not a readable
image (``images_unreadable``) are dropped; the two per-row counts make the loss visible.  Text
positions that become neighbours are merged (joined by a blank line) so texts and images still
alternate.
"""

from __future__ import annotations

import glob
import os
from collections import OrderedDict
from pathlib import Path
from typing import ClassVar
from urllib.parse import quote, unquote, urlsplit, urlunsplit

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pydantic import Field, model_validator

from raypress.artifacts import Artifact, DatasetArtifact
from raypress.operators.base import Mapper, Params
from raypress.operators.curation.images.info import image_info
from raypress.operators.registry import register
from raypress.operators.shared.documents import TEXT_SEPARATOR, Document, replace_documents, table_to_documents
from raypress.schema import ArtifactType

_URL_SAFE = "/:?&=+@;,~!$'()*[]%#"


class AttachImagesParams(Params):
    image_dir: str | None = Field(None, description="local folder holding the images of url_prefix (a site mirror)")
    url_prefix: str | None = Field(
        None, description="image URLs starting with this map to image_dir/<the rest of the URL path>"
    )
    cache_bytes: int = Field(
        256 << 20, ge=0, description="bytes of images-input row groups an actor keeps between batches"
    )
    warn_below: float = Field(
        0.5, ge=0, le=1, description="warn when fewer than this share of the image URLs seen were attached "
        "(a wrong images source loses every image silently otherwise)")

    @model_validator(mode="after")
    def _pair(self) -> "AttachImagesParams":
        if (self.image_dir is None) != (self.url_prefix is None):
            raise ValueError("image_dir and url_prefix go together: give both or neither")
        return self


@register("attach_images", requires={"PIL": "curation"})
class AttachImages(Mapper[AttachImagesParams]):
    """Attach image bytes + metadata by URL from an images Dataset or a local folder; drop unresolvable images."""

    stateful = True
    inputs: ClassVar[dict[str, ArtifactType]] = {"data": ArtifactType.DATASET, "images": ArtifactType.DATASET}
    reads = ("texts", "images", "image_bytes", "image_metadata")
    writes = ("texts", "images", "image_bytes", "image_metadata", "images_unresolved", "images_unreadable")
    batch_size = 64

    def __init__(self, params: AttachImagesParams, artifacts: dict[str, Artifact] | None = None):
        super().__init__(params, artifacts)
        images = self.artifacts.get("images")
        if images is None and self.params.image_dir is None:
            raise ValueError("attach_images needs an 'images' input (e.g. read_warc with content: images) "
                             "or image_dir + url_prefix")
        self.index = ImageIndex.from_artifact(images, self.params.cache_bytes) if images is not None else None
        self.folder = (SiteMirror(self.params.image_dir, self.params.url_prefix)
                       if self.params.image_dir is not None else None)

    def process_batch(self, table: pa.Table) -> pa.Table:
        docs = table_to_documents(table)
        wanted = {ref for d in docs for ref, data in zip(d.images, d.image_bytes) if ref is not None and data is None}
        found = self.index.lookup(wanted) if self.index is not None else {}
        unresolved, unreadable = [], []
        for doc in docs:
            missing, bad = attach(doc, lambda ref: found.get(ref) or self._from_folder(ref))
            unresolved.append(missing)
            unreadable.append(bad)
        out = replace_documents(table, docs)
        for name, values in (("images_unresolved", unresolved), ("images_unreadable", unreadable)):
            arr = pa.array(values, pa.int32())
            idx = out.schema.get_field_index(name)
            out = out.set_column(idx, name, arr) if idx >= 0 else out.append_column(name, arr)
        return out

    def batch_counts(self, out: pa.Table) -> dict[str, int]:
        attached = pc.sum(pc.list_value_length(out.column("images")).fill_null(0)).as_py() or 0
        nulls = sum(ref is None for refs in out.column("images").to_pylist() for ref in (refs or []))
        unresolved = pc.sum(out.column("images_unresolved")).as_py() or 0
        unreadable = pc.sum(out.column("images_unreadable")).as_py() or 0
        resolved = attached - nulls
        return {"images_seen": resolved + unresolved + unreadable, "images_attached": resolved,
                "images_unresolved": unresolved, "images_unreadable": unreadable}

    @classmethod
    def count_warnings(cls, params: AttachImagesParams, counts: dict[str, int]) -> list[str]:
        seen, attached = counts.get("images_seen", 0), counts.get("images_attached", 0)
        if not seen or attached >= params.warn_below * seen:
            return []
        return [f"attached {attached} of the {seen} images the documents refer to "
                f"({counts.get('images_unresolved', 0)} not found, {counts.get('images_unreadable', 0)} unreadable): "
                "is the `images` input (or image_dir) the same crawl as the pages?"]

    def _from_folder(self, ref: str) -> bytes | None:
        return self.folder.get(ref) if self.folder is not None else None


def attach(doc: Document, resolve) -> tuple[int, int]:
    """Fill ``doc``'s image positions in place; returns (unresolved, unreadable) counts."""
    keep: list[bool] = []
    unresolved = unreadable = 0
    for i, ref in enumerate(doc.images):
        if ref is None:
            keep.append(True)
            continue
        data = doc.image_bytes[i] if doc.image_bytes[i] is not None else resolve(ref)
        if data is None:
            unresolved += 1
            keep.append(False)
            continue
        info = image_info(data)
        if info is None:
            unreadable += 1
            keep.append(False)
            continue
        doc.image_bytes[i] = data
        doc.image_metadata[i] = {**(doc.image_metadata[i] or {}), **info.metadata()}
        keep.append(True)
    if unresolved or unreadable:
        doc.keep_positions(keep)
        merge_adjacent_texts(doc)
    return unresolved, unreadable


def merge_adjacent_texts(doc: Document) -> None:
    """Join text positions that follow each other (after an image between them was dropped)."""
    keep = [True] * len(doc.texts)
    last = None
    for i, text in enumerate(doc.texts):
        if text is None:
            last = None
            continue
        if last is not None:
            doc.texts[last] = doc.texts[last] + TEXT_SEPARATOR + text
            keep[i] = False
        else:
            last = i
    if not all(keep):
        doc.keep_positions(keep)


def url_key(url: str) -> str:
    """The form both sides are compared in: no fragment, lowercase scheme/host, one percent-encoding."""
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return url
    return quote(urlunsplit((parts.scheme.lower(), parts.netloc.lower(), parts.path, parts.query, "")), safe=_URL_SAFE)


class ImageIndex:
    """URL -> (file, row group, row) over a folder of parquet files; image bytes read on demand."""

    def __init__(self, files: list[str], cache_bytes: int = 256 << 20):
        self.files = files
        self.cache_bytes = cache_bytes
        self._cache: OrderedDict[tuple[int, int], pa.Array] = OrderedDict()
        self._cached = 0
        self._rows: dict[str, tuple[int, int, int]] = {}
        for fi, path in enumerate(files):
            pf = pq.ParquetFile(path)
            names = pf.schema_arrow.names
            if "url" not in names or "image_bytes" not in names:
                raise ValueError(f"images input file {path} has columns {names}; it needs 'url' and 'image_bytes'")
            for rg in range(pf.num_row_groups):
                urls = pf.read_row_group(rg, columns=["url"]).column(0).to_pylist()
                for row, url in enumerate(urls):
                    if url:
                        self._rows.setdefault(url_key(url), (fi, rg, row))

    @classmethod
    def from_artifact(cls, art: Artifact, cache_bytes: int = 256 << 20) -> "ImageIndex":
        if not isinstance(art, DatasetArtifact):
            raise ValueError(f"the 'images' input must be a Dataset, got {type(art).__name__}")
        if not art.path:
            raise ValueError("the 'images' input is not materialized (no path): attach_images reads its parquet files")
        root = art.path
        files = [root] if os.path.isfile(root) else sorted(glob.glob(os.path.join(root, "**", "*.parquet"), recursive=True))
        return cls(files, cache_bytes)

    def __len__(self) -> int:
        return len(self._rows)

    def lookup(self, urls: set[str]) -> dict[str, bytes]:
        """The bytes of every URL in ``urls`` that the index holds (null bytes count as missing)."""
        where: dict[tuple[int, int], list[tuple[int, str]]] = {}
        for url in urls:
            loc = self._rows.get(url_key(url))
            if loc is not None:
                where.setdefault(loc[:2], []).append((loc[2], url))
        found: dict[str, bytes] = {}
        for group, wanted in where.items():
            rows = np.array([r for r, _ in wanted], dtype=np.int64)
            values = self._column(group).take(pa.array(rows)).to_pylist()
            for (_, url), data in zip(wanted, values):
                if data is not None:
                    found[url] = data
        return found

    def _column(self, group: tuple[int, int]) -> pa.Array:
        col = self._cache.get(group)
        if col is not None:
            self._cache.move_to_end(group)
            return col
        fi, rg = group
        col = pq.ParquetFile(self.files[fi]).read_row_group(rg, columns=["image_bytes"]).column(0).combine_chunks()
        self._cache[group] = col
        self._cached += col.nbytes
        while self._cached > self.cache_bytes and len(self._cache) > 1:
            _, old = self._cache.popitem(last=False)
            self._cached -= old.nbytes
        return col


class SiteMirror:
    """A local folder mirroring a site's images: ``url_prefix`` + path -> ``image_dir`` / path,
    refusing paths that climb out of the folder."""

    def __init__(self, image_dir: str, url_prefix: str):
        self.root = Path(image_dir).resolve()
        self.prefix = url_prefix

    def path_for(self, url: str) -> Path | None:
        if not url.startswith(self.prefix):
            return None
        rest = unquote(url[len(self.prefix):].split("#", 1)[0].split("?", 1)[0]).lstrip("/")
        if not rest:
            return None
        path = (self.root / rest).resolve()
        return path if path.is_relative_to(self.root) else None

    def get(self, url: str) -> bytes | None:
        path = self.path_for(url)
        if path is None or not path.is_file():
            return None
        return path.read_bytes()
