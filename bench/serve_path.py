"""Serving path attribution: where a streamed token's time goes between the engine and the client.

The same workload -- ``--requests`` prompts, greedy, ``ignore_eos``, each streaming ``--max-tokens``
tokens (``--mixed-lengths``: chat-like lengths from 1/8 to 2x) -- through each path, at each
concurrency, one fresh process (and Ray session) per path:

  engine      the engine in process: ``Engine.add_request`` and its events, no HTTP, no Ray; the
              client woken for every token in the same process
  engine-quiet  the same, the client woken only for the first token and the end: what the engine
              delivers with the least client work, the baseline of the ``x engine`` column
  handle      a Serve deployment handle (``LLMServer.stream_tokens``), no HTTP
  serve       HTTP through Serve's proxy, SSE, one chunk per token (``stream_interval`` 1)
  serve-tput  the same with ``RAY_SERVE_THROUGHPUT_OPTIMIZED=1`` (Serve's throughput settings;
              ``serve-tput-N`` with chunks of N tokens)
  serve-N     HTTP through Serve's proxy, chunks of N tokens after the first (N = 4, 8, 16)
  serve-lean-N  (not in the default list) serve-N with only the settings of the throughput mode that
              open no port: user code on Ray's own event loop, the router on the proxy's loop, the
              access log buffered (``LEAN_SERVE_ENV``)
  haproxy     HTTP through Serve's HAProxy ingress (``RAY_SERVE_ENABLE_HA_PROXY=1``), when the
              ``haproxy`` binary is installed; ``haproxy-N``: with chunks of N tokens
  uvicorn     the same FastAPI app under uvicorn in its own process, no Ray

For each: tokens/s, time to first token p50/p99, inter-token latency p50/p99 (a chunk's gap
shared by its tokens), tokens per chunk, and CPU seconds per 1,000 tokens of each process on the
path (client, proxy, replica or server, the engine's own process, haproxy).  The last line is ``ratio N.NN``: the
``--target`` path's tokens/s at the highest concurrency over the engine's in process.

    python bench/serve_path.py                                  # every path, 1 16 32 64
    python bench/serve_path.py --paths engine,serve,serve-8 --concurrency 1 32
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(HERE))

PATHS = ["engine", "engine-quiet", "handle", "serve", "serve-tput", "serve-4", "serve-8", "serve-16", "haproxy", "haproxy-8",
         "uvicorn"]
LEAN_SERVE_ENV = {"RAY_SERVE_RUN_USER_CODE_IN_SEPARATE_THREAD": "0", "RAY_SERVE_RUN_ROUTER_IN_SEPARATE_LOOP": "0",
                  "RAY_SERVE_REQUEST_PATH_LOG_BUFFER_SIZE": "1000"}
THREADS = 1  # torch threads of the engine, wherever it runs (the replica reserves one CPU)


# -- the workload ---------------------------------------------------------------------------------

def workload(n: int, max_tokens: int, mixed: bool) -> tuple[list[str], list[int]]:
    from serve_throughput import output_lengths, prompts

    return prompts(n), output_lengths(n, max_tokens, mixed)


class Recorder:
    """Per request: send time, chunk arrival times and tokens per chunk."""

    def __init__(self) -> None:
        self.requests: list[tuple[float, list[tuple[float, float]]]] = []

    def add(self, sent: float, chunks: list[tuple[float, float]]) -> None:
        self.requests.append((sent, chunks))

    def summary(self, wall: float) -> dict[str, float]:
        tokens = sum(n for _, chunks in self.requests for _, n in chunks)
        ttft = [chunks[0][0] - sent for sent, chunks in self.requests if chunks]
        itl: list[float] = []
        n_chunks = 0
        for _, chunks in self.requests:
            n_chunks += len(chunks)
            for (before, _), (at, n) in zip(chunks, chunks[1:]):
                itl += [(at - before) / max(n, 1)] * max(1, round(n))
        tokens = round(tokens)
        return {"tokens": tokens, "wall": wall, "tokens_per_s": tokens / wall,
                "ttft_p50_ms": 1e3 * pct(ttft, 50), "ttft_p99_ms": 1e3 * pct(ttft, 99),
                "itl_p50_ms": 1e3 * pct(itl, 50), "itl_p99_ms": 1e3 * pct(itl, 99),
                "tokens_per_chunk": tokens / max(n_chunks, 1)}


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


async def gated(concurrency: int, jobs: list[Any]) -> float:
    gate = asyncio.Semaphore(concurrency)

    async def one(job: Any) -> None:
        async with gate:
            await job()

    start = time.perf_counter()
    await asyncio.gather(*(one(job) for job in jobs))
    return time.perf_counter() - start


# -- clients ---------------------------------------------------------------------------------------

async def level_engine(engine: Any, ids: list[list[int]], lengths: list[int], concurrency: int,
                       every: int = 1) -> dict:
    """``every`` 1: the client is woken for every token (TTFT and ITL as a streaming caller sees
    them, its wake-ups competing with the step thread for the GIL); a huge ``every``: only for the
    first token and the end (what the engine delivers with the least client work)."""
    from raypress.inference.sampling import SamplingParams

    rec = Recorder()

    def job(prompt: list[int], n: int) -> Any:
        async def run() -> None:
            sent = time.perf_counter()
            handle = engine.add_request(prompt, SamplingParams(max_tokens=n, temperature=0, ignore_eos=True))
            chunks = [(time.perf_counter(), len(t)) async for t in _token_batches(handle, every)]
            rec.add(sent, chunks)
        return run

    wall = await gated(concurrency, [job(p, n) for p, n in zip(ids, lengths)])
    return rec.summary(wall)


async def _token_batches(handle: Any, every: int = 1) -> Any:
    async for batch in handle.batches(every):
        yield [t for e in batch for t in e.token_ids]


async def level_handle(handle: Any, ids: list[list[int]], lengths: list[int], concurrency: int) -> dict:
    rec = Recorder()

    def job(prompt: list[int], n: int) -> Any:
        async def run() -> None:
            sent = time.perf_counter()
            stream = handle.options(stream=True).stream_tokens.remote(
                prompt, {"max_tokens": n, "temperature": 0, "ignore_eos": True}, 1)
            chunks = [(time.perf_counter(), len(tokens)) async for tokens in stream]
            rec.add(sent, chunks)
        return run

    wall = await gated(concurrency, [job(p, n) for p, n in zip(ids, lengths)])
    return rec.summary(wall)


async def level_http(url: str, texts: list[str], lengths: list[int], concurrency: int,
                     interval: int | None) -> dict:
    """Streamed completions.  A chunk's token count is not in the stream (asking for logprobs to
    count them would add work to the server), so a request's first chunk counts one token and its
    other chunks share the rest (``ignore_eos`` makes the total exact)."""
    import httpx

    rec = Recorder()
    limits = httpx.Limits(max_connections=concurrency + 4, max_keepalive_connections=concurrency + 4)
    async with httpx.AsyncClient(timeout=600, limits=limits) as client:

        def job(prompt: str, n: int) -> Any:
            async def run() -> None:
                body = {"model": "bench", "prompt": prompt, "max_tokens": n, "temperature": 0,
                        "ignore_eos": True, "stream": True}
                if interval is not None:
                    body["stream_interval"] = interval
                sent = time.perf_counter()
                chunks = []
                async with client.stream("POST", f"{url}/v1/completions", json=body) as response:
                    response.raise_for_status()
                    async for line in response.aiter_lines():
                        if not line.startswith("data:") or line.strip() == "data: [DONE]":
                            continue
                        if json.loads(line[5:])["choices"]:
                            chunks.append(time.perf_counter())
                rest = (n - 1) / max(len(chunks) - 1, 1)
                rec.add(sent, [(t, 1 if k == 0 else rest) for k, t in enumerate(chunks)])
            return run

        wall = await gated(concurrency, [job(p, n) for p, n in zip(texts, lengths)])
    return rec.summary(wall)


# -- processes on the path -------------------------------------------------------------------------

def path_processes(server_pid: int | None = None) -> dict[str, Any]:
    """The processes a token crosses, by role (psutil objects)."""
    import psutil

    roles: dict[str, Any] = {"client": psutil.Process()}
    for proc in psutil.process_iter(["cmdline", "name"]):
        cmd = " ".join(proc.info.get("cmdline") or [])
        if "ServeReplica" in cmd:
            roles["replica"] = proc
        elif "ProxyActor" in cmd:
            roles["proxy"] = proc
        elif "raypress.inference.engine_process" in cmd:
            roles["engine"] = proc
        elif (proc.info.get("name") or "") == "haproxy":
            roles.setdefault("haproxy", proc)
        elif server_pid is not None and proc.pid == server_pid:
            roles["server"] = proc
    return roles


def cpu_seconds(roles: dict[str, Any]) -> dict[str, float]:
    out = {}
    for role, proc in roles.items():
        with contextlib.suppress(Exception):  # a process gone: no figure for it
            t = proc.cpu_times()
            out[role] = t.user + t.system
    return out


def measure(levels: list[int], run_level: Any, roles: dict[str, Any]) -> list[dict]:
    results = []
    for concurrency in levels:
        before = cpu_seconds(roles)
        summary = asyncio.run(run_level(concurrency))
        after = cpu_seconds(roles)
        summary["concurrency"] = concurrency
        summary["cpu_per_1k"] = {role: 1000 * (after[role] - before[role]) / summary["tokens"]
                                 for role in after if role in before}
        results.append(summary)
    return results


# -- one path per child process --------------------------------------------------------------------

def child(path: str, model: str, out: str, args: argparse.Namespace) -> None:
    texts, lengths = workload(args.requests, args.max_tokens, args.mixed_lengths)
    batch = max(args.concurrency)
    if path in ("engine", "engine-quiet"):
        import torch

        from raypress.inference.engine import Engine

        torch.set_num_threads(THREADS)
        engine = Engine.from_pretrained(model, max_batch_size=batch, max_queue=4 * args.requests)
        engine.start()
        ids = [engine.encode(t) for t in texts]
        asyncio.run(level_engine(engine, ids[:4], [4] * 4, 4))  # warm-up
        every = 10**9 if path == "engine-quiet" else 1
        results = measure(args.concurrency, lambda c: level_engine(engine, ids, lengths, c, every), path_processes())
        engine.stop()
    elif path == "uvicorn":
        from raypress.serving.uvicorn_thread import free_port

        port = free_port()
        server = subprocess.Popen([sys.executable, __file__, "--uvicorn-server", model, str(port), str(batch),
                                   str(4 * args.requests)])
        try:
            url = f"http://127.0.0.1:{port}"
            wait_for(url)
            asyncio.run(level_http(url, texts[:4], [4] * 4, 4, None))
            results = measure(args.concurrency, lambda c: level_http(url, texts, lengths, c, None),
                              path_processes(server.pid))
        finally:
            server.terminate()
            server.wait(30)
    else:
        import ray
        from ray import serve

        from raypress.serving.llm_deployment import deploy_llm
        from raypress.serving.uvicorn_thread import free_port

        ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
        url = deploy_llm({"model": model, "model_name": "bench", "max_batch_size": batch,
                          "max_queue": 4 * args.requests, "num_cpus": THREADS}, port=free_port())
        try:
            interval = int(path.split("-")[-1]) if path.split("-")[-1].isdigit() else 1
            roles = path_processes()
            if path == "handle":
                from raypress.models.bpe_tokenizer import load_tokenizer

                tok = load_tokenizer(model)
                ids = [list(getattr(e, "ids", e)) for e in (tok.encode(t) for t in texts)]
                handle = serve.get_app_handle("llm")
                asyncio.run(level_handle(handle, ids[:4], [4] * 4, 4))
                roles.pop("proxy", None)
                results = measure(args.concurrency, lambda c: level_handle(handle, ids, lengths, c), roles)
            else:
                asyncio.run(level_http(url, texts[:4], [4] * 4, 4, interval))
                results = measure(args.concurrency, lambda c: level_http(url, texts, lengths, c, interval),
                                  path_processes())
        finally:
            serve.shutdown()
            ray.shutdown()
    Path(out).write_text(json.dumps(results))


def wait_for(url: str, timeout: float = 120) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError):  # not listening yet
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        time.sleep(0.2)
    raise RuntimeError(f"{url} did not come up")


def uvicorn_server(model: str, port: int, batch: int, queue: int) -> None:
    import torch
    import uvicorn

    from raypress.inference.engine import Engine
    from raypress.serving.openai_app import create_app

    torch.set_num_threads(THREADS)
    engine = Engine.from_pretrained(model, max_batch_size=batch, max_queue=queue)
    uvicorn.run(create_app(engine, "bench"), host="127.0.0.1", port=port, log_level="warning")


def env_for(path: str) -> dict[str, str] | None:
    env = {**os.environ, "PYTHONPATH": str(REPO), "RAY_SERVE_LOG_TO_STDERR": "0"}
    if path.startswith("serve-lean"):
        env.update(LEAN_SERVE_ENV)
    if path.startswith("serve-tput"):
        env["RAY_SERVE_THROUGHPUT_OPTIMIZED"] = "1"
    if path.startswith("haproxy"):
        if shutil.which("haproxy") is None:
            return None
        env["RAY_SERVE_ENABLE_HA_PROXY"] = "1"
        env.setdefault("RAY_SERVE_DIRECT_INGRESS_MIN_DRAINING_PERIOD_S", "2")  # as raypress's embedded Ray
    return env


# -- the table ----------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--paths", default=",".join(PATHS))
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 16, 32, 64])
    ap.add_argument("--requests", type=int, default=64)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--mixed-lengths", action="store_true")
    ap.add_argument("--model", help="a Model directory (default: a random MoE, as bench/serve_throughput.py)")
    ap.add_argument("--target", default="serve-8", help="the path the ratio line reports (serve-8: the shipped default)")
    ap.add_argument("--rounds", type=int, default=1, help="runs of every path, alternating; the median per level")
    ap.add_argument("--child", nargs=3, metavar=("PATH", "MODEL", "OUT"), help=argparse.SUPPRESS)
    ap.add_argument("--uvicorn-server", nargs=4, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.uvicorn_server:
        model, port, batch, queue = args.uvicorn_server
        uvicorn_server(model, int(port), int(batch), int(queue))
        return
    if args.child:
        child(*args.child, args)
        return
    from serve_throughput import make_model

    paths = args.paths.split(",")
    runs: dict[str, list[list[dict]]] = {p: [] for p in paths}
    results: dict[str, list[dict] | str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        model = args.model or str(make_model(Path(tmp) / "model", 256, 4, 8))
        for _ in range(args.rounds):
            for path in paths:
                if isinstance(results.get(path), str):
                    continue
                outcome = run_path(path, model, Path(tmp), args)
                if isinstance(outcome, str):
                    results[path] = outcome
                else:
                    runs[path].append(outcome)
    for path in paths:
        if runs[path] and not isinstance(results.get(path), str):
            results[path] = [median_row([run[k] for run in runs[path]]) for k in range(len(runs[path][0]))]
    report(results, args)


def run_path(path: str, model: str, tmp: Path, args: argparse.Namespace) -> list[dict] | str:
    """One child process running ``path`` at every concurrency; its rows, or why it could not run."""
    env = env_for(path)
    if env is None:
        return "haproxy is not installed"
    out = tmp / f"{path}.json"
    out.unlink(missing_ok=True)
    cmd = [sys.executable, __file__, "--child", path, model, str(out), "--requests", str(args.requests),
           "--max-tokens", str(args.max_tokens), "--concurrency", *map(str, args.concurrency)]
    if args.mixed_lengths:
        cmd.append("--mixed-lengths")
    proc = subprocess.run(cmd, env=env, cwd=REPO, capture_output=True, text=True)
    if proc.returncode != 0 or not out.exists():
        print(proc.stderr[-3000:], file=sys.stderr)
        last = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"
        return f"failed: {last}"
    return json.loads(out.read_text())


def median_row(rows: list[dict]) -> dict:
    """The run with the median tokens/s, the lower of the middle two for an even count (its other
    figures with it: they belong together)."""
    ordered = sorted(rows, key=lambda r: r["tokens_per_s"])
    return ordered[(len(ordered) - 1) // 2]


def report(results: dict[str, Any], args: argparse.Namespace) -> None:
    print(f"requests={args.requests} max_tokens={args.max_tokens}{' mixed' if args.mixed_lengths else ''} "
          f"threads={THREADS} rounds={args.rounds} (median); CPU s per 1k tokens by process (client includes "
          "the engine for 'engine')")
    print(f"{'path':11s} {'conc':>4s} {'tok/s':>8s} {'x engine':>8s} {'TTFT p50':>9s} {'p99':>7s} "
          f"{'ITL p50':>8s} {'p99':>7s} {'tok/chunk':>9s}  CPU s/1k tokens")
    base_path = "engine-quiet" if isinstance(results.get("engine-quiet"), list) else "engine"
    engine = {r["concurrency"]: r for r in results.get(base_path, []) if isinstance(results.get(base_path), list)}
    for path, rows in results.items():
        if isinstance(rows, str):
            print(f"{path:11s} {rows}")
            continue
        for r in rows:
            base = engine.get(r["concurrency"])
            rel = f"{r['tokens_per_s'] / base['tokens_per_s']:.2f}" if base else "-"
            cpu = " ".join(f"{k} {v:.2f}" for k, v in sorted(r["cpu_per_1k"].items()))
            print(f"{path:11s} {r['concurrency']:4d} {r['tokens_per_s']:8.0f} {rel:>8s} {r['ttft_p50_ms']:8.1f}ms "
                  f"{r['ttft_p99_ms']:6.1f}ms {r['itl_p50_ms']:7.2f}ms {r['itl_p99_ms']:6.1f}ms "
                  f"{r['tokens_per_chunk']:9.1f}  {cpu}")
    target = results.get(args.target)
    if isinstance(target, list) and engine:
        top = max(args.concurrency)
        mine = next(r for r in target if r["concurrency"] == top)
        print(f"{args.target} / {base_path} tokens/s at concurrency {top}:")
        print(f"ratio {mine['tokens_per_s'] / engine[top]['tokens_per_s']:.2f}")


if __name__ == "__main__":
    main()
