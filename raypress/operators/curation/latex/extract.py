"""LaTeX source -> one interleaved document (MINT-1T's arXiv path: TexSoup, figures in place).

The whole extraction of one source, pure (no I/O beyond the bytes given), for the op
``latex_to_interleaved``; each step lives in its own module (``cleaning``, ``walk``,
``figures``) and this one chains them and builds the document.

Input: a row of ``read_arxiv`` (``tex`` = the main file with its ``\\input`` files inlined,
``files`` = the figure files it may reference, ``main_file`` = where the project root is).

Steps, in this order, because each one needs the previous one done:

1. *Pre-stripping with scanners* (before TexSoup, which mis-reads several of these): ``\\verb``
   turned into plain text; ``%`` comments (not ``\\%``; a comment also eats its line end, as in
   TeX, unless a blank line follows); the ``comment`` and verbatim-like environments (before
   anything looks for ``\\end{document}`` or ``\\fi``: an example may hold one); conditionals
   (``\\iffalse`` blocks removed, ``\\iftrue`` and ``\\else`` branches resolved, ``\\newif``
   switches followed through their ``\\footrue``/``\\foofalse`` setters; any other ``\\if...``
   keeps its first branch); macro definitions (zero-argument ``\\newcommand``/``\\def`` macros
   are expanded first, so ``\\method{}`` still reads "FooNet"); the preamble and everything
   after ``\\end{document}`` (the preamble's ``\\title`` is kept); tables, the bibliography
   and TikZ pictures.
2. *TexSoup parse* and a walk in document order: text is kept, the text of unknown commands'
   ``{}`` arguments is kept, section titles and captions become paragraphs, math stays LaTeX
   source (``$x^2$``; ``keep_math=False`` drops it), ``\\cite``/``\\ref``/``\\label`` and layout
   commands (``\\vspace``...) are dropped, ``\\includegraphics`` becomes a figure position.
   TexSoup raises on unbalanced input (a missing ``\\end{...}``, an unclosed ``$``); then a
   regex walker with the same rules runs instead, and ``latex_parser`` says "regex".
3. *Figures*: resolved relative to the project root (the main file's folder), trying ``.png``,
   ``.jpg``, ``.jpeg``, ``.pdf``, ``.eps`` when the name has no such extension, also under every
   ``\\graphicspath`` folder.  The image id is the file's path inside the source.  Raster images
   get height/width/format from their header (Pillow).  A PDF figure is rendered (first page,
   PyMuPDF) to PNG so image filters see pixels (``render_pdf_figures=False`` keeps the PDF bytes
   with null size).  EPS is kept as bytes with null size (Pillow needs Ghostscript to read it).
   A figure that names no file in the source is dropped and counted in ``figures_unresolved``;
   one whose bytes do not decode is dropped and counted in ``figures_unreadable``.
4. *Text*: whitespace collapsed, paragraphs (blank lines, ``\\par``, titles) joined by a blank
   line, ``\\\\`` and ``\\item`` kept as line breaks; the text between two figures is one text
   position.

A source that leaves neither text nor figures raises ``ValueError`` naming its main file: the
runner quarantines that row only (no filter follows in MINT-1T's arXiv pipeline to drop it).
"""

from __future__ import annotations

import posixpath
import re
import unicodedata
from dataclasses import dataclass
from typing import Iterator

from raypress.operators.curation.images.info import UnreadableImage
from raypress.operators.curation.latex.cleaning import clean_latex
from raypress.operators.curation.latex.commands import LINE, PARA
from raypress.operators.curation.latex.figures import ResolvedFigure, figure_image, resolve_figure
from raypress.operators.curation.latex.walk import Piece, document_pieces
from raypress.operators.shared.documents import Document

SOURCE = "arxiv"


def normalise_text(raw: str) -> str:
    """Collapse whitespace, keep paragraphs (blank lines) as one blank line, LINE as a newline."""
    paragraphs = []
    for para in re.split(r"\n[^\S\n]*\n\s*", raw):
        para = re.sub(r"\s+", " ", para)
        lines = [line.strip() for line in para.split(LINE)]
        para = "\n".join(line for line in lines if line)
        if para:
            paragraphs.append(unicodedata.normalize("NFC", para))
    return PARA.join(paragraphs)


def interleave(pieces: list[Piece | ResolvedFigure]) -> Iterator[str | ResolvedFigure]:
    """Text runs between figures, normalised; empty runs skipped."""
    buf: list[str] = []
    for piece in pieces:
        if isinstance(piece, str):
            buf.append(piece)
            continue
        text = normalise_text("".join(buf))
        buf = []
        if text:
            yield text
        yield piece
    text = normalise_text("".join(buf))
    if text:
        yield text


@dataclass
class Extraction:
    document: Document
    figures_unresolved: int
    figures_unreadable: int
    parser: str


def latex_document(doc_id: str, url: str | None, main_file: str, tex: str, files: dict[str, bytes], *,
                   keep_math: bool = True, render_pdf: bool = True, dpi: int = 144, max_side: int = 4096,
                   parser: str = "texsoup", texsoup_max_chars: int | None = None) -> Extraction:
    """The whole extraction for one source (pure: no I/O beyond the bytes given)."""
    clean = clean_latex(tex)
    pieces, parser = document_pieces(clean.body, keep_math, parser, texsoup_max_chars)
    root = posixpath.dirname(main_file)
    unresolved = unreadable = 0
    resolved: list[str | ResolvedFigure] = []
    for piece in pieces:
        if isinstance(piece, str):
            resolved.append(piece)
            continue
        path = resolve_figure(piece.ref, root, clean.graphics_paths, files)
        if path is None:
            unresolved += 1
            continue
        try:
            resolved.append(figure_image(path, files[path], render_pdf, dpi, max_side))
        except UnreadableImage:
            unreadable += 1
    doc = Document(id=doc_id, url=url, source=SOURCE)
    for item in interleave(resolved):
        if isinstance(item, str):
            doc.add_text(item)
        else:
            doc.add_image(item.path, item.data, item.metadata)
    if not doc.texts:
        raise ValueError(f"{main_file}: no text or figures left after LaTeX extraction")
    return Extraction(doc, unresolved, unreadable, parser)
