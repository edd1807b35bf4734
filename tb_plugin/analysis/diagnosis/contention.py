"""Kernels slowed by the collectives that ran beside them, and how fast they run without them.

A collective kernel (NCCL's all-reduce, say) takes streaming multiprocessors and memory bandwidth from the compute
kernels that run beside it on the same GPU: on the calibration corpus's gradient-accumulation pair (H200, NCCL
2.28), a backward GEMM ran 201 µs beside an all-reduce and 114 µs alone, in the same trace. A fix that removes
collectives (``no_sync()``) gives those kernels their speed back, which dropping the collectives alone does not
model. The speed a kernel has alone is taken from the trace itself: the median duration of the same kernel (name,
device) where it ran beside no collective, when the trace has enough such instances; a kernel with too few stays
as measured.
"""

from __future__ import annotations

import numpy as np

from ...model import intervals as iv
from ...model.names import is_collective_kernel, name_mask
from ...model.tables import TraceModel
from ..launches import device_work

MIN_ALONE = 4  # instances of a kernel that ran beside no collective, needed to price it alone


def uncontended(model: TraceModel, dropped: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Event rows of the device work that ran beside the collectives ``dropped`` (event rows) and beside no other,
    and the factor by which each runs faster once they are gone: its duration over the median duration of the
    same kernel on the same device where it ran beside no collective (at least :data:`MIN_ALONE` of them; never
    below 1)."""
    w = device_work(model)
    coll = name_mask(model, w.name, is_collective_kernel)
    gone = coll & np.isin(w.row, dropped)
    beside_gone = np.zeros(len(w.row), dtype=bool)
    beside_kept = np.zeros(len(w.row), dtype=bool)
    for device in np.unique(w.device[coll]).tolist():
        on = w.device == device
        beside_gone |= on & _overlaps(iv.union(w.start[on & gone], w.end[on & gone]), w.start, w.end)
        kept = on & coll & ~gone
        beside_kept |= on & _overlaps(iv.union(w.start[kept], w.end[kept]), w.start, w.end)
    alone = ~coll & ~beside_gone & ~beside_kept
    slowed = np.flatnonzero(~coll & beside_gone & ~beside_kept)
    return _priced(w.name, w.device, w.end - w.start, alone, slowed, w.row)


def _overlaps(spans: iv.Intervals, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per [start, end): does it overlap one of the sorted, disjoint ``spans``?"""
    lo, hi = spans
    if not len(lo):
        return np.zeros(len(start), dtype=bool)
    k = np.searchsorted(lo, end, side="left") - 1
    out: np.ndarray = (k >= 0) & (np.take(hi, np.maximum(k, 0)) > start)
    return out


def _priced(name: np.ndarray, device: np.ndarray, dur: np.ndarray, alone: np.ndarray, slowed: np.ndarray,
            rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The slowed events whose kernel has enough lone instances, and their duration over the lone median."""
    if not len(slowed):
        return np.zeros(0, np.int64), np.zeros(0)
    key = name.astype(np.int64) * 64 + device.astype(np.int64)
    lone = np.flatnonzero(alone & (dur > 0))
    keys, inverse, counts = np.unique(key[lone], return_inverse=True, return_counts=True)
    order = np.argsort(inverse, kind="stable")
    bounds = np.concatenate([[0], np.cumsum(counts)])
    medians = np.asarray([np.median(dur[lone[order[bounds[i]:bounds[i + 1]]]]) for i in range(len(keys))])
    at = np.searchsorted(keys, key[slowed])
    found = (at < len(keys)) & (np.take(keys, np.minimum(at, max(len(keys) - 1, 0))) == key[slowed]) \
        if len(keys) else np.zeros(len(slowed), dtype=bool)
    at = np.minimum(at, max(len(keys) - 1, 0))
    enough = found & (np.take(counts, at) >= MIN_ALONE) if len(keys) else found
    keep = slowed[enough]
    factor = dur[keep] / np.take(medians, at[enough])
    faster = factor > 1.0
    return rows[keep[faster]], factor[faster]
