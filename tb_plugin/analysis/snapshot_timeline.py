"""The active-memory timeline of a snapshot, one window at a time, at the detail its pixels can show.

Each allocation is a band from its alloc to its free, stacked in allocation order (as PyTorch's memory_viz stacks
them: a band keeps its height until something below it is freed, then drops by that much). A window of positions is
cut into ``width`` columns; each column shows the moment of its highest live bytes, so no spike is ever lost, and
the bands are drawn at those moments. Only allocations that are at least half a pixel tall in the window and among
the ``max_bands`` largest live in it are bands; the rest of each column is one "smaller allocations" band on top,
so the stack's top is always the true live bytes. A band is sent as the columns it spans and its offset at each
column where that offset moves by a pixel or more: O(bands × pixels) at any zoom, whatever the history's length.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..model.memory_categories import CATEGORIES
from ..model.snapshot import AllocatorSnapshot
from .snapshot_categories import categories
from .snapshot_frames import frame_dict, frame_kinds, frame_label
from .snapshot_history import History, device_history

MAX_BANDS = 1500
MAX_COLUMNS = 4096


def columns(h: History, lo: int, hi: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """(first position, shown position) of each column of ``[lo, hi]``: the shown one holds the column's most
    live bytes (its first such position)."""
    count = hi - lo + 1
    w = max(1, min(width, count, MAX_COLUMNS))
    edges = lo + (np.arange(w + 1, dtype=np.int64) * count) // w
    first = edges[:-1]
    live = h.live_after[lo:hi + 1]
    best = np.maximum.reduceat(live, first - lo)
    bucket = np.repeat(np.arange(w), np.diff(edges))
    hit = np.flatnonzero(live == best[bucket])
    _, idx = np.unique(bucket[hit], return_index=True)
    return first, (hit[idx] + lo).astype(np.int64)


def _live_columns(h: History, at: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(first column, last column + 1) where each allocation is live (``at`` increasing: a contiguous range)."""
    c0 = np.searchsorted(at, h.start[ids], side="left")
    c1 = np.searchsorted(at, h.end[ids], side="left")
    return c0, c1


def _drawn(h: History, at: np.ndarray, y_max: int, height: int, max_bands: int, pin: int | None) -> np.ndarray:
    """The allocations drawn as bands, in stacking order (allocation order, memory from before the history first)."""
    everyone = np.arange(len(h.size))
    c0, c1 = _live_columns(h, at, everyone)
    tall = (c1 > c0) & (h.size * max(height, 1) * 2 >= max(y_max, 1))
    ids = everyone[tall]
    if len(ids) > max_bands:
        ids = ids[np.argsort(-h.size[ids], kind="stable")[:max_bands]]
    if pin is not None and 0 <= pin < len(h.size) and pin not in set(ids.tolist()) and c1[pin] > c0[pin]:
        ids = np.append(ids, pin)
    return ids[np.lexsort((ids, h.start[ids]))]


def _steps(offsets: np.ndarray, c0: int, c1: int, px: float) -> list[int]:
    """``[column, offset, ...]`` where a band's offset moves by a pixel or more (its first column always)."""
    seg = offsets[c0:c1]
    q = np.floor(seg / px) if px > 0 else seg
    keep = np.flatnonzero(np.concatenate([[True], q[1:] != q[:-1]]))
    out = np.empty(2 * len(keep), dtype=np.int64)
    out[0::2] = keep + c0
    out[1::2] = seg[keep]
    result: list[int] = out.tolist()
    return result


def timeline_window(snap: AllocatorSnapshot, device: int, start: int | None, end: int | None, width: int,
                    height: int = 400, max_bands: int = MAX_BANDS, pin: int | None = None) -> dict[str, Any]:
    """The bands of positions ``[start, end]`` (default: the whole history) at ``width`` columns."""
    h = device_history(snap, device)
    if h.n == 0:
        return _empty_window(snap, device)
    lo = 0 if start is None else int(np.clip(start, 0, h.n - 1))
    hi = h.n - 1 if end is None else int(np.clip(end, lo, h.n - 1))
    first, at = columns(h, lo, hi, width)
    total = h.live_after[at]
    y_max = int(total.max(initial=0))
    ids = _drawn(h, at, y_max, height, max_bands, pin)
    c0, c1 = _live_columns(h, at, ids)
    live = (np.arange(len(at))[None, :] >= c0[:, None]) & (np.arange(len(at))[None, :] < c1[:, None])
    sizes = h.size[ids][:, None] * live
    below = np.cumsum(sizes, axis=0) - sizes
    px = y_max / max(height, 1)
    origin = frame_kinds(snap).origin_of(h.stack[ids])
    frames, frame_index = np.unique(origin, return_inverse=True)
    cats = categories(snap, device)[ids]
    bands = [{"id": int(i), "size": int(h.size[i]), "frame": int(frame_index[k]), "category": CATEGORIES[int(cats[k])],
              "start": int(h.start[i]), "end": int(h.end[i]), "first_column": int(c0[k]), "end_column": int(c1[k]),
              "steps": _steps(below[k], int(c0[k]), int(c1[k]), px)} for k, i in enumerate(ids.tolist())]
    return {
        "device": device, "start": lo, "end": hi, "positions": h.n, "first": first.tolist(), "at": at.tolist(),
        "time_us": [None if np.isnan(t) else float(t) for t in h.time_us[at].tolist()],
        "live_bytes": total.tolist(), "reserved_bytes": h.reserved_after[at].tolist(),
        "other_bytes": (total - sizes.sum(axis=0)).tolist(), "y_max": y_max, "bands": bands,
        "frames": [_legend_frame(snap, int(f)) for f in frames.tolist()],
        "smaller_than_bytes": int(np.ceil(y_max / max(2 * height, 1))),
    }


def _legend_frame(snap: AllocatorSnapshot, f: int) -> dict[str, Any]:
    base = frame_dict(snap, f) if f >= 0 else {"file": "", "line": -1, "name": "", "kind": "cpp"}
    return {**base, "label": frame_label(snap, f)}


def _empty_window(snap: AllocatorSnapshot, device: int) -> dict[str, Any]:
    return {"device": device, "start": 0, "end": -1, "positions": 0, "first": [], "at": [], "time_us": [],
            "live_bytes": [], "reserved_bytes": [], "other_bytes": [], "y_max": 0, "bands": [], "frames": [],
            "smaller_than_bytes": 0}
