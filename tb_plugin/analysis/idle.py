"""Idle time per GPU stream, split into host wait, kernel wait and other (HTA's idle time breakdown, per step window).

A stream is busy while any of its device events (kernel, memcpy, memset) runs; idle is the rest of the step window
[first step start, last step end), so busy + idle = the window, on every stream. Each idle gap ends where the
stream's next event starts (or at the window's end); it is classified by that next event:

- host wait: its launch call started after the gap began: the GPU was starved because the CPU had not yet issued
  the work (a CPU-bound or launch-bound step);
- kernel wait: the work was already issued and the gap is shorter than ``kernel_wait_us`` (default 10 µs): the
  fixed cost between back-to-back kernels, which CUDA graphs remove;
- other: the work was issued long before and still did not start (waiting on another stream's event, a
  synchronisation), or there is no next event on the stream in the trace.

Differences from HTA: HTA measures only the gaps between a stream's first and last kernel, so a trace with one
kernel is 100 % busy and the starved start and end of a step are missing; it drops kernels whose launch is not in
the trace (their gaps vanish), and its kernel-wait threshold is 30 ns, below the µs resolution of most traces.
Here the window is the steps', and an event without a known launch can be kernel wait or other, never host wait.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..model import intervals as iv
from ..model.derived import memoized
from ..model.tables import TraceModel
from .launches import DeviceWork, device_work, step_window
from .steps import find_steps

KERNEL_WAIT_US = 10.0
CATEGORIES = ("host_wait", "kernel_wait", "other")


def _gaps(busy: iv.Intervals, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
    """The idle gaps of [lo, hi) around the busy pieces."""
    starts = np.concatenate([[lo], busy[1]])
    ends = np.concatenate([busy[0], [hi]])
    starts, ends = np.clip(starts, lo, hi), np.clip(ends, lo, hi)
    keep = ends > starts
    return starts[keep], ends[keep]


def _next_events(work: DeviceWork, on: np.ndarray, gap_start: np.ndarray,
                 gap_end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per gap of one stream (``on``: its events by start time): is there an event that ends it, and was that
    event's launch issued only after the gap began (host wait)?"""
    starts = work.start[on]
    nxt = np.searchsorted(starts, gap_end - 1e-9, side="left")  # the event that ends the gap
    has_next = nxt < len(on)
    launch = np.where(has_next, work.launch_start[on][np.minimum(nxt, max(len(on) - 1, 0))], np.nan) \
        if len(on) else np.full(len(gap_start), np.nan)
    return has_next, has_next & np.isfinite(launch) & (launch > gap_start)


def classify_gaps(work: DeviceWork, on: np.ndarray, gap_start: np.ndarray, gap_end: np.ndarray,
                  kernel_wait_us: float) -> np.ndarray:
    """Category index (into ``CATEGORIES``) of each gap of one stream; ``on`` are its events by start time."""
    has_next, host_wait = _next_events(work, on, gap_start, gap_end)
    return _categories(has_next, host_wait, gap_end - gap_start, kernel_wait_us)


def _categories(has_next: np.ndarray, host_wait: np.ndarray, length: np.ndarray, kernel_wait_us: float) -> np.ndarray:
    kernel_wait = has_next & ~host_wait & (length < kernel_wait_us)
    return np.where(host_wait, 0, np.where(kernel_wait, 1, 2))


@dataclass(frozen=True)
class _Stream:
    """One stream's busy time and idle gaps in the step window: all but the kernel-wait threshold's split."""

    device: int
    stream: int
    events: int
    busy: iv.Intervals
    gap_start: np.ndarray
    gap_end: np.ndarray
    has_next: np.ndarray
    host_wait: np.ndarray


@memoized
def _streams(model: TraceModel) -> list[_Stream]:
    work = device_work(model)
    lo, hi = step_window(model)
    out = []
    for device, stream in work.streams():
        on = work.on_stream(device, stream)
        window = (np.array([lo]), np.array([hi]))
        busy = iv.intersect(iv.union(work.start[on], work.end[on]), window) if hi > lo else iv.EMPTY
        gap_start, gap_end = _gaps(busy, lo, hi) if hi > lo else (np.empty(0), np.empty(0))
        out.append(_Stream(device, stream, len(on), busy, gap_start, gap_end,
                           *_next_events(work, on, gap_start, gap_end)))
    return out


def idle_time(model: TraceModel, kernel_wait_us: float = KERNEL_WAIT_US) -> dict[str, Any]:
    """Busy and idle time per (device, stream) in the step window, over the span and per step; plain data.

    ``streams`` is empty for a trace without device work (a CPU-only run). Not memoised per ``kernel_wait_us``
    (a request's choice): the gaps are, and the threshold only splits them, per call.
    """
    steps = find_steps(model)
    lo, hi = float(steps.start[0]), float(steps.end[-1])
    out = []
    for s in _streams(model):
        gap_start, gap_end = s.gap_start, s.gap_end
        category = _categories(s.has_next, s.host_wait, gap_end - gap_start, kernel_wait_us)
        parts = {name: (gap_start[category == k], gap_end[category == k]) for k, name in enumerate(CATEGORIES)}
        per_step = {name: iv.lengths_within(parts[name], steps.start, steps.end) for name in CATEGORIES}
        busy_step = iv.lengths_within(s.busy, steps.start, steps.end)
        longest = np.argsort(-(gap_end - gap_start), kind="stable")[:5]
        out.append({
            "device": s.device if s.device >= 0 else None,
            "stream": s.stream,
            "busy_us": iv.total(s.busy),
            "idle_us": float((gap_end - gap_start).sum()),
            **{f"{name}_us": float((parts[name][1] - parts[name][0]).sum()) for name in CATEGORIES},
            "events": s.events,
            "steps": [{"step": name, "busy_us": float(busy_step[i]),
                       **{f"{c}_us": float(per_step[c][i]) for c in CATEGORIES}}
                      for i, name in enumerate(steps.names)],
            "longest_gaps": [{"start_us": float(gap_start[i]), "end_us": float(gap_end[i]),
                              "category": CATEGORIES[int(category[i])]} for i in longest.tolist()],
        })
    return {"window": {"start_us": lo, "end_us": hi}, "kernel_wait_threshold_us": kernel_wait_us, "streams": out}
