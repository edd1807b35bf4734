"""Each FLOP counted once across nested operators, kernels' shares, the trace's own figures, model FLOPs per step
and MFU (analysis/work, analysis/mfu), on hand-checked synthetic traces and on the bf16 transformer sample
(6·N·tokens, samples/README.md; the arithmetic is in docs/guide/roofline.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tb_plugin.analysis.device_peaks import parse_override
from tb_plugin.analysis.mfu import mfu
from tb_plugin.analysis.roofline import roofline
from tb_plugin.analysis.work import ROOFS, SOURCES, kernel_work, op_work, step_work
from tb_plugin.loader import load_trace
from tb_plugin.model import TraceModel
from tb_plugin.model.optree import host_tree
from tests.conftest import SAMPLES, write_trace
from tests.unit.test_views_synthetic import kernel, launch, step

H100 = [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85_520_809_984, "computeMajor": 9,
         "computeMinor": 0, "numSms": 132}]
M, K, N = 2048, 1024, 4096  # intensity ≈ 585 FLOP/byte: compute-bound on an H100 (ridge ≈ 295)
BF16, FP32 = "c10::BFloat16", "float"


def op(name: str, ts: float, dur: float, dims: list[Any], types: list[str], concrete: list[str] | None = None,
       tid: int = 1, **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 100, "tid": tid, "ts": ts, "dur": dur,
            "args": {"Input Dims": dims, "Input type": types, "Concrete Inputs": concrete or [""] * len(dims), **args}}


def autocast_linear_step(base: float = 0.0) -> list[dict[str, Any]]:
    """One step: a linear layer under bf16 autocast (fp32 linear → two casts → bf16 addmm) and its backward
    (AddmmBackward0 → two bf16 mm on the autograd thread), each launching its kernels."""
    b = base
    return [
        step(int(b // 1000) + 1, b, 1000),
        op("aten::linear", b + 10, 200, [[M, K], [N, K], [N]], [FP32, FP32, FP32]),
        op("aten::to", b + 20, 30, [[N, K], [], []], [FP32, "Scalar", "Scalar"]),
        op("aten::_to_copy", b + 22, 26, [[N, K], [], []], [FP32, "Scalar", "Scalar"], ["", "15", "0"]),
        op("aten::copy_", b + 24, 20, [[N, K], [N, K], []], [BF16, FP32, "Scalar"]),
        launch(b + 30, 5, corr=int(b) + 1),
        op("aten::addmm", b + 100, 100, [[N], [M, K], [K, N], [], []], [BF16, BF16, BF16, "Scalar", "Scalar"]),
        launch(b + 110, 5, corr=int(b) + 2),
        launch(b + 130, 5, corr=int(b) + 3),
        {**op("AddmmBackward0", b + 400, 300, [[M, N]], [BF16], tid=2)},
        op("aten::mm", b + 410, 100, [[M, N], [N, K]], [BF16, BF16], tid=2),
        {**launch(b + 420, 5, corr=int(b) + 4), "tid": 2},
        op("aten::mm", b + 550, 100, [[K, M], [M, N]], [BF16, BF16], tid=2),
        {**launch(b + 560, 5, corr=int(b) + 5), "tid": 2},
        kernel("elementwise_copy_kernel", b + 40, 10, corr=int(b) + 1),
        kernel("nvjet_sm90_tst_128x128_gemm", b + 120, 300, corr=int(b) + 2),
        kernel("nvjet_sm90_tst_splitk_reduce", b + 425, 100, corr=int(b) + 3),
        kernel("nvjet_sm90_tst_64x64_gemm", b + 530, 150, corr=int(b) + 4),
        kernel("nvjet_sm90_tst_64x64_gemm", b + 700, 150, corr=int(b) + 5),
    ]


def model_of(tmp_path: Path, events: list[dict[str, Any]], **top: Any) -> TraceModel:
    return load_trace(str(write_trace(tmp_path / "w.1.pt.trace.json", events, **top)))


def names(model: TraceModel, nodes: np.ndarray) -> list[str]:
    rows = host_tree(model).rows[nodes]
    return [model.strings[int(c)] for c in model["events"]["name"][rows]]


def test_each_flop_counts_once_in_the_innermost_call(tmp_path: Path) -> None:
    model = model_of(tmp_path, autocast_linear_step(), deviceProperties=H100)
    ops = op_work(model)
    counted = dict(zip(names(model, ops.node[ops.counted]), ops.flops[ops.counted].tolist()))
    # the fp32 linear holds the bf16 addmm that did the work (autocast): the addmm counts, as bf16; the cast's copy
    # counts its bytes; the autograd node records only grad_out (no estimate), its two mm count
    assert sorted(names(model, ops.node[ops.counted])) == ["aten::addmm", "aten::copy_", "aten::mm", "aten::mm"]
    assert counted["aten::addmm"] == 2 * M * N * K and counted["aten::copy_"] == 0
    linear = names(model, ops.node).index("aten::linear")
    assert not ops.counted[linear] and ops.flops[linear] == 2 * M * N * K
    per_step = step_work(model).flops
    assert per_step.tolist() == [6 * M * N * K]  # forward 2·M·N·K, backward 4·M·N·K
    by_roof = dict(zip(ROOFS, step_work(model).by_roof[0].tolist()))
    assert by_roof["bf16"] == 6 * M * N * K  # nvjet kernels run on tensor cores: the BF16 roof


def test_a_calls_work_is_split_among_its_kernels_by_duration(tmp_path: Path) -> None:
    model = model_of(tmp_path, autocast_linear_step(), deviceProperties=H100)
    kw = kernel_work(model)
    rows = model["device_events"]["row"][kw.kernel]
    by_name = {model.strings[int(c)]: (f, s) for c, f, s in zip(model["events"]["name"][rows], kw.flops, kw.shared)}
    # addmm launched a 300 µs GEMM and a 100 µs reduction: 3/4 and 1/4 of 2·M·N·K
    assert by_name["nvjet_sm90_tst_128x128_gemm"] == (0.75 * 2 * M * N * K, 2)
    assert by_name["nvjet_sm90_tst_splitk_reduce"] == (0.25 * 2 * M * N * K, 2)
    assert by_name["elementwise_copy_kernel"][0] == 0.0
    assert np.nansum(kw.flops) == 6 * M * N * K
    # the roofline by operator sums each call's kernels back
    points = {p["name"]: p for p in roofline(model, "operator")["points"]}
    assert points["aten::addmm"]["flops"] == 2 * M * N * K and points["aten::addmm"]["calls"] == 2
    assert points["aten::mm"]["flops"] == 4 * M * N * K and points["aten::mm"]["roof"] == "bf16"


def test_the_traces_own_figures_replace_the_formulas(tmp_path: Path) -> None:
    """with_flops=True's ``flops`` on an operator; Inductor's ``kernel_flop`` / ``kernel_num_gb`` on a launch and on
    a kernel."""
    events = [
        step(1, 0, 1000),
        op("aten::mm", 10, 100, [[M, K], [K, N]], [BF16, BF16], flops=123_456_789),
        launch(20, 5, corr=1),
        op("triton_poi_fused_add_0", 200, 50, [[M, N], [M, N]], [BF16, BF16], kernel_flop=5000, kernel_num_gb=0.25),
        launch(210, 5, corr=2, name="cuLaunchKernel", cat="cuda_driver"),
        op("triton_red_fused_sum_1", 300, 50, [[M, N], [M]], [BF16, FP32]),
        launch(310, 5, corr=3, name="cuLaunchKernel", cat="cuda_driver"),
        kernel("nvjet_sm90_gemm", 30, 100, corr=1),
        kernel("triton_poi_fused_add_0", 220, 10, corr=2),
        kernel("triton_red_fused_sum_1", 320, 10, corr=3, kernel_flop=777, kernel_num_gb=0.001),
    ]
    model = model_of(tmp_path, events, deviceProperties=H100)
    ops = op_work(model)
    got = {n: (f, b, SOURCES[s]) for n, f, b, s in zip(names(model, ops.node), ops.flops, ops.bytes, ops.source)}
    assert got["aten::mm"] == (123_456_789, (M * K + K * N + M * N) * 2, "trace flops")
    assert got["triton_poi_fused_add_0"] == (5000, 0.25e9, "trace kernel_flop")
    assert got["triton_red_fused_sum_1"][2] == "shapes"  # the tensor arguments
    kw = kernel_work(model)
    last = int(np.flatnonzero(model["events"]["name"][model["device_events"]["row"][kw.kernel]]
                              == model.code("triton_red_fused_sum_1"))[0])
    assert (kw.flops[last], kw.bytes[last], SOURCES[kw.source[last]]) == (777, 1e6, "kernel args")


def test_mfu_is_model_flops_over_step_time_and_the_peak_of_the_dominant_class(tmp_path: Path) -> None:
    events = autocast_linear_step() + autocast_linear_step(1000.0)
    model = model_of(tmp_path, events, deviceProperties=H100)
    m = mfu(model)
    flops = 6 * M * N * K
    steps = m["steps"]
    assert [s["model_flops"] for s in steps] == [flops, flops]
    seconds = sum(s["duration_us"] for s in steps) * 1e-6
    assert m["dtype"] == "bf16" and m["peak_flops_per_s"] == 989.5e12  # H100 SXM: 1,979 with sparsity, halved
    assert m["achieved_flops_per_s"] == pytest.approx(2 * flops / seconds)
    assert m["ratio"] == pytest.approx(2 * flops / seconds / 989.5e12)
    assert m["device"]["table_entry"] == "NVIDIA H100 SXM" and m["estimated"] is True
    assert steps[0]["ratio"] == pytest.approx(flops / (steps[0]["duration_us"] * 1e-6) / 989.5e12)
    # the user's peaks replace the table's
    custom = mfu(model, parse_override("bf16=500"))
    assert custom["peak_flops_per_s"] == 500e12 and "--peaks bf16=500" in custom["device"]["source"]
    # a device not in the table: achieved figures, no ratio, and a note saying so
    unknown = mfu(model_of(tmp_path, events, deviceProperties=[{**H100[0], "name": "NVIDIA GeForce RTX 4090"}]))
    assert unknown["ratio"] is None and unknown["achieved_flops_per_s"] == pytest.approx(2 * flops / seconds)
    assert "not in the peak table" in unknown["device"]["note"]


def test_roofline_point_hand_checked(tmp_path: Path) -> None:
    """The addmm by operator: 2·M·N·K FLOPs over 400 µs of kernels, bytes (N + M·K + K·N + M·N) · 2;
    H100 SXM: attainable min(989.5 T, I · 3.35 TB/s), wasted = time − max(F / peak, B / bandwidth)."""
    model = model_of(tmp_path, autocast_linear_step(), deviceProperties=H100)
    p = next(p for p in roofline(model, "operator")["points"] if p["name"] == "aten::addmm")
    flops, nbytes, t = 2 * M * N * K, (N + M * K + K * N + M * N) * 2, 400e-6
    assert p["bytes"] == nbytes and p["intensity"] == pytest.approx(flops / nbytes)
    assert p["achieved_flops_per_s"] == pytest.approx(flops / t)
    assert p["attainable_flops_per_s"] == pytest.approx(min(989.5e12, flops / nbytes * 3.35e12))
    assert p["bound"] == "compute" and p["fraction_of_roof"] == pytest.approx(flops / 989.5e12 / t)
    assert p["wasted_us"] == pytest.approx((t - flops / 989.5e12) * 1e6)
    copy = next(p for p in roofline(model, "operator")["points"] if p["name"] == "aten::copy_")
    assert copy["bound"] == "memory" and copy["attainable_flops_per_s"] is None  # no FLOPs: only the memory roof
    assert copy["wasted_us"] == pytest.approx(10 - (N * K * 6) / 3.35e12 * 1e6)


# ------------------------------------------------------------------------------------------------ a real bf16 run

def test_transformer_sample_model_flops_match_six_n_tokens() -> None:
    """samples/transformer_bf16: 4 encoder layers, d_model 512, FFN 2048, batch 16 × 256 tokens, bf16 autocast.
    N = 4 · (4·512² + 2·512·2048) = 12,582,912 weights in matmuls (the embedding is a lookup, the classifier sees
    16 pooled rows, biases and norms are not GEMM weights); 6·N·T = 6 · 12,582,912 · 4,096 = 309,237,645,312.
    Attention adds 12·L·S·d·T = 12 · 4 · 256 · 512 · 4,096 = 25,769,803,776 (Q·Kᵀ and P·V, forward and backward,
    no causal mask): 335,007,449,088 in all. Element-wise work adds under 1 %."""
    (path,) = sorted((SAMPLES / "transformer_bf16").glob("*.pt.trace.json.gz"))
    model = load_trace(str(path))
    n_weights = 4 * (4 * 512 * 512 + 2 * 512 * 2048)
    tokens = 16 * 256
    six_nt = 6 * n_weights * tokens
    attention = 12 * 4 * 256 * 512 * tokens
    per_step = step_work(model).flops
    assert len(per_step) == 3 and np.all(per_step == per_step[0])
    assert abs(per_step[0] / six_nt - 1) < 0.10  # the bound, attention included
    assert abs(per_step[0] / (six_nt + attention) - 1) < 0.01
    ops = op_work(model)
    gemm = ops.counted & np.isin(names(model, ops.node), ["aten::mm", "aten::addmm"])
    head = 3 * 2 * 16 * 512 * 10  # the classifier on 16 pooled rows, forward and backward
    assert float(ops.flops[gemm].sum()) / 3 == six_nt + head  # the matmuls alone are 6·N·T exactly
    m = mfu(model)
    assert m["dtype"] == "bf16" and m["device"]["table_entry"] == "NVIDIA H200 SXM" and 0 < m["ratio"] < 0.05


def test_mfu_says_why_it_has_no_figure() -> None:
    """A CUDA-graph replay records no operators (their FLOPs are unknown, not zero work); a CPU run has no GPU peak."""
    (graph,) = sorted((SAMPLES / "cuda_graph").glob("*.pt.trace.json.gz"))
    m = mfu(load_trace(str(graph)))
    assert m["model_flops_per_step"] == 0 and m["ratio"] is None and "replay CUDA graphs" in m["note"]
    (cpu,) = sorted((SAMPLES / "cpu_only").glob("*.pt.trace.json.gz"))
    m = mfu(load_trace(str(cpu)))
    assert m["model_flops_per_step"] > 0 and m["ratio"] is None and m["peak_flops_per_s"] is None
    assert m["note"] == "No GPU in the trace: achieved FLOP/s only." and m["device"]["name"] is None


def test_a_convolutions_flops_go_to_its_compute_kernels_not_its_layout_transforms(tmp_path: Path) -> None:
    """cuDNN runs nchwToNhwc beside the convolution's GEMM: the transform gets its share of the bytes, no FLOPs."""
    x, w = [32, 64, 56, 56], [64, 64, 3, 3]
    dims = [x, w, [], [], [], [], [], [], []]
    types = [FP32, FP32, "ScalarList", "ScalarList", "ScalarList", "Scalar", "Scalar", "Scalar", "Scalar"]
    events = [
        step(1, 0, 1000),
        op("aten::cudnn_convolution", 10, 200, dims, types, ["", "", "[1, 1]", "[1, 1]", "[1, 1]", "1", "False",
                                                            "False", "True"]),
        launch(20, 5, corr=1), launch(40, 5, corr=2),
        kernel("void cudnn::engines_precompiled::nchwToNhwcKernel<float, float, float, false, true>", 30, 100, corr=1),
        kernel("sm80_xmma_fprop_implicit_gemm_f32f32_f32f32_f32_nchwkcrs_nchw_tilesize128x128x8_ffma", 140, 300, corr=2),
    ]
    model = model_of(tmp_path, events, deviceProperties=H100)
    kw = kernel_work(model)
    flops = 2 * 32 * 56 * 56 * 64 * 64 * 9
    assert kw.flops.tolist() == [0.0, flops]
    nbytes = (32 * 64 * 56 * 56 * 2 + 64 * 64 * 9) * 4  # input, weight, output (stride 1, padding 1: 56 × 56)
    assert kw.bytes.tolist() == pytest.approx([nbytes / 4, nbytes * 3 / 4])
    assert [ROOFS[r] for r in kw.roof] == ["fp32", "fp32"]  # FFMA: CUDA cores, the FP32 roof
