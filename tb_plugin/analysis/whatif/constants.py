"""The constants the change models use, and where they come from (docs/guide/overview.md repeats this table).

- TF32 / bf16 speed-up of an fp32 GEMM or convolution: ``peak_speedup(cc, "tf32" / "bf16")``: the ratio of the GPU
  generation's dense tensor-core peak to its fp32 (SIMT) peak, ``PEAK_TFLOPS`` — NVIDIA's datasheets: V100, T4, A100,
  A10, L4, H100/H200 SXM, B200 (dense, no sparsity)
- memory bandwidth: ``memory_bandwidth_gbps(device)``: by the device name in ``deviceProperties``, else by compute
  capability, ``BANDWIDTH_GBPS`` — the same datasheets (HBM/GDDR peak)
- a memory-bound kernel's floor: ``roofline_factor``: a kernel cannot get faster than its bytes over the bandwidth —
  roofline model
- a fused kernel's cost: ``fused_cost_us(nbytes, device)``: the bytes it must move over the bandwidth (a fused AdamW
  step reads param, grad, exp_avg, exp_avg_sq and writes param, exp_avg, exp_avg_sq: 7 × 4 B per fp32 parameter) —
  roofline model
- a kernel launch: ``KERNEL_LAUNCH_US`` = 4 µs of host time (``cudaLaunchKernel``; the trace's own median launch where
  it has launches, ``launch_cost_us``) — ``samples/tiny_kernels`` (H200, CUDA 13): median ``cudaLaunchKernel`` 3-5 µs
- a CUDA-graph replay: one ``cudaGraphLaunch`` of ``GRAPH_LAUNCH_US`` + ``GRAPH_LAUNCH_PER_NODE_US`` per captured
  kernel = 55 µs + 1.05 µs per kernel of host time, as traced (the profiler records every node of a graph, so a traced
  launch grows with the graph); the graph's kernels start while the call runs and run back to back — two graph sizes
  on H200, CUDA 13: ``samples/cuda_graph``, 25-kernel graphs launched in 77-87 µs (median 82), and the calibration
  corpus's ``launch_bound_graph`` fixed twin, 493-kernel graphs in 481-619 µs (median 578); the gap between graph
  kernels is 0.13 µs (median)
- pinned host-to-device bandwidth: ``pinned_h2d_gbps(cc)``: 50 GB/s from Hopper on (PCIe 5.0 x16), 25 GB/s on
  Ampere and Ada (PCIe 4.0 x16), 12 GB/s before (PCIe 3.0 x16); a pageable copy's speed-up is that over its own
  measured bandwidth, and its call stops blocking the host — the PCIe specifications' x16 rates, less protocol overhead
- a convolution without autotuning: ``HEURISTIC_PLAN_US`` = 1,686 µs of host time for a forward call
  (``aten::cudnn_convolution``) and 1,797 µs for a backward call (``aten::convolution_backward``) whose shape cuDNN
  has not seen: the heuristics' choice, one execution plan built, run — ``samples/scripts/host_constants.py`` on
  H200, cuDNN 9.19, torch 2.11 (``samples/host_constants/h200.json``): medians of 83 calls each, p10-p90 1,565-2,596
  and 718-2,302 µs, on a conv net (widths 48-384, batch 16, images 150-183 px) apart from the calibration pair's;
  a call whose plan is cached takes 65 / 113 µs
- a cached allocation: ``CACHED_ALLOC_US`` = 0: the caching allocator's fast path (~1 µs) runs inside the operator
  that allocates and is in its time already; ``cudaMalloc``/``cudaFree`` (the latter also waits for the device) are
  what a warm cache removes — PyTorch's CUDACachingAllocator
"""

from __future__ import annotations

import re
from typing import Any

KERNEL_LAUNCH_US = 4.0
PINNED_H2D_GBPS = ((9, 50.0), (8, 25.0), (0, 12.0))  # (from compute capability major, GB/s)
GRAPH_LAUNCH_US = 55.0
GRAPH_LAUNCH_PER_NODE_US = 1.05
CACHED_ALLOC_US = 0.0
HEURISTIC_PLAN_US = {"forward": 1686.0, "backward": 1797.0}

# Dense peak throughput (TFLOPS): fp32 on the CUDA cores, tf32 and bf16 (= fp16) on the tensor cores; keyed by
# compute capability (major, minor). Volta and Turing have no TF32 and no bf16: their fp16 tensor-core peak stands
# for "mixed precision" (autocast to fp16) and TF32 is no speed-up there.
PEAK_TFLOPS: dict[tuple[int, int], dict[str, float]] = {
    (7, 0): {"fp32": 15.7, "tf32": 15.7, "bf16": 125.0},  # V100 SXM2 (fp16 tensor cores)
    (7, 5): {"fp32": 8.1, "tf32": 8.1, "bf16": 65.0},  # T4 (fp16 tensor cores)
    (8, 0): {"fp32": 19.5, "tf32": 156.0, "bf16": 312.0},  # A100 SXM
    (8, 6): {"fp32": 31.2, "tf32": 62.5, "bf16": 125.0},  # A10 (RTX 30xx alike)
    (8, 7): {"fp32": 5.3, "tf32": 10.6, "bf16": 21.2},  # Jetson Orin (AGX, 64 GB)
    (8, 9): {"fp32": 30.3, "tf32": 60.0, "bf16": 121.0},  # L4 (RTX 40xx, L40 alike)
    (9, 0): {"fp32": 67.0, "tf32": 494.7, "bf16": 989.4},  # H100 SXM, H200
    (10, 0): {"fp32": 80.0, "tf32": 1100.0, "bf16": 2250.0},  # B200
}

# Peak memory bandwidth (GB/s): by a name fragment of deviceProperties' name first, else by compute capability.
BANDWIDTH_GBPS: tuple[tuple[str, float], ...] = (
    ("H200", 4800.0), ("H100 PCIe", 2000.0), ("H100", 3350.0), ("GH200", 4000.0), ("B200", 8000.0),
    ("A100-SXM4-80GB", 2039.0), ("A100 80GB", 1935.0), ("A100", 1555.0), ("A10G", 600.0), ("A10", 600.0),
    ("L40", 864.0), ("L4", 300.0), ("V100", 900.0), ("T4", 320.0), ("4090", 1008.0), ("3090", 936.0),
)
BANDWIDTH_BY_CC: dict[tuple[int, int], float] = {
    (7, 0): 900.0, (7, 5): 320.0, (8, 0): 1555.0, (8, 6): 600.0, (8, 7): 205.0, (8, 9): 300.0, (9, 0): 3350.0,
    (10, 0): 8000.0,
}


def compute_capability(text: str | None) -> tuple[int, int] | None:
    """``"9.0"`` → (9, 0); None for anything else."""
    m = re.match(r"^(\d+)\.(\d+)$", text or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def _nearest(cc: tuple[int, int], table: dict[tuple[int, int], Any]) -> Any:
    """The entry of the newest generation at or below ``cc`` (a newer GPU than the table knows is its newest)."""
    known = [k for k in table if k <= cc]
    return table[max(known)] if known else None


def peak_speedup(cc: tuple[int, int] | None, to: str) -> float:
    """How many times faster an fp32 GEMM gets in ``to`` ("tf32" or "bf16"): the dense peak ratio; 1 where
    unknown (no compute capability, or a GPU older than Volta)."""
    if cc is None:
        return 1.0
    peaks = _nearest(cc, PEAK_TFLOPS)
    if not peaks or to not in peaks:
        return 1.0
    return float(peaks[to]) / float(peaks["fp32"])


def memory_bandwidth_gbps(device: dict[str, Any] | None) -> float | None:
    """Peak memory bandwidth of a device (``analysis.summary.devices`` entry): by name, else compute capability."""
    if not device:
        return None
    name = str(device.get("name") or "")
    for fragment, gbps in BANDWIDTH_GBPS:
        if fragment in name:
            return gbps
    cc = compute_capability(device.get("compute_capability"))
    found = _nearest(cc, BANDWIDTH_BY_CC) if cc else None
    return float(found) if found else None


def roofline_factor(dur_us: float, nbytes: float, speedup: float, gbps: float | None) -> float:
    """The speed-up a kernel of ``dur_us`` that moves ``nbytes`` can get from ``speedup`` more compute: no faster
    than its bytes over the bandwidth allow (``speedup`` where the bandwidth or the bytes are unknown)."""
    if not gbps or nbytes <= 0 or dur_us <= 0:
        return speedup
    floor_us = nbytes / (gbps * 1e3)  # GB/s = 1e3 bytes/µs
    return max(1.0, min(speedup, dur_us / floor_us)) if floor_us > 0 else speedup


def fused_cost_us(nbytes: float, device: dict[str, Any] | None) -> float | None:
    """A fused memory-bound kernel's time: the bytes it moves over the device's bandwidth (None: unknown device)."""
    gbps = memory_bandwidth_gbps(device)
    return nbytes / (gbps * 1e3) if gbps else None


def pinned_h2d_gbps(cc: tuple[int, int] | None) -> float:
    """Achievable pinned host-to-device bandwidth of the GPU generation's host link (module doc)."""
    major = cc[0] if cc else 0
    return next(gbps for first, gbps in PINNED_H2D_GBPS if major >= first)
