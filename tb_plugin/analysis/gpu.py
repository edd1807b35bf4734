"""GPU summary per device: utilization, GPU busy, estimated SM efficiency and achieved occupancy, tensor-core share.

Formulas (the old plugin's, with its crashes on ``inf`` and missing values fixed):
- S = [first step start, last step end]; T = |S|; K = union of the device's kernel intervals (copies excluded).
- utilization = |K ∩ S| / T: kernels only, as the old plugin defined it; the headline number. Communication
  kernels (NCCL) count: a rank that waits in an all-reduce for 90 % of its step shows 90 %+ "utilization".
- compute_utilization = |C ∩ S| / T, C = union of the device's kernels that are not communication kernels
  (``communication.collective_kernel_mask``): the GPU doing the model's work. Equal to utilization without
  communication kernels; shown beside it where they differ.
- gpu_busy = |D ∩ S| / T, D = union of all the device's work (kernels, memcpy, memset). HTA, Nsight Systems' "GPU
  busy" and others report this under the same word "utilization", so both are given, side by side, named apart.
- est. SM efficiency = Σ over elementary intervals of min(Σ blocks-per-SM of running kernels, 1) · length, / T.
  Kernels without a finite, positive ``blocks per SM`` are left out.
- est. achieved occupancy = Σ occ_k · |k ∩ S| / Σ |k ∩ S| over kernels with a known occupancy (a fraction;
  ``kernels.occupancy``: CUPTI's 0 for kernels it could not estimate is unknown, not 0).
- tensor-core share = time of tensor-core kernels / time of all kernels on the device (whole trace).

Kernels without a usable ``device`` (missing, ``"x"``) are summarised together under ``id: null`` (unknown device).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..model import intervals as iv
from ..model.derived import memoized
from ..model.kinds import Kind
from ..model.tables import TraceModel
from .communication import collective_kernel_mask
from .kernels import occupancy
from .steps import find_steps
from .summary import devices as device_properties
from .tensor_cores import tensor_core_mask


def _sm_efficiency(start: np.ndarray, end: np.ndarray, bps: np.ndarray, lo: float, hi: float) -> float | None:
    """None where no kernel has blocks per SM (the trace cannot estimate it: "n/a", never 0 %)."""
    if not np.isfinite(bps).any():
        return None
    ok = np.isfinite(bps) & (bps > 0) & (end > start)
    start, end, bps = np.clip(start[ok], lo, hi), np.clip(end[ok], lo, hi), bps[ok]
    keep = end > start
    start, end, bps = start[keep], end[keep], bps[keep]
    if len(start) == 0 or hi <= lo:
        return 0.0
    points = np.concatenate([start, end])
    delta = np.concatenate([bps, -bps])
    order = np.argsort(points, kind="stable")
    points, delta = points[order], delta[order]
    level = np.cumsum(delta)[:-1]
    widths = np.diff(points)
    return float((np.minimum(np.clip(level, 0.0, None), 1.0) * widths).sum() / (hi - lo))


def _device_work(model: TraceModel) -> dict[int, iv.Intervals]:
    """Per device: the union of every device event (kernel, memcpy, memset) on it."""
    ev = model["events"]
    dev = model["device_events"]
    start = ev["ts"][dev["row"]]
    end = start + np.nan_to_num(ev["dur"][dev["row"]], nan=0.0).clip(min=0.0)
    return {gpu: iv.union(start[dev["device"] == gpu], end[dev["device"] == gpu])
            for gpu in np.unique(dev["device"]).tolist()}


@memoized
def gpu_summary(model: TraceModel) -> list[dict[str, Any]]:
    ev = model["events"]
    dev = model["device_events"]
    # a kernel without a usable start time (NaN, or beyond any clock) is on no time line: it is counted nowhere
    kernels = np.flatnonzero((ev["kind"][dev["row"]] == Kind.KERNEL) & np.isfinite(ev["ts"][dev["row"]]))
    if len(kernels) == 0:
        return []
    steps = find_steps(model)
    lo, hi = float(steps.start[0]), float(steps.end[-1])
    span = hi - lo
    rows = dev["row"][kernels]
    start = ev["ts"][rows]
    end = start + np.nan_to_num(ev["dur"][rows], nan=0.0).clip(min=0.0)
    device = dev["device"][kernels]
    work = _device_work(model)
    tc = tensor_core_mask(model, ev["name"][rows])
    comm = collective_kernel_mask(model)[rows]
    props = {d["id"]: d for d in device_properties(model)}
    out = []
    for gpu in sorted(set(device.tolist())):
        on = device == gpu
        s, e = start[on], end[on]
        busy = iv.union(s, e)
        inside = np.clip(np.minimum(e, hi) - np.maximum(s, lo), 0.0, None)
        occ = occupancy(model)[kernels][on]
        occ_ok = np.isfinite(occ) & (occ >= 0) & (inside > 0)
        kernel_time = float((e - s).sum())
        info = props.get(gpu, {}) if gpu >= 0 else {}
        out.append({
            "id": int(gpu) if gpu >= 0 else None,  # kernels whose device is missing or not a number: not "GPU -1"
            "name": info.get("name"),
            "memory_bytes": info.get("memory_bytes"),
            "compute_capability": info.get("compute_capability"),
            "utilization": iv.length_within(busy, lo, hi) / span if span > 0 else None,
            "compute_utilization": iv.length_within(iv.union(s[~comm[on]], e[~comm[on]]), lo, hi) / span
            if span > 0 else None,
            "gpu_busy": iv.length_within(work.get(gpu, iv.EMPTY), lo, hi) / span if span > 0 else None,
            "sm_efficiency": _sm_efficiency(s, e, dev["blocks_per_sm"][kernels][on], lo, hi) if span > 0 else None,
            "achieved_occupancy": float((occ[occ_ok] * inside[occ_ok]).sum() / inside[occ_ok].sum() / 100.0)
            if occ_ok.any() else None,
            "tensor_core_ratio": float((e - s)[tc[on]].sum() / kernel_time) if kernel_time > 0 else None,
            "kernel_time_us": kernel_time,
        })
    return out
