"""``image_folder``: a class-per-folder image tree (``root/<class_name>/*.png|jpg``) as a Dataset.

The torchvision ``ImageFolder`` convention: labels are the indices of the sorted class folder
names, so the same tree always gives the same labels.  PNG files travel as they are; other
formats are re-encoded to PNG so that every image column holds one lossless format.  The format
is PIL's reading of the content, never the suffix (a JPEG named ``.png`` is read as a JPEG).  A
file that does not decode becomes an error tombstone naming its path, and what the file looks like
when it is no image at all (quarantined, the run goes on).
"""

from __future__ import annotations

import io
import os
from functools import partial
from pathlib import Path
from typing import Any, Iterator

import pyarrow as pa
from PIL import Image, UnidentifiedImageError
from pydantic import Field, field_validator

from raypress.operators.base import Params, Reader, RunContext
from raypress.operators.io.sniff.magic import HEAD_BYTES, describe
from raypress.operators.registry import register
from raypress.operators.shared.files import id_path, map_items
from raypress.operators.shared.rows import combine, tombstones
from raypress.schema import ID_COL

FILES_PER_TASK = 512
COLUMNS = (ID_COL, "image", "label", "class_name", "path")
_PNG_MODES = ("1", "L", "LA", "I", "I;16", "P", "RGB", "RGBA")  # modes PIL writes as PNG as they are


class ImageFolderParams(Params):
    root: str = Field(description="folder whose sub-folders are the classes")
    extensions: list[str] = Field(default_factory=lambda: [".png", ".jpg", ".jpeg"],
                                  description="file suffixes read (case-insensitive); other files are ignored")

    @field_validator("extensions")
    @classmethod
    def _dotted(cls, value: list[str]) -> list[str]:
        return [e.lower() if e.startswith(".") else "." + e.lower() for e in value]


@register("image_folder", requires={"PIL": "images"})
class ImageFolder(Reader[ImageFolderParams]):
    """Read root/<class_name>/*.png|jpg into rows with PNG bytes and labels = sorted class-name index."""

    writes = COLUMNS[1:]

    def plan(self) -> list[dict[str, Any]]:
        """Items of at most ``FILES_PER_TASK`` files, each with its label and class name."""
        files = list_image_folder(self.params.root, self.params.extensions)
        return [{"files": files[i:i + FILES_PER_TASK]} for i in range(0, len(files), FILES_PER_TASK)]

    def read(self, ctx: RunContext):
        items = [{"files": [{**f, "path": id_path(f["path"], ctx.base_dir)} for f in item["files"]]}
                 for item in self.plan()]  # ids as the user's relative root gave them (files.id_path)
        return map_items(items, partial(read_item, node=ctx.node_id), ctx)


def list_image_folder(root: str, extensions: list[str]) -> list[dict[str, Any]]:
    """Every image file under ``root/<class>/`` in a stable order, with its label."""
    base = Path(os.path.expanduser(root))
    if not base.is_dir():
        raise FileNotFoundError(f"image_folder root {root!r} is not a folder (relative to {os.getcwd()})")
    classes = sorted(d.name for d in base.iterdir() if d.is_dir())
    if not classes:
        raise ValueError(f"image_folder root {root!r} has no class sub-folders")
    files = []
    for label, name in enumerate(classes):
        for f in sorted((base / name).iterdir()):
            if f.is_file() and f.suffix.lower() in extensions:
                path = os.path.join(root, name, f.name)  # the form of `root` as given: ids must not depend on cwd
                files.append({"path": path, "abs_path": str(f.resolve()), "label": label, "class_name": name})
    if not files:
        raise ValueError(f"image_folder root {root!r}: no {'/'.join(extensions)} files in its class folders")
    return files


def png_bytes(data: bytes) -> bytes:
    """The file's bytes when it is a PNG that decodes, else its pixels re-encoded as PNG."""
    with Image.open(io.BytesIO(data)) as img:
        img.load()  # decode fully: a truncated file fails here, not in a later op
        if img.format == "PNG":
            return data
        if img.mode not in _PNG_MODES:  # e.g. CMYK JPEG
            img = img.convert("RGB")
        buf = io.BytesIO()
        img.save(buf, format="PNG")
        return buf.getvalue()


def read_item(item: dict[str, Any], node: str) -> Iterator[pa.Table]:
    return read_image_files(item["files"], node)


def read_image_files(files: list[dict[str, Any]], node: str) -> Iterator[pa.Table]:
    """Live rows for the files that decode, error tombstones (naming the path) for the others."""
    live: dict[str, list[Any]] = {c: [] for c in COLUMNS}
    dead_ids, details = [], []
    for f in files:
        data = None
        try:
            with open(f["abs_path"], "rb") as fh:
                data = fh.read()
            image = png_bytes(data)
        except (OSError, UnidentifiedImageError, SyntaxError, ValueError, Image.DecompressionBombError) as exc:
            dead_ids.append(f["path"])
            # PIL decides by content, not by suffix; when it recognises nothing, say what the file is
            what = f"; the file {describe(data[:HEAD_BYTES])}" if isinstance(exc, UnidentifiedImageError) and \
                data is not None else ""
            details.append(f"{f['path']}: cannot read image ({type(exc).__name__}: {exc}){what}")
            continue
        for col, value in ((ID_COL, f["path"]), ("image", image), ("label", int(f["label"])),
                           ("class_name", f["class_name"]), ("path", f["path"])):
            live[col].append(value)
    table = pa.table({
        ID_COL: pa.array(live[ID_COL], pa.string()),
        "image": pa.array(live["image"], pa.binary()),
        "label": pa.array(live["label"], pa.int64()),
        "class_name": pa.array(live["class_name"], pa.string()),
        "path": pa.array(live["path"], pa.string()),
    })
    dead = tombstones(dead_ids, node, ["unreadable_image"] * len(dead_ids), details) if dead_ids else None
    yield combine(table, dead)
