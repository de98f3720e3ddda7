"""`raypress analyze` at scale: a ~4 GB JSONL of real text, the driver's memory and the whole run's.

Baseline, in the same sitting: the same pipeline run plainly (`raypress run`). Both are fresh
processes with a fresh embedded Ray on the same CPUs, each watched by a process-tree sampler
(peak summed PSS and RSS: Ray's shared object store counted once in PSS). The analyze side's
driver peak is its own ``ru_maxrss`` (recorded in analysis.json), over the pipeline run and the
analysis together. Last line: ``ratio`` = analyze rows/s per core / run rows/s per core.

    .venv/bin/python bench/analyze_scale.py                 # 128 tiles, ~4 GB (~15 min on 2 cores)
    .venv/bin/python bench/analyze_scale.py --tiles 8       # ~250 MB, a quick look
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

import scale_corpus  # noqa: E402
from process_tree import TreeSampler  # noqa: E402

RAYPRESS = str(Path(sys.executable).with_name("raypress"))

# the quickstart's eight Data-Juicer quality filters, as a user's recipe over their own JSONL
FILTERS = """\
  - {id: enough_words, op: words_num_filter, input: src, with: {min_num: 50, max_num: 100000}}
  - {id: alphanumeric, op: alphanumeric_filter, input: enough_words, with: {min_ratio: 0.55}}
  - {id: char_repetition, op: character_repetition_filter, input: alphanumeric, with: {rep_len: 10, max_ratio: 0.4}}
  - {id: word_repetition, op: word_repetition_filter, input: char_repetition, with: {rep_len: 10, max_ratio: 0.3}}
  - {id: special_chars, op: special_characters_filter, input: word_repetition, with: {max_ratio: 0.4}}
  - {id: line_length, op: maximum_line_length_filter, input: special_chars, with: {max_len: 5000}}
  - {id: stopwords, op: stopwords_filter, input: line_length, with: {lang: en, min_ratio: 0.15}}
  - {id: flagged, op: flagged_words_filter, input: stopwords, with: {lang: en, max_ratio: 0.01}}
"""


def pipeline(files: list[str]) -> str:
    paths = json.dumps(files)
    return ("name: analyze-scale\nsettings: {max_error_ratio: 0.01}\nnodes:\n"
            f"  - {{id: src, op: read_jsonl, with: {{paths: {paths}}}}}\n" + FILTERS +
            "  - {id: out, op: write_parquet, input: flagged, with: {path: \"{run_dir}/output\"}}\n")


def timed(args: list[str]) -> dict:
    env = {**os.environ, "RAYPRESS_PROGRESS": "0"}
    start = time.perf_counter()
    proc = subprocess.Popen(args, env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    with TreeSampler(proc.pid) as sampler:
        output, _ = proc.communicate()
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"{' '.join(args)} failed ({proc.returncode}):\n{output[-3000:]}")
    return {"wall": wall, "pss": sampler.peak_pss, "rss": sampler.peak_rss, "cpu": sampler.cpu_seconds()}


def rows_in(run_dir: Path) -> int:
    ledger = json.loads((run_dir / "ledger.json").read_text())
    assert ledger["adds_up"], ledger.get("problems")
    return int(ledger["nodes"]["src"]["rows_out"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiles", type=int, default=128)
    ap.add_argument("--cpus", type=int, default=os.cpu_count(), help="cores the runs use (for per-core rates)")
    ap.add_argument("--keep", action="store_true", help="keep the run directories")
    args = ap.parse_args()
    files = scale_corpus.scaled(args.tiles)
    mb = sum(os.path.getsize(f) for f in files) / 1e6
    work = Path(tempfile.mkdtemp(prefix="analyze-scale-", dir=HERE / ".runs" if (HERE / ".runs").exists() else None))
    yaml_path = work / "pipeline.yaml"
    yaml_path.write_text(pipeline(files))
    print(f"corpus: {mb:,.0f} MB in {len(files)} JSONL files; {args.cpus} CPUs; runs under {work}", flush=True)
    plain = timed([RAYPRESS, "run", str(yaml_path), "--run-dir", str(work / "run")])
    analyzed = timed([RAYPRESS, "analyze", str(yaml_path), "--run-dir", str(work / "analyze")])
    analysis = json.loads((work / "analyze" / "reports" / "analysis" / "analysis.json").read_text())
    rows = rows_in(work / "run")
    assert rows_in(work / "analyze") == rows
    driver_gb = analysis["driver_peak_rss_bytes"] / 1e9
    print(f"{'side':8} {'wall s':>8} {'rows/s/core':>12} {'MB/s/core':>10} {'peak PSS GB':>12} {'peak RSS GB':>12}")
    for name, r in (("run", plain), ("analyze", analyzed)):
        print(f"{name:8} {r['wall']:8.1f} {rows / r['wall'] / args.cpus:12,.0f} {mb / r['wall'] / args.cpus:10.2f} "
              f"{r['pss'] / 1e9:12.2f} {r['rss'] / 1e9:12.2f}")
    print(f"rows: {rows:,}; analysis pass {analysis['seconds']:.1f} s of the analyze side; "
          f"analyze driver peak RSS {driver_gb:.2f} GB ({'under' if driver_gb < 1 else 'OVER'} 1 GB)")
    if not args.keep:
        subprocess.run(["rm", "-rf", str(work)], check=False)
    print(f"ratio {(rows / analyzed['wall']) / (rows / plain['wall']):.2f}  (analyze rows/s per core / run rows/s per core)")


if __name__ == "__main__":
    main()
