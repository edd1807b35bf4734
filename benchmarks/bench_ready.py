#!/usr/bin/env python3
"""When a cold load turns "ready", and when its stored first views land (api/warm.py ``ReadyRule``).

    python benchmarks/bench_ready.py TRACE [--mode main|h29|h29b|deferred ...] [--workers 1]

For each mode a fresh parse cache and a real ``LoadScheduler`` (loader processes from its fork server, as the
plugin runs them) load TRACE: ``main`` stores the Trace view's index only (as before issue 29), ``h29`` stores every
first view before "ready" (the rule that never defers), ``h29b`` follows ``warm.READY_RULE`` (views after ready when
they would delay it much), ``deferred`` only the index before ready, every other part after it (what the rule gives
a 2 GB trace on the 16-core host, whatever this machine's parse time). Prints, in seconds from the request: ready,
and each part's landing (for ``h29b`` and ``deferred`` after ready; for ``h29`` every part is there at ready), and
the peak memory of this process and its descendants (the fork server, the loader process, its parts' processes;
PSS, pages shared by forked processes counted once) up to ready and in all, with each process's share at the peak.
This process maps the model as the server would. The server's own work after ready (``warm.precompute``) is not
run: what a page gets then is what ``bench_device.py`` measures through TensorBoard.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_load import TreeSampler, _rollup, _tree_pids
from tb_plugin.api import warm
from tb_plugin.catalog.catalog import TraceFile
from tb_plugin.jobs.cache import ParseCache
from tb_plugin.jobs.scheduler import READY, LoadScheduler
from tb_plugin.timeline.stored import StoredIndex


class PeakSampler(TreeSampler):
    """:class:`TreeSampler` that also keeps each process's PSS at the peak (which process holds what then), and the
    seconds (from ``started``) the peak came at."""

    def __init__(self, pid: int) -> None:
        super().__init__(pid, interval=0.02, pss=True)
        self.at_peak: dict[int, int] = {}
        self.peak_at = 0.0
        self.started = time.monotonic()

    def run(self) -> None:
        while not self.stop_ev.is_set():
            each = {pid: _rollup(pid)[0] for pid in _tree_pids(self.pid)}
            if sum(each.values()) > self.peak_pss:
                self.peak_pss, self.at_peak = sum(each.values()), each
                self.peak_at = time.monotonic() - self.started
            self.stop_ev.wait(self.interval)

    def roles(self) -> dict[str, int]:
        """MB per process at the peak: this process (the server's share), the fork server, loader and parts."""
        out: dict[str, int] = {}
        for pid, pss in sorted(self.at_peak.items(), key=lambda kv: -kv[1]):
            role = "this process" if pid == self.pid else f"pid {pid}"
            out[role] = round(pss / 1e6)
        return out


def stored_for(mode: str) -> Any:
    if mode == "main":
        return StoredIndex()
    if mode == "h29":
        return warm.WarmViews(rule=warm.ReadyRule(seconds=float("inf")))
    if mode == "deferred":
        return warm.WarmViews(rule=warm.ReadyRule(seconds=0.0, share=0.0))
    return warm.WarmViews()


def run(trace: Path, mode: str, workers: int | None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-ready-") as cache:
        scheduler = LoadScheduler(ParseCache(cache), max_workers=workers, stored=stored_for(mode))
        info = trace.stat()
        file = TraceFile(run="bench", worker=trace.name.split(".")[0], span="1", url=str(trace), size=info.st_size,
                         mtime=info.st_mtime)
        sampler = PeakSampler(os.getpid())
        sampler.start()
        started = sampler.started = time.monotonic()
        scheduler.request(file)
        while (status := scheduler.status(file.key)) is None or status.state not in (READY, "failed"):
            time.sleep(0.005)
        ready = time.monotonic() - started
        to_ready = sampler.peak_pss
        model = scheduler.model(file.key)
        out: dict[str, Any] = {"mode": mode, "state": status.state, "ready_s": round(ready, 2),
                               "events": model.n_events if model is not None else None}
        if model is not None and mode in ("h29b", "deferred"):
            expected = dict(warm._awaiting(model).parts)
            out["after_ready"] = sorted(expected)
            out["expected_s"] = {p: round(s, 2) for p, (_, s) in expected.items()}
            landed: dict[str, float] = {}
            while warm.awaiting_any(model) and time.monotonic() - started < 600:
                for part in expected:
                    if part not in landed and part not in warm._awaiting(model).parts:
                        landed[part] = round(time.monotonic() - started, 2)
                time.sleep(0.01)
            landed.update({p: round(time.monotonic() - started, 2) for p in expected if p not in landed})
            out["landed_s"] = landed
        sampler.stop()
        out["peak_pss_to_ready_mb"] = round(to_ready / 1e6)
        out["peak_pss_mb"] = round(sampler.peak_pss / 1e6)
        out["peak_at_s"] = round(sampler.peak_at, 2)
        out["at_peak_mb"] = sampler.roles()
        scheduler.close()
        return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace", type=Path)
    parser.add_argument("--mode", action="append", choices=("main", "h29", "h29b", "deferred"))
    parser.add_argument("--workers", type=int, default=None)
    args = parser.parse_args()
    for mode in args.mode or ["main", "h29", "h29b"]:
        print(json.dumps(run(args.trace.resolve(), mode, args.workers)), flush=True)


if __name__ == "__main__":
    main()
