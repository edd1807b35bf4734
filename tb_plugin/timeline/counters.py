"""Counter tracks reduced to the pixel grid: GPU utilization and est. SM efficiency per GPU, memory per device.

Each counter is a value per pixel column of the window: utilization is the busy share of the pixel (union of
kernels), SM efficiency the pixel's mean of min(Σ blocks-per-SM, 1), memory the pixel's maximum (so peaks
survive any zoom level).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..model import intervals as iv
from ..model.arrays import take
from ..model.derived import memoized
from ..model.kinds import Kind
from ..model.tables import TraceModel

Levels = tuple[np.ndarray, np.ndarray, np.ndarray]  # segment starts, ends, level (piecewise constant)


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
        points = np.concatenate([start[ok], end[ok]])
        delta = np.concatenate([bps[ok], -bps[ok]])
        order = np.argsort(points, kind="stable")
        points, delta = points[order], delta[order]
        level = np.minimum(np.clip(np.cumsum(delta)[:-1], 0.0, None), 1.0) if len(points) else np.empty(0)
        out[int(device)] = (iv.union(start, end), (points[:-1], points[1:], level))
    return out


def _integral(levels: Levels, t: np.ndarray) -> np.ndarray:
    """∫ level from -inf to each t, for a piecewise-constant level on sorted segments."""
    seg_start, seg_end, level = levels
    if len(seg_start) == 0:
        return np.zeros(len(t))
    area = np.concatenate([[0.0], np.cumsum(level * (seg_end - seg_start))])
    k = np.searchsorted(seg_start, t, side="right") - 1
    inside = np.clip(t - seg_start[np.maximum(k, 0)], 0.0, (seg_end - seg_start)[np.maximum(k, 0)])
    value: np.ndarray = np.where(k >= 0, area[np.maximum(k, 0)] + level[np.maximum(k, 0)] * inside, 0.0)
    return value


def gpu_label(device: int) -> str:
    """``GPU 0``; a missing or non-numeric device id (stored as -1) is unknown, never "GPU -1"."""
    return f"GPU {_device_text(device)}"


def _device_text(device: int) -> str:
    return str(device) if device >= 0 else "(unknown device)"


@memoized
def _memory_series(model: TraceModel) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    mem = model["memory"]
    ts = model["events"]["ts"][mem["row"]]
    ok = (mem["total_allocated"] >= 0) & np.isfinite(ts)
    out = {}
    for dtype, did in sorted({(int(a), int(b)) for a, b in zip(mem["device_type"][ok].tolist(),
                                                                mem["device_id"][ok].tolist())}):
        on = ok & (mem["device_type"] == dtype) & (mem["device_id"] == did)
        order = np.argsort(ts[on], kind="stable")
        label = "CPU" if dtype == 0 else (gpu_label(did) if dtype == 1 else f"device type {dtype} #{_device_text(did)}")
        out[label] = (ts[on][order], mem["total_allocated"][on][order].astype(np.float64),
                      mem["total_reserved"][on][order].astype(np.float64))
    return out


def _max_per_pixel(ts: np.ndarray, values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Per pixel [edges[i], edges[i+1]): the largest value held at any moment in it (the step function's max)."""
    before = np.searchsorted(ts, edges[:-1], side="right") - 1  # value in force at the pixel's start
    held = take(values, before, np.nan)
    first = np.searchsorted(ts, edges[:-1], side="left")
    last = np.searchsorted(ts, edges[1:], side="left")
    has = last > first
    peak = np.full(len(held), np.nan)
    if has.any():
        # reduceat over each pixel's own event range: starts are the pixels' first events, and the end of each
        # range is the next start (pixels with events are disjoint and in order).
        starts = first[has]
        maxima = np.maximum.reduceat(values[: last[has][-1]], starts)
        peak[has] = maxima
    result: np.ndarray = np.fmax(held, peak)
    return result


def counters(model: TraceModel, t0: float, t1: float, width_px: int) -> list[dict[str, Any]]:
    edges = np.linspace(t0, t1, max(width_px, 1) + 1)
    px = edges[1] - edges[0]
    out: list[dict[str, Any]] = []
    for device, (busy, levels) in _kernel_spans(model).items():
        util = iv.lengths_within(busy, edges[:-1], edges[1:]) / px
        sm = np.diff(_integral(levels, edges)) / px
        out.append({"name": f"{gpu_label(device)} utilization", "unit": "fraction", "max": 1.0,
                    "values": np.round(util, 3).tolist()})
        out.append({"name": f"{gpu_label(device)} est. SM efficiency", "unit": "fraction", "max": 1.0,
                    "values": np.round(sm, 3).tolist()})
    for label, (ts, allocated, reserved) in _memory_series(model).items():
        for kind, series in (("allocated", allocated), ("reserved", reserved)):
            values = _max_per_pixel(ts, series, edges)
            out.append({"name": f"{label} memory {kind}", "unit": "bytes",
                        "max": int(series.max()) if len(series) else 0,  # over the whole trace: a stable scale
                        "values": [None if v != v else v for v in np.round(values).tolist()]})  # NaN: no sample
    return out
