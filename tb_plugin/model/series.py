"""Step functions sampled on a grid: the one way to reduce a time series to pixels or buckets.

Counter tracks, the queue-length series and the bandwidth series all turn a piecewise-constant function into a
value per bucket; the maximum keeps peaks visible at any zoom, the integral gives exact per-bucket means.
"""

from __future__ import annotations

import numpy as np

from .arrays import take

Levels = tuple[np.ndarray, np.ndarray, np.ndarray]  # segment starts, ends, level (piecewise constant)


def levels_of(points: np.ndarray, delta: np.ndarray) -> Levels:
    """The piecewise-constant sum of ``delta`` changes at ``points`` (each +x at a start, -x at an end)."""
    order = np.argsort(points, kind="stable")
    points, delta = points[order], delta[order]
    level = np.cumsum(delta)[:-1] if len(points) else np.empty(0)
    return points[:-1], points[1:], level


def areas(levels: Levels) -> np.ndarray:
    """∫ level up to each segment's start (one more entry: the whole): what :func:`integral` reads; a caller that
    samples the same levels on many grids (the Trace view's counters, once per window) computes it once."""
    seg_start, seg_end, level = levels
    return np.concatenate([[0.0], np.cumsum(level * (seg_end - seg_start))])


def integral(levels: Levels, t: np.ndarray, area: np.ndarray | None = None) -> np.ndarray:
    """∫ level from -inf to each t, for a piecewise-constant level on sorted segments (``area``: its
    :func:`areas`, else computed here)."""
    seg_start, seg_end, level = levels
    if len(seg_start) == 0:
        return np.zeros(len(t))
    if area is None:
        area = areas(levels)
    k = np.searchsorted(seg_start, t, side="right") - 1
    at = np.maximum(k, 0)  # only the segments sampled are read: a window of a long series costs its pixels
    inside = np.clip(t - seg_start[at], 0.0, seg_end[at] - seg_start[at])
    value: np.ndarray = np.where(k >= 0, area[at] + level[at] * inside, 0.0)
    return value


def sample_positions(ts: np.ndarray, edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where the buckets between ``edges`` fall in the sorted sample times ``ts``: per bucket the last sample at or
    before its start (-1: none), and per edge the first sample at or after it (a bucket's samples are
    [left[i], left[i + 1])). One search of the edges (a tie with a sample, rare, costs a second search of those
    edges only); series sampled at the same times share it."""
    left = np.searchsorted(ts, edges, side="left")
    before = left[:-1] - 1
    tie = np.flatnonzero((left[:-1] < len(ts)) & (ts[np.minimum(left[:-1], len(ts) - 1)] == edges[:-1])) \
        if len(ts) else np.empty(0, dtype=np.int64)
    if len(tie):
        before[tie] = np.searchsorted(ts, edges[:-1][tie], side="right") - 1
    return before, left


def max_per_bucket(ts: np.ndarray, values: np.ndarray, edges: np.ndarray,
                   positions: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """Per bucket [edges[i], edges[i+1]): the largest value held at any moment in it (the step function's max);
    ``values[j]`` holds from ``ts[j]`` (sorted) until the next sample; NaN before the first sample. ``positions``:
    :func:`sample_positions` of ``ts`` and ``edges``, else computed here."""
    before, left = sample_positions(ts, edges) if positions is None else positions
    held = take(values, before, np.nan)  # the value in force at the bucket's start
    first, last = left[:-1], left[1:]
    has = last > first
    peak = np.full(len(held), np.nan)
    if has.any():
        # reduceat over each bucket's own sample range: starts are the buckets' first samples, and the end of each
        # range is the next start (buckets with samples are disjoint and in order).
        # Only the window's own samples are read: a window of a long series costs its samples, not the series.
        starts = first[has]
        maxima = np.maximum.reduceat(values[starts[0]: last[has][-1]], starts - starts[0])
        peak[has] = maxima
    result: np.ndarray = np.fmax(held, peak)
    return result
