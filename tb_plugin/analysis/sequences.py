"""Frequent kernel sequences: the repeated runs of ``length`` consecutive kernels on a stream that cost the most.

A sequence is an n-gram of kernel names in start order on one (device, stream), counted where it occurs at least
twice in the step window. Its total time is the GPU time of the distinct kernels in its occurrences (overlapping
occurrences, as ``A A`` in ``A A A``, count each kernel once) and ``span_us`` the mean wall time from the first
kernel's start to the last one's end. Long, frequent sequences of short kernels are fusion candidates: fused, they
save the launches and the gaps between the kernels (``gap_us``, the span minus the kernels' own time).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..model.arrays import group_rows
from ..model.derived import memoized
from ..model.kinds import Kind
from ..model.tables import TraceModel
from .launches import DeviceWork, device_work, step_window

MAX_OCCURRENCES = 20  # occurrences listed per sequence (the links); ``count`` has them all


def _ngrams(work: DeviceWork, on: np.ndarray, length: int) -> tuple[np.ndarray, np.ndarray]:
    """Start positions (into ``on``) and the name codes of every n-gram of one stream, as rows."""
    if len(on) < length:
        return np.empty(0, np.int64), np.empty((0, length), np.int64)
    names = work.name[on].astype(np.int64)
    pos = np.arange(len(on) - length + 1)
    return pos, np.stack([names[pos + k] for k in range(length)], axis=1)


def kernel_sequences(model: TraceModel, length: int = 3, top: int = 20) -> dict[str, Any]:
    """The ``top`` sequences of ``length`` kernels by total GPU time; plain data, empty without kernels.

    Memoised per ``length`` only (at most 15 values; every repeated sequence, in order), cut to ``top`` per call.
    """
    lo, hi = step_window(model)
    return {"window": {"start_us": lo, "end_us": hi}, "length": length,
            "sequences": [found.row(model) for found in _sequences(model, length)[:top]]}


@dataclass(frozen=True)
class _Found:
    """One repeated sequence of one stream, as numbers; :meth:`row` is its answer."""

    device: int
    stream: int
    kernels: tuple[int, ...]  # name codes
    count: int
    total_us: float
    span_us: float
    gap_us: float
    ids: np.ndarray  # the first MAX_OCCURRENCES occurrences: event row, start, end
    starts: np.ndarray
    ends: np.ndarray

    def row(self, model: TraceModel) -> dict[str, Any]:
        return {"device": self.device if self.device >= 0 else None, "stream": self.stream,
                "kernels": [model.strings[c] for c in self.kernels], "count": self.count,
                "total_us": self.total_us, "span_us": self.span_us, "gap_us": self.gap_us,
                "occurrences": [{"id": i, "start_us": s, "end_us": e} for i, s, e in
                                zip(self.ids.tolist(), self.starts.tolist(), self.ends.tolist())]}


@memoized
def _sequences(model: TraceModel, length: int) -> list[_Found]:
    """Every sequence of ``length`` kernels repeated on a stream, most total time first (ties: in stream order)."""
    work = device_work(model)
    lo, hi = step_window(model)
    found: list[_Found] = []
    kernel = (work.kind == Kind.KERNEL) & (work.start >= lo) & (work.start < hi)
    for device, stream in work.streams():
        on = work.on_stream(device, stream)
        found.extend(_of_stream(work, on[kernel[on]], length, device, stream))
    found.sort(key=lambda r: -r.total_us)
    return found


def _of_stream(work: DeviceWork, on: np.ndarray, length: int, device: int, stream: int) -> list[_Found]:
    pos, grams = _ngrams(work, on, length)
    if len(pos) == 0:
        return []
    # np.unique(axis=0)'s rows, inverse and counts by packed integer keys (a sort of rows took 0.7 of the 2 GB
    # trace's 0.9 s here)
    first, group = group_rows([grams[:, k] for k in range(length)])
    keys, count = grams[first], np.bincount(group, minlength=len(first))
    repeated = np.flatnonzero(count >= 2)
    dur = work.end[on] - work.start[on]
    # distinct kernels covered by each repeated sequence's occurrences, as sorted (sequence, kernel) pairs
    members = np.concatenate([pos + k for k in range(length)])
    owner = np.tile(group, length)
    distinct = group_rows([owner, members])[0]
    total = np.bincount(owner[distinct], weights=dur[members[distinct]], minlength=len(keys))
    span = work.end[on][pos + length - 1] - work.start[on][pos]
    span_sum = np.bincount(group, weights=span, minlength=len(keys))
    own = np.bincount(group, weights=sum(dur[pos + k] for k in range(length)), minlength=len(keys))
    out = []
    for g in repeated[np.argsort(-total[repeated], kind="stable")].tolist():
        where = pos[group == g][:MAX_OCCURRENCES]
        out.append(_Found(device, stream, tuple(int(c) for c in keys[g].tolist()), int(count[g]), float(total[g]),
                          float(span_sum[g] / count[g]), float((span_sum[g] - own[g]) / count[g]),
                          work.row[on][where], work.start[on][where], work.end[on][where + length - 1]))
    return out
