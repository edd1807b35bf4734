"""A rank's summary: everything the job-level Distributed view (and the job picture of the diagnosis) needs from one
trace, a few kilobytes instead of the full model.

At 1,024 ranks the server cannot hold every rank's model; it holds these. ``rank_summary`` is a pure function of one
model; ``analysis.distributed`` combines summaries into the job's answer, and computing that answer from summaries
is the only way it is computed, so the answer from full models and from summaries read back from a cache are the
same by construction (the tests check the round trip through Parquet on real multi-rank traces).

What crosses ranks is kept raw: the collective instances (process group, sequence, start, end, bytes), because
transfer time depends on the fastest rank's duration of each matched instance; and the step windows, because
transfer time is measured inside them. Everything that only depends on the rank itself is reduced per step here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..model import intervals as iv
from ..model.derived import memoized
from ..model.kinds import Kind
from ..model.names import is_host_sync, name_mask
from ..model.tables import TraceModel
from .communication import Collectives, collectives, communication_intervals
from .steps import find_steps, role_intervals
from .views import available_views
from .work import dominant_roof, step_work

# Per-step columns of a summary (µs; ``model_flops``: the step's model FLOPs, ``work.step_work``); ``overlap_us``
# is NaN on every step where overlap is not measured.
STEP_COLUMNS = ("start", "end", "step_us", "computation_us", "communication_us", "overlap_us", "busy_us",
                "model_flops")
# Per collective instance, ordered by issue time; ``seq`` numbers the instances of each process group; ``on_host``:
# a host span (no collective kernel); ``prelaunched``: a kernel launched before the profiled window (not matched).
COLLECTIVE_COLUMNS = ("name", "group", "seq", "start", "end", "nbytes", "on_host", "prelaunched")
# Merged (start, end) interval arrays of the rank's own timeline that the job needs with the cross-rank transfer
# intervals (stalled and exposed transfer time): computation (kernels, or CPU work without GPU, outside
# communication), and host working time (host activity outside synchronisation calls).
INTERVAL_SETS = ("computation", "host_working")


@dataclass(frozen=True)
class RankSummary:
    """One rank of a distributed job, reduced to what the job-level views read (see the module docstring)."""

    worker: str
    rank: int | None  # from distributedInfo, else the digits ending the worker name; None: neither
    world_size: int | None
    backend: str | None
    process: int | None
    host_wait_us: float
    host_idle_us: float
    overlap_note: str | None  # why overlap is n/a on this rank (None: measured)
    step_names: list[str]
    steps: dict[str, np.ndarray]  # STEP_COLUMNS, one value per step
    collectives: dict[str, np.ndarray]  # COLLECTIVE_COLUMNS (name, group: object arrays of str)
    devices: list[dict[str, Any]]
    views: list[str] = field(default_factory=list)  # the views this trace offers (``analysis.views``)
    # INTERVAL_SETS: name -> (start, end) float arrays, merged; a missing set is empty
    intervals: dict[str, iv.Intervals] = field(default_factory=dict)
    flops_roof: str | None = None  # the peak class carrying most of the model FLOPs (``work.dominant_roof``)

    def interval_set(self, name: str) -> iv.Intervals:
        return self.intervals.get(name, iv.EMPTY)

    def scalars(self) -> dict[str, Any]:
        """The summary's fields that are not tables (what a cache stores as JSON)."""
        return {"worker": self.worker, "rank": self.rank, "world_size": self.world_size, "backend": self.backend,
                "process": self.process, "host_wait_us": self.host_wait_us, "host_idle_us": self.host_idle_us,
                "overlap_note": self.overlap_note, "step_names": self.step_names, "devices": self.devices,
                "views": self.views, "flops_roof": self.flops_roof}


def rank_summary(model: TraceModel, worker: str) -> RankSummary:
    """The summary of one rank's trace, shown as ``worker`` (memoised on the model)."""
    return _summary(model, worker)


@memoized
def _summary(model: TraceModel, worker: str) -> RankSummary:
    info = model.meta.get("distributedInfo")
    info = info if isinstance(info, dict) else {}
    col = collectives(model)
    host_wait, host_idle = host_waits(model)
    return RankSummary(
        worker=worker, rank=_rank(info, worker),
        world_size=int(info["world_size"]) if isinstance(info.get("world_size"), int) else None,
        backend=str(info["backend"]) if info.get("backend") else None,
        process=_process_id(model), host_wait_us=host_wait, host_idle_us=host_idle,
        overlap_note=_overlap_unmeasurable(model, col), step_names=[str(s) for s in find_steps(model).names],
        steps=_step_columns(model, col), collectives=_collective_columns(col), devices=_devices(model),
        views=available_views([model]), intervals=_interval_sets(model),
        flops_roof=dominant_roof(step_work(model).by_roof))


def _rank(info: dict[str, Any], worker: str) -> int | None:
    if isinstance(info.get("rank"), int):
        return int(info["rank"])
    m = re.search(r"(\d+)$", worker)
    return int(m.group(1)) if m else None


def _step_columns(model: TraceModel, col: Collectives) -> dict[str, np.ndarray]:
    """Per step: its window, duration, computation, communication, kernel/communication overlap and busy time."""
    steps = find_steps(model)
    roles = role_intervals(model)
    comm = communication_intervals(model)
    compute = roles["Kernel"] if len(roles["Kernel"][0]) else roles["CPU Exec"]
    compute = iv.subtract(compute, comm)
    lo, hi = steps.start, steps.end
    if _overlap_unmeasurable(model, col) is None:
        overlap = iv.lengths_within(iv.intersect(roles["Kernel"], comm), lo, hi)
    else:
        overlap = np.full(steps.count, np.nan)
    busy = iv.union(np.concatenate([compute[0], comm[0]]), np.concatenate([compute[1], comm[1]]))
    return {
        "start": np.asarray(lo, dtype=np.float64), "end": np.asarray(hi, dtype=np.float64),
        "step_us": np.asarray(steps.duration, dtype=np.float64),
        "computation_us": iv.lengths_within(compute, lo, hi), "communication_us": iv.lengths_within(comm, lo, hi),
        "overlap_us": np.asarray(overlap, dtype=np.float64), "busy_us": iv.lengths_within(busy, lo, hi),
        "model_flops": np.asarray(step_work(model).flops, dtype=np.float64),
    }


def _collective_columns(col: Collectives) -> dict[str, np.ndarray]:
    return {"name": np.asarray(col.name, dtype=object), "group": np.asarray(col.group, dtype=object),
            "seq": np.asarray(col.seq, dtype=np.int64), "start": np.asarray(col.start, dtype=np.float64),
            "end": np.asarray(col.end, dtype=np.float64), "nbytes": np.asarray(col.nbytes, dtype=np.int64),
            "on_host": np.asarray(col.on_host, dtype=bool), "prelaunched": np.asarray(col.prelaunched, dtype=bool)}


def _interval_sets(model: TraceModel) -> dict[str, iv.Intervals]:
    """INTERVAL_SETS of this rank (see there)."""
    roles = role_intervals(model)
    comm = communication_intervals(model)
    compute = iv.subtract(roles["Kernel"] if len(roles["Kernel"][0]) else roles["CPU Exec"], comm)
    ev = model["events"]
    ts, dur = ev["ts"], np.nan_to_num(ev["dur"], nan=0.0).clip(min=0.0)
    sync = name_mask(model, ev["name"], is_host_sync) & np.isin(ev["kind"], (Kind.RUNTIME, Kind.DRIVER, Kind.CPU_OP))
    host = np.isin(ev["kind"], (Kind.CPU_OP, Kind.USER_ANNOTATION, Kind.PYTHON_FUNCTION, Kind.RUNTIME, Kind.DRIVER))
    host &= ~name_mask(model, ev["name"], lambda s: s.startswith("ProfilerStep#"))
    working = iv.subtract(iv.union(ts[host], ts[host] + dur[host]), iv.union(ts[sync], ts[sync] + dur[sync]))
    return {name: (np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64))
            for name, (a, b) in (("computation", compute), ("host_working", working))}


def _process_id(model: TraceModel) -> int | None:
    """The host process of the trace: the pid of most host operators."""
    ev = model["events"]
    pids = ev["pid"][np.isin(ev["kind"], (Kind.CPU_OP, Kind.USER_ANNOTATION)) & (ev["pid"] >= 0)]
    if not len(pids):
        return None
    values, counts = np.unique(pids, return_counts=True)
    return int(values[np.argmax(counts)])


def _overlap_unmeasurable(model: TraceModel, col: Collectives) -> str | None:
    """Why this rank's computation/communication overlap is n/a (None where it is measured).

    Overlap is kernels ∩ device collectives, both on the device timeline. A host span overlapping a kernel says
    nothing about hidden communication (the host merely waited while the GPU computed), so it is never counted.
    """
    if not len(role_intervals(model)["Kernel"][0]):
        return ("n/a on a CPU-only rank: computation and communication both run on the host, and overlap is "
                "measured between GPU kernels and device-side collectives.")
    if col.on_host.any():
        return ("n/a: some collectives of this rank have no GPU kernel (host-side spans only), and host time "
                "cannot be overlapped with GPU kernels, which run on another timeline.")
    return None


def _devices(model: TraceModel) -> list[dict[str, Any]]:
    from .summary import devices

    used = set(np.unique(model["device_events"]["device"]).tolist())
    return [d for d in devices(model) if d["id"] in used]


def host_waits(model: TraceModel) -> tuple[float, float]:
    """Per step (mean): host time blocked in synchronisation calls, and host time with no recorded activity."""
    ev = model["events"]
    steps = find_steps(model)
    if not steps.count:
        return 0.0, 0.0
    sync = name_mask(model, ev["name"], is_host_sync)
    sync &= np.isin(ev["kind"], (Kind.RUNTIME, Kind.DRIVER, Kind.CPU_OP))
    ts = ev["ts"]
    dur = np.nan_to_num(ev["dur"], nan=0.0).clip(min=0.0)
    waits = iv.union(ts[sync], ts[sync] + dur[sync])
    host = np.isin(ev["kind"], (Kind.CPU_OP, Kind.USER_ANNOTATION, Kind.PYTHON_FUNCTION, Kind.RUNTIME, Kind.DRIVER))
    host &= ~name_mask(model, ev["name"], lambda s: s.startswith("ProfilerStep#"))
    busy = iv.union(ts[host], ts[host] + dur[host])
    wait = iv.lengths_within(waits, steps.start, steps.end)
    idle = steps.duration - iv.lengths_within(busy, steps.start, steps.end)
    return float(wait.mean()), float(idle.clip(min=0).mean())
