"""The MINT-1T HTML pipeline end to end: on the shared sample WARCs as shipped, and on a real
documentation site with real images packaged as a WARC (the Rust book, or Valgrind's manual)."""

from __future__ import annotations

import glob
import io
import json
import tarfile
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from PIL import Image

from raypress.dag.runner import run_pipeline
from raypress.operators.io.warc.site import Site, write_site_warc

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]
PIPELINE = str(REPO / "pipelines" / "mint1t_html.yaml")

# Real HTML + image trees a machine may have installed (first found wins).
REAL_SITES = [
    ("~/.rustup/toolchains/stable-*/share/doc/rust/html/book", "https://doc.rust-lang.org/book/"),
    ("~/.rustup/toolchains/*/share/doc/rust/html/book", "https://doc.rust-lang.org/book/"),
    ("/usr/share/doc/valgrind/html", "https://valgrind.org/docs/manual/"),
]

def quarantined_rows(run_dir: Path) -> list[dict]:
    """Quarantine is written per node that failed on the row (quarantine/<node>/), each with its own columns."""
    return [row for node in sorted((run_dir / "quarantine").iterdir()) for row in pq.read_table(node).to_pylist()]



def real_site() -> Site:
    for pattern, base_url in REAL_SITES:
        found = sorted(glob.glob(str(Path(pattern).expanduser())))
        if found:
            return Site(Path(found[0]), base_url)
    pytest.skip("no real HTML documentation tree with images on this machine")


def _warc_overrides(*paths: Path) -> list[str]:
    listed = "[" + ",".join(f"'{p}'" for p in paths) + "]"
    return [f"warc.paths={listed}", f"images.paths={listed}"]


def test_html_pipeline_on_the_shared_sample_warcs(ray_session, shared_data, tmp_path):
    warcs = sorted((shared_data / "warc").glob("**/*.warc*"))
    run_dir = tmp_path / "run"
    ledger = run_pipeline(PIPELINE, run_dir=str(run_dir), overrides=_warc_overrides(*warcs))
    assert ledger["adds_up"], ledger["problems"]
    nodes = ledger["nodes"]
    # every response/resource record is a row: HTML pages live, the rest filtered, broken ones quarantined
    assert nodes["warc"]["rows_out"] >= 40
    assert nodes["warc"]["quarantined"] >= 1
    assert nodes["warc"]["dropped"].get("not_html", 0) >= 1
    # the Common Crawl / ClueWeb excerpts are mostly not English: the language rule names itself
    assert nodes["language"]["dropped"].get("language != en", 0) >= 20
    assert nodes["warc"]["rows_in"] == nodes["images"]["rows_in"]  # the same records, read twice
    removed = sum(sum(nodes[n]["dropped"].values()) + nodes[n]["duplicates"] + nodes[n]["quarantined"]
                  for n in nodes if n != "images")
    assert nodes["warc"]["rows_in"] == removed + nodes["output"]["rows_out"]
    quarantine = quarantined_rows(run_dir)
    assert all(q["_rp_reason"] and q["_rp_detail"] for q in quarantine)
    assert any("bad/" in q["id"] for q in quarantine)


def test_html_pipeline_on_a_real_site_with_images(ray_session, tmp_path):
    warc = write_site_warc([real_site()], tmp_path / "site.warc.gz")
    assert warc.pages >= 20 and warc.images >= 2
    run_dir = tmp_path / "run"
    ledger = run_pipeline(PIPELINE, run_dir=str(run_dir), overrides=_warc_overrides(warc.path))
    assert ledger["adds_up"], ledger["problems"]
    nodes = ledger["nodes"]
    assert nodes["warc"]["rows_out"] == warc.pages and nodes["images"]["rows_out"] == warc.images
    assert sum(nodes["image_count"]["dropped"].values()) > 0  # pages without a usable image
    kept = nodes["output"]["rows_out"]
    assert kept >= 1

    from datasets import load_dataset

    docs = load_dataset("parquet", data_files=str(run_dir / "output" / "*.parquet"), split="train")
    assert docs.num_rows == kept
    for doc in docs:
        assert all((t is None) != (i is None) for t, i in zip(doc["texts"], doc["images"]))
        for ref, data, meta in zip(doc["images"], doc["image_bytes"], doc["image_metadata"]):
            if ref is None:
                continue
            assert ref.startswith("http") and data
            width, height = Image.open(io.BytesIO(data)).size
            assert (meta["width"], meta["height"]) == (width, height)
            assert min(width, height) >= 150 and max(width, height) / min(width, height) <= 2
        assert doc["stats"]["language_id_whole_page_fasttext"] >= 0.65

    shards = sorted((run_dir / "webdataset").glob("*.tar"))
    samples: dict[str, dict] = {}
    for shard in shards:
        with tarfile.open(shard) as tar:
            for member in tar.getmembers():
                key, _, suffix = member.name.partition(".")
                samples.setdefault(key, {})[suffix] = tar.extractfile(member).read()
    assert len(samples) == kept
    for sample in samples.values():
        meta = json.loads(sample["json"])
        members = [m for m in meta["image_members"] if m]
        assert members and all(m.split(".", 1)[1] in sample for m in members)


def test_the_one_setting_override_keeps_documents_with_images(ray_session, tmp_path):
    """`--set warc.paths=...` alone: the images come from the same WARC (`images` reads
    `${warc.paths}`), so a real English crawl keeps illustrated documents and nothing warns."""
    warc = REPO / "samples" / "warc_en" / "gimp-help-en-sample.warc.gz"
    ledger = run_pipeline(PIPELINE, run_dir=str(tmp_path / "run"), overrides=[f"warc.paths=['{warc}']"])
    assert ledger["adds_up"], ledger["problems"]
    nodes = ledger["nodes"]
    assert nodes["images"]["rows_out"] >= 50 and nodes["attach"]["counts"]["images_attached"] >= 40
    assert nodes["output"]["rows_out"] >= 20
    assert not ledger.get("warnings")


def test_a_run_that_attaches_no_images_warns(ray_session, tmp_path):
    """Pages from one crawl, images from another: every image is lost and every page dropped by
    image_count. The ledger still adds up, so the CLI, events and ledger say what went wrong."""
    pages = REPO / "samples" / "warc_en" / "gimp-help-en-sample.warc.gz"
    other = REPO / "samples" / "warc" / "warcio" / "example.warc.gz"
    run_dir = tmp_path / "run"
    ledger = run_pipeline(PIPELINE, run_dir=str(run_dir),
                          overrides=[f"warc.paths=['{pages}']", f"images.paths=['{other}']"])
    assert ledger["adds_up"], ledger["problems"]
    warnings = ledger["warnings"]
    assert any(w.startswith("attach: attached 0 of the ") for w in warnings), warnings
    assert any(w.startswith("image_count: dropped all ") for w in warnings), warnings
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    assert {e["node"] for e in events if e["event"] == "warning"} >= {"attach", "image_count"}


def real_crawl() -> Path:
    """The 685-page GIMP crawl of `../shared/tools/make_real_corpora.sh`: from $RAYPRESS_REAL_CORPORA,
    else bench/.corpora (the benchmarks' cache), built there when missing (apt downloads of Debian
    documentation packages; ~10 s with a warm apt cache); skips when it cannot be built."""
    import os
    import subprocess

    repo = Path(__file__).resolve().parents[2]
    root = Path(os.environ.get("RAYPRESS_REAL_CORPORA") or repo / "bench" / ".corpora")
    warc = root / "warc" / "gimp-help-en.warc.gz"
    if warc.is_file():
        return warc
    tool = repo.parent / "shared" / "tools" / "make_real_corpora.sh"
    if not tool.is_file():
        pytest.skip(f"{tool} not found: the real crawl cannot be built")
    try:
        done = subprocess.run(["bash", str(tool), str(root)], capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        pytest.skip("make_real_corpora.sh ran over 5 minutes (no package archive reachable?)")
    if done.returncode != 0 or not warc.is_file():
        pytest.skip(f"make_real_corpora.sh could not build the crawl: {done.stderr.strip()[-300:]}")
    return warc


def test_the_one_setting_override_on_the_full_real_crawl(ray_session, tmp_path):
    """The documented one-setting override on a real crawl with images (685 GIMP-manual pages, 1,963
    images) keeps illustrated documents and warns about nothing."""
    warc = real_crawl()
    ledger = run_pipeline(PIPELINE, run_dir=str(tmp_path / "run"), overrides=[f"warc.paths=['{warc}']"])
    assert ledger["adds_up"], ledger["problems"]
    assert ledger["nodes"]["output"]["rows_out"] >= 100 and not ledger.get("warnings")
    assert ledger["nodes"]["attach"]["counts"]["images_attached"] >= 1000
