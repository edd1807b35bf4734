"""Launch → GPU event arrows of a Trace view window, found from the window's drawn events alone.

A window draws a few thousand events of a trace of millions. Marking them in a mask of every event and testing
every device event against it cost O(events of the trace) per window (tens of milliseconds on a 2 GB trace); here
the launches and device events are sorted by row once per model, and a window looks its drawn rows up in them
(O(drawn · log device events)). The arrows are the same, in the same order (device events' order) and cut at the
same ``MAX_FLOWS``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..model.derived import memoized
from ..model.optree import launch_rows
from ..model.tables import TraceModel
from .index import TimelineIndex, depth_of_rows

MAX_FLOWS = 4000


@dataclass(frozen=True)
class _Launches:
    """Device events and their launches, each sorted by event row so drawn rows find them by binary search."""

    launch: np.ndarray  # per device event: its launch's event row, -1 if unknown
    device_row: np.ndarray  # event rows of the device events with a known launch, ascending
    device_of_row: np.ndarray  # their device event numbers
    launch_row: np.ndarray  # the launches' event rows, ascending (a launch may start several device events)
    device_of_launch: np.ndarray  # the device event each starts


@memoized
def _launches(model: TraceModel) -> _Launches:
    launch = launch_rows(model)
    known = np.flatnonzero(launch >= 0)
    rows = model["device_events"]["row"][known]
    by_row = np.argsort(rows, kind="stable")
    by_launch = np.argsort(launch[known], kind="stable")
    return _Launches(launch=launch, device_row=rows[by_row], device_of_row=known[by_row],
                     launch_row=launch[known][by_launch], device_of_launch=known[by_launch])


def _device_events_of(links: _Launches, visible: np.ndarray) -> np.ndarray:
    """Device events (with a known launch) drawn themselves or launched by a drawn event, ascending."""
    if len(links.device_row) == 0 or len(visible) == 0:
        return np.empty(0, dtype=np.int64)
    pos = np.minimum(np.searchsorted(links.device_row, visible), len(links.device_row) - 1)
    drawn = links.device_of_row[pos[links.device_row[pos] == visible]]
    lo = np.searchsorted(links.launch_row, visible, side="left")
    hi = np.searchsorted(links.launch_row, visible, side="right")
    n = hi - lo
    # every position in [lo, hi) of each drawn launch: a launch starting several device events draws them all
    at = np.repeat(lo - np.concatenate([[0], np.cumsum(n)[:-1]]), n) + np.arange(int(n.sum()))
    launched = links.device_of_launch[at]
    return np.unique(np.concatenate([drawn, launched]).astype(np.int64))


def _track_of_rows(ix: TimelineIndex, model: TraceModel, rows: np.ndarray) -> np.ndarray:
    """The track drawing each row (-1 for none): one comparison per track, as there are few tracks."""
    ev = model["events"]
    pid, tid = ev["pid"][rows], ev["tid"][rows]
    out = np.full(len(rows), -1, dtype=np.int64)
    for track in ix.tracks:
        out[(pid == track.pid) & (tid == track.tid)] = track.id
    return out


def flows(model: TraceModel, ix: TimelineIndex, visible: np.ndarray, t0: float) -> tuple[list[list[Any]], bool]:
    """Launch → GPU event arrows where either end is drawn as an event in this window (``visible``: the drawn
    event rows), as [launch row, its track, its start, device row, its track, its start, launch depth, device
    depth] with starts relative to ``t0``; and whether more than ``MAX_FLOWS`` were cut."""
    links = _launches(model)
    pick = _device_events_of(links, visible)
    truncated = len(pick) > MAX_FLOWS
    pick = pick[:MAX_FLOWS]
    src, dst = links.launch[pick], model["device_events"]["row"][pick]
    ts = model["events"]["ts"]
    depth = depth_of_rows(model)
    columns = (src.tolist(), _track_of_rows(ix, model, src).tolist(), np.round(ts[src] - t0, 3).tolist(),
               dst.tolist(), _track_of_rows(ix, model, dst).tolist(), np.round(ts[dst] - t0, 3).tolist(),
               depth[src].tolist(), depth[dst].tolist())
    return [list(flow) for flow in zip(*columns)], truncated
