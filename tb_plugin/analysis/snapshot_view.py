"""The Memory view's snapshot mode, as plain data: the summary (peak, out-of-memory, curves, fragmentation,
findings), the live set at a moment grouped by frame, stack or category, one allocation with its neighbours, and
the segments at a moment. Positions are the device's history entry numbers (see :mod:`.snapshot_history`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..model.memory_categories import CATEGORIES
from ..model.snapshot import ACTIVE_STATES, A, AllocatorSnapshot
from .snapshot_categories import categories
from .snapshot_findings import findings, oom_details, step_at
from .snapshot_frames import frame_kinds, frame_label, stack_frames
from .snapshot_history import History, device_history
from .snapshot_segments import fragmentation_series, layout_at

GROUPINGS = ("frame", "stack", "category")
CURVE_POINTS = 2000


def device_label(device: int) -> str:
    return f"GPU{device}"


def default_device(snap: AllocatorSnapshot) -> int:
    """The device of the last out-of-memory, else the one with the most history entries, else the first."""
    devices = snap.devices
    if not devices:
        return 0
    ooms = np.flatnonzero(snap.ev_action == A["oom"])
    if len(ooms):
        return int(snap.ev_device[ooms[-1]])
    counts = {d: int((snap.ev_device == d).sum()) for d in devices}
    return max(devices, key=lambda d: (counts[d], -d))


def end_live_bytes(snap: AllocatorSnapshot, device: int) -> tuple[int, int]:
    """(requested, block) bytes of the device's active blocks as the segments list them at the end."""
    on = (snap.seg_device[snap.blk_segment] == device) & np.isin(snap.blk_state, ACTIVE_STATES) \
        if len(snap.blk_segment) else np.zeros(0, dtype=bool)
    return int(snap.blk_requested[on].sum()), int(snap.blk_size[on].sum())


def _curve(h: History, max_points: int) -> dict[str, list[Any]]:
    """Live and reserved bytes at up to ``max_points`` positions: each bucket's first, last, highest and lowest."""
    if h.n <= max_points:
        keep = np.arange(h.n)
    else:
        buckets = max(1, max_points // 4)
        edges = (np.arange(buckets + 1) * h.n) // buckets
        starts = edges[:-1]
        ends = edges[1:]
        hi = [s + int(np.argmax(h.live_after[s:e])) for s, e in zip(starts.tolist(), ends.tolist())]
        lo = [s + int(np.argmin(h.live_after[s:e])) for s, e in zip(starts.tolist(), ends.tolist())]
        keep = np.unique(np.concatenate([starts, ends - 1, hi, lo]))
    return {"position": keep.tolist(), "live_bytes": h.live_after[keep].tolist(),
            "reserved_bytes": h.reserved_after[keep].tolist(),
            "time_us": [None if np.isnan(t) else float(t) for t in h.time_us[keep].tolist()]}


def category_totals(snap: AllocatorSnapshot, device: int, live: np.ndarray) -> list[dict[str, Any]]:
    h = device_history(snap, device)
    cats = categories(snap, device)[live]
    size = h.size[live]
    out = []
    for c, name in enumerate(CATEGORIES):
        on = cats == c
        if on.any():
            out.append({"category": name, "bytes": int(size[on].sum()), "count": int(on.sum())})
    return sorted(out, key=lambda r: -r["bytes"])


def snapshot_summary(snap: AllocatorSnapshot, device: int, max_points: int = CURVE_POINTS) -> dict[str, Any]:
    h = device_history(snap, device)
    live, live_blocks = end_live_bytes(snap, device)
    peak = h.peak
    oom = oom_details(snap, device)
    frag = fragmentation_series(snap, device)
    focus = {"position": oom["position"], "why": "oom"} if oom else {"position": peak, "why": "peak"}
    return {
        "file": snap.name, "device": device, "devices": [_device_row(snap, d) for d in snap.devices],
        "positions": h.n, "start_us": h.time_at(0), "end_us": h.time_at(h.n - 1),
        "live_bytes": live, "live_block_bytes": live_blocks,
        "reserved_bytes": int(snap.seg_total_size[snap.seg_device == device].sum()),
        "peak_live_bytes": h.peak_bytes,
        "peak": {"position": peak, "time_us": h.time_at(peak), "live_bytes": h.peak_bytes,
                 "reserved_bytes": h.reserved_at(peak), "step": step_at(snap, device, peak)},
        "oom": oom, "focus": focus, "curve": _curve(h, max_points),
        "fragmentation": {k: v.tolist() for k, v in frag.items()},
        "categories_at_peak": category_totals(snap, device, np.flatnonzero(h.live_mask(peak))),
        "findings": findings(snap, device), "allocator_settings": snap.settings, "notes": list(snap.notes),
        "allocations": len(h.size),
    }


def _device_row(snap: AllocatorSnapshot, d: int) -> dict[str, Any]:
    return {"device": d, "label": device_label(d), "entries": int((snap.ev_device == d).sum()),
            "segments": int((snap.seg_device == d).sum())}


def _allocation_row(snap: AllocatorSnapshot, h: History, i: int, cats: np.ndarray,
                    origin: np.ndarray) -> dict[str, Any]:
    end = int(h.end[i])
    start_us = h.time_at(int(h.start[i]))
    end_us = h.time_at(end) if end < h.n else None
    return {
        "id": i, "size_bytes": int(h.size[i]), "block_bytes": int(h.block_size[i]) if h.block_size[i] >= 0 else None,
        "address": int(h.addr[i]), "start": int(h.start[i]), "end": end if end < h.n else None,
        "start_us": start_us, "end_us": end_us,
        "lifetime_us": end_us - start_us if start_us is not None and end_us is not None else None,
        "category": CATEGORIES[int(cats[i])], "frame": frame_label(snap, int(origin[i])),
        "stack_is_free": bool(h.stack_is_free[i]),
    }


def live_set(snap: AllocatorSnapshot, device: int, p: int, group_by: str = "frame", limit: int = 50) -> dict[str, Any]:
    """What is live after position ``p``: grouped (by origin frame, whole stack or category, largest first, at most
    ``limit`` groups and the rest as one), by category, and the ``limit`` largest allocations."""
    h = device_history(snap, device)
    p = int(np.clip(p, -1, max(h.n - 1, -1)))
    live = np.flatnonzero(h.live_mask(p))
    cats = categories(snap, device)
    origin = frame_kinds(snap).origin_of(h.stack)
    total = int(h.size[live].sum())
    groups = _groups(snap, h, live, group_by, cats, origin, limit, total)
    top = live[np.argsort(-h.size[live], kind="stable")[:limit]]
    return {
        "device": device, "position": p, "time_us": h.time_at(p), "live_bytes": total, "count": len(live),
        "reserved_bytes": h.reserved_at(p), "group_by": group_by, "groups": groups,
        "categories": category_totals(snap, device, live),
        "allocations": [_allocation_row(snap, h, int(i), cats, origin) for i in top.tolist()],
    }


def _groups(snap: AllocatorSnapshot, h: History, live: np.ndarray, group_by: str, cats: np.ndarray,
            origin: np.ndarray, limit: int, total: int) -> list[dict[str, Any]]:
    key = {"frame": origin, "stack": h.stack, "category": cats.astype(np.int32)}[group_by][live]
    keys, inverse = np.unique(key, return_inverse=True)
    inverse = inverse.reshape(-1)
    sizes = np.zeros(len(keys), dtype=np.int64)
    np.add.at(sizes, inverse, h.size[live])
    counts = np.bincount(inverse, minlength=len(keys))
    order = np.argsort(-sizes, kind="stable")
    rows = []
    for g in order[:limit].tolist():
        k = int(keys[g])
        members = live[inverse == g]
        row: dict[str, Any] = {"bytes": int(sizes[g]), "count": int(counts[g]),
                               "share": float(sizes[g] / total) if total else 0.0}
        main = cats[members]
        row["category"] = CATEGORIES[int(np.bincount(main, weights=h.size[members]).argmax())] if len(members) else None
        if group_by == "category":
            row["label"] = CATEGORIES[k]
        else:
            stack = k if group_by == "stack" else int(h.stack[members[0]])
            row["label"] = frame_label(snap, k if group_by == "frame" else int(origin[members[0]]))
            row["stack"] = stack_frames(snap, stack, 60)
        rows.append(row)
    rest = order[limit:]
    if len(rest):
        rows.append({"label": f"{len(rest)} more groups", "bytes": int(sizes[rest].sum()),
                     "count": int(counts[rest].sum()), "share": float(sizes[rest].sum() / total) if total else 0.0,
                     "category": None, "other": True})
    return rows


def allocation(snap: AllocatorSnapshot, device: int, i: int, p: int | None = None, around: int = 5) -> dict[str, Any]:
    """One allocation: its numbers, its stacks, and at position ``p`` (default its alloc) the live allocations
    just below and above it in the stack of bands and its neighbours in memory."""
    h = device_history(snap, device)
    cats = categories(snap, device)
    origin = frame_kinds(snap).origin_of(h.stack)
    at = int(h.start[i]) if p is None else int(np.clip(p, -1, max(h.n - 1, -1)))
    live = np.flatnonzero(h.live_mask(at))
    order = live[np.lexsort((live, h.start[live]))]
    k = int(np.searchsorted(h.start[order] * (len(h.size) + 1) + order, h.start[i] * (len(h.size) + 1) + i))
    row = _allocation_row(snap, h, i, cats, origin)
    row.update({
        "stream": int(h.stream[i]), "stack": stack_frames(snap, int(h.stack[i])),
        "free_stack": stack_frames(snap, int(h.free_stack[i])) if h.free_stack[i] >= 0 else [],
        "position": at, "live_at_position": bool(h.live_mask(at)[i]),
        "below": [_allocation_row(snap, h, int(j), cats, origin) for j in order[max(0, k - around):k][::-1].tolist()],
        "above": [_allocation_row(snap, h, int(j), cats, origin) for j in order[k + 1:k + 1 + around].tolist()],
        "memory": _memory_neighbours(snap, device, at, i, cats, origin),
    })
    return row


def _memory_neighbours(snap: AllocatorSnapshot, device: int, p: int, i: int, cats: np.ndarray,
                       origin: np.ndarray) -> dict[str, Any] | None:
    """The allocation's segment at ``p`` and what lies before and after it there (a block or free space)."""
    h = device_history(snap, device)
    lay = layout_at(snap, device, p)
    where = np.flatnonzero(lay.alloc == i)
    if not len(where):
        return None
    j = int(where[0])
    s = int(lay.alloc_segment[j])
    in_seg = np.flatnonzero(lay.alloc_segment == s)
    pos = int(np.searchsorted(in_seg, j))
    prev_id = int(lay.alloc[in_seg[pos - 1]]) if pos > 0 else None
    next_id = int(lay.alloc[in_seg[pos + 1]]) if pos + 1 < len(in_seg) else None
    gaps = lay.gap_segment == s
    return {
        "segment_address": int(lay.seg_start[s]), "segment_bytes": int(lay.seg_size[s]),
        "offset": int(h.addr[i] - lay.seg_start[s]), "block_bytes": int(lay.block[j]),
        "segment_free_bytes": int(lay.gap_size[gaps].sum()),
        "segment_largest_free_bytes": int(lay.gap_size[gaps].max(initial=0)),
        "previous": _allocation_row(snap, h, prev_id, cats, origin) if prev_id is not None else None,
        "next": _allocation_row(snap, h, next_id, cats, origin) if next_id is not None else None,
    }


def segments_view(snap: AllocatorSnapshot, device: int, p: int, limit: int = 200,
                  max_blocks: int = 5000) -> dict[str, Any]:
    """The segments after position ``p`` with their live blocks and free ranges (largest segments first)."""
    h = device_history(snap, device)
    p = int(np.clip(p, -1, max(h.n - 1, -1)))
    lay = layout_at(snap, device, p)
    cats = categories(snap, device)
    origin = frame_kinds(snap).origin_of(h.stack)
    order = np.argsort(-lay.seg_size, kind="stable")[:limit]
    budget = max_blocks
    rows = []
    for s in order.tolist():
        rows.append(_segment_row(snap, h, lay, s, cats, origin, budget))
        budget = max(0, budget - len(rows[-1]["blocks"]))
    return {
        "device": device, "position": p, "time_us": h.time_at(p), "exact": lay.exact,
        "reserved_bytes": lay.reserved, "live_bytes": h.live_at(p), "free_bytes": lay.free,
        "largest_free_bytes": lay.largest_free, "segment_count": len(lay.seg_start), "segments": rows,
    }


def _segment_row(snap: AllocatorSnapshot, h: History, lay: Any, s: int, cats: np.ndarray, origin: np.ndarray,
                 budget: int) -> dict[str, Any]:
    mine = np.flatnonzero(lay.alloc_segment == s)
    gaps = np.flatnonzero(lay.gap_segment == s)
    start = int(lay.seg_start[s])
    blocks = [{"offset": int(h.addr[lay.alloc[j]]) - start, "bytes": int(lay.block[j]), "state": "live",
               "id": int(lay.alloc[j]), "size_bytes": int(h.size[lay.alloc[j]]),
               "category": CATEGORIES[int(cats[lay.alloc[j]])], "frame": frame_label(snap, int(origin[lay.alloc[j]]))}
              for j in mine.tolist()]
    blocks += [{"offset": int(lay.gap_start[g]) - start, "bytes": int(lay.gap_size[g]), "state": "free"}
               for g in gaps.tolist()]
    blocks.sort(key=lambda b: int(b["offset"]))  # type: ignore[call-overload]
    return {
        "address": start, "bytes": int(lay.seg_size[s]), "stream": int(lay.seg_stream[s]),
        "expandable": bool(lay.seg_expandable[s]), "live_bytes": int(h.size[lay.alloc[mine]].sum()),
        "free_bytes": int(lay.gap_size[gaps].sum()), "largest_free_bytes": int(lay.gap_size[gaps].max(initial=0)),
        "block_count": len(blocks), "blocks": blocks[:budget],
    }
