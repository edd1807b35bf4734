"""Why the host work after a large pageable copy runs slower (issue 25, the ``pageable_copy`` calibration pair).

The planted twin's host work after its 113 MB pageable ``.to(device)`` ran 1.66x slower than the fixed twin's,
front-loaded (the first launches after the copy 2-3x, the later ones near 1x), while ``host_constants.py``'s small
step measured 1.04-1.15x after the same copy under the profiler. This probe separates the candidate causes on one
host, interleaved, 20 repetitions each, and prints one ``PROBE {json}`` line (medians in microseconds):

- workloads: ``small`` (host_constants.py's conv step, ~40 launches), ``mlp`` (8 Linear-LayerNorm-GELU blocks,
  AdamW: a third model neither of the others uses), ``pooled_cnn`` (the calibration pair's own model on its
  device-resident batch: only to see the mechanism, never to set a constant);
- phases before the timed step: nothing; the 113 MB pageable copy (one buffer, and two used in turn as the pair
  does); a 113 MB host memcpy (caches evicted, thread busy); a 20 ms ``time.sleep`` (thread idle, caches mostly
  kept); a 20 ms GPU wait (``torch.cuda._sleep`` + synchronize);
- for each, the host time of the step right after the phase and of a second step right after it (does the
  slowdown last one step or is it gone once the code is warm again), without and with the profiler (the corpus's
  settings: CPU+CUDA, shapes, memory, stacks).

    CUDA_VISIBLE_DEVICES=0 python samples/scripts/after_phase_probe.py [--device cpu --tiny] [--curve]
    python samples/scripts/after_phase_probe.py --summarize samples/host_constants/h200_after_wait.json

``--curve``: the extra host time of each step segment after ``time.sleep`` of 1-50 ms and after pageable copies of
8, 32 and 113 MB (the independent workloads only). ``--summarize`` turns a stored file of both (``phases``: one run,
``curves``: runs of ``--curve``) into the wake-up table of ``tb_plugin/analysis/diagnosis/cold_host.py``: per wait
length, the median over the independent workloads (small, mlp) under the profiler of the time the step right after
the wait lost against a warm step (the second of two back to back after no wait); at 20 ms the sleeps and the 113 MB
pageable copies (one buffer or two) together. It imports no torch.
"""
import argparse
import itertools
import json
import os
import platform
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

if __name__ == "__main__" and "--summarize" not in sys.argv:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    from bottleneck import PooledCNN
    from calibration import ConvNet, clean_defaults, on_device

INDEPENDENT = ("small", "mlp")  # pooled_cnn is the calibration pair's own model: never used for a constant
SLEEPS_MS = (1, 2, 5, 10, 20, 50)


def workloads(device, tiny):
    """name -> a step function (forward, backward, optimizer; host-timed, never synchronised)."""
    out = {}

    def make(model, opt, x, y):
        def work():
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        return work

    small = on_device(device, lambda: ConvNet((16, 32)))
    out["small"] = make(small, torch.optim.SGD(small.parameters(), lr=0.01, momentum=0.9),
                        torch.randn(4, 3, 32, 32, device=device), torch.randint(0, 10, (4,), device=device))
    d = 64 if tiny else 512
    mlp = on_device(device, lambda: nn.Sequential(*[nn.Sequential(nn.Linear(d, d), nn.LayerNorm(d), nn.GELU())
                                                    for _ in range(8)], nn.Linear(d, 10)))
    out["mlp"] = make(mlp, torch.optim.AdamW(mlp.parameters(), lr=1e-4),
                      torch.randn(32, d, device=device), torch.randint(0, 10, (32,), device=device))
    batch, size = (8, 64) if tiny else (64, 384)
    cnn = PooledCNN().to(device)
    out["pooled_cnn"] = make(cnn, torch.optim.SGD(cnn.parameters(), lr=0.01, momentum=0.9),
                             torch.rand(batch, 3, size, size, device=device),
                             torch.randint(0, 10, (batch,), device=device))
    return out


def phases(device, tiny):
    n = (1 << 20) if tiny else 113 * (1 << 20) // 4
    bufs = [torch.rand(n), torch.rand(n)]
    dst = torch.empty(n)
    turn = [0]
    cuda = device.type == "cuda"

    def two():
        turn[0] ^= 1
        bufs[turn[0]].to(device)

    def gpu_wait():
        if cuda:
            torch.cuda._sleep(int(20e-3 * 1.5e9))  # ~20 ms at ~1.5 GHz
            torch.cuda.synchronize()
        else:
            time.sleep(0.02)

    return {
        "nothing": lambda: None,
        "pageable_copy": lambda: bufs[0].to(device),
        "pageable_copy_2buf": two,
        "host_memcpy": lambda: dst.copy_(bufs[0]),
        "sleep_20ms": lambda: time.sleep(0.02),
        "gpu_wait_20ms": gpu_wait,
    }


def measure(device, tiny, reps):
    steps, before = workloads(device, tiny), phases(device, tiny)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    for work in steps.values():
        for _ in range(5):
            work()
    times = {(w, p, k): [] for w in steps for p in before for k in ("first", "second")}
    for _ in range(reps):
        for w, work in steps.items():
            for p, phase in before.items():
                sync()
                phase()
                t0 = time.perf_counter()
                work()
                t1 = time.perf_counter()
                work()
                t2 = time.perf_counter()
                times[(w, p, "first")].append(t1 - t0)
                times[(w, p, "second")].append(t2 - t1)
    sync()
    out = {}
    for w in steps:
        alone = statistics.median(times[(w, "nothing", "first")])
        out[w] = {p: {k: {"us": round(statistics.median(times[(w, p, k)]) * 1e6, 1),
                          "ratio": round(statistics.median(times[(w, p, k)]) / alone, 3)}
                      for k in ("first", "second")} for p in before}
    return out


def segmented(device, tiny):
    """name -> (forward, backward, optimizer) callables of the independent workloads (small, mlp)."""
    out = {}
    small = on_device(device, lambda: ConvNet((16, 32)))
    d = 64 if tiny else 512
    mlp = on_device(device, lambda: nn.Sequential(*[nn.Sequential(nn.Linear(d, d), nn.LayerNorm(d), nn.GELU())
                                                    for _ in range(8)], nn.Linear(d, 10)))
    for name, model, opt, x, y in (
            ("small", small, torch.optim.SGD(small.parameters(), lr=0.01, momentum=0.9),
             torch.randn(4, 3, 32, 32, device=device), torch.randint(0, 10, (4,), device=device)),
            ("mlp", mlp, torch.optim.AdamW(mlp.parameters(), lr=1e-4),
             torch.randn(32, d, device=device), torch.randint(0, 10, (32,), device=device))):
        state = {}

        def fwd(model=model, x=x, y=y, state=state):
            state["loss"] = F.cross_entropy(model(x), y)

        def bwd(opt=opt, state=state):
            opt.zero_grad(set_to_none=True)
            state["loss"].backward()

        out[name] = (fwd, bwd, opt.step)
    return out


def curve(device, tiny, reps):
    """Extra host microseconds of each step segment (forward, backward, optimizer, and the next whole step) right
    after a wait of each length (``time.sleep``) or a pageable copy of each size, against the same segments after
    no wait (medians)."""
    steps = segmented(device, tiny)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    unit = (1 << 14) if tiny else (1 << 20)
    bufs = {mb: torch.rand(mb * unit // 4) for mb in (8, 32, 113)}
    waits = {"none": lambda: None,
             **{f"sleep_{ms}ms": (lambda ms=ms: time.sleep(ms / 1000)) for ms in (1, 2, 5, 10, 20, 50)},
             **{f"pageable_{mb}MB": (lambda b=b: b.to(device)) for mb, b in bufs.items()}}
    for segs in steps.values():
        for _ in range(5):
            for s in segs:
                s()
    times = {(w, p): [] for w in steps for p in waits}
    for _ in range(reps):
        for w, segs in steps.items():
            for p, wait in waits.items():
                sync()
                wait()
                marks = [time.perf_counter()]
                for _ in range(2):
                    for s in segs:
                        s()
                        marks.append(time.perf_counter())
                times[(w, p)].append([b - a for a, b in itertools.pairwise(marks)])
    sync()
    out = {}
    def med(w, p):
        rows = times[(w, p)]
        return [statistics.median(r[i] for r in rows) * 1e6 for i in range(6)]

    for w in steps:
        base = med(w, "none")
        out[w] = {"none_us": [round(v, 1) for v in base]}
        for p in waits:
            if p != "none":
                m = med(w, p)
                out[w][p] = {"extra_us": [round(a - b, 1) for a, b in zip(m, base)],
                             "extra_total_us": round(sum(m) - sum(base), 1)}
    return out


def profiled(device, fn):
    acts = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA]
                                                     if device.type == "cuda" else [])
    with torch.profiler.profile(activities=acts, record_shapes=True, profile_memory=True, with_stack=True):
        return fn()


def host_facts():
    def read(path):
        try:
            with open(path) as fh:
                return fh.read().strip()
        except OSError:
            return None
    model = next((ln.split(":", 1)[1].strip() for ln in (read("/proc/cpuinfo") or "").splitlines()
                  if ln.startswith("model name")), platform.processor())
    return {"cpu": model, "cpus": os.cpu_count(), "affinity": len(os.sched_getaffinity(0)),
            "governor": read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
            "torch": torch.__version__, "threads": torch.get_num_threads()}


def summarize(stored):
    """{wait ms: µs lost} from a stored probe file (module doc)."""
    lost = {ms: [] for ms in SLEEPS_MS}
    for run in stored["curves"]:
        for w in INDEPENDENT:
            r = run["profiled"][w]
            warm, first = sum(r["none_us"][3:6]), sum(r["none_us"][:3])
            for ms in SLEEPS_MS:
                lost[ms].append(first + sum(r[f"sleep_{ms}ms"]["extra_us"][:3]) - warm)
            lost[20].append(first + sum(r["pageable_113MB"]["extra_us"][:3]) - warm)
    for w in INDEPENDENT:
        r = stored["phases"]["profiled"][w]
        warm = r["nothing"]["second"]["us"]
        lost[20] += [r[p]["first"]["us"] - warm for p in ("pageable_copy", "pageable_copy_2buf", "sleep_20ms")]
    return {ms: max(statistics.median(v), 0.0) for ms, v in lost.items()}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--tiny", action="store_true")
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--curve", action="store_true", help="the penalty against the wait's length, by step segment")
    p.add_argument("--summarize", metavar="STORED_JSON", help="print the wake-up table of a stored probe file")
    a = p.parse_args()
    if a.summarize:
        with open(a.summarize) as fh:
            print(json.dumps(summarize(json.load(fh))))
        return
    device = torch.device(a.device)
    clean_defaults(device)
    run = curve if a.curve else measure
    out = {"host": host_facts(), "device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
           "plain": run(device, a.tiny, a.reps),
           "profiled": profiled(device, lambda: run(device, a.tiny, a.reps))}
    print("PROBE " + json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
