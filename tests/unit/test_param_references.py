"""A param that names another node's param (`"${warc.paths}"`): one `--set` feeds both nodes."""

from __future__ import annotations

import textwrap

from raypress.dag.spec import read_spec

PIPELINE = textwrap.dedent("""\
    name: refs
    nodes:
      - id: warc
        op: read_warc
        with: {paths: ["a.warc.gz"], content: html}
      - id: images
        op: read_warc
        with: {paths: "${warc.paths}", content: images}
    """)


def params(tmp_path, text=PIPELINE, overrides=()):
    path = tmp_path / "p.yaml"
    path.write_text(text)
    spec = read_spec(path, list(overrides))
    return {n.id: n.params for n in spec.nodes}, spec.problems


def test_a_reference_takes_the_value_after_overrides(tmp_path):
    p, problems = params(tmp_path)
    assert not problems and p["images"]["paths"] == ["a.warc.gz"]
    p, _ = params(tmp_path, overrides=["warc.paths=[crawl.warc.gz]"])
    assert p["images"]["paths"] == p["warc"]["paths"] == ["crawl.warc.gz"]
    p, _ = params(tmp_path, overrides=["warc.paths=[crawl.warc.gz]", "images.paths=[img.warc]"])
    assert p["images"]["paths"] == ["img.warc"]  # setting the referring param itself wins


def test_bad_references_are_problems_on_their_line(tmp_path):
    _, problems = params(tmp_path, PIPELINE.replace("${warc.paths}", "${wark.paths}"))
    assert len(problems) == 1 and problems[0].line == 8 and "no node 'wark'" in problems[0].message
    _, problems = params(tmp_path, PIPELINE.replace("${warc.paths}", "${warc.limit}"))
    assert "sets no param 'limit'" in problems[0].message
