"""Counter tracks reduced to the pixel grid: GPU utilization and est. SM efficiency per GPU, memory per device,
queue length per stream and copy bandwidth per direction.

Each counter is a value per pixel column of the window: utilization is the busy share of the pixel (union of
kernels), SM efficiency the pixel's mean of min(Σ blocks-per-SM, 1), memory and queue length the pixel's maximum
(so peaks survive any zoom level), bandwidth the pixel's mean GB/s. Queue length and bandwidth are the GPU
view's analyses (``analysis/queues``, ``analysis/bandwidth``), drawn here over time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..analysis.bandwidth import copy_rates
from ..analysis.queues import queue_levels
from ..model import intervals as iv
from ..model.arrays import unique_pairs
from ..model.derived import memoized
from ..model.kinds import Kind
from ..model.series import Levels, areas, integral, levels_of, max_per_bucket, sample_positions
from ..model.tables import TraceModel


@memoized
def _kernel_spans(model: TraceModel) -> dict[int, tuple[iv.Intervals, Levels]]:
    ev = model["events"]
    dev = model["device_events"]
    kernels = np.flatnonzero(ev["kind"][dev["row"]] == Kind.KERNEL)
    out: dict[int, tuple[iv.Intervals, Levels]] = {}
    for device in np.unique(dev["device"][kernels]).tolist():
        k = kernels[dev["device"][kernels] == device]
        start = ev["ts"][dev["row"][k]]
        end = start + np.nan_to_num(ev["dur"][dev["row"][k]], nan=0.0).clip(min=0.0)
        bps = dev["blocks_per_sm"][k]
        ok = np.isfinite(bps) & (bps > 0) & (end > start)
        seg_start, seg_end, level = levels_of(np.concatenate([start[ok], end[ok]]),
                                              np.concatenate([bps[ok], -bps[ok]]))
        out[int(device)] = (iv.union(start, end), (seg_start, seg_end, np.minimum(np.clip(level, 0.0, None), 1.0)))
    return out


def gpu_label(device: int) -> str:
    """``GPU 0``; a missing or non-numeric device id (stored as -1) is unknown, never "GPU -1"."""
    return f"GPU {_device_text(device)}"


def _device_text(device: int) -> str:
    return str(device) if device >= 0 else "(unknown device)"


# A memory counter that never holds more than this is empty (a CPU "allocated" of 8 B from one tensor's metadata):
# a row for it is noise.
EMPTY_MEMORY_BYTES = 1024


@memoized
def _memory_series(model: TraceModel) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    mem = model["memory"]
    ts = model["events"]["ts"][mem["row"]]
    ok = (mem["total_allocated"] >= 0) & np.isfinite(ts)
    out = {}
    for dtype, did in unique_pairs(mem["device_type"][ok], mem["device_id"][ok]):
        on = ok & (mem["device_type"] == dtype) & (mem["device_id"] == did)
        order = np.argsort(ts[on], kind="stable")
        allocated, reserved = mem["total_allocated"][on], mem["total_reserved"][on]
        if max(allocated.max(), reserved.max()) < EMPTY_MEMORY_BYTES:
            continue
        label = "CPU" if dtype == 0 else (gpu_label(did) if dtype == 1 else f"device type {dtype} #{_device_text(did)}")
        out[label] = (ts[on][order], allocated[order].astype(np.float64), reserved[order].astype(np.float64))
    return out


@dataclass(frozen=True)
class _Sources:
    """What every window samples, prepared once per model: the prefix sums that turn a window's counters into
    O(pixels · log samples) work (without them each window summed every kernel and segment of the trace again), and
    each series' maximum over the whole trace (the counter's stable scale)."""

    kernels: list[tuple[int, iv.Intervals, np.ndarray, Levels, np.ndarray]]  # device, busy, its prefix, SM, areas
    queues: list[tuple[int, int, Levels, int]]  # device, stream, levels, max
    copies: list[tuple[int, str, Levels, np.ndarray, float]]  # device, direction, levels, areas, max
    memory: list[tuple[str, np.ndarray, np.ndarray, np.ndarray, int, int]]  # label, ts, allocated, reserved, maxima


@memoized
def _sources(model: TraceModel) -> _Sources:
    kernels = [(device, busy, iv.covered_before(busy), levels, areas(levels))
               for device, (busy, levels) in _kernel_spans(model).items()]
    queues = [(device, stream, levels, int(levels[2].max()) if len(levels[2]) else 0)
              for (device, stream), levels in queue_levels(model).items()]
    copies = [(device, direction, levels, areas(levels), float(levels[2].max()) if len(levels[2]) else 0.0)
              for (device, direction), (_, levels) in copy_rates(model).items()]
    memory = [(label, ts, allocated, reserved, int(allocated.max()) if len(allocated) else 0,
               int(reserved.max()) if len(reserved) else 0)
              for label, (ts, allocated, reserved) in _memory_series(model).items()]
    return _Sources(kernels, queues, copies, memory)


def counters(model: TraceModel, t0: float, t1: float, width_px: int) -> list[dict[str, Any]]:
    edges = np.linspace(t0, t1, max(width_px, 1) + 1)
    px = edges[1] - edges[0]
    src = _sources(model)
    out: list[dict[str, Any]] = []
    for device, busy, before, levels, area in src.kernels:
        util = np.diff(iv.covered_until(busy, edges, before)).clip(min=0.0) / px  # one search of the edges
        sm = np.diff(integral(levels, edges, area)) / px
        out.append({"name": f"{gpu_label(device)} utilization", "unit": "fraction", "max": 1.0,
                    "values": np.round(util, 3).tolist()})
        out.append({"name": f"{gpu_label(device)} est. SM efficiency", "unit": "fraction", "max": 1.0,
                    "values": np.round(sm, 3).tolist()})
    for device, stream, levels, top in src.queues:
        out.append({"name": f"{gpu_label(device)} stream {stream} queue length", "unit": "count", "max": top,
                    "values": np.nan_to_num(max_per_bucket(levels[0], levels[2], edges), nan=0.0).tolist()})
    for device, direction, levels, area, fastest in src.copies:
        gbps = np.diff(integral(levels, edges, area)) / px
        out.append({"name": f"{gpu_label(device)} {direction} bandwidth", "unit": "GB/s", "max": fastest,
                    "values": np.round(gbps, 4).tolist()})
    for label, ts, allocated, reserved, most_allocated, most_reserved in src.memory:
        positions = sample_positions(ts, edges)  # both series are sampled at the same times
        for kind, series, most in (("allocated", allocated, most_allocated), ("reserved", reserved, most_reserved)):
            values = max_per_bucket(ts, series, edges, positions)
            out.append({"name": f"{label} memory {kind}", "unit": "bytes",
                        "max": most,  # over the whole trace: a stable scale
                        "values": _nan_as_none(np.round(values))})
    return out


def _nan_as_none(values: np.ndarray) -> list[float | None]:
    """The values as a list with None where NaN (no sample yet): JSON has no NaN."""
    out: list[float | None] = values.tolist()
    for i in np.flatnonzero(np.isnan(values)).tolist():
        out[i] = None
    return out
