"""What a step's host-device synchronisations cost the GPU: a what-if replay of the device streams without them.

A blocking call (``cudaStreamSynchronize``, ``cudaDeviceSynchronize``, ``cudaEventSynchronize``, a synchronous
``cudaMemcpy``; HIP alike) holds the host until the GPU has drained its queue. After it returns, the GPU has
nothing queued and idles while the host launches the next work, and the host, which could have been launching
ahead during the wait, starts from behind. Counting only the bubble right after the sync (until the next kernel)
misses the rest: with the queue empty, every later gap in which the GPU waits for a launch is part of the cost
until the host has built a lead again.

The replay (per step, per stream, vectorised): a sync's *blocked time* is the duration of the call, or of the
whole ``.item()`` around it (``aten::item`` / ``aten::_local_scalar_dense``: the copy launch, the wait and the
scalar read all go when the value stays on the GPU). Without the syncs, every launch of the step that starts
after a sync has returned happens earlier by the blocked time of the step's syncs returned before it (shift
``s``). Each device event then starts at ``max(start − s, previous event's replayed end)``: it can never start
earlier than its shifted launch allowed, nor before the stream has finished the work queued before it. With
``C`` the running sum of the stream's occupancy this is a running maximum, ``new_start = C + max≤i(start − s −
C)``, so no Python loop runs per event. The part of each idle gap that the replay closes is *charged to the syncs*
(laid at the start of the gap, right after the work before it), kept only where the whole GPU is idle, and summed
per step: the estimated saving. It is at most the step's blocked time (no event moves earlier than its shift).

The replay resets at every step and shifts launches by no more than the step's blocked time, so it misses the
gap right after a sync when the host, starting from an empty queue, needs longer than that to reach its next
launch (its per-operator overhead is exposed only because nothing is queued). Hence a second, direct rule: the
*post-sync bubble*. When a sync was entered while the GPU was busy (it waited for queued work; a sync entered on
an idle GPU waits only for its own copy and drains nothing) and returned in a GPU-idle gap, that gap is the
sync's from its start (the GPU ran dry while the host was held) to the next device work, unless the host first
turns to work that involves no device (an operator that launches nothing, a DataLoader wait: ``host_only``):
there the charge stops, since from then on the GPU waits for the host's own work, with or without the sync. The
cost charged is the union of the two, so no idle time counts twice, and the *CPU-bound* / *GPU idle gaps* and
*Launch-bound* findings leave it out.

Limits: dependencies between streams (events, a collective waiting for its peer) are not replayed; an event
whose launch is not in the trace does not move; the host work the sync's caller does besides waiting (the
reduction whose value is read, the per-sample loop around it) is not removed, so a sync dropped together with
its logging saves more.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ...model import intervals as iv
from ...model.arrays import isin_ints, take
from ...model.derived import memoized
from ...model.kinds import Kind
from ...model.lookups import tree_node_of_row
from ...model.names import is_host_sync, name_mask
from ...model.optree import host_tree
from ...model.tables import TraceModel
from ..launches import device_work
from ..steps import find_steps
from .gpu_time import gpu_idle
from .host_only import next_host_only

_BLOCKING_COPY = re.compile(r"^(?:cudaMemcpy|hipMemcpy|cuMemcpyDtoH(?:_v2)?)$")
_ITEM = ("aten::item", "aten::_local_scalar_dense")


@dataclass(frozen=True)
class SyncCost:
    rows: np.ndarray  # event rows of the blocking calls inside steps
    step: np.ndarray  # the step of each
    blocked_start: np.ndarray  # host time each holds (the call, or the whole .item() around it)
    blocked_end: np.ndarray
    blocked: np.ndarray  # per step, µs: Σ blocked time
    charged: iv.Intervals  # GPU-idle time the syncs cost: the replay's closed gaps ∪ the post-sync bubbles
    saving: np.ndarray  # per step, µs: the length of ``charged`` in each step


def blocking_calls(model: TraceModel) -> np.ndarray:
    """Rows of runtime/driver calls that hold the host until the device has drained."""
    ev = model["events"]
    blocking = name_mask(model, ev["name"], lambda s: is_host_sync(s) or _BLOCKING_COPY.match(s) is not None)
    return np.flatnonzero(blocking & isin_ints(ev["kind"], (Kind.RUNTIME, Kind.DRIVER)))


def _held(model: TraceModel, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The host time each call holds: the outermost ``.item()`` operator around it, else the call itself."""
    ev = model["events"]
    tree = host_tree(model)
    start = ev["ts"][rows].astype(np.float64)
    end = start + np.nan_to_num(ev["dur"][rows], nan=0.0).clip(min=0.0)
    item_codes = [model.code(n) for n in _ITEM]
    node = tree_node_of_row(model)[rows]
    op = take(tree.op_of, node, -1)
    for _ in range(2):  # aten::_local_scalar_dense, then the aten::item around it
        name = take(model["events"]["name"][tree.rows], op, -1)
        hit = isin_ints(name, item_codes) & (op >= 0)
        start = np.where(hit, take(tree.start, op, 0.0), start)
        end = np.where(hit, take(tree.end, op, 0.0), end)
        op = np.where(hit, take(tree.op_of, take(tree.parent, op, -1), -1), -1)
    return start, end


@memoized
def sync_cost(model: TraceModel) -> SyncCost:
    """The replay of the module doc, over every step of the trace."""
    steps = find_steps(model)
    rows = blocking_calls(model)
    b_start, b_end = _held(model, rows)
    k = np.searchsorted(steps.start, b_end, side="right") - 1
    inside = (k >= 0) & (b_end < take(steps.end, k, -np.inf))
    rows, b_start, b_end, k = rows[inside], b_start[inside], b_end[inside], k[inside]
    # nested holds (a sync inside another's .item()) count once
    keep = np.ones(len(rows), bool)
    if len(rows):
        order = np.lexsort((-b_end, b_start))
        covered = np.maximum.accumulate(b_end[order])
        keep[order[1:]] = b_end[order[1:]] > covered[:-1]  # inside (or equal to) an earlier hold
    rows, b_start, b_end, k = rows[keep], b_start[keep], b_end[keep], k[keep]
    n = steps.count
    held = b_end - b_start
    blocked = np.bincount(k, weights=held, minlength=n)[:n] if n else np.zeros(0)
    replayed = _replay(model, b_end, held, k)
    bubbles = _bubbles(model, rows, b_start, b_end)
    charged = iv.union(np.concatenate([replayed[0], bubbles[0]]), np.concatenate([replayed[1], bubbles[1]]))
    return SyncCost(rows=rows, step=k, blocked_start=b_start, blocked_end=b_end, blocked=blocked,
                    charged=charged, saving=iv.lengths_within(charged, steps.start, steps.end))


def _shifts(model: TraceModel, launch: np.ndarray, b_end: np.ndarray, held: np.ndarray,
            sync_step: np.ndarray) -> np.ndarray:
    """How much earlier each launch would happen: Σ held time of its step's syncs that returned before it
    (0 for a launch outside the steps or not in the trace)."""
    steps = find_steps(model)
    shift = np.zeros(len(launch))
    known = np.isfinite(launch)
    step = np.searchsorted(steps.start, np.where(known, launch, -np.inf), side="right") - 1
    known &= (step >= 0) & (launch < take(steps.end, step, -np.inf))
    if not len(b_end) or not known.any():
        return shift
    # syncs sorted by (step, return time) on one line: step k's times are offset by k × (the whole trace's span),
    # so one searchsorted finds, per launch, the syncs of its own step that returned before it
    lo = float(min(b_end.min(), launch[known].min()))
    width = float(max(b_end.max(), launch[known].max())) - lo + 1.0
    line = sync_step * width + (b_end - lo)
    order = np.argsort(line, kind="stable")
    line, cum = line[order], np.concatenate([[0.0], np.cumsum(held[order])])
    first = np.searchsorted(line, step[known] * width, side="left")
    upto = np.searchsorted(line, step[known] * width + (launch[known] - lo), side="right")
    shift[known] = cum[upto] - cum[first]
    return shift


def _replay(model: TraceModel, b_end: np.ndarray, held: np.ndarray, sync_step: np.ndarray) -> iv.Intervals:
    """The GPU-idle time the syncs cost: per stream, the gap parts the replay closes, where the GPU is idle."""
    work = device_work(model)
    if not work.size or not len(b_end):
        return iv.EMPTY
    shift = _shifts(model, work.launch_start, b_end, held, sync_step)
    lo: list[np.ndarray] = []
    hi: list[np.ndarray] = []
    for device, stream in work.streams():
        on = work.on_stream(device, stream)
        a, e, s = work.start[on], work.end[on], shift[on]
        occ = (np.minimum(e, np.append(a[1:], np.inf)) - a).clip(min=0.0)  # replay with s = 0 is the trace
        c = np.concatenate([[0.0], np.cumsum(occ)[:-1]])
        new = c + np.maximum.accumulate(a - s - c)
        moved = a - new
        closed = (moved - np.concatenate([[0.0], moved[:-1]])).clip(min=0.0)
        gap_start = np.concatenate([[a[0]], a[:-1] + occ[:-1]])
        closed = np.minimum(closed, a - gap_start)
        lo.append(gap_start)
        hi.append(gap_start + closed)
    starts, ends = np.concatenate(lo), np.concatenate(hi)
    keep = ends > starts
    return iv.intersect(iv.union(starts[keep], ends[keep]), gpu_idle(model))


def _bubbles(model: TraceModel, rows: np.ndarray, b_start: np.ndarray, b_end: np.ndarray) -> iv.Intervals:
    """The post-sync bubbles (module doc): for each sync entered while the GPU was busy (it waited for queued
    work; one entered on an idle GPU waits only for its own copy and drains nothing) that returned in a GPU-idle
    gap, the gap from its start to the next device work or to the host's first host-only work after the return."""
    idle_s, idle_e = gpu_idle(model)
    if not len(idle_s) or not len(rows):
        return iv.EMPTY
    i = np.searchsorted(idle_s, b_end, side="right") - 1
    gap = np.maximum(i, 0)
    j = np.searchsorted(idle_s, b_start, side="right") - 1
    idle_on_entry = (j >= 0) & (b_start < idle_e[np.maximum(j, 0)])
    drained = (i >= 0) & (b_end < idle_e[gap]) & ~idle_on_entry
    end = np.minimum(idle_e[gap], next_host_only(model, rows, b_end))
    return iv.union(idle_s[gap][drained], end[drained])
