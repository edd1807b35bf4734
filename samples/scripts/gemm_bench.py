"""GEMM benchmark for MFU and the roofline (issue 27): a chain of large square matmuls, `x = x @ w`, COUNT per step,
in three runs, each profiled (record_shapes=True, no stacks or memory: small files) for ACTIVE steps:

  DEST/gemm_bf16/   bf16 operands                       -> tensor cores, the BF16 peak
  DEST/gemm_fp32/   fp32, TF32 off (precision "highest") -> CUDA cores (SIMT/FFMA kernels), the FP32 peak
  DEST/gemm_tf32/   fp32, TF32 on  (precision "high")    -> tensor cores, the TF32 peak

Each step is only the matmuls (`aten::matmul` -> `aten::mm`, 2·S·S·S FLOPs each) and a `torch.cuda.synchronize()`
that ends it, so the step's device-aware time is the GPU time of its GEMMs plus the launch gap: MFU by hand is
2·S³·COUNT / (step time × peak). w is scaled by 1/sqrt(S) so x keeps its magnitude along the chain. A few untraced
warm-up steps first (cuBLAS heuristics, clocks). Schedule wait=1, warmup=1, active=ACTIVE, repeat=1: one file per run.

    python3 samples/scripts/gemm_bench.py --dest DEST              # GPU (about 10 s on an H100)
    python3 samples/scripts/gemm_bench.py --dest DEST --device cpu --tiny   # CPU dry run (S=64, COUNT=3)

Prints, per run: the device, the step times and the MFU it measured with the datasheet peak it assumed (the plugin
computes the same from the trace), and the files written.
"""
import argparse
import json
import os
import time

import torch
from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

RUNS = {  # name -> (dtype, float32 matmul precision or None)
    "gemm_bf16": (torch.bfloat16, None),
    "gemm_fp32": (torch.float32, "highest"),
    "gemm_tf32": (torch.float32, "high"),
}


def set_precision(precision):
    if precision is None:
        return
    torch.set_float32_matmul_precision(precision)
    if torch.cuda.is_available():
        torch.backends.cuda.matmul.allow_tf32 = precision != "highest"


def step(x, w, count, device):
    for _ in range(count):
        x = x @ w
    if device.type == "cuda":
        torch.cuda.synchronize()
    return x


def run(name, dtype, precision, args, device):
    set_precision(precision)
    gen = torch.Generator(device="cpu").manual_seed(0)
    size = args.size
    x = torch.randn(size, size, generator=gen).to(device=device, dtype=dtype)
    w = (torch.randn(size, size, generator=gen) / size ** 0.5).to(device=device, dtype=dtype)
    for _ in range(args.warmup_steps):
        step(x, w, args.count, device)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    logdir = os.path.join(args.dest, name)
    times = []
    with profile(activities=activities, schedule=schedule(wait=1, warmup=1, active=args.active, repeat=1),
                 on_trace_ready=tensorboard_trace_handler(logdir, worker_name="gemm", use_gzip=True),
                 record_shapes=True) as prof:
        for _ in range(2 + args.active):
            t0 = time.perf_counter()
            step(x, w, args.count, device)
            times.append(time.perf_counter() - t0)
            prof.step()
    active = times[2:]
    flops = 2.0 * size ** 3 * args.count
    files = sorted(os.listdir(logdir))
    return {"run": name, "dtype": str(dtype), "precision": precision, "size": size, "count": args.count,
            "flops_per_step": flops, "step_s": active, "achieved_tflops": flops / (sum(active) / len(active)) / 1e12,
            "files": {f: os.path.getsize(os.path.join(logdir, f)) for f in files}}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dest", default="samples", help="the runs go to DEST/gemm_bf16, DEST/gemm_fp32, DEST/gemm_tf32")
    p.add_argument("--device", default="cuda")
    p.add_argument("--size", type=int, default=8192, help="S: the matrices are S×S")
    p.add_argument("--count", type=int, default=8, help="matmuls per step")
    p.add_argument("--active", type=int, default=3, help="profiled steps (at least 3)")
    p.add_argument("--warmup-steps", type=int, default=2, help="untraced steps before profiling")
    p.add_argument("--runs", default=",".join(RUNS), help="which runs, comma-separated")
    p.add_argument("--tiny", action="store_true", help="dry run sizes: S=64, COUNT=3")
    args = p.parse_args()
    if args.tiny:
        args.size, args.count = 64, 3
    if args.active < 3:
        p.error("--active must be at least 3")
    device = torch.device(args.device)
    started = time.perf_counter()
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(f"gemm_bench: torch {torch.__version__} on {name}; S={args.size}, {args.count} matmuls per step")
    results = []
    for run_name in args.runs.split(","):
        dtype, precision = RUNS[run_name]
        r = run(run_name, dtype, precision, args, device)
        results.append(r)
        print(f"  {run_name}: {r['achieved_tflops']:.1f} TFLOP/s over the host step time; "
              f"steps {', '.join(f'{s * 1e3:.2f} ms' for s in r['step_s'])}; files {r['files']}")
    summary = {"torch": torch.__version__, "device": name, "seconds": round(time.perf_counter() - started, 2),
               "runs": results}
    with open(os.path.join(args.dest, "gemm_bench.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(f"gemm_bench: done in {summary['seconds']} s; summary in {os.path.join(args.dest, 'gemm_bench.json')}")


if __name__ == "__main__":
    main()
