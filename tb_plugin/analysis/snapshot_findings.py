"""What a snapshot says to do: out-of-memory explained, fragmentation, and where activations pile up.

- **Out of memory** (the allocator's ``oom`` entry): the request (rounded, as the allocator asked for it), what
  ``cudaMemGetInfo`` said was free, the live bytes then, and the free bytes left inside the reserved segments.
  When those free bytes would have held the request but no single free block was big enough, the reason is
  fragmentation, and ``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`` (segments that grow in place instead
  of new ones beside them) is the remedy; otherwise the live data itself did not fit.
- **Fragmentation at the peak**: at least a fifth of the reserved memory free (and at least 64 MiB) but mostly in
  blocks smaller than half of it: the same remedy, so the next larger request does not need a new segment.
- **Activations**: the allocations of one forward frame (a layer) that hold at least a quarter of the live bytes
  at the peak, created in forward and freed in backward: activation checkpointing there trades them for
  recomputation.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..model.snapshot import A, AllocatorSnapshot, snapshot_memo
from .snapshot_categories import C, StackPhase, categories, windows
from .snapshot_frames import frame_kinds, frame_label
from .snapshot_history import History, device_history
from .snapshot_segments import layout_at

MIN_FRAGMENTED_BYTES = 64 << 20
FRAGMENTED_SHARE = 0.2
ACTIVATION_SHARE = 0.25
EXPANDABLE = "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"


def oom_positions(snap: AllocatorSnapshot, h: History) -> np.ndarray:
    return np.flatnonzero(snap.ev_action[h.rows] == A["oom"])


def step_at(snap: AllocatorSnapshot, device: int, p: int) -> int | None:
    """The training step a position falls in (1-based: optimizer steps finished before it, plus one), None
    without any optimizer step in the history."""
    starts, ends = windows(snap, device, StackPhase.OPTIMIZER)
    if not len(starts):
        return None
    return int(np.searchsorted(ends, p, side="right")) + 1


@snapshot_memo
def oom_details(snap: AllocatorSnapshot, device: int) -> dict[str, Any] | None:
    """The last out-of-memory of the device: what was asked, what was free, and whether fragmentation (enough free
    bytes in the reserved segments, no block big enough) or live data is the reason."""
    h = device_history(snap, device)
    ooms = oom_positions(snap, h)
    if not len(ooms):
        return None
    p = int(ooms[-1])
    row = int(h.rows[p])
    lay = layout_at(snap, device, p)
    requested, device_free = int(snap.ev_size[row]), int(snap.ev_device_free[row])
    fragmented = lay.free >= requested > lay.largest_free
    return {
        "limit_bytes": _process_limit(snap, device),
        "position": p, "time_us": h.time_at(p), "requested_bytes": requested, "device_free_bytes": device_free,
        "live_bytes": h.live_at(p), "reserved_bytes": h.reserved_at(p), "free_in_reserved_bytes": lay.free,
        "largest_free_bytes": lay.largest_free, "reason": "fragmentation" if fragmented else "live_data",
        "count": len(ooms), "step": step_at(snap, device, p),
        "frame": frame_label(snap, int(frame_kinds(snap).origin_of(snap.ev_stack[[row]])[0])),
    }


def _process_limit(snap: AllocatorSnapshot, device: int) -> int | None:
    """The memory the process was allowed (``set_per_process_memory_fraction``), where the observer saw one below
    the device's memory; None otherwise."""
    seen = snap.observed_oom
    if not seen or seen.get("device") != device or seen.get("limit_bytes") is None:
        return None
    limit, total = seen["limit_bytes"], seen.get("device_total_bytes")
    return limit if total is None or (limit is not None and limit < total) else None


def gib(n: float) -> str:
    """Bytes as people read them in a sentence (``1.23 GiB``, ``512.0 MiB``)."""
    for unit, shift, digits in (("GiB", 30, 2), ("MiB", 20, 1), ("KiB", 10, 1)):
        if abs(n) >= 1 << shift:
            return f"{n / (1 << shift):.{digits}f} {unit}"
    return f"{int(n)} B"


def _expandable_on(snap: AllocatorSnapshot) -> bool:
    settings = snap.settings or {}
    return bool(settings.get("expandable_segments")) or \
        "expandable_segments:true" in str(settings.get("PYTORCH_CUDA_ALLOC_CONF", "")).replace(" ", "").lower()


def _beyond(oom: dict[str, Any]) -> str:
    """What more the allocator could not get: up to the process's limit, or the device's free memory."""
    if oom["limit_bytes"] is not None:
        return (f"the process may use {gib(oom['limit_bytes'])} (set_per_process_memory_fraction), "
                f"{gib(max(0, oom['limit_bytes'] - oom['reserved_bytes']))} more than it held")
    return f"the device had {gib(oom['device_free_bytes'])} free"


def _oom_finding(snap: AllocatorSnapshot, oom: dict[str, Any]) -> dict[str, Any]:
    where = f" at step {oom['step']}" if oom["step"] else ""
    asked = f"Out of memory{where} asking {gib(oom['requested_bytes'])} (from {oom['frame']})"
    if oom["reason"] == "fragmentation":
        headline = (f"{asked}: {gib(oom['free_in_reserved_bytes'])} of the {gib(oom['reserved_bytes'])} reserved "
                    f"was free, but in blocks of at most {gib(oom['largest_free_bytes'])}, and {_beyond(oom)}: "
                    "fragmentation.")
        advice = (f"Set {EXPANDABLE}: segments then grow in place, so free space is not cut into pieces."
                  if not _expandable_on(snap) else
                  "Expandable segments are on already: free caches between phases (torch.cuda.empty_cache()) or "
                  "cap block splitting (PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:…).")
        suggests = ["expandable_segments"]
    else:
        headline = (f"{asked}: {gib(oom['live_bytes'])} was live in {gib(oom['reserved_bytes'])} reserved, "
                    f"{gib(oom['free_in_reserved_bytes'])} of it free, and {_beyond(oom)}: the live data does not "
                    "fit.")
        advice = ("Hold less at once: a smaller batch, activation checkpointing, or mixed precision; the live set at "
                  "the out-of-memory shows what holds the memory.")
        suggests = ["smaller_batch", "activation_checkpointing"]
    return {"id": f"oom_{oom['reason']}", "kind": f"oom_{oom['reason']}", "title": "Out of memory",
            "headline": headline, "advice": advice, "text": f"{headline} {advice}", "suggests": suggests,
            "position": oom["position"],
            "evidence": {k: oom[k] for k in ("requested_bytes", "device_free_bytes", "live_bytes", "reserved_bytes",
                                             "free_in_reserved_bytes", "largest_free_bytes")}}


def _fragmentation_finding(snap: AllocatorSnapshot, device: int, h: History) -> dict[str, Any] | None:
    p = h.peak
    lay = layout_at(snap, device, p)
    free, largest, reserved = lay.free, lay.largest_free, lay.reserved
    if free < MIN_FRAGMENTED_BYTES or free < FRAGMENTED_SHARE * reserved or largest * 2 > free:
        return None
    headline = (f"At the peak {gib(free)} of the {gib(reserved)} reserved is free, but the largest free block is "
                f"{gib(largest)}: fragmentation ({1 - largest / free:.0%}).")
    advice = (f"Set {EXPANDABLE} so the next large request reuses that space instead of a new segment."
              if not _expandable_on(snap) else "Expandable segments are on already.")
    return {"id": "fragmentation", "kind": "fragmentation", "title": "Fragmented reserved memory",
            "headline": headline, "advice": advice, "text": f"{headline} {advice}", "suggests": ["expandable_segments"],
            "position": p, "evidence": {"free_in_reserved_bytes": free, "largest_free_bytes": largest,
                                        "reserved_bytes": reserved, "live_bytes": h.live_at(p)}}


def _activation_finding(snap: AllocatorSnapshot, device: int, h: History) -> dict[str, Any] | None:
    p = h.peak
    live = np.flatnonzero(h.live_mask(p))
    total = int(h.size[live].sum())
    acts = live[categories(snap, device)[live] == C["activation"]]
    if not total or not len(acts):
        return None
    origin = frame_kinds(snap).origin_of(h.stack[acts])
    frames, inverse = np.unique(origin, return_inverse=True)
    sizes = np.zeros(len(frames), dtype=np.int64)
    np.add.at(sizes, inverse.reshape(-1), h.size[acts])
    best = int(np.argmax(sizes))
    share = sizes[best] / total
    if share < ACTIVATION_SHARE or frames[best] < 0:
        return None
    label = frame_label(snap, int(frames[best]))
    headline = (f"Activations made at {label} hold {share:.0%} of the live memory at the peak "
                f"({gib(int(sizes[best]))} of {gib(total)}).")
    advice = ("Activation checkpointing there (torch.utils.checkpoint) keeps only its inputs and recomputes the rest "
              "in backward.")
    return {"id": "activations", "kind": "activations", "title": "Activations dominate the peak",
            "headline": headline, "advice": advice, "text": f"{headline} {advice}",
            "suggests": ["activation_checkpointing"], "position": p,
            "evidence": {"bytes": int(sizes[best]), "live_bytes": total, "share": float(share), "frame": label}}


@snapshot_memo
def findings(snap: AllocatorSnapshot, device: int) -> list[dict[str, Any]]:
    """The findings that apply to the device's history, the out-of-memory first."""
    h = device_history(snap, device)
    out: list[dict[str, Any] | None] = []
    oom = oom_details(snap, device)
    if oom is not None:
        out.append(_oom_finding(snap, oom))
    if h.n and (oom is None or oom["reason"] != "fragmentation"):
        out.append(_fragmentation_finding(snap, device, h))
    if h.n:
        out.append(_activation_finding(snap, device, h))
    return [f for f in out if f is not None]
