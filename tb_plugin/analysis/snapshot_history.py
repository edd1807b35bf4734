"""One device's allocator history as allocations with lifetimes, and the live and reserved bytes after each entry.

The moment axis is the history's entry number on that device (``position``; every entry is a moment, as PyTorch's
own memory_viz plots them): thousands of entries can share one µs, so time alone would stack them on one pixel.
Each position also has its ``time_us`` where torch recorded one (2.1+).

An allocation is an ``alloc`` entry paired with the next ``free_requested`` / ``free_completed`` of its address
(in that order on that address); it is live from its alloc up to its ``free_completed`` (torch's
``requested_bytes`` and memory_viz's "active" memory: memory freed by the program but still awaiting another
stream's use is still taken). Sizes are the requested bytes the entries carry. Memory the history does not see
allocated is taken as live from the start: a free without an alloc before it (allocated before recording began),
and a block still allocated in the segments whose alloc is not in the history. So after the last entry the live
bytes are exactly the active blocks' requested bytes, as the segments list them.

Reserved bytes are the segments' sizes: those listed at the end, less the segment_alloc/map entries and plus the
segment_free/unmap entries after each position.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..model.snapshot import ACTIVE_STATES, A, AllocatorSnapshot, snapshot_memo

_GROW = (A["segment_alloc"], A["segment_map"])
_SHRINK = (A["segment_free"], A["segment_unmap"])


@dataclass(frozen=True)
class History:
    """Arrays over positions (``rows``, ``time_us``, ``live_after``, ``reserved_after``) and over allocations
    (the rest). ``start`` is -1 for memory allocated before the history, ``end`` is ``n`` for memory still live
    at its end; an allocation is live after position ``p`` when ``start <= p < end``."""

    device: int
    rows: np.ndarray  # i8: row of each position in the snapshot's ev_* columns
    time_us: np.ndarray  # f8 per position (NaN: not recorded)
    live_after: np.ndarray  # i8 per position
    reserved_after: np.ndarray  # i8 per position
    live_before: int  # live bytes before the first position
    reserved_before: int
    addr: np.ndarray  # i8 per allocation
    size: np.ndarray  # i8: requested bytes
    block_size: np.ndarray  # i8: the block's bytes where the end's segments list it, else -1
    start: np.ndarray  # i8
    end: np.ndarray  # i8: position of its free_completed (else its free_requested), n while live at the end
    freed: np.ndarray  # i8: position of its free_requested (the program let go), n while live
    stack: np.ndarray  # i4: the stack that allocated it (-1: none); a free's stack when ``stack_is_free``
    free_stack: np.ndarray  # i4: the stack of its free_requested (-1: none or not freed)
    stack_is_free: np.ndarray  # bool: allocated before the history, only its free's stack is known
    stream: np.ndarray  # i8

    @property
    def n(self) -> int:
        return len(self.rows)

    @property
    def peak(self) -> int:
        """The first position holding the most live bytes (-1 when nothing in the history beats its start)."""
        if not self.n or int(self.live_after.max()) <= self.live_before:
            return -1
        return int(np.argmax(self.live_after))

    @property
    def peak_bytes(self) -> int:
        return max(self.live_before, int(self.live_after.max(initial=0)))

    def live_at(self, p: int) -> int:
        return self.live_before if p < 0 else int(self.live_after[min(p, self.n - 1)])

    def reserved_at(self, p: int) -> int:
        return self.reserved_before if p < 0 else int(self.reserved_after[min(p, self.n - 1)])

    def live_mask(self, p: int) -> np.ndarray:
        """Which allocations are live after position ``p`` (-1: before the first entry)."""
        return (self.start <= p) & (self.end > p)

    def time_at(self, p: int) -> float | None:
        if 0 <= p < self.n and not np.isnan(self.time_us[p]):
            return float(self.time_us[p])
        return None


@snapshot_memo
def device_history(snap: AllocatorSnapshot, device: int) -> History:
    rows = np.flatnonzero(snap.ev_device == device).astype(np.int64)
    n = len(rows)
    action, addr = snap.ev_action[rows], snap.ev_addr[rows]
    pairs = _pairs(action, addr, n)
    start, end, freed, first = pairs
    size = snap.ev_size[rows][first]
    stack = snap.ev_stack[rows][first]
    has_free = freed < n
    free_stack = np.where(has_free, snap.ev_stack[rows][np.minimum(freed, max(n - 1, 0))], -1).astype(np.int32)
    alloc_addr = addr[first]
    stream = snap.ev_stream[rows][first]
    blocks = _end_blocks(snap, device)
    live_at_end = {int(a) for a in alloc_addr[(start >= 0) & (end >= n)].tolist()}
    unseen = np.array([a not in live_at_end for a in blocks[0].tolist()], dtype=bool).reshape(len(blocks[0]))
    b_addr, b_size, b_req, b_stack, b_stream = (col[unseen] for col in blocks)
    k = len(b_addr)
    addr_all = np.concatenate([alloc_addr, b_addr])
    block_size = np.full(len(addr_all), -1, dtype=np.int64)
    _fill_block_sizes(block_size, addr_all, end >= n, blocks[0], blocks[1], len(start))
    block_size[len(start):] = b_size
    history = History(
        device=device, rows=rows, time_us=snap.ev_time_us[rows], live_after=np.empty(0, dtype=np.int64),
        reserved_after=np.empty(0, dtype=np.int64), live_before=0, reserved_before=0, addr=addr_all,
        size=np.concatenate([size, b_req]), block_size=block_size,
        start=np.concatenate([start, np.full(k, -1)]), end=np.concatenate([end, np.full(k, n)]),
        freed=np.concatenate([freed, np.full(k, n)]), stack=np.concatenate([stack, b_stack]).astype(np.int32),
        free_stack=np.concatenate([free_stack, np.full(k, -1, dtype=np.int32)]),
        stack_is_free=np.concatenate([start < 0, np.zeros(k, dtype=bool)]),
        stream=np.concatenate([stream, b_stream]))
    return _with_curves(snap, history)


def _pairs(action: np.ndarray, addr: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(start, end, freed, first entry) of every allocation: runs of alloc/free entries of one address in order,
    each run starting at an alloc (or at a free of memory allocated before the history)."""
    sel = np.flatnonzero(np.isin(action, (A["alloc"], A["free_requested"], A["free_completed"])))
    order = sel[np.lexsort((sel, addr[sel]))]
    kind = action[order]
    is_alloc = kind == A["alloc"]
    new_addr = np.concatenate([[True], addr[order][1:] != addr[order][:-1]]) if len(order) else is_alloc
    run = np.cumsum(is_alloc | new_addr) - 1
    runs = int(run[-1]) + 1 if len(run) else 0
    first = order[np.flatnonzero(is_alloc | new_addr)]
    start = np.where(action[first] == A["alloc"], first, -1)
    requested = np.full(runs, n, dtype=np.int64)
    completed = np.full(runs, n, dtype=np.int64)
    np.minimum.at(requested, run[kind == A["free_requested"]], order[kind == A["free_requested"]])
    np.minimum.at(completed, run[kind == A["free_completed"]], order[kind == A["free_completed"]])
    end = np.where(completed < n, completed, requested)
    return start.astype(np.int64), end, np.minimum(requested, end), first.astype(np.int64)


def _end_blocks(snap: AllocatorSnapshot, device: int) -> tuple[np.ndarray, ...]:
    """(address, size, requested, stack, stream) of the device's active blocks at the snapshot's end."""
    on = (snap.seg_device[snap.blk_segment] == device) & np.isin(snap.blk_state, ACTIVE_STATES) \
        if len(snap.blk_segment) else np.zeros(0, dtype=bool)
    seg = snap.blk_segment[on]
    return (snap.blk_address[on], snap.blk_size[on], snap.blk_requested[on], snap.blk_stack[on],
            snap.seg_stream[seg])


def _fill_block_sizes(out: np.ndarray, addr: np.ndarray, live: np.ndarray, b_addr: np.ndarray,
                      b_size: np.ndarray, m: int) -> None:
    """The block size of each history allocation still live at the end, from the end's block at its address."""
    if not len(b_addr):
        return
    order = np.argsort(b_addr)
    idx = np.flatnonzero(live[:m])
    at = np.clip(np.searchsorted(b_addr[order], addr[idx]), 0, len(order) - 1)
    hit = b_addr[order][at] == addr[idx]
    out[idx[hit]] = b_size[order][at[hit]]


def _with_curves(snap: AllocatorSnapshot, h: History) -> History:
    n = h.n
    delta = np.zeros(n + 1, dtype=np.int64)
    np.add.at(delta, h.start[h.start >= 0], h.size[h.start >= 0])
    np.add.at(delta, h.end, -h.size)  # position n (live at the end) falls off the curve
    live_before = int(h.size[h.start < 0].sum())
    live_after = live_before + np.cumsum(delta[:n])
    action = snap.ev_action[h.rows]
    seg_delta = np.where(np.isin(action, _GROW), snap.ev_size[h.rows], 0) - \
        np.where(np.isin(action, _SHRINK), snap.ev_size[h.rows], 0)
    reserved_end = int(snap.seg_total_size[snap.seg_device == h.device].sum())
    reserved_before = reserved_end - int(seg_delta.sum())
    reserved_after = reserved_before + np.cumsum(seg_delta)
    return History(**{**vars(h), "live_after": live_after.astype(np.int64), "live_before": live_before,
                      "reserved_after": reserved_after.astype(np.int64), "reserved_before": reserved_before})
