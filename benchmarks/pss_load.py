#!/usr/bin/env python3
"""What the memory peak of a cold load is made of: PSS over time of the loader process and its parallel parts.

    python benchmarks/pss_load.py TRACE [--parts 4,8,15] [--every 0.01] [--timeline] [--spill-mb N] [--warm P]

For each ``--parts`` value a fresh child does what a loader worker does (``jobs.worker``'s imports, then
``load_trace`` with that many parts and ``save`` into a fresh parse cache entry); this process polls
``/proc/PID/smaps_rollup`` of the child and of every part it forks (PSS: pages shared by forked processes counted
once, as ``bench_device.py`` measures the whole tree) and prints the peak, what the loader held and what the parts
held at that moment, the loader's PSS after its imports (the interpreter, before any trace byte), and the time.
``--timeline`` prints the samples (loader MB, parts MB, live parts) ten times a second.

The server's share (TensorBoard, the memory-mapped parse) is not here: ``bench_device.py`` measures the whole tree.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_load import _rollup, _tree_pids


def child(path: str, parts: int, spill_mb: int, warm: int) -> None:
    """The loader worker's work, as the fork server's preloaded process would do it; reports on stdout. With
    ``spill_mb``, text beyond that many MB is inflated into a scratch file (``read.SPILL_BYTES``, as the worker does
    beyond 3 GB); with ``warm``, the first views are then computed and stored in that many processes (api/warm.py,
    as the plugin's loader does)."""
    import tempfile

    import tb_plugin.jobs.worker  # noqa: F401 - what the fork server preloads
    from tb_plugin.api import warm as warm_views
    from tb_plugin.loader import load_trace, read
    from tb_plugin.loader.limits import Limits
    from tb_plugin.model import heap
    from tb_plugin.model.tables import save

    entry = tempfile.mkdtemp(prefix="pss_load_")
    limits = Limits(scratch_dir=entry if spill_mb else None)
    if spill_mb:
        read.SPILL_BYTES = spill_mb << 20
    print(json.dumps({"imported": True}), flush=True)
    sys.stdin.readline()  # the sampler has its baseline
    t = time.perf_counter()
    model = load_trace(path, parts=parts, limits=limits)
    built = time.perf_counter() - t
    events = model.n_events
    save(model, entry)
    saved = time.perf_counter() - t
    del model
    if warm:
        heap.trim_heap()  # as the loader worker does before the views
        warm_views.WarmViews().save(entry, None, warm)
    print(json.dumps({"built_s": built, "saved_s": saved, "total_s": time.perf_counter() - t, "events": events}),
          flush=True)


def measure(path: str, parts: int, every: float, spill_mb: int = 0, warm: int = 0) -> dict[str, Any]:
    """Run one child and poll its tree; the peak and its make-up."""
    proc = subprocess.Popen([sys.executable, __file__, path, "--child", str(parts), "--spill-mb", str(spill_mb),
                             "--warm", str(warm)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdout.readline()
    base = _rollup(proc.pid)[0]
    proc.stdin.write("go\n")
    proc.stdin.flush()
    samples: list[tuple[float, int, int, int]] = []
    t0 = time.perf_counter()
    while proc.poll() is None:
        pids = _tree_pids(proc.pid)
        own = _rollup(proc.pid)[0]
        rest = sum(_rollup(p)[0] for p in pids[1:])
        samples.append((time.perf_counter() - t0, own, rest, len(pids) - 1))
        time.sleep(every)
    result = json.loads(proc.stdout.read().strip().splitlines()[-1])
    peak = max(samples, key=lambda s: s[1] + s[2])
    return {"parts": parts, "peak_mb": (peak[1] + peak[2]) / 1e6, "at_s": peak[0], "loader_mb": peak[1] / 1e6,
            "parts_mb": peak[2] / 1e6, "live_parts": peak[3], "imported_mb": base / 1e6, **result,
            "samples": samples}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace")
    parser.add_argument("--parts", default="4,8,15")
    parser.add_argument("--every", type=float, default=0.01)
    parser.add_argument("--timeline", action="store_true")
    parser.add_argument("--spill-mb", type=int, default=0, help="inflate text beyond this many MB to a scratch file")
    parser.add_argument("--warm", type=int, default=0, help="then store the first views in this many processes")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.trace, args.child, args.spill_mb, args.warm)
        return 0
    for parts in [int(p) for p in args.parts.split(",")]:
        res = measure(args.trace, parts, args.every, args.spill_mb, args.warm)
        print(f"parts {parts:>2}: peak {res['peak_mb']:7.1f} MB at {res['at_s']:.2f} s (loader {res['loader_mb']:.1f}"
              f" + {res['live_parts']} parts {res['parts_mb']:.1f}); loader after imports {res['imported_mb']:.1f} MB;"
              f" load {res['built_s']:.2f} s, with save {res['saved_s']:.2f} s, with the first views"
              f" {res['total_s']:.2f} s", flush=True)
        if args.timeline:
            last = -1.0
            for t, own, rest, n in res["samples"]:
                if t - last >= 0.1:
                    print(f"   {t:5.2f} s  loader {own / 1e6:7.1f}  parts {rest / 1e6:7.1f}  ({n})")
                    last = t
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
