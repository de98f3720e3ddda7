"""The MINT-1T PDF and arXiv pipelines end to end on real inputs (built PDFs, the real arXiv tree)."""

from __future__ import annotations

import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from raypress.dag.runner import run_pipeline

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))

import pdf_fixtures  # noqa: E402  (tests/ is not a package)

def quarantined_rows(run_dir: Path) -> list[dict]:
    """Quarantine is written per node that failed on the row (quarantine/<node>/), each with its own columns."""
    return [row for node in sorted((run_dir / "quarantine").iterdir()) for row in pq.read_table(node).to_pylist()]



def _accounted(nodes: dict, first: str, last: str) -> None:
    """Every row read by ``first`` is in ``last``'s output or was removed by some node."""
    removed = sum(sum(e["dropped"].values()) + e["duplicates"] + e["quarantined"] for e in nodes.values())
    assert nodes[first]["rows_in"] == removed + nodes[last]["rows_out"]


def test_pdf_pipeline_on_built_pdfs(ray_session, tmp_path):
    corpus = pdf_fixtures.build_pdf_corpus(tmp_path / "pdfs")
    run_dir = tmp_path / "run"
    paths = "[" + ",".join(f"'{p}'" for p in corpus.values()) + "]"
    ledger = run_pipeline(str(REPO / "pipelines" / "mint1t_pdf.yaml"), run_dir=str(run_dir),
                          overrides=[f"pdfs.paths={paths}"])
    assert ledger["adds_up"], ledger["problems"]
    nodes = ledger["nodes"]
    assert nodes["pdfs"]["rows_in"] == 4
    assert nodes["pdfs"]["dropped"] == {"too_many_pages": 1}
    assert nodes["pdfs"]["quarantined"] == 1  # the corrupt file, with PyMuPDF's message
    _accounted(nodes, "pdfs", "output")

    quarantine = quarantined_rows(run_dir)
    assert [q["_rp_reason"] for q in quarantine] == ["corrupt_pdf"]
    assert quarantine[0]["id"].endswith("corrupt.pdf")

    from datasets import load_dataset

    out = load_dataset("parquet", data_files=str(run_dir / "output" / "*.parquet"), split="train")
    assert out.num_rows == nodes["output"]["rows_out"] == 2
    docs = {Path(r["id"]).stem: r for r in out}
    two = docs["two_column"]
    text = "\n\n".join(t for t in two["texts"] if t)
    title, left, right = (pdf_fixtures.PARAGRAPHS[k][:40] for k in ("title", "L1", "R1"))
    assert text.index(title) < text.index(left) < text.index(right)  # reading order
    image_ids = [i for i in two["images"] if i]
    assert len(image_ids) == 3 and all(i.startswith("page_") for i in image_ids)
    meta = [m for m in two["image_metadata"] if m]
    assert {(m["width"], m["height"]) for m in meta} == {pdf_fixtures.IMAGE_SIZE}
    assert docs["textless_page"]["pages_without_text"] == 1


def test_arxiv_pipeline_on_the_real_source_tree(ray_session, shared_data, tmp_path):
    tree, tarball = shared_data / "arxiv" / "tex", shared_data / "arxiv" / "tex.tar.gz"
    run_dir = tmp_path / "run"
    ledger = run_pipeline(str(REPO / "pipelines" / "mint1t_arxiv.yaml"), run_dir=str(run_dir),
                          overrides=[f"sources.paths=['{tree}', '{tarball}']"])
    assert ledger["adds_up"], ledger["problems"]
    nodes = ledger["nodes"]
    assert nodes["sources"]["rows_in"] == 2 and nodes["output"]["rows_out"] == 2
    rows = pq.read_table(run_dir / "output").to_pylist()
    by_kind = {("tar" if r["id"].endswith(".tar.gz") else "dir"): r for r in rows}
    assert by_kind["tar"]["texts"] == by_kind["dir"]["texts"]  # same paper either way
    assert by_kind["tar"]["images"] == by_kind["dir"]["images"]
    images = [i for i in by_kind["dir"]["images"] if i]
    assert images and all("not_included" not in i for i in images)
    assert all(b for b, i in zip(by_kind["dir"]["image_bytes"], by_kind["dir"]["images"]) if i)
    text = "\n".join(t for t in by_kind["dir"]["texts"] if t)
    assert "\\begin{document}" not in text and "\\cite" not in text

