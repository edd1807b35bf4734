"""The host's own work runs slower after a host phase that streams far more memory than its caches hold, or after
the host thread has been blocked for milliseconds; a fix that removes the phase gives that speed back.

Two after-effects, each measured apart from any trace (other models, other shapes) on a lent H200 host under the
profiler with the calibration corpus's settings:

- **CPU tensor creation** (``torch.randn`` over 32 MB, parallel on the OpenMP threads) leaves the caches cold and
  the OpenMP threads spinning: the same small training step ran 1.23× and 1.35× slower right after it
  (``samples/scripts/host_constants.py``, ``samples/host_constants/h200.json``); :data:`SLOWER` is their mean, applied
  to the rest of the step's host work (its waits aside) when the phase moves at least :data:`COLD_BYTES` a step.
- **A blocking wait** (a pageable copy: the thread waits on the staging DMA): the work right after it runs slower
  for a few milliseconds, by an amount that grows with how long the thread was blocked and not with the step's
  length (:data:`WAKE_UP`: microseconds lost after a wait of each length). Streaming memory while busy does not do
  it: after a 113 MB host memcpy the step ran at its warm speed (0.95-1.07×), after a 20 ms ``time.sleep`` as slowly
  as after the 113 MB pageable copy (``samples/scripts/after_phase_probe.py``, ``samples/host_constants/
  h200_after_wait.json``: two independent models, three runs; the medians below). Removing the wait gives back
  :func:`wake_up`'s time, spread over the host work of the :data:`WAKE_WINDOW_US` after the wait.
"""

from __future__ import annotations

import numpy as np

from ...model import intervals as iv
from ...model.tables import TraceModel
from ..steps import find_steps
from ..whatif.graph import graph

SLOWER = {"cpu_creation": 1.29}  # host work after the phase, × (module doc)
COLD_BYTES = 16 << 20  # a phase moving less than this per step leaves the caches warm enough
SLICE_US = 100.0  # the recovered time is spread over the host's work in slices this long
# (blocked µs, µs the work after it loses): medians of after_phase_probe.py (module doc); flat beyond the last point
WAKE_UP = ((1000.0, 0.0), (2000.0, 112.0), (5000.0, 117.0), (10000.0, 537.0), (20000.0, 1126.0), (50000.0, 1254.0))
WAKE_WINDOW_US = 4000.0  # the slower work lies in the first few ms after the wait (the probe's first two segments)


def recovered(model: TraceModel, phase_rows: np.ndarray, nbytes_per_step: float, kind: str) -> iv.Intervals:
    """Host time that vanishes once the phases ``phase_rows`` (event rows) are gone: per step, of the host work from
    its first phase's end to the step's host end (the host's waits aside), the share ``1 − 1/SLOWER[kind]``, the
    tail of every :data:`SLICE_US` slice (so the launches in it move up in proportion)."""
    steps = find_steps(model)
    if nbytes_per_step < COLD_BYTES or not len(phase_rows) or not steps.count:
        return iv.EMPTY
    ev = model["events"]
    ends = (ev["ts"][phase_rows] + np.nan_to_num(ev["dur"][phase_rows], nan=0.0)).astype(np.float64)
    k = np.searchsorted(steps.host_start, ends, side="right") - 1
    inside = (k >= 0) & (ends <= np.take(steps.host_end, np.maximum(k, 0)))
    first = np.full(steps.count, np.inf)
    np.minimum.at(first, k[inside], ends[inside])
    has = np.isfinite(first)
    lo, hi = _busy(model, (first[has], steps.host_end[has].astype(np.float64)))
    return _tails(lo, hi, np.full(len(lo), 1.0 - 1.0 / SLOWER[kind]))


def wake_up(model: TraceModel, rows: np.ndarray) -> iv.Intervals:
    """Host time that vanishes once the calls ``rows`` (event rows, each blocked for its whole length) stop
    blocking: after each, the :data:`WAKE_UP` time of its length, taken evenly from the host work (its waits aside)
    of the :data:`WAKE_WINDOW_US` after it, inside its step; never more than half of that work."""
    steps = find_steps(model)
    if not len(rows) or not steps.count:
        return iv.EMPTY
    ev = model["events"]
    start = ev["ts"][rows].astype(np.float64)
    end = start + np.nan_to_num(ev["dur"][rows], nan=0.0)
    table = np.asarray(WAKE_UP, dtype=np.float64)
    lost = np.interp(end - start, table[:, 0], table[:, 1], left=0.0)
    k = np.searchsorted(steps.host_start, end, side="right") - 1
    inside = (k >= 0) & (end < np.take(steps.host_end, np.maximum(k, 0))) & (lost > 0)
    if not inside.any():
        return iv.EMPTY
    order = np.argsort(end[inside], kind="stable")
    opens, lost = end[inside][order], lost[inside][order]
    closes = np.minimum(opens + WAKE_WINDOW_US, steps.host_end[k[inside][order]].astype(np.float64))
    lo, hi = _busy(model, (opens, closes))
    owner = np.searchsorted(opens, lo, side="right") - 1  # the wait whose window a piece of work starts in
    work = np.bincount(owner, weights=hi - lo, minlength=len(opens))
    share = np.minimum(lost / np.where(work > 0, work, np.inf), 0.5)
    return _tails(lo, hi, share[owner])


def _busy(model: TraceModel, windows: iv.Intervals) -> iv.Intervals:
    """The host time of ``windows`` (start, end arrays) less the host's waits for the device."""
    w = graph(model).waits
    return iv.subtract(iv.union(*windows), iv.union(w.start, w.start + w.wait))


def _tails(lo: np.ndarray, hi: np.ndarray, share: np.ndarray) -> iv.Intervals:
    """The last ``share[i]`` of every ``SLICE_US`` slice of each piece [lo[i], hi[i])."""
    count = np.ceil((hi - lo) / SLICE_US).astype(np.int64).clip(min=0)
    if not count.sum():
        return iv.EMPTY
    piece = np.repeat(np.arange(len(lo)), count)
    offset = np.arange(count.sum()) - np.repeat(np.cumsum(count) - count, count)
    start = lo[piece] + offset * SLICE_US
    end = np.minimum(start + SLICE_US, hi[piece])
    return iv.union(end - (end - start) * share[piece], end)
