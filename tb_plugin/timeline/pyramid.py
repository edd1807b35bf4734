"""Coarser levels of the timeline index's lane summaries, so a wide window reads O(pixels) buckets at any zoom.

The index summarises each big lane in ``SUMMARY_BUCKETS`` fixed-width buckets over the whole trace
(:class:`~tb_plugin.timeline.index.LaneSummary`). A whole-trace window 2000 px wide reads 16 of them per pixel, in
every big lane; on a 2 GB trace (25 such lanes) that was the largest part of the window. Level ``k`` here merges
``4**k`` buckets of the index's (``bucket >> 2k``), and a window reads the coarsest level whose buckets are at most
a pixel wide: 1 to 4 buckets a pixel. A merged bucket keeps the count and busy time of its buckets (exact) and the
most common name of the bucket with the highest such count (ties: the earliest), which is the name the window
gave a box of those buckets before.

The long events (at least a bucket wide, drawn one by one when at least a pixel wide) are kept in start order
with the running maximum of their ends, and by duration: a window reads either those at least a pixel long or
those overlapping it, whichever range is shorter, instead of testing all of them.

Lanes the index leaves unsummarised (up to ``SUMMARY_MIN_EVENTS`` events) are summarised here in the index's
buckets once they hold more than ``MID_LANE_EVENTS``, so every lane a wide window would merge event by event reads
buckets instead. Built from the index alone (nothing is added to it), per lane on its first coarse window, in
O(buckets + long events log long events) for a lane the index summarises and one sort of its events otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..model.derived import compute_once
from ..model.tables import TraceModel
from .index import LaneSummary, TimelineIndex, bucket_numbers, summarize_lane

LEVEL_SHIFT = 2  # each level's buckets are 2**LEVEL_SHIFT of the level below
# Lanes the index does not summarise are summarised here from this many events on: a window wider than the
# window's SUMMARY_FACTOR events a pixel reads them from buckets too.
MID_LANE_EVENTS = 4096


@dataclass(frozen=True)
class Level:
    """One level of a lane's pyramid: buckets of ``bucket_us * 4**level`` µs that hold events, ascending."""

    shift: int  # this level's bucket number is the index's bucket number >> shift
    bucket: np.ndarray  # int32 (level 0: the index's own arrays, not copies)
    count: np.ndarray  # int32 or int64: events starting in the bucket
    busy: np.ndarray  # float64 their summed durations
    top: np.ndarray  # int32 most common name code (of the bucket below with the highest top_count)
    top_count: np.ndarray  # int32 that bucket's count of it


@dataclass(frozen=True)
class LongEvents:
    """A lane's events at least one index bucket long (``LaneSummary.long_pos``), two ways round."""

    pos: np.ndarray  # int64 positions in the index arrays, in start order
    start: np.ndarray  # float64
    dur: np.ndarray  # float64 (the index's float32 durations, widened as the window reads them)
    reach: np.ndarray  # float64 running maximum of the ends (start order)
    longest: np.ndarray  # int64 indices into the above, longest first (stable)
    dur_desc: np.ndarray  # float64 -dur[longest], ascending (for searchsorted)

    def at_least(self, px: float, t0: float, t1: float) -> np.ndarray:
        """Positions (start order) of the events at least ``px`` long overlapping [t0, t1)."""
        many = int(np.searchsorted(self.dur_desc, -px, side="right"))  # how many are at least px long
        first = int(np.searchsorted(self.reach, t0, side="right"))
        last = int(np.searchsorted(self.start, t1, side="left"))
        if many <= last - first:
            pick = np.sort(self.longest[:many])
        else:
            pick = np.arange(first, max(first, last))
        start, dur = self.start[pick], self.dur[pick]
        keep = (dur >= px) & (start < t1) & (start + dur > t0)
        out: np.ndarray = self.pos[pick[keep]]
        return out


@dataclass(frozen=True)
class LanePyramid:
    levels: list[Level]  # level 0 is the index's summary
    long: LongEvents

    def level_for(self, bucket_us: float, px: float) -> Level:
        """The coarsest level whose buckets are at most ``px`` wide (level 0 when none is)."""
        chosen = self.levels[0]
        for level in self.levels[1:]:
            if bucket_us * (1 << level.shift) > px:
                break
            chosen = level
        return chosen


def _coarser(level: Level) -> Level:
    """The next level up: buckets merged 2**LEVEL_SHIFT at a time."""
    group = level.bucket >> LEVEL_SHIFT
    first = np.flatnonzero(np.concatenate([[True], group[1:] != group[:-1]]))
    # per group, the bucket with the highest top_count, the earliest of equals: a segmented argmax on one key
    # (top_count high, position low; positions < 2**32)
    low = (1 << 32) - 1 - np.arange(len(level.bucket), dtype=np.int64)
    best = (1 << 32) - 1 - np.maximum.reduceat(level.top_count.astype(np.int64) * (1 << 32) + low, first) % (1 << 32)
    return Level(shift=level.shift + LEVEL_SHIFT, bucket=group[first].astype(np.int32),
                 count=np.add.reduceat(level.count.astype(np.int64), first), busy=np.add.reduceat(level.busy, first),
                 top=level.top[best], top_count=level.top_count[best])


def _long_events(ix: TimelineIndex, long_pos: np.ndarray) -> LongEvents:
    pos = long_pos.astype(np.int64)
    start = ix.start[pos]
    dur = ix.dur[pos].astype(np.float64)
    longest = np.argsort(-dur, kind="stable").astype(np.int64)
    return LongEvents(pos=pos, start=start, dur=dur,
                      reach=np.maximum.accumulate(start + dur) if len(pos) else np.empty(0),
                      longest=longest, dur_desc=-dur[longest])


def bucket_of(ix: TimelineIndex, start: np.ndarray) -> np.ndarray:
    """The index's summary bucket of each start."""
    return bucket_numbers(start, ix.t_min, ix.bucket_us)


def summarize(ix: TimelineIndex, lane: int) -> LaneSummary:
    """A lane's summary in the index's buckets, for a lane the index does not summarise (fewer than
    ``SUMMARY_MIN_EVENTS`` events: a whole-trace window of it still merged tens of thousands of events). From the
    index's float32 durations: the exact ones are the loader's."""
    lo, hi = int(ix.lane_offsets[lane]), int(ix.lane_offsets[lane + 1])
    return summarize_lane(ix.start[lo:hi], ix.dur[lo:hi], ix.name[lo:hi], lo, ix.t_min, ix.bucket_us)


def lane_pyramid(ix: TimelineIndex, summary: LaneSummary) -> LanePyramid:
    """The pyramid of one summarised lane: levels up to the one with a single bucket."""
    # level 0 is the index's summary itself: a pyramid costs about a third more than the summary, not a copy
    levels = [Level(shift=0, bucket=summary.bucket, count=summary.count, busy=summary.busy, top=summary.top,
                    top_count=summary.top_count)]
    while len(levels[-1].bucket) > 1:
        levels.append(_coarser(levels[-1]))
    return LanePyramid(levels=levels, long=_long_events(ix, summary.long_pos))


def pyramid_of(model: TraceModel, ix: TimelineIndex, lane: int) -> LanePyramid | None:
    """The lane's pyramid, built on its first use and kept on the model beside the index it was built from (which
    keeps that index's identity in use); None for a lane of at most ``MID_LANE_EVENTS`` events."""
    summary = (ix.summaries or {}).get(lane)
    if summary is None and ix.lane_offsets[lane + 1] - ix.lane_offsets[lane] <= MID_LANE_EVENTS:
        return None
    key = (__name__, "pyramid", id(ix), lane)
    built: tuple[TimelineIndex, LanePyramid] = compute_once(
        model.memo, model.computing, key,
        lambda: (ix, lane_pyramid(ix, summary if summary is not None else summarize(ix, lane))))
    return built[1]


def pyramids(model: TraceModel, ix: TimelineIndex) -> dict[int, LanePyramid]:
    """Every lane's pyramid (what a window wider than its events reads), built now: the loader process stores them
    beside the index (``api/warm.py``), so the first wide window builds none (0.1 s of the 164 MB trace's first)."""
    return {lane: p for lane in range(len(ix.lane_depth)) if (p := pyramid_of(model, ix, lane)) is not None}


def seed_pyramids(model: TraceModel, ix: TimelineIndex, found: dict[int, LanePyramid]) -> None:
    """Give ``model`` the pyramids :func:`pyramids` built elsewhere for its index ``ix`` (the one its memo holds)."""
    for lane, pyramid in found.items():
        key = (__name__, "pyramid", id(ix), lane)
        if key not in model.memo:
            model.memo[key] = (ix, pyramid)
