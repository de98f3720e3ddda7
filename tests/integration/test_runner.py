"""The runner on real Ray: ledger adds up, failing rows are quarantined, resume skips finished work."""

from __future__ import annotations

import json
import os
import signal
import textwrap
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from raypress.dag.cancel import RunCancelled
from raypress.dag.runner import RunFailed, Runner, run_pipeline

pytestmark = pytest.mark.integration

WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()


def write_corpus(path: Path, n: int = 300) -> list[dict]:
    rows = []
    for i in range(n):
        k = 3 + (i * 7) % 12  # 3..14 words
        text = " ".join([f"doc{i}"] + [WORDS[(i + j) % len(WORDS)] for j in range(k)])  # k + 1 words
        if i % 50 == 0:
            text = ""  # the lambda below divides by len(text): these rows raise
        rows.append({"doc": f"d{i:04d}", "text": text})
    rows.append(rows[10] | {"doc": "zz-copy-of-d0010"})  # an exact duplicate
    with open(path, "w") as fh:
        for r in rows:
            fh.write(json.dumps(r) + "\n")
        fh.write("{this line is not json\n")
    return rows


def pipeline(tmp_path: Path, max_error_ratio: float = 0.5) -> Path:
    write_corpus(tmp_path / "corpus.jsonl")
    path = tmp_path / "p.yaml"
    path.write_text(textwrap.dedent(f"""\
        name: runner-test
        settings: {{max_error_ratio: {max_error_ratio}, keep_rejects: true, allow_code: true}}
        nodes:
          - id: src
            op: read_jsonl
            with: {{paths: ["{tmp_path}/corpus.jsonl"], id_key: doc}}
          - id: inv
            op: python_lambda_mapper
            input: src
            with: {{lambda_str: "lambda s: {{**s, 'inv_len': 1 / len(s['text'])}}"}}
          - id: words
            op: words_num_filter
            input: inv
            with: {{min_num: 5}}
          - id: dedup
            op: document_deduplicator
            input: words
          - id: out
            op: write_jsonl
            input: dedup
            with: {{path: "{{run_dir}}/out"}}
          - id: out_parquet
            op: write_parquet
            input: dedup
            with: {{path: "{{run_dir}}/out_parquet"}}
        """))
    return path


def read_jsonl_dir(d: Path) -> list[dict]:
    return [json.loads(line) for f in sorted(d.glob("*.jsonl")) for line in f.read_text().splitlines()]


def test_ledger_adds_up_and_errors_are_quarantined(ray_session, tmp_path):
    run_dir = tmp_path / "run"
    ledger = run_pipeline(str(pipeline(tmp_path)), run_dir=str(run_dir))
    assert ledger["adds_up"], ledger["problems"]
    n = ledger["nodes"]
    assert n["src"]["rows_in"] == 302 and n["src"]["quarantined"] == 1  # the bad json line
    assert n["inv"]["quarantined"] == 6  # the six empty texts
    assert n["words"]["rows_in"] == 295
    expected_kept_words = sum(1 for i in range(300) if i % 50 and 3 + (i * 7) % 12 + 1 >= 5) + 1
    assert n["words"]["rows_out"] == expected_kept_words
    assert sum(n["words"]["dropped"].values()) == 295 - expected_kept_words
    assert n["dedup"]["duplicates"] == 1
    rows = read_jsonl_dir(run_dir / "out")
    assert len(rows) == n["out"]["rows_out"] == n["dedup"]["rows_out"]
    assert len(pq.read_table(run_dir / "out_parquet")) == n["out_parquet"]["rows_out"]
    assert "zz-copy-of-d0010" not in {r["id"] for r in rows} and "d0010" in {r["id"] for r in rows}

    quarantined = pq.read_table(run_dir / "quarantine").to_pylist()
    inv_errors = [q for q in quarantined if q["_rp_node"] == "inv"]
    assert len(inv_errors) == 6 and all("ZeroDivisionError" in q["_rp_detail"] for q in inv_errors)
    assert {q["id"] for q in inv_errors} == {f"d{i:04d}" for i in range(0, 300, 50)}
    assert any(q["_rp_node"] == "src" for q in quarantined)

    rejects = pq.read_table(run_dir / "rejects").to_pylist()
    dup = [r for r in rejects if r["_rp_kind"] == "duplicate"]
    assert dup and dup[0]["id"] == "zz-copy-of-d0010" and dup[0]["_rp_reason"] == "d0010"
    assert json.loads((run_dir / "ledger.json").read_text())["adds_up"] is True
    events = [json.loads(x)["event"] for x in (run_dir / "events.jsonl").read_text().splitlines()]
    assert events[0] == "run_started" and events[-1] == "run_finished"


def test_error_budget_stops_the_run_loudly(ray_session, tmp_path):
    with pytest.raises(RunFailed) as info:
        run_pipeline(str(pipeline(tmp_path, max_error_ratio=0.001)), run_dir=str(tmp_path / "run"))
    msg = str(info.value)
    assert "node 'src'" in msg or "node 'inv'" in msg
    assert "max_error_ratio" in msg and "quarantine" in msg


def test_a_signal_that_surfaces_as_another_error_still_cancels_the_run(ray_session, tmp_path, monkeypatch):
    """Seen in CI (issue 32 case 3): the signal's handler ran inside Ray's Cython code, whose call then
    failed with a SystemError of its own, and the run was recorded as failed, not cancelled."""
    def steps_hit_by_sigterm(self, plan) -> None:
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(10)
        except RunCancelled:
            raise SystemError("<built-in method __new__ of type object at 0x7f00> returned a result with an "
                              "exception set") from None

    before = signal.getsignal(signal.SIGTERM)
    monkeypatch.setattr(Runner, "_run_steps", steps_hit_by_sigterm)
    with pytest.raises(RunCancelled) as info:
        run_pipeline(str(pipeline(tmp_path)), run_dir=str(tmp_path / "run"))
    assert info.value.signal_name == "SIGTERM" and isinstance(info.value.__cause__, SystemError)
    ledger = json.loads((tmp_path / "run" / "ledger.json").read_text())
    assert ledger["status"] == "cancelled" and ledger["error"] == "cancelled by SIGTERM", ledger
    assert signal.getsignal(signal.SIGTERM) == before  # the test process's own handler is back


def test_resume_skips_finished_nodes(ray_session, tmp_path):
    path = str(pipeline(tmp_path))
    run_dir = tmp_path / "run"
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where a directory should be")
    with pytest.raises(Exception):
        # the two writers run at once: the failing one must not stop the other from finishing
        run_pipeline(path, run_dir=str(run_dir), overrides=[f"out_parquet.path={blocked}/x",
                                                            "settings.concurrent_steps=2"])
    first = [json.loads(x) for x in (run_dir / "events.jsonl").read_text().splitlines()]
    finished_first = {e["node"] for e in first if e["event"] == "node_finished"}
    assert "words" in finished_first and "out" in finished_first

    ledger = run_pipeline(path, run_dir=str(run_dir), overrides=[f"out_parquet.path={tmp_path}/good"])
    assert ledger["adds_up"]
    events = [json.loads(x) for x in (run_dir / "events.jsonl").read_text().splitlines()][len(first):]
    skipped = {e["node"] for e in events if e["event"] == "node_skipped"}
    rerun = {e["node"] for e in events if e["event"] == "node_started"}
    assert {"src", "inv", "words", "out"} <= skipped
    assert rerun == {"out_parquet"}

    fresh = run_pipeline(path, run_dir=str(tmp_path / "fresh"), overrides=[f"out_parquet.path={tmp_path}/good2",
                                                                             "settings.concurrent_steps=3"])
    a = sorted(r["id"] for r in pq.read_table(tmp_path / "good").to_pylist())
    b = sorted(r["id"] for r in pq.read_table(tmp_path / "good2").to_pylist())
    assert a == b and len(a) == fresh["nodes"]["out_parquet"]["rows_out"]
    assert {k: v["rows_out"] for k, v in ledger["nodes"].items()} == \
           {k: v["rows_out"] for k, v in fresh["nodes"].items()}


def test_a_run_with_nothing_left_to_do_starts_no_ray(ray_session, tmp_path, monkeypatch):
    """Every step resumes from disk: the run ends without starting or joining Ray (4-8 s before)."""
    from raypress.dag import ray_session as session_module

    path, run_dir = str(pipeline(tmp_path)), str(tmp_path / "run")
    first = run_pipeline(path, run_dir=run_dir)

    def no_ray(*args, **kwargs):
        raise AssertionError("a run with nothing to do started Ray")

    monkeypatch.setattr(session_module, "ensure_ray", no_ray)
    again = run_pipeline(path, run_dir=run_dir)
    assert again["adds_up"] and again["nodes"] == first["nodes"]
    with pytest.raises(AssertionError, match="started Ray"):  # one step with work to do does start it
        run_pipeline(path, run_dir=run_dir, overrides=["words.min_num=6"])


def test_runs_of_one_process_share_its_service_actors_and_count_only_their_own(ray_session, tmp_path):
    """The op timer, the readers' tallies and the CPU probes are kept for every run of a driver
    (starting them was ~1.6 s of every small run): a second run makes none, and its ledger holds
    its own figures only, not the sum of both runs."""
    from raypress.operators.shared import driver_actors

    (tmp_path / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in (
        {"id": "a", "text": "one two three"}, {"text": "no id here"}, {"id": "a", "text": "a repeated id"})))
    path = tmp_path / "p.yaml"
    path.write_text(textwrap.dedent(f"""\
        name: shared-actors
        nodes:
          - {{id: docs, op: read_jsonl, with: {{paths: ["{tmp_path}/in.jsonl"]}}}}
          - {{id: words, op: words_num_filter, input: docs, with: {{min_num: 3}}}}
          - {{id: out, op: write_jsonl, input: words, with: {{path: "{{run_dir}}/out"}}}}
        """))
    runs = []
    for i in range(2):
        events: list[dict] = []
        ledger = run_pipeline(str(path), run_dir=str(tmp_path / f"run{i}"), on_event=events.append)
        runs.append((ledger, events, dict(driver_actors._cache)))
    (first, first_events, first_actors), (second, second_events, second_actors) = runs
    assert second_actors == first_actors and len(first_actors) >= 2  # the timer and the tallies at least
    for ledger, events in ((first, first_events), (second, second_events)):
        assert ledger["adds_up"] and ledger["nodes"]["words"]["rows_in"] == 3
        assert [e["assigned"] for e in events if e["event"] == "ids_assigned"] == [2]

    import ray

    from raypress.dag.op_timing import new_timer

    one, two = new_timer(), new_timer()  # two runs' handles on the one timer
    assert one.actor == two.actor and one.run != two.run
    ray.get([one.add.remote("words", 1.5, 10), one.count.remote("words", {"hits": 2})])
    assert ray.get(two.snapshot.remote()) == {} and ray.get(two.counts.remote()) == {}
    assert ray.get(one.snapshot.remote()) == {"words": 1.5} and ray.get(one.counts.remote()) == {"words": {"hits": 2}}
    ray.get(one.end.remote())
    assert ray.get(one.snapshot.remote()) == {}
