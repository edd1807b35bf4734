"""The lanes of a Trace view window, all at once: those answered event by event (:func:`fine_lanes`) and those
answered from their bucket pyramids (:func:`coarse_lanes`).

Each is one pass of numpy over every such lane of the window, not a loop of numpy calls per lane (a window of a
big trace has some 35 lanes, and some 40 calls a lane were most of a window's time); lanes stay apart (a box never
spans two), and the answer of each lane is what it would be alone.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..model.tables import TraceModel
from .index import TimelineIndex, most_common
from .pyramid import LanePyramid, bucket_of

_KEY = 1 << 32  # (lane, bucket) and (count, position) in one int64: buckets and positions are below 2**32


class Names:
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


def _boxes(start: np.ndarray, dur: np.ndarray, name: np.ndarray, t0: float, px: float, names: Names,
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


def fine_lanes(ix: TimelineIndex, ranges: list[tuple[int, int]], t0: float, px: float, names: Names,
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
    if len(pixel) == 0:  # no bucket left (every event of the window's buckets drawn one by one)
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    new = np.concatenate([[True], pixel[1:] > pixel[:-1] + 1])
    starts = np.flatnonzero(new)
    return starts, np.diff(np.append(starts, len(pixel)))


def coarse_lanes(ix: TimelineIndex, lanes: list[tuple[LanePyramid, tuple[int, int]]], t0: float, t1: float,
                 px: float, width_px: int, names: Names, marked: np.ndarray | None = None,
                 ) -> tuple[list[dict[str, list[Any]]], list[dict[str, list[Any]]], np.ndarray]:
    """Coarse windows of big lanes (each its pyramid and its index rows) from their bucket summaries: O(pixels)
    buckets a lane (the coarsest level of the lane's :mod:`.pyramid` whose buckets are at most a pixel wide), not
    O(events).

    Events at least a pixel wide come from the lane's list of long events; every other event starting in the
    window's buckets is counted in the box of its bucket's pixel (boxes still account for exactly the events they
    stand for). The box's name is its buckets' most common one. With ``marked`` (a highlighted category's event
    mask) each event says whether it is marked and each box how many of its events are: that costs a pass over the
    window's events, paid only while a category is highlighted. Per lane its events and boxes; and the event rows
    drawn.
    """
    n = len(lanes)
    chosen = [pyramid.level_for(ix.bucket_us, px) for pyramid, _ in lanes]
    shift = np.array([level.shift for level in chosen], dtype=np.int64)
    width = ix.bucket_us * (1 << shift).astype(np.float64)
    # clipped before the cast: a window far past the trace (any finite t0, t1 is valid) must not overflow int64
    b_lo = np.clip(np.floor((t0 - ix.t_min) / width), -(2.0**62), 2.0**62).astype(np.int64)
    b_hi = np.clip(np.ceil((t1 - ix.t_min) / width), -(2.0**62), 2.0**62).astype(np.int64)
    cuts = [np.searchsorted(level.bucket, [lo, hi]).tolist() for level, lo, hi in zip(chosen, b_lo, b_hi)]
    sizes = np.array([b - a for a, b in cuts], dtype=np.int64)
    lane: np.ndarray = np.repeat(np.arange(n, dtype=np.int64), sizes)

    def gather(field: str, dtype: type) -> np.ndarray:  # one column of every lane's buckets in the window
        out: np.ndarray = np.concatenate([getattr(level, field)[a:b] for level, (a, b) in zip(chosen, cuts)])
        return out.astype(dtype)

    bucket, count, busy = gather("bucket", np.int64), gather("count", np.int64), gather("busy", np.float64)
    top, top_count = gather("top", np.int32), gather("top_count", np.int64)
    bigs = [pyramid.long.at_least(px, t0, t1) for pyramid, _ in lanes]
    big = np.concatenate(bigs).astype(np.int64)
    big_lane = np.repeat(np.arange(n, dtype=np.int64), [len(b) for b in bigs])
    if len(big):  # drawn one by one: take them out of their buckets
        key = lane * _KEY + bucket
        own = big_lane * _KEY + (bucket_of(ix, ix.start[big]) >> shift[big_lane])
        pos = np.searchsorted(key, own)
        inside = pos < len(key)
        inside[inside] &= key[pos[inside]] == own[inside]
        np.subtract.at(count, pos[inside], 1)
        np.subtract.at(busy, pos[inside], ix.dur[big][inside].astype(np.float64))
    keep = count > 0
    bucket, count, busy, top, top_count, lane = (a[keep] for a in (bucket, count, busy, top, top_count, lane))
    pixel = np.clip(np.floor((ix.t_min + bucket * width[lane] - t0) / px), 0, width_px - 1).astype(np.int64)
    starts, lengths = _runs(pixel + lane * (width_px + 2))  # a lane's pixels past the previous lane's: apart
    boxes: dict[str, list[Any]] = {"t": [], "d": [], "count": [], "busy": [], "n": []}
    if len(starts):
        b_first = pixel[starts]
        span = (np.maximum.reduceat(pixel, starts) - b_first + 1) * px
        b_busy = np.add.reduceat(busy, starts)
        # per box, the bucket whose top name is most common: a segmented argmax (count high, position low)
        best = _KEY - 1 - np.maximum.reduceat(top_count * _KEY + (_KEY - 1 - np.arange(len(top))), starts) % _KEY
        boxes = {"t": np.round(b_first * px, 3).tolist(), "d": np.round(span, 3).tolist(),
                 "count": np.add.reduceat(count, starts).tolist(),
                 "busy": np.round(np.minimum(b_busy / span, 1.0), 3).tolist(), "n": names.index(top[best]).tolist()}
    box_lane = lane[starts]
    if marked is not None:
        boxes["hl"] = _lanes_marks(ix, lanes, (b_lo, b_hi, shift), bigs, bucket, lane, (starts, lengths, box_lane),
                                   marked)
    events = {"t": np.round(ix.start[big] - t0, 3).tolist(), "d": np.round(ix.dur[big].astype(np.float64), 3).tolist(),
              "n": names.index(ix.name[big]).tolist(), "id": ix.row[big].tolist()}
    if marked is not None:
        events["hl"] = marked[ix.row[big]].astype(np.int8).tolist()
    return _split(events, big_lane, n), _split(boxes, box_lane, n), ix.row[big]


def _lanes_marks(ix: TimelineIndex, lanes: list[tuple[LanePyramid, tuple[int, int]]],
                 level_window: tuple[np.ndarray, np.ndarray, np.ndarray], bigs: list[np.ndarray], bucket: np.ndarray,
                 lane: np.ndarray, runs: tuple[np.ndarray, np.ndarray, np.ndarray], marked: np.ndarray) -> list[int]:
    """:func:`_summary_marks` of every coarse lane, in the boxes' order (``level_window``: per lane the window's
    first and end bucket and the level's shift; ``bucket`` and ``lane``: the buckets read; ``runs``: the boxes'
    first buckets, bucket counts and lanes)."""
    starts, lengths, box_lane = runs
    box = np.repeat(np.arange(len(starts)), lengths)
    in_lane = np.searchsorted(lane, np.arange(len(lanes) + 1)).tolist()  # each lane's buckets
    box_cut = np.searchsorted(box_lane, np.arange(len(lanes) + 1)).tolist()  # each lane's boxes
    out: list[int] = []
    for k, (b_lo, b_hi, shift) in enumerate(zip(*(a.tolist() for a in level_window))):
        a, b = in_lane[k], in_lane[k + 1]
        out += _summary_marks(ix, lanes[k][1], (b_lo, b_hi, shift), bigs[k], bucket[a:b], box[a:b] - box_cut[k],
                              box_cut[k + 1] - box_cut[k], marked)
    return out


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


