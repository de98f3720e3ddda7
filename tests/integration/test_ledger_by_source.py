"""Several sources in one run (settings.source_key): tagged, unioned, deduplicated across sources; the
ledger counts every node per source, attributes each cross-source duplicate to the source that lost
it, and adds up per source across edges, on real Ray."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from raypress.dag.runner import run_pipeline

pytestmark = pytest.mark.integration

WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi".split()


def _text(i: int, salt: str) -> str:
    return " ".join([f"{salt}{i}"] + [WORDS[(i * 3 + j) % len(WORDS)] for j in range(12)])


def write_sources(tmp_path: Path) -> None:
    web = [{"id": f"p{i}", "text": _text(i, "web")} for i in range(20)]
    sec = [{"id": f"p{i}", "text": _text(i, "sec")} for i in range(15)]  # the same ids as the web's: prefixed apart
    sec += [{"id": "copy-a", "text": web[3]["text"]}, {"id": "copy-b", "text": web[4]["text"]}]  # web's pages, copied
    sec += [{"id": "short", "text": "too short"}]
    web += [{"id": "twice", "text": web[5]["text"]}]  # a duplicate within the web source
    for name, rows in (("web", web), ("sec", sec)):
        with open(tmp_path / f"{name}.jsonl", "w") as fh:
            fh.writelines(json.dumps(r) + "\n" for r in rows)


def pipeline(tmp_path: Path) -> Path:
    path = tmp_path / "p.yaml"
    path.write_text(textwrap.dedent(f"""\
        name: by-source
        settings: {{source_key: corpus}}
        nodes:
          - id: web_read
            op: read_jsonl
            with: {{paths: ["{tmp_path}/web.jsonl"]}}
          - id: web
            op: tag_source_mapper
            input: web_read
            with: {{source: web}}
          - id: sec_read
            op: read_jsonl
            with: {{paths: ["{tmp_path}/sec.jsonl"]}}
          - id: sec
            op: tag_source_mapper
            input: sec_read
            with: {{source: sec}}
          - id: sec_words
            op: words_num_filter
            input: sec
            with: {{min_num: 5}}
          - id: union_words
            op: words_num_filter
            input: [web, sec_words]
            with: {{min_num: 3}}
          - id: exact
            op: document_deduplicator
            input: union_words
          - id: out
            op: write_jsonl
            input: exact
            with: {{path: "{tmp_path}/out.jsonl"}}
        """))
    return path


def test_cross_source_duplicates_are_removed_once_and_attributed(ray_session, tmp_path):
    write_sources(tmp_path)
    ledger = run_pipeline(str(pipeline(tmp_path)), run_dir=str(tmp_path / "run"))
    assert ledger["adds_up"], ledger["problems"]
    nodes = ledger["nodes"]
    union = nodes["union_words"]["by_source"]
    assert union == {src: {"rows_in": n, "rows_out": n, "dropped": {}, "duplicates": 0, "lost_to": {}, "quarantined": 0}
                     for src, n in (("web", 21), ("sec", 17))}
    exact = nodes["exact"]["by_source"]
    # the lower id keeps: web's two pages lost to sec's copies of them ("sec/copy-a" < "web/p3"),
    # web's in-source copy to its own original
    assert exact["web"]["lost_to"] == {"sec": 2, "web": 1} and exact["sec"]["lost_to"] == {}
    assert exact["web"]["rows_out"] == 18 and exact["sec"]["rows_out"] == 17
    assert nodes["sec_words"]["by_source"] == {"sec": {
        "rows_in": 18, "rows_out": 17, "dropped": {"num_words < min": 1}, "duplicates": 0, "lost_to": {},
        "quarantined": 0}}
    out = [json.loads(line) for line in open(tmp_path / "out.jsonl")]
    assert len(out) == 35 and len({r["id"] for r in out}) == 35
    assert {r["corpus"] for r in out} == {"web", "sec"}
    assert all(r["id"].startswith(r["corpus"] + "/") for r in out)
