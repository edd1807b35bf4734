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
from ..model.tables import TraceModel
from .counters import counters
from .flows import flows
from .index import TimelineIndex, Track, timeline_index
from .pyramid import LanePyramid, bucket_of, most_common, pyramid_of

# A lane window holding more events than this many per pixel is answered from the lane's bucket summary: its
# pyramid reads 1 to 4 buckets a pixel, so from 2 events a pixel on that is the cheaper way.
SUMMARY_FACTOR = 2


class _Names:
    """Per-answer string table: events refer to names by index, so repeated names cost a few bytes."""

    def __init__(self, model: TraceModel) -> None:
        self.model = model
        self.codes: dict[int, int] = {}

    def index(self, codes: np.ndarray) -> np.ndarray:
        uniq, inverse = np.unique(codes, return_inverse=True)
        local = np.fromiter((self.codes.setdefault(int(c), len(self.codes)) for c in uniq.tolist()),
                            dtype=np.int64, count=len(uniq))
        return local[inverse.reshape(-1)]

    def table(self) -> list[str]:
        out = [""] * len(self.codes)
        for code, i in self.codes.items():
            out[i] = self.model.strings[code] if code >= 0 else ""
        return out


def _lane_window(ix: TimelineIndex, lane: int, t0: float, t1: float) -> tuple[int, int]:
    lo, hi = int(ix.lane_offsets[lane]), int(ix.lane_offsets[lane + 1])
    first = lo + int(np.searchsorted(ix.max_end[lo:hi], t0, side="right"))
    last = lo + int(np.searchsorted(ix.start[lo:hi], t1, side="left"))
    return first, max(first, last)


def _boxes(start: np.ndarray, dur: np.ndarray, name: np.ndarray, t0: float, px: float, names: _Names,
           hit: np.ndarray | None = None, lane: np.ndarray | None = None) -> tuple[dict[str, list[Any]], np.ndarray]:
    """Merge sub-pixel events into boxes: one per run of adjacent occupied pixels. With ``hit`` (per event: in the
    highlighted category), each box also says how many of its events are (``hl``). With ``lane`` (per event,
    ascending: events of several lanes, each lane's in start order) no box spans two lanes; returns the boxes'
    columns and each box's lane.

    Each box is a contiguous run of events: every per-box figure is one ``reduceat`` over the runs, and the most
    common name one sort of (box, name) keys, for all lanes of the window at once (a wide window of a big trace
    merges hundreds of thousands of events here, and a loop over lanes paid some 40 numpy calls a lane)."""
    if len(start) == 0:
        return ({"t": [], "d": [], "count": [], "busy": [], "n": [], **({"hl": []} if hit is not None else {})},
                np.empty(0, dtype=np.int64))
    pixel = np.floor((start - t0) / px).astype(np.int64)
    pixel_end = np.floor((start + dur - t0) / px).astype(np.int64)
    if lane is not None and len(lane) and lane[-1] != lane[0]:
        # each lane's pixels shifted past the previous lane's: a running maximum never carries over a lane
        stride = int(pixel_end.max()) - int(pixel.min()) + 4
        pixel = pixel + lane * stride
        pixel_end = pixel_end + lane * stride
    # A new box starts where an event begins beyond the pixel where the previous ones ended.
    reach = np.maximum.accumulate(pixel_end)
    new = np.empty(len(start), dtype=bool)
    new[0] = True
    new[1:] = pixel[1:] > reach[:-1] + 1
    first = np.flatnonzero(new)
    b_start = start[first]
    b_end = np.maximum.reduceat(start + dur, first)
    count = np.diff(np.append(first, len(start)))
    busy = np.add.reduceat(dur, first)
    width = np.maximum(b_end - b_start, px)
    name_idx = names.index(most_common(np.repeat(np.arange(len(first), dtype=np.int64), count), name)[0])
    out: dict[str, list[Any]] = {
        "t": np.round(b_start - t0, 3).tolist(), "d": np.round(width, 3).tolist(), "count": count.tolist(),
        "busy": np.round(np.minimum(busy / width, 1.0), 3).tolist(), "n": name_idx.tolist()}
    if hit is not None:
        out["hl"] = np.add.reduceat(hit.astype(np.int64), first).tolist()
    return out, (lane[first] if lane is not None else np.zeros(len(first), dtype=np.int64))


def _split(columns: dict[str, list[Any]], owner: np.ndarray, n: int) -> list[dict[str, list[Any]]]:
    """Columns of items of ``n`` lanes (``owner``: each item's lane, ascending) as one dict of columns per lane."""
    cut = np.searchsorted(owner, np.arange(n + 1)).tolist()
    return [{key: values[cut[k]:cut[k + 1]] for key, values in columns.items()} for k in range(n)]


def _fine_lanes(ix: TimelineIndex, ranges: list[tuple[int, int]], t0: float, px: float, names: _Names,
                marked: np.ndarray | None) -> tuple[list[dict[str, list[Any]]], list[dict[str, list[Any]]], np.ndarray]:
    """The events and boxes of every lane answered event by event (each lane's index rows [lo, hi)), in one pass
    of numpy over all of them: per lane its events at least a pixel wide and its boxes of the others; and the
    event rows drawn."""
    los = np.array([lo for lo, _ in ranges], dtype=np.int64)
    sizes = np.array([hi - lo for lo, hi in ranges], dtype=np.int64)
    total = int(sizes.sum())
    pos = np.repeat(los - np.concatenate([[0], np.cumsum(sizes)[:-1]]), sizes) + np.arange(total)
    lane = np.repeat(np.arange(len(ranges), dtype=np.int64), sizes)
    start, dur, name, row = ix.start[pos], ix.dur[pos].astype(np.float64), ix.name[pos], ix.row[pos]
    big = dur >= px
    hit = marked[row] if marked is not None else None
    events: dict[str, list[Any]] = {"t": np.round(start[big] - t0, 3).tolist(), "d": np.round(dur[big], 3).tolist(),
                                    "n": names.index(name[big]).tolist(), "id": row[big].tolist()}
    if hit is not None:
        events["hl"] = hit[big].astype(np.int8).tolist()
    small = ~big
    boxes, box_lane = _boxes(start[small], dur[small], name[small], t0, px, names,
                             hit[small] if hit is not None else None, lane[small])
    return _split(events, lane[big], len(ranges)), _split(boxes, box_lane, len(ranges)), row[big]


def _runs(pixel: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start positions and lengths of runs of adjacent pixels in a sorted pixel array."""
    new = np.concatenate([[True], pixel[1:] > pixel[:-1] + 1])
    starts = np.flatnonzero(new)
    return starts, np.diff(np.append(starts, len(pixel)))


def _lane_from_summary(ix: TimelineIndex, pyramid: LanePyramid, t0: float, t1: float, px: float, width_px: int,
                       names: _Names, lane_rows: tuple[int, int], marked: np.ndarray | None = None,
                       ) -> tuple[dict[str, list[Any]], dict[str, list[Any]], np.ndarray]:
    """A coarse window of a big lane from its bucket summary: O(pixels) buckets (the coarsest level of the lane's
    :mod:`.pyramid` whose buckets are at most a pixel wide), not O(events).

    Events at least a pixel wide come from the lane's list of long events; every other event starting in the
    window's buckets is counted in the box of its bucket's pixel (boxes still account for exactly the events they
    stand for). The box's name is its buckets' most common one. With ``marked`` (a highlighted category's event
    mask) each event says whether it is marked and each box how many of its events are: that costs a pass over the
    window's events, paid only while a category is highlighted.
    """
    big = pyramid.long.at_least(px, t0, t1)
    level = pyramid.level_for(ix.bucket_us, px)
    width = ix.bucket_us * (1 << level.shift)
    b_lo = int(np.floor((t0 - ix.t_min) / width))
    b_hi = int(np.ceil((t1 - ix.t_min) / width))
    first, last = np.searchsorted(level.bucket, [b_lo, b_hi])
    bucket = level.bucket[first:last]
    count = level.count[first:last].copy()
    busy = level.busy[first:last].copy()
    top, top_count = level.top[first:last], level.top_count[first:last]
    if len(big):  # drawn one by one: take them out of their buckets
        own = bucket_of(ix, ix.start[big]) >> level.shift
        pos = np.searchsorted(bucket, own)
        inside = pos < len(bucket)
        inside[inside] &= bucket[pos[inside]] == own[inside]
        np.subtract.at(count, pos[inside], 1)
        np.subtract.at(busy, pos[inside], ix.dur[big][inside].astype(np.float64))
    keep = count > 0
    bucket, count, busy, top, top_count = bucket[keep], count[keep], busy[keep], top[keep], top_count[keep]
    pixel = np.clip(np.floor((ix.t_min + bucket * width - t0) / px), 0, width_px - 1).astype(np.int64)
    starts, lengths = _runs(pixel)
    boxes: dict[str, list[Any]] = {"t": [], "d": [], "count": [], "busy": [], "n": []}
    if len(starts):
        box = np.repeat(np.arange(len(starts)), lengths)
        b_count = np.add.reduceat(count, starts)
        b_busy = np.add.reduceat(busy, starts)
        b_first = pixel[starts]
        b_last = np.maximum.reduceat(pixel, starts)
        span = (b_last - b_first + 1) * px
        # per box, the bucket whose top name is most common: a segmented argmax (count high, position low)
        # (bucket positions < 2**20: there are at most SUMMARY_BUCKETS buckets)
        low = (1 << 20) - 1 - np.arange(len(top_count), dtype=np.int64)
        key = top_count * (1 << 20) + low
        best = top[(1 << 20) - 1 - np.maximum.reduceat(key, starts) % (1 << 20)]
        boxes = {"t": np.round(b_first * px, 3).tolist(), "d": np.round(span, 3).tolist(),
                 "count": b_count.tolist(), "busy": np.round(np.minimum(b_busy / span, 1.0), 3).tolist(),
                 "n": names.index(best).tolist()}
        if marked is not None:
            boxes["hl"] = _summary_marks(ix, lane_rows, (b_lo, b_hi, level.shift), big, bucket, box, len(starts),
                                         marked)
    events = {"t": np.round(ix.start[big] - t0, 3).tolist(), "d": np.round(ix.dur[big].astype(np.float64), 3).tolist(),
              "n": names.index(ix.name[big]).tolist(), "id": ix.row[big].tolist()}
    if marked is not None:
        events["hl"] = marked[ix.row[big]].astype(np.int8).tolist()
        boxes.setdefault("hl", [])
    return events, boxes, ix.row[big]


def _summary_marks(ix: TimelineIndex, lane_rows: tuple[int, int], buckets: tuple[int, int, int], big: np.ndarray,
                   bucket: np.ndarray, box: np.ndarray, n_boxes: int, marked: np.ndarray) -> list[int]:
    """Per box of a summarised lane: how many of its events are ``marked``, each event counted in its bucket's box
    (as the box's ``count`` is), the events drawn one by one left out. ``buckets``: the window's first and end
    bucket at the level read, and that level's shift."""
    first, last = lane_rows
    b_lo, b_hi, shift = buckets
    width = ix.bucket_us * (1 << shift)
    lo = first + int(np.searchsorted(ix.start[first:last], ix.t_min + (b_lo - 1) * width, side="left"))
    hi = first + int(np.searchsorted(ix.start[first:last], ix.t_min + (b_hi + 1) * width, side="left"))
    own = bucket_of(ix, ix.start[lo:hi]) >> shift
    pick = lo + np.flatnonzero((own >= b_lo) & (own < b_hi) & marked[ix.row[lo:hi]])
    pick = pick[~np.isin(pick, big)]
    pos = np.searchsorted(bucket, own[pick - lo])
    inside = pos < len(bucket)
    inside[inside] &= bucket[pos[inside]] == own[pick - lo][inside]
    counts: list[int] = np.bincount(box[pos[inside]], minlength=n_boxes).tolist()
    return counts


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


def host_default(track: Track, host_levels: int | None) -> int | None:
    """The lanes a host thread not named by the client opens with: ``host_levels`` when it is deeper than
    ``host_levels + 1`` (hiding one level saves nothing), else all. The Trace view asks with its first window,
    before it knows the tracks (``traceLayout.defaultLevels`` is the same rule)."""
    if host_levels is None or track.kind != "cpu" or len(track.lanes) <= host_levels + 1:
        return None
    return max(host_levels, 1)


def window(model: TraceModel, t0: float, t1: float, width_px: int, collapsed: frozenset[int] = frozenset(),
           levels: Mapping[int, int] | None = None, host_levels: int | None = None,
           category: str | None = None) -> dict[str, Any]:
    """The visible slice of the timeline; times in the answer are µs relative to ``t0`` (``t0`` is absolute).

    A track in ``collapsed`` sends its depth-0 lane only; one in ``levels`` its first ``levels[id]`` lanes (deep
    Python stacks are shown a few levels deep until the user expands them); a host thread named by neither sends
    :func:`host_default` lanes. Each track says how many lanes it sent (``shown_depths``).

    Lanes are columnar: ``events`` = {t, d, n, id} (start, duration, index into ``names``, event id) and
    ``boxes`` = {t, d, count, busy, n} (merged sub-pixel events: their span, how many, the busy share of the span,
    the most common name). With ``category`` (one of the step breakdown's categories) events also carry
    ``hl`` (1 where the event is one the Overview counts in that category) and boxes ``hl`` (how many of their events
    are); "Other" is time no event covers, so it marks none.
    """
    ix = timeline_index(model)
    marked = marked_events(model, category) if category is not None else None
    px = (t1 - t0) / max(width_px, 1)
    names = _Names(model)
    tracks_out = []
    visible_rows: list[np.ndarray] = []
    limits = lane_limits(collapsed, levels or {})
    fine: list[tuple[dict[str, Any], int, int]] = []  # lanes answered event by event: their place, lo, hi
    for track in ix.tracks:
        lanes_out: list[dict[str, Any]] = []
        limit = limits.get(track.id) or host_default(track, host_levels) or len(track.lanes)
        for lane in track.lanes:
            depth = int(ix.lane_depth[lane])
            if depth >= limit:
                continue
            lo, hi = _lane_window(ix, lane, t0, t1)
            if hi <= lo:
                continue
            coarse = px >= ix.bucket_us and hi - lo > SUMMARY_FACTOR * width_px
            pyramid = pyramid_of(model, ix, lane) if coarse else None
            if pyramid is not None:
                rows_of_lane = (int(ix.lane_offsets[lane]), int(ix.lane_offsets[lane + 1]))
                events_s, boxes_s, shown = _lane_from_summary(ix, pyramid, t0, t1, px, width_px, names, rows_of_lane,
                                                              marked)
                visible_rows.append(shown)
                lanes_out.append({"depth": depth, "events": events_s, "boxes": boxes_s})
                continue
            lanes_out.append({"depth": depth})
            fine.append((lanes_out[-1], lo, hi))
        tracks_out.append({
            "id": track.id, "kind": track.kind, "pid": ids.for_json(model.strings, track.pid),
            "tid": ids.for_json(model.strings, track.tid), "label": track.label,
            "process": track.process_label, "depths": len(track.lanes),
            "shown_depths": min(limit, len(track.lanes)), "collapsed": limit <= 1, "lanes": lanes_out,
        })
    if fine:
        lane_events, lane_boxes, shown = _fine_lanes(ix, [(lo, hi) for _, lo, hi in fine], t0, px, names, marked)
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
        "steps": [list(step) for step in zip(steps.names, np.round(steps.start - t0, 3).tolist(),
                                             np.round(steps.duration, 3).tolist())],
        "counters": counters(model, t0, t1, width_px),
    }
