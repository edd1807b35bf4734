"""MFU and the roofline on the GEMM benchmark (samples/scripts/gemm_bench.py: a chain of S×S matmuls, COUNT per
step, in bf16, fp32 with TF32 off and fp32 with TF32 on). The expected MFU is computed here by hand from the trace's
JSON — 2·M·N·K per ``aten::mm`` in each ``ProfilerStep``, over the step's time (its host span, extended to the end
of the GPU work it launched), against the datasheet peak written below — and the plugin's must agree within 2 %;
each GEMM point sits under its roof; the fp32 GEMMs without TF32 are held to the FP32 (CUDA-core) roof with the
TF32 tensor-core roof beside it.

The recorded runs (``tests/data/gemm_bench/``, made on the lent GPU machine with the script: see tests/data/README.md)
are checked when present; a synthetic trace shaped like the script's output is always checked.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from tb_plugin.analysis.mfu import mfu
from tb_plugin.analysis.roofline import roofline
from tb_plugin.loader import load_trace
from tests.conftest import REAL_TRACES, write_trace

RECORDED = REAL_TRACES / "gemm_bench"
RUNS = ("gemm_bf16", "gemm_fp32", "gemm_tf32")
# Dense peaks, TFLOP/s, from the datasheets (tensor figures printed with 2:4 sparsity, halved): written here by
# hand, not read from the plugin's table, so a wrong table entry fails the test.
DATASHEET = {
    "NVIDIA H100 80GB HBM3": {"bf16": 989.5, "fp32": 67.0, "tf32": 494.5},  # H100 SXM
    "NVIDIA H100 PCIe": {"bf16": 756.5, "fp32": 51.0, "tf32": 378.0},
    "NVIDIA H200": {"bf16": 989.5, "fp32": 67.0, "tf32": 494.5},  # H200 SXM
}
EXPECTED_ROOF = {"gemm_bf16": "bf16", "gemm_fp32": "fp32", "gemm_tf32": "tf32"}
# cuBLAS kernels of an H100 for each run (names as CUPTI writes them): tensor cores, CUDA cores (FFMA), TF32
KERNELS = {
    "gemm_bf16": ("nvjet_sm90_tst_256x128_64x4_2x1_v_bz_coopA_NNT", 700e12, "c10::BFloat16"),
    "gemm_fp32": ("sm90_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_aligna4_alignc4"
                  "_execute_kernel__5x_cublas", 50e12, "float"),
    "gemm_tf32": ("sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x256x32_warpgroupsize2x1x1_execute_segment_k_off"
                  "_kernel__5x_cublas", 380e12, "float"),
}
H100 = {"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85_520_809_984, "computeMajor": 9,
        "computeMinor": 0, "numSms": 132}


def synthetic_run(path: Path, run: str, size: int = 8192, count: int = 8, steps: int = 3) -> Path:
    """A trace as gemm_bench.py writes it on an H100: per step, COUNT ``aten::matmul`` → ``aten::mm`` each
    launching one cuBLAS kernel that runs at a realistic rate, then ``cudaDeviceSynchronize``."""
    name, rate, dtype = KERNELS[run]
    gemm_us = 2 * size ** 3 / rate * 1e6
    events: list[dict[str, Any]] = []
    t, corr = 1000.0, 100
    host = {"pid": 7, "tid": 7}
    for n in range(2, 2 + steps):
        start = t
        launches_end = t + 5 + count * 20
        gpu = launches_end
        for i in range(count):
            ts = t + 5 + 20 * i
            corr += 1
            dims = {"Input Dims": [[size, size], [size, size]], "Input type": [dtype, dtype],
                    "Concrete Inputs": ["", ""]}
            events += [
                {"ph": "X", "cat": "cpu_op", "name": "aten::matmul", **host, "ts": ts, "dur": 18, "args": dims},
                {"ph": "X", "cat": "cpu_op", "name": "aten::mm", **host, "ts": ts + 1, "dur": 16, "args": dims},
                {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", **host, "ts": ts + 3, "dur": 8,
                 "args": {"correlation": corr}},
                {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": max(gpu, ts + 10),
                 "dur": gemm_us, "args": {"device": 0, "stream": 7, "correlation": corr}},
            ]
            gpu = max(gpu, ts + 10) + gemm_us + 2
        end = gpu + 15
        events += [{"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", **host, "ts": launches_end,
                    "dur": end - 5 - launches_end, "args": {}},
                   {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}", **host, "ts": start,
                    "dur": end - start, "args": {}}]
        t = end + 3
    return write_trace(path / run / "gemm.1790000000000000000.pt.trace.json.gz", events, deviceProperties=[H100])


def trace_of(root: Path, run: str) -> Path:
    (path,) = sorted((root / run).glob("*.pt.trace.json*"))
    return path


def by_hand(path: Path) -> tuple[float, str]:
    """(the MFU computed from the raw JSON, the device name): Σ 2·M·N·K of the aten::mm calls inside the steps over
    Σ step time (host span to the end of the GPU work its launches started), against the datasheet peak."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as fh:
        doc = json.load(fh)
    ev = doc["traceEvents"]
    steps = sorted((e["ts"], e["ts"] + e["dur"]) for e in ev
                   if e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith("ProfilerStep#"))
    kernel_end = {e["args"]["correlation"]: e["ts"] + e["dur"] for e in ev if e.get("cat") == "kernel"}
    launches = [(e["ts"], e["args"]["correlation"]) for e in ev if e.get("cat") == "cuda_runtime" and
                e.get("name") in ("cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernelEx")]
    flops = seconds = 0.0
    previous_end = -1.0
    for lo, hi in steps:
        for e in ev:
            if e.get("cat") == "cpu_op" and e.get("name") == "aten::mm" and lo <= e["ts"] <= hi:
                (m, k), (_, n) = e["args"]["Input Dims"][:2]
                flops += 2.0 * m * n * k
        end = max([hi] + [kernel_end[c] for ts, c in launches if lo <= ts <= hi and c in kernel_end])
        start = max(lo, previous_end)
        seconds += (end - start) * 1e-6
        previous_end = end
    device = doc["deviceProperties"][0]["name"]
    dtype = "bf16" if "bf16" in path.parent.name else ("fp32" if "fp32" in path.parent.name else "tf32")
    return flops / seconds / (DATASHEET[device][dtype] * 1e12), device


@pytest.fixture(scope="module", params=["synthetic", "recorded"])
def runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    if request.param == "recorded":
        return RECORDED
    root = tmp_path_factory.mktemp("gemm_bench")
    for run in RUNS:
        synthetic_run(root, run)
    return root


@pytest.mark.parametrize("run", RUNS)
def test_mfu_equals_the_hand_computed_ratio(runs: Path, run: str) -> None:
    path = trace_of(runs, run)
    expected, device = by_hand(path)
    m = mfu(load_trace(str(path)))
    assert m["dtype"] == EXPECTED_ROOF[run]
    assert m["peak_flops_per_s"] == DATASHEET[device][EXPECTED_ROOF[run]] * 1e12
    assert m["ratio"] == pytest.approx(expected, rel=0.02)
    assert 0 < m["ratio"] < 1


@pytest.mark.parametrize("run", RUNS)
def test_gemm_points_sit_under_their_roof(runs: Path, run: str) -> None:
    answer = roofline(load_trace(str(trace_of(runs, run))), "operator")
    (gemm,) = [p for p in answer["points"] if p["name"] == "aten::mm"]
    assert gemm["roof"] == EXPECTED_ROOF[run] and gemm["bound"] == "compute"
    assert not gemm["above_roof"] and gemm["achieved_flops_per_s"] <= gemm["attainable_flops_per_s"]
    assert 0 < gemm["fraction_of_roof"] <= 1
    roofs = {r["roof"]: r["peak_flops_per_s"] for r in answer["roofs"]["compute"]}
    by_kernel = roofline(load_trace(str(trace_of(runs, run))), "kernel")["points"]
    for p in by_kernel:
        if p["roof"] == EXPECTED_ROOF[run]:
            assert not p["above_roof"], p["name"]
    if run == "gemm_fp32":
        # TF32 off: CUDA-core kernels, held to the FP32 roof; the TF32 tensor-core roof stands beside it, far above
        assert not gemm["tensor_cores"] and gemm["peak_flops_per_s"] == roofs["fp32"]
        assert roofs["tf32"] > 5 * roofs["fp32"] > gemm["achieved_flops_per_s"]
    else:
        assert gemm["tensor_cores"]
