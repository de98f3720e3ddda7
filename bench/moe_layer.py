"""CPU MoE layer: raypress's sorted-by-expert torch path vs Hugging Face Mixtral's per-expert loop.

Three implementations of one sparse MoE layer (router + top-k + SwiGLU experts) with the same
weights, timed in the same run at each token count:

- ``hf-loop``: ``transformers``' own ``MixtralSparseMoeBlock`` (eager experts): a one-hot mask,
  then per hit expert a ``torch.where``, a gather, the gate/up and down GEMMs, several
  temporaries and an ``index_add_``.
- ``dense``: every expert on every token, combined by a dense routing matrix
  (``fused_moe_reference``; E/k times the routed FLOPs).
- ``ours``: ``raypress.kernels.moe`` on CPU: ``topk_softmax`` + ``fused_moe`` (pairs sorted by
  expert once, per expert slice one fused gate/up GEMM, SiLU·mul into one buffer, the down
  GEMM, an in-place weight scale and an ``index_add_``), GEMMs through oneDNN for fp32; up to
  64 (token, slot) pairs the small-batch path instead (routing grouped in Python, no sort, no
  ``index_add_``: ``moe._fused_moe_small``).
- ``ours-mm``: the same with its GEMMs through ``torch.mm`` (BLAS, as the HF loop's), to show
  how much of the gain is the GEMM library and how much the sorted layout.

    .venv/bin/python bench/moe_layer.py                      # H=1024, I=3584, E=8, k=2
    .venv/bin/python bench/moe_layer.py --hidden 256 --intermediate 896

On a shared 2-core machine the absolute times swing several-fold with other load (two OpenMP
threads stall whenever one core is taken: try ``--threads 1`` for steadier numbers); the three
implementations alternate, so their ratio is steadier than their times.

Each size gets warm-up calls, then rounds that run the three in turn (so they see the same
machine load); medians are reported. Outputs must agree (checked per size). One line per size
ends in the speedup of ours over the HF loop (``2.1x``); the last line is ``ratio N.NN``, the
geometric mean of those speedups.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from raypress.kernels import moe  # noqa: E402
from raypress.kernels.moe_reference import fused_moe_reference  # noqa: E402


def build_hf_block(hidden: int, inter: int, experts: int, top_k: int, seed: int) -> torch.nn.Module:
    """transformers' MixtralSparseMoeBlock with random weights scaled like a trained layer's."""
    from transformers import MixtralConfig
    from transformers.models.mixtral.modeling_mixtral import MixtralSparseMoeBlock

    cfg = MixtralConfig(hidden_size=hidden, intermediate_size=inter, num_local_experts=experts,
                        num_experts_per_tok=top_k, experts_implementation="eager")
    block = MixtralSparseMoeBlock(cfg).eval()
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        block.gate.weight.copy_(torch.randn(block.gate.weight.shape, generator=gen) / hidden**0.5)
        block.experts.gate_up_proj.copy_(torch.randn(block.experts.gate_up_proj.shape, generator=gen) / hidden**0.5)
        block.experts.down_proj.copy_(torch.randn(block.experts.down_proj.shape, generator=gen) / inter**0.5)
    return block


def layer_fns(block: torch.nn.Module, top_k: int) -> dict[str, Callable[[torch.Tensor], torch.Tensor]]:
    router = block.gate.weight.detach()
    w13 = block.experts.gate_up_proj.detach()
    w2 = block.experts.down_proj.detach()

    def ours(x: torch.Tensor) -> torch.Tensor:
        weights, ids = moe.topk_softmax(F.linear(x, router), top_k, renormalize=True, backend="torch")
        return moe.fused_moe(x, w13, w2, weights, ids, backend="torch")

    def ours_mm(x: torch.Tensor) -> torch.Tensor:
        moe.USE_ONEDNN = False  # same algorithm, GEMMs through torch.mm (BLAS) like the HF loop
        try:
            return ours(x)
        finally:
            moe.USE_ONEDNN = True

    def dense(x: torch.Tensor) -> torch.Tensor:
        weights, ids = moe.topk_softmax(F.linear(x, router), top_k, renormalize=True, backend="torch")
        return fused_moe_reference(x, w13, w2, weights, ids)

    def hf_loop(x: torch.Tensor) -> torch.Tensor:
        return block(x.unsqueeze(0)).squeeze(0)

    return {"hf-loop": hf_loop, "dense": dense, "ours-mm": ours_mm, "ours": ours}


def time_round_robin(fns: dict[str, Callable], x: torch.Tensor, warmup: int, rounds: int) -> dict[str, float]:
    """Median seconds per call; the implementations alternate within each round."""
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(warmup):
        for fn in fns.values():
            fn(x)
    for _ in range(rounds):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn(x)
            samples[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--intermediate", type=int, default=3584)
    parser.add_argument("--experts", type=int, default=8)
    parser.add_argument("--top-k", type=int, default=2)
    parser.add_argument("--tokens", default="1,16,256,2048", help="comma-separated token counts")
    parser.add_argument("--threads", type=int, default=2, help="torch.set_num_threads for every implementation")
    parser.add_argument("--rounds", type=int, default=0, help="timed rounds per size (0: 15 up to 16 tokens, 7 up to 256, else 3)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    block = build_hf_block(args.hidden, args.intermediate, args.experts, args.top_k, args.seed)
    fns = layer_fns(block, args.top_k)
    expert_mb = 3 * args.hidden * args.intermediate * 4 / 2**20
    print(f"MoE layer H={args.hidden} I={args.intermediate} E={args.experts} k={args.top_k} fp32, "
          f"{expert_mb:.1f} MiB per expert; torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"load {os.getloadavg()[0]:.1f}")
    speedups = []
    gen = torch.Generator().manual_seed(args.seed + 1)
    with torch.inference_mode():
        for tokens in (int(t) for t in args.tokens.split(",")):
            x = torch.randn(tokens, args.hidden, generator=gen)
            outs = {name: fn(x) for name, fn in fns.items()}
            scale = outs["hf-loop"].abs().max().item()
            diff = max((out - outs["hf-loop"]).abs().max().item() for out in outs.values())
            if diff > 1e-4 * max(scale, 1.0):
                raise SystemExit(f"outputs disagree at {tokens} tokens: max|diff| {diff:.3g} (max|out| {scale:.3g})")
            rounds = args.rounds or (15 if tokens <= 16 else 7 if tokens <= 256 else 3)
            med = time_round_robin(fns, x, warmup=2 if tokens <= 256 else 1, rounds=rounds)
            speedup = med["hf-loop"] / med["ours"]
            speedups.append(speedup)
            print(f"tokens {tokens:5d}: hf-loop {med['hf-loop'] * 1e3:8.2f} ms  dense {med['dense'] * 1e3:8.2f} ms  "
                  f"ours-mm {med['ours-mm'] * 1e3:8.2f} ms  ours {med['ours'] * 1e3:8.2f} ms  "
                  f"(ours-mm vs hf-loop {med['hf-loop'] / med['ours-mm']:.1f}x, vs dense {med['dense'] / med['ours']:.1f}x, "
                  f"max|diff| {diff:.1e}, median of {rounds}, load {os.getloadavg()[0]:.1f})  speedup vs hf-loop "
                  f"{speedup:.1f}x", flush=True)
    print(f"ratio {math.exp(sum(map(math.log, speedups)) / len(speedups)):.2f}")


if __name__ == "__main__":
    main()
