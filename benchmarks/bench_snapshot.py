"""Allocator snapshots: reading and answering a history of 100,000 entries (torch's memory_viz default range).

    python benchmarks/bench_snapshot.py [--entries 100000] [--repeat 3] [--file snapshot.pickle.gz]

Builds a synthetic snapshot in torch's exact format (``tests/snapshots.big_history``: allocations of realistic sizes,
300 distinct stacks of 30 frames, each entry a traceback list of its own as torch writes them) or reads ``--file``,
writes it as a gzipped pickle, then times what the server does: read + inflate + data-only unpickle + columns
(``open_snapshot``), the history (allocations paired, curves), the summary (peak, out-of-memory, fragmentation over
200 points, categories, findings), timeline windows at 1,600 columns (the whole history, and 1/10, 1/100 of it at
random places), the live set at the peak, the segments at the peak and one allocation with its neighbours; each
encoded as the server keeps it (JSON + gzip). Prints the median of ``--repeat`` cold runs (a fresh decode each)
and the machine.
"""

from __future__ import annotations

import argparse
import gzip
import os
import pickle
import platform
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tb_plugin.analysis import snapshot_view as view
from tb_plugin.analysis.snapshot_history import device_history
from tb_plugin.analysis.snapshot_timeline import timeline_window
from tb_plugin.api.http import encode
from tb_plugin.loader.snapshot import load_snapshot
from tests.snapshots import big_history


def machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), "unknown CPU") if Path("/proc/cpuinfo").exists() else "unknown CPU"
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}"


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def one_run(path: str, width: int, rng: random.Random) -> dict[str, float]:
    t: dict[str, float] = {}
    t["read + unpickle + columns"], snap = timed(lambda: load_snapshot(path))
    device = view.default_device(snap)
    t["history (pairs, curves)"], h = timed(lambda: device_history(snap, device))
    t["summary (encoded)"], summary = timed(lambda: encode(view.snapshot_summary(snap, device)))
    t["window: whole history"], whole = timed(lambda: encode(timeline_window(snap, device, None, None, width)))
    for share in (10, 100):
        span = max(8, h.n // share)
        starts = [rng.randrange(0, max(1, h.n - span)) for _ in range(5)]
        times = [timed(lambda s=s, n=span: encode(timeline_window(snap, device, s, s + n - 1, width)))[0]
                 for s in starts]
        t[f"window: 1/{share} (median of 5)"] = statistics.median(times)
    t["live set at the peak"], _ = timed(lambda: encode(view.live_set(snap, device, h.peak, "frame", 50)))
    t["segments at the peak"], _ = timed(lambda: encode(view.segments_view(snap, device, h.peak)))
    biggest = int(h.size.argmax())
    t["one allocation + neighbours"], _ = timed(lambda: encode(view.allocation(snap, device, biggest, h.peak)))
    t["_answer bytes: summary (gz)"] = float(summary.nbytes)
    t["_answer bytes: whole window (gz)"] = float(whole.nbytes)
    t["_entries"] = float(h.n)
    t["_allocations"] = float(len(h.size))
    t["_columns kept (MB)"] = snap.nbytes / 1e6
    return t


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--entries", type=int, default=100_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--width", type=int, default=1600)
    p.add_argument("--file", help="a snapshot to read instead of the synthetic one")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = args.file
        if path is None:
            path = os.path.join(tmp, "big.pickle.gz")
            data = pickle.dumps(big_history(args.entries))
            Path(path).write_bytes(gzip.compress(data, 6))
            print(f"synthetic snapshot: {len(data) / 1e6:.1f} MB pickle, {os.path.getsize(path) / 1e6:.1f} MB gzipped")
        runs = [one_run(path, args.width, random.Random(i)) for i in range(args.repeat)]
    print(machine())
    for key in runs[0]:
        values = [r[key] for r in runs]
        if key.startswith("_"):
            print(f"{key[1:]:36s} {values[0]:,.1f}")
        else:
            runs_ms = ", ".join(f"{1000 * v:.0f}" for v in values)
            print(f"{key:36s} {1000 * statistics.median(values):8.1f} ms   (runs: {runs_ms})")


if __name__ == "__main__":
    main()
