"""MINT-1T HTML pipeline throughput on >= 2,000 real pages, against parse + extract alone.

Corpus: ``bench/real_html_corpus.py`` (GIMP, PostgreSQL and Python manuals from Debian packages:
2,384 English pages, 1,979 images, as WARC records).  The whole ``pipelines/mint1t_html.yaml``
runs on it through the real runner on an embedded Ray with every core of this machine.

Baseline (named ``parse+extract``): the same WARCs read and turned into interleaved documents by
``read_warc_file`` + ``html_to_interleaved`` in one Python process, no Ray, nothing else: the
least work any HTML curation does.  ``ratio`` = pipeline documents/s per core / baseline's, i.e.
what the filters, dedup, images, Ray and the ledger cost on top of parsing, per core.

    python bench/mint1t_html.py [--corpus DIR] [--cpus N] [--set settings.stateful_ops=actors ...]

Prints documents/s per core for the pipeline, the share of operator time per node, bff_dedup's
n-grams/s, the ratio, and the kept set against ``bench/reference/mint1t_html_kept_urls.txt``: the
page URLs the pipeline kept at commit 2db5117 (before the NSFW filter was made faster and moved
after the text-quality filter) on this corpus -- a speed-up must not change what is kept. URLs, not
record offsets: Debian updates a documentation package now and then, which shifts every record
after it in the WARC (postgresql-doc-15 did on 2026-12-02: the same pages, three offsets changed).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import pyarrow as pa

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run from a checkout without installing
sys.path.insert(0, str(REPO / "bench"))

import real_html_corpus  # noqa: E402

from raypress.schema import alive_mask  # noqa: E402


def baseline_parse_extract(warcs: list[Path]) -> tuple[list, float]:
    """(documents, seconds): WARC parse + HTML -> interleaved documents, one process."""
    from raypress.operators.shared.documents import table_to_documents
    from raypress.operators.curation.html_to_interleaved import HtmlToInterleaved
    from raypress.operators.io.read_warc import read_warc_file

    extract = HtmlToInterleaved(HtmlToInterleaved.Params())
    tables = []
    start = time.perf_counter()
    for warc in warcs:
        for table in read_warc_file(str(warc), str(warc.resolve()), node="warc", content="html"):
            mask = alive_mask(table)
            live = table if mask is None else table.filter(mask)
            for batch in live.to_batches(max_chunksize=256):
                tables.append(extract.process_batch(pa.Table.from_batches([batch])))
    seconds = time.perf_counter() - start
    return [doc for t in tables for doc in table_to_documents(t)], seconds


def bff_core(docs: list) -> tuple[int, float, int]:
    """(n-grams, seconds, documents removed): BFF's hashing + decisions in one process, no Ray."""
    from raypress.operators.dedup.bff_dedup import BffParams, bff_documents
    from raypress.operators.dedup.bff.ngrams import hash_documents
    from raypress.operators.dedup.bff.bloom import BloomFilter, optimal_num_bits, optimal_num_hashes

    params = BffParams()
    ngrams = hash_documents([d.texts for d in docs], [d.id for d in docs], params.ngram_size,
                            params.min_ngram_size).num_ngrams
    bits = optimal_num_bits(max(ngrams, 1), params.false_positive_rate)
    bloom = BloomFilter(-(-bits // 8) * 8, optimal_num_hashes(bits, max(ngrams, 1)))
    start = time.perf_counter()
    _, removed = bff_documents(docs, bloom, params)
    return ngrams, time.perf_counter() - start, len(removed)


def run_pipeline_timed(warcs: list[Path], cpus: int, run_dir: Path, extra: list[str]) -> tuple[dict, float]:
    from raypress.dag.ray_session import ensure_ray
    from raypress.dag.runner import run_pipeline

    ensure_ray(num_cpus=cpus)
    listed = "[" + ",".join(f"'{w}'" for w in warcs) + "]"
    start = time.perf_counter()
    ledger = run_pipeline(str(REPO / "pipelines" / "mint1t_html.yaml"), run_dir=str(run_dir),
                          overrides=[f"warc.paths={listed}", f"images.paths={listed}", *extra])
    return ledger, time.perf_counter() - start


REFERENCE_KEPT = REPO / "bench" / "reference" / "mint1t_html_kept_urls.txt"


def kept_urls(run_dir: Path) -> set[str]:
    """The kept documents' page URLs."""
    import pyarrow.parquet as pq

    files = sorted((run_dir / "output").glob("*.parquet"))
    return {u for f in files for u in pq.read_table(f, columns=["url"]).column("url").to_pylist()}


def compare_kept(run_dir: Path) -> str:
    reference = set(REFERENCE_KEPT.read_text().split())
    kept = kept_urls(run_dir)
    verdict = "identical" if kept == reference else "DIFFERENT"
    return (f"kept set vs {REFERENCE_KEPT.name} (2db5117's pipeline): {verdict} -- {len(kept)} kept, "
            f"{len(reference)} in the reference, {len(kept - reference)} only now, {len(reference - kept)} only then")


def bff_ngrams(run_dir: Path) -> int | None:
    """n-grams bff_dedup looked up, from its event in events.jsonl."""
    for line in (run_dir / "events.jsonl").read_text().splitlines():
        event = json.loads(line)
        if event.get("node") == "bff" and "ngrams" in event:
            return int(event["ngrams"])
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=real_html_corpus.DEFAULT_OUT)
    parser.add_argument("--cpus", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="a pipeline override, e.g. settings.stateful_ops=actors (the engine before blocks.py)")
    args = parser.parse_args()

    warcs = real_html_corpus.build(args.corpus)
    run_dir = REPO / "bench" / ".runs" / f"mint1t_html-{time.strftime('%Y%m%d-%H%M%S')}"
    ledger, seconds = run_pipeline_timed(warcs, args.cpus, run_dir, args.overrides)
    if not ledger["adds_up"]:
        raise SystemExit(f"ledger does not add up: {ledger['problems']}")
    nodes = ledger["nodes"]
    pages = nodes["warc"]["rows_out"]
    per_core = pages / seconds / args.cpus
    print(f"corpus: {', '.join(w.name for w in warcs)}: {pages} HTML pages, {nodes['images']['rows_out']} images")
    print(f"pipeline: {seconds:.1f} s wall on {args.cpus} cores, {nodes['output']['rows_out']} documents kept")
    print(f"pipeline: {pages / seconds:.1f} documents/s, {per_core:.1f} documents/s per core")
    if args.corpus == real_html_corpus.DEFAULT_OUT:
        print(compare_kept(run_dir))

    op_seconds = {nid: e["seconds"] for nid, e in nodes.items()}
    total = sum(op_seconds.values()) or 1.0
    print("operator time share (sum of task time per node):")
    for nid, s in sorted(op_seconds.items(), key=lambda kv: -kv[1]):
        print(f"  {nid:18s} {nodes[nid]['op']:34s} {s:8.1f} s  {100 * s / total:5.1f} %")
    ngrams = bff_ngrams(run_dir)
    if ngrams is not None and nodes["bff"]["seconds"] > 0:
        print(f"bff_dedup: {ngrams} n-grams in {nodes['bff']['seconds']:.1f} s = "
              f"{ngrams / nodes['bff']['seconds']:.0f} n-grams/s (whole op, Ray overhead included)")

    docs, base_seconds = baseline_parse_extract(warcs)
    base_rate = len(docs) / base_seconds
    print(f"baseline parse+extract (1 process, no Ray): {len(docs)} pages in {base_seconds:.1f} s = "
          f"{base_rate:.1f} documents/s per core")
    ngrams, bff_seconds, bff_removed = bff_core(docs)
    print(f"bff_dedup core (1 process, no Ray, all {len(docs)} pages): {ngrams} n-grams in {bff_seconds:.1f} s = "
          f"{ngrams / bff_seconds:.0f} n-grams/s ({bff_removed} documents removed whole)")
    print(f"ratio {per_core / base_rate:.2f}  (pipeline documents/s per core / parse+extract documents/s)")

if __name__ == "__main__":
    main()
