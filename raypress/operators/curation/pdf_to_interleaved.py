"""`pdf_to_interleaved`: PDF bytes -> one interleaved document (MINT-1T's PDF extraction with PyMuPDF).

Per page: pages without text are dropped (MINT-1T) and counted in ``pages_without_text``; text
blocks are put in reading order (below); every image shown on the page is placed right after the
text block nearest to it.  Consecutive text blocks become one text position joined by a blank line
(as in OBELICS), so texts and images alternate unless images are adjacent.

Reading order (``reading_order``), on the text blocks of one page:

1. *Gutters*: project the blocks on the x-axis, weighting each by its height.  A gutter is an
   x-range whose covered height is at most ``gutter_max_coverage`` times the height covered on
   both sides of it (a vertical valley of whitespace between two columns), at least ``min_gutter``
   of the page width wide.  Weighting by height is what lets a short title or a one-paragraph
   abstract run across the gutter without hiding it, and what keeps a centred heading in a
   one-column page from inventing a column.
2. *Spanning blocks* are the blocks that cover a gutter entirely (titles, author lists, a caption
   across both columns).  They cut the page into horizontal bands, in their top-to-bottom order.
3. Every other block belongs to the column between two gutters and to the band its vertical centre
   falls in.  The order is: band 0's columns left to right (each column top to bottom), spanning
   block 1, band 1's columns, spanning block 2, ... -- so a title comes before the columns below
   it, and text above a full-width figure caption is read before the text below it.

A page with no gutter is one column: blocks top to bottom (blocks starting on the same line, left
to right).  Side-by-side blocks inside one band that are really rows of a table are read column by
column: at the level of text blocks the two layouts cannot be told apart.

A file none of whose pages has text becomes a document with no positions (``pages_without_text``
equal to its page count); it is not an error, and the document filters downstream (image count,
word count) drop it with their reason.  Bytes that do not open, or a page MuPDF cannot read, raise
``ValueError`` naming the problem: the runner quarantines that row only.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import pyarrow as pa
from pydantic import Field, field_validator

from raypress.operators.base import Mapper, Params
from raypress.operators.shared.documents import DOCUMENT_COLUMNS, TEXT_SEPARATOR, Document, documents_to_table
from raypress.operators.shared.pymupdf import import_pymupdf
from raypress.operators.registry import register
from raypress.schema import ID_COL

SOURCE = "pdf"
PAGES_WITHOUT_TEXT = "pages_without_text"
# Image formats kept as extracted; others (jpx, jb2, tiff, pnm...) are re-encoded to PNG, which
# every downstream image op (Pillow, the NSFW model) can decode.
KEEP_FORMATS = ("jpeg", "png")
SAME_LINE_PT = 2.0  # blocks whose tops differ by less than this are on one line: left to right
EDGE_PT = 0.5  # slack when testing whether a block covers a gutter

Box = tuple[float, float, float, float]  # x0, y0, x1, y1 in PDF points, y growing downwards


# -- reading order (pure) ------------------------------------------------------------------------


def find_gutters(boxes: Sequence[Box], page_width: float, max_coverage: float = 0.5,
                 min_gutter: float = 0.01) -> list[tuple[float, float]]:
    """x-ranges between columns: where the text height covering x is at most ``max_coverage`` of
    the most covered x on *both* sides, and the range is ``min_gutter * page_width`` wide or more."""
    if len(boxes) < 2:
        return []
    edges = sorted({b[0] for b in boxes} | {b[2] for b in boxes})
    spans = [(a, b) for a, b in zip(edges, edges[1:]) if b > a]
    cover = [sum(y1 - y0 for x0, y0, x1, y1 in boxes if x0 <= a and x1 >= b) for a, b in spans]
    n = len(cover)
    left_peak = [0.0] * n
    right_peak = [0.0] * n
    for i in range(1, n):
        left_peak[i] = max(left_peak[i - 1], cover[i - 1])
    for i in range(n - 2, -1, -1):
        right_peak[i] = max(right_peak[i + 1], cover[i + 1])
    low = [min(left_peak[i], right_peak[i]) > 0 and cover[i] <= max_coverage * min(left_peak[i], right_peak[i])
           for i in range(n)]
    gutters = []
    i = 0
    while i < n:
        if not low[i]:
            i += 1
            continue
        j = i
        while j + 1 < n and low[j + 1]:
            j += 1
        start, end = spans[i][0], spans[j][1]
        if end - start >= min_gutter * page_width:
            gutters.append((start, end))
        i = j + 1
    return gutters


def reading_order(boxes: Sequence[Box], page_width: float, max_coverage: float = 0.5,
                  min_gutter: float = 0.01) -> list[int]:
    """Indices of ``boxes`` in reading order (see the module docstring)."""
    gutters = find_gutters(boxes, page_width, max_coverage, min_gutter)
    spanning = [i for i, b in enumerate(boxes) if covers_a_gutter(b, gutters)]
    spanning.sort(key=lambda i: (boxes[i][1], boxes[i][0]))
    span_set = set(spanning)
    cuts = [_centre_y(boxes[i]) for i in spanning]
    bands: list[list[list[int]]] = [[[] for _ in range(len(gutters) + 1)] for _ in range(len(spanning) + 1)]
    for i, box in enumerate(boxes):
        if i in span_set:
            continue
        band = sum(1 for c in cuts if c <= _centre_y(box))
        centre_x = (box[0] + box[2]) / 2
        column = sum(1 for g0, g1 in gutters if (g0 + g1) / 2 <= centre_x)
        bands[band][column].append(i)
    order: list[int] = []
    for k, columns in enumerate(bands):
        for column in columns:
            order.extend(top_to_bottom(column, boxes))
        if k < len(spanning):
            order.append(spanning[k])
    return order


def covers_a_gutter(box: Box, gutters: Sequence[tuple[float, float]]) -> bool:
    """A block runs across a whole gutter (a title); one that only reaches into it does not."""
    return any(box[0] <= g0 + EDGE_PT and box[2] >= g1 - EDGE_PT for g0, g1 in gutters)


def top_to_bottom(indices: Iterable[int], boxes: Sequence[Box]) -> list[int]:
    """Sort by top edge; blocks whose tops are within SAME_LINE_PT of each other left to right."""
    by_top = sorted(indices, key=lambda i: (boxes[i][1], boxes[i][0]))
    out: list[int] = []
    line: list[int] = []
    for i in by_top:
        if line and boxes[i][1] - boxes[line[-1]][1] > SAME_LINE_PT:
            out.extend(sorted(line, key=lambda j: boxes[j][0]))
            line = []
        line.append(i)
    out.extend(sorted(line, key=lambda j: boxes[j][0]))
    return out


def _centre_y(box: Box) -> float:
    return (box[1] + box[3]) / 2


def rect_distance(a: Box, b: Box) -> float:
    """Euclidean distance between two rectangles (0 when they touch or overlap)."""
    dx = max(0.0, max(a[0], b[0]) - min(a[2], b[2]))
    dy = max(0.0, max(a[1], b[1]) - min(a[3], b[3]))
    return (dx * dx + dy * dy) ** 0.5


def nearest_block(image: Box, ordered_text: Sequence[Box]) -> int:
    """Position (in reading order) of the text block nearest ``image``; ties go to the earlier one."""
    return min(range(len(ordered_text)), key=lambda k: (rect_distance(image, ordered_text[k]), k))


def block_text(raw: str, keep_line_breaks: bool = False, dehyphenate: bool = True) -> str:
    """A text block's lines as one paragraph (or kept as lines), whitespace collapsed.

    ``dehyphenate`` joins ``exam-`` + ``ple`` (a letter, a hyphen at the line end, then a
    lower-case letter) into ``example``, as MuPDF's own de-hyphenation does."""
    lines = [" ".join(line.split()) for line in raw.split("\n")]
    lines = [line for line in lines if line]
    if not lines:
        return ""
    out = [lines[0]]
    for line in lines[1:]:
        prev = out[-1]
        if dehyphenate and len(prev) > 1 and prev.endswith("-") and prev[-2].isalpha() and line[0].islower():
            out[-1] = prev[:-1] + line
        else:
            out.append(line)
    return ("\n" if keep_line_breaks else " ").join(out)


# -- extraction ----------------------------------------------------------------------------------


@dataclass
class PageImage:
    """An image shown on a page, with its extracted bytes."""

    ref: str
    box: Box
    data: bytes
    metadata: dict[str, Any]


@dataclass
class ExtractOptions:
    """The op's parameters, for calling ``pdf_to_document`` without an op (tests, scripts)."""

    max_coverage: float = 0.5
    min_gutter: float = 0.01
    keep_line_breaks: bool = False
    dehyphenate: bool = True
    keep_formats: tuple[str, ...] = KEEP_FORMATS


def pdf_to_document(doc_id: str, url: str | None, data: bytes | None,
                    options: ExtractOptions | None = None) -> tuple[Document, int]:
    """The document of one PDF and how many of its pages had no text (and were dropped)."""
    options = options or ExtractOptions()
    if not data:
        raise ValueError("pdf_bytes is empty: no PDF to extract")
    pymupdf = import_pymupdf()
    try:
        pdf = pymupdf.open(stream=data, filetype="pdf")
    except Exception as exc:  # noqa: BLE001 - PyMuPDF raises FileDataError/RuntimeError/ValueError
        raise ValueError(f"cannot open the PDF: {type(exc).__name__}: {exc}") from exc
    with pdf:
        if pdf.needs_pass:
            raise ValueError("the PDF needs a password to open")
        document = Document(id=doc_id, url=url, source=SOURCE)
        items: list[str | PageImage] = []
        textless = 0
        for number in range(pdf.page_count):
            try:
                page_items = extract_page(pdf, number, options, pymupdf)
            except Exception as exc:  # noqa: BLE001 - name the page; the row is quarantined
                raise ValueError(f"page {number}: {type(exc).__name__}: {exc}") from exc
            if page_items is None:
                textless += 1
            else:
                items.extend(page_items)
    for item in merge_texts(items):
        if isinstance(item, str):
            document.add_text(item)
        else:
            document.add_image(item.ref, item.data, item.metadata)
    return document, textless


def extract_page(pdf: Any, number: int, options: ExtractOptions, pymupdf: Any) -> list[str | PageImage] | None:
    """The page's text blocks in reading order with its images after their nearest block; None
    when the page has no text."""
    page = pdf.load_page(number)
    flags = pymupdf.TEXTFLAGS_BLOCKS & ~pymupdf.TEXT_PRESERVE_IMAGES & ~pymupdf.TEXT_PRESERVE_LIGATURES
    blocks = []
    for x0, y0, x1, y1, raw, _no, kind in page.get_text("blocks", flags=flags):
        text = block_text(raw, options.keep_line_breaks, options.dehyphenate) if kind == 0 else ""
        if text:
            blocks.append(((x0, y0, x1, y1), text))
    if not blocks:
        return None
    order = reading_order([b for b, _ in blocks], page.rect.width, options.max_coverage, options.min_gutter)
    boxes = [blocks[i][0] for i in order]
    after: list[list[PageImage]] = [[] for _ in order]
    for image in page_images(pdf, page, number, options.keep_formats, pymupdf):
        after[nearest_block(image.box, boxes)].append(image)
    items: list[str | PageImage] = []
    for k, i in enumerate(order):
        items.append(blocks[i][1])
        items.extend(sorted(after[k], key=lambda im: (im.box[1], im.box[0])))
    return items


def page_images(pdf: Any, page: Any, number: int, keep_formats: Sequence[str], pymupdf: Any) -> list[PageImage]:
    """Images drawn on the page, in the order first drawn (an image drawn off the page is skipped;
    so is an inline image, which has no xref to extract it by).

    An image drawn several times is placed once, at its largest rectangle, so its id stays unique.
    An image whose stream MuPDF cannot decode is skipped: the page's text is still worth keeping.
    ``get_image_info`` finds every placement in one pass over the page (``get_image_rects`` per
    xref would scan the page again for each image)."""
    placed: dict[int, Any] = {}
    for info in page.get_image_info(xrefs=True):
        xref = info.get("xref", 0)
        rect = pymupdf.Rect(info["bbox"]) & page.rect
        if xref <= 0 or rect.is_empty:
            continue
        if xref not in placed or rect.width * rect.height > placed[xref].width * placed[xref].height:
            placed[xref] = rect
    out = []
    for xref, rect in placed.items():
        extracted = extract_image(pdf, xref, keep_formats, pymupdf)
        if extracted is None:
            continue
        data, fmt, width, height = extracted
        metadata = {"height": height, "width": width, "page": number, "xref": xref,
                    "sha256": hashlib.sha256(data).hexdigest(), "format": fmt}
        out.append(PageImage(f"page_{number}_image_{xref}", (rect.x0, rect.y0, rect.x1, rect.y1), data, metadata))
    return out


def extract_image(pdf: Any, xref: int, keep_formats: Sequence[str], pymupdf: Any) -> tuple[bytes, str, int, int] | None:
    """(bytes, format, width, height) of image ``xref``; formats not in ``keep_formats`` as PNG."""
    try:
        info = pdf.extract_image(xref)
    except Exception:  # noqa: BLE001 - a broken image stream: skip the image
        return None
    if not info or not info.get("image"):
        return None
    fmt = "jpeg" if info["ext"] in ("jpg", "jpeg") else info["ext"]
    if fmt in keep_formats:
        return info["image"], fmt, int(info["width"]), int(info["height"])
    try:
        pix = pymupdf.Pixmap(pdf, xref)
        if pix.colorspace is not None and pix.colorspace.n > 3:  # CMYK & co: PNG holds gray/RGB only
            pix = pymupdf.Pixmap(pymupdf.csRGB, pix)
        return pix.tobytes("png"), "png", pix.width, pix.height
    except Exception:  # noqa: BLE001 - undecodable: skip the image
        return None


def merge_texts(items: Iterable[str | PageImage]) -> list[str | PageImage]:
    """Consecutive texts joined into one by TEXT_SEPARATOR; images kept where they are."""
    out: list[str | PageImage] = []
    run: list[str] = []
    for item in items:
        if isinstance(item, str):
            run.append(item)
            continue
        if run:
            out.append(TEXT_SEPARATOR.join(run))
            run = []
        out.append(item)
    if run:
        out.append(TEXT_SEPARATOR.join(run))
    return out


# -- the op --------------------------------------------------------------------------------------


class PdfToInterleavedParams(Params):
    gutter_max_coverage: float = Field(
        default=0.5, gt=0, lt=1,
        description="an x-range is a column gutter when the text height covering it is at most this "
                    "fraction of the height covered on both sides of it",
    )
    min_gutter: float = Field(default=0.01, ge=0, lt=1,
                              description="narrowest column gutter, as a fraction of the page width")
    keep_line_breaks: bool = Field(
        default=False, description="keep a text block's line breaks (default: its lines joined by spaces)")
    dehyphenate: bool = Field(default=True, description="join words hyphenated across a line break")
    keep_formats: list[str] = Field(
        default=list(KEEP_FORMATS),
        description="image formats kept as extracted; other formats (jpx, jb2, tiff...) are re-encoded to PNG",
    )

    @field_validator("keep_formats")
    @classmethod
    def _names(cls, value: list[str]) -> list[str]:
        """PyMuPDF's names: lower case, "jpeg" (not "jpg")."""
        return ["jpeg" if f.lower() == "jpg" else f.lower() for f in value]


@register("pdf_to_interleaved", requires={"pymupdf": "curation"})
class PdfToInterleaved(Mapper[PdfToInterleavedParams]):
    """PDF bytes -> an interleaved document: text-less pages dropped, column-aware reading order,
    each image after its nearest text block."""

    reads = (ID_COL, "path", "pdf_bytes")
    writes = (*DOCUMENT_COLUMNS, PAGES_WITHOUT_TEXT)
    batch_size = 8  # a row holds a whole PDF (up to 50 MB) and its images

    def columns_dropped(self) -> tuple[str, ...]:
        return ("pdf_bytes",)

    def process_batch(self, table: pa.Table) -> pa.Table:
        p = self.params
        options = ExtractOptions(p.gutter_max_coverage, p.min_gutter, p.keep_line_breaks, p.dehyphenate,
                                 tuple(p.keep_formats))
        ids = table.column(ID_COL).to_pylist()
        paths = table.column("path").to_pylist() if "path" in table.column_names else ids
        datas = table.column("pdf_bytes").to_pylist()
        docs, textless = [], []
        for doc_id, path, data in zip(ids, paths, datas):
            doc, n = pdf_to_document(doc_id, path if path is not None else doc_id, data, options)
            docs.append(doc)
            textless.append(n)
        out = documents_to_table(docs, {PAGES_WITHOUT_TEXT: pa.array(textless, pa.int32())})
        replaced = {*DOCUMENT_COLUMNS, PAGES_WITHOUT_TEXT, "pdf_bytes"}
        for name in table.column_names:
            if name not in replaced:
                out = out.append_column(table.schema.field(name), table.column(name))
        return out
