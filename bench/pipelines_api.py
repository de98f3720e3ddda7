"""The pipelines API under load: does a run slow down while 50 clients watch it?

A private local Ray cluster (tests/ray_cluster.py, 2 CPUs) and a real ``raypress server`` on it
(tests/pipelines_server.py: Serve's proxy and the PipelinesServer replica).  The pipeline (``PIPELINE``)
is real ops over ``--rows`` generated documents: ``read_jsonl`` -> ``whitespace_normalization_mapper``
-> ``words_num_filter`` -> ``alphanumeric_filter`` -> ``document_minhash_deduplicator`` ->
``write_jsonl``.  The documents (``write_inputs``, seeded) are 30-120 words drawn Zipf-like from
made-up syllable words, with 5% too short (filtered), 4% exact and 8% near copies of earlier ones
(a word or three changed: found by MinHash), so each op does its usual work and ~85% is kept.

Each round runs the pipeline twice through the API (``POST /v1/runs``), in alternating order:

  alone   nothing but the bench's own wait (``GET /v1/runs/{id}`` once a second)
  loaded  the same, while ``--clients`` clients (half pollers, half streamers) watch it from
          the moment it is submitted until it has ended:
            pollers    ``GET /v1/runs`` and ``GET /v1/runs/{id}`` in turn, one request every
                       ``--poll-interval`` s each (0: back to back), as run pages refreshing;
            streamers  ``GET /v1/runs/{id}/events`` (SSE), reconnecting with ``Last-Event-ID`` when
                       a stream ends (1 s after an ``end`` event, as ``EventSource`` retries)

Per run: the run's own duration (``run_started`` .. ``run_finished`` in its events.jsonl, what the
API reports as ``started`` / ``finished``), the wall time from ``POST`` to ``run_finished``, and the
CPU seconds of the bench process (the load generator: it shares the 2 cores with the pipeline), of
Serve's replica and proxy (and controller), and of the rest of the cluster's process tree (the job's
driver and workers, raylet, GCS, dashboard).  ``--profile``: py-spy samples the replica and the
proxy during each loaded run (collapsed stacks in bench/.runs/pipelines_api-<role>-<round>.txt).  Under load: requests/s and p50/p99 latency of the polls, SSE
events each streamer received (it must be every event of the run, once) and their delivery lag
(receive time - the event's ``ts``), reconnects, errors.

The slowdown is median loaded run seconds / median alone run seconds; target <= 1.05.  The last line
is ``ratio N.NN`` (that slowdown).  Results: bench/.runs/pipelines_api.json.

    .venv/bin/python bench/pipelines_api.py                      # 3 rounds, 50 clients (~6 min)
    .venv/bin/python bench/pipelines_api.py --rounds 1 --rows 50000 --clients 20
    .venv/bin/python bench/pipelines_api.py --poll-interval 0    # pollers back to back
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))  # the test suite's cluster and server helpers

import httpx  # noqa: E402
import psutil  # noqa: E402
from pipelines_server import TOKEN, running_server, wait_for_state  # noqa: E402
from ray_cluster import processes_of  # noqa: E402

OUT = HERE / ".runs" / "pipelines_api.json"
TARGET = 1.05
ROLES = {"ray::ServeReplica": "replica", "ray::ProxyActor": "proxy", "ray::ServeController": "controller"}
INPUT = "api_bench.jsonl"
PIPELINE = f"""\
name: api-bench
nodes:
  - id: docs
    op: read_jsonl
    with: {{paths: ["{INPUT}"]}}
  - id: whitespace
    op: whitespace_normalization_mapper
    input: docs
  - id: long_enough
    op: words_num_filter
    input: whitespace
    with: {{min_num: 10}}
  - id: alnum
    op: alphanumeric_filter
    input: long_enough
    with: {{min_ratio: 0.6}}
  - id: dedup
    op: document_minhash_deduplicator
    input: alnum
  - id: out
    op: write_jsonl
    input: dedup
    with: {{path: "{{run_dir}}/out"}}
"""
SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "ta", "shi", "po", "den", "var", "el", "sun", "tor", "bra", "qui", "zo",
             "an", "fe", "gu", "hol"]


def write_inputs(folder: Path, rows: int, seed: int = 0) -> Path:
    """``rows`` JSON lines ``{id, text}``: see the module's docstring."""
    rng = random.Random(seed)
    vocab = sorted({"".join(rng.choices(SYLLABLES, k=rng.randint(1, 4))) for _ in range(30_000)})
    rng.shuffle(vocab)
    weights = list(__import__("itertools").accumulate(1 / (rank + 1) for rank in range(len(vocab))))
    texts: list[str] = []
    path = folder / INPUT
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(rows):
            roll = rng.random()
            if roll < 0.05:
                words = rng.choices(vocab, cum_weights=weights, k=rng.randint(3, 8))
            elif roll < 0.09 and texts:
                words = rng.choice(texts).split()  # an exact copy
            elif roll < 0.17 and texts:
                words = rng.choice(texts).split()  # a near copy: a word or three changed
                for _ in range(rng.randint(1, 3)):
                    words[rng.randrange(len(words))] = rng.choice(vocab)
            else:
                words = rng.choices(vocab, cum_weights=weights, k=rng.randint(30, 120))
            text = " ".join(words)
            if len(words) >= 30 and len(texts) < 20_000:
                texts.append(text)
            if rng.random() < 0.02:
                text += " " + "%$#@!" * rng.randint(20, 60)  # mostly punctuation: alphanumeric_filter's
            fh.write(json.dumps({"id": f"doc-{i}", "text": text}) + "\n")
    return path


# -- CPU of the cluster's processes ------------------------------------------------------------

class ClusterCPU:
    """Every 2 s: CPU time of each process of the cluster's tree, by role: Serve's replica, proxy
    and controller, and the rest (the job's driver and workers, raylet, GCS, dashboard).  A process
    first seen after the start counts whole (it started during the phase)."""

    def __init__(self, cluster: Any, every: float = 2.0) -> None:
        self.cluster, self.every = cluster, every
        self.first: dict[int, float] = {}
        self.last: dict[int, tuple[str, float]] = {}
        self._opening = True
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="cluster-cpu")

    def sample(self) -> None:
        for pid in processes_of([p.pid for p in self.cluster.procs], self.cluster.temp_dir):
            try:
                proc = psutil.Process(pid)
                with proc.oneshot():
                    title = " ".join(proc.cmdline())
                    times = proc.cpu_times()
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
            cpu = times.user + times.system
            kind = next((role for prefix, role in ROLES.items() if title.startswith(prefix)), "cluster")
            self.first.setdefault(pid, cpu if self._opening else 0.0)
            self.last[pid] = (kind, cpu)

    def seconds(self) -> dict[str, float]:
        out = {role: 0.0 for role in (*ROLES.values(), "cluster")}
        for pid, (kind, cpu) in self.last.items():
            out[kind] += cpu - self.first.get(pid, 0.0)
        return out

    def pid_of(self, role: str) -> int | None:
        return next((pid for pid, (kind, _) in self.last.items() if kind == role), None)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.sample()

    def __enter__(self) -> ClusterCPU:
        self.sample()
        self._opening = False
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()


def process_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# -- the load ----------------------------------------------------------------------------------

@dataclass
class LoadStats:
    latencies: dict[str, list[float]] = field(default_factory=lambda: {"list": [], "detail": []})
    poll_errors: int = 0
    connects: int = 0
    stream_errors: int = 0
    first_byte: list[float] = field(default_factory=list)
    events: list[int] = field(default_factory=list)  # run events (with an id) per streamer
    duplicates: int = 0
    lags: list[float] = field(default_factory=list)
    ends: int = 0
    drops: int = 0  # streams that ended without `end` (reconnected at once)
    slow: list[tuple[float, str, float]] = field(default_factory=list)  # (s after start, kind, latency) > 0.5 s
    t0: float = field(default_factory=time.perf_counter)


async def poller(client: httpx.AsyncClient, run_id: str, interval: float, first: int, stats: LoadStats) -> None:
    paths = [("list", "/v1/runs"), ("detail", f"/v1/runs/{run_id}")]
    turn = first
    if interval:
        await asyncio.sleep(random.uniform(0, interval))  # pages do not refresh in step
    while True:
        kind, path = paths[turn % 2]
        turn += 1
        start = time.perf_counter()
        try:
            response = await client.get(path)
            response.raise_for_status()
            took = time.perf_counter() - start
            stats.latencies[kind].append(took)
            if took > 0.5 and len(stats.slow) < 500:
                stats.slow.append((round(start - stats.t0, 2), kind, round(took, 3)))
        except httpx.HTTPError:
            stats.poll_errors += 1
        if interval:
            await asyncio.sleep(max(0.0, interval - (time.perf_counter() - start)))


async def probe(client: httpx.AsyncClient, latencies: list[float]) -> None:
    """``GET /health`` every 0.5 s, in both phases: the server's latency without the routes' work."""
    while True:
        start = time.perf_counter()
        with contextlib.suppress(httpx.HTTPError):
            (await client.get("/health")).raise_for_status()
            latencies.append(time.perf_counter() - start)
        await asyncio.sleep(max(0.0, 0.5 - (time.perf_counter() - start)))


async def streamer(client: httpx.AsyncClient, run_id: str, index: int, stats: LoadStats) -> None:
    """Follow the run's events as ``EventSource`` does: reconnect with the last id after a drop."""
    last_id: str | None = None
    seen: set[str] = set()
    stats.events.append(0)
    while True:
        headers = {"Last-Event-ID": last_id} if last_id else {}
        ended = False
        start = time.perf_counter()
        try:
            async with client.stream("GET", f"/v1/runs/{run_id}/events", headers=headers,
                                     timeout=httpx.Timeout(30.0, read=None)) as response:
                response.raise_for_status()
                stats.connects += 1
                stats.first_byte.append(time.perf_counter() - start)
                event: dict[str, str] = {}
                async for line in response.aiter_lines():
                    if line.startswith(":"):
                        continue
                    if line:
                        name, _, value = line.partition(":")
                        event[name] = value[1:] if value.startswith(" ") else value
                        continue
                    if "id" in event:  # one of the run's events.jsonl records
                        last_id = event["id"]
                        if last_id in seen:
                            stats.duplicates += 1
                        seen.add(last_id)
                        stats.events[index] += 1
                        with contextlib.suppress(ValueError, TypeError, KeyError):
                            stats.lags.append(time.time() - float(json.loads(event["data"])["ts"]))
                    elif event.get("event") == "end":
                        ended = True
                        stats.ends += 1
                    event = {}
        except httpx.HTTPError:
            stats.stream_errors += 1
            await asyncio.sleep(1.0)
            continue
        if not ended:
            stats.drops += 1
        else:
            await asyncio.sleep(1.0)  # EventSource's retry after the server closed the stream


# -- one run -----------------------------------------------------------------------------------

def start_profiles(cluster_cpu: ClusterCPU, round_: int) -> list[subprocess.Popen]:
    """py-spy on the replica and the proxy until stopped (SIGINT writes the collapsed stacks)."""
    py_spy = Path(sys.executable).with_name("py-spy")
    procs = []
    for role in ("replica", "proxy"):
        pid = cluster_cpu.pid_of(role)
        if pid is None or not py_spy.exists():
            continue
        out = OUT.with_name(f"pipelines_api-{role}-{round_}.txt")
        procs.append(subprocess.Popen([str(py_spy), "record", "--pid", str(pid), "--format", "raw", "--rate", "50",
                                       "--nonblocking", "--output", str(out)], stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL))
    return procs


def stop_profiles(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        proc.send_signal(2)  # SIGINT: py-spy writes what it sampled
    for proc in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=30)

def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


async def run_once(server: Any, yaml_text: str, loaded: bool, args: argparse.Namespace,
                   round_: int) -> dict[str, Any]:
    limits = httpx.Limits(max_connections=args.clients + 20, max_keepalive_connections=args.clients + 20)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(base_url=server.url, headers=headers, timeout=60.0, limits=limits) as client:
        with ClusterCPU(server.cluster) as cluster_cpu:
            cpu0, load0 = process_cpu(), os.getloadavg()[0]
            submitted = time.time()
            response = await client.post("/v1/runs", json={"yaml": yaml_text})
            response.raise_for_status()
            run_id = response.json()["id"]
            stats = LoadStats()
            health: list[float] = []
            tasks: list[asyncio.Task] = [asyncio.create_task(probe(client, health))]
            profiles = start_profiles(cluster_cpu, round_) if loaded and args.profile else []
            if loaded:
                pollers = args.clients - args.clients // 2
                tasks += [asyncio.create_task(poller(client, run_id, args.poll_interval, i, stats))
                          for i in range(pollers)]
                tasks += [asyncio.create_task(streamer(client, run_id, i, stats))
                          for i in range(args.clients // 2)]
            load_start = time.perf_counter()
            deadline = time.monotonic() + args.timeout
            while True:
                run = (await client.get(f"/v1/runs/{run_id}")).json()
                if run["state"] in ("succeeded", "failed", "cancelled", "crashed"):
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"run {run_id} not done after {args.timeout} s: {run['state']}")
                await asyncio.sleep(1.0)
            observed = time.time()
            await asyncio.sleep(args.tail)  # the streamers get their `end`
            load_s = time.perf_counter() - load_start
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            cpu_client = process_cpu() - cpu0
            stop_profiles(profiles)
        if run["state"] != "succeeded":
            raise RuntimeError(f"run {run_id} {run['state']}: {run.get('reason')}")
    run_dir = Path(run["run_dir"])
    lines = sum(1 for _ in open(run_dir / "events.jsonl", "rb"))
    seconds = run["finished"] - run["started"]
    out: dict[str, Any] = {
        "phase": "loaded" if loaded else "alone", "run_id": run_id, "run_s": round(seconds, 3),
        "wall_s": round(run["finished"] - submitted, 3), "observed_s": round(observed - submitted, 3),
        "start_s": round(run["started"] - submitted, 3), "rows_out": (run["nodes"][-1]["counts"] or {}).get("rows_out"),
        "client_cpu_s": round(cpu_client, 2), "client_cores": round(cpu_client / load_s, 3),
        **{f"{role}_cpu_s": round(cpu, 2) for role, cpu in cluster_cpu.seconds().items()},
        "load_avg": round(load0, 2), "events_in_file": lines,
        "health_p50_ms": round(percentile(health, 50) * 1000, 1) if health else None,
        "health_p99_ms": round(percentile(health, 99) * 1000, 1) if health else None,
        "node_s": {n["id"]: (n["counts"] or {}).get("seconds") for n in run["nodes"]},
    }
    if loaded:
        polls = stats.latencies["list"] + stats.latencies["detail"]
        ms = lambda v: None if v is None else round(v * 1000, 1)  # noqa: E731
        out.update({
            "clients": args.clients, "window_s": round(load_s, 2), "requests": len(polls),
            "requests_per_s": round(len(polls) / load_s, 1), "poll_errors": stats.poll_errors,
            "p50_ms": ms(percentile(polls, 50)), "p99_ms": ms(percentile(polls, 99)),
            "list_p50_ms": ms(percentile(stats.latencies["list"], 50)),
            "list_p99_ms": ms(percentile(stats.latencies["list"], 99)),
            "detail_p50_ms": ms(percentile(stats.latencies["detail"], 50)),
            "detail_p99_ms": ms(percentile(stats.latencies["detail"], 99)),
            "streamers": len(stats.events), "events_min": min(stats.events, default=0),
            "events_max": max(stats.events, default=0), "events_total": sum(stats.events),
            "duplicate_events": stats.duplicates, "stream_connects": stats.connects,
            "stream_errors": stats.stream_errors, "ends": stats.ends, "stream_drops": stats.drops,
            "first_byte_p50_ms": ms(percentile(stats.first_byte, 50)),
            "lag_p50_ms": ms(percentile(stats.lags, 50)), "lag_p99_ms": ms(percentile(stats.lags, 99)),
            "slow_polls": stats.slow,  # (s after the load began, kind, seconds) of polls over 0.5 s
            "run_started_at": round(run["started"] - submitted, 2),
        })
    return out


# -- report ------------------------------------------------------------------------------------

def row(r: dict[str, Any]) -> str:
    base = (f"{r['phase']:<7}{r['run_s']:>7.1f}{r['wall_s']:>7.1f}{r['client_cores']:>7.2f}"
            f"{r['replica_cpu_s']:>8.1f}{r['proxy_cpu_s']:>6.1f}{r['cluster_cpu_s']:>8.1f}{r['load_avg']:>6.1f}"
            f"{r['health_p50_ms'] or 0:>8.1f}{r['health_p99_ms'] or 0:>8.1f}")
    if r["phase"] != "loaded":
        return base
    return base + (f"{r['requests_per_s']:>7.1f}{r['p50_ms']:>8.1f}{r['p99_ms']:>8.1f}"
                   f"{r['events_min']:>5}/{r['events_in_file']:<4}{r['stream_connects']:>5}"
                   f"{r['lag_p50_ms']:>7.0f}{r['lag_p99_ms']:>7.0f}"
                   f"{r['poll_errors'] + r['stream_errors'] + r['stream_drops']:>5}")


HEADER = (f"{'phase':<7}{'run s':>7}{'wall s':>7}{'client':>7}{'replica':>8}{'proxy':>6}{'cluster':>8}{'load':>6}{'hlth50':>8}{'hlth99':>8}"
          f"{'req/s':>7}{'p50 ms':>8}{'p99 ms':>8}{'events':>10}{'conn':>5}{'lag50':>7}{'lag99':>7}{'err':>5}")
LEGEND = ("run s: run_started..run_finished; wall s: POST..run_finished; client: the bench process's cores "
          "(CPU s / s); replica, proxy: CPU s of Serve's; cluster: the rest of the cluster's CPU s (the job); "
          "load: 1-min load average at the start; hlth50/99: GET /health latency ms (a probe every 0.5 s, "
          "both phases); req/s, p50, p99: the pollers'; events: fewest SSE run events a streamer got / lines in "
          "events.jsonl; conn: stream connections; lag: event delivery lag ms; err: failed requests + dropped streams")


def median(results: list[dict[str, Any]], phase: str, key: str) -> float | None:
    values = [r[key] for r in results if r["phase"] == phase and r.get(key) is not None]
    return statistics.median(values) if values else None


def ingress_env(ingress: str, tmp: Path) -> dict[str, str] | None:
    """The cluster nodes' environment for Serve's HAProxy ingress (kept on loopback, as the
    embedded Ray does it: ``raypress.dag.haproxy_loopback``); None for Serve's Python proxy."""
    if ingress == "proxy":
        return None
    from raypress.dag.haproxy_loopback import (BINARY_ENV, DRAIN_ENV, EMBEDDED_DRAIN_S, HA_PROXY_ENV,
                                               haproxy_binary, install_wrapper)

    real = haproxy_binary()
    if real is None:
        raise SystemExit("--ingress haproxy: haproxy is not installed (apt-get install haproxy)")
    return {HA_PROXY_ENV: "1", BINARY_ENV: str(install_wrapper(real, tmp)), DRAIN_ENV: EMBEDDED_DRAIN_S}


async def bench(args: argparse.Namespace) -> int:
    tmp = Path(tempfile.mkdtemp(prefix="rp-api-bench-"))
    results: list[dict[str, Any]] = []
    try:
        print(f"starting a 2-CPU cluster and `raypress server` in {tmp} ...", flush=True)
        t0 = time.monotonic()
        with running_server(tmp, node_env=ingress_env(args.ingress, tmp)) as server:
            if args.client_nice:  # after the cluster and the server started: they must not inherit it
                os.nice(args.client_nice)
            size = write_inputs(tmp / "work", args.rows).stat().st_size
            yaml_text = PIPELINE
            print(f"up in {time.monotonic() - t0:.0f} s; {args.rows:,} rows ({size / 1e6:.0f} MB); warm-up ...",
                  flush=True)
            for _ in range(args.warmup):  # untimed: the input in the page cache, the job path once
                with server.client() as client:
                    run_id = client.post("/v1/runs", json={"yaml": yaml_text}).raise_for_status().json()["id"]
                    run = wait_for_state(client, run_id, ("succeeded", "failed", "cancelled", "crashed"), args.timeout)
                    if run["state"] != "succeeded":
                        raise RuntimeError(f"warm-up run {run['state']}: {run.get('reason')}")
                    print(f"warm-up: {run['finished'] - run['started']:.1f} s", flush=True)
            print(LEGEND)
            print(HEADER, flush=True)
            for round_ in range(args.rounds):
                order = (False, True) if round_ % 2 == 0 else (True, False)  # alone first, then loaded first
                for loaded in order:
                    result = await run_once(server, yaml_text, loaded, args, round_ + 1)
                    result["round"] = round_ + 1
                    results.append(result)
                    print(row(result), flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    alone, loaded = median(results, "alone", "run_s"), median(results, "loaded", "run_s")
    ratio = loaded / alone
    wall_ratio = median(results, "loaded", "wall_s") / median(results, "alone", "wall_s")
    summary = {key: median(results, "loaded", key) for key in (
        "requests_per_s", "p50_ms", "p99_ms", "list_p50_ms", "list_p99_ms", "detail_p50_ms", "detail_p99_ms",
        "events_min", "events_in_file", "lag_p50_ms", "lag_p99_ms", "client_cores", "replica_cpu_s",
        "proxy_cpu_s", "health_p50_ms", "health_p99_ms")}
    summary |= {"alone_client_cores": median(results, "alone", "client_cores"),
                "alone_replica_cpu_s": median(results, "alone", "replica_cpu_s"),
                "alone_proxy_cpu_s": median(results, "alone", "proxy_cpu_s"),
                "alone_health_p50_ms": median(results, "alone", "health_p50_ms"),
                "alone_health_p99_ms": median(results, "alone", "health_p99_ms"),
                "errors": sum(r.get("poll_errors", 0) + r.get("stream_errors", 0) for r in results),
                "stream_drops": sum(r.get("stream_drops", 0) for r in results),
                "duplicate_events": sum(r.get("duplicate_events", 0) for r in results)}
    ok = ratio <= TARGET
    verdict = (f"slowdown {ratio:.3f} (median run {loaded:.1f} s loaded / {alone:.1f} s alone; wall "
               f"{wall_ratio:.3f}) with {args.clients} clients: {'within' if ok else 'OVER'} the "
               f"{(TARGET - 1) * 100:.0f}% target")
    print()
    print(f"medians over {args.rounds} rounds (loaded): {summary['requests_per_s']} req/s, poll p50 "
          f"{summary['p50_ms']} ms / p99 {summary['p99_ms']} ms (list {summary['list_p50_ms']} / "
          f"{summary['list_p99_ms']}, one run {summary['detail_p50_ms']} / {summary['detail_p99_ms']}); "
          f"SSE events per streamer >= {summary['events_min']} of {summary['events_in_file']}, lag p50 "
          f"{summary['lag_p50_ms']} ms / p99 {summary['lag_p99_ms']} ms; {summary['errors']} errors, "
          f"{summary['stream_drops']} dropped streams, {summary['duplicate_events']} duplicate events; GET /health "
          f"p50 / p99 {summary['health_p50_ms']} / {summary['health_p99_ms']} ms (alone: "
          f"{summary['alone_health_p50_ms']} / {summary['alone_health_p99_ms']})")
    print(f"CPU: the load generator used {summary['client_cores']} cores (alone: {summary['alone_client_cores']}); "
          f"per loaded run Serve's replica {summary['replica_cpu_s']} CPU s and proxy {summary['proxy_cpu_s']} "
          f"(alone: {summary['alone_replica_cpu_s']} and {summary['alone_proxy_cpu_s']}) -- on 2 cores, "
          f"shared with the pipeline")
    print(verdict)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({
        "when": time.strftime("%Y-%m-%d %H:%M:%S"), "args": vars(args), "cpus": os.cpu_count(),
        "pipeline": PIPELINE, "results": results,
        "median_run_s": {"alone": alone, "loaded": loaded}, "slowdown": round(ratio, 4),
        "wall_slowdown": round(wall_ratio, 4), "loaded": summary, "target": TARGET, "within_target": ok,
        "verdict": verdict}, indent=1))
    print(f"results: {OUT.relative_to(REPO)}")
    print(f"ratio {ratio:.2f}", flush=True)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="alone/loaded pairs, alternating order")
    parser.add_argument("--rows", type=int, default=250_000, help="input rows (~25 s per run on 2 idle cores)")
    parser.add_argument("--clients", type=int, default=50, help="half poll, half stream events")
    parser.add_argument("--poll-interval", type=float, default=1.0,
                        help="seconds between a poller's requests (0: back to back)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed runs of the pipeline first")
    parser.add_argument("--tail", type=float, default=1.5, help="seconds the load goes on after the run ends")
    parser.add_argument("--timeout", type=float, default=900, help="seconds one run may take")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir (runs, server log)")
    parser.add_argument("--profile", action="store_true", help="py-spy the replica and proxy in loaded runs")
    parser.add_argument("--client-nice", type=int, default=0, choices=range(20), metavar="0-19",
                        help="run the load generator at this CPU priority (its clients stand for machines "
                             "elsewhere: at 19 its own CPU on the 2 cores counts less against the pipeline)")
    parser.add_argument("--ingress", choices=("proxy", "haproxy"), default="proxy",
                        help="Serve's Python HTTP proxy (Ray's default) or its HAProxy ingress on the cluster's nodes")
    args = parser.parse_args()
    if args.clients < 2 or args.rounds < 1:
        parser.error("--clients >= 2 and --rounds >= 1")
    return asyncio.run(bench(args))


if __name__ == "__main__":
    sys.exit(main())
