"""Build small test PDFs with PyMuPDF (no binary files in the repo).

``build_pdf_corpus(dir)`` writes the files the MINT-1T PDF pipeline is tested on and returns
``{name: path}``; ``CORPUS_OUTCOMES`` says what ``read_pdf`` (default limits) and
``pdf_to_interleaved`` make of each.  The text is plain, non-repetitive English so that the
document filters downstream (language id, Gopher quality, BFF dedup) keep the live documents; the
images are real rasters (300x200 PNG / JPEG, drawn with Pillow) that pass MINT-1T's size filter.
"""

from __future__ import annotations

import io
import random
from pathlib import Path

import pymupdf
from PIL import Image

PAGE = (612, 792)  # US Letter, points
MARGIN = 54
GUTTER = 18
IMAGE_SIZE = (300, 200)  # pixels (width, height)

# Distinct paragraphs: no sentence repeats within or across files (BFF dedup, Gopher repetition).
PARAGRAPHS = {
    "title": "Rivers, Ledgers and Light: Notes on Three Old Trades",
    "authors": "A. Writer and B. Reader, Department of Practical History",
    "L1": "The earliest river ports grew where a ford met a road, and the merchants who settled there kept "
          "careful accounts of every cargo that crossed the water. Their ledgers tell us which goods were "
          "scarce in winter, which families owned the boats, and how often the spring floods closed the "
          "crossing for weeks at a time.",
    "L2": "Printing changed those ledgers less than one might expect. Clerks still wrote by hand, because a "
          "column of figures had to be checked against the goods on the quay, and a printed form only "
          "saved them the trouble of ruling lines. What printing did change was how quickly a new tariff "
          "could reach every town along the river.",
    "L3": "Lighthouse keepers, too, kept logs that survive in surprising numbers. A keeper noted the weather "
          "at dusk and dawn, the oil burned through the night, and any ship that passed close enough to "
          "read her name. Read together with the port ledgers, these logs let historians follow a single "
          "vessel along the coast for a whole season.",
    "R1": "Astronomers in the same centuries depended on the same patient record keeping. A comet was only "
          "useful to science if someone had written down its position on many nights, and the best "
          "observers were often amateurs with good eyes, a steady clock, and the habit of writing in ink "
          "before going to bed.",
    "R2": "Glass makers supplied both trades. The lenses of a telescope and the prisms of a lantern came "
          "from the same furnaces, and a good year for one craft was usually a good year for the other. "
          "Several workshops survived for generations by switching between the two whenever demand "
          "changed.",
    "R3": "Mapmakers drew on all of these sources at once. They compared the soundings recorded by pilots "
          "with the bearings taken from lighthouses and the latitudes measured by astronomers, and they "
          "corrected their charts each time a careful sailor reported a shoal that nobody had marked "
          "before.",
    "L4": "Weather itself became a subject of study once enough of these logs had been collected. Patterns "
          "that no single keeper could see, such as storms that moved along the coast at a steady pace, "
          "appeared clearly when dozens of records were laid side by side on a long table.",
    "R4": "Insurance followed close behind. Underwriters who could estimate the risk of a voyage from past "
          "records offered better prices than rivals who relied on rumour, and within a few decades the "
          "habit of keeping written evidence had become a matter of money as much as curiosity.",
    "wide": "Taken together, these trades show how ordinary written records, kept for practical reasons by "
            "people who never expected to be read, became the raw material of later science. The remainder "
            "of this note looks at how such records were stored, copied and eventually lost.",
    "L5": "Many archives were kept in damp buildings near the water, which is why so many early ledgers "
          "survive only as fragments. Mould and river floods destroyed far more paper than fire ever did, "
          "and the pages that remain are often those that a later owner happened to copy out by hand.",
    "R5": "Copying introduced errors of its own. A tired clerk might skip a line or misread a number, and "
          "modern editors spend much of their effort comparing copies to decide which version of a "
          "damaged page is most likely to match what the original keeper actually wrote.",
    "T1": "Orchards need patience more than any other kind of farming. A young apple tree may take five or six "
          "years to bear a useful crop, and during that time the grower must prune it, protect it from "
          "frost and deer, and decide which branches will carry the weight of future harvests.",
    "T2": "Bees decide much of the outcome. Growers who keep hives among their trees, or who rent them from "
          "a beekeeper during the few weeks of blossom, usually see heavier crops, and many old farm "
          "diaries record the date on which the first bees were seen working the flowers each spring.",
}

# read_pdf (default limits) then pdf_to_interleaved, per corpus file.
CORPUS_OUTCOMES = {
    "two_column": {"reader": "live", "n_pages": 2, "pages_without_text": 0, "images": 3},
    "textless_page": {"reader": "live", "n_pages": 3, "pages_without_text": 1, "images": 1},
    "long_60_pages": {"reader": "filtered", "reason": "too_many_pages", "n_pages": 60},
    "corrupt": {"reader": "error", "reason": "corrupt_pdf"},
}

# The reading order the two-column file must come out in (paragraph keys of PARAGRAPHS).
TWO_COLUMN_ORDER = ["title", "authors", "L1", "L2", "L3", "R1", "R2", "R3", "L4", "R4", "wide", "L5", "R5"]


def raster(width: int = IMAGE_SIZE[0], height: int = IMAGE_SIZE[1], fmt: str = "PNG", seed: int = 0) -> bytes:
    """A real raster image (gradient plus noise, different per seed) encoded as PNG or JPEG."""
    rng = random.Random(seed)
    img = Image.new("RGB", (width, height))
    img.putdata([((x * 255) // width, (y * 255) // height, rng.randrange(256))
                 for y in range(height) for x in range(width)])
    buf = io.BytesIO()
    img.save(buf, fmt)
    return buf.getvalue()


def put_text(page: pymupdf.Page, x0: float, y0: float, x1: float, text: str, fontsize: float = 10,
             align: int = 0) -> float:
    """Write ``text`` in a box from ``y0`` between ``x0`` and ``x1``; return the y where it ends."""
    rect = pymupdf.Rect(x0, y0, x1, PAGE[1] - MARGIN)
    spare = page.insert_textbox(rect, text, fontsize=fontsize, fontname="helv", align=align)
    if spare < 0:
        raise ValueError(f"text does not fit below y={y0}: {text[:40]!r}")
    return rect.y1 - spare


def columns() -> tuple[tuple[float, float], tuple[float, float]]:
    mid = PAGE[0] / 2
    return (MARGIN, mid - GUTTER / 2), (mid + GUTTER / 2, PAGE[0] - MARGIN)


def build_two_column_pdf(path: Path) -> Path:
    """Two pages of two-column text with a full-width title, author line and mid-page paragraph.

    Page 0: title, authors, then left column L1, PNG image, L2, L3 and right column R1, R2,
    JPEG image, R3.  Page 1: L4 | R4 (with a PNG image under R4), the full-width ``wide``
    paragraph, then L5 | R5.  Content is written right column first and the title last, so the
    content-stream order is not the reading order.  The order expected is TWO_COLUMN_ORDER;
    images: page 0's PNG follows L1, its JPEG follows R2, page 1's PNG follows R4."""
    (lx0, lx1), (rx0, rx1) = columns()
    doc = pymupdf.open()
    page = doc.new_page(width=PAGE[0], height=PAGE[1])
    top = 150
    y = put_text(page, rx0, top, rx1, PARAGRAPHS["R1"])
    y = put_text(page, rx0, y + 12, rx1, PARAGRAPHS["R2"])
    page.insert_image(pymupdf.Rect(rx0, y + 6, rx0 + 150, y + 106), stream=raster(fmt="JPEG", seed=2))
    put_text(page, rx0, y + 140, rx1, PARAGRAPHS["R3"])
    y = put_text(page, lx0, top, lx1, PARAGRAPHS["L1"])
    page.insert_image(pymupdf.Rect(lx0, y + 6, lx0 + 150, y + 106), stream=raster(seed=1))
    y = put_text(page, lx0, y + 140, lx1, PARAGRAPHS["L2"])
    put_text(page, lx0, y + 12, lx1, PARAGRAPHS["L3"])
    put_text(page, MARGIN, 110, PAGE[0] - MARGIN, PARAGRAPHS["authors"], fontsize=11, align=1)
    put_text(page, MARGIN, 60, PAGE[0] - MARGIN, PARAGRAPHS["title"], fontsize=18, align=1)

    page = doc.new_page(width=PAGE[0], height=PAGE[1])
    y_left = put_text(page, lx0, 72, lx1, PARAGRAPHS["L4"])
    y_right = put_text(page, rx0, 72, rx1, PARAGRAPHS["R4"])
    page.insert_image(pymupdf.Rect(rx0, y_right + 6, rx0 + 150, y_right + 106), stream=raster(seed=3))
    y = put_text(page, MARGIN, max(y_left, y_right + 106) + 24, PAGE[0] - MARGIN, PARAGRAPHS["wide"])
    put_text(page, rx0, y + 24, rx1, PARAGRAPHS["R5"])
    put_text(page, lx0, y + 24, lx1, PARAGRAPHS["L5"])
    doc.save(path)
    return path


def build_long_pdf(path: Path, pages: int = 60) -> Path:
    """``pages`` pages, one short distinct sentence each (over MINT-1T's 50-page limit by default)."""
    doc = pymupdf.open()
    for i in range(pages):
        page = doc.new_page(width=PAGE[0], height=PAGE[1])
        put_text(page, MARGIN, 72, PAGE[0] - MARGIN, f"This is page number {i + 1} of a long report.")
    doc.save(path)
    return path


def build_textless_page_pdf(path: Path) -> Path:
    """Three pages: text with a PNG image, an image-only page (no text), text again."""
    doc = pymupdf.open()
    page = doc.new_page(width=PAGE[0], height=PAGE[1])
    y = put_text(page, MARGIN, 72, PAGE[0] - MARGIN, PARAGRAPHS["T1"])
    page.insert_image(pymupdf.Rect(MARGIN, y + 10, MARGIN + 225, y + 160), stream=raster(seed=10))
    page = doc.new_page(width=PAGE[0], height=PAGE[1])
    page.insert_image(pymupdf.Rect(MARGIN, 72, MARGIN + 450, 372), stream=raster(seed=11))
    page = doc.new_page(width=PAGE[0], height=PAGE[1])
    put_text(page, MARGIN, 72, PAGE[0] - MARGIN, PARAGRAPHS["T2"])
    doc.save(path)
    return path


def build_all_textless_pdf(path: Path, pages: int = 2) -> Path:
    """Pages that hold only an image each: a document with no text at all."""
    doc = pymupdf.open()
    for i in range(pages):
        page = doc.new_page(width=PAGE[0], height=PAGE[1])
        page.insert_image(pymupdf.Rect(MARGIN, 72, MARGIN + 300, 272), stream=raster(seed=20 + i))
    doc.save(path)
    return path


def build_corrupt_pdf(path: Path) -> Path:
    """A PDF header followed by garbage: MuPDF cannot open it (not even by repairing it)."""
    path.write_bytes(b"%PDF-1.7\n" + random.Random(0).randbytes(4096))
    return path


def build_truncated_pdf(path: Path, source: Path, keep: float = 0.5) -> Path:
    """The first ``keep`` fraction of ``source``'s bytes (MuPDF repairs such files on opening)."""
    data = source.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])
    return path


def build_encrypted_pdf(path: Path) -> Path:
    """A one-page PDF that needs a user password to open."""
    doc = pymupdf.open()
    page = doc.new_page(width=PAGE[0], height=PAGE[1])
    put_text(page, MARGIN, 72, PAGE[0] - MARGIN, "A secret that nobody should read without the password.")
    doc.save(path, encryption=pymupdf.PDF_ENCRYPT_AES_256, user_pw="user", owner_pw="owner")
    return path


def build_pdf_corpus(directory: Path) -> dict[str, Path]:
    """The test corpus (see CORPUS_OUTCOMES): ``{name: path}`` of ``{directory}/{name}.pdf``."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    builders = {
        "two_column": build_two_column_pdf,
        "textless_page": build_textless_page_pdf,
        "long_60_pages": build_long_pdf,
        "corrupt": build_corrupt_pdf,
    }
    return {name: build(directory / f"{name}.pdf") for name, build in builders.items()}
