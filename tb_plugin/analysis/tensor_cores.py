"""Which kernels run on tensor cores, and which operators could.

Kernel names are the only evidence a trace has. The rules below know the families from Volta to Blackwell:
mma shapes in cuBLAS/cuDNN names (h884, s1688, 16816, ``tensor16x8x8``), CUTLASS ``tensorop``/``wmma``/
``OpClassTensorOp``, Hopper ``gmma``/``wgmma`` and cuBLASLt's ``nvjet`` kernels, Blackwell ``tcgen05``/``umma``,
``xmma`` kernels unless they run FFMA, fused attention (flash, fmha, cuDNN sdpa) and Triton matmul templates.
CUDA-core markers (``simt``, ``ffma``, ``sgemm``, gemv) win over everything: ``sm80_xmma_gemm_f32f32_…_ffma`` and
``cutlass_80_simt_sgemm`` do not use tensor cores. Unit-tested on the kernel names of the real traces.
"""

from __future__ import annotations

import re

import numpy as np

from ..model.arrays import isin_ints
from ..model.tables import TraceModel

# Matched against the lowercased name, case-sensitively: the same as IGNORECASE on these ASCII patterns, and 5x
# faster on the long template names of kernels (IGNORECASE alternations defeat the regex engine's prefilters).
_CUDA_CORE = re.compile(
    r"simt|ffma|(?<![a-z0-9])sgemm|gemv|gemmSN_|gemmk1_|fmha_cutlass[FB]_f32".lower())
_TENSOR_CORE = re.compile(
    (r"h884|s884|h1688|s1688|c1688|i8816|i8832|16816|161616|hmma|wmma|imma|tensorop|OpClassTensorOp"
     r"|tensor\d+x\d+x\d+|gmma|umma|tcgen05|nvjet|xmma|flash_|_flash|fmha|sdpa|dgrad_1x1_stride_2x2"
     r"|first_layer_wgrad_kernel|conv1x1|conv2d_c1_k1|direct_group|triton_tem_|mma_sync|_mma_").lower())

_ELIGIBLE_OP = re.compile(
    r"^aten::(?:conv|_conv|cudnn_conv|convolution|mkldnn_conv|miopen_conv|linear|matmul|mm$|bmm$|addmm|baddbmm"
    r"|addbmm|_addmm_activation|_scaled_mm|einsum|_flash_attention|_efficient_attention|_scaled_dot_product"
    r"|scaled_dot_product|_cudnn_rnn|cudnn_rnn|lstm|gru|rnn_tanh|rnn_relu|_thnn_fused)"
    r"|^(?:autograd::engine::evaluate_function: )?(?:Mm|Addmm|Bmm|Baddbmm|Convolution|CudnnConvolution"
    r"|ThnnConv\w*|Linear|Matmul|ScaledDotProduct\w*Attention|CudnnRnn|MkldnnConvolution)Backward\d*$"
)


def kernel_uses_tensor_cores(name: str) -> bool:
    lowered = name.lower()
    return _CUDA_CORE.search(lowered) is None and _TENSOR_CORE.search(lowered) is not None


def kernel_says_cuda_cores(name: str) -> bool:
    """The name marks a CUDA-core kernel (SIMT, FFMA, sgemm, gemv): surely no tensor cores, whatever its dtype."""
    return _CUDA_CORE.search(name.lower()) is not None


def op_is_tensor_core_eligible(name: str) -> bool:
    return _ELIGIBLE_OP.search(name) is not None


def tensor_core_mask(model: TraceModel, names: np.ndarray) -> np.ndarray:
    """Per entry of a name-code column: does that kernel use tensor cores (decided once per distinct name)."""
    codes = np.unique(names)
    hits = np.fromiter((c >= 0 and kernel_uses_tensor_cores(model.strings[c]) for c in codes.tolist()),
                       dtype=bool, count=len(codes))
    return isin_ints(names, codes[hits])
