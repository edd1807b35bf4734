"""Launch calls that block on a full launch queue: waits for the device that look like host work.

The driver queues about a thousand launches per device; a host that runs that far ahead of its GPU blocks in the
next launch call (``cudaLaunchKernel``, ``cudaMemcpyAsync`` …) until a queued event finishes and frees a slot. The
trace shows such a call as a long runtime call, which a replay would keep as host work: a faster GPU would not make
it shorter, so a fix that speeds the device up (``no_sync()`` on a run whose host is throttled by the queue) would
be predicted to gain nothing. On the calibration corpus's gradient-accumulation pair (H200), the planted run's host
had 1,010 launches pending at its median launch and 161 calls over 100 µs, all made with 1,047 or more pending;
its fixed twin had none.

Such a call is a wait: it returns ``lag`` after the event that ended last before its return on the stream it
launches into (the one whose end let the next queued event in and freed a slot), like a synchronisation
(``graph.Waits``). A call is taken for blocked when the launches pending
on its device at its start (launched, not started) reach :data:`FULL_SHARE` of the trace's most (at least
:data:`QUEUE_MIN`) and it took more than twice the median of its API's calls.
"""

from __future__ import annotations

import numpy as np

from ...model.tables import TraceModel
from ..launches import DeviceWork, device_work

QUEUE_MIN = 512  # a queue this deep at least before any call counts as blocked on it
FULL_SHARE = 0.95  # ... and within this share of the deepest the trace reached
SLOW = 2.0  # ... and the call took more than this many times its API's median


def blocked_launches(model: TraceModel, pos: np.ndarray, end: np.ndarray, stream: np.ndarray, n_streams: int
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(event rows, starts, returns, targets) of the launch calls blocked on a full queue; ``pos``, ``end`` and
    ``stream`` are the graph's device events (device_work position, end, stream index) in its order; targets are
    (calls × streams) graph indices, the event whose end released each call on its stream, -1 elsewhere."""
    w = device_work(model)
    ev = model["events"]
    known = np.flatnonzero(np.isfinite(w.launch_start) & (w.launch_row >= 0))
    if not len(known):
        return _none(n_streams)
    call_rows, first = np.unique(w.launch_row[known], return_index=True)
    k = known[first]  # one device event per call (a graph launch releases several)
    start, ret = w.launch_start[k], w.launch_end[k]
    blocked = _full(w, known, k) & _slow(ev["name"][call_rows], ret - start)
    k, call_rows, start, ret = k[blocked], call_rows[blocked], start[blocked], ret[blocked]
    order_of = np.empty(len(pos), dtype=np.int64)
    order_of[pos] = np.arange(len(pos))
    targets = np.full((len(k), n_streams), -1, dtype=np.int64)
    keep = np.zeros(len(k), dtype=bool)
    own = stream[order_of[k]]  # the stream the call launches into: the queue it waits on
    for s in np.unique(own).tolist():
        on = np.flatnonzero(stream == s)
        by_end = on[np.argsort(end[on], kind="stable")]
        mine = np.flatnonzero(own == s)
        at = np.searchsorted(end[by_end], ret[mine], side="right") - 1
        ok = at >= 0
        src = by_end[np.maximum(at, 0)]
        ok &= end[src] > start[mine]  # the slot freed while the call waited
        targets[mine[ok], s] = src[ok]
        keep[mine[ok]] = True
    return call_rows[keep], start[keep], ret[keep], targets[keep]


def _full(w: DeviceWork, known: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Per call (its event ``k``): were the launches pending on its device at its start near the trace's most?"""
    device, launch, begin = w.device, w.launch_start, w.start
    out = np.zeros(len(k), dtype=bool)
    for d in np.unique(device[k]).tolist():
        mine = known[device[known] == d]
        issued, started = np.sort(launch[mine]), np.sort(begin[mine])
        calls = np.flatnonzero(device[k] == d)
        t = launch[k[calls]]
        pending = np.searchsorted(issued, t, side="left") - np.searchsorted(started, t, side="left")
        deepest = np.searchsorted(issued, issued, side="left") - np.searchsorted(started, issued, side="left")
        most = int(deepest.max(initial=0))
        if most >= QUEUE_MIN:
            out[calls] = pending >= FULL_SHARE * most
    return out


def _slow(names: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """Per call: did it take more than ``SLOW`` times the median of the calls of its API?"""
    codes, inverse = np.unique(names, return_inverse=True)
    medians = np.asarray([np.median(dur[inverse == i]) for i in range(len(codes))])
    out: np.ndarray = dur > SLOW * medians[inverse]
    return out


def _none(n_streams: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    return (np.zeros(0, np.int64), np.zeros(0), np.zeros(0), np.zeros((0, n_streams), np.int64))
