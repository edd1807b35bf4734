"""The views a user opens first, computed by the loader process and stored beside the parse: warm at "ready".

When a trace turns ready, every open tab asks for the Overview, the Operator and Kernel tables, the GPU insights and
a first Trace view window at once. Computed by the server, these queued on its one GIL behind each other (a 2 GB
trace answered 409 "computing" for seconds, a crowd of 50 tabs waited 5-7 s). The loader process holds the model
anyway: it computes them there, in forked processes side by side (as many as its share of the machine allows,
``jobs.budget``), and writes them into the cache entry:

- **answers**: the encoded JSON (and its gzip) of each route's default query (:data:`ANSWERS`), byte for byte what
  the route would send. The server answers from them without computing (:func:`stored_answer`); a route finds one
  by its :func:`key`, made of the same validated parameters in the loader and in the route, so a request with any
  other parameter (another grouping, a multi-rank Overview) is computed as before.
- **results** the Trace view's windows read at any zoom (:data:`MEMOS`: the counters' sources, the launches, the
  rows' depths, the steps) and, for a rank of a distributed job, its rank summary (what the job-level views read
  from every rank): given back to the model when the server opens the entry (``model.derived.seed``) through
  ``model/stash.py`` (data only: no pickle in a cache others may share).
- the Trace view's index (``timeline/stored.py``), as before.

Each part is written by its own process into its own files, and ``warm.json``, written last by the loader, lists
the parts that finished; a part that failed (a crash, out of memory) is computed on first use, as on an entry
written before this existed. On a big trace, whose views would delay "ready" by more than :class:`ReadyRule`
allows, none is computed before it: the loader seals the parse, the trace turns ready, and the loader goes on
(:class:`Later`), adding each part to the entry as a sealed folder of its own (with its own ``warm.json``); until a
part lands, its views answer 409 "computing" (:func:`awaited`) rather than being computed twice.
Everything is computed on the model mapped back from the entry just written (as the
server maps it: ``meta`` read back from JSON, the same dtypes), so a stored answer is the answer the server computes
(``tests/unit/test_warm_views.py`` compares them on every sample and test trace).
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..analysis import kernels, operators
from ..analysis.bandwidth import memory_bandwidth
from ..analysis.cupti_counters import counter_join, cupti_counters
from ..analysis.device_peaks import NO_OVERRIDE, PeakOverride
from ..analysis.diagnosis.evidence import host_gap_intervals
from ..analysis.diagnosis.gpu_time import gpu_idle
from ..analysis.idle import KERNEL_WAIT_US, idle_time
from ..analysis.launches import device_work, launch_stats
from ..analysis.memory import MemoryRecords, memory_owners, memory_records
from ..analysis.modules import TIMELINE_LIMIT, module_timeline_view, module_view
from ..analysis.operators import call_stacks, operator_nodes, subtree_device_time
from ..analysis.overview import overview
from ..analysis.python_frames import python_frames
from ..analysis.queues import queue_length
from ..analysis.rank_summary import RankSummary, _summary
from ..analysis.roofline import roofline
from ..analysis.sequences import _sequences, kernel_sequences
from ..analysis.sources import source_files
from ..analysis.steps import Breakdown, Steps, breakdown, find_steps
from ..analysis.summary import summary, time_range_us
from ..analysis.work import kernel_work, op_work
from ..catalog.catalog import TraceFile
from ..model import heap, stash
from ..model.derived import Computing, _key, memoized, seed
from ..model.lifetime import beside, die_with_parent
from ..model.optree import HostTree, host_tree
from ..model.tables import TraceModel, load, model_of
from ..timeline import counters, flows
from ..timeline.index import depth_of_rows, timeline_index
from ..timeline.pyramid import LanePyramid, Level, LongEvents, pyramids, seed_pyramids
from ..timeline.stored import StoredIndex, write_index
from .encoding import Encoded, encode

log = logging.getLogger(__name__)

MARKER = "warm.json"  # written last by the loader: the parts whose files are whole
_VERSION = 2  # 2: the memory records' owners stored apart (a stored part of version 1 is computed again)

# the defaults of the routes' parameters that the pages ask for first (routes.py validates the same)
LIMIT = 500  # launch_stats, cupti_counters, roofline
MAX_POINTS = 500  # queue_length, memory_bandwidth
SEQUENCE_LENGTH, SEQUENCE_TOP = 3, 20

for _cls in (counters._Sources, flows._Launches, Steps, Breakdown, RankSummary, Level, LongEvents, LanePyramid,
             HostTree, operators.OperatorNodes, operators.CallStacks, MemoryRecords):
    stash.register(_cls)


def key(route: str, **params: Any) -> str:
    """The key of an answer in the stored set: the route and its validated parameters (the same in the loader and
    the route, whatever spelling or order the query string had)."""
    return json.dumps([route, params], sort_keys=True, separators=(",", ":"), default=_param)


def _param(value: Any) -> Any:
    if isinstance(value, PeakOverride):  # all of it: its text shows in the answers
        return [value.device, [list(p) for p in value.peaks], value.bandwidth, value.text]
    if isinstance(value, (frozenset, set)):
        return sorted(value)
    raise TypeError(f"no key for a parameter of type {type(value).__name__}")


@dataclass(frozen=True)
class Context:
    """What the first answers depend on beside the model: the file (its worker, name and size) and the server's
    ``--profiler_peaks``."""

    worker: str
    filename: str
    size: int
    peaks: PeakOverride = NO_OVERRIDE


Compute = Callable[[TraceModel], Any]


def answers(ctx: Context) -> dict[str, list[tuple[str, Compute]]]:
    """The stored answers by part: each route's default query, as the page asks it first. The Overview's is the
    one of a single-worker run, left out for a rank of a distributed job (its Overview reads the other ranks:
    computed by the server from their stored summaries)."""
    w, p = ctx.worker, ctx.peaks
    return {
        "overview": [(key("overview", worker=w, workers=1, peaks=p, ranks=[]),
                      lambda m: overview(m, None, w, 1, p, ()))],
        "tables": [
            (key("operators", group_by="name", name=""), lambda m: operators.operator_view(m, "name", "")),
            (key("operators", group_by="name_stack", name=""), lambda m: operators.operator_view(m, "name_stack", "")),
            (key("kernels", group_by="name"), lambda m: kernels.kernel_view(m, "name")),
            (key("sources"), source_files),
            (key("summary", file=ctx.filename, size=ctx.size),
             lambda m: {"file": ctx.filename, "size_bytes": ctx.size, **summary(m)}),
        ],
        "gpu": [
            (key("idle", kernel_wait_us=KERNEL_WAIT_US), lambda m: idle_time(m, KERNEL_WAIT_US)),
            (key("launch_stats", limit=LIMIT), lambda m: launch_stats(m, LIMIT)),
            (key("queue_length", max_points=MAX_POINTS), lambda m: queue_length(m, MAX_POINTS)),
            (key("memory_bandwidth", max_points=MAX_POINTS), lambda m: memory_bandwidth(m, MAX_POINTS)),
            (key("kernel_sequences", length=SEQUENCE_LENGTH, top=SEQUENCE_TOP),
             lambda m: kernel_sequences(m, SEQUENCE_LENGTH, SEQUENCE_TOP)),
            (key("cupti_counters", limit=LIMIT), lambda m: cupti_counters(m, LIMIT)),
            (key("roofline", group_by="kernel", peaks=p, limit=LIMIT), lambda m: roofline(m, "kernel", p, LIMIT)),
        ],
        "timeline": [],
        "modules": [
            (key("modules"), module_view),
            (key("modules/timeline", limit=TIMELINE_LIMIT), lambda m: module_timeline_view(m, TIMELINE_LIMIT)),
        ],
    }


# Memoised results stored by part: (function, its arguments). Their values must be what the function returns on the
# mapped model, exactly: they are handed to the model as if computed there.
MEMOS: dict[str, Callable[..., Any]] = {
    "steps": find_steps,
    "counters": counters._sources,
    "launches": flows._launches,
    "depths": depth_of_rows,
    "rank_summary": _summary,
    "pyramids": lambda model: pyramids(model, timeline_index(model)),
    "host_tree": host_tree,
    "operator_nodes": operator_nodes,
    "call_stacks": call_stacks,
    "memory_records": memory_records,
    "memory_owners": memory_owners,
    "breakdown": breakdown,
    "operator_table": operators.operator_table,
    "kernel_table": kernels.kernel_table,
}


# From this many events on, the parts also store what the server's other views would build again (the host tree,
# the operator nodes, the call stacks, the memory records and their owners; the steps' breakdown and the Operator and
# Kernel tables by name, which the diff of two runs reads: the 2 GB trace's first diff 0.49 s with none of them,
# 2-core VM), and hand the parts forked after them what they built (:data:`HANDOFF`): the server computes those views
# in the background there (``answers.PROGRESSIVE_EVENTS``), seconds each (the 10 GB trace's table by input shape
# 19.1 s, 2.1 s with them). Below it they take a fraction of a second, and storing them would only grow the entry
# (by a quarter) and delay "ready" (the 164 MB trace's parts are computed before it: 1.34 → 1.42 s on the 2-core VM).
SERVER_MEMOS_EVENTS = 1_000_000


def memos(model: TraceModel, ctx: Context) -> dict[str, list[tuple[str, tuple[Any, ...]]]]:
    """The memoised results stored by part; a rank of a distributed job stores its rank summary (every rank's
    Overview and the Distributed view read all of them); a big trace also what the server's other views read
    (:data:`SERVER_MEMOS_EVENTS`)."""
    out: dict[str, list[tuple[str, tuple[Any, ...]]]] = {
        "overview": [("steps", ())], "tables": [], "gpu": [],
        "timeline": [("depths", ()), ("launches", ()), ("counters", ()), ("pyramids", ())], "modules": []}
    if model.n_events >= SERVER_MEMOS_EVENTS:
        out["overview"] += [("memory_records", ()), ("breakdown", ())]
        out["tables"] += [("host_tree", ()), ("operator_nodes", ()), ("call_stacks", ()),
                          ("operator_table", ("name",)), ("kernel_table", ("name",))]
        # after the Module page's answers, which wait for no crowd: 0.27 s and 281 MB of temporaries at 2 GB (2-core
        # VM), which raised the GPU insights' peak by 150 MB beside their own results
        out["modules"] += [("memory_owners", ())]
    if distributed(model):
        out["overview"].append(("rank_summary", (ctx.worker,)))
    return out


# What a part's process hands to the parts the loader forks after it ends (a trace of SERVER_MEMOS_EVENTS or more):
# the Overview builds the host tree and the operator nodes, and the tables and GPU insights, one process each after
# it, built them again (a second each at 2 GB; the tables part 2.42 → 1.85 s and 1,130 → 800 MB with them, the GPU
# insights 762 → 453 MB, on a lent host). Written beside the part's files under hidden names (``.handoff.*``:
# sealing and the entry's manifest leave hidden files out, so the server never copies nor checks them: the same
# results stored in the Overview's own files delayed its landing by their copy and checks), mapped by the loader
# as the part ends (:func:`_take_handoff`) and removed.
HANDOFF: dict[str, tuple[str, ...]] = {"overview": ("host_tree", "operator_nodes")}


def _handoff_files(folder: Path, part: str) -> list[Path]:
    """The description and the arrays ``part`` hands off in ``folder`` (the parts before ready share one folder)."""
    return [folder / f".handoff.{part}.{ext}" for ext in ("json", "bin")]


def distributed(model: TraceModel) -> bool:
    """A rank of a job of several (its ``distributedInfo`` says so)."""
    info = model.meta.get("distributedInfo")
    size = info.get("world_size") if isinstance(info, dict) else None
    return isinstance(size, int) and size > 1


# ---- in the loader process ------------------------------------------------------------------------------------------

# The parts and what each costs (seconds on the 164 MB trace, COSTS_EVENTS events, 2 cores): :func:`schedule` scales
# them by events to tell when each would land (3.3 µs an event for the four: the 2 GB trace's 5.3 M events took 18 s
# one part after the other on the 16-core device, 3.4 µs an event). They start in PARTS' order: what a user opens
# first, first (the Overview, then the Operator and Kernel tables, then the GPU insights), which is also about the
# most costly first, so side by side they end together; the Module page's part last (measured later, beside the
# GPU insights: 0.145 s against their 0.12 s in one run on the 2-core VM, so 0.42 on this table's scale).
COSTS = {"overview": 0.53, "gpu": 0.35, "tables": 0.32, "timeline": 0.2, "modules": 0.42}
COSTS_EVENTS = 430_000
# What the parts handed the Overview's results (:data:`HANDOFF`) cost instead, per COSTS_EVENTS events: the 2 GB
# trace's chain on a lent 16-core host (``part_memory.py``, session 46) took 1.94 s for the tables and 0.79 s for
# the GPU insights after the Overview (2.22 and 2.74 s before the handoff), 0.16 and 0.064 s per 430k events; the
# Module page's part 1.02 s (2-core VM), 0.083 s per 430k events.
HANDED_COSTS = {"tables": 0.16, "gpu": 0.064, "modules": 0.083}
PARTS = ("overview", "tables", "gpu", "timeline", "modules")


@dataclass(frozen=True)
class ReadyRule:
    """Which stored views the loader computes before the trace turns "ready": the ``always`` parts, and those whose
    expected time (the last part's landing, :func:`schedule`) is at most ``seconds`` or at most ``share`` of the
    parse's own time, whichever is larger (:func:`plan`: as many parts as fit, cheapest first). The others
    "ready" does not wait for: it comes with the parse (and the parts that fit), and the loader goes on computing
    them after it, adding each part to the entry as it lands; a request meanwhile answers 409 "computing" (the
    pages ask again), never computes the same view a second time in the server.

    So a 164 MB trace (0.53 s with its four parts side by side) and each rank of a 64-rank job are warm at ready,
    while a 2 GB trace (one part at a time under the memory bound: ~17 s against an 11 s parse) is ready after its
    parse and its Trace view's index (2.5 s), and its other pages fill in as their parts land, instead of "ready"
    coming 15 s later."""

    seconds: float = 1.0
    share: float = 0.25
    # before ready whatever their estimate: the Trace view's index and window sources (main built the index before
    # ready too; deferred behind the costlier parts, the 2 GB trace's first window waited 20 s on the lent machine)
    always: tuple[str, ...] = ("timeline",)
    # after ready whatever their estimate, where the parts are forked (a trace of more than INLINE_EVENTS): the Module
    # page is not among the first pages, and its part beside the others cost the 164 MB trace's "ready" 40-50 ms on
    # a lent host (0.937-0.989 s against 0.785-0.998 s in one call, +43 and +55 ms in another; benchmarks/README.md,
    # session 46). Inline (each rank of a 64-rank job) it takes milliseconds in the loader's process and stays before
    # ready.
    after: tuple[str, ...] = ("modules",)

    def before_ready(self, views_seconds: float, parse_seconds: float) -> bool:
        return views_seconds <= max(self.seconds, self.share * parse_seconds)


READY_RULE = ReadyRule()  # the one place the rule's numbers are set


def plan(rule: ReadyRule, events: int, processes: int, parse_seconds: float | None, memory: int | None = None,
         inline: bool = False) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The parts computed before ready and those left for after it: the rule's ``always`` parts (the Trace view's
    index, as before the first views were stored), then as many others as fit the rule, cheapest first, but for
    the rule's ``after`` parts unless the parts run ``inline`` (a 2 GB trace: the index before ready, the Overview,
    GPU, table and Module parts after it). Every part before ready without ``parse_seconds``."""
    if parse_seconds is None:
        return PARTS, ()
    now: list[str] = [part for part in PARTS if part in rule.always]
    candidates = (p for p in PARTS if p not in now and (inline or p not in rule.after))
    for part in sorted(candidates, key=COSTS.__getitem__):
        trial = tuple(p for p in PARTS if p in now or p == part)
        if not rule.before_ready(max(schedule(events, processes, trial, memory).values()), parse_seconds):
            break
        now.append(part)
    return tuple(p for p in PARTS if p in now), tuple(p for p in PARTS if p not in now)


def schedule(events: int, processes: int, parts: tuple[str, ...] = PARTS, memory: int | None = None
             ) -> dict[str, float]:
    """When each part is expected to land, in seconds from its start: :data:`COSTS` scaled by ``events``, the
    parts started in their order (:data:`PARTS`) on ``processes`` side by side within ``memory`` bytes (each the
    next as the running ones leave room for it, as :func:`compute_parts` runs them); a part started after the
    Overview ended on a big trace at :data:`HANDED_COSTS` (it reads what the Overview handed off)."""
    scale = max(events, 1) / COSTS_EVENTS
    running: list[tuple[float, str]] = []  # (end, part) of the parts started, not yet ended
    clock = 0.0
    out: dict[str, float] = {}
    for part in parts:
        while running and (len(running) >= max(1, processes) or (memory is not None and sum(
                part_bytes(p, events) for _, p in running) + part_bytes(part, events) > memory)):
            running.sort()
            clock = max(clock, running.pop(0)[0])
        handed = events >= SERVER_MEMOS_EVENTS and part in HANDED_COSTS and any(
            end <= clock for p, end in out.items() if p in HANDOFF)
        out[part] = clock + (HANDED_COSTS[part] if handed else COSTS[part]) * scale
        running.append((out[part], part))
    return out


def compute_part(model: TraceModel, ctx: Context, part: str, folder: Path) -> None:
    """Compute one part and write its files (``warm.<part>.json``, ``warm.<part>.bin``; the index for the
    ``timeline`` part): the answers encoded and gzipped, and the memoised results."""
    if part == "timeline":
        write_index(timeline_index(model), folder)
    chunks: list[bytes | memoryview] = []
    size = 0
    stored: dict[str, list[int | None]] = {}
    for name, compute in answers(ctx)[part]:
        if name.startswith('["overview"') and distributed(model):
            continue  # a rank's Overview reads the job (the other ranks): the server computes it, from their summaries
        encoded = encode(compute(model))
        at = size
        chunks.append(encoded.body)
        size += len(encoded.body)
        gz_at = None
        if encoded.gzipped is not None:
            gz_at, size = size, size + len(encoded.gzipped)
            chunks.append(encoded.gzipped)
        stored[name] = [at, len(encoded.body), gz_at, len(encoded.gzipped or b"")]
    description, blob = stash.dumps({"memos": [[name, list(args), MEMOS[name](model, *args)]
                                               for name, args in memos(model, ctx)[part]]})
    _write(folder / f"warm.{part}.bin", [*chunks, *_aligned(size), *blob])
    _write(folder / f"warm.{part}.json", [json.dumps({"answers": stored, "memos_at": size + len(_aligned(size)[0]),
                                                      "memos": json.loads(description)}).encode()])


def _aligned(size: int) -> list[bytes]:
    return [b"\0" * (-size % 64)]


def _write(path: Path, chunks: list[bytes | memoryview]) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as fh:
        for chunk in chunks:
            fh.write(chunk)
    os.replace(tmp, path)


def _can_fork() -> bool:
    return hasattr(os, "fork") and threading.active_count() == 1


# What a part's process grows by at its peak, per event of the trace (anonymous memory: the model's pages it reads are
# the loader's and the server's too), measured on the 2 GB trace (5.3 M events) on a lent 16-core host with
# ``benchmarks/part_memory.py``, its threads (AHEAD) and heap trims included (benchmarks/README.md, "session 44"):
# the Overview 1,060-1,097 MB (200-207 bytes an event), the Operator and Kernel tables 857 MB (161), the GPU insights
# 428 MB (81), the Trace view's index 833 MB (157). Within ``jobs.budget.views_memory`` (300 bytes an event, at least
# 1 GiB) the 164 MB trace's four run at once; on bigger traces the index and the Overview one after the other, then
# the tables beside the GPU insights (the 10 GB trace's GPU insights 12 s sooner, its peak 7.2 → 7.8 GB).
# The Module page's part, handed the Overview's host tree and operator nodes (the 2 GB trace, 2-core VM, trimming):
# 403 MB (76 bytes an event); below SERVER_MEMOS_EVENTS it builds them itself, 182 bytes an event, under 200 MB.
PART_BYTES_PER_EVENT = {"overview": 210, "tables": 165, "gpu": 85, "timeline": 160, "modules": 80}
PART_MIN_BYTES = 64 << 20
# A trace of at most this many events computes its parts in the loader process itself, one after the other: a
# process per part costs more than the parts there (each forked part recomputes the host tree, the steps and the
# other results the parts share, and pays its fork and exit). Measured on the 2-core machine (the four parts in the
# loader / a process each): a 3,000-event rank of the gloo sample 0.05 s / 0.18 s, 20,000 events 0.08 / 0.18 s of
# CPU, 57,000 events 0.21-0.27 / 0.30-0.45 s, 88,000 events 0.23 / 0.44 s of CPU; a logdir of 300 small ranks loaded
# 3-4 times slower with a fork per part. Memory is no concern at this size (well under PART_MIN_BYTES a part).
INLINE_EVENTS = 100_000


# A part's process expected to add at least TRIM_FROM_BYTES gives its freed pages back to the kernel every
# TRIM_PERIOD_S while it computes (``model.heap`` says what that saves and costs), where the parts running side by
# side share the memory bound (PART_BYTES_PER_EVENT was measured trimming). The trims are paid in time: the pages
# given back are faulted in again, zeroed, by the next arrays. A part that runs alone (nothing else fits beside it:
# the 2 GB trace's index and Overview) has the bound to itself and trims only from TRIM_ALONE_FROM_BYTES on (the
# 10 GB trace's parts, whose peak is the bound's). On the lent 16-core host the 2 GB trace's Overview part took
# 7.6-8.1 s trimmed against 6.1 s not (1.06-1.09 GB added against 1.41 GB), and the trace was ready 0.55 s sooner
# with its index not trimmed; with no part trimmed its peak rose 710 MB, from the tables and the GPU insights side
# by side (benchmarks/README.md, "session 44"). The period, from the 2 GB trace's Overview part, which grew 1,122 MB
# trimming every 50 ms, 1,150 every 100 ms, 1,250 every 250 ms (session 39).
TRIM_FROM_BYTES = 256 << 20
TRIM_ALONE_FROM_BYTES = 2 << 30
TRIM_PERIOD_S = 0.05


def trim_period(parts: Iterable[str], events: int, alone: bool = False) -> float | None:
    """How often the process computing ``parts`` of a trace of ``events`` trims its heap (None: never); ``alone``:
    no other part runs beside it."""
    expected = sum(part_bytes(part, events) for part in parts)
    return TRIM_PERIOD_S if expected >= (TRIM_ALONE_FROM_BYTES if alone else TRIM_FROM_BYTES) else None


def part_bytes(part: str, events: int) -> int:
    """What computing ``part`` of a trace of ``events`` adds to the memory (:data:`PART_BYTES_PER_EVENT`)."""
    return max(PART_MIN_BYTES, PART_BYTES_PER_EVENT[part] * events)


def compute_parts(model: TraceModel, ctx: Context, folder: Path | Callable[[str], Path], processes: int,
                  parts: tuple[str, ...] = PARTS, done: Callable[[str, bool], None] | None = None,
                  memory: int | None = None, inline_events: int | None = None) -> list[str]:
    """Compute ``parts``, each in a forked process of its own, at most ``processes`` at a time and as many as fit
    in ``memory`` bytes (:func:`part_bytes`; None: no bound), in their order, the next as one ends, into ``folder``
    (or the folder it gives each part); ``done(part, ok)`` as each ends; the parts that finished. A process per
    part: what a part memoises on the way (the host tree, its tables) goes with it, so the memory is that of the
    parts running, never of all of them (four parts in one process took 1.4 GB of a 1 GB trace, the largest alone
    0.6 GB); and a part that runs out of memory is killed alone,
    never the loader process, whose parse is whole and must still be answered. In this process where forking is
    not safe (threads running) or the trace has at most ``inline_events`` events (:data:`INLINE_EVENTS`)."""
    where = folder if callable(folder) else (lambda part: folder)
    limit = INLINE_EVENTS if inline_events is None else inline_events
    forks = _Forks(model, ctx, processes, memory, inline=model.n_events <= limit)
    for part in parts:
        forks.add(part, functools.partial(where, part))
    forks.wait(parts, done or (lambda part, ok: None))
    return [part for part in parts if forks.ended.get(part, (False,))[0]]


class _Forks:
    """Parts queued and computed in forked processes (:func:`compute_parts`), at most ``processes`` at a time, in
    the order queued; each part's folder is asked for as it starts. ``ended``: part → (whether it was written, its
    folder). The loader's head start (:meth:`WarmViews.save`) queues the parts for after "ready" behind those before
    it, so that they start in the cores and memory the ones before ready leave free; :class:`Later` waits for them
    after "ready". ``inline``: every part is computed in this process (a small trace, :data:`INLINE_EVENTS`)."""

    def __init__(self, model: TraceModel, ctx: Context, processes: int, memory: int | None = None,
                 inline: bool = False) -> None:
        self.model, self.ctx, self.processes, self.memory = model, ctx, max(1, processes), memory
        self.inline = inline
        self.queue: list[tuple[str, Callable[[], Path]]] = []
        self.running: dict[int, tuple[str, Path]] = {}
        self.ended: dict[str, tuple[bool, Path]] = {}

    def add(self, part: str, folder: Callable[[], Path]) -> None:
        self.queue.append((part, folder))

    def known(self) -> set[str]:
        """The parts queued, running or ended."""
        return {p for p, _ in self.queue} | {p for p, _ in self.running.values()} | set(self.ended)

    def _together(self, parts: list[str]) -> bool:
        """Whether ``parts`` may run side by side: a process each and, with a memory bound, their bytes within it
        (one part always runs, whatever it needs)."""
        if len(parts) > self.processes:
            return False
        if self.memory is None or len(parts) < 2:
            return True
        return sum(part_bytes(p, self.model.n_events) for p in parts) <= self.memory

    def fits(self, part: str) -> bool:
        """Whether ``part`` may start now, beside the parts running."""
        return self._together([*(p for p, _ in self.running.values()), part])

    def alone(self, part: str, then: str | None = None) -> bool:
        """Whether ``part``, starting now, runs with no other part beside it: none runs and the next queued (or
        ``then``, the part to be queued next when none is) cannot start beside it (the queue starts in order, so
        none behind that one either; a part queued later waits behind it too)."""
        after = self.queue[0][0] if self.queue else then
        return not self.running and (after is None or not self._together([part, after]))

    def step(self, then: str | None = None) -> None:
        """Start what the free processes and memory allow, in the order queued (each part in this process when
        ``inline`` or where forking is not safe), and take in the parts that ended; ``then``: the part to be queued
        next (:meth:`alone`)."""
        while self.queue and self.fits(self.queue[0][0]):
            part, where = self.queue.pop(0)
            folder = where()
            if self.inline or not _can_fork():  # one part a step: the caller hears of each as it ends
                self.ended[part] = (_try_part(self.model, self.ctx, part, folder), folder)
                break
            period = trim_period([part], self.model.n_events, self.alone(part, then))
            self.running[_fork_parts(self.model, self.ctx, folder, [part], period)] = (part, folder)
        for pid in list(self.running):
            exited, status = os.waitpid(pid, os.WNOHANG)
            if not exited:
                continue
            part, folder = self.running.pop(pid)
            ok = os.waitstatus_to_exitcode(status) == 0
            if not ok:
                log.warning("the stored %s of %s was not computed (exit status %s): computed on first use", part,
                            self.ctx.filename, os.waitstatus_to_exitcode(status))
            _take_handoff(self.model, folder, part, ok and bool(self.queue))
            self.ended[part] = (ok, folder)

    def wait(self, parts: Iterable[str], done: Callable[[str, bool], None]) -> None:
        """Until every one of ``parts`` ended, ``done(part, ok)`` as each does (other queued parts start meanwhile
        as processes free up)."""
        waiting = list(parts)
        while waiting:
            self.step()
            for part in [p for p in waiting if p in self.ended]:
                waiting.remove(part)
                done(part, self.ended[part][0])
            if waiting and self.running:  # a part computed in this process needs no wait: the next step starts one
                time.sleep(0.005)  # the loader process's own loop (no request waits here)


def _try_part(model: TraceModel, ctx: Context, part: str, folder: Path) -> bool:
    """Stored results are an optimisation: a part that fails is computed by the server on first use (and any error
    is reported there, where the user looks)."""
    try:
        compute_part(model, ctx, part, folder)
    except Exception:
        log.debug("computing the stored %s failed", part, exc_info=True)
        return False
    return True


def _fork_parts(model: TraceModel, ctx: Context, folder: Path, parts: list[str], trim: float | None) -> int:
    """A forked process (plain fork, as the loader's parts: this process is a daemon) computing ``parts``, trimming
    its heap every ``trim`` seconds (:func:`trim_period`); exits 0 when every one was written."""
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:  # child
        code = 1
        try:
            die_with_parent(parent)
            with heap.trimming(trim), _ahead(model, parts), handing_off(model, parts, folder):
                code = 0 if all([_try_part(model, ctx, part, folder) for part in parts]) else 1
        finally:
            os._exit(code)
    return pid


# What each part's answers read first, computed on threads of the part's process while its answers are computed on
# its main thread: independent chains (the host tree and what is built on it, the Python frames, the steps and
# their breakdown, the GPU's idle time) overlap, since numpy releases the GIL in the sorts, gathers and reductions
# they are made of. Only results the part's answers read: a result computed here is the one they find (``memoized``
# computes each once, whichever thread asks first), so the answers are the same, only sooner.
AHEAD: dict[str, tuple[Callable[[TraceModel], Any], ...]] = {
    "overview": (host_tree, python_frames, breakdown, gpu_idle, operator_nodes, memory_records, op_work,
                 host_gap_intervals, subtree_device_time, kernel_work),
    "tables": (host_tree, operator_nodes, call_stacks, time_range_us, source_files),
    "gpu": (lambda m: _sequences(m, SEQUENCE_LENGTH), host_tree, find_steps, counter_join, device_work, op_work),
    "timeline": (counters._sources, flows._launches),  # beside the index, which they do not read
}
AHEAD_THREADS = 4  # at most, and no more than the cores this process may run on
# The parts whose results depend on the model's tables alone (not its meta, nor its texts' containers): they may be
# computed on the parse as the loader built it, before its files are written (``WarmViews.save``).
EARLY = ("timeline",)


@contextlib.contextmanager
def _ahead(model: TraceModel, parts: list[str]) -> Iterator[None]:
    """Threads computing :data:`AHEAD` of ``parts`` while the body runs; waited for at its end (their errors are
    the answers' own: whoever asks a result that failed gets its exception, and the part is computed on first
    use)."""
    work = [fn for part in parts for fn in AHEAD.get(part, ())]
    threads = min(AHEAD_THREADS, len(work), len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1)
    if threads < 2:
        yield
        return
    heap.one_arena()  # the 2 GB trace's Overview peaked 170 MB higher with an arena per thread
    with ThreadPoolExecutor(max_workers=threads - 1, thread_name_prefix="warm-ahead") as pool:
        for fn in work:
            pool.submit(fn, model)
        yield


class WarmViews:
    """What the loader process computes and stores beside the parse, and the server gives back to the model when it
    opens the entry (a ``jobs.cache.Stored``, passed to ``jobs`` by the plugin). ``rule``: whether the views are
    computed before "ready" or after it (:class:`ReadyRule`; :data:`READY_RULE` unless given). ``inline_events``: a
    trace of at most that many events computes its parts in the loader process itself (:data:`INLINE_EVENTS`)."""

    def __init__(self, peaks: PeakOverride = NO_OVERRIDE, rule: ReadyRule | None = None,
                 inline_events: int | None = None) -> None:
        self.peaks = peaks
        self.rule = rule if rule is not None else READY_RULE
        self.inline_events = INLINE_EVENTS if inline_events is None else inline_events

    def save(self, directory: str, file: TraceFile | None = None, processes: int = 1,
             parse_seconds: float | None = None, memory: int | None = None, built: TraceModel | None = None,
             saved: Callable[[], None] | None = None) -> Later | None:
        """Compute and write every part for ``file`` (its parse in ``directory``, or being written there: ``built``
        and ``saved``, ``jobs.cache.Stored``), in ``processes`` taking ``memory`` bytes at most
        (:data:`PART_BYTES_PER_EVENT`); when the parse took ``parse_seconds`` and some parts would delay "ready" more
        than the rule allows, those are left to the returned :class:`Later`, to be placed once the entry is
        published (started meanwhile where processes and memory allow: a head start). The parts that read only the
        tables (:data:`EARLY`: the Trace view's) start on ``built`` beside the writing where they fork; every other
        part is computed on the parse mapped back, as the server opens it."""
        folder = Path(directory)
        early = built is not None and saved is not None and built.n_events > self.inline_events and _can_fork()
        if saved is not None and not early:
            saved()
        # what the server will open, but for EARLY's parts
        model = built if early and built is not None else load(folder)
        ctx = context(file, self.peaks)
        inline = model.n_events <= self.inline_events
        now, later = plan(self.rule, model.n_events, processes, parse_seconds, memory, inline)
        forks = _Forks(model, ctx, processes, memory, inline=inline)
        if early and saved is not None:
            for part in now:
                if part in EARLY:
                    forks.add(part, lambda: folder)
            forks.step(then=next((p for p in (*now, *later) if p not in EARLY), None))  # now, beside the writing
            saved()
            model = forks.model = load(folder)
        started = forks.known()
        for part in now:
            if part not in started:
                forks.add(part, lambda: folder)
        # a head start: the parts for after ready take the processes these leave free
        if now and not forks.inline and _can_fork():
            for part in later:
                forks.add(part, functools.partial(_private_folder, folder.parent))
        if now:
            forks.wait(now, lambda part, ok: None)
            _write_marker(folder, [part for part in now if forks.ended[part][0]], ctx)
        lands = schedule(model.n_events, processes, later, memory)
        return Later(model, ctx, processes, lands, forks) if later else None

    def attach(self, model: TraceModel, source: str | Mapping[str, Any]) -> None:
        """Give ``model`` (just opened from a cache entry, or a part added to it later: its folder, or its files by
        name) the stored index and every stored part: answers for :func:`stored_answer`, results into its memo. A
        part that cannot be read is left out (computed on first use); either way it is no longer awaited."""
        StoredIndex().attach(model, source)  # type: ignore[arg-type]
        files = _files(source)
        marker = files.get(MARKER)
        if marker is None:
            return
        doc = json.loads(bytes(marker))
        if doc.get("version") != _VERSION:
            return
        found: dict[str, tuple[memoryview, memoryview | None]] = {}
        parts = [part for part in doc.get("parts", []) if part in COSTS]
        for part in parts:
            try:
                found.update(_attach_part(model, files, part))
            except (KeyError, ValueError, TypeError) as err:
                log.warning("ignoring the stored %s of %s: %s", part, model.meta.get("source"), err)
        stored = _stored(model)
        with _AWAIT_LOCK:
            for name, value in found.items():
                stored.setdefault(name, value)
        self.abandon(model, parts)

    def expect(self, model: TraceModel, file: TraceFile, parts: Mapping[str, float]) -> None:
        """``parts`` are being computed by the loader after ready, each expected within so many seconds from now:
        until each lands (:meth:`attach`) or is abandoned, a request for its views answers 409 "computing"
        (:func:`awaited`) instead of computing them a second time."""
        ctx = context(file, self.peaks)
        keys: dict[Any, str] = {}
        for part in parts:
            keys.update((name, part) for name, _ in answers(ctx)[part] if name not in _stored(model))
        if "timeline" in parts and _key(timeline_index, ()) not in model.memo:
            keys[_key(timeline_index, ())] = "timeline"
        now = time.monotonic()
        state = _awaiting(model)
        with _AWAIT_LOCK:
            state.keys.update(keys)
            state.parts.update({part: (now, float(seconds)) for part, seconds in parts.items()})

    def abandon(self, model: TraceModel, parts: Iterable[str] | None = None) -> None:
        """``parts`` (every awaited one: None) will not come from the loader (they landed, failed, or the loader
        process ended): their views are computed by the server on first use, as without stored views."""
        state = _awaiting(model)
        with _LANDED:
            for part in list(state.parts) if parts is None else parts:
                state.parts.pop(part, None)
            _LANDED.notify_all()  # the requests waiting for them (:func:`awaited`)


class Later:
    """The parts a loader process computes after the trace turned ready (:class:`ReadyRule`), on the model it
    mapped from the entry before publishing it (its files stay mapped when the entry is renamed into place). Those
    that ``forks`` already started (the head start :meth:`WarmViews.save` gives them, in private folders of the
    cache) are waited for; the others start as processes free up."""

    def __init__(self, model: TraceModel, ctx: Context, processes: int, lands: dict[str, float],
                 forks: _Forks | None = None) -> None:
        self.model, self.ctx, self.processes = model, ctx, processes
        self.parts = lands  # part → seconds after ready it is expected to land in
        self.forks = forks if forks is not None else _Forks(model, ctx, processes)

    def rebase(self, files: dict[str, Any]) -> None:
        """The parts not started yet are computed on the model of ``files``, the same parse mapped from the file the
        server maps (``jobs.handover``): a part's process then reads the server's pages, counted once, where the
        entry's own files were a second copy of the model (the 2 GB trace's Overview part and the server: the
        model's 0.9 GB twice at the run's peak)."""
        self.model = self.forks.model = model_of(files)

    def run(self, stage: Callable[[], Path], place: Callable[[Path, str], bool],
            report: Callable[[str, bool], None]) -> None:
        """Compute the parts (in :data:`PARTS` order, as many side by side as ``processes``), each in a folder of its
        own (``stage()``) with its own marker, ``place`` each into the entry as it ends and ``report`` it."""
        early = self.forks.known()  # queued by the head start, in private folders
        for part in self.parts:
            if part not in early:
                self.forks.add(part, stage)

        def ended(part: str, ok: bool) -> None:
            folder = self.forks.ended[part][1]
            if ok:
                with contextlib.suppress(OSError):
                    folder = _adopt(folder, stage) if part in early else folder
                    _write_marker(folder, [part], self.ctx)
                ok = (folder / MARKER).is_file() and place(folder, part)
            else:
                shutil.rmtree(folder, ignore_errors=True)
            report(part, ok)

        self.forks.wait(tuple(self.parts), ended)


def _private_folder(cache: Path) -> Path:
    """A private folder in the cache folder (as ``jobs.entries.staging`` makes them: a killed loader's is removed
    with the stale ones) for a part computed before the entry is published; :func:`_adopt` moves it."""
    return Path(tempfile.mkdtemp(prefix=".tmp-", dir=cache))


def _adopt(folder: Path, stage: Callable[[], Path]) -> Path:
    """The files of a part computed in ``folder`` (a :func:`_private_folder`) moved into a folder ``stage()`` gives,
    the one ``Later.run`` places into the entry."""
    target = stage()
    for item in folder.iterdir():
        os.replace(item, target / item.name)
    folder.rmdir()
    return target


def _write_marker(folder: Path, parts: list[str], ctx: Context) -> None:
    _write(folder / MARKER, [json.dumps({"version": _VERSION, "parts": parts, "context": _context_json(ctx)})
                             .encode()])


@dataclass
class _Awaiting:
    """The parts of a model its loader is still computing (part → (since, seconds expected)), and the answers' and
    results' keys each will bring."""

    parts: dict[str, tuple[float, float]] = field(default_factory=dict)
    keys: dict[Any, str] = field(default_factory=dict)


_AWAIT_LOCK = threading.Lock()
_LANDED = threading.Condition(_AWAIT_LOCK)  # notified when parts land or are given up (:meth:`WarmViews.abandon`)


@memoized
def _awaiting(model: TraceModel) -> _Awaiting:
    return _Awaiting()


def awaited(model: TraceModel, key: Any, analysis: str, patience: float = 0.0) -> Computing | None:
    """The 409 "computing" to answer for ``key`` (an answer's :func:`key`, or a result's memo key: the Trace view's
    index) while the loader is computing the part that stores it; None when no part to come holds it, or once it
    lands. Waits up to ``patience`` seconds for it to land (a long poll, as a view the server computes waits for
    its answer: ``api.answers``): the answer goes out as the part lands, not at the page's next ask, up to the
    "ask again" pause later (the 2 GB trace's Overview asked five times over 4.4 s after ready). Then the page asks
    again when told (soon: a quarter of the expected rest, between 0.2 and 1 s)."""
    state = _awaiting(model)
    deadline = time.monotonic() + patience
    with _LANDED:
        while True:
            part = state.keys.get(key)
            since, expected = state.parts.get(part, (None, 0.0)) if part is not None else (None, 0.0)
            left = deadline - time.monotonic()
            if since is None or left <= 0:
                break
            _LANDED.wait(left)
    if since is None:
        return None
    elapsed = time.monotonic() - since
    progress = min(0.99, elapsed / expected) if expected > 0 else None
    return Computing(analysis, progress, int(min(1000.0, max(200.0, (expected - elapsed) * 250))))


def awaiting_any(model: TraceModel) -> bool:
    """Whether the loader is still computing any part of ``model``'s stored views."""
    state = _awaiting(model)
    with _AWAIT_LOCK:
        return bool(state.parts)


def context(file: TraceFile | None, peaks: PeakOverride) -> Context:
    if file is None:
        return Context(worker="", filename="", size=0, peaks=peaks)
    return Context(worker=file.worker, filename=file.filename, size=file.size, peaks=peaks)


def _context_json(ctx: Context) -> dict[str, Any]:
    return {"worker": ctx.worker, "filename": ctx.filename, "size": ctx.size, "peaks": _param(ctx.peaks)}


def _files(source: str | Mapping[str, Any]) -> Mapping[str, Any]:
    """The entry's warm files by name: mapped from its folder, or as given (buffers of a verified copy)."""
    if not isinstance(source, (str, os.PathLike)):
        return source
    folder = Path(source)
    out: dict[str, Any] = {}
    for path in folder.glob("warm.*"):
        with contextlib.suppress(OSError, ValueError):
            out[path.name] = _map(path)
    return out


def _map(path: Path) -> memoryview:
    import mmap

    with open(path, "rb") as fh:
        if os.fstat(fh.fileno()).st_size == 0:
            return memoryview(b"")
        return memoryview(mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ))


def _attach_part(model: TraceModel, files: Mapping[str, Any], part: str
                 ) -> dict[str, tuple[memoryview, memoryview | None]]:
    index = json.loads(bytes(files[f"warm.{part}.json"]))
    blob = memoryview(files[f"warm.{part}.bin"]).cast("B")
    out: dict[str, tuple[memoryview, memoryview | None]] = {}
    for name, (at, n, gz_at, gz_n) in index["answers"].items():
        if at + n > len(blob) or (gz_at is not None and gz_at + gz_n > len(blob)):
            raise ValueError("a stored answer lies outside its file")
        out[name] = (blob[at:at + n], blob[gz_at:gz_at + gz_n] if gz_at is not None else None)
    values = stash.loads(json.dumps(index["memos"]), blob[int(index["memos_at"]):])
    for name, args, value in values["memos"]:
        if name != "pyramids":
            seed(model, MEMOS[name], value, *args)
        elif _key(timeline_index, ()) in model.memo:  # built for the stored index: only beside it
            seed_pyramids(model, timeline_index(model), value)
    return out


@contextlib.contextmanager
def handing_off(model: TraceModel, parts: list[str], folder: Path) -> Iterator[None]:
    """While the body computes ``parts`` (in a part's process), a thread writes what they hand to the parts forked
    after them (:data:`HANDOFF`, a trace of :data:`SERVER_MEMOS_EVENTS` or more) as soon as those results exist
    (the part's threads build them first: ``AHEAD``), so the writing overlaps the part's own work; waited for at the
    end. A result that fails is not handed off (the next parts compute it)."""
    part = next((p for p in parts if p in HANDOFF), None)
    if part is None or model.n_events < SERVER_MEMOS_EVENTS:
        yield
        return
    names, (index, arrays) = HANDOFF[part], _handoff_files(folder, part)

    def write() -> None:
        with contextlib.suppress(Exception):
            description, blob = stash.dumps({"memos": [[name, [], MEMOS[name](model)] for name in names]})
            _write(arrays, blob)
            _write(index, [description])  # last: the pair is whole

    with beside(write, "warm-handoff"):
        yield


def _take_handoff(model: TraceModel, folder: Path, part: str, take: bool) -> None:
    """The results the part just ended in ``folder`` handed off (:func:`handing_off`), given to the loader's
    ``model`` when ``take`` (parts are queued after it) so that the processes it forks next read them, mapped (the
    files' pages, shared); the files are removed either way (the mappings outlive them). Files that are missing or
    cannot be read cost only the time they would have saved; a write cut short (its ``_write`` temporary) goes too."""
    if part not in HANDOFF:
        return  # nothing of its own; another part's files in a shared folder are that part's
    paths = _handoff_files(folder, part)
    try:
        if take and all(path.is_file() for path in paths):
            values = stash.loads(bytes(_map(paths[0])), _map(paths[1]))
            for name, args, value in values["memos"]:
                seed(model, MEMOS[name], value, *args)
    except (OSError, ValueError, KeyError, TypeError, stash.Unstashable):
        log.debug("the results %s handed off were not read back", part, exc_info=True)
    finally:
        for path in [*paths, *(p.with_name(f".{p.name}.tmp") for p in paths)]:
            with contextlib.suppress(OSError):
                path.unlink()


@memoized
def _stored(model: TraceModel) -> dict[str, tuple[memoryview, memoryview | None]]:
    """The stored answers of ``model`` by :func:`key` (seeded when its entry is opened; none otherwise)."""
    return {}


def has_answer(model: TraceModel, name: str) -> bool:
    """Whether ``model``'s entry holds the answer ``name`` (a :func:`key`)."""
    return name in _stored(model)


def stored_answer(model: TraceModel, name: str) -> Encoded:
    """The stored answer ``name`` (a :func:`key`) of ``model``, copied out of the entry's mapped file (KeyError
    when there is none)."""
    body, gzipped = _stored(model)[name]
    return Encoded(bytes(body), bytes(gzipped) if gzipped is not None else None)


def precompute(model: TraceModel) -> None:
    """What the server computes when a trace turns ready (``workspace.precompute``: the Overview and the index),
    unless its entry held them: an entry of an older version, a preprocessed rank, a part that failed."""
    if not _stored(model) and not awaiting_any(model):
        from ..workspace import precompute as compute_first_views  # the server's module: not in loader processes

        compute_first_views(model)

