/**
 * The frontend's pure logic for names and sources (npm test, node:test): kernel short names, call-stack frames
 * (user first, library files), VS Code detection and lines. A failed check throws with its message.
 */
import { test } from "node:test";
import { shortKernelName, shortKernelNames } from "../src/views/common/kernelNames";
import {
  frameAction,
  isVsCodeWebviewOrigin,
  leadingFrames,
  parseStack,
  type SourceFile,
  VSCODE_PAST_END,
  vsCodeLine,
  vsCodeWebviewOrigin,
} from "../src/views/common/sourceFrames";

test("kernel short names, call-stack frames and VS Code lines", () => {
  let checks = 0;
  function eq(actual: unknown, expected: unknown, what: string): void {
    checks++;
    const a = JSON.stringify(actual);
    const e = JSON.stringify(expected);
    if (a !== e) throw new Error(`${what}: expected ${e}, got ${a}`);
  }

  // ---- kernel names (real names from samples/resnet_slow_dataloader, transformer_bf16, ddp_resnet)
  const REDUCE = "void at::native::reduce_kernel<128, 4, at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, unsigned int, float, 4, 4> >(at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, unsigned int, float, 4, 4>)";
  const SUM = "void at::native::reduce_kernel<128, 4, at::native::ReduceOp<float, at::native::func_wrapper_t<float, at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, float, 4, 4> >(at::native::ReduceOp<float, at::native::func_wrapper_t<float, at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, float, 4, 4>)";
  const SOFTMAX = "void (anonymous namespace)::softmax_warp_forward<float, float, float, 10, true, false>(float*, float const*, int, int, int, bool const*, int, bool)";
  const CAT = "void at::native::(anonymous namespace)::CatArrayBatchedCopy_vectorized<at::native::(anonymous namespace)::OpaqueType<4u>, unsigned int, 1, 128, 1, 16, 4>(char*, at::native::(anonymous namespace)::CatArrInputTensorMetadata<at::native::(anonymous namespace)::OpaqueType<4u>, unsigned int, 128, 1>)";
  const MUL = "void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<at::native::BUnaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> > >(at::TensorIteratorBase&, at::native::BUnaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> > const&)::{lambda(int)#1}>(int, at::native::gpu_kernel_impl_nocast<at::native::BUnaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> > >(at::TensorIteratorBase&)::{lambda(int)#1})";
  const ADD = "void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl<at::native::CUDAFunctor_add<float> >(at::TensorIteratorBase&, at::native::CUDAFunctor_add<float> const&)::{lambda(int)#1}>(int, at::native::gpu_kernel_impl<at::native::CUDAFunctor_add<float> >(at::TensorIteratorBase&)::{lambda(int)#1})";
  const CUTLASS = "_ZN17cutlass__5x_cudnn6KernelINS_4conv6kernel23ImplicitGemmConvolutionINS1_11threadblock22ImplicitGemmMultistageINS_4gemm9GemmShapeILi64ELi128ELi16EEE";
  eq(shortKernelName(REDUCE), "reduce_kernel<…>", "template arguments, namespaces, return type and parameters go");
  eq(shortKernelName(SOFTMAX), "softmax_warp_forward<…>", "anonymous namespace");
  eq(shortKernelName(CAT), "CatArrayBatchedCopy_vectorized<…>", "anonymous namespace inside at::native");
  eq(shortKernelName(MUL), "elementwise_kernel<…>", "a lambda in the template arguments");
  eq(shortKernelName("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"), "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "C function: parameters go");
  eq(shortKernelName("at::cuda::philox::unpack_cudnn(at::PhiloxCudaState, long*, long*)"), "unpack_cudnn", "no template");
  eq(shortKernelName("nvjet_sm90_tst_128x128_64x6_2x1_v_bz_NNT"), "nvjet_sm90_tst_128x128_64x6_2x1_v_bz_NNT", "plain names stay");
  eq(shortKernelName('<img src=x onerror="1">'), '<img src=x onerror="1">', "not a C++ name: kept as it is");
  eq(shortKernelName(CUTLASS), "Kernel<ImplicitGemmConvolution<…>>", "mangled: the class and its first template argument");
  const many = shortKernelNames([REDUCE, SUM, MUL, ADD, SOFTMAX]);
  eq([...many.values()], ["reduce_kernel<…> (MeanOps)", "reduce_kernel<…> (sum_functor)", "elementwise_kernel<…> (MulFunctor)", "elementwise_kernel<…> (CUDAFunctor_add)", "softmax_warp_forward<…>"], "colliding short names get their functor");

  // ---- frames: the user's own first (a real 2.x stack: the user's line below five torch frames)
  const STACK = [
    "torch/nn/modules/linear.py(134): forward", "torch/nn/modules/module.py(1786): _call_impl",
    "torch/nn/modules/module.py(1775): _wrapped_call_impl", "torch/nn/modules/container.py(250): forward",
    "torch/nn/modules/module.py(1786): _call_impl", "transformer_bf16.py(107): train_step", "transformer_bf16.py(140): main",
  ].join(";");
  const file = (path: string, kind: SourceFile["kind"], absolute: string | null = null): [string, SourceFile] => [path, { path, kind, absolute }];
  const index = new Map<string, SourceFile>([
    file("torch/nn/modules/linear.py", "library"), file("torch/nn/modules/module.py", "library"),
    file("torch/nn/modules/container.py", "library"), file("transformer_bf16.py", "user"),
  ]);
  const frames = parseStack(STACK);
  const { lead, hidden } = leadingFrames(frames, index, 3);
  eq(lead.map((f) => `${f.func}:${f.line}`), ["train_step:107", "main:140"], "the user's frames lead");
  eq(hidden, 5, "the library frames are behind the toggle");
  eq(leadingFrames(frames, new Map(), 3).lead.length, 3, "without an index: the first frames");
  eq(leadingFrames(parseStack("torch/a.py(1): f;torch/b.py(2): g"), index, 3).lead.map((f) => f.func), ["f", "g"], "no user frame: library frames shown");

  // ---- VS Code: the documented webview origins only
  eq(isVsCodeWebviewOrigin("vscode-webview://1ch5lhb2rb4f1c0nm0ikshfdh0tjh6oc"), true, "desktop webview");
  eq(isVsCodeWebviewOrigin("https://0a1b2c3d.vscode-cdn.net"), true, "vscode.dev / Codespaces webview");
  eq(isVsCodeWebviewOrigin("https://evil.com/.vscode-cdn.net"), false, "not a host suffix");
  eq(isVsCodeWebviewOrigin("https://vscode-cdn.net.evil.com"), false, "suffix only at the end");
  eq(isVsCodeWebviewOrigin("http://localhost:8888"), false, "Jupyter");
  const tb = "http://127.0.0.1:6006";
  eq(vsCodeWebviewOrigin([tb, "vscode-webview://abc", "vscode-file://vscode-app"], ""), "vscode-webview://abc", "inside VS Code");
  eq(vsCodeWebviewOrigin([tb, "http://localhost:8888"], "http://localhost:8888/lab"), null, "inside Jupyter");
  eq(vsCodeWebviewOrigin([tb], ""), null, "TensorBoard on its own");
  eq(vsCodeWebviewOrigin([], "vscode-webview://abc/index.html?id=1"), "vscode-webview://abc", "no ancestorOrigins: the referrer");
  eq(vsCodeWebviewOrigin([], "https://colab.research.google.com/"), null, "no ancestorOrigins, Colab");

  // ---- lines: VS Code selects new Position(line, 0) (0-based) and drops a falsy line
  eq(vsCodeLine(107), 106, "1-based → 0-based");
  eq(vsCodeLine(2), 1, "line 2");
  eq(vsCodeLine(1), VSCODE_PAST_END, "line 1 cannot be 0: past the end opens the file at its top");

  // ---- clicks
  const site = "/env/lib/python3.11/site-packages";
  const idx2 = new Map<string, SourceFile>([...index, file("torch/nn/modules/conv.py", "library", `${site}/torch/nn/modules/conv.py`)]);
  const [user, conv, lin] = parseStack(`transformer_bf16.py(107): train_step;torch/nn/modules/conv.py(549): forward;torch/nn/modules/linear.py(134): forward`);
  if (!user || !conv || !lin) throw new Error("frames");
  eq(frameAction(user, idx2, true), { kind: "open", filename: "transformer_bf16.py", line: 106, message: "Opening transformer_bf16.py:107 in VS Code" }, "user frame in VS Code");
  eq(frameAction(conv, idx2, true), { kind: "open", filename: `${site}/torch/nn/modules/conv.py`, line: 548, message: `Opening ${site}/torch/nn/modules/conv.py:549 in VS Code` }, "resolved library frame");
  eq(frameAction(lin, idx2, true)?.kind, "copy", "unresolved library frame: not sent to VS Code");
  eq(frameAction(lin, idx2, false)?.message, "Copied torch/nn/modules/linear.py:134 (a library file: the trace does not say which folder torch/nn/modules/linear.py is relative to)", "library note");
  eq(frameAction(user, idx2, false), { kind: "copy", text: "transformer_bf16.py:107", message: "Copied transformer_bf16.py:107" }, "outside VS Code: copy");

  if (checks < 30) throw new Error(`only ${checks} checks ran`);
});
