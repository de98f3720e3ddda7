"""``beancounter_demographics``: BeanCounter's toxicity and demographics analysis, filings vs a reference corpus.

Wang & Levy (2024) asked whether business filings talk about demographic groups less toxically
than web text.  Their method, followed here (see ``beancounter.descriptor_matching`` for the details):

1. The HolisticBias v1.1 descriptors of five axes as 206 surface forms folded back to their
   descriptor (``beancounter.holisticbias_descriptors``).
2. Each document of the ``filings`` input is cut into sentences (pySBD); a sentence mentioning a
   descriptor (case-sensitive, word boundaries) is attributed to its longest mention; sentences
   are deduplicated by MD5 across the corpus.  The same for the ``reference`` corpus (e.g. web text).
3. Per descriptor, the reference sentences are sampled to as many as the filings have (without
   replacement when there are enough, else with), from a generator seeded by the run seed and the
   descriptor, so a descriptor's sample does not depend on which other descriptors occur.
4. Every filings sentence and every sampled reference sentence is scored for toxicity
   (``scorer``: ``profanity_check`` offline by default, ``perspective`` with a key; see
   ``beancounter.toxicity.scorers``).  Per descriptor: mean of each corpus, percent reduction
   ``mean_filings / mean_reference - 1``, and Welch's t-test (unequal variances).
5. Share of documents (and of filings, by ``group_key``, e.g. ``accession``) mentioning each
   axis, with the denominator; the top descriptors per axis; the pronoun table.

Outputs in ``reports/<node>/``: ``report.json``, ``table.md``, ``toxicity.png`` (mean toxicity per
descriptor, filings vs reference, and the axis shares) and ``sentences.parquet`` (every scored
sentence with its descriptor, MD5 and score, for audit).  The inputs may be Ray Datasets or, for
in-process use, pyarrow Tables; document scanning runs in Ray tasks for a Ray Dataset, and only
the descriptor sentences come back to the driver.
"""

from __future__ import annotations

import functools
import hashlib
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import Field

from raypress.artifacts import Artifact, DatasetArtifact, ReportArtifact
from raypress.operators.base import Params, Resources, RunContext, Stage
from raypress.operators.curation.beancounter.descriptor_matching import PRONOUNS, DescriptorMatcher, scan_document
from raypress.operators.curation.beancounter.holisticbias_descriptors import AXES, load_descriptors, surface_forms
from raypress.operators.curation.beancounter.report_files import figure, markdown
from raypress.operators.curation.beancounter.toxicity.comparison import compare, sample_indices
from raypress.operators.curation.beancounter.toxicity.scorers import PERSPECTIVE_ENDPOINT, ToxicityScorer, make_scorer
from raypress.operators.registry import register
from raypress.schema import ID_COL, ArtifactType

OP = "beancounter_demographics"


class BeanCounterDemographicsParams(Params):
    text_key: str = Field("text", description="text column of the filings")
    reference_text_key: str = Field("text", description="text column of the reference corpus")
    group_key: str | None = Field("accession", description="column naming a document's filing, to count "
                                  "the share of filings (not only documents) mentioning each axis; "
                                  "skipped when the input has no such column")
    descriptors_path: str | None = Field(None, description="HolisticBias v1.1 descriptors.json "
                                         "(default: the copy shipped in raypress/data/holisticbias)")
    scorer: Literal["profanity_check", "perspective"] = Field(
        "profanity_check", description="profanity_check: offline profanity classifier standing in for a toxicity "
        "model; perspective: Google's Perspective API TOXICITY (needs a key)")
    api_key_env: str = Field("PERSPECTIVE_API_KEY", description="perspective: env variable holding the API key")
    endpoint: str = Field(PERSPECTIVE_ENDPOINT, description="perspective: the comments:analyze URL")
    requests_per_second: float = Field(1.0, gt=0, description="perspective: your quota (1 QPS by default)")
    chunk_size: int = Field(100, ge=1, description="perspective: texts per chunk of requests")
    concurrency: int = Field(4, ge=1, description="perspective: requests in flight at once")
    max_retries: int = Field(6, ge=0, description="perspective: retries of a 429/5xx/dropped request")
    backoff_s: float = Field(1.0, ge=0, description="perspective: first retry delay, doubled each retry")
    timeout_s: float = Field(30.0, gt=0, description="perspective: seconds per request")
    blocks: Literal["paragraphs", "lines"] = Field(
        "paragraphs", description="what the sentence splitter gets: blank-line paragraphs with wrapped lines "
        "joined (hard-wrapped filings), or single lines (the paper notebook's splitlines)")
    max_sentence_bytes: int = Field(20_480, ge=1, description="longer 'sentences' (tables run together) are "
                                    "left out, as the paper's 20 kB Perspective limit did")
    seed: int | None = Field(None, ge=0, description="sampling seed (default: the run's seed)")
    alpha: float = Field(0.05, gt=0, lt=1, description="significance level reported for Welch's t-test")
    top_k: int = Field(5, ge=1, description="top descriptors listed per axis")
    chart_descriptors: int = Field(30, ge=1, description="descriptors in the bar chart (most sentences first)")
    batch_size: int = Field(64, ge=1, description="documents per scanning task batch")


# ---------------------------------------------------------------------------------------------
# Scanning documents (runs in Ray tasks for a Ray Dataset)
# ---------------------------------------------------------------------------------------------

SCAN_SCHEMA = pa.schema([
    ("group", pa.string()), ("empty", pa.bool_()), ("words", pa.int64()), ("too_long", pa.int64()),
    *[(f"pronoun_{c}", pa.int64()) for c in PRONOUNS],
    ("descriptors", pa.list_(pa.string())),
    ("sentences", pa.list_(pa.string())), ("forms", pa.list_(pa.string())),
    ("sentence_descriptors", pa.list_(pa.string())),
])


def scan_batch(table: pa.Table, *, text_key: str, group_key: str | None, matcher: DescriptorMatcher,
               mode: str, max_sentence_bytes: int, node: str) -> pa.Table:
    """One row per document: its descriptor sentences, the descriptors it mentions, its pronouns."""
    if text_key not in table.column_names:
        raise ValueError(f"{OP} (node {node!r}): no text column {text_key!r} (columns: {table.column_names})")
    texts = table.column(text_key).to_pylist()
    ids = table.column(ID_COL).to_pylist() if ID_COL in table.column_names else list(range(len(texts)))
    groups = (table.column(group_key).to_pylist() if group_key and group_key in table.column_names
              else [None] * len(texts))
    cols: dict[str, list[Any]] = {name: [] for name in SCAN_SCHEMA.names}
    for row_id, text, group in zip(ids, texts, groups):
        if text is not None and not isinstance(text, str):
            raise ValueError(f"{OP} (node {node!r}): row {row_id!r}: {text_key!r} holds "
                             f"{type(text).__name__}, not text")
        empty = not text or not text.strip()
        try:
            doc = scan_document(text or "", matcher, mode, max_sentence_bytes)
        except Exception as exc:  # a splitter crash names the row it happened on
            raise ValueError(f"{OP} (node {node!r}): row {row_id!r}: scanning failed: "
                             f"{type(exc).__name__}: {exc}") from exc
        cols["group"].append(None if group is None else str(group))
        cols["empty"].append(empty)
        cols["words"].append(doc.words)
        cols["too_long"].append(doc.too_long)
        for c in PRONOUNS:
            cols[f"pronoun_{c}"].append(doc.pronouns[c])
        cols["descriptors"].append(sorted(doc.descriptors))
        cols["sentences"].append([s for s, _, _ in doc.sentences])
        cols["forms"].append([f for _, f, _ in doc.sentences])
        cols["sentence_descriptors"].append([d for _, _, d in doc.sentences])
    return pa.table(cols, schema=SCAN_SCHEMA)


@dataclass
class CorpusScan:
    """Everything the report needs from one corpus, summed over its documents."""

    axes_of: dict[str, tuple[str, ...]]
    documents: int = 0
    empty: int = 0
    words: int = 0
    too_long: int = 0
    sentence_mentions: int = 0  # descriptor sentences before the corpus-wide MD5 dedup
    axis_documents: Counter = field(default_factory=Counter)
    descriptor_documents: Counter = field(default_factory=Counter)
    groups: dict[str, set[str]] = field(default_factory=dict)  # group -> axes its documents mention
    pronoun_counts: Counter = field(default_factory=Counter)
    pronoun_documents: Counter = field(default_factory=Counter)
    sentences: dict[str, tuple[str, str, str]] = field(default_factory=dict)  # md5 -> (sentence, form, descriptor)

    def add(self, scanned: pa.Table) -> None:
        for row in scanned.to_pylist():
            self.documents += 1
            self.empty += bool(row["empty"])
            self.words += row["words"]
            self.too_long += row["too_long"]
            axes = {a for d in row["descriptors"] for a in self.axes_of[d]}
            self.axis_documents.update(axes)
            self.descriptor_documents.update(row["descriptors"])
            if row["group"] is not None and not row["empty"]:  # the denominator: filings with some text
                self.groups.setdefault(row["group"], set()).update(axes)
            for c in PRONOUNS:
                n = row[f"pronoun_{c}"]
                self.pronoun_counts[c] += n
                self.pronoun_documents[c] += n > 0
            for sentence, form, descriptor in zip(row["sentences"], row["forms"], row["sentence_descriptors"]):
                self.sentence_mentions += 1
                self.sentences.setdefault(hashlib.md5(sentence.encode("utf-8")).hexdigest(),
                                          (sentence, form, descriptor))

    def by_descriptor(self) -> dict[str, list[str]]:
        """descriptor -> its sentences' MD5s, sorted (a canonical order, whatever order the rows came in)."""
        out: dict[str, list[str]] = defaultdict(list)
        for h, (_, _, descriptor) in self.sentences.items():
            out[descriptor].append(h)
        return {d: sorted(hs) for d, hs in out.items()}


def scan_corpus(art: Artifact, text_key: str, group_key: str | None, matcher: DescriptorMatcher,
                p: BeanCounterDemographicsParams, axes_of: dict[str, tuple[str, ...]], node: str) -> CorpusScan:
    """Scan a Dataset input: in Ray tasks for a Ray Dataset, in-process for a pyarrow Table."""
    if not isinstance(art, DatasetArtifact):
        raise ValueError(f"{OP} (node {node!r}): its inputs are Datasets")
    fn = functools.partial(scan_batch, text_key=text_key, group_key=group_key, matcher=matcher, mode=p.blocks,
                           max_sentence_bytes=p.max_sentence_bytes, node=node)
    scan = CorpusScan(axes_of)
    ds = art.ds
    batches: Iterator[pa.Table]
    if isinstance(ds, pa.Table):
        batches = (fn(pa.Table.from_batches([b], schema=ds.schema)) for b in ds.to_batches(max_chunksize=p.batch_size))
    else:
        schema = ds.schema()
        if schema is None:  # an empty Dataset: no documents
            return scan
        names = schema.names
        if text_key not in names:
            raise ValueError(f"{OP} (node {node!r}): no text column {text_key!r} (columns: {names})")
        keep = [c for c in (ID_COL, text_key, group_key) if c and c in names]
        batches = ds.select_columns(keep).map_batches(fn, batch_format="pyarrow", batch_size=p.batch_size) \
            .iter_batches(batch_format="pyarrow", batch_size=None)
    for scanned in batches:
        scan.add(scanned)
    return scan


# ---------------------------------------------------------------------------------------------
# Tables, markdown, figure
# ---------------------------------------------------------------------------------------------

def _share(n: int, of: int) -> dict[str, Any]:
    return {"count": n, "of": of, "share": n / of if of else None}


def axis_shares(scan: CorpusScan) -> list[dict[str, Any]]:
    docs = scan.documents - scan.empty
    out = []
    for axis in AXES:
        entry = {"axis": axis, "documents": _share(scan.axis_documents[axis], docs)}
        if scan.groups:
            entry["filings"] = _share(sum(axis in axes for axes in scan.groups.values()), len(scan.groups))
        out.append(entry)
    return out


def pronoun_table(scan: CorpusScan) -> list[dict[str, Any]]:
    docs = scan.documents - scan.empty
    return [{"class": c, "words": list(words), "occurrences": scan.pronoun_counts[c],
             "per_million_words": 1e6 * scan.pronoun_counts[c] / scan.words if scan.words else None,
             "documents": _share(scan.pronoun_documents[c], docs)} for c, words in PRONOUNS.items()]


def _sentence_table(corpus: str, hashes: list[str], scan: CorpusScan, scores: dict[str, float | None],
                    draws: Counter | None = None) -> pa.Table:
    rows = [scan.sentences[h] for h in hashes]
    return pa.table({
        "corpus": pa.array([corpus] * len(hashes), pa.string()),
        "descriptor": pa.array([r[2] for r in rows], pa.string()),
        "surface_form": pa.array([r[1] for r in rows], pa.string()),
        "md5": pa.array(hashes, pa.string()),
        "sentence": pa.array([r[0] for r in rows], pa.string()),
        "toxicity": pa.array([scores.get(h) for h in hashes], pa.float64()),
        "draws": pa.array([draws[h] if draws is not None else 1 for h in hashes], pa.int64()),
    })


# ---------------------------------------------------------------------------------------------
# The stage
# ---------------------------------------------------------------------------------------------

@register("beancounter_demographics", requires={"pysbd": "curation", "profanity_check": "curation", "scipy": "curation",
                        "matplotlib": "curation"})
class BeanCounterDemographics(Stage[BeanCounterDemographicsParams]):
    """Toxicity of demographic-descriptor sentences, filings vs a reference corpus, per HolisticBias descriptor (BeanCounter)."""

    inputs: ClassVar[dict[str, ArtifactType]] = {"filings": ArtifactType.DATASET, "reference": ArtifactType.DATASET}
    optional_inputs: ClassVar[frozenset[str]] = frozenset({"reference"})
    output: ClassVar[ArtifactType] = ArtifactType.REPORT
    resources: ClassVar[Resources] = Resources(num_cpus=0)

    def make_scorer(self) -> ToxicityScorer:
        p = self.params
        if p.scorer == "profanity_check":
            return make_scorer("profanity_check")
        return make_scorer("perspective", api_key_env=p.api_key_env, endpoint=p.endpoint,
                           requests_per_second=p.requests_per_second, chunk_size=p.chunk_size,
                           concurrency=p.concurrency, max_retries=p.max_retries, backoff_s=p.backoff_s,
                           timeout_s=p.timeout_s)

    def run(self, inputs: dict[str, Artifact], ctx: RunContext) -> ReportArtifact:
        p = self.params
        seed = ctx.seed if p.seed is None else p.seed
        descriptors = load_descriptors(p.descriptors_path)
        forms = surface_forms(descriptors)
        axes_of = {d.name: d.axes for d in descriptors}
        matcher = DescriptorMatcher(forms)
        scorer = self.make_scorer()  # before the scan: a missing key fails now, not after it

        filings = scan_corpus(inputs["filings"], p.text_key, p.group_key, matcher, p, axes_of, ctx.node_id)
        ctx.event(OP, phase="scanned", corpus="filings", documents=filings.documents,
                  sentences=len(filings.sentences))
        reference = None
        if "reference" in inputs:
            reference = scan_corpus(inputs["reference"], p.reference_text_key, None, matcher, p, axes_of, ctx.node_id)
            ctx.event(OP, phase="scanned", corpus="reference", documents=reference.documents,
                      sentences=len(reference.sentences))

        f_by = filings.by_descriptor()
        r_by = reference.by_descriptor() if reference else {}
        samples: dict[str, tuple[list[str], bool]] = {}
        for name, hashes in f_by.items():
            pool = r_by.get(name, [])
            idx, replaced = sample_indices(len(pool), len(hashes), seed, name)
            samples[name] = ([pool[i] for i in idx], replaced)

        f_hashes = [h for d in f_by for h in f_by[d]]
        r_hashes = sorted({h for drawn, _ in samples.values() for h in drawn})
        f_scores = dict(zip(f_hashes, scorer.score([filings.sentences[h][0] for h in f_hashes])))
        ctx.event(OP, phase="scored", corpus="filings", sentences=len(f_hashes))
        r_scores = dict(zip(r_hashes, scorer.score([reference.sentences[h][0] for h in r_hashes]))) if reference else {}
        ctx.event(OP, phase="scored", corpus="reference", sentences=len(r_hashes))

        per_descriptor, all_f, all_r = [], [], []
        for d in descriptors:
            if d.name not in f_by:
                continue
            fs = [s for h in f_by[d.name] if (s := f_scores[h]) is not None]
            drawn, replaced = samples[d.name]
            rs = [s for h in drawn if (s := r_scores.get(h)) is not None]
            all_f += fs
            all_r += rs
            per_descriptor.append({"descriptor": d.name, "axes": list(d.axes),
                                   "documents": filings.descriptor_documents[d.name],
                                   "reference_pool": len(r_by.get(d.name, [])), "with_replacement": replaced,
                                   "sentences": len(f_by[d.name]), **compare(fs, rs, p.alpha)})
        per_descriptor.sort(key=lambda r: (-r["sentences"], r["descriptor"]))
        compared = [r for r in per_descriptor if r["p"] is not None]
        summary = {
            "overall": compare(all_f, all_r, p.alpha), "compared": len(compared),
            "lower_and_significant": sum(1 for r in compared if r["significant"] and (r["reduction"] or 0) < 0),
            "higher_and_significant": sum(1 for r in compared if r["significant"] and (r["reduction"] or 0) > 0),
            "not_significant": sorted(r["descriptor"] for r in compared if not r["significant"]),
            "descriptors_without_reference": sorted(r["descriptor"] for r in per_descriptor
                                                    if r["reference_pool"] == 0),
        }
        top = {axis: [{"descriptor": r["descriptor"], "sentences": r["sentences"], "documents": r["documents"],
                       "mean_filings": r["mean_filings"], "reduction": r["reduction"]}
                      for r in per_descriptor if axis in r["axes"]][:p.top_k] for axis in AXES}

        def corpus_counts(scan: CorpusScan, scores: dict[str, float | None], sampled: int) -> dict[str, Any]:
            return {"documents": scan.documents, "empty_documents": scan.empty, "words": scan.words,
                    "filings": len(scan.groups) or None, "descriptor_sentences": scan.sentence_mentions,
                    "unique_sentences": len(scan.sentences), "sentences_over_byte_limit": scan.too_long,
                    "sampled": sampled, "scored": sum(1 for v in scores.values() if v is not None)}

        corpora = {"filings": corpus_counts(filings, f_scores, len(f_hashes))}
        axes = {"filings": axis_shares(filings)}
        pronouns = {"filings": pronoun_table(filings)}
        if reference:
            corpora["reference"] = corpus_counts(reference, r_scores, sum(len(s[0]) for s in samples.values()))
            axes["reference"] = axis_shares(reference)
            pronouns["reference"] = pronoun_table(reference)

        out_dir = ctx.path("reports", ctx.node_id, "report.json").parent
        metrics: dict[str, Any] = {
            "scorer": {"name": scorer.name, "description": scorer.description, "skipped": dict(scorer.skipped)},
            "descriptors": {"surface_forms": len(forms), "descriptors": len(descriptors), "axes": list(AXES)},
            "seed": seed, "alpha": p.alpha, "blocks": p.blocks, "corpora": corpora, "summary": summary,
            "per_descriptor": per_descriptor, "axes": axes, "top_descriptors": top, "pronouns": pronouns,
        }
        sentence_tables = [_sentence_table("filings", f_hashes, filings, f_scores)]
        if reference:
            draws = Counter(h for drawn, _ in samples.values() for h in drawn)
            sentence_tables.append(_sentence_table("reference", r_hashes, reference, r_scores, draws))
        pq.write_table(pa.concat_tables(sentence_tables), out_dir / "sentences.parquet")
        (out_dir / "table.md").write_text(markdown(metrics), encoding="utf-8")
        metrics["markdown"] = str(out_dir / "table.md")
        metrics["sentences"] = str(out_dir / "sentences.parquet")
        metrics["figures"] = {"toxicity": figure(metrics, out_dir / "toxicity.png", p.chart_descriptors)}
        ctx.event(OP, phase="done", descriptors=len(per_descriptor), compared=len(compared),
                  lower_and_significant=summary["lower_and_significant"])
        report = ReportArtifact(str(out_dir / "report.json"), metrics)
        report.save()
        return report
