"""Queue length per GPU stream: how many launched device events have not finished yet (HTA's queue length).

An event joins its stream's queue when its launch call starts and leaves it when it finishes on the GPU (the
moment the host issued it until the GPU is done with it). A long queue means the CPU runs ahead of the GPU (good:
the GPU never starves); a queue that stays near 0 while the GPU idles means a launch-bound step. CUDA blocks the
launching thread once a stream has ``FULL_QUEUE`` pending launches: time at or above it is time the host was
blocked by the GPU. Events whose launch is not in the trace are left out (when they were issued is unknown).

Summaries are over the step window; ``series`` is the queue's maximum in each of ``max_points`` buckets (so peaks
survive), the same reduction as the Trace view's counter track.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..model.derived import memoized
from ..model.series import Levels, max_per_bucket
from ..model.tables import TraceModel
from .launches import device_work, step_window

FULL_QUEUE = 1024  # CUDA's default launch queue depth per stream


@memoized
def queue_levels(model: TraceModel) -> dict[tuple[int, int], Levels]:
    """Per (device, stream) with known launches: the queue length as a step function."""
    work = device_work(model)
    out: dict[tuple[int, int], Levels] = {}
    for device, stream in work.streams():
        on = work.on_stream(device, stream)
        on = on[(work.launch_row[on] >= 0) & np.isfinite(work.start[on]) & np.isfinite(work.launch_start[on])]
        if len(on) == 0:
            continue
        points = np.concatenate([work.launch_start[on], work.end[on]])
        delta = np.concatenate([np.ones(len(on)), -np.ones(len(on))])
        order = np.lexsort((delta, points))  # at a tie an event leaves before the next one joins
        points, delta = points[order], delta[order]
        out[(device, stream)] = (points[:-1], points[1:], np.cumsum(delta)[:-1])
    return out


def _within(levels: Levels, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
    """Each segment's length inside [lo, hi) and its level."""
    seg_start, seg_end, level = levels
    length = (np.minimum(seg_end, hi) - np.maximum(seg_start, lo)).clip(min=0.0)
    return length, level


def summarize(levels: Levels, lo: float, hi: float) -> dict[str, Any]:
    """Max, time-weighted mean, time at the max and time at a full queue, inside [lo, hi)."""
    length, level = _within(levels, lo, hi)
    inside = length > 0
    peak = int(level[inside].max()) if inside.any() else 0
    return {
        "max": peak,
        "mean": float((length * level).sum() / (hi - lo)) if hi > lo else 0.0,
        "time_at_max_us": float(length[inside & (level == peak)].sum()) if peak > 0 else 0.0,
        "time_blocked_us": float(length[level >= FULL_QUEUE].sum()),
    }


def series(levels: Levels, edges: np.ndarray) -> list[int]:
    """The queue's maximum in each bucket between ``edges``."""
    values = max_per_bucket(levels[0], levels[2], edges)
    return [int(v) for v in np.nan_to_num(values, nan=0.0).tolist()]


@memoized
def _summaries(model: TraceModel) -> list[dict[str, Any]]:
    """Each stream's summary over the step window (what every ``max_points`` shares)."""
    lo, hi = step_window(model)
    return [summarize(levels, lo, hi) for levels in queue_levels(model).values()]


def queue_length(model: TraceModel, max_points: int = 500) -> dict[str, Any]:
    """Per stream: summary and a downsampled series over the step window; ``streams`` empty without GPU work.

    Not memoised per ``max_points`` (a request's choice): the levels and summaries are, the series is cut per
    call in one pass over each stream's levels."""
    lo, hi = step_window(model)
    edges = np.linspace(lo, hi, max(max_points, 1) + 1)
    return {
        "window": {"start_us": lo, "end_us": hi},
        "bucket_us": float(edges[1] - edges[0]),
        "full_queue": FULL_QUEUE,
        "streams": [{"device": device if device >= 0 else None, "stream": stream, "summary": summary,
                     "series": {"t_us": edges[:-1].tolist(), "max": series(levels, edges)}}
                    for ((device, stream), levels), summary in zip(queue_levels(model).items(), _summaries(model))],
    }
