"""The allocator's segments at any moment of a snapshot's history, their free space and its fragmentation.

The segments are listed as the snapshot ends; earlier ones are replayed from the history's segment entries
(``segment_alloc``/``segment_free`` add and drop a whole ``cudaMalloc``'d segment; ``segment_map``/``segment_unmap``
grow and shrink an expandable segment, as memory_viz replays them). What is free in a segment at a moment is what
its live allocations leave: each live allocation takes its block, the size the end's segments give it where it is
still there, else its request rounded up to the allocator's 512 bytes (torch splits a block when the rest could
serve another request; a rest it keeps is counted free here, so free space is slightly over-counted before the
end). At the very end the blocks themselves are read, so those numbers are exact.

Fragmentation at a moment is ``1 - largest free block / free bytes``: 0 when the free memory is one block, close
to 1 when it is many small ones. An out-of-memory is fragmentation's doing when the reserved segments held enough
free bytes for the request but no block of its size.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np

from ..model.snapshot import ACTIVE_STATES, A, AllocatorSnapshot, snapshot_memo
from .snapshot_history import History, device_history

MIN_BLOCK = 512
FRAGMENTATION_POINTS = 200


def round_size(size: np.ndarray) -> np.ndarray:
    """The allocator's rounding of a request (``round_size`` in CUDACachingAllocator.cpp, default settings)."""
    rounded: np.ndarray = np.maximum(MIN_BLOCK, (size + MIN_BLOCK - 1) // MIN_BLOCK * MIN_BLOCK)
    return rounded


class SegmentSet:
    """Reserved address ranges (start → (size, stream)), kept merged the way expandable segments grow."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.info: dict[int, tuple[int, int, bool]] = {}  # start -> (size, stream, expandable)

    def add(self, start: int, size: int, stream: int, expandable: bool) -> None:
        if size <= 0 or start in self.info:
            return
        if expandable:
            i = bisect.bisect_left(self.starts, start)
            if i > 0:
                prev = self.starts[i - 1]
                psize, pstream, pexp = self.info[prev]
                if pexp and prev + psize == start and pstream == stream:
                    self.info[prev] = (psize + size, stream, True)
                    self._merge_next(prev)
                    return
        bisect.insort(self.starts, start)
        self.info[start] = (size, stream, expandable)
        if expandable:
            self._merge_next(start)

    def _merge_next(self, start: int) -> None:
        size, stream, exp = self.info[start]
        nxt = start + size
        if nxt in self.info and self.info[nxt][2] and self.info[nxt][1] == stream:
            self.info[start] = (size + self.info.pop(nxt)[0], stream, exp)
            self.starts.remove(nxt)

    def remove(self, start: int, size: int) -> None:
        """Drop the range ``[start, start + size)``: a whole segment, or the part of one an unmap gives back."""
        i = bisect.bisect_right(self.starts, start) - 1
        if i < 0:
            return
        seg = self.starts[i]
        ssize, stream, exp = self.info[seg]
        if start >= seg + ssize:
            return
        del self.info[seg]
        self.starts.pop(i)
        if start > seg:
            self.add(seg, start - seg, stream, False)
            self.info[seg] = (start - seg, stream, exp)
        end, send = start + size, seg + ssize
        if end < send:
            bisect.insort(self.starts, end)
            self.info[end] = (send - end, stream, exp)

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(start, size, stream, expandable), sorted by start."""
        starts = np.array(self.starts, dtype=np.int64)
        rest = [self.info[s] for s in self.starts]
        return (starts, np.array([r[0] for r in rest], dtype=np.int64), np.array([r[1] for r in rest], dtype=np.int64),
                np.array([r[2] for r in rest], dtype=bool))


def _apply(segs: SegmentSet, action: int, addr: int, size: int, stream: int, undo: bool) -> None:
    grow = action in (A["segment_alloc"], A["segment_map"])
    expandable = action in (A["segment_map"], A["segment_unmap"])
    if grow != undo:
        segs.add(addr, size, stream, expandable)
    else:
        segs.remove(addr, size)


def _end_segments(snap: AllocatorSnapshot, device: int) -> SegmentSet:
    segs = SegmentSet()
    on = np.flatnonzero(snap.seg_device == device)
    for i in on[np.argsort(snap.seg_address[on])].tolist():
        segs.add(int(snap.seg_address[i]), int(snap.seg_total_size[i]), int(snap.seg_stream[i]),
                 bool(snap.seg_expandable[i]))
    return segs


@snapshot_memo
def _entries_of(snap: AllocatorSnapshot, device: int) -> np.ndarray:
    h = device_history(snap, device)
    kinds = (A["segment_alloc"], A["segment_free"], A["segment_map"], A["segment_unmap"])
    return np.flatnonzero(np.isin(snap.ev_action[h.rows], kinds))


def _segment_entries(snap: AllocatorSnapshot, h: History) -> np.ndarray:
    """Positions of the device's segment entries, in order."""
    found: np.ndarray = _entries_of(snap, h.device)
    return found


@snapshot_memo
def segments_before(snap: AllocatorSnapshot, device: int) -> SegmentSet:
    """The device's segments before its history's first entry (the end's, every segment entry undone)."""
    h = device_history(snap, device)
    segs = _end_segments(snap, device)
    for p in _segment_entries(snap, h)[::-1].tolist():
        r = int(h.rows[p])
        _apply(segs, int(snap.ev_action[r]), int(snap.ev_addr[r]), int(snap.ev_size[r]), int(snap.ev_stream[r]), True)
    return segs


def segments_at(snap: AllocatorSnapshot, device: int, p: int, replay: bool = False) -> SegmentSet:
    """The device's segments after position ``p`` (``-1``: before the first entry); ``replay`` replays the history
    up to the end too, instead of reading the end's segments (a test that both agree)."""
    h = device_history(snap, device)
    if p >= h.n - 1 and not replay:
        return _end_segments(snap, device)
    segs = SegmentSet()
    base = segments_before(snap, device)
    segs.starts, segs.info = list(base.starts), dict(base.info)
    for q in _segment_entries(snap, h).tolist():
        if q > p:
            break
        r = int(h.rows[q])
        _apply(segs, int(snap.ev_action[r]), int(snap.ev_addr[r]), int(snap.ev_size[r]), int(snap.ev_stream[r]), False)
    return segs


@dataclass(frozen=True)
class Layout:
    """Segments at a moment, and what fills them: live allocations (index into the history's allocations) with
    their blocks, and the free gaps."""

    seg_start: np.ndarray
    seg_size: np.ndarray
    seg_stream: np.ndarray
    seg_expandable: np.ndarray
    alloc: np.ndarray  # live allocations inside a segment, by address
    alloc_segment: np.ndarray  # their segment
    block: np.ndarray  # their block size (known or estimated)
    gap_start: np.ndarray  # free ranges, by address
    gap_size: np.ndarray
    gap_segment: np.ndarray
    exact: bool  # read from the snapshot's own blocks (the end), not replayed

    @property
    def reserved(self) -> int:
        return int(self.seg_size.sum())

    @property
    def free(self) -> int:
        return int(self.gap_size.sum())

    @property
    def largest_free(self) -> int:
        return int(self.gap_size.max(initial=0))


def layout_at(snap: AllocatorSnapshot, device: int, p: int, replay: bool = False) -> Layout:
    """The segments after position ``p`` with their live blocks and free gaps (at the end, the snapshot's own
    blocks; ``replay`` computes them from the history there too)."""
    h = device_history(snap, device)
    start, size, stream, exp = segments_at(snap, device, p, replay).arrays()
    live = np.flatnonzero(h.live_mask(p))
    at_end = p >= h.n - 1 and not replay
    block = np.where(h.block_size[live] >= 0, h.block_size[live], round_size(h.size[live]))
    order = np.argsort(h.addr[live], kind="stable")
    live, block = live[order], block[order]
    seg = np.searchsorted(start, h.addr[live], side="right") - 1
    inside = (seg >= 0) & (h.addr[live] < np.where(seg >= 0, start[np.clip(seg, 0, None)] +
                                                   size[np.clip(seg, 0, None)], 0)) if len(start) else seg < -1
    live, block, seg = live[inside], block[inside], seg[inside]
    if at_end:
        gaps = _end_gaps(snap, device, start)
    else:
        gaps = _gaps(start, size, h.addr[live], block, seg)
    return Layout(start, size, stream, exp, live, seg, block, *gaps, exact=at_end)


def _gaps(start: np.ndarray, size: np.ndarray, addr: np.ndarray, block: np.ndarray,
          seg: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The free ranges of each segment around its blocks (``addr`` sorted, ``seg`` their segment): before its first
    block, between two blocks, after its last one (a segment without blocks is one free range)."""
    seg_end = start + size
    same_next = np.append(seg[1:] == seg[:-1], False) if len(seg) else np.zeros(0, dtype=bool)
    nxt = np.where(same_next, np.append(addr[1:], 0), seg_end[seg] if len(seg) else addr)
    after = np.minimum(addr + block, nxt)
    first_addr = seg_end.copy()
    segs_with_blocks, first = np.unique(seg, return_index=True)
    first_addr[segs_with_blocks] = addr[first]
    lo = np.concatenate([start, after])
    gap = np.concatenate([first_addr - start, nxt - after])
    owner = np.concatenate([np.arange(len(start), dtype=np.int64), seg.astype(np.int64)])
    keep = gap > 0
    order = np.argsort(lo[keep], kind="stable")
    return lo[keep][order], gap[keep][order], owner[keep][order]


def _end_gaps(snap: AllocatorSnapshot, device: int, start: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The free blocks (state inactive) of the end's segments, exactly as the snapshot lists them."""
    on = (snap.seg_device[snap.blk_segment] == device) & ~np.isin(snap.blk_state, ACTIVE_STATES) \
        if len(snap.blk_segment) else np.zeros(0, dtype=bool)
    addr, size = snap.blk_address[on], snap.blk_size[on]
    order = np.argsort(addr, kind="stable")
    addr, size = addr[order], size[order]
    seg = np.searchsorted(start, addr, side="right") - 1
    return addr, size, seg.astype(np.int64)


@snapshot_memo
def fragmentation_series(snap: AllocatorSnapshot, device: int) -> dict[str, np.ndarray]:
    """At up to :data:`FRAGMENTATION_POINTS` positions (and the peak): free bytes in the reserved segments, the
    largest free block and the fragmentation."""
    h = device_history(snap, device)
    if h.n == 0:
        points = np.array([-1], dtype=np.int64)
    else:
        points = np.unique(np.concatenate([np.linspace(0, h.n - 1, min(h.n, FRAGMENTATION_POINTS)).astype(np.int64),
                                           [max(h.peak, 0)]]))
    free = np.zeros(len(points), dtype=np.int64)
    largest = np.zeros(len(points), dtype=np.int64)
    for i, p in enumerate(points.tolist()):
        lay = layout_at(snap, device, p)
        free[i], largest[i] = lay.free, lay.largest_free
    frag = np.where(free > 0, 1.0 - largest / np.maximum(free, 1), 0.0)
    return {"position": points, "free_bytes": free, "largest_free_bytes": largest, "fragmentation": frag}
