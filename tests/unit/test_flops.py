"""FLOPs and bytes per operator family against hand-derived formulas (analysis/flops), as the trace records a call
(``Input Dims``, ``Input type``, ``Concrete Inputs`` in PyTorch 2.x's layout): GEMMs forward and backward,
convolutions with stride, padding, dilation and groups (transposed too, and their backward), causal and non-causal
attention (each entry point's argument layout), element-wise work, copies. The convolution and GEMM figures equal
``torch.utils.flop_counter``'s (checked on the development machine with CPU torch) except the weight gradient of a
grouped convolution, which torch counts ``groups`` times over."""

from __future__ import annotations

import json
from typing import Any

from tb_plugin.analysis import flops as F
from tb_plugin.analysis.flops.attention import pairs

BF16, FP32 = "c10::BFloat16", "float"


def call(name: str, dims: list[Any], types: list[str], concrete: list[str] | None = None) -> F.Work | None:
    """The estimate of one call, its args written as the profiler writes them."""
    return F.estimate(name, json.dumps(dims), json.dumps(types), json.dumps(concrete if concrete is not None else
                                                                            [""] * len(dims)))


def work(name: str, dims: list[Any], types: list[str], concrete: list[str] | None = None) -> F.Work:
    w = call(name, dims, types, concrete)
    assert w is not None, name
    return w


# ------------------------------------------------------------------------------------------------ matmul family

def test_gemm_forward_is_two_flops_per_multiply_add() -> None:
    m, k, n = 4096, 512, 1536
    w = work("aten::mm", [[m, k], [k, n]], [BF16, BF16])
    assert w.flops == 2 * m * n * k and w.dtype == "bf16" and w.family == "matmul" and w.heavy
    assert w.bytes == (m * k + k * n + m * n) * 2  # inputs read, output written, 2 bytes each
    assert "M=4,096 N=1,536 K=512" in w.how
    # addmm: the bias is read, the GEMM counted (as torch.utils.flop_counter)
    bias = work("aten::addmm", [[n], [m, k], [k, n], [], []], [FP32, FP32, FP32, "Scalar", "Scalar"])
    assert bias.flops == 2 * m * n * k and bias.dtype == "fp32" and bias.bytes == (n + m * k + k * n + m * n) * 4
    # a batch of GEMMs, and baddbmm's GEMM
    assert work("aten::bmm", [[8, 64, 32], [8, 32, 48]], [BF16, BF16]).flops == 2 * 8 * 64 * 48 * 32
    assert work("aten::baddbmm", [[8, 64, 48], [8, 64, 32], [8, 32, 48], [], []],
                [BF16, BF16, BF16, "Scalar", "Scalar"]).flops == 2 * 8 * 64 * 48 * 32
    # linear over a [B, S, K] input: M = B·S rows; matmul broadcasting leading dims into a batch; 1-D operands
    assert work("aten::linear", [[16, 256, 512], [2048, 512], [2048]], [FP32] * 3).flops == 2 * 16 * 256 * 2048 * 512
    assert work("aten::matmul", [[2, 3, 64, 32], [32, 48]], [FP32, FP32]).flops == 2 * 6 * 64 * 48 * 32
    assert work("aten::matmul", [[5, 1, 64, 32], [3, 32, 48]], [FP32, FP32]).flops == 2 * 15 * 64 * 48 * 32
    assert work("aten::matmul", [[32], [32, 48]], [FP32, FP32]).flops == 2 * 48 * 32
    assert work("aten::mv", [[64, 32], [32]], [FP32, FP32]).flops == 2 * 64 * 32
    # fp8 GEMM: the dtype that picks the FP8 peak
    assert work("aten::_scaled_mm", [[128, 256], [256, 64], [], []], ["c10::Float8_e4m3fn"] * 2 + [FP32] * 2
                ).dtype == "fp8"
    # shapes that do not multiply are no estimate, not a wrong one
    assert call("aten::mm", [[4, 5], [6, 7]], [FP32, FP32]) is None
    assert call("aten::matmul", [[2, 4, 5], [3, 5, 7]], [FP32, FP32]) is None


def test_gemm_backward_calls_are_the_two_gradient_gemms() -> None:
    """MmBackward0 runs grad_input = grad_out · Bᵀ and grad_weight = Aᵀ · grad_out: 2·M·N·K each, 4·M·N·K in all
    (the 6·N·tokens rule's backward 4 for every forward 2)."""
    m, k, n = 4096, 512, 1536
    grad_input = work("aten::mm", [[m, n], [n, k]], [BF16, BF16])
    grad_weight = work("aten::mm", [[k, m], [m, n]], [BF16, BF16])
    assert grad_input.flops == grad_weight.flops == 2 * m * n * k
    # the autograd node itself records only grad_out: no formula, its two inner calls count
    assert call("MmBackward0", [[m, n]], [BF16]) is None


# ------------------------------------------------------------------------------------------------ convolution

def test_convolution_with_stride_padding_dilation_and_groups() -> None:
    """x [2, 8, 33, 31], w [16, 8/4, 3, 5], stride (2, 3), padding (1, 2), dilation (2, 1), groups 4:
    H' = ⌊(33 + 2·1 − 2·(3−1) − 1) / 2⌋ + 1 = 16, W' = ⌊(31 + 2·2 − 1·(5−1) − 1) / 3⌋ + 1 = 11;
    FLOPs = 2 · N · Cout · H'·W' · (Cin / groups) · kh·kw = 2 · 2 · 16 · 176 · 2 · 15 = 337,920."""
    dims = [[2, 8, 33, 31], [16, 2, 3, 5], [], [], [], [], []]
    types = [FP32, FP32, "", "ScalarList", "ScalarList", "ScalarList", "Scalar"]
    w = work("aten::conv2d", dims, types, ["", "", "", "[2, 3]", "[1, 2]", "[2, 1]", "4"])
    assert w.flops == 2 * 2 * 16 * (16 * 11) * 2 * (3 * 5) == 337_920
    assert w.family == "convolution" and w.heavy and "output 16×11" in w.how
    assert w.bytes == (2 * 8 * 33 * 31 + 16 * 2 * 3 * 5 + 2 * 16 * 16 * 11) * 4
    # the same call at every level it is recorded: convolution, _convolution, cudnn_convolution (own arg orders)
    assert work("aten::convolution", dims[:2] + [[]] * 7, [FP32, FP32] + [""] * 7,
                ["", "", "", "[2, 3]", "[1, 2]", "[2, 1]", "False", "[0, 0]", "4"]).flops == 337_920
    assert work("aten::cudnn_convolution", dims[:2] + [[]] * 7, [FP32, FP32] + [""] * 7,
                ["", "", "[1, 2]", "[2, 3]", "[2, 1]", "4", "False", "False", "True"]).flops == 337_920
    # a ResNet stem: 7×7 stride 2 padding 3 on 224² → 112², 2 · 32 · 64 · 112² · 3 · 49
    stem = work("aten::conv2d", [[32, 3, 224, 224], [64, 3, 7, 7], [], [], [], [], []], types,
                ["", "", "", "[2, 2]", "[3, 3]", "[1, 1]", "1"])
    assert stem.flops == 2 * 32 * 64 * 112 * 112 * 3 * 49
    # padding="same" keeps the size; PyTorch < 2.0 recorded no stride: no estimate
    assert work("aten::conv1d", [[2, 4, 50], [6, 4, 5], [], [], [], [], []], [FP32] * 2 + [""] * 5,
                ["", "", "", "[1]", "same", "[1]", "1"]).flops == 2 * 2 * 6 * 50 * 4 * 5
    assert call("aten::cudnn_convolution", [[32, 3, 224, 224], [64, 3, 7, 7], [], [], [], [], [], [], []],
                [FP32, FP32, "GenericList", "GenericList", "GenericList", "Int", "Bool", "Bool", "Bool"], []) is None


def test_transposed_convolution_counts_the_input_positions() -> None:
    """x [2, 8, 9, 7], w [8, 3, 3, 3] (Cin, Cout/groups, k), stride 2, padding 1, output_padding 1, groups 2:
    FLOPs = 2 · N · (input positions) · (weight elements) = 2 · 2 · 63 · 216; output 6 × 18 × 14."""
    w = work("aten::conv_transpose2d", [[2, 8, 9, 7], [8, 3, 3, 3], [], [], [], [], [], []],
             [FP32, FP32, "", "ScalarList", "ScalarList", "ScalarList", "Scalar", "ScalarList"],
             ["", "", "", "[2, 2]", "[1, 1]", "[1, 1]", "2", "[1, 1]"])
    assert w.flops == 2 * 2 * 63 * 216 == 54_432
    assert "output 2×6×18×14" in w.how


def test_convolution_backward_costs_the_forward_per_gradient() -> None:
    """grad_output [2, 16, 16, 11] gives the output positions without the stride; input and weight gradients each
    cost the forward's 337,920; the bias gradient one FLOP per gradient element."""
    dims = [[2, 16, 16, 11], [2, 8, 33, 31], [16, 2, 3, 5]] + [[]] * 8
    types = [FP32] * 3 + ["ScalarList"] * 4 + ["Scalar", "ScalarList", "Scalar", "ScalarList"]
    concrete = ["", "", "", "[16]", "[2, 3]", "[1, 2]", "[2, 1]", "False", "[0, 0]", "4"]
    both = work("aten::convolution_backward", dims, types, [*concrete, "[True, True, False]"])
    assert both.flops == 2 * 337_920
    with_bias = work("aten::convolution_backward", dims, types, [*concrete, "[True, True, True]"])
    assert with_bias.flops == 2 * 337_920 + 2 * 16 * 16 * 11
    weight_only = work("aten::convolution_backward", dims, types, [*concrete, "[False, True, False]"])
    assert weight_only.flops == 337_920
    # PyTorch 1.x: cudnn_convolution_backward(input, grad_output, weight, …) without its mask: both gradients
    old = work("aten::cudnn_convolution_backward", [[32, 512, 7, 7], [32, 2048, 7, 7], [2048, 512, 1, 1]] + [[]] * 8,
               [FP32] * 3 + ["GenericList"] * 3 + ["Int", "Bool", "Bool", "Bool", "GenericList"], [])
    assert old.flops == 2 * (2 * 32 * 49 * 2048 * 512)


# ------------------------------------------------------------------------------------------------ attention

SDPA_TYPES = [BF16, BF16, BF16, "", "Scalar", "Scalar", "", "Scalar"]


def sdpa(b: int, h: int, sq: int, sk: int, d: int, causal: bool) -> F.Work:
    dims = [[b, h, sq, d], [b, h, sk, d], [b, h, sk, d], [], [], [], [], []]
    return work("aten::scaled_dot_product_attention", dims, SDPA_TYPES, ["", "", "", "", "0.", str(causal), "", "False"])


def test_attention_non_causal_is_four_flops_per_pair_and_dim() -> None:
    """Q·Kᵀ and P·V: 2·B·H·Sq·Sk·D each, 4·B·H·S²·D in all: 4 · 16 · 8 · 256² · 64 = 2,147,483,648."""
    w = sdpa(16, 8, 256, 256, 64, causal=False)
    assert w.flops == 4 * 16 * 8 * 256 * 256 * 64
    assert w.family == "attention" and w.heavy and w.dtype == "bf16" and "no mask" in w.how
    assert w.bytes == (3 * 16 * 8 * 256 * 64 + 16 * 8 * 256 * 64) * 2  # q, k, v read; out written


def test_attention_causal_counts_the_pairs_under_the_mask() -> None:
    """Causal, Sq = Sk = 40: query i sees keys 0..i, 40·41/2 = 820 pairs: 2·B·H·820·(D + Dv)."""
    assert sdpa(2, 3, 40, 40, 16, causal=True).flops == 2 * 2 * 3 * 820 * 32
    assert sdpa(2, 3, 40, 40, 16, causal=False).flops == 4 * 2 * 3 * 40 * 40 * 16
    # Sq ≠ Sk: SDPA's mask is aligned at the top left, FlashAttention's own entry point at the bottom right
    assert pairs(3, 5, "top_left") == 1 + 2 + 3 and pairs(3, 5, "bottom_right") == 3 + 4 + 5
    assert pairs(5, 3, "top_left") == 1 + 2 + 3 + 3 + 3 and pairs(5, 3, "bottom_right") == 0 + 0 + 1 + 2 + 3
    assert pairs(4, 4, "none") == 16


def test_attention_entry_points_and_backward() -> None:
    """Each variant's own argument layout; backward is 2 × forward."""
    q = [16, 8, 256, 64]
    forward = 4 * 16 * 8 * 256 * 256 * 64
    cudnn = work("aten::_cudnn_attention_forward", [q, q, q] + [[]] * 10, [BF16] * 3 + [""] * 3 + ["Scalar"] * 6 + [""],
                 ["", "", "", "", "", "", "256", "256", "True", "0.1", "True", "False", ""])
    assert cudnn.flops == 2 * 16 * 8 * (256 * 257 // 2) * 128  # causal: 256·257/2 pairs
    back = work("aten::_scaled_dot_product_cudnn_attention_backward", [q] * 5 + [[16, 8, 256, 1]] + [[]] * 10,
                [BF16] * 5 + [FP32, "long int", "long int", "", "", "", "Scalar", "Scalar", "Scalar", "Scalar", ""],
                [""] * 11 + ["256", "256", "0.1", "False", ""])
    assert back.flops == 2 * forward and back.how.startswith("2 × ")
    flash = work("aten::_scaled_dot_product_flash_attention_backward", [q] * 6 + [[]] * 9,
                 [BF16] * 6 + [""] * 4 + ["Scalar", "Scalar", "", "", ""], [""] * 11 + ["True"] + [""] * 3)
    assert flash.flops == 2 * (2 * 16 * 8 * (256 * 257 // 2) * 128)
    # FlashAttention's and xformers' entry points take [B, S, H, D]; xformers' mask type 1 is causal (top left)
    seq_first = [16, 256, 8, 64]
    fa = work("aten::_flash_attention_forward", [seq_first] * 3 + [[]] * 7, [BF16] * 3 + [""] * 7,
              ["", "", "", "", "", "256", "256", "0.0", "False", "False"])
    assert fa.flops == forward
    xf = work("aten::_efficient_attention_forward", [seq_first] * 3 + [[]] * 9, [BF16] * 3 + [""] * 9,
              ["", "", "", "", "", "", "", "", "0.0", "1", "True", ""])
    assert xf.flops == 2 * 16 * 8 * (256 * 257 // 2) * 128
    # grouped-query attention: FLOPs follow the query heads
    gqa = work("aten::scaled_dot_product_attention", [[2, 8, 40, 16], [2, 2, 40, 16], [2, 2, 40, 16], [], [], [], [], []],
               SDPA_TYPES, ["", "", "", "", "0.", "False", "", "True"])
    assert gqa.flops == 4 * 2 * 8 * 40 * 40 * 16
    # packed variable-length batches (3-D q) record no sequence lengths: no estimate
    assert call("aten::_flash_attention_forward", [[100, 8, 64]] * 3 + [[3], [3]] + [[]] * 5,
                [BF16] * 3 + ["int", "int"] + [""] * 5) is None


# ------------------------------------------------------------------------------------------------ element-wise

def test_elementwise_reductions_and_copies() -> None:
    # a broadcast add: [4, 1, 3] + [5, 1] → [4, 5, 3], 60 elements; bytes: 12 + 5 read, 60 written
    add = work("aten::add", [[4, 1, 3], [5, 1], []], [FP32, FP32, "Scalar"])
    assert add.flops == 60 and add.bytes == (12 + 5 + 60) * 4 and add.family == "elementwise" and not add.heavy
    assert work("aten::gelu", [[16, 256, 2048], []], [BF16, ""]).flops == 4 * 16 * 256 * 2048
    assert work("aten::add_", [[16, 256, 512], [16, 256, 512], []], [FP32, FP32, "Scalar"]).flops == 16 * 256 * 512
    # a reduction counts its input; the output (dim 1 summed away) is small
    mean = work("aten::mean", [[16, 256, 512], [], [], []], [FP32, "ScalarList", "Scalar", ""], ["", "[1]", "False", ""])
    assert mean.flops == 16 * 256 * 512 and mean.bytes == (16 * 256 * 512 + 16 * 512) * 4
    # layer norm: 8 FLOPs per element
    ln = work("aten::native_layer_norm", [[16, 256, 512], [], [512], [512], []],
              [FP32, "ScalarList", FP32, FP32, "Scalar"], ["", "[512]", "", "", "1e-05"])
    assert ln.flops == 8 * 16 * 256 * 512
    # a cast to bf16 (ScalarType 15): no FLOPs; 4 bytes read and 2 written per element
    cast = work("aten::_to_copy", [[1024], [], [], [], [], [], []], [FP32] + ["Scalar"] * 6,
                ["", "15", "0", "", "", "False", ""])
    assert cast.flops == 0 and cast.bytes == 1024 * 6 and cast.family == "copy"
    # index_select: the rows picked are read and written
    pick = work("aten::index_select", [[8192, 512], [], [4096]], [FP32, "Scalar", "long int"], ["", "0", ""])
    assert pick.bytes == 4096 * 8 + 2 * 4096 * 512 * 4
    assert call("aten::_foreach_add_", [[], [], []], ["TensorList", "float", "Scalar"]) is None  # no shapes recorded


def test_triton_launches_use_their_tensor_arguments() -> None:
    """An Inductor kernel's launching operator lists its tensor arguments: bytes, each once; a matmul template
    does 2·M·N·K; other kernels at least one FLOP per element of their largest argument."""
    pointwise = work("triton_poi_fused_gelu_1", [[256, 4096], [256, 4096], []], [BF16, BF16, "Scalar"])
    assert pointwise.bytes == 2 * 256 * 4096 * 2 and pointwise.flops == 256 * 4096 and pointwise.family == "fused"
    mm = work("triton_tem_fused_mm_0", [[256, 1024], [1024, 4096], [256, 4096]], [BF16] * 3)
    assert mm.flops == 2 * 256 * 4096 * 1024 and mm.heavy
