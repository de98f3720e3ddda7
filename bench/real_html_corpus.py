"""Build a WARC of >= 2,000 real English HTML pages (with their images) from Debian documentation.

Sources: ``../shared/tools/make_real_corpora.sh`` (the GIMP manual: 685 pages, 1,963 images) plus
the PostgreSQL 15 and Python 3.11 manuals (``postgresql-doc-15``, ``python3.11-doc``; ~1,700 pages),
downloaded with ``apt-get download`` into a private cache and written as WARC/1.0 request +
response records under their public URLs, so relative ``<img>`` links resolve inside the WARC.
Everything is cached under the output folder; a second call only checks the files are there.

    python bench/real_html_corpus.py [OUT_DIR]     (default: bench/.corpora)
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED_TOOL = REPO.parent / "shared" / "tools" / "make_real_corpora.sh"
DEFAULT_OUT = REPO / "bench" / ".corpora"

# package -> (HTML folder inside the package, public base URL the pages are served under)
DOC_PACKAGES = {
    "postgresql-doc-15": ("usr/share/doc/postgresql-doc-15/html", "https://www.postgresql.org/docs/15/"),
    "python3.11-doc": ("usr/share/doc/python3.11/html", "https://docs.python.org/3.11/"),
}


def log(msg: str) -> None:
    print(f"[real_html_corpus] {msg}", file=sys.stderr, flush=True)


def gimp_warc(out: Path) -> Path:
    """The GIMP manual WARC from the shared tool (built once)."""
    warc = out / "warc" / "gimp-help-en.warc.gz"
    if not warc.exists():
        if not SHARED_TOOL.exists():
            raise SystemExit(f"{SHARED_TOOL} not found: cannot build the real corpus")
        log(f"running {SHARED_TOOL} {out}")
        subprocess.run(["bash", str(SHARED_TOOL), str(out)], check=True)
    return warc


def download_and_extract(out: Path, package: str) -> Path:
    """``apt-get download`` the package into a private cache and unpack it; returns the root."""
    root = out / "extract-docs" / package
    if root.exists():
        return root
    debs = out / "debs-docs"
    debs.mkdir(parents=True, exist_ok=True)
    if not list(debs.glob(f"{package}_*.deb")):
        cache = Path(f"/tmp/real_html_corpus-apt-{os.getuid()}")
        (cache / "archives" / "partial").mkdir(parents=True, exist_ok=True)
        opts = ["-q", "-o", f"Dir::Cache={cache}", "-o", "Debug::NoLocking=1"]
        if os.getuid() == 0:
            opts += ["-o", "APT::Sandbox::User=root"]
        result = subprocess.run(["apt-get", *opts, "download", package], cwd=debs)
        if result.returncode != 0:
            log(f"apt-get download {package} failed; running apt-get update first")
            subprocess.run(["apt-get", "-q", "update"], check=True)
            subprocess.run(["apt-get", *opts, "download", package], cwd=debs, check=True)
    deb = sorted(debs.glob(f"{package}_*.deb"))[-1]
    tmp = root.with_name(root.name + ".partial")
    tmp.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["dpkg-deb", "-x", str(deb), str(tmp)], check=True)
    tmp.rename(root)
    return root


def write_docs_warc(out: Path) -> Path:
    """Every HTML page and image of DOC_PACKAGES as request + response records."""
    from raypress.operators.io.warc.site import Site, write_site_warc

    warc = out / "warc" / "debian-docs.warc.gz"
    if warc.exists():
        return warc
    sites = [Site(download_and_extract(out, pkg) / subdir, base_url) for pkg, (subdir, base_url) in DOC_PACKAGES.items()]
    summary = write_site_warc(sites, warc)
    log(f"{warc}: {summary.pages} pages, {summary.images} images, "
        f"sha256 {hashlib.sha256(warc.read_bytes()).hexdigest()[:16]}")
    return warc


def build(out: Path = DEFAULT_OUT) -> list[Path]:
    """Both WARCs (GIMP manual + PostgreSQL/Python manuals)."""
    out.mkdir(parents=True, exist_ok=True)
    return [gimp_warc(out), write_docs_warc(out)]


if __name__ == "__main__":
    for warc_path in build(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_OUT):
        print(warc_path)
