"""One PyTorch allocator snapshot (``torch.cuda.memory._dump_snapshot``), as columns.

A snapshot is what the CUDA caching allocator knows: its segments (``cudaMalloc``'d memory) split into blocks,
each with the Python/C++ stack that allocated it, and, when ``_record_memory_history()`` was on, the history of
every allocator action (``device_traces``: alloc, free_requested, free_completed, segment_alloc/free/map/unmap,
oom, snapshot) with its stack and time. ``loader/snapshot.py`` turns the pickled dicts into the arrays below and
drops them: 100,000 history entries cost a few MB here, not a dict each.

Stacks are shared: ``frames`` of the distinct frames (file, line, function; innermost first in a stack, as torch
records them) and ``stacks`` as CSR arrays (``stack_offsets[s]:stack_offsets[s + 1]`` of ``stack_frames``).
Missing values are ``-1`` in integer columns and ``NaN`` in ``time_us``.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from .derived import compute_once

# ``TraceEntry::Action`` spelled as torch writes it; ``other`` is a spelling a later torch may add
ACTIONS = ("alloc", "free_requested", "free_completed", "segment_alloc", "segment_free", "segment_map",
           "segment_unmap", "oom", "snapshot", "other")
A = {name: i for i, name in enumerate(ACTIONS)}
# a block's state; torch's Python dump says ``active_awaiting_free`` where its C++ dump says ``active_pending_free``
BLOCK_STATES = ("active_allocated", "active_pending_free", "inactive")
ACTIVE_STATES = (0, 1)  # allocated, or freed by the program and waiting for another stream (record_stream)

R = TypeVar("R")


@dataclass(frozen=True, eq=False)
class AllocatorSnapshot:
    """The columns of one snapshot file; arrays of one table have one length. Never changes once built."""

    name: str  # the file's name, for messages
    strings: list[str]  # the frames' file and function names, the annotations' names
    frame_file: np.ndarray  # i4 code into ``strings``
    frame_line: np.ndarray  # i8
    frame_name: np.ndarray  # i4
    stack_offsets: np.ndarray  # i8, one more than the stacks
    stack_frames: np.ndarray  # i4 into frames, innermost first
    # history (``device_traces``), every device in one table, each device's entries in recorded order
    ev_device: np.ndarray  # i4
    ev_action: np.ndarray  # i1, index into ACTIONS
    ev_addr: np.ndarray  # i8 (-1 for oom and snapshot entries)
    ev_size: np.ndarray  # i8: requested bytes (alloc/free), segment bytes, the rounded request of an oom
    ev_stream: np.ndarray  # i8
    ev_time_us: np.ndarray  # f8, µs since the epoch (NaN: torch < 2.1 recorded no time)
    ev_stack: np.ndarray  # i4 (-1: none recorded)
    ev_device_free: np.ndarray  # i8, the oom entry's ``device_free`` (cudaMemGetInfo), else -1
    # segments and their blocks as the snapshot found them (the end of the history)
    seg_device: np.ndarray  # i4
    seg_address: np.ndarray  # i8
    seg_total_size: np.ndarray  # i8
    seg_stream: np.ndarray  # i8
    seg_is_large: np.ndarray  # bool
    seg_expandable: np.ndarray  # bool
    seg_pool: np.ndarray  # i8, shape (n, 2): (0, 0) is the default pool, else a graph or MemPool's
    blk_segment: np.ndarray  # i4 into segments
    blk_address: np.ndarray  # i8
    blk_size: np.ndarray  # i8
    blk_requested: np.ndarray  # i8
    blk_state: np.ndarray  # i1, index into BLOCK_STATES
    blk_stack: np.ndarray  # i4
    # ``record_function`` annotations (``global_record_annotations=True``, torch >= 2.6)
    ann_device: np.ndarray  # i4
    ann_time_us: np.ndarray  # f8
    ann_start: np.ndarray  # bool: START (else END)
    ann_name: np.ndarray  # i4 code into ``strings``
    settings: dict[str, Any] | None  # ``allocator_settings`` (torch >= 2.6), plain values only
    observed_oom: dict[str, int | None] | None  # what tb_plugin.record_memory_history's observer was told
    notes: tuple[str, ...]  # what this format lacks, said once (no history, no times, legacy block history)
    memo: dict[Any, Any] = field(default_factory=dict, repr=False)
    computing: dict[Any, Future[Any]] = field(default_factory=dict, repr=False)

    @property
    def n_events(self) -> int:
        return len(self.ev_action)

    @property
    def devices(self) -> list[int]:
        """Devices with history entries or segments, in order."""
        both = np.concatenate([self.ev_device, self.seg_device]).astype(np.int64)
        return [int(d) for d in np.unique(both).tolist()]

    def stack(self, s: int) -> np.ndarray:
        """The frame indices of stack ``s`` (innermost first); empty for -1."""
        if s < 0:
            return np.empty(0, dtype=np.int32)
        return self.stack_frames[int(self.stack_offsets[s]):int(self.stack_offsets[s + 1])]

    @property
    def nbytes(self) -> int:
        """What the arrays hold (the workspace bounds the snapshots it keeps by this)."""
        arrays = [v for v in vars(self).values() if isinstance(v, np.ndarray)]
        return sum(a.nbytes for a in arrays) + sum(len(s) + 56 for s in self.strings)



def snapshot_memo(fn: Callable[..., R]) -> Callable[..., R]:
    """Cache ``fn(snapshot, *args)`` on the snapshot, computing each key once however many threads ask."""
    def wrapper(snap: AllocatorSnapshot, *args: Any) -> R:
        key = (fn.__module__, fn.__qualname__, args)
        return compute_once(snap.memo, snap.computing, key, lambda: fn(snap, *args))

    wrapper.__name__ = fn.__name__
    wrapper.__doc__ = fn.__doc__
    wrapper.__wrapped__ = fn  # type: ignore[attr-defined]
    return wrapper
