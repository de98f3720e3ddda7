"""PyMuPDF, imported on use: both the PDF reader (io) and the PDF extractor (curation) need it, and
it is an optional dependency (the ``curation`` extra; AGPL, see the README)."""

from __future__ import annotations

from typing import Any


def import_pymupdf() -> Any:
    """PyMuPDF, imported on use: it is an optional dependency (the ``curation`` extra)."""
    try:
        import pymupdf
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("PDF ops need PyMuPDF: pip install 'raypress[curation]'") from exc
    return pymupdf
