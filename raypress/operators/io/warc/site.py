"""Package a local HTML site (a documentation tree) as a WARC, as a crawler would have captured it.

Real web pages with real images are what the MINT-1T HTML path needs for end-to-end runs and
benchmarks, and documentation trees on disk (Debian doc packages, the Rust book) are the real HTML
a machine without network has.  Each page and image becomes a request + response record under
``base_url + relative path``, so relative ``<img>`` links resolve inside the WARC.  Dates and
record ids are fixed, so the same tree always gives the same bytes.
"""

from __future__ import annotations

import io
import mimetypes
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

FIXED_DATE = "2024-01-01T00:00:00Z"
HTTP_DATE = "Mon, 01 Jan 2024 00:00:00 GMT"
PAGE_SUFFIXES = {".html", ".htm"}
IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".gif", ".webp", ".svg"}


@dataclass(frozen=True)
class Site:
    root: Path  # folder holding the pages
    base_url: str  # the URL the folder is served under, ending in "/"
    max_pages: int | None = None  # the first N pages in path order (all images are kept)


@dataclass
class WarcSummary:
    path: Path
    pages: int = 0
    images: int = 0


def record_id(kind: str, url: str) -> str:
    return f"<urn:uuid:{uuid.uuid5(uuid.NAMESPACE_URL, kind + ':' + url)}>"


def site_files(site: Site) -> Iterable[tuple[str, Path]]:
    """(url, real file) of every page (up to max_pages) and image under the site root, sorted."""
    files = sorted(p for p in site.root.rglob("*") if p.suffix.lower() in PAGE_SUFFIXES | IMAGE_SUFFIXES)
    pages = 0
    for path in files:
        real = path.resolve()  # doc packages link shared files from elsewhere
        if not real.is_file():
            continue
        if path.suffix.lower() in PAGE_SUFFIXES:
            if site.max_pages is not None and pages >= site.max_pages:
                continue
            pages += 1
        yield site.base_url + path.relative_to(site.root).as_posix(), real


def write_site_warc(sites: list[Site], out: Path) -> WarcSummary:
    """Write every site's pages and images as WARC/1.0 request + response records (gzip per record)."""
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    summary = WarcSummary(out)
    with open(partial, "wb") as fh:
        writer = WARCWriter(fh, gzip=True, warc_version="1.0")
        for site in sites:
            for url, path in site_files(site):
                is_page = path.suffix.lower() in PAGE_SUFFIXES
                ctype = "text/html; charset=utf-8" if is_page else (
                    mimetypes.guess_type(path.name)[0] or "application/octet-stream")
                body = path.read_bytes()
                _, _, host, rest = url.split("/", 3)
                request = StatusAndHeaders(f"GET /{rest} HTTP/1.1", [("Host", host)], is_http_request=True)
                writer.write_record(writer.create_warc_record(
                    url, "request", http_headers=request,
                    warc_headers_dict={"WARC-Record-ID": record_id("request", url), "WARC-Date": FIXED_DATE}))
                response = StatusAndHeaders("200 OK", [("Content-Type", ctype), ("Date", HTTP_DATE),
                                                       ("Content-Length", str(len(body)))], protocol="HTTP/1.1")
                writer.write_record(writer.create_warc_record(
                    url, "response", payload=io.BytesIO(body), http_headers=response,
                    warc_headers_dict={"WARC-Record-ID": record_id("response", url), "WARC-Date": FIXED_DATE}))
                if is_page:
                    summary.pages += 1
                else:
                    summary.images += 1
    partial.rename(out)
    return summary
