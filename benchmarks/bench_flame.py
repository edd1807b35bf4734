"""Flame graph on a large trace: the time from ``ready`` to the view's first answer and to the folded text.

Usage: ``python benchmarks/bench_flame.py TRACE [--runs N]``. Each run loads the trace afresh (so nothing is
memoised) and runs what the server runs when a trace turns ready (``workspace.precompute``: the Overview and the
Trace index), timed apart; then it times the first ``/flamegraph`` answer per metric (frame tree, weights, pruned
tree, JSON encoded and gzipped as the API does), the folded stacks and the merge-by-function tree, each the first
time it is asked. Prints one JSON line per run, then the best of each figure, with the load average (other work on
the machine slows every figure; compare runs made at similar load).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

from tb_plugin.analysis.flamegraph import flame_tree, folded_stacks
from tb_plugin.api.http import encode
from tb_plugin.loader import load_trace
from tb_plugin.workspace import precompute


def _timed(out: dict[str, float], key: str, fn: object) -> object:
    t = time.perf_counter()
    value = fn()  # type: ignore[operator]
    out[key] = round(time.perf_counter() - t, 3)
    return value


def run_once(path: str) -> dict[str, float]:
    out: dict[str, float] = {}
    model = _timed(out, "load_s", lambda: load_trace(path))
    _timed(out, "precompute_s", lambda: precompute(model))  # type: ignore[arg-type]
    for metric in ("self_host_us", "self_device_us"):
        body = _timed(out, f"{metric}_s", lambda m=metric: encode(flame_tree(model, m)))  # type: ignore[arg-type]
        out[f"{metric}_gzip_bytes"] = len(body.gzipped or body.body)  # type: ignore[attr-defined]
    text = _timed(out, "folded_s", lambda: folded_stacks(model, "self_host_us"))  # type: ignore[arg-type]
    out["folded_lines"] = str(text).count("\n")
    _timed(out, "merge_by_function_s", lambda: encode(flame_tree(model, "self_host_us", True)))  # type: ignore[arg-type]
    out["loadavg_1min"] = round(os.getloadavg()[0], 1)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trace")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    runs = []
    for _ in range(args.runs):
        runs.append(run_once(args.trace))
        print(json.dumps(runs[-1]))
    best = {k: min(r[k] for r in runs) for k in runs[0]}
    print(json.dumps({"best": best, "cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
                      "python": platform.python_version()}))


if __name__ == "__main__":
    main()
