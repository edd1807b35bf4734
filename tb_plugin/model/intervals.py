"""Interval algebra on numpy arrays: unions, intersections and differences of [start, end) sets.

Step breakdowns, GPU utilization and overlap are all "how long is A ∩ B − C" questions; answering them on
merged, sorted, disjoint interval arrays keeps them exact (categories add up to the step) and vectorised.
"""

from __future__ import annotations

import numpy as np

Intervals = tuple[np.ndarray, np.ndarray]  # (starts, ends), float64, sorted, disjoint, non-empty pieces

EMPTY: Intervals = (np.empty(0), np.empty(0))


def union(starts: np.ndarray, ends: np.ndarray) -> Intervals:
    """Merge possibly overlapping intervals into sorted disjoint ones (zero-length pieces vanish)."""
    starts = np.asarray(starts, dtype=np.float64)
    ends = np.asarray(ends, dtype=np.float64)
    keep = np.isfinite(starts) & np.isfinite(ends) & (ends > starts)
    if not keep.any():
        return EMPTY
    starts, ends = starts[keep], ends[keep]
    order = np.argsort(starts, kind="stable")
    starts, ends = starts[order], ends[order]
    running_end = np.maximum.accumulate(ends)
    # A new piece starts where the start lies beyond every earlier end.
    new = np.empty(len(starts), dtype=bool)
    new[0] = True
    new[1:] = starts[1:] > running_end[:-1]
    heads = np.flatnonzero(new)
    # a piece ends at its last interval's running end (the largest of its ends: the running end never falls)
    return starts[heads], running_end[np.append(heads[1:] - 1, len(starts) - 1)]


def _coverage(a: Intervals, b: Intervals) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Elementary segments between all endpoints, with whether each is covered by a and by b."""
    points = np.concatenate([a[0], a[1], b[0], b[1]])
    da = np.concatenate([np.ones(len(a[0])), -np.ones(len(a[1])), np.zeros(len(b[0]) + len(b[1]))])
    db = np.concatenate([np.zeros(len(a[0]) + len(a[1])), np.ones(len(b[0])), -np.ones(len(b[1]))])
    order = np.argsort(points, kind="stable")
    points, da, db = points[order], da[order], db[order]
    ca, cb = np.cumsum(da)[:-1] > 0.5, np.cumsum(db)[:-1] > 0.5
    return points[:-1], points[1:], ca, cb


def _select(lo: np.ndarray, hi: np.ndarray, mask: np.ndarray) -> Intervals:
    mask = mask & (hi > lo)
    return union(lo[mask], hi[mask])


def intersect(a: Intervals, b: Intervals) -> Intervals:
    if len(a[0]) == 0 or len(b[0]) == 0:
        return EMPTY
    lo, hi, ca, cb = _coverage(a, b)
    return _select(lo, hi, ca & cb)


def subtract(a: Intervals, b: Intervals) -> Intervals:
    if len(a[0]) == 0 or len(b[0]) == 0:
        return a
    lo, hi, ca, cb = _coverage(a, b)
    return _select(lo, hi, ca & ~cb)


def total(a: Intervals) -> float:
    return float((a[1] - a[0]).sum())


def length_within(a: Intervals, lo: float, hi: float) -> float:
    """Length of ``a`` inside [lo, hi)."""
    if len(a[0]) == 0 or hi <= lo:
        return 0.0
    return float((np.minimum(a[1], hi) - np.maximum(a[0], lo)).clip(min=0.0).sum())


def covered_before(a: Intervals) -> np.ndarray:
    """Length of ``a`` before each of its pieces (one more entry: the whole): what :func:`lengths_within` reads; a
    caller that asks the same intervals on many grids (the Trace view's counters, once per window) keeps it."""
    starts, ends = a
    return np.concatenate([[0.0], np.cumsum(ends - starts)])


def covered_until(a: Intervals, t: np.ndarray, prefix: np.ndarray | None = None) -> np.ndarray:
    """Length of ``a`` inside (-inf, t) for each t: full pieces ending before t plus the part of the piece
    containing t (``prefix``: its :func:`covered_before`, else computed here)."""
    starts, ends = a
    if len(starts) == 0:
        return np.zeros(len(t))
    before = covered_before(a) if prefix is None else prefix
    t = np.asarray(t, dtype=np.float64)
    k = np.searchsorted(ends, t, side="right")
    partial = np.where(k < len(starts), np.clip(t - starts[np.minimum(k, len(starts) - 1)], 0.0, None), 0.0)
    return np.asarray(before[k] + partial)


def lengths_within(a: Intervals, los: np.ndarray, his: np.ndarray, prefix: np.ndarray | None = None) -> np.ndarray:
    """Length of ``a`` inside each [los[i], his[i]): per-window sums via prefix sums (``prefix``: its
    :func:`covered_before`, else computed here), not a loop."""
    if len(a[0]) == 0:
        return np.zeros(len(los))
    before = covered_before(a) if prefix is None else prefix
    inside: np.ndarray = covered_until(a, his, before) - covered_until(a, los, before)
    return inside.clip(min=0.0)
