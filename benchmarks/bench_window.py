"""Trace view server-side costs on one trace: index build, bytes per event, window query latency and answer size.

    python benchmarks/bench_window.py .bench/runs/transformer_bf16_x22/*.pt.trace.json.gz [--width 2000] [--gzip]

Loads the trace in this process (as a parsed model), builds the timeline index, then times /trace/window's
function at zoom levels from the whole trace down to 1/10,000 of it, at random positions, and reports p50/p95 and
the answer size as JSON. With ``--gzip`` each answer is encoded as the server keeps it (``api.http.encode``: JSON
and gzip), so the time is the server's for an uncached window short of HTTP. Prints the machine.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import sys
import time
from pathlib import Path

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tb_plugin.api.http import encode
from tb_plugin.loader import default_parts, load_trace
from tb_plugin.timeline.index import depth_of_rows, timeline_index
from tb_plugin.timeline.window import window


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", type=Path)
    parser.add_argument("--width", type=int, default=2000)
    parser.add_argument("--queries", type=int, default=20, help="queries per zoom level")
    parser.add_argument("--gzip", action="store_true", help="encode as the server does: JSON and gzip")
    args = parser.parse_args(argv)
    print(f"machine: {machine()}")
    t = time.perf_counter()
    model = load_trace(str(args.trace), parts=default_parts())
    print(f"load: {time.perf_counter() - t:.1f} s, {model.n_events:,} events")
    t = time.perf_counter()
    ix = timeline_index(model)
    depth_of_rows(model)
    print(f"index build: {time.perf_counter() - t:.2f} s; {len(ix.start):,} drawn events; "
          f"{(ix.nbytes() + model.n_events * 2) / max(len(ix.start), 1):.1f} bytes per event (incl. depth map)")
    window(model, ix.t_min, ix.t_max, args.width)  # warm the memoised helpers (steps, flows, counters)
    span = ix.t_max - ix.t_min
    rng = random.Random(0)
    print(f"{'zoom':>10} {'p50 ms':>8} {'p95 ms':>8} {'max KB':>8}")
    for fraction in (1.0, 0.1, 0.01, 0.001, 0.0001):
        times, sizes = [], []
        for _ in range(args.queries):
            width = span * fraction
            start = ix.t_min + rng.random() * (span - width)
            t = time.perf_counter()
            answer = window(model, start, start + width, args.width)
            body = encode(answer).body if args.gzip else msgspec.json.encode(answer)
            times.append((time.perf_counter() - t) * 1000)
            sizes.append(len(body) / 1024)
        times.sort()
        p95 = times[min(len(times) - 1, int(0.95 * len(times)))]
        print(f"{fraction:>10g} {statistics.median(times):>8.1f} {p95:>8.1f} {max(sizes):>8.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
