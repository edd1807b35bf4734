#!/usr/bin/env python3
"""Inflating one big gzip member: ISA-L on one core (what the loader does) against rapidgzip's parallel inflate.

    python benchmarks/bench_gunzip.py TRACE.json.gz [--threads 1,2,4,8,16] [--repeat 3] [--json OUT]

Every measurement runs in a fresh child process (so page faults of a fresh buffer count, as in a loader process)
on the file as read into memory (the loader reads the whole file first):

- ``isal``: ``isal_zlib.decompressobj(wbits=31).decompress`` of the whole member, as ``loader/read._gunzip``.
- ``isal stream``: the same in 64 MB pieces of output (what a loader that overlaps inflation with parsing reads).
- ``rapidgzip N``: ``rapidgzip.RapidgzipFile(BytesIO(raw), parallelization=N).read()`` for each N of ``--threads``
  (the first pass builds the seek points: a single-member file is split by guessing block boundaries).
- ``rapidgzip N stream``: its ``read(64 MB)`` in a loop (what an overlapped loader would read).

Prints seconds (best of ``--repeat``) and GB/s of output per measurement, and the machine's cores. rapidgzip is not
a dependency: missing, its lines say so.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

STREAM = 64 << 20


def _isal(raw: bytes, stream: bool) -> int:
    from isal import isal_zlib

    d = isal_zlib.decompressobj(wbits=31)
    if not stream:
        return len(d.decompress(raw))
    total, data = 0, raw
    while True:
        piece = d.decompress(data, STREAM)
        total += len(piece)
        data = d.unconsumed_tail
        if d.eof or (not piece and not data):
            return total


def _rapidgzip(raw: bytes, threads: int, stream: bool) -> int:
    import rapidgzip

    with rapidgzip.RapidgzipFile(io.BytesIO(raw), parallelization=threads) as f:
        if not stream:
            return len(f.read())
        total = 0
        while piece := f.read(STREAM):
            total += len(piece)
        return total


def child(path: str, what: str, threads: int) -> dict[str, Any]:
    raw = Path(path).read_bytes()
    t = time.perf_counter()
    if what.startswith("isal"):
        n = _isal(raw, what.endswith("stream"))
    else:
        n = _rapidgzip(raw, threads, what.endswith("stream"))
    return {"s": time.perf_counter() - t, "bytes": n}


def run(path: str, what: str, threads: int, repeat: int) -> dict[str, Any]:
    times, size = [], 0
    for _ in range(repeat):
        proc = subprocess.run([sys.executable, __file__, "--child", what, str(threads), path], capture_output=True,
                              text=True, timeout=600)
        if proc.returncode != 0:
            return {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"}
        out = json.loads(proc.stdout)
        times.append(out["s"])
        size = out["bytes"]
    best = min(times)
    return {"best_s": round(best, 3), "runs_s": [round(t, 3) for t in times], "gb_per_s": round(size / best / 1e9, 2),
            "output_mb": round(size / 1e6, 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", nargs="?")
    parser.add_argument("--threads", default=",".join(str(n) for n in (1, 2, 4, 8, 16) if n <= (os.cpu_count() or 1)))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--child", nargs=3, metavar=("WHAT", "THREADS", "PATH"))
    args = parser.parse_args(argv)
    if args.child:
        what, threads, path = args.child
        print(json.dumps(child(path, what, int(threads))))
        return 0
    results: dict[str, Any] = {"cores": len(os.sched_getaffinity(0)), "file_mb": os.path.getsize(args.trace) / 1e6}
    for what in ("isal", "isal stream"):
        results[what] = run(args.trace, what, 1, args.repeat)
        print(what, results[what], flush=True)
    for n in (int(x) for x in args.threads.split(",")):
        for what in ("rapidgzip", "rapidgzip stream"):
            results[f"{what} {n}"] = run(args.trace, what, n, args.repeat)
            print(f"{what} {n}", results[f"{what} {n}"], flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
