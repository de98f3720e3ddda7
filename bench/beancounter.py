"""BeanCounter's front end and analysis, per core: read_edgar + edgar_html_to_text, then the scan.

Corpus: the EDGAR files of ``../shared/data/edgar`` (else the repository's ``samples/edgar``), read
over and over until at least ``--mb`` MB of input has gone through (200 by default): 1990s text
submissions, a modern 14-document submission with uuencoded binaries and XBRL, the ``.nc`` feed
file, and inline-XBRL HTML filings (Apple 10-K/10-Q, a proxy, a prospectus).

Measured in one Python process (one core), no Ray:

- ``read``: ``read_edgar_file`` (SGML split, headers, binary/XBRL parts dropped): documents/s and
  input MB/s;
- ``extract``: ``edgar_html_to_text`` on the documents read; against the named baseline
  ``naive-text``, selectolax's ``body.text()`` on the same documents (parse + all text, no inline
  XBRL handling, no tables, no furniture): ``ratio`` = ours MB/s / baseline MB/s, i.e. what the
  cleaning costs over the least any HTML-to-text does;
- ``analysis``: the demographics scan (paragraph blocks, descriptor match, pysbd sentences, MD5
  dedup) on the extracted texts: documents/s, MB/s and descriptor sentences/s, and scoring
  sentences/s with the offline profanity classifier.

    python bench/beancounter.py [--mb 200]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run from a checkout without installing

from raypress.operators.curation.beancounter.descriptor_matching import DescriptorMatcher, scan_document  # noqa: E402
from raypress.operators.curation.beancounter.holisticbias_descriptors import load_descriptors, surface_forms  # noqa: E402
from raypress.operators.curation.edgar_html_to_text import EdgarHtmlToText, EdgarHtmlToTextParams  # noqa: E402
from raypress.operators.io.read_edgar import read_edgar_file  # noqa: E402
from raypress.schema import alive_mask  # noqa: E402


def corpus_files() -> list[Path]:
    for folder in (REPO.parent / "shared" / "data" / "edgar", REPO / "samples" / "edgar"):
        files = sorted(p for p in folder.glob("*") if p.suffix in (".txt", ".nc", ".html"))
        if files:
            return files
    raise SystemExit("no EDGAR files found")


def read_all(files: list[Path], target_bytes: int) -> tuple[list[str], int, int, float]:
    """(live document texts of one pass, documents read, bytes read, seconds) over passes until
    ``target_bytes`` have been read."""
    texts: list[str] = []
    docs = done = 0
    start = time.perf_counter()
    passes = 0
    while done < target_bytes:
        for f in files:
            for table in read_edgar_file(str(f), str(f), "filings"):
                alive = alive_mask(table)
                live = table if alive is None else table.filter(alive)
                docs += table.num_rows
                if passes == 0:
                    texts.extend(t for t in live.column("text").to_pylist() if t)
            done += f.stat().st_size
        passes += 1
    return texts, docs, done, time.perf_counter() - start


def timed_passes(fn, texts: list[str], target_bytes: int) -> tuple[int, int, float, list]:
    """Run ``fn`` over ``texts`` until ``target_bytes`` of them went through: (docs, bytes, s, first outputs)."""
    size = sum(len(t.encode("utf-8")) for t in texts)
    docs = done = 0
    first: list = []
    start = time.perf_counter()
    while done < target_bytes:
        out = [fn(t) for t in texts]
        first = first or out
        docs += len(texts)
        done += size
    return docs, done, time.perf_counter() - start, first


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--mb", type=float, default=200.0, help="input MB to read and extract (>= 200 for the figures)")
    ap.add_argument("--analysis-mb", type=float, default=50.0, help="extracted text MB to scan")
    args = ap.parse_args()
    target = int(args.mb * 1e6)
    files = corpus_files()

    texts, docs, nbytes, seconds = read_all(files, target)
    print(f"corpus: {len(files)} files, {sum(f.stat().st_size for f in files) / 1e6:.1f} MB per pass; "
          f"{len(texts)} text documents per pass")
    print(f"read       {docs / seconds:10.1f} documents/s  {nbytes / seconds / 1e6:7.1f} MB/s per core "
          f"({nbytes / 1e6:.0f} MB)")

    op = EdgarHtmlToText(EdgarHtmlToTextParams())
    d_ours, b_ours, s_ours, clean = timed_passes(op.process_text, texts, target)
    from selectolax.lexbor import LexborHTMLParser

    def naive(text: str) -> str:
        body = LexborHTMLParser(text).body
        return body.text(separator="\n") if body is not None else text

    d_base, b_base, s_base, _ = timed_passes(naive, texts, target)
    ours, base = b_ours / s_ours / 1e6, b_base / s_base / 1e6
    print(f"extract    {d_ours / s_ours:10.1f} documents/s  {ours:7.1f} MB/s per core (edgar_html_to_text)")
    print(f"naive-text {d_base / s_base:10.1f} documents/s  {base:7.1f} MB/s per core (baseline: selectolax body.text)")
    print(f"ratio      {ours / base:.2f}x (ours / naive-text, MB/s of input HTML)")

    matcher = DescriptorMatcher(surface_forms(load_descriptors()))
    scanned = [t for t in clean if t]
    d_scan, b_scan, s_scan, found = timed_passes(lambda t: scan_document(t, matcher), scanned,
                                                 int(args.analysis_mb * 1e6))
    sentences = sum(len(doc.sentences) for doc in found) * (d_scan // max(len(scanned), 1))
    print(f"analysis   {d_scan / s_scan:10.1f} documents/s  {b_scan / s_scan / 1e6:7.2f} MB/s per core, "
          f"{sentences / s_scan:.1f} descriptor sentences/s ({sum(len(d.sentences) for d in found)} per pass)")
    from raypress.operators.curation.beancounter.toxicity.scorers import make_scorer

    scorer = make_scorer("profanity_check")
    pool = [s for doc in found for s, _, _ in doc.sentences] or ["An example sentence."]
    pool = (pool * (5000 // len(pool) + 1))[:5000]
    scorer.score(pool[:10])  # load the model first
    start = time.perf_counter()
    scorer.score(pool)
    print(f"scoring    {len(pool) / (time.perf_counter() - start):10.1f} sentences/s per core (profanity_check)")



if __name__ == "__main__":
    main()
