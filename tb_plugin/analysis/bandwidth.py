"""Memory bandwidth over time by direction (H2D, D2H, D2D, P2P, memset): HTA's memory bandwidth counters.

Each memcpy or memset moves its ``bytes`` evenly over its duration; the bandwidth at a moment is the sum of the
rates of the copies running then, per direction and device. Reported in GB/s (10^9 bytes per second, = 10^3
bytes per µs). Copies without a byte count (very old traces) are left out of the rates and counted apart.
Summaries are over the step window: bytes moved, busy time, mean bandwidth while copying, peak.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..model.arrays import isin_ints
from ..model.derived import memoized
from ..model.kinds import Kind
from ..model.series import Levels, integral, levels_of
from ..model.tables import TraceModel
from .launches import device_work, step_window

DIRECTIONS = ("H2D", "D2H", "D2D", "P2P", "Memset", "Other")
_SPELLINGS = (("HtoD", "H2D"), ("DtoH", "D2H"), ("DtoD", "D2D"), ("PtoP", "P2P"), ("HtoH", "Other"))


def direction_of(name: str, is_memset: bool) -> str:
    """The direction of one copy from its name (``Memcpy HtoD (Pageable -> Device)``)."""
    if is_memset:
        return "Memset"
    return next((d for spelling, d in _SPELLINGS if spelling in name), "Other")


@memoized
def copy_rates(model: TraceModel) -> dict[tuple[int, str], tuple[np.ndarray, Levels]]:
    """Per (device, direction): the positions in ``device_work`` of its copies and the GB/s step function."""
    work = device_work(model)
    nbytes = model["device_events"]["nbytes"].astype(np.float64)
    copies = np.flatnonzero(isin_ints(work.kind, (Kind.MEMCPY, Kind.MEMSET)) & np.isfinite(work.start))
    names = {int(c): model.strings[int(c)] for c in np.unique(work.name[copies]).tolist()}
    direction = np.array([direction_of(names[int(c)], k == Kind.MEMSET)
                          for c, k in zip(work.name[copies].tolist(), work.kind[copies].tolist())], dtype=object)
    out: dict[tuple[int, str], tuple[np.ndarray, Levels]] = {}
    for device in np.unique(work.device[copies]).tolist():
        for d in DIRECTIONS:
            on = copies[(work.device[copies] == device) & (direction == d)] if len(copies) else copies
            if len(on) == 0:
                continue
            dur = work.end[on] - work.start[on]
            ok = (nbytes[on] >= 0) & (dur > 0)
            rate = np.where(ok, nbytes[on] / np.where(dur > 0, dur, 1.0) / 1e3, 0.0)  # GB/s
            out[(int(device), d)] = (on, levels_of(np.concatenate([work.start[on], work.end[on]]),
                                                   np.concatenate([rate, -rate])))
    return out


@memoized
def _summaries(model: TraceModel) -> list[dict[str, Any]]:
    """Per (device, direction) of ``copy_rates``: what the window holds, whatever the number of points."""
    work = device_work(model)
    nbytes = model["device_events"]["nbytes"]
    lo, hi = step_window(model)
    out = []
    for (device, direction), (on, levels) in copy_rates(model).items():
        inside = on[(work.start[on] < hi) & (work.end[on] > lo)]
        known = inside[nbytes[inside] >= 0]
        busy = float((np.minimum(work.end[inside], hi) - np.maximum(work.start[inside], lo)).sum())
        moved = float(np.diff(integral(levels, np.array([lo, hi])))[0] * 1e3)  # bytes inside the window
        in_window = (levels[1] > lo) & (levels[0] < hi)
        out.append({
            "device": device if device >= 0 else None, "direction": direction,
            "count": len(inside), "without_bytes": len(inside) - len(known),
            "bytes": moved, "busy_us": busy,
            "mean_gbps": moved / busy / 1e3 if busy > 0 else None,
            "peak_gbps": float(levels[2][in_window].max()) if in_window.any() else 0.0,
        })
    return out


def memory_bandwidth(model: TraceModel, max_points: int = 500) -> dict[str, Any]:
    """Per device and direction: summary and mean GB/s per bucket over the step window; empty without copies.

    Not memoised per ``max_points`` (a request's choice): the rates and summaries are, the series is cut per
    call in one pass over each step function."""
    lo, hi = step_window(model)
    edges = np.linspace(lo, hi, max(max_points, 1) + 1)
    width = float(edges[1] - edges[0])
    out = []
    for (_, levels), summary in zip(copy_rates(model).values(), _summaries(model)):
        per_bucket = np.diff(integral(levels, edges)) / width if width > 0 else np.zeros(len(edges) - 1)
        out.append({**summary, "series": {"t_us": edges[:-1].tolist(), "gbps": np.round(per_bucket, 6).tolist()}})
    return {"window": {"start_us": lo, "end_us": hi}, "bucket_us": width, "rows": out}
