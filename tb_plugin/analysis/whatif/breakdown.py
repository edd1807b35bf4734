"""The step breakdown of a replayed run: the Overview's categories (``steps.CATEGORIES``, the same events and the
same priorities) over the replayed times of the events.

Device events take their replayed start and end; host events (operators, annotations, runtime calls, DataLoader
spans) their host map's ``u`` of start and end, so dropped host time and waits that got shorter shrink with them.
The steady-state step is the interval between two completions: with two or more steps the breakdown is the mean over
the intervals ``[cₖ₋₁, cₖ)`` (so it adds up exactly to the replayed cadence), with one step ``[start, c₀)``. The
baseline is the replay without a change (the measured run), so the two bars always compare the same thing.
"""

from __future__ import annotations

import numpy as np

from ...model import intervals as iv
from ...model.arrays import isin_ints
from ...model.derived import memoized
from ...model.kinds import DEVICE_KINDS, Kind
from ...model.tables import TraceModel
from ..steps import CATEGORIES, category_events
from .graph import graph
from .replay import Replay, baseline

_HOST = (Kind.CPU_OP, Kind.USER_ANNOTATION, Kind.RUNTIME, Kind.DRIVER, Kind.PYTHON_FUNCTION, Kind.COMMUNICATION)


def windows(r: Replay) -> tuple[np.ndarray, np.ndarray]:
    """The steady-state step windows of a replay (module doc)."""
    if r.count >= 2:
        return r.completions[:-1], r.completions[1:]
    return r.starts, r.completions


def _replayed_times(model: TraceModel, r: Replay) -> tuple[np.ndarray, np.ndarray]:
    """Start and end of every event in the replayed run (NaN for events it does not place: instants, counters)."""
    ev = model["events"]
    start = np.full(model.n_events, np.nan)
    end = np.full(model.n_events, np.nan)
    host = np.flatnonzero(isin_ints(ev["kind"], _HOST) & np.isfinite(ev["ts"]))
    ts = ev["ts"][host].astype(np.float64)
    start[host] = r.host(ts)
    end[host] = r.host(ts + np.nan_to_num(ev["dur"][host], nan=0.0).clip(min=0.0))
    d = graph(model).device
    start[d.row] = r.device_start
    end[d.row] = r.device_end
    return start, end


@memoized
def baseline_breakdown(model: TraceModel) -> dict[str, float]:
    """:func:`replayed_breakdown` of the replay without a change, the same for every combination the what-if panel
    asks (memoised: half of each answer's time, 0.85 of 2.3 s on the 2 GB trace). Never modify it."""
    return replayed_breakdown(model, baseline(model))


def replayed_breakdown(model: TraceModel, r: Replay) -> dict[str, float]:
    """Mean µs per category over the replay's steady-state steps (adds up to ``r.step_us``)."""
    lo, hi = windows(r)
    if not len(lo):
        return {c: 0.0 for c in CATEGORIES}
    start, end = _replayed_times(model, r)
    slots = iv.union(lo, hi)
    per: dict[str, float] = {}
    device = isin_ints(model["events"]["kind"], DEVICE_KINDS)
    for category in CATEGORIES[:-1]:
        mask = category_events(model, category)
        if category in ("Kernel", "Memcpy", "Memset"):
            mask = mask & device
        spans = iv.union(start[mask], end[mask])
        cost = iv.intersect(spans, slots)
        slots = iv.subtract(slots, cost)
        per[category] = float(iv.lengths_within(cost, lo, hi).mean())
    total = float((hi - lo).mean())
    per["Other"] = max(total - sum(per.values()), 0.0)
    return per
