"""`raypress run | submit | validate | plan | ops | rejects | analyze | serve | server` — the command line over the pipeline engine."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from raypress.cli_help import ReadableGroup

app = typer.Typer(add_completion=False, no_args_is_help=True, cls=ReadableGroup, rich_markup_mode=None,
                  help="raypress: declarative pipelines of data, training, evaluation and serving ops on Ray.")
# rich assumes 80 columns when piped; ledgers are wider (a supervised run is told its terminal's width)
_WIDTH = None if sys.stdout.isatty() else 160
console = Console(stderr=True, highlight=False, width=_WIDTH)
out = Console(highlight=False, width=_WIDTH)


SET_METAVAR = "NODE.PARAM=VALUE"
SET_HELP = "override a node's parameter (VALUE is YAML); repeatable"
PROFILE_HELP = "apply the file's `profiles.NAME` values first (then --set)"


def _with_profile(overrides: List[str], profile: Optional[str]) -> List[str]:
    """``--profile NAME`` is ``--set settings.profile=NAME``, placed first so that --set wins."""
    return ([f"settings.profile={profile}"] if profile else []) + list(overrides)
INGRESS_METAVAR = "auto|haproxy|proxy"


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            print(f"raypress {version('raypress')}")
        except PackageNotFoundError:  # run from a source tree that was never installed
            print("raypress (not installed)")
        raise typer.Exit(0)


@app.callback()
def _main(_version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                        help="print raypress's version and exit")) -> None:
    """raypress: declarative pipelines of data, training, evaluation and serving ops on Ray."""


def _load_or_exit(file: str, overrides: list[str]):
    from raypress.dag.validate import load_pipeline

    return _or_exit(file, lambda: load_pipeline(file, overrides))


def _resolve_or_exit(file: str, overrides: list[str], run_dir: Optional[str], address: Optional[str] = None,
                     stats_mode: bool = False, run_dir_suffix: str = "", inputs_here: bool = True):
    """The pipeline as this run will run it (``dag.resolve``), or every problem and exit 2."""
    from raypress.dag.resolve import resolve_pipeline

    return _or_exit(file, lambda: resolve_pipeline(file, overrides, run_dir, cluster_address=address,
                                                   stats_mode=stats_mode, run_dir_suffix=run_dir_suffix,
                                                   inputs_here=inputs_here))


def _or_exit(file: str, load):
    from raypress.dag.validate import PipelineInvalid, PipelineUnreadable

    try:
        return load()
    except PipelineUnreadable as exc:  # not a pipeline at all: one line, no list
        console.print(f"error: {exc.problems[0]}", markup=False, soft_wrap=True)
        raise typer.Exit(2)
    except PipelineInvalid as exc:
        console.print(f"[bold red]{file}: {len(exc.problems)} problem(s)[/]")
        for p in exc.problems:
            console.print(f"  {p}", markup=False)
        raise typer.Exit(2)


@app.command()
def validate(file: str = typer.Argument(..., metavar="FILE", help="pipeline YAML"),
             set_: List[str] = typer.Option([], "--set", metavar=SET_METAVAR, help=SET_HELP),
             profile: Optional[str] = typer.Option(None, "--profile", metavar="NAME", help=PROFILE_HELP)):
    """Check a pipeline without running it; print every problem with file:line."""
    vp = _load_or_exit(file, _with_profile(set_, profile))
    out.print(f"{file}: ok ({len(vp.nodes)} nodes)")


@app.command()
def plan(file: str = typer.Argument(..., metavar="FILE", help="pipeline YAML"),
         set_: List[str] = typer.Option([], "--set", metavar=SET_METAVAR, help=SET_HELP),
         profile: Optional[str] = typer.Option(None, "--profile", metavar="NAME", help=PROFILE_HELP)):
    """Print the DAG in execution order, with materialization points and resources.

    Given a run directory's resolved pipeline.yaml, also what a resume would do with each node
    (skip it, or run it again and why), without running anything."""
    from raypress.dag.plan import describe, make_plan

    vp = _load_or_exit(file, _with_profile(set_, profile))
    rows = describe(make_plan(vp))
    columns: tuple[str, ...] = ("step", "node", "op", "kind", "inputs", "resources", "materialized")
    if vp.spec.resolution is not None and (Path(vp.spec.resolution.run_dir) / "state").is_dir():
        fates = _resume_fates(file)
        for r in rows:
            fate = fates[r["node"]]
            r["resume"] = "skip" if fate["action"] == "skip" else f"run: {fate['reason']}"
        columns += ("resume",)
    if len(rows) > _RICH_TABLE_ROWS:  # rich lays a table out in ~1 ms a row: 65,000 rows would take a minute
        print(f"plan: {vp.spec.name} ({len(rows):,} nodes)")
        sys.stdout.writelines(plain_table([[str(r[c]) for c in columns] for r in rows], columns))
        return
    table = Table(title=f"plan: {vp.spec.name}")
    for col in columns:
        table.add_column(col)
    for r in rows:
        table.add_row(*(str(r[c]) for c in columns))
    out.print(table)


_RICH_TABLE_ROWS = 500


def _resume_fates(file: str) -> dict[str, dict]:
    """What a resume of the run directory ``file`` belongs to would do with each node (dag.resume_plan)."""
    from raypress.dag.resume_plan import resume_plan
    from raypress.dag.runner import Runner

    return resume_plan(Runner(_resolve_or_exit(file, [], None)))


def plain_table(rows: list[list[str]], header: tuple[str, ...]) -> list[str]:
    """Lines of a table aligned by its widest cells, two spaces apart: linear in its rows."""
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(header)]
    return ["  ".join(cell.ljust(w) for cell, w in zip(cells, widths)).rstrip() + "\n"
            for cells in (list(header), *rows)]


def _event_printer(event: dict) -> None:
    """A run's events as plain lines (``progress_view.PlainLines``): what ``analyze`` shows."""
    global _PLAIN
    from raypress.dag.progress_view import PlainLines

    if _PLAIN is None:
        _PLAIN = PlainLines()
    for text in _PLAIN.lines(event):
        console.print(text, soft_wrap=True)


_PLAIN = None


def print_ledger(ledger: dict) -> None:
    table = Table(title="ledger")
    for col in ("node", "op", "in", "out", "dropped", "dups", "quarantined", "s", "cpu"):
        table.add_column(col, justify="left" if col in ("node", "op", "dropped") else "right")
    for nid, e in ledger["nodes"].items():
        dropped = ", ".join(f"{r}: {n}" for r, n in e["dropped"].items()) or "-"
        busy = e.get("cpu_utilisation")  # the segment's share of the cluster's CPUs
        table.add_row(nid, e["op"], str(e["rows_in"]), str(e["rows_out"]) if not e.get("transforms") else
                      (e.get("artifact") and "artifact" or str(e["rows_out"])), dropped, str(e["duplicates"]),
                      str(e["quarantined"]), f"{e['seconds']:.1f}", "-" if busy is None else f"{busy:.0%}")
    out.print(table)
    for warning in ledger.get("warnings", []):
        out.print(f"[bold yellow]warning:[/] {escape(warning)}")
    if ledger["adds_up"]:
        out.print("[green]ledger adds up[/]")
    else:
        out.print("[bold red]ledger does NOT add up:[/]")
        for p in ledger.get("problems", []):
            out.print(f"  {p}", markup=False)


RAY_HOST_HELP = ("interface the embedded Ray listens on (default: RAYPRESS_RAY_HOST, else 127.0.0.1; "
                 "0.0.0.0: every interface, for other machines to join)")


@app.command()
def run(file: str = typer.Argument(..., metavar="FILE",
                                   help="pipeline YAML (or a run directory's resolved pipeline.yaml)"),
        run_dir: Optional[str] = typer.Option(None, "--run-dir", metavar="DIR",
                                              help="default runs/<name>/<timestamp>"),
        set_: List[str] = typer.Option([], "--set", metavar=SET_METAVAR, help=SET_HELP),
        profile: Optional[str] = typer.Option(None, "--profile", metavar="NAME", help=PROFILE_HELP),
        address: Optional[str] = typer.Option(None, "--address", metavar="HOST:PORT",
                                              help="Ray cluster address (default: embedded Ray, or RAY_ADDRESS)"),
        ray_host: Optional[str] = typer.Option(None, "--ray-host", metavar="HOST", help=RAY_HOST_HELP),
        verbose: bool = typer.Option(False, "--verbose", "-v", help="show Ray's own log lines here too (they "
                                     "always go to RUN_DIR/logs/ray.log)"),
        in_process: bool = typer.Option(False, "--in-process", hidden=True,
                                        help="run here, not in a supervised child (what the supervisor starts)"),
        event_lines: bool = typer.Option(False, "--event-lines", hidden=True,
                                         help="send events to stderr as lines for the supervisor to draw"),
        columns: Optional[int] = typer.Option(None, "--columns", hidden=True, help="the terminal's width")):
    """Run a pipeline on Ray (embedded by default) and print the ledger.

    The pipeline is resolved once (overrides, references, {run_dir}, absolute paths, model files) and
    written as RUN_DIR/pipeline.yaml; the run, a resume and `raypress run RUN_DIR/pipeline.yaml` run
    that file.  While it runs, each running node has a line (rows in and out, rows/s, dropped, ETA when
    known); Ray's own log lines go to RUN_DIR/logs/ray.log (--verbose shows them too)."""
    from raypress.dag.run_lock import RunDirLocked, held_by_parent

    if in_process and event_lines:  # a supervised run: a signal before the runner's handlers ends it quietly
        from raypress.dag.cancel import exit_on_signals

        exit_on_signals()
    if columns:
        console.width = out.width = columns
    resolved = _resolve_or_exit(file, _with_profile(set_, profile), run_dir, address)
    try:
        if in_process:
            _run_in_process(resolved, address, ray_host, take_lock=not held_by_parent(resolved.run_dir),
                            verbose=verbose, event_lines=event_lines)
            return
        from raypress.dag.progress_view import ProgressView
        from raypress.dag.supervisor import run_supervised

        # the run in a child, which runs the resolved file; this process holds the lock, draws the
        # child's progress and settles the ledger
        argv = ["run", str(resolved.file), *(["--address", address] if address else []),
                *(["--ray-host", ray_host] if ray_host else []), *(["--verbose"] if verbose else [])]
        view = ProgressView(console)
        try:
            code = run_supervised(argv, resolved, view, verbose=verbose)
        finally:
            view.close()
    except RunDirLocked as exc:
        console.print(f"error: {exc}", markup=False)
        raise typer.Exit(2)
    raise typer.Exit(code)


def _run_in_process(resolved, address: Optional[str], ray_host: Optional[str] = None, take_lock: bool = True,
                    verbose: bool = False, event_lines: bool = False) -> Optional[dict]:
    """Run here.  ``event_lines``: a supervisor draws the events (they go to stderr as lines);
    ``verbose``: Ray's Python loggers keep printing here (else they write RUN_DIR/logs/ray.log)."""
    import signal

    from raypress.dag.cancel import RunCancelled, end_now
    from raypress.dag.error_budget import describe_error
    from raypress.dag.event_lines import EventLines
    from raypress.dag.progress_view import ProgressView
    from raypress.dag.ray_logs import ray_log_path, send_ray_logs_to
    from raypress.dag.run_lock import RunDirLocked
    from raypress.dag.runner import RunFailed, Runner

    vp = resolved.vp
    if not verbose:
        send_ray_logs_to(ray_log_path(resolved.run_dir))
    console.print(f"[bold]{vp.spec.name}[/]: {len(vp.nodes)} nodes → {resolved.run_dir}")
    view = None if event_lines else ProgressView(console)
    runner = Runner(resolved, address=address, ray_host=ray_host, on_event=EventLines() if event_lines else view)
    try:
        try:
            ledger = runner.run(take_lock=take_lock).to_json()
        finally:
            if view is not None:
                view.close()
    except RunDirLocked:
        raise
    except RunCancelled as exc:  # one line; the ledger says `status: cancelled`
        if exc.signum == signal.SIGHUP and take_lock is False:  # the supervisor is gone: nobody waits
            end_now(exc.exit_code)
        console.print(f"[bold yellow]run {exc}[/] (ledger: {runner.store.root}/ledger.json)")
        raise typer.Exit(exc.exit_code)
    except RunFailed as exc:
        console.print(f"[bold red]run failed:[/] {escape(str(exc))}")
        console.print(f"ledger: {runner.store.root}/ledger.json (status: failed)", markup=False)
        raise typer.Exit(1)
    except (Exception, KeyboardInterrupt) as exc:  # an op or stage crashed: one clear line, the traceback in events.jsonl
        console.print(f"[bold red]run failed:[/] {escape(runner.ledger.error or describe_error(exc))}")
        console.print(f"(details in {runner.store.root}/events.jsonl; ledger.json says status: failed)")
        raise typer.Exit(1)
    print_ledger(ledger)
    out.print(f"run directory: {runner.store.root}")
    if not ledger["adds_up"]:
        raise typer.Exit(1)
    return ledger


@app.command()
def analyze(file: str = typer.Argument(..., help="pipeline YAML"),
            run_dir: Optional[str] = typer.Option(None, "--run-dir", metavar="DIR",
                                                  help="default runs/<name>-analyze/<timestamp>"),
            report: Optional[str] = typer.Option(None, "--report", metavar="DIR",
                                                 help="where analysis.json and report.html go (default "
                                                      "RUN_DIR/reports/analysis)"),
            set_: List[str] = typer.Option([], "--set", metavar="NODE.PARAM=VALUE",
                                           help="override (VALUE is YAML)"),
            address: Optional[str] = typer.Option(None, "--address", metavar="HOST:PORT",
                                                  help="Ray cluster address")):
    """Run with every filter in stats mode (nothing dropped), then compute each stat's distribution,
    what each threshold keeps, filter overlaps, the funnel and per-source slices inside Ray; write
    analysis.json and a self-contained report.html."""
    from raypress.dag.analyze.report import analyze_and_report
    from raypress.dag.run_lock import RunDirLocked
    from raypress.dag.runner import Runner

    resolved = _resolve_or_exit(file, set_, run_dir, address, stats_mode=True, run_dir_suffix="-analyze")
    vp = resolved.vp
    filters = [nid for nid, node in vp.nodes.items() if node.stats_only]
    console.print(f"[bold]{vp.spec.name}[/]: analyzing {len(filters)} filters → {resolved.run_dir}")
    runner = Runner(resolved, address=address, on_event=_event_printer)
    try:
        ledger = runner.run().to_json()
    except RunDirLocked as exc:
        console.print(f"error: {exc}", markup=False)
        raise typer.Exit(2)
    folder = analyze_and_report(vp, runner.store.root, ledger, report)
    analysis = json.loads((folder / "analysis.json").read_text())
    _print_analysis(analysis)
    out.print(f"analysis pass: {analysis['seconds']:.1f} s; driver peak memory "
              f"{analysis['driver_peak_rss_bytes'] / 2 ** 20:,.0f} MiB", markup=False)
    out.print(f"report: {folder / 'report.html'}", markup=False, soft_wrap=True)
    out.print(f"analysis: {folder / 'analysis.json'}", markup=False, soft_wrap=True)


def _print_analysis(analysis: dict) -> None:
    """Per output: each stat's quantiles and what its thresholds keep; each filter's drops."""
    for output in analysis["outputs"]:
        t = Table(title=f"stats at '{output['writer']}' ({output['rows']:,} rows)")
        for col in ("stat", "node", "count", "mean", "p1", "p5", "p50", "p95", "p99", "threshold", "keeps"):
            t.add_column(col, justify="left" if col in ("stat", "node", "threshold") else "right")
        for s in output["stats"]:
            q = s["quantiles"]
            cuts = "; ".join(f"{th['param']}={th['value']:g}" for th in s["thresholds"]) or "-"
            keeps = "; ".join(f"{th['keep_pct']:.1f}%" for th in s["thresholds"]) or "-"
            t.add_row(s["stat"], s["node"] or "-", f"{s['count']:,}",
                      *(_fmt(v) for v in (s["mean"], q["p1"], q["p5"], q["p50"], q["p95"], q["p99"])), cuts, keeps)
        out.print(t)
        f = Table(title="filters at their thresholds")
        for col in ("node", "op", "drops", "drop %", "only this filter"):
            f.add_column(col, justify="left" if col in ("node", "op") else "right")
        for e in output["filters"]:
            f.add_row(e["node"], e["op"], f"{e['drops']:,}", f"{e['drop_pct']:.1f}", f"{e['unique_drops']:,}")
        out.print(f)
    for d in analysis.get("dedup", []):
        out.print(f"{d['node']}: {d['duplicates']:,} duplicates in {d['clusters']:,} clusters", markup=False)


def _fmt(value) -> str:
    return "-" if value is None else f"{value:.4g}"


@app.command()
def submit(file: str = typer.Argument(..., metavar="FILE", help="pipeline YAML"),
           address: str = typer.Option(..., "--address", metavar="URL",
                                       help="Ray dashboard address, e.g. http://HOST:8265"),
           run_dir: Optional[str] = typer.Option(None, "--run-dir", metavar="DIR", help="run directory, relative to here as for "
                                                 "`run` (default runs/<name>/<timestamp>); on a multi-node "
                                                 "cluster, on storage every node mounts at the same path"),
           set_: List[str] = typer.Option([], "--set", metavar=SET_METAVAR, help=SET_HELP),
           profile: Optional[str] = typer.Option(None, "--profile", metavar="NAME", help=PROFILE_HELP),
           pip: List[str] = typer.Option([], "--pip", metavar="REQUIREMENT",
                                         help="extra pip requirement for the cluster's runtime env"),
           no_follow: bool = typer.Option(False, "--no-follow", help="submit and return without streaming logs"),
           no_check: bool = typer.Option(False, "--no-check", help="skip the check of the cluster's Python and "
                                         "paths (a probe job run first, a few seconds)")):
    """Submit a pipeline to a Ray cluster through the Jobs API; exit with the job's status.

    Paths in the pipeline mean what they mean to `run` here: relative ones are made absolute first."""
    from raypress.cluster import ClusterError, submit_resolved

    # model files are found on the cluster, where the ops run: not pinned here
    # and its inputs on the cluster's storage, which its probe checks
    resolved = _resolve_or_exit(file, _with_profile(set_, profile), run_dir, address=address or "auto",
                                inputs_here=False)
    try:
        status = submit_resolved(resolved, address, extra_pip=list(pip) or None, follow=not no_follow,
                                 check=not no_check,
                                 echo=lambda s: out.print(s, markup=False, highlight=False, soft_wrap=True))
    except ClusterError as exc:
        console.print(f"error: {exc}", markup=False, soft_wrap=True)
        raise typer.Exit(2)
    out.print(f"job status: {status}")
    if no_follow:
        return
    raise typer.Exit(0 if status == "SUCCEEDED" else 1)


@app.command()
def rejects(run_dir: str = typer.Argument(..., help="a run directory (runs/<name>/<run id>)"),
            node: Optional[str] = typer.Argument(None, help="the node whose rows to show (default: a summary "
                                                             "of every node's drops)"),
            reason: Optional[str] = typer.Option(None, "--reason", metavar="REASON",
                                                 help="only rows dropped for this reason (as the summary names it)"),
            kind: Optional[str] = typer.Option(None, "--kind", metavar="filtered|duplicate|error",
                                               help="only rows of this kind (error: quarantined)"),
            limit: int = typer.Option(20, "--limit", min=1, help="rows to show"),
            as_json: bool = typer.Option(False, "--json", help="one JSON object per row (reloads with json.loads)")):
    """Show the rows a run dropped (kept under rejects/NODE/ and quarantine/NODE/): each with its
    reason, its stat value against the threshold and its source; without NODE, how many each node
    dropped and why (from the ledger)."""
    import json
    from pathlib import Path

    from raypress.serving.pipelines.run_files import LEDGER_FILE, RejectQuery, read_json, rejects_page
    from raypress.serving.pipelines.run_view import node_params, read_dag
    from raypress.suggest import did_you_mean_op

    folder = Path(run_dir)
    if not (folder / "pipeline.yaml").is_file():
        console.print(f"error: {run_dir} is not a run directory (no pipeline.yaml)", markup=False)
        raise typer.Exit(2)
    if kind is not None and kind not in ("filtered", "duplicate", "error"):
        console.print(f"error: --kind {kind!r}: choose filtered, duplicate or error", markup=False)
        raise typer.Exit(2)
    if node is None:
        ledger = read_json(folder / LEDGER_FILE) or {}
        table = Table(title=f"dropped rows of {folder} (raypress rejects {run_dir} NODE shows them)")
        for col in ("node", "op", "reason", "rows", "folder"):
            table.add_column(col, justify="right" if col == "rows" else "left")
        for nid, entry in (ledger.get("nodes") or {}).items():
            for why, count in sorted((entry.get("dropped") or {}).items()):
                table.add_row(nid, entry.get("op", ""), escape(why), str(count), escape(f"rejects/{nid}/"))
            for label, key, where in (("duplicate", "duplicates", "rejects"),
                                      ("quarantined (error)", "quarantined", "quarantine")):
                if entry.get(key):
                    table.add_row(nid, entry.get("op", ""), label, str(entry[key]), escape(f"{where}/{nid}/"))
        out.print(table)
        return
    params = node_params(folder, node)
    if params is None:
        known = [n["id"] for n in read_dag(folder)]
        console.print(f"error: the run has no node {node!r}{did_you_mean_op(node, known)}", markup=False)
        raise typer.Exit(2)
    page = rejects_page(folder, RejectQuery(node, reason, kind, limit), None, params)
    if not page["rows"]:  # one line saying why, not an empty table
        entry = ((read_json(folder / LEDGER_FILE) or {}).get("nodes") or {}).get(node)
        console.print(_no_rejects_text(node, reason, kind, entry), markup=False)
        return
    if as_json:
        for row in page["rows"]:
            out.print(json.dumps(row, ensure_ascii=False), markup=False, highlight=False, soft_wrap=True)
        return
    table = Table(title=f"rows {node} dropped" + (f" for {reason!r}" if reason else ""))
    for col in ("id", "kind", "reason", "value", "source"):
        table.add_column(col)
    for row in page["rows"]:
        table.add_row(escape(str(row["id"])), row["kind"] or "", escape(row["reason"] or ""),
                      escape(_value_text(row)), escape(_source_text(row["source"])))
    out.print(table)
    if page["next_cursor"]:
        out.print(f"(more: --limit {limit * 2})", markup=False)


def _no_rejects_text(node: str, reason: Optional[str], kind: Optional[str], entry: Optional[dict]) -> str:
    """Why ``raypress rejects RUN_DIR NODE`` found no rows: the node dropped nothing, or nothing for
    that reason (a close one suggested) or kind, or its files are gone while the ledger counts them."""
    from raypress.suggest import did_you_mean

    if entry is None:
        return f"node {node!r} has no ledger entry yet (not run, or the run stopped before it): no rows to show"
    reasons = sorted(entry.get("dropped") or {})
    total = sum((entry.get("dropped") or {}).values()) + int(entry.get("duplicates") or 0) + \
        int(entry.get("quarantined") or 0)
    if not total:
        return f"node {node!r} dropped no rows"
    if reason is not None:
        known = f"; its reasons: {', '.join(repr(r) for r in reasons)}" if reasons else ""
        return f"node {node!r} dropped no rows for reason {reason!r}{did_you_mean(reason, reasons)}{known}"
    if kind is not None:
        return f"node {node!r} dropped no rows of kind {kind!r}"
    return (f"node {node!r} dropped {total} rows, but none are in rejects/{node}/ or quarantine/{node}/ "
            "(were the files removed?)")


def _value_text(row: dict) -> str:
    """``1 < min_num 3`` where the reason names a threshold, else the stat values or the detail."""
    detail, threshold = row.get("detail"), row.get("threshold")
    if isinstance(detail, dict) and threshold and len(detail) == 1:
        value = next(iter(detail.values()))
        shown = f"{value:.4g}" if isinstance(value, float) else str(value)
        return f"{shown} {'<' if threshold['side'] == 'min' else '>'} {threshold['param']} {threshold['value']}"
    if isinstance(detail, dict):
        return ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in detail.items())
    return "" if detail is None else str(detail)


def _source_text(source: Optional[dict]) -> str:
    if not source:
        return ""
    return source["file"] + (f":{source['offset']}" if source.get("offset") is not None else "")


@app.command()
def ops(name: Optional[str] = typer.Argument(None, metavar="OP", help="show one op's parameters")):
    """List every operator (kind, one-line doc), or one operator's parameters."""
    from raypress.operators.registry import OpUnavailable, get_op, known_names, missing_requirements, missing_text
    from raypress.suggest import did_you_mean_op

    def load(op_name: str):
        """The op's class, or the line saying which extra it needs (a light install lacks some)."""
        missing = missing_requirements(op_name)
        if missing:
            return missing_text(op_name, missing)
        try:
            return get_op(op_name)
        except OpUnavailable as exc:
            return str(exc)

    if name is None:
        table = Table(title="operators")
        for col in ("op", "kind", "description"):
            table.add_column(col)
        for op_name in sorted(known_names()):
            cls = load(op_name)
            if isinstance(cls, str):
                table.add_row(op_name, "-", escape(cls))
            elif cls is not None:
                table.add_row(op_name, cls.kind.value, escape(cls.summary()))
        out.print(table)
        return
    cls = load(name)
    if isinstance(cls, str):
        console.print(cls, markup=False)
        raise typer.Exit(2)
    if cls is None:
        console.print(f"unknown op {name!r}{did_you_mean_op(name, known_names())}")
        raise typer.Exit(2)
    out.print(f"[bold]{name}[/] ({cls.kind.value}): {escape(cls.summary())}")
    inputs = ", ".join(f"{k}: {v.value}" for k, v in cls.inputs.items()) or "none"
    out.print(f"inputs: {inputs}; output: {cls.output.value}; "
              f"resources: cpu={cls.resources.num_cpus:g} gpu={cls.resources.num_gpus:g}"
              f"{'; runs in an actor pool' if cls.stateful else ''}; batch size: {cls.batch_size}")
    table = Table()
    for col in ("param", "type", "default", "description"):
        table.add_column(col)
    for pname, field in cls.Params.model_fields.items():
        ann = getattr(field.annotation, "__name__", None) or str(field.annotation).replace("typing.", "")
        default = "required" if field.is_required() else repr(field.get_default(call_default_factory=True))
        table.add_row(pname, escape(ann), escape(default), escape(field.description or ""))
    out.print(table)


@app.command()
def serve(config: Optional[str] = typer.Argument(None, metavar="CONFIG",
                                                 help="a Ray Serve config file (what `serve deploy` takes)"),
          model: Optional[str] = typer.Option(None, "--model", metavar="DIR", help="a Model directory (ours or an HF Mixtral / "
                                              "Qwen2-MoE checkpoint) to serve with the OpenAI-compatible API"),
          host: str = typer.Option("127.0.0.1", "--host", metavar="HOST",
                                   help="interface to bind (0.0.0.0: every interface)"),
          port: int = typer.Option(8000, "--port", metavar="PORT", help="port to bind"),
          model_name: Optional[str] = typer.Option(None, "--model-name", metavar="NAME",
                                                   help="id clients send (default: dir name)"),
          api_key_env: Optional[str] = typer.Option(None, "--api-key-env", metavar="VAR",
                                                    help="environment variable with a bearer token to require"),
          max_batch_size: int = typer.Option(16, "--max-batch-size", help="sequences decoding at once"),
          max_len: Optional[int] = typer.Option(None, "--max-len", metavar="TOKENS", help="context per sequence"),
          max_queue: int = typer.Option(64, "--max-queue", help="waiting requests before answering 503"),
          num_cpus: float = typer.Option(1.0, "--num-cpus", metavar="N", help="CPUs for the replica"),
          num_gpus: float = typer.Option(0.0, "--num-gpus", metavar="N", help="GPUs for the replica"),
          max_request_bytes: Optional[int] = typer.Option(None, "--max-request-bytes", min=1, metavar="BYTES",
                                                          help="larger request bodies get 413 (default: 4 MiB)"),
          address: Optional[str] = typer.Option(None, "--address", metavar="HOST:PORT",
                                                help="Ray cluster address (default: embedded)"),
          ray_host: Optional[str] = typer.Option(None, "--ray-host", metavar="HOST", help=RAY_HOST_HELP),
          ingress: str = typer.Option("auto", "--ingress", metavar=INGRESS_METAVAR, help="haproxy: Serve's HAProxy ingress (needs haproxy "
                                      "installed; requests go straight to the replica: ~0.8x the engine in "
                                      "process instead of ~0.5x on short requests here; kept on loopback like "
                                      "the rest); proxy: Serve's Python HTTP proxy; auto: haproxy where it is "
                                      "installed")):
    """Serve a model over HTTP until interrupted: `--model DIR`, or a Ray Serve CONFIG file."""
    if (config is None) == (model is None):
        console.print("give either a Serve CONFIG file or --model DIR (not both)")
        raise typer.Exit(2)
    problem = _ingress_problem(ingress, address)
    if problem:
        console.print(f"error: {problem}", markup=False)
        raise typer.Exit(2)
    if model is not None:  # the packages the serve_llm stage declares: say so before Ray starts
        from raypress.operators.registry import missing_requirements

        missing = missing_requirements("serve_llm")
        if missing:
            console.print(f"serving a model needs {', '.join(sorted(missing))} (not installed here): "
                          f"pip install 'raypress[{','.join(sorted(set(missing.values())))}]'", markup=False)
            raise typer.Exit(2)
    from pydantic import ValidationError

    from raypress.dag.ray_session import ensure_ray
    from raypress.serving.launch import (ServeConfigError, config_exposure_warning, deploy_config, exposure_warning,
                                         load_serve_config, wait_until_interrupted)
    from raypress.serving.llm_deployment import LLMAppArgs, deploy_llm

    if config is None:  # before anything can fail: the warning is about what was asked for
        warning = exposure_warning(host, api_key_env is not None)
        if warning:
            console.print(warning, markup=False)
    try:
        if config is not None:
            warning = config_exposure_warning(load_serve_config(config))  # fail on a bad file before starting Ray
            if warning:
                console.print(warning, markup=False)
        else:
            args = LLMAppArgs(model=model, model_name=model_name, api_key_env=api_key_env,
                              max_batch_size=max_batch_size, max_len=max_len, max_queue=max_queue,
                              num_cpus=num_cpus, num_gpus=num_gpus,
                              **({"max_request_bytes": max_request_bytes} if max_request_bytes else {}))
            args.resolved_key()
    except (ServeConfigError, ValueError) as exc:
        message = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()) \
            if isinstance(exc, ValidationError) else str(exc)
        console.print(f"error: {message}", markup=False)
        raise typer.Exit(2)
    used = None  # a cluster's Serve runs the ingress its nodes were started with
    if not (address or os.environ.get("RAY_ADDRESS")):  # the embedded Ray's Serve reads it when it starts
        from raypress.dag.haproxy_loopback import choose_ingress

        used = choose_ingress(ingress)
    ensure_ray(address, host=ray_host)
    from ray import serve as ray_serve

    try:
        if config is not None:
            urls = deploy_config(config, on_status=lambda s: console.print(f"deploying: {s}", markup=False))
        else:
            urls = {"llm": deploy_llm(args, host=host, port=port)}
    except (RuntimeError, TimeoutError) as exc:
        console.print(f"error: {exc}", markup=False)
        ray_serve.shutdown()
        raise typer.Exit(1)
    shown = f"; through Serve's {'HAProxy ingress' if used == 'haproxy' else 'HTTP proxy'}" if used else ""
    for name, url in urls.items():
        out.print(f"serving {name} at {url}  (OpenAI API: {url}/v1{shown}; Ctrl-C stops)", markup=False)
    try:
        wait_until_interrupted()
    finally:
        out.print("shutting down")
        ray_serve.shutdown()


@app.command()
def server(runs_root: str = typer.Option("runs", "--runs-root", metavar="DIR", help="where runs go (runs_root/<name>/<run id>); "
                                         "writers may only write under it"),
           host: str = typer.Option("127.0.0.1", "--host", metavar="HOST",
                                    help="interface to bind; any but loopback needs a token"),
           port: int = typer.Option(8080, "--port", metavar="PORT", help="port to bind"),
           token_env: Optional[str] = typer.Option(None, "--token-env", metavar="VAR", help="environment variable holding the "
                                                   "bearer token (e.g. RAYPRESS_SERVER_TOKEN)"),
           token_file: Optional[str] = typer.Option(None, "--token-file", metavar="PATH",
                                                    help="file holding the bearer token"),
           max_active_runs: int = typer.Option(16, "--max-active-runs", min=1,
                                               help="queued + running runs before submits get 503"),
           cancel_grace_s: int = typer.Option(30, "--cancel-grace", min=1, metavar="SECONDS",
                                              help="seconds a cancelled run has to stop cleanly before it is killed"),
           check_cluster: bool = typer.Option(False, "--check-cluster", help="probe the cluster's Python and "
                                              "paths before each run (as `raypress submit` does)"),
           address: Optional[str] = typer.Option(None, "--address", metavar="HOST:PORT",
                                                 help="Ray cluster to attach to, HOST:6379 or "
                                                 "auto (default: an embedded Ray with its Jobs API, or RAY_ADDRESS); "
                                                 "its Jobs API is found from it"),
           ray_host: Optional[str] = typer.Option(None, "--ray-host", metavar="HOST", help=RAY_HOST_HELP),
           ingress: str = typer.Option("auto", "--ingress", metavar=INGRESS_METAVAR, help="haproxy: Serve's HAProxy ingress (needs haproxy "
                                       "installed; under 50 polling clients it took the server's CPU per run from "
                                       "~7.6 to ~1.8 s here); proxy: Serve's Python HTTP proxy; auto: haproxy where "
                                       "it is installed (an embedded Ray only: a cluster's nodes decide)")):
    """Serve the pipelines API and its run page until interrupted.

    Runs go to the attached Ray cluster as Ray Jobs (as `raypress submit` sends them); their state
    is read back from their run directories and the Jobs API, so a restarted server lists them all.
    Here: `raypress server` (an embedded Ray; the page at http://127.0.0.1:8080/). On a cluster:
    `raypress server --address HEAD:6379 --host 0.0.0.0 --token-env RAYPRESS_SERVER_TOKEN --runs-root
    /shared/runs`, or `serve deploy serve_configs/pipelines.yaml`. Endpoints: POST /v1/validate,
    POST /v1/runs, GET /v1/runs, GET /v1/runs/ID (and /events, /logs, /artifacts/PATH,
    /nodes/NODE/rejects), POST /v1/runs/ID/cancel and /resume, GET /v1/ops; OpenAPI at /openapi.json.
    """
    from pydantic import ValidationError

    from raypress.dag.ray_session import ensure_ray, is_loopback
    from raypress.serving.launch import wait_until_interrupted
    from raypress.serving.pipelines.deployment import PipelinesAppArgs

    try:
        args = PipelinesAppArgs(runs_root=str(os.path.abspath(runs_root)), base_dir=os.getcwd(),
                                api_key_env=token_env, api_key_file=token_file, max_active_runs=max_active_runs,
                                cancel_grace_s=cancel_grace_s, check_cluster=check_cluster)
        key = args.resolved_key()
    except (ValidationError, ValueError) as exc:
        message = "; ".join(e["msg"] for e in exc.errors()) if isinstance(exc, ValidationError) else str(exc)
        console.print(f"error: {message}", markup=False)
        raise typer.Exit(2)
    if address and address.startswith(("http://", "https://")):
        console.print(f"error: --address {address}: give the cluster's Ray address (HOST:6379, or auto); the "
                      "server finds its Jobs API from it", markup=False)
        raise typer.Exit(2)
    if key is None and not is_loopback(host):
        console.print(f"error: --host {host} is not loopback: give a token (--token-env or --token-file), "
                      "or anyone who can reach the port can run pipelines as this user", markup=False)
        raise typer.Exit(2)
    problem = _ingress_problem(ingress, address)
    if problem:
        console.print(f"error: {problem}", markup=False)
        raise typer.Exit(2)
    if not (address or os.environ.get("RAY_ADDRESS")):  # the embedded Ray's Serve reads it when it starts
        from raypress.dag.haproxy_loopback import choose_ingress

        choose_ingress(ingress)
    ensure_ray(address, host=ray_host, dashboard=True)
    from ray import serve as ray_serve

    from raypress.dag.ray_compat import dashboard_address, serve_start
    from raypress.serving.llm_deployment import http_url
    from raypress.serving.pipelines.deployment import build_pipelines_app

    jobs = dashboard_address()
    if jobs is None:
        console.print("error: the cluster runs no dashboard, so it has no Jobs API to run pipelines through "
                      "(start its head with --include-dashboard=true)", markup=False)
        raise typer.Exit(2)
    args = args.model_copy(update={"jobs_address": jobs, "api_key": key, "api_key_env": None, "api_key_file": None})
    serve_start(http_options={"host": host, "port": port})
    try:
        ray_serve.run(build_pipelines_app(args.model_dump()), name="pipelines", route_prefix="/")
    except (RuntimeError, TimeoutError) as exc:
        console.print(f"error: {exc}", markup=False)
        ray_serve.shutdown()
        raise typer.Exit(1)
    url = http_url(host, port)
    out.print(f"pipelines server at {url}/  (API: {url}/v1, OpenAPI: {url}/openapi.json; runs in "
              f"{args.runs_root}; jobs via {jobs}; Ctrl-C stops)", markup=False)
    try:
        wait_until_interrupted()
    finally:
        out.print("shutting down (runs keep running on the cluster; a new server finds them)")
        ray_serve.delete("pipelines")


def _ingress_problem(ingress: str, address: str | None) -> str | None:
    """Why ``--ingress`` cannot be honoured here (None: it can)."""
    from raypress.dag.haproxy_loopback import INGRESSES, NO_BINARY, haproxy_binary

    if ingress not in INGRESSES:
        return (f"--ingress {ingress!r}: choose 'auto', 'haproxy' (Serve's HAProxy ingress) or 'proxy' "
                "(Serve's HTTP proxy)")
    if ingress != "haproxy":
        return None
    if address or os.environ.get("RAY_ADDRESS"):
        return ("--ingress haproxy chooses how the embedded Ray starts Serve; a cluster decides for itself: "
                "start its nodes with RAY_SERVE_ENABLE_HA_PROXY=1 (and haproxy installed)")
    if haproxy_binary() is None:
        return f"--ingress haproxy {NO_BINARY}"
    return None


def main() -> None:
    os.environ.setdefault("RAY_TRAIN_V2_ENABLED", "1")
    from raypress.operators.registry import add_op_package

    add_op_package("raypress.serving")  # serving's ops (serve_llm): the registry below never names serving
    app()


if __name__ == "__main__":
    main()
    sys.exit(0)
