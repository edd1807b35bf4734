"""The host's own work runs slower after a host phase that streams far more memory than its caches hold.

Creating a large tensor on the CPU (``torch.randn`` over 32 MB, parallel on the OpenMP threads) or copying a large
pageable tensor to the GPU leaves the host's caches cold and its OpenMP threads spinning: the operators, launches and
Python that follow run slower for a while. A fix that removes the phase gives the rest of the step its speed back,
which removing the phase's own time does not model. How much slower is measured apart from any trace
(``samples/scripts/host_constants.py``: the same small training step timed alone and right after each phase, under
the profiler with the calibration corpus's settings, twice, on a lent H200 host pinned to 16 cores;
``samples/host_constants/h200.json``): after 32 MB of CPU RNG 1.23× and 1.35×, after a 113 MB pageable copy 1.04× and
1.15×. :data:`SLOWER` is the mean of the two. Phases that move less than :data:`COLD_BYTES` a step are left alone.
"""

from __future__ import annotations

import numpy as np

from ...model import intervals as iv
from ...model.tables import TraceModel
from ..steps import find_steps
from ..whatif.graph import graph

SLOWER = {"cpu_creation": 1.29, "pageable_copy": 1.09}  # host work after the phase, × (module doc)
COLD_BYTES = 16 << 20  # a phase moving less than this per step leaves the caches warm enough
SLICE_US = 100.0  # the recovered time is spread over the host's work in slices this long


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
    windows = (first[has], steps.host_end[has].astype(np.float64))
    w = graph(model).waits
    lo, hi = iv.subtract(iv.union(*windows), iv.union(w.start, w.start + w.wait))
    return _tails(lo, hi, 1.0 - 1.0 / SLOWER[kind])


def _tails(lo: np.ndarray, hi: np.ndarray, share: float) -> iv.Intervals:
    """The last ``share`` of every ``SLICE_US`` slice of the pieces [lo, hi)."""
    count = np.ceil((hi - lo) / SLICE_US).astype(np.int64).clip(min=0)
    if not count.sum():
        return iv.EMPTY
    piece = np.repeat(np.arange(len(lo)), count)
    offset = np.arange(count.sum()) - np.repeat(np.cumsum(count) - count, count)
    start = lo[piece] + offset * SLICE_US
    end = np.minimum(start + SLICE_US, hi[piece])
    return iv.union(end - (end - start) * share, end)
