"""GPU MoE layer: the Triton fused MoE vs the torch path at Mixtral-8x7B shapes, with decode S-MBU.

    python bench/gpu_moe.py                # 4 layers, decode batch 1/8/32/64, prefill 2048
    python bench/gpu_moe.py --layers 2 --no-sweep --no-prefill   # quicker

Needs CUDA, torch and triton (no Ray). Each of ``--layers`` MoE layers has its own random bf16
router and experts (H=4096, I=14336, E=8, k=2: 2.8 GB of experts per layer, so weights are read
from HBM, not L2). One "step" runs every layer on the same input: router GEMM, top-k softmax
gating, fused MoE. Timings are CUDA-event averages per layer:

- ``triton``: ``raypress.kernels.moe`` on CUDA (Triton gating, alignment, grouped GEMMs),
  launched eagerly, and replayed from a CUDA graph (``graph``: no launch overhead; possible
  because the Triton path never syncs with the host).
- ``torch``: ``fused_moe_torch`` on CUDA (expert-sorted pairs, cuBLAS GEMMs per expert slice,
  one host sync per layer for the expert counts).

Decode S-MBU (MoE-CAP) = bytes / latency / 4.8 TB/s (H200 HBM3e), bytes = distinct experts
activated by the whole batch x expert bytes + router bytes, per layer. Prefill reports
TFLOP/s and S-MFU against 989 TFLOP/s (H200 dense bf16). Correctness: Triton vs torch path vs
an fp32 reference on a few tokens; the script exits 1 if the Triton error is out of line.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

H200_HBM_BYTES_PER_S = 4.8e12  # NVIDIA H200 datasheet: 4.8 TB/s HBM3e
H200_BF16_DENSE_FLOPS = 989e12  # NVIDIA H200 SXM datasheet: 1,979 TFLOP/s bf16 with sparsity, dense is half


def measure(fn: Callable[[], object], iters: int, graph: bool) -> float:
    """Seconds per call of ``fn`` (CUDA events), eager or replayed from a captured CUDA graph.

    Without CUDA (``--cpu-interpret``) a wall-clock mean; ``graph`` is then ignored.
    """
    if not torch.cuda.is_available():
        fn()
        start_s = time.perf_counter()
        for _ in range(iters):
            fn()
        return (time.perf_counter() - start_s) / iters
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):  # compiles Triton kernels and warms the allocator outside any capture
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    call = fn
    if graph:
        cuda_graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(cuda_graph):
            fn()
        call = cuda_graph.replay
        call()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        call()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / 1e3 / iters


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=4096)
    parser.add_argument("--intermediate", type=int, default=14336)
    parser.add_argument("--experts", type=int, default=8)
    parser.add_argument("--top-k", type=int, default=2)
    parser.add_argument("--batches", default="1,8,32,64")
    parser.add_argument("--prefill-tokens", type=int, default=2048)
    parser.add_argument("--no-prefill", action="store_true")
    parser.add_argument("--no-sweep", action="store_true", help="skip the small decode tile sweep")
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--cpu-interpret", action="store_true",
                        help="check this script's flow on CPU with Triton's interpreter (use tiny shapes)")
    args = parser.parse_args()

    if args.cpu_interpret:
        os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported
    elif not torch.cuda.is_available():
        print("bench/gpu_moe.py: no CUDA device here; run it on a GPU machine (nothing measured).")
        return 0
    try:
        import triton
    except ImportError:
        print("bench/gpu_moe.py: triton is not installed; nothing measured.")
        return 0
    from raypress.kernels import moe, moe_triton
    from raypress.kernels.moe_reference import fused_moe_reference

    dev, dt = (torch.device("cpu"), torch.float16) if args.cpu_interpret else (torch.device("cuda"), torch.bfloat16)
    hid, inter, num_e, top_k = args.hidden, args.intermediate, args.experts, args.top_k
    name = "CPU (Triton interpreter, fp16)" if args.cpu_interpret else torch.cuda.get_device_name()
    print(f"{name} | torch {torch.__version__} | triton {triton.__version__} | "
          f"H={hid} I={inter} E={num_e} k={top_k} {str(dt).removeprefix('torch.')}, {args.layers} layers")
    gen = torch.Generator(device=dev).manual_seed(0)
    layers = []
    for _ in range(args.layers):
        layers.append({
            "router": torch.randn(num_e, hid, device=dev, dtype=dt, generator=gen) / hid**0.5,
            "w13": torch.randn(num_e, 2 * inter, hid, device=dev, dtype=dt, generator=gen) / hid**0.5,
            "w2": torch.randn(num_e, hid, inter, device=dev, dtype=dt, generator=gen) / inter**0.5,
        })
    expert_bytes = 3 * hid * inter * 2
    router_bytes = num_e * hid * 2
    print(f"expert {expert_bytes / 2**20:.0f} MiB, layer experts {num_e * expert_bytes / 2**30:.2f} GiB, "
          f"peak {H200_HBM_BYTES_PER_S / 1e12:.1f} TB/s")

    def route(x: torch.Tensor, layer: dict, backend: str) -> tuple[torch.Tensor, torch.Tensor]:
        return moe.topk_softmax(F.linear(x, layer["router"]), top_k, renormalize=True, backend=backend)

    def step(x: torch.Tensor, backend: str, config: moe_triton.MoEKernelConfig | None = None) -> list[torch.Tensor]:
        outs = []
        for layer in layers:
            weights, ids = route(x, layer, backend)
            if backend == "triton":
                outs.append(moe_triton.fused_moe(x, layer["w13"], layer["w2"], weights, ids, config=config))
            else:
                outs.append(moe.fused_moe_torch(x, layer["w13"], layer["w2"], weights, ids))
        return outs

    # ---------------------------------------------------------------- correctness
    ok = True
    for tokens in [1, 64, 333]:
        x = torch.randn(tokens, hid, device=dev, dtype=dt, generator=gen)
        layer = layers[0]
        weights, ids = route(x, layer, "triton")
        tri = moe_triton.fused_moe(x, layer["w13"], layer["w2"], weights, ids)
        tor = moe.fused_moe_torch(x, layer["w13"], layer["w2"], weights, ids)
        few = slice(0, min(tokens, 4))
        ref = fused_moe_reference(x[few].float(), layer["w13"], layer["w2"], weights[few], ids[few]).float()
        scale = ref.abs().max().item()
        err_tri = (tri[few].float() - ref).abs().max().item() / scale
        err_tor = (tor[few].float() - ref).abs().max().item() / scale
        vs_torch = (tri.float() - tor.float()).abs().max().item() / tor.float().abs().max().item()
        good = err_tri <= max(2 * err_tor, 1e-2)
        ok &= good
        print(f"check {tokens:4d} tokens: rel err vs fp32 ref triton {err_tri:.2e} torch {err_tor:.2e}; "
              f"triton vs torch {vs_torch:.2e} {'ok' if good else 'FAIL'}")

    # ---------------------------------------------------------------- decode
    print("decode (per layer; S-MBU = (distinct experts x expert bytes + router) / latency / peak):")
    for batch in [int(b) for b in args.batches.split(",")]:
        x = torch.randn(batch, hid, device=dev, dtype=dt, generator=gen)
        distinct = [torch.unique(route(x, layer, "torch")[1]).numel() for layer in layers]
        bytes_per_layer = sum(d * expert_bytes + router_bytes for d in distinct) / len(layers)
        cfg = moe_triton.default_config(batch, num_e, top_k)
        times = {
            "triton": measure(lambda: step(x, "triton", cfg), args.iters, graph=False),
            "graph": measure(lambda: step(x, "triton", cfg), args.iters, graph=True),
            "torch": measure(lambda: step(x, "torch"), args.iters, graph=False),
        }
        line = " ".join(
            f"{name} {t / len(layers) * 1e6:7.1f} us (S-MBU {bytes_per_layer / (t / len(layers)) / H200_HBM_BYTES_PER_S:5.1%})"
            for name, t in times.items()
        )
        print(f"batch {batch:3d}: distinct experts {sum(distinct) / len(distinct):.2f}/layer | {line} | "
              f"triton-graph vs torch {times['torch'] / times['graph']:.2f}x", flush=True)
        if not args.no_sweep and batch in (1, 64):
            candidates = [
                cfg,
                replace(cfg, block_n_up=32, block_n_down=32, block_k=128),
                replace(cfg, block_n_up=128, block_n_down=64, num_stages=3),
                replace(cfg, block_n_up=64, block_n_down=64, block_k=128, num_stages=3),
            ]
            for cand in candidates:
                try:
                    t = measure(lambda: step(x, "triton", cand), args.iters, graph=True) / len(layers)
                    print(f"    tiles {cand}: {t * 1e6:7.1f} us, S-MBU {bytes_per_layer / t / H200_HBM_BYTES_PER_S:5.1%}")
                except Exception as exc:  # a tile that does not fit (shared memory) is reported, not fatal
                    print(f"    tiles {cand}: failed ({type(exc).__name__}: {str(exc)[:120]})")

    # ---------------------------------------------------------------- prefill
    if not args.no_prefill:
        tokens = args.prefill_tokens
        x = torch.randn(tokens, hid, device=dev, dtype=dt, generator=gen)
        flops = 2 * tokens * top_k * 3 * hid * inter + 2 * tokens * num_e * hid
        for backend in ("triton", "torch"):
            t = measure(lambda: step(x, backend), max(3, args.iters // 4), graph=False) / len(layers)
            print(f"prefill {tokens} tokens {backend}: {t * 1e3:7.2f} ms/layer, {flops / t / 1e12:6.1f} TFLOP/s, "
                  f"S-MFU {flops / t / H200_BF16_DENSE_FLOPS:5.1%}", flush=True)
    print("correctness " + ("ok" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
