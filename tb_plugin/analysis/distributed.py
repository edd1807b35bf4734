"""Distributed view: ranks of one job, their computation/communication overlap, data transfer versus waiting, and
collectives matched across ranks by process group and sequence.

Collective instances and communication time come from ``analysis.communication``, the definition the Overview's
Communication category uses too: a collective kernel (joined through its launch to the host operator that carries
the collective's name, sizes, dtype and process group), or, for a collective without one (Gloo, CPU-only jobs), its
host span. Instances are matched across ranks by (process group, sequence number within that group), never by list
position, so a rank with a missing or extra collective gets a note instead of a blank view.

Overlap of computation and communication is only measured on one timeline: device collectives against device
kernels. Where a rank's collectives are all host spans (host-only collectives on a GPU rank) or the rank has no
kernels (CPU-only), the overlap is n/a (``None``) with the reason, never a number mixing host and device time; host
spans beside collective kernels are left out of the overlap, and a note says so.

Transfer versus synchronisation (the old plugin's heuristic): for each matched instance, the fastest rank's
duration is the pure transfer time; on every rank the last ``min_dur`` of its instance is transfer and the rest is
waiting for the others (sync). Collective kernels launched before the profiled window (``prelaunched``) have no
counterpart on the other ranks: they count as communication and transfer time, are never matched, and are counted
apart from the calls.

Stalled time (per step): time in which a rank makes no progress of its own: no computation or transfer on the
device, and the host idle, in a synchronisation call or waiting inside a host-side collective. Exposed transfer:
transfer time not hidden by computation. Both need the rank's transfer intervals, which depend on the other ranks,
so they are computed here from the summary's merged interval sets (computation, host working time).

The job is computed from per-rank summaries (``analysis.rank_summary``), never from several full models at once:
``distributed`` summarises each model and calls ``job_distributed``; a server that only has cached summaries (a
1,024-rank job preprocessed on a cluster) calls ``job_distributed`` directly. Matching across ranks is one
vectorised pass over every rank's instances (``np.unique`` over (group, sequence) keys), so it stays well under a
second at thousands of ranks.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..model import intervals as iv
from ..model.tables import TraceModel
from .communication import Collectives, collectives, dtype_size, normalize_collective
from .python_frames import api_name, short_frame
from .rank_summary import RankSummary, rank_summary

__all__ = ["Collectives", "collectives", "distributed", "dtype_size", "job_distributed", "job_distributed_lazy",
           "normalize_collective"]


def distributed(traces: list[tuple[str, TraceModel]]) -> dict[str, Any]:
    """``traces``: (worker name, model) of one span for every worker of a run."""
    return job_distributed([rank_summary(m, w) for w, m in traces])


@dataclass(frozen=True)
class _Matched:
    """Every rank's collective instances matched by (process group, sequence), in one flat array per column."""

    offsets: np.ndarray  # rank i's instances are [offsets[i], offsets[i + 1])
    groups: list[str]  # sorted process group names
    group: np.ndarray  # per instance: index into ``groups``
    rank: np.ndarray  # per instance: index of its rank
    complete: np.ndarray  # per instance: every rank has this (group, sequence)
    min_dur: np.ndarray  # per instance: the fastest rank's duration of it (µs)
    wait: np.ndarray  # per instance: its duration beyond the fastest rank's (0 where not complete)
    prelaunched: np.ndarray  # per instance: launched before the window (never matched, not counted)
    everywhere: np.ndarray  # per instance: every rank has this (group, sequence), prelaunched or not


def _match(ranks: list[RankSummary]) -> _Matched:
    cols = [s.collectives for s in ranks]
    lens = np.array([len(c["seq"]) for c in cols], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    group_names = np.concatenate([np.asarray(c["group"], dtype=str) for c in cols]) if len(cols) else np.array([])
    groups, group = np.unique(group_names.astype(str), return_inverse=True)
    seq = np.concatenate([c["seq"] for c in cols]).astype(np.int64) if len(cols) else np.zeros(0, np.int64)
    dur = (np.concatenate([c["end"] for c in cols]) - np.concatenate([c["start"] for c in cols])
           if len(cols) else np.zeros(0))
    early = (np.concatenate([_flag(c, "prelaunched") for c in cols]) if len(cols) else np.zeros(0, dtype=bool))
    early |= ~np.isfinite(dur)  # an instance without usable times cannot be compared either
    key = group.astype(np.int64) * (int(seq.max(initial=0)) + 1) + seq
    _, inverse, present = np.unique(key, return_inverse=True, return_counts=True)
    inverse = inverse.reshape(-1)
    # a kernel launched before the window has no counterpart to match: only the others count and set min_dur
    count = np.bincount(inverse, weights=(~early).astype(np.float64), minlength=int(inverse.max(initial=-1)) + 1)
    fastest = np.full(len(count), np.inf)
    np.minimum.at(fastest, inverse[~early], dur[~early])
    complete = count[inverse] == len(ranks)
    min_dur = fastest[inverse]
    wait = np.where(complete & ~early, (dur - min_dur).clip(min=0), 0.0)
    return _Matched(offsets=offsets, groups=[str(g) for g in groups], group=group.astype(np.int64),
                    rank=np.repeat(np.arange(len(ranks)), lens), complete=complete, min_dur=min_dur, wait=wait,
                    prelaunched=early, everywhere=present[inverse] == len(ranks))


def _flag(col: dict[str, np.ndarray], name: str) -> np.ndarray:
    """A boolean collective column (all False where a summary does not carry it)."""
    values = col.get(name)
    return np.zeros(len(col["seq"]), dtype=bool) if values is None else np.asarray(values, dtype=bool)


def _ordered(summaries: list[RankSummary]) -> list[tuple[int, RankSummary]]:
    """Ranks in rank order: a rank without a number takes its position among the workers sorted by name."""
    by_worker = sorted(summaries, key=lambda s: s.worker)
    return sorted(((s.rank if s.rank is not None else i, s) for i, s in enumerate(by_worker)), key=lambda t: t[0])


def job_distributed(summaries: list[RankSummary]) -> dict[str, Any]:
    """The Distributed view of one span from its ranks' summaries."""
    return _job(summaries, tables=True)[0]


def job_distributed_lazy(summaries: list[RankSummary]) -> tuple[dict[str, Any], Callable[[int], list[dict[str, Any]]]]:
    """``job_distributed`` without the ranks' per-collective tables (``collectives`` is None in every row), and the
    function that computes the table of the rank at a position in rank order: a page needs only its own rows'
    tables, and they are half the job's time at 1,024 ranks (benchmarks/README.md)."""
    job, ordered, matched = _job(summaries, tables=False)

    def table(i: int) -> list[dict[str, Any]]:
        s = ordered[i][1]
        return _collective_table(s.collectives, _transfer(s, matched, i), (s.steps["start"], s.steps["end"]))

    return job, table


def _job(summaries: list[RankSummary], tables: bool) -> tuple[dict[str, Any], list[tuple[int, RankSummary]], _Matched]:
    ordered = _ordered(summaries)
    ranks = [s for _, s in ordered]
    notes: list[str] = []
    seen = Counter(rank for rank, _ in ordered)
    repeated = sorted(r for r, n in seen.items() if n > 1)
    if repeated:
        notes.append(f"Several workers report the same rank ({', '.join(map(str, repeated))}): copied traces, or "
                     "traces of different jobs in one run? Ranks are shown per worker.")
    matched = _match(ranks)
    notes.extend(_prelaunched_notes(ordered))
    notes.extend(_host_span_notes(ordered))
    notes.extend(_count_notes(ordered, matched))
    rows = [_row(rank, s, matched, i, tables) for i, (rank, s) in enumerate(ordered)]
    return {
        "world_size": next((s.world_size for s in ranks if s.world_size is not None), len(ranks)),
        "backend": next((s.backend for s in ranks if s.backend), None),
        "ranks": rows,
        "steps": list(ranks[0].step_names) if ranks else [],
        "communication_by_step": [r["per_step"]["communication_us"] for r in rows],
        "straggler": _straggler(rows, ranks),
        "groups": _group_stragglers(rows, matched),
        "notes": notes,
    }, ordered, matched


def _count_notes(ordered: list[tuple[int, RankSummary]], matched: _Matched) -> list[str]:
    """A note per process group whose ranks recorded different numbers of collectives."""
    counts = np.zeros((len(ordered), len(matched.groups)), dtype=np.int64)
    issued = ~matched.prelaunched
    np.add.at(counts, (matched.rank[issued], matched.group[issued]), 1)
    notes = []
    for g, name in enumerate(matched.groups):
        per = counts[:, g]
        if len(np.unique(per)) > 1:
            detail = _count_detail([r for r, _ in ordered], per.tolist())
            notes.append(f"Process group {name} has different numbers of collectives per rank ({detail}); the "
                         "unmatched ones count as transfer time on the ranks that have them.")
    return notes


NAMED_RANKS = 8  # beyond this many ranks, notes name a few ranks and count the rest (the answer must not grow)


def _count_detail(ranks: list[int], counts: list[int]) -> str:
    """"rank 0: 2, rank 1: 1" for a few ranks; for many, per count the number of ranks and the first few."""
    if len(ranks) <= NAMED_RANKS:
        return ", ".join(f"rank {r}: {k}" for r, k in zip(ranks, counts))
    by_count: dict[int, list[int]] = {}
    for r, k in zip(ranks, counts):
        by_count.setdefault(k, []).append(r)
    return "; ".join(f"{k} on {len(rs)} ranks ({_first_ranks(rs)})" for k, rs in sorted(by_count.items()))


def _first_ranks(ranks: list[int]) -> str:
    shown = ", ".join(map(str, ranks[:NAMED_RANKS]))
    return shown + (f", … {len(ranks) - NAMED_RANKS} more" if len(ranks) > NAMED_RANKS else "")


def _host_span_notes(ordered: list[tuple[int, RankSummary]]) -> list[str]:
    """One note (naming at most ``NAMED_RANKS`` ranks) for the ranks whose overlap is measured on their collective
    kernels while some of their collectives are host spans only, left out of it."""
    found = []
    for rank, s in ordered:
        on_host = _flag(s.collectives, "on_host")
        if s.overlap_note is None and on_host.any() and not on_host.all():
            found.append((rank, int(on_host.sum()), int((~on_host).sum())))
    if not found:
        return []
    host, device = sum(f[1] for f in found), sum(f[2] for f in found)
    return [f"Overlap of {'rank' if len(found) == 1 else 'ranks'} {_first_ranks([f[0] for f in found])} is measured "
            f"on {device:,} collective kernel{'s' if device != 1 else ''}; {host:,} collective "
            f"span{'s' if host != 1 else ''} without a GPU kernel (host side only, or a kernel whose launch was not "
            "recorded) count as communication but are left out of the overlap."]


def _prelaunched_notes(ordered: list[tuple[int, RankSummary]]) -> list[str]:
    """One note per rank with collective kernels launched before the profiled window; beyond ``NAMED_RANKS`` such
    ranks, one note per distinct (count, names) naming the first few ranks."""
    found = []
    for rank, s in ordered:
        early_mask = _flag(s.collectives, "prelaunched")
        if early_mask.any():
            names = ", ".join(sorted(set(np.asarray(s.collectives["name"], dtype=object)[early_mask].tolist())))
            found.append((rank, int(early_mask.sum()), names))
    if len(found) > NAMED_RANKS:
        groups: dict[tuple[int, str], list[int]] = {}
        for rank, early, names in found:
            groups.setdefault((early, names), []).append(rank)
        return [f"{len(rs)} ranks ({_first_ranks(rs)}) each have {early} collective kernel{'s' if early > 1 else ''} "
                f"({names}) that ran in the profiled window but were launched before it (warm-up, or the step before "
                "the profiler started): their time counts as communication, but not as calls, and is not matched "
                "across ranks." for (early, names), rs in groups.items()]
    return [f"Rank {rank}: {early} collective kernel{'s' if early > 1 else ''} ({names}) ran in the profiled window "
            "but {} launched before it (warm-up, or the step before the profiler started): {} time counts as "
            "communication, but not as calls, and is not matched across ranks.".format(
                "were" if early > 1 else "was", "their" if early > 1 else "its")
            for rank, early, names in found]


def _transfer(s: RankSummary, matched: _Matched, i: int) -> iv.Intervals:
    """Rank ``i``'s transfer intervals: the last ``min_dur`` of each matched instance, all of an unmatched one."""
    lo, hi = matched.offsets[i], matched.offsets[i + 1]
    start, end = s.collectives["start"], s.collectives["end"]
    shortest = end - matched.min_dur[lo:hi]
    real_start = np.where(matched.complete[lo:hi] & (shortest > start), shortest, start)
    return iv.union(real_start, end) if len(start) else iv.EMPTY


def _row(rank: int, s: RankSummary, matched: _Matched, i: int, tables: bool = True) -> dict[str, Any]:
    """One rank's row: per-step means of its summary, with transfer and sync from the matched instances
    (``tables``: with the per-collective table, else None there)."""
    col = s.collectives
    transfer = _transfer(s, matched, i)
    st = s.steps
    n = len(s.step_names)
    c_comp, c_comm, total, busy = st["computation_us"], st["communication_us"], st["step_us"], st["busy_us"]
    c_overlap = None if s.overlap_note else st["overlap_us"]
    lo_t, hi_t = st["start"], st["end"]
    c_transfer = iv.lengths_within(transfer, lo_t, hi_t)
    sync = (c_comm - c_transfer).clip(min=0)
    other = (total - busy).clip(min=0)
    compute = s.interval_set("computation")
    stalled = _stalled(s, transfer, compute)
    exposed = iv.lengths_within(iv.subtract(transfer, compute), lo_t, hi_t)
    wait = _wait(s, transfer, sync)

    def mean(values: np.ndarray) -> float:
        return float(values.mean()) if n else 0.0

    return {
        "worker": s.worker, "rank": rank, "steps": n,
        "computation_us": mean(c_comp), "communication_us": mean(c_comm),
        "overlap_us": None if c_overlap is None else mean(c_overlap),
        "overlap_note": s.overlap_note,
        "other_us": mean(other), "transfer_us": mean(c_transfer), "sync_us": mean(sync),
        "step_us": mean(total), "stalled_us": mean(stalled), "exposed_transfer_us": mean(exposed),
        "wait_us": mean(wait), "own_us": mean((total - wait).clip(min=0)),
        "host_wait_us": s.host_wait_us, "host_idle_us": s.host_idle_us,
        # the same per step (for a step selector); step i of every rank is the i-th ProfilerStep it recorded
        "per_step": {
            "computation_us": c_comp.tolist(), "communication_us": c_comm.tolist(),
            "overlap_us": None if c_overlap is None else c_overlap.tolist(),
            "other_us": other.tolist(),
            "transfer_us": c_transfer.tolist(), "sync_us": sync.tolist(), "step_us": total.tolist(),
            "stalled_us": stalled.tolist(), "exposed_transfer_us": exposed.tolist(), "wait_us": wait.tolist(),
        },
        # each step's [start, end] in this rank's own trace clock: where its Trace view opens for that step
        "step_windows_us": [[float(a), float(b)] for a, b in zip(lo_t.tolist(), hi_t.tolist())],
        "collectives": _collective_table(col, transfer, (lo_t, hi_t)) if tables else None,
        "devices": s.devices,
        "host": s.worker.rsplit("_", 1)[0] if re.search(r"_\d+$", s.worker) else s.worker,
        "process": s.process,
    }


def _wait(s: RankSummary, transfer: iv.Intervals, sync: np.ndarray) -> np.ndarray:
    """Per step: the time this rank waits for the others, each stall counted once: the union of its collectives'
    waiting part (the instance less its transfer) and its host blocked in synchronisation calls. A host that blocks
    in ``cudaStreamSynchronize`` on the collective that is waiting on the device is one stall, not two. A summary
    without the host-sync intervals (an older cache entry) falls back to the larger of the two per step."""
    st = s.steps
    col = s.collectives
    if "host_sync" not in s.intervals:
        fallback: np.ndarray = np.maximum(sync, np.full(len(sync), s.host_wait_us))
        return fallback
    waiting = iv.subtract(iv.union(col["start"], col["end"]), transfer) if len(col["start"]) else iv.EMPTY
    blocked = s.interval_set("host_sync")
    both = iv.union(np.concatenate([waiting[0], blocked[0]]), np.concatenate([waiting[1], blocked[1]]))
    return iv.lengths_within(both, st["start"], st["end"])


def _stalled(s: RankSummary, transfer: iv.Intervals, compute: iv.Intervals) -> np.ndarray:
    """Per step: time in which this rank makes no progress of its own: no computation or data transfer runs and
    the host is idle, blocked in a synchronisation call or waiting inside a host-side collective (the part of a
    host-side collective that is not transfer). Waiting for a peer costs a rank only this much: a wait that the host
    or the device spends working on something else is hidden."""
    st = s.steps
    if not len(s.step_names):
        return np.zeros(0)
    col = s.collectives
    on_host = _flag(col, "on_host")
    device_work = iv.union(np.concatenate([compute[0], transfer[0]]), np.concatenate([compute[1], transfer[1]]))
    waiting = iv.subtract(iv.union(col["start"][on_host], col["end"][on_host]), transfer)
    working = iv.subtract(s.interval_set("host_working"), waiting)
    busy = iv.union(np.concatenate([working[0], device_work[0]]), np.concatenate([working[1], device_work[1]]))
    stalled: np.ndarray = (st["step_us"] - iv.lengths_within(busy, st["start"], st["end"])).clip(min=0.0)
    return stalled


# The columns of a rank's per-collective table (``_collective_table``), also where a rank has none.
COLLECTIVE_TABLE_COLUMNS = ("name", "calls", "prelaunched", "bytes", "total_us", "avg_us", "transfer_us",
                            "bandwidth_gbps")


def _collective_table(col: dict[str, np.ndarray], transfer: iv.Intervals, steps: tuple[np.ndarray, np.ndarray]
                      ) -> list[dict[str, Any]]:
    """Per collective name, within the steps (as the rank table, so that their transfer times agree): calls issued
    in the window (kernels launched before it are counted apart, as ``prelaunched``), bytes, time, transfer."""
    out = []
    names = np.asarray(col["name"], dtype=object)
    early = _flag(col, "prelaunched")
    lo, hi = steps
    for name in sorted(set(names.tolist())):
        on = names == name
        span = iv.union(col["start"][on], col["end"][on])
        total = float(iv.lengths_within(span, lo, hi).sum()) if len(lo) else iv.total(span)
        moved = (float(iv.lengths_within(iv.intersect(span, transfer), lo, hi).sum()) if len(lo)
                 else iv.total(iv.intersect(span, transfer)))
        issued = on & ~early
        calls = int(issued.sum())
        nbytes = int(col["nbytes"][issued].sum())
        out.append({
            "name": name, "calls": calls, "prelaunched": int((on & early).sum()), "bytes": nbytes,
            "total_us": total, "avg_us": total / calls if calls else total,
            "transfer_us": moved, "bandwidth_gbps": (nbytes / moved / 1e3) if moved > 0 and nbytes else None,
        })
    return sorted(out, key=lambda r: -r["total_us"])


def _straggler(rows: list[dict[str, Any]], ranks: list[RankSummary]) -> dict[str, Any] | None:
    """The rank the others wait for: the one with the most time of its own per step (step less waiting, each
    stall counted once: ``wait_us``), where the others wait clearly more than it (over 1 ms, or a quarter of a
    step shorter than 4 ms, and 5 % of the step more). The groups' "slowest rank" is the same measure, so the two
    never disagree. Its own cause: what it does that the others do not (``_own_cause``)."""
    if len(rows) < 2:
        return None
    waits = np.array([r["wait_us"] for r in rows])
    own = np.array([r["own_us"] for r in rows])
    k = int(np.argmax(own))
    others = float(np.delete(waits, k).mean())
    step = float(np.mean([r["step_us"] for r in rows]))
    margin = max(min(1000.0, 0.25 * step), 0.05 * step)  # 1 ms, a quarter of a step shorter than 4 ms
    if others - waits[k] < margin:
        return None
    rank = rows[k]
    idle_others = float(np.mean([r["host_idle_us"] for i, r in enumerate(rows) if i != k]))
    text = (f"Rank {rank['rank']} is the straggler: the other ranks wait {others / 1000:.2f} ms per step for it (in "
            f"collectives or blocked in host synchronisation, each stall counted once) against "
            f"{waits[k] / 1000:.2f} ms on rank {rank['rank']}.")
    cause = _own_cause(ranks, k, float(rank["step_us"]))
    if cause:
        text += (f" It spends {cause['us'] / 1000:.2f} ms per step in {cause['text']}, against "
                 f"{cause['others_us'] / 1000:.2f} ms on the other ranks.")
    extra_idle = rank["host_idle_us"] - idle_others
    if extra_idle > 500:
        text += (f" Rank {rank['rank']}'s host has {extra_idle / 1000:.2f} ms more time per step with no recorded "
                 "activity (sleep, I/O or unprofiled work) than the others.")
    stalled = float(np.mean([r["stalled_us"] for i, r in enumerate(rows) if i != k]))
    return {"rank": rank["rank"], "worker": rank["worker"], "others_wait_us": others, "own_wait_us": float(waits[k]),
            "others_stalled_us": stalled, "text": text, "own_cause": cause}


OWN_CAUSE_MIN_US = 500.0  # a straggler's own work must exceed the others' by this much (and 3 % of its step)


def _own_cause(ranks: list[RankSummary], k: int, step_us: float) -> dict[str, Any] | None:
    """What rank ``k`` does that the others do not: of its own-work rows (``rank_summary.own_work``), the one whose
    self time exceeds the others' mean self time by the most (self time names the call that takes it, e.g.
    ``time.sleep``, not the ``train_step`` around it), where that is over ``OWN_CAUSE_MIN_US`` and 3 % of the
    step."""
    mine = ranks[k].work
    if not mine:
        return None
    others = [{(r["kind"], r["name"]): r.get("self_us", 0.0) for r in s.work} for i, s in enumerate(ranks) if i != k]
    best: tuple[float, float, dict[str, Any]] | None = None
    for r in mine:
        key = (r["kind"], r["name"])
        theirs = float(np.mean([o.get(key, 0.0) for o in others])) if others else 0.0
        excess = float(r.get("self_us", 0.0)) - theirs
        if best is None or excess > best[0]:
            best = (excess, theirs, r)
    if best is None or best[0] < max(OWN_CAUSE_MIN_US, 0.03 * step_us):
        return None
    excess, theirs, r = best
    name, frame = r["name"], r.get("frame")
    if r["kind"] == "python" and frame == name:  # the user's own function: its file and line
        text = short_frame(name)
    else:
        what = {"python": api_name(name), "operator": f"the operator {name}", "kernel": f"the kernel {name[:80]}"}
        text = what.get(r["kind"], name) + (f" called at {short_frame(frame)}" if frame and frame != name else "")
    return {"kind": r["kind"], "name": name, "frame": frame, "us": float(r.get("self_us", 0.0)),
            "others_us": theirs, "excess_us": excess, "text": text}


def _group_stragglers(rows: list[dict[str, Any]], matched: _Matched) -> list[dict[str, Any]]:
    """Per process group with two or more ranks: its slowest rank (the most time of its own per step: step less
    waiting, ``own_us``, the straggler's measure) and the rank its members wait for most (the one that waits least
    in the group's matched collectives, per step, while the others wait)."""
    n, g = len(rows), len(matched.groups)
    waits = np.zeros((n, g))
    members = np.zeros((n, g), dtype=bool)
    np.add.at(waits, (matched.rank, matched.group), matched.wait)
    members[matched.rank, matched.group] = True
    steps = np.array([max(1, r["steps"]) for r in rows], dtype=np.float64)
    step_us = np.array([r["step_us"] for r in rows])
    own_us = np.array([r["own_us"] for r in rows])
    waits /= steps[:, None]
    out = []
    for k, name in enumerate(matched.groups):
        idx = np.flatnonzero(members[:, k])
        if len(idx) < 2:
            continue
        w = waits[idx, k]
        least = int(idx[np.argmin(w)])
        slowest = int(idx[np.argmax(own_us[idx])])
        others = float((w.sum() - waits[least, k]) / (len(idx) - 1))
        out.append({
            "group": name, "ranks": len(idx),
            # instances every rank has by sequence (a kernel launched before the window included: it is there,
            # but is not matched for transfer time)
            "matched": int(((matched.group == k) & matched.everywhere).sum()) // n,
            "slowest": {"rank": rows[slowest]["rank"], "worker": rows[slowest]["worker"],
                        "step_us": float(step_us[slowest]), "own_us": float(own_us[slowest])},
            "most_waited_for": {"rank": rows[least]["rank"], "worker": rows[least]["worker"],
                                "own_wait_us": float(waits[least, k]), "others_wait_us": others},
        })
    return out
