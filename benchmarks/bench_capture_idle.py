"""What ``tb_plugin.capture.enable()`` costs a training loop while nobody asks for a capture.

A loop of 10,000 small optimizer steps (a 32x32 Linear, SGD, CPU, one thread) runs in a fresh process without
capture and in another with ``enable(folder)`` (the optimizer step hook and the polling thread, polling every
second), alternately, ``--rounds`` times each. Prints each round's time per step, the medians, the difference and
the spread of the rounds themselves (the noise), and the hook's own cost per call measured alone. Not a test:
timings depend on the machine and what else runs on it.

    .venv/bin/python benchmarks/bench_capture_idle.py [--steps 10000] [--rounds 7] [--json]

Needs torch in the interpreter that runs it (the loops run in subprocesses of it).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

LOOP = """
import sys, time, torch
torch.set_num_threads(1)
steps, folder = int(sys.argv[1]), sys.argv[2]
if folder != "-":
    import tb_plugin.capture
    tb_plugin.capture.enable(folder)
model = torch.nn.Linear(32, 32)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(8, 32)
for _ in range(200):  # warm-up, not timed
    opt.zero_grad(); model(x).sum().backward(); opt.step()
t0 = time.perf_counter()
for _ in range(steps):
    opt.zero_grad(); model(x).sum().backward(); opt.step()
print(time.perf_counter() - t0)
"""

HOOK = """
import sys, time, timeit
sys.path.insert(0, sys.argv[1])
from tb_plugin.capture.agent import Agent
from tb_plugin.capture.folder import CaptureFolder
agent = Agent(CaptureFolder(sys.argv[2]), rank=0, world_size=1)
class Optimizer: pass
opt = Optimizer()
agent._optimizer_hook(opt, (), {})
n = 1_000_000
print(timeit.timeit(lambda: agent._optimizer_hook(opt, (), {}), number=n) / n
      - timeit.timeit(lambda: None, number=n) / n)
"""


def run_loop(steps: int, folder: str | None) -> float:
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", LOOP, str(steps), folder or "-"], capture_output=True, text=True,
                         env=env, check=True)
    return float(out.stdout.strip().splitlines()[-1]) / steps


def hook_cost(folder: str) -> float:
    out = subprocess.run([sys.executable, "-c", HOOK, str(REPO), folder], capture_output=True, text=True, check=True)
    return float(out.stdout.strip())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        off: list[float] = []
        on: list[float] = []
        for i in range(args.rounds):
            off.append(run_loop(args.steps, None))
            on.append(run_loop(args.steps, str(Path(tmp) / f"run{i}")))
            print(f"round {i + 1}: without {off[-1] * 1e6:8.2f} us/step   with enable() {on[-1] * 1e6:8.2f} us/step",
                  file=sys.stderr)
        hook = hook_cost(str(Path(tmp) / "hook"))
    result = summarize(off, on, hook, args.steps)
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        print(f"{args.steps:,} steps, {args.rounds} rounds each (median us/step): without {result['without_us']:.2f}, "
              f"with enable() {result['with_us']:.2f}, difference {result['difference_us']:+.2f} "
              f"({result['difference_pct']:+.2f} %); the rounds spread {result['noise_pct']:.2f} % (max-min over "
              f"median, without); the hook alone {result['hook_ns']:.0f} ns a step")


def summarize(off: list[float], on: list[float], hook: float, steps: int) -> dict[str, float]:
    base, with_ = statistics.median(off), statistics.median(on)
    return {
        "steps": steps,
        "without_us": base * 1e6,
        "with_us": with_ * 1e6,
        "difference_us": (with_ - base) * 1e6,
        "difference_pct": (with_ / base - 1) * 100,
        "noise_pct": (max(off) - min(off)) / base * 100,
        "hook_ns": hook * 1e9,
        "recorded": time.strftime("%Y-%m-%d"),
    }


if __name__ == "__main__":
    main()
