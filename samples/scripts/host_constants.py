"""Measure two host-side constants of the what-if replay (issue 25) on a GPU machine, apart from the calibration
corpus (other models, other shapes), so that the pairs that use them are checked against independent numbers.

1. cuDNN's heuristic plan: with ``torch.backends.cudnn.benchmark = False`` a convolution with a shape cuDNN has not
   seen builds one execution plan (the heuristics' choice) before it runs. What that costs on the host, per call
   (forward: ``aten::cudnn_convolution``; backward: ``aten::convolution_backward``, data and weight gradients), is
   what a convolution autotuned in benchmark mode costs once autotuning is off. Measured from a profiler trace of a
   conv net (widths 48-96-192-384, batch 16) fed 12 image sizes the calibration pair never uses, each size twice in
   a row: the first call of a size builds the plan, the second finds it cached.
2. Host work after a host phase that streams far more memory than the caches: the same small training step (a
   conv net on a tiny batch: ~40 launches, GPU-light) timed on the host alone, right after a 113 MB pageable
   host-to-device copy, after 32 MB of CPU RNG (``torch.randn``), and after a 113 MB host memcpy, 30 times each,
   interleaved. The ratio is how much slower the host's own work runs after such a phase; measured twice, as is and
   under the profiler with the calibration corpus's settings (``after_phase_profiled``).

Prints one ``HOST_CONSTANTS {json}`` line.

    python samples/scripts/host_constants.py [--device cpu --tiny]   # the CPU dry run
"""
import argparse
import gzip
import json
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from calibration import ConvNet, clean_defaults, on_device  # noqa: E402


def _conv_calls(trace_path):
    """(name, input shape, host µs) of every cuDNN convolution call in a Chrome trace, in time order."""
    with open(trace_path) as fh:
        events = json.load(fh)["traceEvents"]
    wanted = ("aten::cudnn_convolution", "aten::convolution_backward")
    calls = [e for e in events if e.get("ph") == "X" and e.get("name") in wanted]
    calls.sort(key=lambda e: e["ts"])
    return [(e["name"], json.dumps((e.get("args") or {}).get("Input Dims", [])[:2]), float(e["dur"])) for e in calls]


def heuristic_plan(device, tiny):
    """Median host µs of a convolution call with a new shape and with a cached one, forward and backward."""
    torch.backends.cudnn.benchmark = False
    widths, batch, sizes = ((8, 16), 2, [20 + 3 * i for i in range(3)]) if tiny else \
        ((48, 96, 192, 384), 16, [150 + 3 * i for i in range(12)])
    model = on_device(device, lambda: ConvNet(widths))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step(size):
        x = torch.randn(batch, 3, size, size, device=device)
        y = torch.randint(0, 10, (batch,), device=device)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    step(64)  # cuDNN handles, allocator warm-up
    acts = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA]
                                                     if device.type == "cuda" else [])
    with torch.profiler.profile(activities=acts, record_shapes=True) as prof:
        for size in sizes:
            step(size)  # new shapes: one heuristic plan per convolution and direction
            step(size)  # the same shapes: plans cached
            if device.type == "cuda":
                torch.cuda.synchronize()
    path = os.path.join(tempfile.mkdtemp(), "conv.json")
    prof.export_chrome_trace(path)
    seen, new, cached = set(), {}, {}
    for name, dims, us in _conv_calls(path):
        key = (name, dims)
        (cached if key in seen else new).setdefault(name, []).append(us)
        seen.add(key)
    med = {f"{k}_{n.split('::')[1]}_us": round(statistics.median(v), 1)
           for k, d in (("new", new), ("cached", cached)) for n, v in d.items()}
    counts = {f"{k}_{n.split('::')[1]}_calls": len(v) for k, d in (("new", new), ("cached", cached))
              for n, v in d.items()}
    spread = {f"new_{n.split('::')[1]}_p10_p90_us": [round(q, 1) for q in statistics.quantiles(v, n=10)[::8]]
              for n, v in new.items() if len(v) >= 2}
    return {**med, **counts, **spread, "widths": widths, "batch": batch, "sizes": sizes,
            "cudnn": torch.backends.cudnn.version() if device.type == "cuda" else None}


def after_phase(device, tiny, reps):
    """Host seconds of one small training step alone and right after each streaming phase (medians)."""
    model = on_device(device, lambda: ConvNet((16, 32)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(4, 3, 32, 32, device=device)
    y = torch.randint(0, 10, (4,), device=device)
    n = (1 << 20) if tiny else 113 * (1 << 20) // 4
    pageable = torch.rand(n)
    host_dst = torch.empty(n)
    rng_n = (1 << 18) if tiny else 8 * (1 << 20)  # 32 MB of float32

    def work():
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    phases = {
        "alone": lambda: None,
        "after_pageable_copy": lambda: pageable.to(device),
        "after_cpu_randn": lambda: torch.randn(rng_n),
        "after_host_memcpy": lambda: host_dst.copy_(pageable),
    }
    times = {k: [] for k in phases}
    for _ in range(5):
        work()
    for _ in range(reps):
        for name, phase in phases.items():
            if device.type == "cuda":
                torch.cuda.synchronize()
            phase()
            t0 = time.perf_counter()
            work()
            times[name].append(time.perf_counter() - t0)
    if device.type == "cuda":
        torch.cuda.synchronize()
    alone = statistics.median(times["alone"])
    return {"threads": torch.get_num_threads(),
            **{f"{k}_us": round(statistics.median(v) * 1e6, 1) for k, v in times.items()},
            **{f"{k}_ratio": round(statistics.median(v) / alone, 3) for k, v in times.items() if k != "alone"}}


def profiled(device, measure):
    """``measure()`` under the profiler as the calibration corpus records (CPU and CUDA activities, shapes, memory
    and Python stacks): a traced run's host work carries the profiler's own per-operator work, which a cold cache
    slows down too."""
    acts = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA]
                                                     if device.type == "cuda" else [])
    with torch.profiler.profile(activities=acts, record_shapes=True, profile_memory=True, with_stack=True):
        return measure()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--tiny", action="store_true")
    p.add_argument("--reps", type=int, default=30)
    p.add_argument("--out", help="also write the JSON here (gzip if it ends in .gz)")
    a = p.parse_args()
    device = torch.device(a.device)
    clean_defaults(device)
    out = {"device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu", "torch": torch.__version__,
           "host_cpus": os.cpu_count(), "heuristic_plan": heuristic_plan(device, a.tiny),
           "after_phase": after_phase(device, a.tiny, a.reps),
           "after_phase_profiled": profiled(device, lambda: after_phase(device, a.tiny, a.reps))}
    line = json.dumps(out)
    if a.out:
        with (gzip.open if a.out.endswith(".gz") else open)(a.out, "wt") as fh:
            fh.write(line + "\n")
    print("HOST_CONSTANTS " + line)


if __name__ == "__main__":
    main()
