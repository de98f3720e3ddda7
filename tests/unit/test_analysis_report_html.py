"""report.html from analysis.json: one self-contained page that parses, loads nothing from the network,
escapes the data's texts and draws one chart element per number it stands for."""

from __future__ import annotations

import copy
import json
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from raypress.dag.analyze.report_html import render
from raypress.dag.analyze.report_svg import ZERO_W, XScale, fmt_num, fmt_pct

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "analysis_sample.json"
EVIL = '<script>alert("x")</script> see https://evil.example/a.js'


class Page(HTMLParser):
    """Every element with its attributes, and each SVG's elements grouped under it."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str]]] = []
        self.svgs: list[dict[str, Any]] = []
        self.open: list[str] = []
        self.scripts: list[str] = []
        self._in_script = False
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        self.elements.append((tag, a))
        if tag == "svg":
            self.svgs.append({"class": a.get("class", ""), "width": a.get("width"), "children": []})
        elif self.svgs and "svg" in self.open:
            self.svgs[-1]["children"].append((tag, a))
        self._in_script = tag == "script"
        if tag not in ("meta", "br", "hr", "img", "input", "link", "line", "rect", "path", "polyline"):
            self.open.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        if self.open and self.open[-1] == tag:
            self.open.pop()

    def handle_endtag(self, tag: str) -> None:
        if tag in self.open:  # close it and every element left open inside it
            del self.open[len(self.open) - 1 - self.open[::-1].index(tag):]
        self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.scripts.append(data)

    def charts(self, cls: str) -> list[dict[str, Any]]:
        return [s for s in self.svgs if cls in s["class"].split()]


def count(svg: dict[str, Any], tag: str, cls: str) -> int:
    return sum(1 for t, a in svg["children"] if t == tag and cls in a.get("class", "").split())


@pytest.fixture()
def sample() -> dict[str, Any]:
    return json.loads(SAMPLE.read_text())


def test_page_is_one_offline_document(sample: dict[str, Any]) -> None:
    sample["outputs"][0]["stats"][0]["nearest"][0]["kept"][0]["text"] = EVIL
    text = render(sample)
    page = Page(text)
    assert text.startswith("<!DOCTYPE html>") and text.rstrip().endswith("</html>")
    tags = [t for t, _ in page.elements]
    assert tags.count("html") == tags.count("body") == tags.count("head") == 1
    for tag, attrs in page.elements:
        assert tag not in ("link", "img", "iframe", "object", "embed"), tag
        for name in ("src", "href", "action", "xlink:href", "data"):
            value = attrs.get(name, "")
            assert not value.lower().startswith(("http:", "https:", "//")), (tag, name, value)
            assert not value or value.startswith("#"), (tag, name, value)  # in-page links only
    assert "@import" not in text and "url(" not in text
    assert "http://" not in text  # not even an xmlns: inline SVG in HTML needs none
    assert "https://evil.example/a.js" in text  # the data's mention, as text


def test_texts_from_the_data_are_escaped(sample: dict[str, Any]) -> None:
    out = sample["outputs"][0]
    out["stats"][0]["nearest"][0]["kept"][0]["text"] = EVIL
    out["stats"][0]["nearest"][0]["dropped"][0]["id"] = '"><img src=x onerror=alert(1)>'
    out["slices"][0]["values"][0]["value"] = EVIL
    out["overlap"]["nodes"][0] = "<b>bold</b>"
    sample["dedup"][0]["samples"][0]["duplicate_text"] = EVIL
    sample["pipeline"] = "<script>x</script>"
    text = render(sample)
    page = Page(text)
    assert [t for t, _ in page.elements].count("script") == 1  # the page's own, at the end
    assert not any(t == "img" for t, _ in page.elements)
    assert "alert" not in "".join(page.scripts)
    assert text.count("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;") >= 3
    assert "&lt;b&gt;bold&lt;/b&gt;" in text


def test_one_histogram_per_stat_with_a_bar_per_count(sample: dict[str, Any]) -> None:
    stats = sample["outputs"][0]["stats"]
    page = Page(render(sample))
    hists = page.charts("hist")
    assert len(hists) == len(stats)
    for svg, stat in zip(hists, stats):
        assert count(svg, "rect", "bar") == len(stat["histogram"]["counts"]), stat["stat"]
        assert count(svg, "g", "thr") == len(stat["thresholds"])
        assert int(svg["width"]) >= 400


def test_log_histogram_keeps_zero_in_its_own_bin(sample: dict[str, Any]) -> None:
    stat = sample["outputs"][0]["stats"][0]
    assert stat["histogram"]["scale"] == "log" and stat["histogram"]["edges"][0] == 0
    svg = Page(render(sample)).charts("hist")[0]
    bars = [a for t, a in svg["children"] if t == "rect" and a.get("class") == "bar"]
    first = float(bars[0]["x"]), float(bars[0]["width"])
    assert first[1] <= ZERO_W  # the zero bin: a fixed narrow bar at the left, not a log stretch to -inf
    assert all(float(b["x"]) >= first[0] + first[1] for b in bars[1:])

    xs = XScale([0.0, 1.0, 10.0, 100.0], True, 50, 500)
    assert xs.zero and xs.log and xs(0) == 50 and xs(1) == 50 + ZERO_W and xs(100) == 500
    assert abs(xs(10) - (50 + ZERO_W + (500 - 50 - ZERO_W) / 2)) < 1e-9
    assert [label for _, label, shown in xs.ticks() if shown][:3] == ["0", "1", "2"]


def test_sensitivity_draws_rows_and_tokens_lines(sample: dict[str, Any]) -> None:
    stats = sample["outputs"][0]["stats"]
    lines = Page(render(sample)).charts("line")
    assert len(lines) == sum(len(s["sensitivity"]) for s in stats)
    for svg in lines:
        assert count(svg, "polyline", "line") == 4
        assert count(svg, "polyline", "tok") == 2
        assert count(svg, "g", "thr") == 1  # the current threshold


def test_overlap_matrix_has_n_by_n_cells(sample: dict[str, Any]) -> None:
    overlap = sample["outputs"][0]["overlap"]
    n = len(overlap["nodes"])
    text = render(sample)
    (svg,) = Page(text).charts("overlap")
    assert count(svg, "rect", "cell") == n * n
    assert count(svg, "rect", "diag") == n
    assert "Most covered filters" in text


def test_sections_come_in_order_and_numbers_read_well(sample: dict[str, Any]) -> None:
    text = render(sample)
    ids = ["o0-funnel", "o0-filters", "o0-overlap", "o0-stats", "o0-slices", "dedup"]
    at = [text.index(f'<section id="{i}"') for i in ids]
    assert at == sorted(at)
    assert "234,480" in text and "22.7%" in text  # tokens analyzed, rows dropped by any filter
    assert "ledger adds up" in text and "run: succeeded" in text
    assert "rank error ±1.3%" in text
    # the one slice key has a value per row: collapsed, with the reason
    assert "not informative: about one value per row" in text


def test_an_empty_analysis_renders() -> None:
    for analysis in ({}, {"schema": "raypress.analysis/1", "outputs": [], "dedup": [], "notes": ["x: no output"]}):
        text = render(analysis)
        page = Page(text)
        assert not page.svgs
        assert "No output was analyzed" in text and "No deduplicator" in text


def test_an_output_with_no_filters_and_a_stat_with_no_thresholds() -> None:
    stat = {"stat": "lang_score", "node": None, "op": None, "count": 3, "nulls": 1, "mean": 0.5, "std": None,
            "min": 0.2, "max": 0.9, "quantiles": {"p50": 0.4},
            "histogram": {"scale": "linear", "edges": [None, 0.5, 1.0], "counts": [1, 2]},
            "thresholds": [], "suggestions": [], "sensitivity": [], "nearest": []}
    out = {"writer": "out", "rows": 3, "tokens": None, "filters": [],
           "overlap": {"nodes": [], "rows": [], "tokens": []},
           "dropped_any": 0, "dropped_any_tokens": 0.0, "stats": [stat], "funnel": [], "slices": []}
    text = render({"outputs": [out], "dedup": [{"node": "dd", "op": "x", "duplicates": 0, "clusters": 0,
                                                "cluster_sizes": [], "samples": []}], "ledger": None})
    page = Page(text)
    assert "No filter is upstream" in text and "No threshold" in text and "No duplicates found" in text
    (hist,) = page.charts("hist")
    assert count(hist, "rect", "bar") == 2
    assert not page.charts("overlap") and not page.charts("line")


def test_a_filter_whose_stat_no_row_carried_is_flagged(sample: dict[str, Any]) -> None:
    sample["outputs"][0]["filters"][1]["stats_missing"] = ["alnum_ratio"]
    text = render(sample)
    assert "No row carried the stat of" in text and "⚠ alnum_ratio" in text


def test_numbers_for_people() -> None:
    assert fmt_num(1234) == "1,234" and fmt_num(234480.0) == "234,480" and fmt_num(958.7725) == "958.8"
    assert fmt_num(0.0153) == "0.0153" and fmt_num(1733.957) == "1,734" and fmt_num(None) == "–"
    assert fmt_num(0.000012345) == "1.234e-5" and fmt_num(2.5e12 + 0.5) == "2.5e+12"
    assert fmt_pct(12.345) == "12.3%" and fmt_pct(100) == "100%" and fmt_pct(0.04) == "<0.1%"
    assert fmt_pct(None) == "–"


def test_two_outputs_get_their_own_sections(sample: dict[str, Any]) -> None:
    sample["outputs"].append(copy.deepcopy(sample["outputs"][0]))
    sample["outputs"][1]["writer"] = "second"
    text = render(sample)
    assert '<section id="o1-stats"' in text and "Stats — second" in text
    assert len(Page(text).charts("hist")) == 2 * len(sample["outputs"][0]["stats"])
