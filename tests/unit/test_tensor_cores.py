"""Tensor-core detection on kernel names seen in real traces (V100 2021, H200 2026) and well-known families."""

from __future__ import annotations

import pytest

from tb_plugin.analysis.tensor_cores import kernel_uses_tensor_cores, op_is_tensor_core_eligible

TENSOR_CORE = [
    # Hopper (H200 traces)
    "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT",
    "nvjet_sm90_hsh_128x256_64x4_2x1_v_bz_coopA_TNN",
    "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x64_4x1x1_cga1x1x1_kernel0_0",
    "cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_26_64x64x64_1x4x1_cga1x1x1_kernel0_0",
    "sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
    "sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x128x32_warpgroupsize1x1x1_g1_execute",
    # Ampere; a mangled CUTLASS conv from cuDNN (H200 ResNet trace) says TensorOp deep inside its name
    "_ZN17cutlass__5x_cudnn6KernelINS_4conv6kernel23ImplicitGemmConvolutionINS1_11threadblock22ImplicitGemmMultistage"
    "INS_4gemm9GemmShapeILi64ELi128ELi16EEENS_6layout40ColumnMajorTensorOpMultiplicandCongruousILi32ELi32EEE",
    "sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x16_stage4_warpsize2x2x1_g1_tensor16x8x8",
    "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_bf16_256x64_32x4_nn_align2>(cutlass_80_tensorop_bf16_s168",
    "void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_128x1_tn_align2>(cutlass_80_wmma_tensorop",
    "void cutlass__5x_cudnn::Kernel<cutlass_tensorop_s1688dgrad_optimized_tf32_256x64_16x4_nhwc_unity_stride_align4>(cu",
    "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn",
    "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t>>",
    "fmha_cutlassF_bf16_aligned_64x128_rf_sm80",
    # Volta / Turing (2021 lists)
    "volta_fp16_s884cudnn_fp16_256x128_ldg8_relu_f2f_exp_small_nhwc2nchw_tn_v1",
    "volta_h884gemm_128x128_ldg8_nn",
    "turing_fp16_s1688gemm_fp16_128x128_ldg8_f2f_tn",
    # Blackwell and Triton templates
    "nvjet_sm100_tss_128x256_64x4_2cta_v_bz_TNN",
    "sm100_tcgen05_gemm_bf16",
    "triton_tem_fused_addmm_0",
]
CUDA_CORE = [
    "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize64x64x8_stage3_warpsize1x4x1_ffma_aligna4_alignc4_execute_kernel__5x",
    "sm80_xmma_fprop_implicit_gemm_f32f32_f32f32_f32_nchwkcrs_nchw_tilesize256x64x8_stage3_warpsize2x2x1_g1_ffma_aligna4",
    "void cutlass::Kernel2<cutlass_80_simt_sgemm_128x32_8x5_nn_align1>(cutlass_80_simt_sgemm_128x32_8x5_nn_align1::Params)",
    "void sgemm_largek_lds64<true, false, 5, 5, 4, 4, 4, 34>(float*, float const*, float const*, int, int, int, int)",
    "void gemmSN_TN_kernel<float, 128, 16, 2, 4, 8, 9, false, cublasGemvTensorStridedBatched<float const>>",
    "ampere_sgemm_128x64_tn",
    "volta_scudnn_128x64_relu_interior_nn_v1",
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul> >",
    "triton_poi_fused_gelu_0",
    "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
    "void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, int, 128, true, 1, true>(cudnnTensorStruct, float const*)",
]


@pytest.mark.parametrize("name", TENSOR_CORE)
def test_tensor_core_kernels(name: str) -> None:
    assert kernel_uses_tensor_cores(name)


@pytest.mark.parametrize("name", CUDA_CORE)
def test_cuda_core_kernels(name: str) -> None:
    assert not kernel_uses_tensor_cores(name)


def test_every_gemm_like_kernel_of_the_h200_transformer_is_classified(real_traces) -> None:  # type: ignore[no-untyped-def]
    """The bf16 transformer's matmuls and attention run on tensor cores; its elementwise kernels do not."""
    import numpy as np

    from tb_plugin.loader import load_trace
    from tb_plugin.model import Kind

    path = next((real_traces / "h200" / "transformer_bf16").glob("*.gz"))
    model = load_trace(str(path))
    ev = model["events"]
    names = {model.strings[c] for c in np.unique(ev["name"][ev["kind"] == Kind.KERNEL]).tolist()}
    tc = {n for n in names if kernel_uses_tensor_cores(n)}
    assert {n for n in names if n.startswith("nvjet_sm90")} <= tc
    assert any("sdpa" in n for n in tc)
    assert not any("elementwise" in n or "reduce_kernel" in n for n in tc)


@pytest.mark.parametrize("name,eligible", [
    ("aten::conv2d", True), ("aten::cudnn_convolution", True), ("aten::linear", True), ("aten::mm", True),
    ("aten::addmm", True), ("aten::bmm", True), ("aten::_scaled_dot_product_flash_attention", True),
    ("aten::_flash_attention_forward", True), ("MmBackward0", True),
    ("autograd::engine::evaluate_function: AddmmBackward0", True), ("ConvolutionBackward0", True),
    ("aten::add", False), ("aten::relu", False), ("aten::mmap", False), ("aten::batch_norm", False),
    ("AddBackward0", False),
])
def test_operator_eligibility(name: str, eligible: bool) -> None:
    assert op_is_tensor_core_eligible(name) is eligible
