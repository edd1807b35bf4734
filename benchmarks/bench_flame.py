"""Flame graph on a large trace: the time from ``ready`` to the view's first answer and to the folded text.

Usage: ``python benchmarks/bench_flame.py TRACE [TRACE ...]``. For each trace: load it and run what the server runs
when a trace turns ready (``workspace.precompute``: the Overview and the Trace index), timed apart; then time the
first ``/flamegraph`` answer per metric (frame tree, weights, pruned tree, JSON encoded and gzipped as the API does),
the folded stacks and the merge-by-function tree, each the first time it is asked. Prints one JSON line per trace.
"""

from __future__ import annotations

import json
import platform
import sys
import time

from tb_plugin.analysis.flamegraph import flame_tree, folded_stacks
from tb_plugin.api.http import encode
from tb_plugin.loader import load_trace
from tb_plugin.workspace import precompute


def bench(path: str) -> dict[str, object]:
    t0 = time.perf_counter()
    model = load_trace(path)
    out: dict[str, object] = {"trace": path, "events": model.n_events, "load_s": round(time.perf_counter() - t0, 2)}
    t = time.perf_counter()
    precompute(model)
    out["precompute_s"] = round(time.perf_counter() - t, 2)
    for metric in ("self_host_us", "self_device_us"):
        t = time.perf_counter()
        body = encode(flame_tree(model, metric))
        out[f"{metric}_cold_s"] = round(time.perf_counter() - t, 3)
        out[f"{metric}_bytes"] = len(body.gzipped or body.body)
    t = time.perf_counter()
    text = folded_stacks(model, "self_host_us")
    out["folded_s"] = round(time.perf_counter() - t, 3)
    out["folded_lines"] = text.count("\n")
    t = time.perf_counter()
    encode(flame_tree(model, "self_host_us", True))
    out["merge_by_function_s"] = round(time.perf_counter() - t, 3)
    out["machine"] = f"{platform.processor() or platform.machine()}, {platform.python_version()}"
    return out


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        print(json.dumps(bench(arg)))
