#!/usr/bin/env python3
"""Where a cold load's seconds go: every phase of one load, per process, in seconds from the request.

    PYTHONPATH=$PWD python benchmarks/load_phases.py TRACE [--parts N] [--mode h29b] [--json OUT.json]

One cold load of TRACE through the path the plugin runs (``bench_ready.py``'s: a real ``LoadScheduler`` with a
fresh parse cache, its fork server, the loader process, the loader's parts and the stored views' processes), with
every phase timed *in the process that runs it*: the functions are wrapped from outside, no timing code is in the
product. This script passes itself to the fork server as one more module to preload
(``multiprocessing.forkserver.set_forkserver_preload``); imported there with ``LOAD_PHASES_DIR`` set, it wraps the
loader's functions (``install``), so the loader process forked from the fork server, and the processes it forks in
turn, write one JSON line per phase (``time.time()`` at its start and end, the process's CPU seconds in it) into
``LOAD_PHASES_DIR/<pid>.jsonl``. This process wraps the server's side (starting the loader, opening its entry,
"ready", the parts landing after ready) the same way. A sampler thread reads every process of the tree
(``/proc/PID/stat`` and ``smaps_rollup``) every ``--interval`` seconds: the cores busy in each phase and the peak PSS.

Prints the timeline (every phase, which process), the parts' table (each part's fork, parse, pickling, the parent's
read and merge of it) and the summary: the phases on the way to "ready" in order, with the seconds each adds to that
way (phases that overlap are counted once) and the time between them ("unaccounted": what no wrapped function
covers), so that they add up to "ready" exactly; then the phases after ready (the stored views left for after it).

``--parts N`` replaces ``jobs.budget.parts_for`` (the processes the scheduler gives the file; the loader still takes
at most its cores). ``--spill-mb N`` inflates text beyond N MB into the scratch file (``read.SPILL_BYTES``), as a
> 3 GB text would. ``--mode`` is ``bench_ready.py``'s (``h29b``: the plugin's own ready rule). ``--cores N`` lets
the loader take N processes whatever its cores (a rehearsal of a many-core layout; its times then mean nothing).
``--views-bytes-per-event N`` sets the stored views' memory bound (``jobs.budget.VIEWS_BYTES_PER_EVENT``): what
runs side by side (at 2 GB, 400 lets the Overview start beside the Trace view's index).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import pickle
import platform
import sys
import tempfile
import threading
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

ENV_DIR = "LOAD_PHASES_DIR"
ENV_SPILL = "LOAD_PHASES_SPILL_MB"
ENV_CORES = "LOAD_PHASES_CORES"
ENV_VIEWS = "LOAD_PHASES_VIEWS_BYTES"
MODULE = "benchmarks.load_phases"

# ---- recording: in every process of the load ------------------------------------------------------------------

_OUT: list[int] = []  # [pid, fd] of this process's record file (a forked child opens its own)


def emit(phase: str, t0: float, t1: float | None = None, **extra: Any) -> None:
    """One record of ``phase`` in this process (one ``os.write``: a child that ends by ``os._exit`` loses none)."""
    directory = os.environ.get(ENV_DIR)
    if not directory:
        return
    pid = os.getpid()
    if not _OUT or _OUT[0] != pid:
        _OUT[:] = [pid, os.open(os.path.join(directory, f"{pid}.jsonl"), os.O_WRONLY | os.O_CREAT | os.O_APPEND,
                                0o600)]
    record = {"pid": pid, "ppid": os.getppid(), "phase": phase, "t0": t0, "t1": t0 if t1 is None else t1, **extra}
    os.write(_OUT[1], (json.dumps(record) + "\n").encode())


Detail = Callable[..., dict[str, Any]]


def wrap(owner: Any, attr: str, phase: str, detail: Detail | None = None, start: bool = False) -> None:
    """Replace ``owner.attr`` by a wrapper recording ``phase`` (wall and CPU seconds; ``detail(result, *args)``
    adds fields; ``start``: also a record as it starts, for a function whose process may be killed before it
    returns). Idempotent."""
    fn = getattr(owner, attr)
    if getattr(fn, "_load_phase", None) is not None:
        return

    @functools.wraps(fn)
    def timed(*args: Any, **kwargs: Any) -> Any:
        t0, c0 = time.time(), time.process_time()
        if start:
            emit(f"{phase} (start)", t0)
        result = None
        try:
            result = fn(*args, **kwargs)
            return result
        finally:
            extra = {}
            if detail is not None:
                try:
                    extra = detail(result, *args, **kwargs)
                except Exception:  # noqa: BLE001 - a detail never breaks the load it describes
                    extra = {}
            emit(phase, t0, time.time(), cpu=round(time.process_time() - c0, 4), **extra)

    timed._load_phase = phase  # type: ignore[attr-defined]
    setattr(owner, attr, timed)


def _mb(result: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
    return {"mb": round(len(result) / 1e6, 1)} if result is not None else {}


def _range_mb(result: Any, data: Any, lo: int, hi: int, *args: Any, **kwargs: Any) -> dict[str, Any]:
    return {"mb": round((hi - lo) / 1e6, 1), "at_mb": round(lo / 1e6, 1)}


def _range_events(result: Any, doc: Any, lo: int, hi: int, *args: Any, **kwargs: Any) -> dict[str, Any]:
    return {"events": hi - lo}


def _child(result: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
    return {"child": int(result[0])}


def _collected(result: Any, drain: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
    return {"child": drain.pid}


def _absorbed(result: Any, builder: Any, strings: Any, parts: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
    return {"events": int(sum(len(p["ts"]) for p in parts["events"]))}


def _view(result: Any, model: Any, ctx: Any, part: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
    return {"part": part}


def _landed(result: Any, opener: Any, model: Any, entry: Any, name: str, *args: Any) -> dict[str, Any]:
    return {"part": name, "ok": bool(result)}


def _events(result: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
    return {"events": int(result.n_events)} if result is not None else {}


def _pickle_shim(columns: Any) -> None:
    """The parts' ``pickle`` (``loader.columns``): its ``dump`` timed in each part, its ``load`` in the parent."""
    if isinstance(columns.pickle, types.ModuleType) and columns.pickle.__name__ == "load_phases.pickle":
        return
    shim = types.ModuleType("load_phases.pickle")
    shim.__dict__.update({k: v for k, v in pickle.__dict__.items() if not k.startswith("__")})
    wrap(shim, "dump", "part: pickle to the parent")
    wrap(shim, "load", "loader: read a part from its pipe")
    columns.pickle = shim


def install() -> None:
    """Wrap the functions of every phase, here and (imported by the fork server) in every loader process."""
    from multiprocessing import forkserver

    from tb_plugin import loader
    from tb_plugin.api import warm
    from tb_plugin.jobs import budget, entries, handover, local, opening, scheduler, worker
    from tb_plugin.loader import columns, read, stream
    from tb_plugin.model import heap

    spill, cores = os.environ.get(ENV_SPILL), os.environ.get(ENV_CORES)
    if spill:
        read.SPILL_BYTES = int(spill) << 20
    if cores:  # a rehearsal of a many-core layout (see --cores)
        worker.default_parts = lambda: int(cores)  # type: ignore[attr-defined]
    views = os.environ.get(ENV_VIEWS)
    if views:  # the stored views' memory bound (see --views-bytes-per-event)
        budget.VIEWS_BYTES_PER_EVENT = int(views)
    wrap(worker, "run_job", "loader: run_job", start=True)  # the server kills it once answered (nothing left to do)
    hooks: list[tuple[Any, str, str, Detail | None]] = [
        (loader, "read_source", "loader: read the file", _mb),
        (loader, "decompress", "loader: inflate", _mb),
        (read, "projected_size", "loader: inflate: projected size", None),
        (read, "_gunzip", "loader: inflate: gunzip (ISA-L, or the spill)", None),
        (read, "_spill", "loader: inflate: spill to the scratch file", None),
        (read, "_parallel_gunzip", "loader: inflate: rapidgzip", None),
        (loader, "outline_by_text", "loader: outline", None),
        (loader, "decode_outline", "loader: outline (one decode of the whole text)", None),
        (loader, "build_text_parts", "loader: parse in parts", None),
        (stream, "stream_parts", "loader: inflate and parse in parts at once", None),
        (stream._Loader, "inflate", "loader: inflate into the shared map, post jobs, merge the answers come", None),
        (stream, "fork_worker", "loader: fork a part", _child),
        (stream, "_build_text", "part: parse", _range_mb),
        (loader, "build_model", "loader: parse (from the outline)", None),
        (read, "split_text", "loader: split the text into ranges", None),
        (columns, "_fork_part", "loader: fork a part", _child),
        (columns, "_build_text", "part: parse", _range_mb),
        (columns, "_build_range", "part: parse", _range_events),
        (columns._Drain, "part", "loader: collect a part (pipe drained, waitpid, unpickle)", _collected),
        (columns.ModelBuilder, "absorb", "loader: merge a part", _absorbed),
        (columns.ModelBuilder, "finish", "loader: finish", _events),
        (columns.ModelBuilder, "tables", "loader: finish: concatenate the tables", None),
        (columns, "correlation_from_flows", "loader: finish: correlation from flows", None),
        (worker, "_write_entry", "loader: write the entry", None),
        (worker, "save", "loader: save the parse to the cache", None),
        (heap, "trim_heap", "loader: trim the heap", None),
        (worker, "_save_derived", "loader: stored views before ready", None),
        (warm, "load", "views: map the parse back", None),
        (warm, "compute_part", "view: compute", _view),
        (warm, "timeline_index", "view: trace index", None),
        (warm, "write_index", "view: write the index", None),
        (handover.Filler, "start", "loader: hand over the model (a forked copy)", None),
        (handover.Filler, "finish", "loader: hand over the rest", None),
        (entries, "seal", "loader: seal the entry", None),
        (entries, "publish", "loader: publish the entry", None),
        (worker, "_run_later", "loader: views after ready", None),
        (local.LocalLoaders, "spawn", "server: start the loader process", None),
        (forkserver.ForkServer, "ensure_running", "server: start the fork server (if not running)", None),
        (local.LocalLoaders, "answer", "server: take the answer", None),
        (opening.EntryOpener, "open", "server: open the entry", None),
        (entries, "open_entry", "server: open: copy and verify the files", None),
        (handover, "adopt", "server: open: map the parse handed over", None),
        (opening, "model_of", "server: open: the model from its files", None),
        (warm.WarmViews, "attach", "server: open: attach the stored views", None),
        (scheduler.LoadScheduler, "_trim", "server: trim the parse cache", None),
        (opening.EntryOpener, "loaded", "server: ready", None),
        (opening.EntryOpener, "attach_part", "server: a part after ready lands", _landed),
    ]
    for owner, attr, phase, detail in hooks:
        wrap(owner, attr, phase, detail)
    _pickle_shim(columns)


def _process_started() -> float:
    """When this process started (epoch s, to ~10 ms: ``/proc/self/stat``'s start in clock ticks after boot, boot
    from ``/proc/uptime``; psutil's boot time is whole seconds)."""
    try:
        with open("/proc/self/stat", "rb") as fh:
            ticks = int(fh.read().rsplit(b")", 1)[1].split()[19])
        with open("/proc/uptime", "rb") as fh:
            uptime = float(fh.read().split()[0])
        return time.time() - uptime + ticks / _TICK
    except (OSError, IndexError, ValueError):
        return time.time()


_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

if __name__ != "__main__" and os.environ.get(ENV_DIR):  # preloaded by the fork server
    _t_import = time.time()
    install()
    emit("fork server: interpreter start, preload", _process_started(), time.time(),
         hooks_s=round(time.time() - _t_import, 3))


# ---- sampling: cores and memory of the tree -------------------------------------------------------------------


def _cpu_s(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _TICK
    except (OSError, IndexError, ValueError):
        return None


class Sampler(threading.Thread):
    """Every ``interval`` s: each process of the tree's CPU seconds so far and PSS (``samples``: (time, {pid:
    (cpu_s, pss)})). A process's CPU after its last sample is not seen (at most ``interval`` a process)."""

    def __init__(self, pid: int, interval: float, pss: bool = True) -> None:
        super().__init__(daemon=True, name="load-phases-sampler")
        self.pid, self.interval, self.pss = pid, interval, pss
        self.samples: list[tuple[float, dict[int, tuple[float, int]]]] = []
        self.stop_ev = threading.Event()

    def run(self) -> None:
        from benchmarks.bench_load import _rollup, _tree_pids

        while not self.stop_ev.is_set():
            now = time.time()
            each: dict[int, tuple[float, int]] = {}
            for pid in _tree_pids(self.pid):
                cpu = _cpu_s(pid)
                if cpu is not None:
                    each[pid] = (cpu, _rollup(pid)[0] if self.pss else 0)
            self.samples.append((now, each))
            self.stop_ev.wait(self.interval)

    def stop(self) -> None:
        self.stop_ev.set()
        self.join()

    def cpu_curve(self) -> tuple[list[float], dict[int, list[float]]]:
        """Sample times, and each process's cumulative CPU at each (its last value once it is gone)."""
        times = [t for t, _ in self.samples]
        pids = sorted({pid for _, each in self.samples for pid in each})
        curves: dict[int, list[float]] = {pid: [] for pid in pids}
        last = dict.fromkeys(pids, 0.0)
        for _, each in self.samples:
            for pid in pids:
                if pid in each:
                    last[pid] = each[pid][0]
                curves[pid].append(last[pid])
        return times, curves


def _at(times: list[float], values: list[float], t: float) -> float:
    """``values`` interpolated at ``t`` (held at the ends)."""
    import bisect

    i = bisect.bisect_left(times, t)
    if i <= 0:
        return values[0] if values else 0.0
    if i >= len(times):
        return values[-1]
    t0, t1 = times[i - 1], times[i]
    return values[i - 1] + (values[i] - values[i - 1]) * (t - t0) / max(t1 - t0, 1e-9)


# ---- one load ---------------------------------------------------------------------------------------------------


def _preload_hooks() -> None:
    """Add this module to whatever the fork server is told to preload (``jobs.forkserver.process_context``)."""
    from multiprocessing import forkserver

    real = forkserver.set_forkserver_preload
    if getattr(real, "_load_phases", False):
        return

    def preload(names: list[str]) -> None:
        real([*names, MODULE])

    preload._load_phases = True  # type: ignore[attr-defined]
    forkserver.set_forkserver_preload = preload  # type: ignore[assignment]


def load(trace: Path, parts: int | None, mode: str, after: bool, interval: float, pss: bool,
         startup: float = 0.0) -> dict[str, Any]:
    """One cold load of ``trace`` (every process records into ``LOAD_PHASES_DIR``), requested ``startup`` seconds
    after the scheduler was made (the plugin makes it as TensorBoard starts, before TensorBoard answers). Returns
    the request and ready times (epoch seconds), the sampler, and what the load says of itself."""
    from benchmarks.bench_ready import stored_for
    from tb_plugin.api import warm
    from tb_plugin.catalog.catalog import TraceFile
    from tb_plugin.jobs import budget
    from tb_plugin.jobs.cache import ParseCache
    from tb_plugin.jobs.scheduler import READY, LoadScheduler

    if parts is not None:
        budget.parts_for = lambda size, gzip, loading: parts  # type: ignore[assignment]
    with tempfile.TemporaryDirectory(prefix="load-phases-cache-") as cache:
        scheduler = LoadScheduler(ParseCache(cache), stored=stored_for(mode))  # the plugin's loader slots
        info = trace.stat()
        file = TraceFile(run="phases", worker=trace.name.split(".")[0], span="1", url=str(trace), size=info.st_size,
                         mtime=info.st_mtime)
        time.sleep(startup)
        sampler = Sampler(os.getpid(), interval, pss)
        sampler.start()
        requested = time.time()
        emit("server: request", requested)
        scheduler.request(file)
        while (status := scheduler.status(file.key)) is None or status.state not in (READY, "failed"):
            time.sleep(0.002)
        ready = time.time()
        model = scheduler.model(file.key)
        out: dict[str, Any] = {"state": status.state, "error": status.error,
                               "events": model.n_events if model is not None else None}
        while after and model is not None and warm.awaiting_any(model) and time.time() - ready < 600:
            time.sleep(0.01)
        time.sleep(max(0.1, 2 * interval))  # the loader's last records, and a sample after them
        sampler.stop()
        scheduler.close()
    return {**out, "requested": requested, "ready": ready, "sampler": sampler}


def read_records(record: str) -> list[dict[str, Any]]:
    out = []
    for path in Path(record).glob("*.jsonl"):
        for line in path.read_text().splitlines():
            if line.strip():
                out.append(json.loads(line))
    return sorted(out, key=lambda r: (r["t0"], r["t1"]))


# ---- reading the records ----------------------------------------------------------------------------------------

# The phases on the way to "ready", as they follow each other (a phase nested in another counts once: the way's
# clock only moves forward).
PATH = ("server: start the loader process", "loader: run_job (start)", "loader: read the file", "loader: inflate",
        "loader: outline",
        "loader: outline (one decode of the whole text)", "loader: parse in parts",
        "loader: inflate and parse in parts at once", "loader: parse (from the outline)",
        "loader: finish", "loader: save the parse to the cache", "loader: trim the heap",
        "loader: stored views before ready", "loader: hand over the rest", "loader: seal the entry",
        "loader: publish the entry",
        "server: take the answer", "server: open the entry", "server: trim the parse cache", "server: ready")


def roles(records: list[dict[str, Any]], server: int) -> dict[int, str]:
    """Each process's role: server, fork server, loader, part k (k-th forked, the loader's own range is part 0),
    view <part>."""
    role = {server: "server"}
    for r in records:
        if r["phase"].startswith("fork server"):
            role[r["pid"]] = "fork server"
        elif r["phase"] == "loader: run_job (start)":
            role[r["pid"]] = "loader"
    forks = [r for r in records if r["phase"] == "loader: fork a part" and "child" in r]
    for k, r in enumerate(forks, 1):
        role[r["child"]] = f"part {k}"
    for r in records:
        if r["phase"] == "view: compute" and r["pid"] not in role:
            role[r["pid"]] = f"view {r.get('part')}"
    return role


class Cores:
    """The cores the tree's processes used over a span of time, from the sampler."""

    def __init__(self, sampler: Sampler, role: dict[int, str]) -> None:
        self.times, self.curves = sampler.cpu_curve()
        self.role, self.interval = role, sampler.interval

    def total(self, t0: float, t1: float) -> float | None:
        if t1 - t0 < 2 * self.interval or not self.times:
            return None
        return sum(_at(self.times, c, t1) - _at(self.times, c, t0) for c in self.curves.values()) / (t1 - t0)

    def busy(self, t0: float, t1: float) -> str:
        """E.g. ``loader 0.98, parts 14×0.91`` (processes using at least a tenth of a core on average)."""
        if t1 - t0 < 2 * self.interval or not self.times:
            return "–"
        groups: dict[str, list[float]] = {}
        for pid, curve in self.curves.items():
            used = (_at(self.times, curve, t1) - _at(self.times, curve, t0)) / (t1 - t0)
            if used >= 0.1:
                name = self.role.get(pid, "other")
                groups.setdefault("parts" if name.startswith("part ") else name, []).append(used)
        return ", ".join(f"{name} {len(v)}×{sum(v) / len(v):.2f}" if len(v) > 1 else f"{name} {v[0]:.2f}"
                         for name, v in sorted(groups.items(), key=lambda kv: -sum(kv[1])))


SMALL_GAP = 0.005  # s: gaps between phases on the way to ready below this are summed into one row


def path_rows(records: list[dict[str, Any]], requested: float, ready: float, cores: Cores) -> list[dict[str, Any]]:
    """The phases on the way to ready in order, each with the seconds it adds to the way, and the gaps between
    them (what no wrapped function covers); the ``adds`` sum to ready - request."""
    def row(phase: str, t0: float, t1: float, adds: float, cpu: float | None = None) -> dict[str, Any]:
        return {"phase": phase, "start": t0 - requested, "seconds": t1 - t0, "adds": adds, "cpu": cpu,
                "busy": cores.busy(t0, t1), "cores": cores.total(t0, t1)}

    loader = next((r["pid"] for r in records if r["phase"] == "loader: run_job (start)"), None)
    # the heap trims of the views' processes (``heap.trimming``, every 50 ms) are not on the way: only the loader's
    steps = [r for r in records if r["phase"] in PATH and r["t0"] < ready
             and (r["phase"] != "loader: trim the heap" or r["pid"] == loader)]
    seen: set[str] = set()
    rows: list[dict[str, Any]] = []
    small, small_s = 0, 0.0  # gaps under SMALL_GAP: how many, seconds
    cursor, before = requested, "the request"
    for r in [*steps, {"phase": "(ready seen)", "t0": ready, "t1": ready}]:
        if r["phase"] == "server: trim the parse cache" and r["phase"] in seen:
            continue
        seen.add(r["phase"])
        gap = r["t0"] - cursor
        if gap >= SMALL_GAP:
            rows.append(row(f"(unaccounted: after {before})", cursor, r["t0"], gap))
        elif gap > 0:
            small, small_s = small + 1, small_s + gap
        if r["phase"] != "(ready seen)":
            rows.append(row(r["phase"], r["t0"], r["t1"], max(0.0, r["t1"] - max(r["t0"], cursor)), r.get("cpu")))
        cursor, before = max(cursor, r["t1"]), r["phase"]
    if small:
        rows.append({"phase": f"(unaccounted: {small} gaps under {SMALL_GAP * 1e3:.0f} ms each)", "start": None,
                     "seconds": small_s, "adds": small_s, "cpu": None, "busy": "–", "cores": None})
    return rows


def _one(records: list[dict[str, Any]], phase: str, pid: int | None = None, **match: Any) -> dict[str, Any] | None:
    for r in records:
        if r["phase"] == phase and (pid is None or r["pid"] == pid) and all(r.get(k) == v for k, v in match.items()):
            return r
    return None


def part_rows(records: list[dict[str, Any]], role: dict[int, str], requested: float) -> list[dict[str, Any]]:
    """Per part of the parse: its process, MB, fork, parse, pickling, the loader's read and merge of it (seconds
    from the request; CPU seconds per 100 MB of its text)."""
    loader = next((pid for pid, name in role.items() if name == "loader"), None)
    if loader is None:
        return []
    in_loader = [r for r in records if r["pid"] == loader]
    reads = [r for r in in_loader if r["phase"] == "loader: read a part from its pipe"]
    merges = [r for r in in_loader if r["phase"] == "loader: merge a part"]
    forks = [r for r in in_loader if r["phase"] == "loader: fork a part"]
    pids = [loader, *(r.get("child") for r in forks)]
    rows = []
    for k, pid in enumerate(pids):
        parse = _one(records, "part: parse", pid)
        if parse is None:
            continue
        rel = {name: (round(r[edge] - requested, 3) if r is not None else None) for name, r, edge in (
            ("forked", forks[k - 1] if k else None, "t1"), ("parse_start", parse, "t0"), ("parse_end", parse, "t1"),
            ("pickled", _one(records, "part: pickle to the parent", pid), "t1"),
            ("read_start", reads[k - 1] if 0 < k <= len(reads) else None, "t0"),
            ("read_end", reads[k - 1] if 0 < k <= len(reads) else None, "t1"),
            ("merge_start", merges[k - 1] if 0 < k <= len(merges) else None, "t0"),
            ("merge_end", merges[k - 1] if 0 < k <= len(merges) else None, "t1"))}
        mb = parse.get("mb")
        rows.append({"part": k, "pid": pid, "mb": mb, "events": parse.get("events"), **rel,
                     "parse_s": round(parse["t1"] - parse["t0"], 3), "cpu_s": parse.get("cpu"),
                     "cpu_s_per_100mb": round(100 * parse["cpu"] / mb, 2) if mb else None})
    return rows


def memory(sampler: Sampler, role: dict[int, str], ready: float) -> dict[str, Any]:
    """Peak PSS of the tree up to ready and in all, when, and each role's share at the peak (MB)."""
    sums = [(t, sum(p for _, p in each.values()), each) for t, each in sampler.samples]
    if not sums:
        return {}
    peak = max(sums, key=lambda s: s[1])
    to_ready = max((s[1] for s in sums if s[0] <= ready), default=0)
    shares: dict[str, int] = {}
    for pid, (_, pss) in peak[2].items():
        name = role.get(pid, "other")
        name = "parts" if name.startswith("part ") else name
        shares[name] = shares.get(name, 0) + pss
    return {"peak_pss_mb": round(peak[1] / 1e6), "peak_at": peak[0], "peak_pss_to_ready_mb": round(to_ready / 1e6),
            "at_peak_mb": {k: round(v / 1e6) for k, v in sorted(shares.items(), key=lambda kv: -kv[1])}}


def phase_rows(records: list[dict[str, Any]], role: dict[int, str], requested: float, cores: Cores
               ) -> list[dict[str, Any]]:
    """Every phase by name (and kind of process): how many times, first start, last end, the seconds of all
    together, and the cores busy from the first start to the last end."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in records:
        name = role.get(r["pid"], "other")
        name = "parts" if name.startswith("part ") else name
        phase = f"{r['phase']} ({r['part']})" if r["phase"] == "view: compute" else r["phase"]
        groups.setdefault((phase, name), []).append(r)
    rows = []
    for (phase, name), rs in sorted(groups.items(), key=lambda kv: min(r["t0"] for r in kv[1])):
        first, last = min(r["t0"] for r in rs), max(r["t1"] for r in rs)
        rows.append({"phase": phase, "process": name, "n": len(rs), "first": first - requested,
                     "last": last - requested, "seconds": sum(r["t1"] - r["t0"] for r in rs),
                     "longest": max(r["t1"] - r["t0"] for r in rs), "cpu": sum(r.get("cpu", 0.0) for r in rs),
                     "busy": cores.busy(first, last)})
    return rows


def _f(value: Any, width: int = 7, digits: int = 3) -> str:
    return f"{value:{width}.{digits}f}" if isinstance(value, (int, float)) else f"{'–':>{width}}"


STREAMED = "loader: inflate and parse in parts at once"


def job_rows(records: list[dict[str, Any]], role: dict[int, str], requested: float) -> list[dict[str, Any]]:
    """Per job of a streamed parse (``loader/stream.py``), in the text's order: the part that parsed it, its MB,
    parse start / end, CPU s per 100 MB, and when the loader merged it (s from the request); empty when the parse
    was not streamed. The jobs are ordered by where their text starts, the merges by time (they are in order)."""
    loader = next((pid for pid, name in role.items() if name == "loader"), None)
    if loader is None or not any(r["phase"] == STREAMED for r in records):
        return []
    parts = [r.get("child") for r in records if r["pid"] == loader and r["phase"] == "loader: fork a part"]
    jobs = sorted((r for r in records if r["phase"] == "part: parse" and r["pid"] in parts),
                  key=lambda r: r.get("at_mb", 0.0))
    merges = sorted((r for r in records if r["pid"] == loader and r["phase"] == "loader: merge a part"),
                    key=lambda r: r["t0"])
    rows = []
    for k, job in enumerate(jobs):
        merge = merges[k] if k < len(merges) else None
        mb = job.get("mb")
        rows.append({"job": k, "part": parts.index(job["pid"]) + 1, "at_mb": job.get("at_mb"), "mb": mb,
                     "parse_start": round(job["t0"] - requested, 3), "parse_end": round(job["t1"] - requested, 3),
                     "cpu_s_per_100mb": round(100 * job["cpu"] / mb, 2) if mb else None,
                     "merge_start": round(merge["t0"] - requested, 3) if merge else None,
                     "merged": round(merge["t1"] - requested, 3) if merge else None})
    return rows


def _job_lines(jobs: list[dict[str, Any]]) -> list[str]:
    lines = ["", "## the streamed parse's jobs (s from the request; wait: from the job's end to its merge)",
             f"{'job':>4} {'part':>4} {'at MB':>8} {'MB':>6} {'start':>7} {'end':>7} {'cpu/100MB':>9} {'merge':>7} "
             f"{'merged':>7} {'wait':>6}"]
    for j in jobs:
        wait = j["merge_start"] - j["parse_end"] if j["merge_start"] is not None else None
        lines.append(f"{j['job']:>4} {j['part']:>4} {_f(j['at_mb'], 8, 1)} {_f(j['mb'], 6, 1)} "
                     f"{_f(j['parse_start'])} {_f(j['parse_end'])} {_f(j['cpu_s_per_100mb'], 9, 2)} "
                     f"{_f(j['merge_start'])} {_f(j['merged'])} {_f(wait, 6)}")
    return lines


def report(result: dict[str, Any]) -> str:
    """The timeline, the parts, every phase, and the way to ready, as text."""
    events = f"{result['events']:,} events" if result["events"] is not None else result["error"]
    lines = [f"# {result['trace']} ({events}), {result['host']}",
             f"# parts {result['parts']}, mode {result['mode']}; {result['state']} {result['ready_s']:.3f} s after the "
             "request; "
             f"peak PSS {result['memory'].get('peak_pss_mb')} MB (to ready "
             f"{result['memory'].get('peak_pss_to_ready_mb')} MB) at {_f(result['memory'].get('peak_at_s'), 0, 2)} s: "
             f"{result['memory'].get('at_peak_mb')}", "", "## timeline (s from the request)",
             f"{'start':>8} {'end':>8} {'s':>7} {'cpu s':>6}  {'process':<14} phase"]
    for r in result["records"]:
        if r["phase"] == "view: trace index" and r["t1"] - r["t0"] < 1e-3:
            continue  # a memo hit (the index already built): kept in the JSON only
        extra = {k: v for k, v in r.items() if k not in ("pid", "ppid", "phase", "t0", "t1", "cpu", "role")}
        lines.append(f"{r['t0']:8.3f} {r['t1']:8.3f} {r['t1'] - r['t0']:7.3f} {_f(r.get('cpu'), 6, 2)}  "
                     f"{r['role'] + ' ' + str(r['pid']):<14} {r['phase']}{' ' + json.dumps(extra) if extra else ''}")
    if result.get("job_table"):
        lines += _job_lines(result["job_table"])
    lines += ["", "## the parse's parts (s from the request; part 0 is the loader's own range; streamed: each "
              "part's first job)",
              f"{'part':>4} {'pid':>7} {'MB':>6} {'forked':>7} {'start':>7} {'end':>7} {'parse s':>7} "
              f"{'cpu/100MB':>9} {'pickled':>7} {'read':>7} {'read end':>8} {'merge':>7} {'merged':>7}"]
    for p in result["part_table"]:
        lines.append(f"{p['part']:>4} {p['pid']:>7} {_f(p['mb'], 6, 1)} {_f(p['forked'])} {_f(p['parse_start'])} "
                     f"{_f(p['parse_end'])} {_f(p['parse_s'])} {_f(p['cpu_s_per_100mb'], 9, 2)} {_f(p['pickled'])} "
                     f"{_f(p['read_start'])} {_f(p['read_end'], 8)} {_f(p['merge_start'])} {_f(p['merge_end'])}")
    lines += ["", "## every phase (n: times it ran; busy: cores from its first start to its last end)",
              f"{'first':>7} {'last':>7} {'total s':>7} {'cpu s':>7} {'n':>3}  {'process':<12} {'phase':<58} busy"]
    for r in result["phases"]:
        lines.append(f"{_f(r['first'])} {_f(r['last'])} {_f(r['seconds'])} {_f(r['cpu'])} {r['n']:>3}  "
                     f"{r['process']:<12} {r['phase']:<58} {r['busy']}")
    lines += ["", "## the way to ready (adds: seconds this phase adds to the way; overlaps counted once)",
              f"{'start':>7} {'s':>7} {'adds':>7} {'cores':>5}  {'phase':<66} busy"]
    for r in result["path"]:
        lines.append(f"{_f(r['start'])} {_f(r['seconds'])} {_f(r['adds'])} {_f(r['cores'], 5, 1)}  "
                     f"{r['phase']:<66} {r['busy']}")
    gaps = sum(r["adds"] for r in result["path"] if r["phase"].startswith("(unaccounted"))
    lines.append(f"{'':>7} {'':>7} {_f(sum(r['adds'] for r in result['path']))}        = ready; of it unaccounted "
                 f"{gaps:.3f} s")
    after = [r for r in result["records"] if r["t1"] > result["ready_s"] and r["phase"] in AFTER]
    if after:
        lines += ["", "## after ready (s after ready)"]
        lines += [f"{r['t0'] - result['ready_s']:8.3f} {r['t1'] - result['ready_s']:8.3f} {r['t1'] - r['t0']:7.3f}  "
                  f"{r['role'] + ' ' + str(r['pid']):<20} {r['phase']} {r.get('part', '')}" for r in after]
    return "\n".join(lines)


AFTER = ("view: compute", "server: a part after ready lands", "loader: views after ready")


def host() -> str:
    model = ""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as fh:
            model = next((line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")), "")
    except OSError:
        pass
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "?"
    return (f"{model or platform.processor()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
            f"load average {load}")


def measure(trace: Path, parts: int | None, mode: str, after: bool, interval: float, pss: bool = True,
            startup: float = 0.0) -> dict[str, Any]:
    """One cold load, timed in every process; the result as ``report`` prints it (times in s from the request)."""
    record = tempfile.mkdtemp(prefix="load-phases-")
    os.environ[ENV_DIR] = record
    machine = host()
    install()
    _preload_hooks()
    try:
        got = load(trace, parts, mode, after, interval, pss, startup)
        records = read_records(record)
    finally:
        import shutil

        shutil.rmtree(record, ignore_errors=True)
        os.environ.pop(ENV_DIR, None)
    requested, ready, sampler = got.pop("requested"), got.pop("ready"), got.pop("sampler")
    role = roles(records, os.getpid())
    if "loader" not in role.values():
        print("warning: no record from the loader process: the fork server did not import this script (run it "
              "from the repository root with PYTHONPATH=$PWD)", file=sys.stderr)
    cores = Cores(sampler, role)
    mem = memory(sampler, role, ready)
    if "peak_at" in mem:
        mem["peak_at_s"] = round(mem.pop("peak_at") - requested, 3)
    return {"trace": str(trace), "host": machine, "parts": parts if parts is not None else "the scheduler's",
            "mode": mode, **got, "ready_s": round(ready - requested, 3), "memory": mem,
            "path": path_rows(records, requested, ready, cores),
            "phases": phase_rows(records, role, requested, cores),
            "part_table": part_rows(records, role, requested),
            "job_table": job_rows(records, role, requested),
            "records": [{**r, "t0": round(r["t0"] - requested, 4), "t1": round(r["t1"] - requested, 4),
                         "role": role.get(r["pid"], "other")} for r in records]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace", type=Path)
    parser.add_argument("--parts", type=int, default=None, help="processes the scheduler gives the file (default: "
                        "jobs.budget.parts_for's; the loader takes at most its cores)")
    parser.add_argument("--mode", choices=("main", "h29", "h29b", "deferred"), default="h29b",
                        help="what is stored before ready (bench_ready.py's modes; h29b: the plugin's rule)")
    parser.add_argument("--spill-mb", type=int, default=0, help="inflate text beyond this many MB to a scratch file")
    parser.add_argument("--cores", type=int, default=0, help="let the loader take this many processes whatever its "
                        "cores (to rehearse the many-core layout on a small machine: its times then mean nothing)")
    parser.add_argument("--views-bytes-per-event", type=int, default=0,
                        help="the stored views' processes' memory bound per event (jobs.budget.VIEWS_BYTES_PER_EVENT): "
                        "what runs side by side, e.g. the Overview beside the Trace view's index")
    parser.add_argument("--no-after", action="store_true", help="do not wait for the views left for after ready")
    parser.add_argument("--interval", type=float, default=0.1, help="sampler period, s (cores and PSS)")
    parser.add_argument("--no-pss", action="store_true", help="sample CPU only (each PSS read walks a process's page "
                        "tables: ~0.1-0.2 core of this process at 0.1 s with 2 processes here)")
    parser.add_argument("--startup", type=float, default=0.0, help="seconds between making the scheduler and the "
                        "request (TensorBoard's start after the plugin's: the fork server starts with the scheduler)")
    parser.add_argument("--json", type=Path, default=None, help="write the result (every record) here")
    args = parser.parse_args()
    if args.spill_mb:
        os.environ[ENV_SPILL] = str(args.spill_mb)
    if args.cores:
        os.environ[ENV_CORES] = str(args.cores)
    if args.views_bytes_per_event:
        os.environ[ENV_VIEWS] = str(args.views_bytes_per_event)
    result = measure(args.trace.resolve(), args.parts, args.mode, not args.no_after, args.interval, not args.no_pss,
                     args.startup)
    print(report(result), flush=True)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
