"""Record a run with CUPTI range-profiler counters (issue 12: `cuda_profiler_range` events).

A small bf16 MLP with a conv stem on one GPU, profiled with
`experimental_config=torch._C._profiler._ExperimentalConfig(profiler_metrics=[...],
profiler_measure_per_kernel=True)`: Kineto then runs CUPTI's range profiler, which replays
each kernel to read the named counters and writes one `cuda_profiler_range` event per kernel
(counters in its args) next to the usual CPU and GPU events. Two active steps keep the trace small.
The metrics tried, in order, are the ones HTA's CUPTI counter analysis documents; the first set the
driver accepts is used, and the choice is written to `cupti_meta.json` beside the trace.
"""
import argparse
import json
import os

import torch
import torch.nn as nn
from torch.profiler import ProfilerActivity, profile, record_function, schedule, tensorboard_trace_handler

METRIC_SETS = [
    ["kineto__tensor_core_insts", "dram__bytes_read.sum", "dram__bytes_write.sum"],
    ["kineto__cuda_core_flops", "kineto__tensor_core_insts"],
    ["sm__warps_launched.sum", "dram__bytes_read.sum"],
]


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 32, 3, padding=1)
        self.mlp = nn.Sequential(nn.Linear(32 * 16 * 16, 1024), nn.GELU(), nn.Linear(1024, 10))

    def forward(self, x):
        return self.mlp(torch.relu(self.stem(x)).flatten(1))


def record(logdir: str, metrics: list[str], steps: int) -> None:
    model = Net().cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(64, 3, 16, 16, device="cuda")
    y = torch.randint(0, 10, (64,), device="cuda")
    config = torch._C._profiler._ExperimentalConfig(profiler_metrics=metrics, profiler_measure_per_kernel=True)
    with profile(
        activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
        schedule=schedule(wait=1, warmup=1, active=steps, repeat=1),
        on_trace_ready=tensorboard_trace_handler(logdir, worker_name="cupti", use_gzip=True),
        record_shapes=True,
        experimental_config=config,
    ) as prof:
        for _ in range(2 + steps):
            with record_function("forward"), torch.autocast("cuda", dtype=torch.bfloat16):
                loss = nn.functional.cross_entropy(model(x), y)
            with record_function("backward"):
                loss.backward()
            with record_function("optimizer"):
                opt.step()
                opt.zero_grad(set_to_none=True)
            prof.step()
    torch.cuda.synchronize()


def count_ranges(logdir: str) -> int:
    import gzip

    total = 0
    for name in os.listdir(logdir):
        if name.endswith(".pt.trace.json.gz"):
            with gzip.open(os.path.join(logdir, name), "rt") as f:
                events = json.load(f).get("traceEvents", [])
            total += sum(1 for e in events if e.get("cat") == "cuda_profiler_range")
    return total


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--logdir", default="samples/cupti_counters")
    p.add_argument("--steps", type=int, default=2)
    args = p.parse_args()
    errors = []
    for metrics in METRIC_SETS:
        os.makedirs(args.logdir, exist_ok=True)
        for name in os.listdir(args.logdir):
            os.remove(os.path.join(args.logdir, name))
        try:
            record(args.logdir, metrics, args.steps)
        except Exception as exc:  # a metric set the driver rejects: try the next one
            errors.append(f"{metrics}: {exc!r}")
            continue
        ranges = count_ranges(args.logdir)
        if ranges:
            meta = {"metrics": metrics, "ranges": ranges, "torch": torch.__version__,
                    "device": torch.cuda.get_device_name(), "rejected": errors}
            with open(os.path.join(args.logdir, "..", "cupti_meta.json"), "w") as f:
                json.dump(meta, f, indent=1)
            print(json.dumps(meta))
            return
        errors.append(f"{metrics}: no cuda_profiler_range events")
    print(json.dumps({"failed": errors}))


if __name__ == "__main__":
    main()
