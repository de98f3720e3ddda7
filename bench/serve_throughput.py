"""Serving throughput with continuous batching: tokens/s at concurrency 1, 8 and 32 over HTTP.

The same requests (``--requests`` prompts, each generating exactly ``--max-tokens`` tokens:
``ignore_eos``) are sent to the OpenAI-compatible server with at most C in flight. Concurrency 1
is the baseline, measured in the same run: the server handling the requests one at a time.
Each other level prints its speedup over it (target: >= 4x at 32). A continuous-batching engine
wins because one decode forward reads the weights once for the whole batch.

    .venv/bin/python bench/serve_throughput.py                    # Ray Serve, a random MoE
    .venv/bin/python bench/serve_throughput.py --backend uvicorn  # same app without Ray
    .venv/bin/python bench/serve_throughput.py --model runs/moe-train-serve/.../models/model

Without ``--model`` a random-weight Mixtral-style model is written to a temporary directory
(hidden 256, 4 layers, 8 experts top-2, its tokenizer trained on this file's text): tokens/s
does not depend on the weights' values, and greedy decoding with ``ignore_eos`` fixes the work.
The second baseline is Hugging Face ``transformers``' own ``generate`` on the same checkpoint in
this process (no HTTP): the streamed TPOT at concurrency 1 against its per-token decode time
(target <= 1.5x), and tokens/s at the highest concurrency against its batched ``generate`` of the
same requests (target >= 4x).  The last line is ``ratio N.NN``: the speedup at the highest concurrency.
``--mixed-lengths`` gives the requests chat-like completion lengths (1/8 to 2x ``--max-tokens``): a
static batch then decodes every row to its longest request, which continuous batching does not
(issue 31's target: >= 1.5x at 32). ``--rounds N`` repeats each level above 1 and the batched
``generate`` N times and keeps the medians (one 96-request level lasts ~5 s: one run swings +-8%).
``--ingress`` picks Serve's ingress as ``raypress serve --ingress`` does (auto: HAProxy where installed).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def make_model(path: Path, hidden: int, layers: int, experts: int) -> Path:
    """A random MoE + a BPE trained on real text (this repository's README and docstrings)."""
    import torch

    from raypress.artifacts import ModelArtifact
    from raypress.models.bpe_tokenizer import train_bpe_tokenizer
    from raypress.models.moe import MoEForCausalLM
    from raypress.models.moe_checkpoint import save_moe
    from raypress.models.moe_config import MoEConfig

    texts = [p.read_text() for p in sorted(REPO.glob("raypress/**/*.py"))] + [(REPO / "README.md").read_text()]
    tokenizer = train_bpe_tokenizer(texts, vocab_size=2048)
    config = MoEConfig(vocab_size=tokenizer.vocab_size, hidden_size=hidden, intermediate_size=2 * hidden,
                       num_hidden_layers=layers, num_attention_heads=max(1, hidden // 32),
                       num_key_value_heads=max(1, hidden // 128), num_local_experts=experts,
                       num_experts_per_tok=2, max_position_embeddings=512, eos_token_id=tokenizer.eos_token_id)
    torch.manual_seed(0)
    save_moe(MoEForCausalLM(config).eval(), path)
    tokenizer.save(path)
    ModelArtifact(str(path), config={"kind": "moe_lm", "model": config.to_dict()}).save_manifest()
    return path


def prompts(n: int) -> list[str]:
    lines = [line.strip() for line in (REPO / "README.md").read_text().splitlines() if len(line.split()) >= 6]
    return [lines[i % len(lines)][:200] for i in range(n)]


def output_lengths(n: int, max_tokens: int, mixed: bool) -> list[int]:
    """Each request's completion length: all ``max_tokens``, or (``mixed``) lengths spread like a chat
    workload's, 1/8 to 2x ``max_tokens`` (seeded; mean ~ ``max_tokens``): what a static batch pays
    for, since it decodes every row until its longest is done."""
    if not mixed:
        return [max_tokens] * n
    import random

    rng = random.Random(0)
    return [max(1, round(max_tokens * rng.uniform(0.125, 1.875))) for _ in range(n)]


async def run_level(url: str, model: str, texts: list[str], concurrency: int, max_tokens: int | list[int]) -> tuple[float, int]:
    """(wall seconds, completion tokens) for every prompt with at most ``concurrency`` in flight
    (``max_tokens``: one length for all, or one per prompt)."""
    lengths = max_tokens if isinstance(max_tokens, list) else [max_tokens] * len(texts)
    gate = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency + 4)
    async with httpx.AsyncClient(timeout=600, limits=limits) as client:

        async def one(prompt: str, length: int) -> int:
            async with gate:
                response = await client.post(f"{url}/v1/completions", json={
                    "model": model, "prompt": prompt, "max_tokens": length, "temperature": 0,
                    "ignore_eos": True})
                response.raise_for_status()
                return int(response.json()["usage"]["completion_tokens"])

        start = time.perf_counter()
        tokens = await asyncio.gather(*(one(p, n) for p, n in zip(texts, lengths)))
        return time.perf_counter() - start, sum(tokens)


async def stream_tpot(url: str, model: str, texts: list[str], max_tokens: int) -> float:
    """Mean time between streamed tokens (s), one request at a time: what a client sees per token."""
    gaps = []
    async with httpx.AsyncClient(timeout=600) as client:
        for prompt in texts:
            times = []
            async with client.stream("POST", f"{url}/v1/completions", json={
                    "model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
                    "ignore_eos": True, "stream": True}) as response:
                response.raise_for_status()
                async for line in response.aiter_lines():
                    if line.startswith("data:") and line.strip() != "data: [DONE]" and json.loads(line[5:])["choices"]:
                        times.append(time.perf_counter())
            # per token, whatever the chunking: the first chunk is the first token, ignore_eos makes the rest exact
            gaps.append((times[-1] - times[0]) / max(max_tokens - 1, 1))
    return sum(gaps) / len(gaps)


def hf_baseline(model_dir: Path, texts: list[str], max_tokens: int, batch: int, threads: int,
                lengths: list[int] | None = None, rounds: int = 1) -> dict[str, float]:
    """Hugging Face ``transformers``' own ``generate`` on the same checkpoint, in this process (no
    HTTP): per-token decode time one request at a time ((t(N tokens) - t(1 token)) / (N - 1), greedy,
    EOS ignored) and tokens/s of the requests batched ``batch`` at a time (left-padded). With
    per-request ``lengths`` a batch decodes to its longest request and only the tokens the requests
    asked for count (what a static batch delivers). ``rounds``: the batched run's median of that many."""
    import torch
    from transformers import AutoModelForCausalLM

    from raypress.models.bpe_tokenizer import load_tokenizer

    torch.set_num_threads(threads)
    model = AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32).eval()
    tokenizer = load_tokenizer(model_dir)
    ids = [list(getattr(e, "ids", e)) for e in (tokenizer.encode(t) for t in texts)]
    pad = model.config.eos_token_id or 0

    def generate(rows: list[list[int]], new: int) -> float:
        width = max(len(r) for r in rows)
        inputs = torch.tensor([[pad] * (width - len(r)) + r for r in rows])
        mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows])
        start = time.perf_counter()
        with torch.inference_mode():
            out = model.generate(input_ids=inputs, attention_mask=mask, max_new_tokens=new, min_new_tokens=new,
                                 do_sample=False, pad_token_id=pad)
        assert out.shape[1] == width + new
        return time.perf_counter() - start

    generate(ids[:2], 2)  # warm-up
    singles = [(generate([r], max_tokens) - generate([r], 1)) / (max_tokens - 1) for r in ids[:8]]
    lengths = lengths or [max_tokens] * len(ids)
    batched = statistics.median(
        sum(generate(ids[i:i + batch], max(lengths[i:i + batch])) for i in range(0, len(ids), batch))
        for _ in range(rounds))
    return {"tpot_s": sum(singles) / len(singles), "batched_tokens_per_s": sum(lengths) / batched}


def start_server(backend: str, model_dir: Path, max_batch: int, threads: int, ingress: str = "auto"):
    """(base URL, stop function) for the app under Ray Serve (through the ``ingress`` the product
    would choose: ``raypress serve --ingress``) or plain uvicorn."""
    if backend == "serve":
        import ray
        from ray import serve

        from raypress.dag.haproxy_loopback import choose_ingress, keep_on_loopback, short_drain_when_embedded
        from raypress.serving.llm_deployment import deploy_llm
        from raypress.serving.uvicorn_thread import free_port

        print(f"ingress: {choose_ingress(ingress)}")
        keep_on_loopback()
        short_drain_when_embedded()
        ray.init(num_cpus=max(2, threads), include_dashboard=False, logging_level="ERROR", log_to_driver=False)
        url = deploy_llm({"model": str(model_dir), "model_name": "bench", "max_batch_size": max_batch,
                          "max_queue": 256, "num_cpus": threads}, port=free_port())

        def stop() -> None:
            serve.shutdown()
            ray.shutdown()

        return url, stop
    import torch

    from raypress.inference.engine import Engine
    from raypress.serving.openai_app import create_app
    from raypress.serving.uvicorn_thread import serve_in_thread

    torch.set_num_threads(threads)
    engine = Engine.from_pretrained(model_dir, max_batch_size=max_batch, max_queue=256)
    server = serve_in_thread(create_app(engine, "bench"))

    def stop_uvicorn() -> None:
        server.stop()
        engine.stop()

    return server.url, stop_uvicorn


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=["serve", "uvicorn"], default="serve")
    parser.add_argument("--model", type=Path, help="a Model directory (default: a random MoE)")
    parser.add_argument("--requests", type=int, default=64)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--threads", type=int, default=1, help="torch threads in the server")
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--experts", type=int, default=8)
    parser.add_argument("--mixed-lengths", action="store_true",
                        help="completion lengths spread from 1/8 to 2x --max-tokens (a chat-like mix) instead of all equal")
    parser.add_argument("--ingress", choices=["auto", "haproxy", "proxy"], default="auto",
                        help="Serve's ingress, as `raypress serve --ingress` (auto: HAProxy where installed)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="run each level above 1 and the batched generate this many times; the median counts")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    if args.concurrency[0] != 1:
        parser.error("the first concurrency level must be 1: it is the one-at-a-time baseline")

    with tempfile.TemporaryDirectory() as tmp:
        model_dir = args.model or make_model(Path(tmp) / "model", args.hidden, args.layers, args.experts)
        url, stop = start_server(args.backend, model_dir, max(args.concurrency), args.threads, args.ingress)
        try:
            texts = prompts(args.requests)
            lengths = output_lengths(len(texts), args.max_tokens, args.mixed_lengths)
            asyncio.run(run_level(url, "bench", texts[:4], 4, 4))  # warm-up: first-call costs out of the way
            print(f"backend={args.backend} model={model_dir if args.model else 'random MoE'} "
                  f"requests={args.requests} max_tokens={args.max_tokens}{' mixed' if args.mixed_lengths else ''} "
                  f"threads={args.threads}")
            results = []
            for concurrency in args.concurrency:
                runs = [asyncio.run(run_level(url, "bench", texts, concurrency, lengths))
                        for _ in range(1 if concurrency == 1 else args.rounds)]
                seconds, tokens = sorted(runs)[len(runs) // 2]  # the median run
                results.append({"concurrency": concurrency, "seconds": seconds, "tokens": tokens,
                                "tokens_per_s": tokens / seconds})
            tpot = asyncio.run(stream_tpot(url, "bench", texts[:8], args.max_tokens))
        finally:
            stop()
        hf = hf_baseline(model_dir, texts, args.max_tokens, max(args.concurrency), args.threads, lengths,
                         args.rounds)
    base = results[0]["tokens_per_s"]
    for r in results:
        r["speedup"] = r["tokens_per_s"] / base
        print(f"concurrency {r['concurrency']:>3}: {r['tokens_per_s']:8.1f} tok/s  {r['tokens']} tokens in "
              f"{r['seconds']:.2f} s  vs one at a time {base:.1f} tok/s  {r['speedup']:.1f}x")
    top = results[-1]
    print(f"TPOT at concurrency 1 (streamed, over HTTP): {1000 * tpot:.2f} ms against Hugging Face generate "
          f"in process {1000 * hf['tpot_s']:.2f} ms per token: {tpot / hf['tpot_s']:.2f}x (target <= 1.5x)")
    print(f"concurrency {top['concurrency']}: {top['tokens_per_s']:.1f} tok/s against Hugging Face generate "
          f"batched {top['concurrency']} at a time {hf['batched_tokens_per_s']:.1f} tok/s: "
          f"{top['tokens_per_s'] / hf['batched_tokens_per_s']:.2f}x "
          f"(target >= {'1.5x: mixed lengths, issue 31' if args.mixed_lengths else '4x'})")
    if args.json:
        args.json.write_text(json.dumps({"levels": results, "tpot_s": tpot, "hf": hf}, indent=2))
    print(f"ratio {results[-1]['speedup']:.2f}")


if __name__ == "__main__":
    main()
