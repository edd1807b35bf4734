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
from ..model.arrays import isin_ints
from ..model.derived import memoized
from ..model.kinds import Kind
from ..model.names import is_host_sync, name_mask, step_mask
from ..model.optree import host_tree
from ..model.tables import TraceModel
from .communication import Collectives, collectives, communication_intervals
from .operators import operator_nodes
from .python_frames import python_frames
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
# communication), host working time (host activity outside synchronisation calls), and host synchronisation (the
# host blocked in sync calls: with the collectives' waiting part, one stall counted once).
INTERVAL_SETS = ("computation", "host_working", "host_sync")
# own-work rows a summary keeps (the most self time per step: what a straggler does that others do not) and the
# characters of a name kept (kernel names run to hundreds): a summary stays a few kilobytes at any trace size
WORK_ROWS = 64
WORK_NAME_CHARS = 160


@dataclass(frozen=True)
class RankSummary:
    """One rank of a distributed job, reduced to what the job-level views read (see the module docstring)."""

    worker: str
    rank: int | None  # from distributedInfo, else a worker name such as rank3 (_RANK_NAME); None: neither
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
    # the rank's own work per step: [{kind: python|operator|kernel, name, us, frame}], the WORK_ROWS largest
    work: list[dict[str, Any]] = field(default_factory=list)
    flops_roof: str | None = None  # the peak class carrying most of the model FLOPs (``work.dominant_roof``)

    def interval_set(self, name: str) -> iv.Intervals:
        return self.intervals.get(name, iv.EMPTY)

    def scalars(self) -> dict[str, Any]:
        """The summary's fields that are not tables (what a cache stores as JSON)."""
        return {"worker": self.worker, "rank": self.rank, "world_size": self.world_size, "backend": self.backend,
                "process": self.process, "host_wait_us": self.host_wait_us, "host_idle_us": self.host_idle_us,
                "overlap_note": self.overlap_note, "step_names": self.step_names, "devices": self.devices,
                "views": self.views, "work": self.work, "flops_roof": self.flops_roof}


def rank_summary(model: TraceModel, worker: str) -> RankSummary:
    """The summary of one rank's trace, shown as ``worker`` (memoised on the model)."""
    return _summary(model, worker)


@memoized(closed=True)
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
        views=available_views([model]), intervals=_interval_sets(model), work=own_work(model),
        flops_roof=dominant_roof(step_work(model).by_roof))


# A worker name that says its rank: ``rank3``, ``rank-3``, ``worker_3``, HTA's ``rank-3``.
_RANK_NAME = re.compile(r"(?:^|[^a-z])(?:rank|worker)[-_]?(\d+)$", re.IGNORECASE)
# tensorboard_trace_handler's default worker name, ``{hostname}_{pid}``: ``vm_562`` is process 562, not rank 562.
_HOST_PID = re.compile(r"^.+_\d+$")


def _rank(info: dict[str, Any], worker: str) -> int | None:
    """The rank from ``distributedInfo``, else from a worker name that says it (``rank3``, or digits ending a name
    such as ``r3`` or ``gpu3``, but not the ``{hostname}_{pid}`` the trace handler names a worker by default), else
    None (the job view then numbers the workers by name)."""
    if isinstance(info.get("rank"), int):
        return int(info["rank"])
    m = _RANK_NAME.search(worker)
    if m:
        return int(m.group(1))
    m = re.search(r"(\d+)$", worker)
    return int(m.group(1)) if m and not _HOST_PID.match(worker) else None


def _step_columns(model: TraceModel, col: Collectives) -> dict[str, np.ndarray]:
    """Per step: its window, duration, computation, communication, kernel/communication overlap and busy time."""
    steps = find_steps(model)
    roles = role_intervals(model)
    comm = communication_intervals(model)
    compute = roles["Kernel"] if len(roles["Kernel"][0]) else roles["CPU Exec"]
    compute = iv.subtract(compute, comm)
    lo, hi = steps.start, steps.end
    if _overlap_unmeasurable(model, col) is None:
        device_comm = iv.union(col.start[~col.on_host], col.end[~col.on_host])
        overlap = iv.lengths_within(iv.intersect(roles["Kernel"], device_comm), lo, hi)
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
    sync = name_mask(model, ev["name"], is_host_sync) & isin_ints(ev["kind"], (Kind.RUNTIME, Kind.DRIVER, Kind.CPU_OP))
    host = isin_ints(ev["kind"], (Kind.CPU_OP, Kind.USER_ANNOTATION, Kind.PYTHON_FUNCTION, Kind.RUNTIME, Kind.DRIVER))
    host &= ~step_mask(model, ev["name"])
    blocked = iv.union(ts[sync], ts[sync] + dur[sync])
    working = iv.subtract(iv.union(ts[host], ts[host] + dur[host]), blocked)
    return {name: (np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64))
            for name, (a, b) in (("computation", compute), ("host_working", working), ("host_sync", blocked))}


def _process_id(model: TraceModel) -> int | None:
    """The host process of the trace: the pid of most host operators."""
    ev = model["events"]
    pids = ev["pid"][isin_ints(ev["kind"], (Kind.CPU_OP, Kind.USER_ANNOTATION)) & (ev["pid"] >= 0)]
    if not len(pids):
        return None
    values, counts = np.unique(pids, return_counts=True)
    return int(values[np.argmax(counts)])


def _overlap_unmeasurable(model: TraceModel, col: Collectives) -> str | None:
    """Why this rank's computation/communication overlap is n/a (None where it is measured).

    Overlap is kernels ∩ device collectives, both on the device timeline. A host span overlapping a kernel says
    nothing about hidden communication (the host merely waited while the GPU computed), so it is never counted:
    where a rank has collective kernels, host-only collective spans beside them (an ``nccl:`` span whose kernel's
    launch the profiler did not record, as 2021 traces have it, or a Gloo barrier) are left out of the overlap
    (``job_distributed`` says so) rather than refusing it; only a rank whose collectives are all host spans is n/a.
    """
    if not len(role_intervals(model)["Kernel"][0]):
        return ("n/a on a CPU-only rank: computation and communication both run on the host, and overlap is "
                "measured between GPU kernels and device-side collectives.")
    if col.on_host.any() and col.on_host.all():
        return ("n/a: the collectives of this rank have no GPU kernel (host-side spans only), and host time "
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
    sync &= isin_ints(ev["kind"], (Kind.RUNTIME, Kind.DRIVER, Kind.CPU_OP))
    ts = ev["ts"]
    dur = np.nan_to_num(ev["dur"], nan=0.0).clip(min=0.0)
    waits = iv.union(ts[sync], ts[sync] + dur[sync])
    host = isin_ints(ev["kind"], (Kind.CPU_OP, Kind.USER_ANNOTATION, Kind.PYTHON_FUNCTION, Kind.RUNTIME, Kind.DRIVER))
    host &= ~step_mask(model, ev["name"])
    busy = iv.union(ts[host], ts[host] + dur[host])
    wait = iv.lengths_within(waits, steps.start, steps.end)
    idle = steps.duration - iv.lengths_within(busy, steps.start, steps.end)
    return float(wait.mean()), float(idle.clip(min=0).mean())


def own_work(model: TraceModel) -> list[dict[str, Any]]:
    """Per step, the time this rank spends in each Python function (its frame's text, ``file(line): function``
    or a built-in such as ``<built-in function sleep>``, object addresses dropped), each host operator and each
    kernel name, inside the steps: ``self_us`` (the time not in a callee: a frame's children, an operator's child
    operators) and ``us`` (inclusive; a call inside a call of the same name counts once); the ``WORK_ROWS`` with
    the most self time. Compared across ranks it says what a straggler does that the others do not
    (``distributed._own_cause``): self time points at the call that takes it (``time.sleep``), not at the
    ``train_step`` around it. ``frame``: for a Python function, the user's frame that calls it most."""
    steps = find_steps(model)
    n = max(steps.count, 1)
    ev = model["events"]
    out: list[dict[str, Any]] = []
    f = python_frames(model)
    if f.size:
        dur = f.end - f.start
        inner = np.zeros(f.size)
        up = f.parent
        np.add.at(inner, up[up >= 0], dur[up >= 0])
        same = np.zeros(f.size, dtype=bool)  # a call inside a call of the same function counts once
        same[up >= 0] = f.name[up[up >= 0]] == f.name[up >= 0]
        keep = _in_steps(steps, f.start)
        user = np.where(f.user >= 0, f.name[np.maximum(f.user, 0)], -1)
        out += _by_name(model, "python", f.name[keep], (dur - inner).clip(min=0.0)[keep],
                        np.where(same, 0.0, dur)[keep], n, user[keep])
    ops = operator_nodes(model)
    op_start = host_tree(model).start[ops.node]
    keep = _in_steps(steps, op_start)
    out += _by_name(model, "operator", ops.name[keep], ops.host_self[keep], ops.host_total[keep], n, None)
    dev = model["device_events"]["row"]
    dev = dev[(ev["kind"][dev] == Kind.KERNEL) & _in_steps(steps, ev["ts"][dev])]
    kdur = np.nan_to_num(ev["dur"][dev], nan=0.0)
    out += _by_name(model, "kernel", ev["name"][dev], kdur, kdur, n, None)
    out.sort(key=lambda r: -r["self_us"])
    return out[:WORK_ROWS]


def _in_steps(steps: Any, ts: np.ndarray) -> np.ndarray:
    k = np.searchsorted(steps.start, ts, side="right") - 1
    ok = k >= 0
    ok[ok] = ts[ok] < steps.end[k[ok]]
    return ok


_ADDRESS = re.compile(r" (?:of (?:[\w.]+ )?object )?at 0x[0-9a-fA-F]+")


def _by_name(model: TraceModel, kind: str, names: np.ndarray, own: np.ndarray, total: np.ndarray, steps: int,
             frames: np.ndarray | None) -> list[dict[str, Any]]:
    """Self and inclusive time per name per step (the WORK_ROWS with the most self time), names without object
    addresses (they differ between processes), with the most common user frame where given."""
    if not len(names):
        return []
    codes, group = np.unique(names, return_inverse=True)
    text = [_ADDRESS.sub("", model.strings[int(c)]) for c in codes.tolist()]
    labels, merged = np.unique(np.asarray(text, dtype=object), return_inverse=True)
    group = merged.reshape(-1)[group.reshape(-1)]
    own_t = np.bincount(group, weights=own.clip(min=0.0), minlength=len(labels))
    all_t = np.bincount(group, weights=total.clip(min=0.0), minlength=len(labels))
    out = []
    for g in np.argsort(-own_t)[:WORK_ROWS].tolist():
        frame = None
        if frames is not None:
            mine = frames[(group == g) & (frames >= 0)]
            if len(mine):
                values, counts = np.unique(mine, return_counts=True)
                frame = model.strings[int(values[np.argmax(counts)])]
        out.append({"kind": kind, "name": str(labels[g])[:WORK_NAME_CHARS], "self_us": float(own_t[g]) / steps,
                    "us": float(all_t[g]) / steps, "frame": frame})
    return out
