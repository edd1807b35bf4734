"""Distributed view: ranks of one job, their computation/communication overlap, data transfer versus waiting, and
collectives matched across ranks by process group and sequence.

Collective instances and communication time come from ``analysis.communication``, the definition the Overview's
Communication category uses too: a collective kernel (joined through its launch to the host operator that carries
the collective's name, sizes, dtype and process group), or, for a collective without one (Gloo, CPU-only jobs), its
host span. Instances are matched across ranks by (process group, sequence number within that group), never by list
position, so a rank with a missing or extra collective gets a note instead of a blank view.

Overlap of computation and communication is only measured on one timeline: device collectives against device
kernels. Where a rank's communication includes host spans (host-only collectives on a GPU rank) or the rank has no
kernels (CPU-only), the overlap is n/a (``None``) with the reason, never a number mixing host and device time.

Transfer versus synchronisation (the old plugin's heuristic): for each matched instance, the fastest rank's
duration is the pure transfer time; on every rank the last ``min_dur`` of its instance is transfer and the rest is
waiting for the others (sync).
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import numpy as np

from ..model import intervals as iv
from ..model.kinds import Kind
from ..model.names import is_host_sync, name_mask
from ..model.tables import TraceModel
from .communication import Collectives, collectives, communication_intervals, dtype_size, normalize_collective
from .steps import find_steps, role_intervals

__all__ = ["Collectives", "collectives", "distributed", "dtype_size", "normalize_collective"]

def _rank_of(model: TraceModel, worker: str, fallback: int) -> int:
    info = model.meta.get("distributedInfo")
    if isinstance(info, dict) and isinstance(info.get("rank"), int):
        return int(info["rank"])
    m = re.search(r"(\d+)$", worker)
    return int(m.group(1)) if m else fallback


Ranked = list[tuple[int, str, TraceModel]]  # (rank, worker, model), in rank order
MatchKey = tuple[str, int]  # (process group, sequence number within it)


def distributed(traces: list[tuple[str, TraceModel]]) -> dict[str, Any]:
    """``traces``: (worker name, model) of one span for every worker of a run."""
    ranks = sorted(((_rank_of(m, w, i), w, m) for i, (w, m) in enumerate(sorted(traces))), key=lambda t: t[0])
    per_rank = [collectives(m) for _, _, m in ranks]
    complete, min_dur = _matched(per_rank)
    rows = [_rank_row(rank, worker, model, col, _transfer(col, complete, min_dur))
            for (rank, worker, model), col in zip(ranks, per_rank)]
    return {
        "world_size": _world_size(ranks),
        "backend": _backend(ranks),
        "ranks": rows,
        "steps": [str(s) for s in find_steps(ranks[0][2]).names] if ranks else [],
        "communication_by_step": [row["per_step"]["communication_us"] for row in rows],
        "straggler": _straggler(rows),
        "notes": _repeated_rank_notes(ranks) + _unmatched_notes(ranks, per_rank),
    }


def _repeated_rank_notes(ranks: Ranked) -> list[str]:
    seen = Counter(rank for rank, _, _ in ranks)
    repeated = sorted(r for r, n in seen.items() if n > 1)
    if not repeated:
        return []
    return [f"Several workers report the same rank ({', '.join(map(str, repeated))}): copied traces, or traces of "
            "different jobs in one run? Ranks are shown per worker."]


def _matched(per_rank: list[Collectives]) -> tuple[set[MatchKey], dict[MatchKey, float]]:
    """Instances matched across ranks by (group, seq): those every rank has, and the fastest rank's duration of
    each (the transfer time; the rest of a slower rank's duration is waiting for the others)."""
    durations: dict[MatchKey, list[float]] = {}
    for col in per_rank:
        for g, s, a, b, early in zip(col.group, col.seq.tolist(), col.start.tolist(), col.end.tolist(),
                                     col.prelaunched.tolist()):
            if not early:  # a kernel launched before the window has no counterpart to match
                durations.setdefault((g, s), []).append(b - a)
    complete = {key for key, ds in durations.items() if len(ds) == len(per_rank)}
    return complete, {key: min(ds) for key, ds in durations.items()}


def _unmatched_notes(ranks: Ranked, per_rank: list[Collectives]) -> list[str]:
    notes = _prelaunched_notes(ranks, per_rank)
    counts = [{g: int(np.sum((np.asarray(c.group) == g) & ~c.prelaunched)) for g in set(c.group)} for c in per_rank]
    for g in sorted({g for c in counts for g in c}):
        per = [c.get(g, 0) for c in counts]
        if len(set(per)) > 1:
            detail = ", ".join(f"rank {r}: {k}" for (r, _, _), k in zip(ranks, per))
            notes.append(f"Process group {g} has different numbers of collectives per rank ({detail}); the unmatched "
                         "ones count as transfer time on the ranks that have them.")
    return notes


def _transfer(col: Collectives, complete: set[MatchKey], min_dur: dict[MatchKey, float]) -> iv.Intervals:
    """A rank's transfer time: each matched collective's last ``min_dur`` (it waited for the others before)."""
    if not len(col.start):
        return iv.EMPTY
    real_start = np.array([max(a, b - min_dur.get((g, s), b - a)) if (g, s) in complete else a
                           for g, s, a, b in zip(col.group, col.seq.tolist(), col.start.tolist(), col.end.tolist())])
    return iv.union(real_start, col.end)


def _rank_row(rank: int, worker: str, model: TraceModel, col: Collectives, transfer: iv.Intervals) -> dict[str, Any]:
    """One rank's row: the mean per step of each part of the step, the same per step, and its collectives."""
    steps = find_steps(model)
    per_step = _per_step(model, col, transfer)
    host_wait, host_idle = _host_waits(model)
    row: dict[str, Any] = {"worker": worker, "rank": rank, "steps": steps.count}
    for key, values in per_step.items():
        row[key] = None if values is None else float(np.mean(values)) if steps.count else 0.0
    row.update({
        "overlap_note": _overlap_unmeasurable(model, col),
        "host_wait_us": host_wait,
        "host_idle_us": host_idle,
        # the same per step (for a step selector); step i of every rank is the i-th ProfilerStep it recorded
        "per_step": {key: None if values is None else values.tolist() for key, values in per_step.items()},
        # each step's [start, end] in this rank's own trace clock: where its Trace view opens for that step
        "step_windows_us": [[float(a), float(b)] for a, b in zip(steps.start.tolist(), steps.end.tolist())],
        "collectives": _collective_table(col, transfer, (steps.start, steps.end)),
        "devices": _devices(model),
        "host": worker.rsplit("_", 1)[0] if re.search(r"_\d+$", worker) else worker,
        "process": _process_id(model),
    })
    return row


def _per_step(model: TraceModel, col: Collectives, transfer: iv.Intervals) -> dict[str, np.ndarray | None]:
    """Per step: computation (kernels, or CPU work without GPU, outside communication), communication, their
    overlap (None where it cannot be measured), other (neither), transfer, synchronisation (communication not
    transferring) and the step time."""
    steps = find_steps(model)
    roles = role_intervals(model)
    comm = communication_intervals(model)
    compute = iv.subtract(roles["Kernel"] if len(roles["Kernel"][0]) else roles["CPU Exec"], comm)
    lo, hi = steps.start, steps.end
    c_comm = iv.lengths_within(comm, lo, hi)
    c_transfer = iv.lengths_within(transfer, lo, hi)
    busy = iv.lengths_within(iv.union(np.concatenate([compute[0], comm[0]]),
                                      np.concatenate([compute[1], comm[1]])), lo, hi)
    overlap = None if _overlap_unmeasurable(model, col) else iv.lengths_within(iv.intersect(roles["Kernel"], comm),
                                                                                lo, hi)
    stalled = _stalled(model, iv.union(np.concatenate([compute[0], transfer[0]]),
                                       np.concatenate([compute[1], transfer[1]])),
                       iv.subtract(iv.union(col.start[col.on_host], col.end[col.on_host]), transfer))
    return {
        "computation_us": iv.lengths_within(compute, lo, hi), "communication_us": c_comm, "overlap_us": overlap,
        "other_us": (steps.duration - busy).clip(min=0), "transfer_us": c_transfer,
        "sync_us": (c_comm - c_transfer).clip(min=0), "step_us": steps.duration,
        "stalled_us": stalled, "exposed_transfer_us": iv.lengths_within(iv.subtract(transfer, compute), lo, hi),
    }


def _stalled(model: TraceModel, device_work: iv.Intervals, waiting: iv.Intervals) -> np.ndarray:
    """Per step: time in which this rank makes no progress of its own: no computation or data transfer runs and
    the host is idle, blocked in a synchronisation call or waiting inside a host-side collective (``waiting``).
    Waiting for a peer costs a rank only this much: a wait that the host or the device spends working on something
    else is hidden."""
    ev = model["events"]
    steps = find_steps(model)
    if not steps.count:
        return np.zeros(0)
    ts, dur = ev["ts"], np.nan_to_num(ev["dur"], nan=0.0).clip(min=0.0)
    sync = name_mask(model, ev["name"], is_host_sync) & np.isin(ev["kind"], (Kind.RUNTIME, Kind.DRIVER, Kind.CPU_OP))
    host = np.isin(ev["kind"], (Kind.CPU_OP, Kind.USER_ANNOTATION, Kind.PYTHON_FUNCTION, Kind.RUNTIME, Kind.DRIVER))
    host &= ~name_mask(model, ev["name"], lambda s: s.startswith("ProfilerStep#"))
    working = iv.subtract(iv.union(ts[host], ts[host] + dur[host]), iv.union(ts[sync], ts[sync] + dur[sync]))
    working = iv.subtract(working, waiting)
    busy = iv.union(np.concatenate([working[0], device_work[0]]), np.concatenate([working[1], device_work[1]]))
    stalled: np.ndarray = (steps.duration - iv.lengths_within(busy, steps.start, steps.end)).clip(min=0.0)
    return stalled


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


def _prelaunched_notes(ranks: Ranked, per_rank: list[Collectives]) -> list[str]:
    """One note per rank with collective kernels launched before the profiled window."""
    notes = []
    for (rank, _, _), col in zip(ranks, per_rank):
        early = int(col.prelaunched.sum())
        if early:
            names = ", ".join(sorted(set(np.asarray(col.name, dtype=object)[col.prelaunched].tolist())))
            notes.append(f"Rank {rank}: {early} collective kernel{'s' if early > 1 else ''} ({names}) ran in the "
                         "profiled window but {} launched before it (warm-up, or the step before the profiler "
                         "started): {} time counts as communication, but not as calls, and is not matched across "
                         "ranks.".format("were" if early > 1 else "was", "their" if early > 1 else "its"))
    return notes


def _collective_table(col: Collectives, transfer: iv.Intervals, steps: tuple[np.ndarray, np.ndarray]
                      ) -> list[dict[str, Any]]:
    """Per collective name, within the steps (as the rank table, so that their transfer times agree): calls issued
    in the window (kernels launched before it are counted apart, as ``prelaunched``), bytes, time, transfer."""
    out = []
    names = np.asarray(col.name, dtype=object)
    lo, hi = steps
    for name in sorted(set(col.name)):
        on = names == name
        span = iv.union(col.start[on], col.end[on])
        total = float(iv.lengths_within(span, lo, hi).sum()) if len(lo) else iv.total(span)
        moved = (float(iv.lengths_within(iv.intersect(span, transfer), lo, hi).sum()) if len(lo)
                 else iv.total(iv.intersect(span, transfer)))
        issued = on & ~col.prelaunched
        calls = int(issued.sum())
        nbytes = int(col.nbytes[issued].sum())
        out.append({
            "name": name, "calls": calls, "prelaunched": int((on & col.prelaunched).sum()), "bytes": nbytes,
            "total_us": total, "avg_us": total / calls if calls else total,
            "transfer_us": moved, "bandwidth_gbps": (nbytes / moved / 1e3) if moved > 0 and nbytes else None,
        })
    return sorted(out, key=lambda r: -r["total_us"])


def _devices(model: TraceModel) -> list[dict[str, Any]]:
    from .summary import devices

    used = set(np.unique(model["device_events"]["device"]).tolist())
    return [d for d in devices(model) if d["id"] in used]


def _world_size(ranks: list[tuple[int, str, TraceModel]]) -> int:
    for _, _, m in ranks:
        info = m.meta.get("distributedInfo")
        if isinstance(info, dict) and isinstance(info.get("world_size"), int):
            return int(info["world_size"])
    return len(ranks)


def _backend(ranks: list[tuple[int, str, TraceModel]]) -> str | None:
    for _, _, m in ranks:
        info = m.meta.get("distributedInfo")
        if isinstance(info, dict) and info.get("backend"):
            return str(info["backend"])
    return None


def _host_waits(model: TraceModel) -> tuple[float, float]:
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


def _straggler(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The rank the others wait for: it waits least (in collectives and in host synchronisation) while the others
    wait clearly more (over 1 ms and 5 % of the step more)."""
    if len(rows) < 2:
        return None
    waits = np.array([r["sync_us"] + r["host_wait_us"] for r in rows])
    k = int(np.argmin(waits))
    others = float(np.delete(waits, k).mean())
    margin = max(1000.0, 0.05 * float(np.mean([r["step_us"] for r in rows])))
    if others - waits[k] < margin:
        return None
    rank = rows[k]
    idle_others = float(np.mean([r["host_idle_us"] for i, r in enumerate(rows) if i != k]))
    text = (f"Rank {rank['rank']} is the straggler: the other ranks wait {others / 1000:.2f} ms per step (in "
            f"collectives and host synchronisation) against {waits[k] / 1000:.2f} ms on rank {rank['rank']}.")
    extra_idle = rank["host_idle_us"] - idle_others
    if extra_idle > 500:
        text += (f" Rank {rank['rank']}'s host has {extra_idle / 1000:.2f} ms more time per step with no recorded "
                 "activity (sleep, I/O or unprofiled work) than the others.")
    stalled = float(np.mean([r["stalled_us"] for i, r in enumerate(rows) if i != k]))
    return {"rank": rank["rank"], "worker": rank["worker"], "others_wait_us": others, "own_wait_us": float(waits[k]),
            "others_stalled_us": stalled, "text": text}
