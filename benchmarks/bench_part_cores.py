"""How fast one core builds a part, alone and beside others (issue 29: on the lent 16-core host the 2 GB trace's
parts built at about 3 s / 100 MB a core, three times the 2-core development machine's 1.05).

The trace's text is inflated once; then ``columns._build_text`` (the loader's part parser) builds the whole event
array, timed by ``time.process_time`` (CPU) and the wall clock:

- ``alone``: in this process;
- ``forked N``: N forked processes at once, each building the whole text from the parent's pages (copy-on-write,
  as the loader's parts read the text), each pinned to its own core where the host allows;
- ``private N``: the same, each child first copying the text into its own memory (no shared pages).

If ``alone`` is already slow the cores are; if only the N-process rows are, what they share is (memory bandwidth,
page faults on shared pages). Prints one ``PART_CORES {json}`` line.

    python benchmarks/bench_part_cores.py TRACE.pt.trace.json.gz [--procs 15]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tb_plugin.loader import columns
from tb_plugin.loader.read import decompress, outline_by_text


def build(data: bytes, lo: int, hi: int) -> tuple[float, float]:
    """(CPU s, wall s) of one build of ``data[lo:hi]``."""
    c0, w0 = time.process_time(), time.perf_counter()
    columns._build_text(data, lo, hi, None)
    return time.process_time() - c0, time.perf_counter() - w0


def in_children(data: bytes, lo: int, hi: int, procs: int, private: bool) -> list[tuple[float, float]]:
    """Each of ``procs`` forked children builds the whole text at once; their (CPU s, wall s)."""
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    pipes = []
    for i in range(procs):
        r, w = os.pipe()
        if os.fork() == 0:
            os.close(r)
            if len(cores) > procs:
                os.sched_setaffinity(0, {cores[(i + 1) % len(cores)]})
            text = bytes(bytearray(data)) if private else data
            os.write(w, json.dumps(build(text, lo, hi)).encode())
            os._exit(0)
        os.close(w)
        pipes.append(r)
    out = []
    for r in pipes:
        with os.fdopen(r, "rb") as fh:
            out.append(tuple(json.loads(fh.read())))
        os.wait()
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("trace")
    p.add_argument("--procs", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    a = p.parse_args()
    data = decompress(Path(a.trace).read_bytes(), a.trace)
    found = outline_by_text(data)
    assert found is not None, "no traceEvents array in the text"
    _, lo, hi = found
    mb = (hi - lo) / 1e8
    alone = min((build(data, lo, hi) for _ in range(2)), key=lambda t: t[0])
    out: dict[str, object] = {"cpu": os.cpu_count(), "text_mb": round((hi - lo) / 1e6, 1),
                              "alone_cpu_s_per_100mb": round(alone[0] / mb, 3),
                              "alone_wall_s_per_100mb": round(alone[1] / mb, 3)}
    for private in (False, True):
        runs = in_children(data, lo, hi, a.procs, private)
        key = f"{'private' if private else 'forked'}_{a.procs}"
        out[key + "_cpu_s_per_100mb"] = sorted(round(c / mb, 3) for c, _ in runs)
        out[key + "_wall_s_per_100mb"] = sorted(round(w / mb, 3) for _, w in runs)
    print("PART_CORES " + json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
