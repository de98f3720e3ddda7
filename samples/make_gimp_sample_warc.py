"""Build samples/warc_en/gimp-help-en-sample.warc.gz: a small real English crawl with images.

From Debian's gimp-help-en package (the GIMP 2.10 manual; GFDL-NIV-1.2+), the same pages and URLs as
``../shared/tools/make_real_corpora.sh``'s full 685-page crawl: the first ``--pages`` pages (by
file name) that reference between 1 and 12 images (navigation icons included), one of them at least 10 kB (a screenshot, not
only icons), each written as a WARC request + response record
under https://docs.gimp.org/2.10/en/, followed by every image they reference.  Fixed dates and uuid5
record ids make the file byte-for-byte reproducible.

    apt-get download gimp-help-en && dpkg-deb -x gimp-help-en_*.deb x
    python samples/make_gimp_sample_warc.py x/usr/share/gimp/2.0/help/en samples/warc_en/gimp-help-en-sample.warc.gz
"""

from __future__ import annotations

import argparse
import io
import re
import uuid
from pathlib import Path
from urllib.parse import quote, urljoin

from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

BASE = "https://docs.gimp.org/2.10/en/"
DATE = "2024-01-01T00:00:00Z"
IMG = re.compile(rb'<img[^>]+src="([^"]+)"', re.IGNORECASE)
TYPES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif", ".svg": "image/svg+xml"}


def record_id(kind: str, url: str) -> str:
    return "<urn:uuid:%s>" % uuid.uuid5(uuid.NAMESPACE_URL, kind + ":" + url)


def emit(writer: WARCWriter, url: str, data: bytes, content_type: str) -> None:
    path = url[len("https://docs.gimp.org"):]
    request = writer.create_warc_record(url, "request", http_headers=StatusAndHeaders(
        f"GET {path} HTTP/1.1", [("Host", "docs.gimp.org")], is_http_request=True),
        warc_headers_dict={"WARC-Date": DATE, "WARC-Record-ID": record_id("request", url)})
    response = writer.create_warc_record(url, "response", payload=io.BytesIO(data), length=len(data),
                                         http_headers=StatusAndHeaders("200 OK", [("Content-Type", content_type),
                                                                                  ("Content-Length", str(len(data)))],
                                                                       protocol="HTTP/1.1"),
                                         warc_headers_dict={"WARC-Date": DATE,
                                                            "WARC-Record-ID": record_id("response", url)})
    writer.write_record(request)
    writer.write_record(response)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("root", type=Path, help="the extracted usr/share/gimp/2.0/help/en folder")
    ap.add_argument("out", type=Path)
    ap.add_argument("--pages", type=int, default=40)
    args = ap.parse_args()
    pages, images = [], {}
    for page in sorted(args.root.glob("*.html")):
        html = page.read_bytes()
        srcs = [s.decode() for s in IMG.findall(html)]
        files = [(args.root / s).resolve() for s in srcs]
        if not 1 <= len(srcs) <= 12 or not all(f.is_file() for f in files):
            continue
        if not any(f.stat().st_size >= 10_000 for f in files):  # screenshots, not only icons
            continue
        pages.append((page, html))
        for src, f in zip(srcs, files):
            images[urljoin(BASE + page.name, quote(src))] = f
        if len(pages) == args.pages:
            break
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "wb") as out:
        writer = WARCWriter(out, gzip=True)
        for page, html in pages:
            emit(writer, BASE + page.name, html, "text/html; charset=utf-8")
        for url, f in sorted(images.items()):
            emit(writer, url, f.read_bytes(), TYPES.get(f.suffix.lower(), "application/octet-stream"))
    print(f"{args.out}: {len(pages)} pages, {len(images)} images, {args.out.stat().st_size / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
