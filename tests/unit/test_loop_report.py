"""The loop report's sections from ledger entries and stage Reports, and the report's links."""

from __future__ import annotations

import json
from pathlib import Path

from raypress.artifacts import ModelArtifact, ReportArtifact
from raypress.operators.base import RunContext
from raypress.operators.general.loop_report import LoopReport, LoopReportParams
from raypress.operators.general.loop.sections import search_section, sources_section, tokens_section


def _split(rows_in: int, rows_out: int, dropped: dict | None = None, lost_to: dict | None = None) -> dict:
    return {"rows_in": rows_in, "rows_out": rows_out, "dropped": dropped or {},
            "duplicates": sum((lost_to or {}).values()), "lost_to": lost_to or {}, "quarantined": 0}


LEDGER = {
    "warc": {"op": "read_warc", "by_source": {"(none)": _split(10, 0, {"not_html": 10}), "web": _split(40, 40)}},
    "web_quality": {"op": "refinedweb_gopher_quality_filter", "by_source": {"web": _split(40, 35, {"gopher": 5})}},
    "dump": {"op": "tag_source_mapper", "by_source": {"dump": _split(685, 685)}},
    "near": {"op": "document_minhash_deduplicator",
             "by_source": {"web": _split(35, 18, lost_to={"dump": 17}), "dump": _split(685, 684, lost_to={"dump": 1})}},
    "validation": {"op": "hash_split_filter", "by_source": {"dump": _split(684, 68, {"not_sampled": 616})}},
    "search": {"op": "comcts_search", "counts": {"calls.served": 40, "served_requests.served": 40, "calls.arith": 90,
                                                 "failed_calls.served": 0}},
}


GRAPH = {"web_quality": ["warc"], "near": ["web_quality", "dump"], "validation": ["near"]}


def test_sources_say_what_each_rule_removed_and_who_kept_a_cross_source_duplicate() -> None:
    s = sources_section(LEDGER, GRAPH, "near")
    assert set(s) == {"web", "dump"}  # the reader's untagged rows are web's: its branch tags only web
    assert s["web"]["rows_read"] == 50 and s["web"]["rows_kept"] == 18
    assert s["web"]["removed"] == [{"node": "warc", "op": "read_warc", "rule": "not_html", "rows": 10},
                                   {"node": "web_quality", "op": "refinedweb_gopher_quality_filter", "rule": "gopher",
                                    "rows": 5}]
    assert s["web"]["duplicates_across_sources"] == 17 and s["dump"]["duplicates_within"] == 1
    assert s["web"]["adds_up"] and s["dump"]["adds_up"]
    broken = json.loads(json.dumps(LEDGER))
    broken["near"]["by_source"]["web"]["rows_out"] = 19
    assert not sources_section(broken, GRAPH, "near")["web"]["adds_up"]
    assert sources_section(LEDGER, GRAPH, None)["dump"]["rows_kept"] == 68  # the last node: the split


def test_tokens_per_source_and_search_calls_on_both_sides() -> None:
    t = tokens_section({"train": [{"corpus": "web", "n_token": 10}, {"corpus": "sec", "n_token": 5},
                                  {"corpus": "web", "n_token": 1}]}, "corpus", "n_token")
    assert t["train"] == {"by_source": {"sec": {"rows": 1, "tokens": 5}, "web": {"rows": 2, "tokens": 11}},
                          "rows": 3, "tokens": 16}
    s = search_section({"table": []}, LEDGER["search"]["counts"])
    assert s["calls"] == {"served": 40, "arith": 90} and s["served_calls_match"] == {"served": True}


def test_the_report_links_resolve_and_name_the_missing(tmp_path: Path) -> None:
    model_dir = tmp_path / "models" / "model"
    model_dir.mkdir(parents=True)
    model = ModelArtifact(str(model_dir), config={
        "training": {"steps": 20, "tokens": 4096, "initial_loss": 7.5, "final_loss": 5.0},
        "history": [{"step": 1, "loss": 7.5}, {"step": 10, "loss": 6.0}, {"step": 20, "loss": 5.0}]})
    search = ReportArtifact(str(tmp_path / "reports" / "report" / "report.json"), {
        "table": [{"run": "comcts", "method": "comcts", "policies": ["arith", "served"], "questions": 10,
                   "solved": 4, "success_rate": 0.4, "ci95": [0.1, 0.7], "calls_mean": 12.0}],
        "claims": [{"claim": "SFT on search paths beats no SFT", "better": "eval:after", "other": "eval:before",
                    "paired": 30, "better_rate": 0.2, "other_rate": 0.0, "difference": 0.2, "ci95": [0.07, 0.33],
                    "verdict": "holds"}],
        "markdown": str(tmp_path / "gone.md")})
    search.save()
    (tmp_path / "ledger.json").write_text("{}")
    (tmp_path / "events.jsonl").write_text("")
    ctx = RunContext(run_dir=str(tmp_path), node_id="loop", settings={"source_key": "corpus"}, ledger=lambda: LEDGER,
                     data_inputs=GRAPH)
    report = LoopReport(LoopReportParams(curated="near")).run({"model": model, "search": search}, ctx)
    m = report.metrics
    assert m["training"]["curve"][-1] == {"step": 20, "loss": 5.0}
    assert m["search"]["calls"]["served"] == 40
    assert m["sft"]["claims"][0]["verdict"] == "holds"
    assert m["links_resolve"] == {"ledger": True, "events": True, "model": True, "loss_curve": True,
                                  "search_report": True, "search_table": False}
    text = (Path(report.path).parent / "report.md").read_text()
    assert "| web | 50 | 18 | 15 | 0 | 17 | 0 | yes |" in text
    assert "**holds**" in text and "[search_table](../../gone.md) (missing)" in text
    assert (Path(report.path).parent / "loss_curve.png").stat().st_size > 1000
