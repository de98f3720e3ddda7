"""Peak numbers of the machines MoE-CAP divides by, each with its source, and a measured CPU entry.

Why: S-MBU and S-MFU are only as honest as their denominators.  GPU peaks come from vendor
datasheets and are **dense** peaks (NVIDIA quotes Hopper's bf16 tensor throughput both dense,
989 TFLOP/s, and "with sparsity", 1979 TFLOP/s; the MoE-CAP repository's table lists the latter
and halves it in its S-MFU formula, we store the dense figure directly).  A CPU has no datasheet
number that fits the machine we happen to run on (shared cores, thread count, cache sizes), so
its entry is *measured* at start-up: a large-array copy for bandwidth (bytes read + written / s,
the STREAM "copy" convention) and a square matmul for FLOP/s, best of a few repeats, at the
current torch thread count.  It measures what this process can get *now*: on cores shared with
other busy processes the figure drops and scatters (fp32 matmul here: 40-95 GFLOP/s at load ~2,
3-60 at a load of 7-10 on 2 cores), which is also what the benchmarked model gets, so measure in
the same run.
Utilisations against a measured CPU peak can exceed 1 when the model's kernels beat our probe or
the load changed; that is reported, not clipped.

Capital costs are stated constants (GPU street prices as listed in the MoE-CAP repository's
``moe_cap/utils/cost_utils.py``, "approximate market prices as of late 2024/early 2025"); they
only feed ``cost_per_million_tokens`` and are assumptions, not measurements.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from functools import lru_cache

_NVIDIA_H200 = "NVIDIA H200 Tensor Core GPU datasheet (H200 SXM column), nvidia.com/en-us/data-center/h200"
_NVIDIA_H100 = "NVIDIA H100 Tensor Core GPU datasheet (H100 SXM column), nvidia.com/en-us/data-center/h100"
_NVIDIA_A100 = "NVIDIA A100 Tensor Core GPU datasheet (A100 80GB SXM column), nvidia.com/en-us/data-center/a100"
_MOE_CAP_PRICES = (
    "assumption: MoE-CAP repo moe_cap/utils/cost_utils.py GPU_COST_DICT (approximate market price "
    "late 2024/early 2025)"
)

# Canonical dtype keys; anything else (torch names, "bfloat16", ...) is normalised by ``dtype_key``.
_DTYPE_ALIASES = {
    "bf16": "bf16", "bfloat16": "bf16", "torch.bfloat16": "bf16",
    "fp16": "fp16", "float16": "fp16", "half": "fp16", "torch.float16": "fp16",
    "fp32": "fp32", "float32": "fp32", "float": "fp32", "torch.float32": "fp32",
    "fp8": "fp8", "float8": "fp8", "float8_e4m3fn": "fp8", "torch.float8_e4m3fn": "fp8",
}


def dtype_key(dtype: object) -> str:
    """Map a dtype spelling (``"bfloat16"``, ``torch.float16``, ``"fp32"``) to a table key."""
    key = _DTYPE_ALIASES.get(str(dtype).lower())
    if key is None:
        raise ValueError(f"unknown dtype {dtype!r}; known: {sorted(set(_DTYPE_ALIASES.values()))}")
    return key


@dataclass(frozen=True)
class Hardware:
    """One device's peaks and prices.  Every number names where it came from in ``sources``."""

    name: str
    peak_bandwidth: float  # bytes/s, memory <-> compute
    peak_flops: dict[str, float]  # dense FLOP/s per dtype key ("bf16", "fp16", "fp32", "fp8")
    power_w: float  # board power / TDP while busy
    capital_usd: float  # purchase price of one device
    sources: dict[str, str] = field(default_factory=dict)  # field name -> source or assumption
    measured: bool = False  # True: peaks measured on this machine, not read from a datasheet

    def flops(self, dtype: object) -> float:
        """Dense peak FLOP/s for ``dtype``; raises if this device has no figure for it."""
        key = dtype_key(dtype)
        if key not in self.peak_flops:
            raise KeyError(f"{self.name} has no peak FLOP/s for {key}; has {sorted(self.peak_flops)}")
        return self.peak_flops[key]


# fp32 here is the non-tensor-core (CUDA core) figure: torch runs fp32 matmuls that way unless TF32
# is enabled.  fp16 equals bf16 on all three.  A100 has no fp8.
HARDWARE: dict[str, Hardware] = {
    "H200": Hardware(
        name="H200",
        peak_bandwidth=4.8e12,
        peak_flops={"bf16": 989e12, "fp16": 989e12, "fp32": 67e12, "fp8": 1979e12},
        power_w=700.0,
        capital_usd=35_000.0,
        sources={
            "peak_bandwidth": _NVIDIA_H200 + ": GPU memory bandwidth 4.8 TB/s",
            "peak_flops": _NVIDIA_H200 + ": BF16/FP16 tensor 1,979 TFLOPS with sparsity -> 989 dense;"
            " FP8 3,958 with sparsity -> 1,979 dense; FP32 67 TFLOPS",
            "power_w": _NVIDIA_H200 + ": max thermal design power up to 700 W",
            "capital_usd": _MOE_CAP_PRICES + ": NVIDIA-H200-141GB 35,000",
        },
    ),
    "H100": Hardware(
        name="H100",
        peak_bandwidth=3.35e12,
        peak_flops={"bf16": 989e12, "fp16": 989e12, "fp32": 67e12, "fp8": 1979e12},
        power_w=700.0,
        capital_usd=38_000.0,
        sources={
            "peak_bandwidth": _NVIDIA_H100 + ": GPU memory bandwidth 3.35 TB/s",
            "peak_flops": _NVIDIA_H100 + ": BF16/FP16 tensor 1,979 TFLOPS with sparsity -> 989 dense;"
            " FP8 3,958 with sparsity -> 1,979 dense; FP32 67 TFLOPS",
            "power_w": _NVIDIA_H100 + ": max thermal design power up to 700 W",
            "capital_usd": _MOE_CAP_PRICES + ": NVIDIA-H100-80GB-HBM3 38,000 (their H100 SXM figure,"
            " above their H200 price; kept as listed)",
        },
    ),
    "A100": Hardware(
        name="A100",
        peak_bandwidth=2.039e12,
        peak_flops={"bf16": 312e12, "fp16": 312e12, "fp32": 19.5e12},
        power_w=400.0,
        capital_usd=19_000.0,
        sources={
            "peak_bandwidth": _NVIDIA_A100 + ": GPU memory bandwidth 2,039 GB/s",
            "peak_flops": _NVIDIA_A100 + ": BF16/FP16 tensor 312 TFLOPS dense (624 with sparsity);"
            " FP32 19.5 TFLOPS",
            "power_w": _NVIDIA_A100 + ": max TDP 400 W",
            "capital_usd": _MOE_CAP_PRICES + ": NVIDIA-A100-SXM4-80GB 19,000",
        },
    ),
}

# Torch device names contain these substrings (e.g. "NVIDIA H200", "NVIDIA H100 80GB HBM3",
# "NVIDIA A100-SXM4-80GB").  GH200 (Grace Hopper, other memory) contains "H200" but is not one.
_NAME_KEYS = ("H200", "H100", "A100")


def gpu_entry(device_name: str) -> Hardware:
    """Table entry for a CUDA device name as ``torch.cuda.get_device_name()`` spells it."""
    upper = device_name.upper()
    for key in _NAME_KEYS:
        if key in upper and "G" + key not in upper:
            return HARDWARE[key]
    raise KeyError(f"no hardware entry for {device_name!r}; known: {sorted(HARDWARE)}")


def _best_seconds(fn, min_repeats: int, budget_s: float) -> float:
    """Fastest of repeated timed calls: at least ``min_repeats``, more while ``budget_s`` lasts.

    Best-of rather than mean, because the peak is what the hardware *can* do; on shared cores a
    few repeats are slowed by neighbours and the extra ones inside the budget recover from that.
    """
    best, spent, runs = math.inf, 0.0, 0
    while runs < min_repeats or spent < budget_s:
        start = time.perf_counter()
        fn()
        took = time.perf_counter() - start
        best, spent, runs = min(best, took), spent + took, runs + 1
    return best


def measure_copy_bandwidth(nbytes: int = 64 << 20, budget_s: float = 0.2) -> float:
    """Best copy bandwidth in bytes/s (read + write counted, as STREAM copy does).

    Both a single-threaded numpy copy and torch's multi-threaded ``copy_`` run; the faster one is
    the machine's attainable peak (numpy often wins on few cores, torch on many).  ``nbytes`` per
    array should exceed the last-level cache, or the figure is cache bandwidth.
    """
    import numpy as np
    import torch

    count = nbytes // 8
    src_np = np.ones(count, dtype=np.float64)
    dst_np = np.empty_like(src_np)
    np.copyto(dst_np, src_np)  # first touch: page faults are not bandwidth
    src_t, dst_t = torch.from_numpy(src_np), torch.from_numpy(dst_np)  # same buffers, no copies
    seconds = min(
        _best_seconds(lambda: np.copyto(dst_np, src_np), 3, budget_s / 2),
        _best_seconds(lambda: dst_t.copy_(src_t), 3, budget_s / 2),
    )
    return 2 * count * 8 / seconds


def measure_matmul_flops(dtype: str = "fp32", max_size: int = 1024, budget_s: float = 0.25) -> float:
    """Best square-matmul FLOP/s (2·n³ per product) for ``dtype`` at the current thread count.

    n is ``max_size`` unless one product would take more than a quarter of the budget (bf16
    without AMX runs ~40x slower than fp32 on many CPUs): a timed 128² product predicts the cost
    of larger ones (∝ n³) and n halves until it fits, never below 128.
    """
    import torch

    torch_dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[dtype_key(dtype)]

    def operands(n: int) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.randn(n, n).to(torch_dtype), torch.randn(n, n).to(torch_dtype)

    a, b = operands(128)
    torch.mm(a, b)  # warm-up: thread pool, packing buffers
    probe = _best_seconds(lambda: torch.mm(a, b), 3, 0.03)  # best of several: one slow probe shrinks n
    n = max_size
    while n > 128 and probe * (n / 128) ** 3 > budget_s / 4:
        n //= 2
    a, b = operands(n)
    torch.mm(a, b)
    return 2 * n**3 / _best_seconds(lambda: torch.mm(a, b), 3, budget_s)


def measure_cpu(
    power_w: float = 65.0,
    capital_usd: float = 500.0,
    dtypes: tuple[str, ...] = ("fp32", "bf16"),
    copy_bytes: int = 64 << 20,
    threads: int | None = None,
) -> Hardware:
    """Measure this CPU's copy bandwidth and matmul FLOP/s (< 3 s); power and price are stated assumptions.

    ``threads``: the torch threads the measured engine runs with (a replica with ``num_cpus: 1``
    runs on one): peaks of more threads than the engine has would understate its utilisation.
    ``power_w`` defaults to 65 W, a common desktop-class CPU TDP; ``capital_usd`` to 500 USD, a
    desktop-class CPU price.  Neither is measurable from Python: pass the host's real figures when
    known (MoE-CAP's own cost model assumes a 350 W, 7,214 USD server CPU).
    """
    import torch

    before = torch.get_num_threads()
    threads = threads or before
    torch.set_num_threads(threads)
    try:
        bandwidth = measure_copy_bandwidth(copy_bytes)
        flops = {dtype_key(d): measure_matmul_flops(d) for d in dtypes}
    finally:
        torch.set_num_threads(before)
    where = f"measured on this host at start-up, {threads} torch threads"
    return Hardware(
        name=f"CPU ({threads} threads)",
        peak_bandwidth=bandwidth,
        peak_flops=flops,
        power_w=power_w,
        capital_usd=capital_usd,
        sources={
            "peak_bandwidth": f"{where}: best of numpy/torch copy of {copy_bytes >> 20} MiB, read+write bytes",
            "peak_flops": f"{where}: best square torch.mm (n <= 1024), 2n^3 FLOPs",
            "power_w": f"assumption: {power_w:g} W CPU TDP (parameter power_w)",
            "capital_usd": f"assumption: {capital_usd:g} USD CPU price (parameter capital_usd)",
        },
        measured=True,
    )


@lru_cache(maxsize=8)
def _cpu_once(threads: int | None) -> Hardware:
    return measure_cpu(threads=threads)


def get_hardware(name: str, threads: int | None = None) -> Hardware:
    """``"cpu"`` -> the CPU measured once per process and thread count (``threads``: the engine's;
    None: this process's); otherwise a table entry or CUDA device name."""
    if name.lower() == "cpu":
        return _cpu_once(threads)
    if name.upper() in HARDWARE:
        return HARDWARE[name.upper()]
    return gpu_entry(name)


def with_costs(hardware: Hardware, power_w: float, capital_usd: float, source: str) -> Hardware:
    """A copy with different power/price assumptions (e.g. the real host CPU's), citing ``source``."""
    sources = dict(hardware.sources, power_w=source, capital_usd=source)
    return replace(hardware, power_w=power_w, capital_usd=capital_usd, sources=sources)
