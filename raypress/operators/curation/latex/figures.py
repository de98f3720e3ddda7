"""Step 3 of the LaTeX extraction: a figure command's argument -> the file's bytes and metadata.

Files resolve as graphicx finds them (the project root, then each ``\\graphicspath`` folder,
extensions tried when missing); PDF figures are rendered to PNG with PyMuPDF so image filters
see pixels, raster images get their size from the header, EPS is kept as bytes.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from typing import Any

from raypress.operators.curation.images.info import UnreadableImage, read_image_info, sha256_hex
from raypress.operators.shared.latex_source import FIGURE_EXTENSIONS


@dataclass(frozen=True)
class ResolvedFigure:
    path: str  # inside the source: the image id
    data: bytes
    metadata: dict[str, Any]


def figure_ref(arg: str) -> str:
    """The file named by a figure command's argument: ``fig`` for ``{fig}``, ``{{fig.v2}.png}`` (braces
    that protect dots) and epsfig's ``{file=fig,width=...}``."""
    keyed = re.search(r"(?:^|,)\s*(?:file|figure)\s*=\s*([^,]+)", arg)
    ref = keyed.group(1) if keyed and "=" in arg else arg
    return ref.replace("{", "").replace("}", "").strip().strip('"').strip()


def resolve_figure(ref: str, root: str, search_dirs: list[str], files: dict[str, bytes]) -> str | None:
    """The source path ``\\includegraphics{ref}`` names, or None.  Like graphicx: relative to the
    project root, then each ``\\graphicspath`` folder; extensions tried when missing."""
    ref = figure_ref(ref)
    if not ref:
        return None
    for folder in ["", *search_dirs]:
        base = posixpath.normpath(posixpath.join(root, folder, ref))
        if base.startswith("../") or base == ".." or base.startswith("/"):
            continue
        if base in files and base.lower().endswith(FIGURE_EXTENSIONS):
            return base
        for ext in FIGURE_EXTENSIONS:
            for candidate in (base + ext, base + ext.upper()):
                if candidate in files:
                    return candidate
    return None


def figure_image(path: str, data: bytes, render_pdf: bool = True, dpi: int = 144,
                 max_side: int = 4096) -> ResolvedFigure:
    """Bytes + metadata for one figure file; raises UnreadableImage when the bytes do not decode."""
    ext = posixpath.splitext(path)[1].lower()
    if ext == ".eps":
        if not data.lstrip()[:4] in (b"%!PS", b"\xc5\xd0\xd3\xc6"):
            raise UnreadableImage(f"{path}: not PostScript")
        meta = {"height": None, "width": None, "sha256": sha256_hex(data), "format": "eps"}
        return ResolvedFigure(path, data, meta)
    if ext == ".pdf":
        if not render_pdf:
            if not data.startswith(b"%PDF"):
                raise UnreadableImage(f"{path}: not a PDF")
            return ResolvedFigure(path, data, {"height": None, "width": None, "sha256": sha256_hex(data),
                                               "format": "pdf"})
        png = render_pdf_page(data, dpi, max_side, path)
        return ResolvedFigure(path, png, read_image_info(png).metadata())
    return ResolvedFigure(path, data, read_image_info(data).metadata())


def render_pdf_page(data: bytes, dpi: int, max_side: int, path: str) -> bytes:
    """The first page of a PDF figure as PNG, at ``dpi`` but no side over ``max_side`` pixels."""
    import pymupdf

    try:
        with pymupdf.open(stream=data, filetype="pdf") as doc:
            if doc.page_count < 1:
                raise UnreadableImage(f"{path}: PDF has no pages")
            page = doc[0]
            zoom = dpi / 72.0
            longest = max(page.rect.width, page.rect.height) * zoom
            if longest > max_side:
                zoom *= max_side / longest
            pix = page.get_pixmap(matrix=pymupdf.Matrix(zoom, zoom), alpha=False)
            return pix.tobytes("png")
    except UnreadableImage:
        raise
    except Exception as exc:  # noqa: BLE001 - MuPDF raises its own FzError family and RuntimeError
        raise UnreadableImage(f"{path}: PDF does not render: {type(exc).__name__}: {exc}") from exc
