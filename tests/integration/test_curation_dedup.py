"""bff_dedup and image_hash_dedup on Ray: global, deterministic, tombstones passed through."""

from __future__ import annotations

import hashlib
import json
import random

import pyarrow as pa
import pytest

from raypress.operators.base import RunContext
from raypress.operators.shared.documents import Document, documents_to_table
from raypress.operators.dedup.bff_dedup import BffDedup, BffParams, bff_documents
from raypress.operators.dedup.bff.ngrams import hash_documents
from raypress.operators.dedup.bff.bloom import BloomFilter, optimal_num_bits, optimal_num_hashes
from raypress.operators.dedup.image_hash_dedup import (
    ImageHashDedup,
    ImageHashParams,
    count_block,
    edit_block,
    frequent_in,
    image_hashes,
    split_counts,
)
from raypress.schema import DETAIL_COL, KIND_COL, NODE_COL, REASON_COL, TombstoneKind, with_tombstones

pytestmark = pytest.mark.integration

VOCAB = [f"v{i}" for i in range(3000)]


def _words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(VOCAB) for _ in range(n))


def _corpus() -> list[Document]:
    rng = random.Random(5)
    shared = [_words(rng, rng.randint(8, 40)) for _ in range(12)]
    docs = []
    for i in range(48):
        pars = [rng.choice(shared) if rng.random() < 0.5 else _words(rng, rng.randint(5, 40))
                for _ in range(rng.randint(1, 5))]
        d = Document(f"doc{i:02d}", f"https://example.org/{i}", "html")
        d.add_text("\n".join(pars[:2]))
        if i % 3 == 0:
            d.add_image(f"https://example.org/{i}.png", b"img", {"sha256": "00" * 32})
        d.add_text("\n".join(pars[2:]) or "caption")
        docs.append(d)
    docs.append(Document("doc90", None, "html", list(docs[4].texts), list(docs[4].images),
                         list(docs[4].image_bytes), list(docs[4].image_metadata)))  # a whole copy
    return docs


def _table(docs: list[Document], dead_text: str) -> pa.Table:
    live = documents_to_table(docs)
    dead = Document("doc00-dead", None, "html")  # smallest id: would win if tombstones counted
    dead.add_text(dead_text)
    dead_t = with_tombstones(documents_to_table([dead]), "upstream", TombstoneKind.FILTERED, ["words < min"], ["{}"])
    return pa.concat_tables([dead_t, live], promote_options="default")


def _run_bff(table: pa.Table, blocks: int, seed: int, events: list, **params):
    import ray

    rows = list(range(table.num_rows))
    random.Random(seed).shuffle(rows)  # input row order must not matter: the order is by id
    shuffled = table.take(pa.array(rows))
    step = -(-shuffled.num_rows // blocks)
    ds = ray.data.from_arrow([shuffled.slice(i, step) for i in range(0, shuffled.num_rows, step)])
    ctx = RunContext(run_dir="/tmp", node_id="bff", emit=events.append)
    out = BffDedup(BffParams(**params)).apply(ds, ctx)
    return {r["id"]: r for r in out.take_all()}


def test_bff_same_result_for_any_blocks_and_shards_and_equal_to_sequential_bff(ray_session):
    docs = _corpus()
    table = _table(docs, dead_text=docs[1].texts[0])
    ev1, ev4 = [], []
    one = _run_bff(table, 1, 0, ev1, num_shards=1)
    four = _run_bff(table, 4, 1, ev4, num_shards=2, batch_docs=5, merge_bytes=4000)  # several key ranges
    assert one == four
    assert len(one) == table.num_rows

    # the same as the pure function over the documents in id order, with the filter it sized
    total = hash_documents([d.texts for d in docs], [d.id for d in docs], 13, 13).num_ngrams
    m = optimal_num_bits(total, 0.01)
    kept, removed = bff_documents(sorted(docs, key=lambda d: d.id), BloomFilter(m, optimal_num_hashes(m, total)))
    dups = {r["id"] for r in one.values() if r[KIND_COL] == TombstoneKind.DUPLICATE.value}
    assert dups == {d.id for d, _ in removed} and "doc90" in dups
    for d, verdict in kept:
        assert one[d.id]["texts"] == d.texts and one[d.id]["images"] == d.images
        assert one[d.id]["bff_removed_paragraphs"] == len(verdict.removed)
    assert sum(len(v.removed) for _, v in kept) > 0
    row = one["doc90"]
    assert row[NODE_COL] == "bff" and row[REASON_COL] == "bff_seen_ngrams"
    assert json.loads(row[DETAIL_COL])["contained_fraction"] == 1.0
    assert row["texts"] == docs[4].texts  # a removed document keeps its content for rejects/

    dead = one["doc00-dead"]  # passed through untouched, and did not count as seen
    assert (dead[NODE_COL], dead[REASON_COL], dead["bff_removed_paragraphs"]) == ("upstream", "words < min", None)
    assert one["doc01"][NODE_COL] is None and one["doc01"]["bff_removed_paragraphs"] == 0

    (event,) = [e for e in ev1 if e["event"] == "bff"]
    assert event["ngrams"] == total and event["bits"] == m and 0 < event["fill_ratio"] < 1
    assert event["duplicates"] == len(removed) and [e["shards"] for e in ev4 if e["event"] == "bff"] == [2]


def test_bff_order_by_column_decides_which_copy_wins(ray_session):
    import ray

    text = _words(random.Random(9), 40)
    docs = [Document(i, None, "html", [text], [None], [None], [None]) for i in ("a", "b", "c")]
    table = documents_to_table(docs).append_column("crawl_rank", pa.array([3, 1, 2]))
    ds = ray.data.from_arrow([table.slice(0, 1), table.slice(1)])
    out = BffDedup(BffParams(order_by="crawl_rank")).apply(ds, RunContext(run_dir="/tmp", node_id="bff"))
    alive = {r["id"] for r in out.take_all() if r[NODE_COL] is None}
    assert alive == {"b"}  # first by crawl_rank, although "a" has the smallest id


def _image_doc(doc_id: str, shas: list[str | None], data: list[bytes] | None = None) -> Document:
    d = Document(doc_id, None, "html")
    d.add_text(f"text of {doc_id}")
    for j, sha in enumerate(shas):
        blob = data[j] if data else sha.encode()
        d.add_image(f"https://img/{doc_id}/{j}.jpg", blob, {"sha256": sha, "width": 200, "height": 200})
    return d


def test_image_hash_dedup(ray_session):
    import ray

    logo, photo = "aa" * 32, "bb" * 32
    docs = [_image_doc(f"L{i:02d}", [logo, f"{i:064x}"]) for i in range(11)]  # logo in 11 documents
    docs += [_image_doc(f"P{i:02d}", [photo]) for i in range(9)]
    docs.append(_image_doc("P09", [photo, "cc" * 32, photo]))  # 10th document; copy within it
    raw = b"\x89PNG raw bytes"
    docs.append(_image_doc("R", [None, None], data=[raw, raw]))  # sha256 computed from the bytes
    dead = with_tombstones(documents_to_table([_image_doc("X", [photo])]), "upstream", TombstoneKind.FILTERED,
                           ["r"], [None])  # an 11th photo, but a tombstone: not counted
    table = pa.concat_tables([documents_to_table(docs), dead], promote_options="default")
    ds = ray.data.from_arrow([table.slice(0, 9), table.slice(9, 9), table.slice(18)])
    events = []
    op = ImageHashDedup(ImageHashParams(num_partitions=2))
    out = {r["id"]: r for r in op.apply(ds, RunContext(run_dir="/tmp", node_id="img", emit=events.append)).take_all()}

    assert len(out) == table.num_rows and all(out[d.id][NODE_COL] is None for d in docs)  # none dropped
    for i in range(11):
        row = out[f"L{i:02d}"]
        assert [m["sha256"] for m in row["image_metadata"] if m] == [f"{i:064x}"]
        assert row["images_removed_dedup"] == 1 and row["texts"] == [f"text of L{i:02d}", None]
    for i in range(9):
        assert out[f"P{i:02d}"]["images_removed_dedup"] == 0
        assert out[f"P{i:02d}"]["images"] == [None, f"https://img/P{i:02d}/0.jpg"]
    p9 = out["P09"]
    assert p9["images"] == [None, "https://img/P09/0.jpg", "https://img/P09/1.jpg"]
    assert p9["images_removed_dedup"] == 1 and len(p9["image_bytes"]) == len(p9["image_metadata"]) == 3
    assert out["R"]["images_removed_dedup"] == 1 and out["R"]["image_bytes"] == [None, raw]
    assert out["X"][REASON_COL] == "r" and out["X"]["images_removed_dedup"] is None
    assert [e["frequent_images"] for e in events] == [1]


# -- image_hash_dedup's pieces, without Ray ---------------------------------------------------


def test_image_hashes_from_metadata_or_bytes():
    raw = b"not even an image"
    d = Document("d", None, "html")
    d.add_text("t")
    d.add_image("u1", raw, {"sha256": "AB" * 32})  # recorded sha wins, normalised to lower case
    d.add_image("u2", raw, None)  # no metadata: computed from the bytes
    d.add_image("u3", None, {"width": 10})  # neither sha nor bytes: cannot be compared
    (shas,) = image_hashes(documents_to_table([d]))
    assert shas == [None, "ab" * 32, hashlib.sha256(raw).hexdigest(), None]


def test_counts_boundary_and_partitions():
    a, b = "aa" * 32, "bb" * 32
    blocks = [pa.table({"sha256": [a, b], "documents": [6, 4]}), pa.table({"sha256": [a, b], "documents": [5, 6]})]
    assert sorted(frequent_in(10, *blocks)) == [a]  # 11 documents > 10; 10 documents kept
    assert frequent_in(11, *blocks) == []
    parts = [split_counts(t, 3) for t in blocks]
    found = [sha for i in range(3) for sha in frequent_in(9, *[p[i] for p in parts])]
    assert sorted(found) == [a, b]
    assert sum(p.num_rows for p in parts[0]) == 2


def test_edit_block_empty_and_tombstones_untouched():
    empty = edit_block(pa.table({"id": pa.array([], pa.string())}), frozenset({"x"}))
    assert empty.column_names == ["id", "images_removed_dedup"] and empty.num_rows == 0
    logo = "cc" * 32
    live, dead = _image_doc("live", [logo, logo]), _image_doc("dead", [logo])
    table = pa.concat_tables([
        documents_to_table([live]),
        with_tombstones(documents_to_table([dead]), "f", TombstoneKind.FILTERED, ["r"], [None]),
    ], promote_options="default")
    out = edit_block(table, frozenset()).to_pylist()
    assert out[0]["images"] == [None, "https://img/live/0.jpg"] and out[0]["images_removed_dedup"] == 1
    assert out[1]["images"] == [None, "https://img/dead/0.jpg"] and out[1]["images_removed_dedup"] is None
    assert count_block(table).to_pylist() == [{"sha256": logo, "documents": 1}]  # once per live document
