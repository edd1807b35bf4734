"""Windowed level-of-detail queries over the timeline index.

For a window [t0, t1) drawn ``width_px`` wide, every lane returns its events at least one pixel wide as
themselves, and each run of narrower events as one summary box (count, busy fraction, most common name), so every
lane stays truthful at every zoom and the answer's size is bounded by the width, not by the trace.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..analysis.steps import category_events, find_steps
from ..model import ids
from ..model.arrays import isin_ints
from ..model.derived import memoized
from ..model.names import STEP_PREFIX
from ..model.tables import TraceModel
from .counters import counters
from .flows import flows
from .index import TimelineIndex, Track, timeline_index
from .lanes import Names, coarse_lanes, fine_lanes
from .pyramid import LanePyramid, pyramid_of

# A lane window holding more events than this many per pixel is answered from the lane's bucket summary: its
# pyramid reads 1 to 4 buckets a pixel, so from 2 events a pixel on that is the cheaper way.
SUMMARY_FACTOR = 2


def _lane_window(ix: TimelineIndex, lane: int, t0: float, t1: float) -> tuple[int, int]:
    lo, hi = int(ix.lane_offsets[lane]), int(ix.lane_offsets[lane + 1])
    first = lo + int(np.searchsorted(ix.max_end[lo:hi], t0, side="right"))
    last = lo + int(np.searchsorted(ix.start[lo:hi], t1, side="left"))
    return first, max(first, last)


def marked_events(model: TraceModel, category: str) -> np.ndarray:
    """The event mask of one step-breakdown category (``steps.category_events``); none for "Other"."""
    return category_events(model, category)


def lane_limits(collapsed: frozenset[int], levels: Mapping[int, int]) -> dict[int, int]:
    """How many lanes (depth 0 first) of each track to send: a collapsed track one, a track with ``levels`` that
    many (the fewer where both are given); tracks not named send all."""
    limits = dict.fromkeys(collapsed, 1)
    for track, n in levels.items():
        n = max(n, 1)
        limits[track] = min(n, limits.get(track, n))
    return limits


def host_default(track: Track, host_levels: int | None, depths: int | None = None) -> int | None:
    """The lanes a host thread not named by the client opens with: ``host_levels`` when it is deeper than
    ``host_levels + 1`` (hiding one level saves nothing), else all. The Trace view asks with its first window,
    before it knows the tracks (``traceLayout.defaultLevels`` is the same rule). ``depths``: the levels from the
    first one shown (all of the track's by default)."""
    n = len(track.lanes) if depths is None else depths
    if host_levels is None or track.kind != "cpu" or n <= host_levels + 1:
        return None
    return max(host_levels, 1)


@memoized
def step_depths(model: TraceModel) -> dict[int, int]:
    """Per host track: the lane depth of its outermost ``ProfilerStep#N`` (tracks without one are absent)."""
    ix = timeline_index(model)
    codes = model.codes_where(lambda s: s.startswith(STEP_PREFIX))
    pos = np.flatnonzero(isin_ints(ix.name, codes)) if len(codes) else np.empty(0, np.int64)
    lane = np.searchsorted(ix.lane_offsets, pos, side="right") - 1
    out: dict[int, int] = {}
    for track, depth in zip(ix.lane_track[lane].tolist(), ix.lane_depth[lane].tolist()):
        out[int(track)] = min(out.get(int(track), int(depth)), int(depth))
    return out


def skip_default(model: TraceModel, track: Track, host_levels: int | None) -> int:
    """The levels above the first one shown of a host thread not named by the client: on the first window
    (``host_levels`` given), the frames above the outermost ``ProfilerStep`` where it would be hidden among the
    levels not shown (``torch.multiprocessing.spawn`` jobs nest the step under ``<module>/spawn_main/_main/…``): the
    thread opens at the step level. None otherwise."""
    if host_levels is None or track.kind != "cpu":
        return 0
    depth = step_depths(model).get(track.id, 0)
    return depth if depth >= max(host_levels, 1) else 0


def window(model: TraceModel, t0: float, t1: float, width_px: int, collapsed: frozenset[int] = frozenset(),
           levels: Mapping[int, int] | None = None, host_levels: int | None = None,
           category: str | None = None, skips: Mapping[int, int] | None = None) -> dict[str, Any]:
    """The visible slice of the timeline; times in the answer are µs relative to ``t0`` (``t0`` is absolute).

    A track in ``skips`` leaves out its first ``skips[id]`` levels (a host thread not named there:
    :func:`skip_default`), and its lanes are numbered from the first one sent (``skipped`` says how many are above;
    ``depths`` counts those from there). A track in ``collapsed`` sends its first lane only; one in ``levels`` its
    first ``levels[id]`` lanes (deep Python stacks are shown a few levels deep until the user expands them); a host
    thread named by neither sends :func:`host_default` lanes. Each track says how many lanes it sent
    (``shown_depths``).

    Lanes are columnar: ``events`` = {t, d, n, id} (start, duration, index into ``names``, event id) and
    ``boxes`` = {t, d, count, busy, n} (merged sub-pixel events: their span, how many, the busy share of the span,
    the most common name). With ``category`` (one of the step breakdown's categories) events also carry
    ``hl`` (1 where the event is one the Overview counts in that category) and boxes ``hl`` (how many of their events
    are); "Other" is time no event covers, so it marks none.
    """
    ix = timeline_index(model)
    marked = marked_events(model, category) if category is not None else None
    px = (t1 - t0) / max(width_px, 1)
    names = Names(model)
    tracks_out = []
    visible_rows: list[np.ndarray] = []
    limits = lane_limits(collapsed, levels or {})
    fine: list[tuple[dict[str, Any], int, int]] = []  # lanes answered event by event: their place, lo, hi
    coarse: list[tuple[dict[str, Any], LanePyramid, tuple[int, int]]] = []  # from pyramids: place, pyramid, rows
    for track in ix.tracks:
        lanes_out: list[dict[str, Any]] = []
        skip = (skips or {}).get(track.id, None)
        skip = min(max(skip_default(model, track, host_levels) if skip is None else skip, 0), len(track.lanes) - 1)
        depths = len(track.lanes) - skip
        limit = limits.get(track.id) or host_default(track, host_levels, depths) or depths
        for lane in track.lanes:
            depth = int(ix.lane_depth[lane]) - skip
            if depth < 0 or depth >= limit:
                continue
            lo, hi = _lane_window(ix, lane, t0, t1)
            if hi <= lo:
                continue
            wide = px >= ix.bucket_us and hi - lo > SUMMARY_FACTOR * width_px
            pyramid = pyramid_of(model, ix, lane) if wide else None
            lanes_out.append({"depth": depth})
            if pyramid is not None:
                coarse.append((lanes_out[-1], pyramid, (int(ix.lane_offsets[lane]), int(ix.lane_offsets[lane + 1]))))
            else:
                fine.append((lanes_out[-1], lo, hi))
        tracks_out.append({
            "id": track.id, "kind": track.kind, "pid": ids.for_json(model.strings, track.pid),
            "tid": ids.for_json(model.strings, track.tid), "label": track.label,
            "process": track.process_label, "depths": depths, "skipped": skip,
            "shown_depths": min(limit, depths), "collapsed": limit <= 1, "lanes": lanes_out,
        })
    if coarse:
        lane_events, lane_boxes, shown = coarse_lanes(ix, [(pyramid, rows) for _, pyramid, rows in coarse], t0, t1,
                                                      px, width_px, names, marked)
        visible_rows.append(shown)
        for (out, _, _), events, boxes in zip(coarse, lane_events, lane_boxes):
            out["events"], out["boxes"] = events, boxes
    if fine:
        lane_events, lane_boxes, shown = fine_lanes(ix, [(lo, hi) for _, lo, hi in fine], t0, px, names, marked)
        visible_rows.append(shown)
        for (out, _, _), events, boxes in zip(fine, lane_events, lane_boxes):
            out["events"], out["boxes"] = events, boxes
    rows = np.concatenate(visible_rows) if visible_rows else np.empty(0, dtype=np.int32)
    arrows, truncated = flows(model, ix, rows, t0)
    steps = find_steps(model)
    return {
        "t0": t0, "t1": t1, "px_us": px,
        "bounds": [ix.t_min, ix.t_max],
        "names": names.table(),
        "tracks": tracks_out,
        "flows": arrows,
        "flows_truncated": truncated,
        # every step (there are few), so a client can offer "fit step N" from any window
        "steps": list(zip(steps.names, np.round(steps.start - t0, 3).tolist(),  # tuples: JSON arrays
                          np.round(steps.duration, 3).tolist())),
        "counters": counters(model, t0, t1, width_px),
    }
