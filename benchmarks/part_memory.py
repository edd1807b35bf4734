#!/usr/bin/env python3
"""What one stored-views part's process adds to the memory, and how long it takes (issue 29: the 2 GB trace's peak).

    python benchmarks/part_memory.py TRACE [--part overview|tables|gpu|timeline ...] [--no-ahead] [--no-trim]
        [--inline] [--repeat N]

As the loader runs a part after the parse (``api/warm.py``): the trace is parsed, saved as a cache entry's tables and
mapped back (the model's pages are the files', shared), the heap is trimmed (``model.heap.trim_heap``), and the part
is computed in a forked process as ``warm._fork_parts`` runs it: ``warm.compute_part`` inside ``warm._ahead`` (its
threads) and ``model.heap.trimming`` where ``warm.trim_period`` says; ``--no-ahead`` and ``--no-trim`` leave those
out. This process samples the child's anonymous memory (``/proc/PID/smaps_rollup``) every 5 ms: the peak growth over
its size at the fork is what the part adds (``warm.PART_BYTES_PER_EVENT`` is that, per event). Prints one JSON line
per run, with the part's user and system CPU seconds and page faults. Glibc's allocator settings (``MALLOC_ARENA_MAX``
…) apply when set in the environment; ``--huge-pages`` sets numpy's huge pages in the part's process. Each part after
the first is given what the ones before handed off (``warm.HANDOFF``), as the loader gives it to the parts it forks
after one ends (the tables after the Overview read its host tree).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np

from tb_plugin.api import warm
from tb_plugin.loader import load_trace
from tb_plugin.model.heap import trim_heap, trimming
from tb_plugin.model.tables import TraceModel, load, save


def anonymous(pid: int) -> int:
    with open(f"/proc/{pid}/smaps_rollup") as fh:
        for line in fh:
            if line.startswith("Anonymous:"):
                return int(line.split()[1]) * 1024
    return 0


def mapped_model(trace: Path, folder: Path) -> TraceModel:
    parsed = load_trace(str(trace))
    save(parsed, folder)
    del parsed
    model = load(folder)
    trim_heap()
    return model


def measure(model: TraceModel, part: str, ahead: bool, trim: bool, out: Path, inline: bool = False,
            huge_pages: bool = True) -> dict[str, object]:
    ctx = warm.Context(worker="bench", filename="bench", size=1)
    if inline:
        return measure_inline(model, ctx, part, out)
    pid = os.fork()
    if pid == 0:
        np._core.multiarray._set_madvise_hugepage(huge_pages)  # type: ignore[attr-defined]  # NUMPY_MADVISE_HUGEPAGE
        period = warm.trim_period([part], model.n_events) if trim else None
        with trimming(period), warm._ahead(model, [part]) if ahead else contextlib.nullcontext(), \
                warm.handing_off(model, [part], out):
            warm.compute_part(model, ctx, part, out)
        os._exit(0)
    started, base = time.monotonic(), anonymous(pid)
    peak = base
    while not (ended := os.wait4(pid, os.WNOHANG))[0]:
        with contextlib.suppress(OSError):
            peak = max(peak, anonymous(pid))
        time.sleep(0.005)
    grown, usage = peak - base, ended[2]
    return {"part": part, "ahead": ahead, "trim_period_s": warm.trim_period([part], model.n_events) if trim else None,
            "events": model.n_events, "seconds": round(time.monotonic() - started, 2),
            "added_mb": round(grown / 1e6, 1), "bytes_per_event": round(grown / max(1, model.n_events)),
            # the part's CPU: its own and the kernel's for it (page faults: fresh memory zeroed), its page faults
            "user_s": round(usage.ru_utime, 2), "sys_s": round(usage.ru_stime, 2), "minor_faults": usage.ru_minflt,
            "malloc_arena_max": os.environ.get("MALLOC_ARENA_MAX"), "huge_pages": huge_pages}


def measure_inline(model: TraceModel, ctx: warm.Context, part: str, out: Path) -> dict[str, object]:
    """The part computed in this process (no fork, no threads, no trims), its results dropped after: what the
    fork, the threads and the trims cost beside it."""
    stop = threading.Event()
    base = anonymous(os.getpid())
    peak = [base]

    def sample() -> None:
        while not stop.wait(0.005):
            peak[0] = max(peak[0], anonymous(os.getpid()))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    started = time.monotonic()
    warm.compute_part(model, ctx, part, out)
    seconds = time.monotonic() - started
    stop.set()
    sampler.join()
    for key in list(model.memo):
        del model.memo[key]
    trim_heap()
    grown = peak[0] - base
    return {"part": part, "inline": True, "events": model.n_events, "seconds": round(seconds, 2),
            "added_mb": round(grown / 1e6, 1), "bytes_per_event": round(grown / max(1, model.n_events))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace", type=Path)
    parser.add_argument("--part", choices=warm.PARTS, action="append",
                        help="a part to measure (repeat the option for several, on one parse; default: overview)")
    parser.add_argument("--no-ahead", action="store_true", help="compute the part without its AHEAD threads")
    parser.add_argument("--no-trim", action="store_true", help="never trim the part's heap while it computes")
    parser.add_argument("--inline", action="store_true",
                        help="compute in this process (no fork, threads or trims), as a measure of what they cost")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--huge-pages", choices=("on", "off", "alternate"), default="on",
                        help="numpy's madvise(MADV_HUGEPAGE) of large arrays in the part's process (alternate: on, "
                             "off, on, ... run by run)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="part-memory-model-") as folder:
        model = mapped_model(args.trace, Path(folder))
        for part in args.part or ["overview"]:
            for run in range(args.repeat):
                with tempfile.TemporaryDirectory(prefix="part-memory-") as out:
                    huge = args.huge_pages == "on" or (args.huge_pages == "alternate" and run % 2 == 0)
                    print(json.dumps(measure(model, part, not args.no_ahead, not args.no_trim, Path(out),
                                             args.inline, huge)), flush=True)
                    # as the loader: the parts after this one read what it handed off (mapped: the files may go)
                    warm._take_handoff(model, Path(out), part, run == args.repeat - 1 and not args.inline)


if __name__ == "__main__":
    main()
