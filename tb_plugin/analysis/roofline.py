"""The roofline: each kernel (by name) or operator as a point — arithmetic intensity (FLOPs per byte) against
achieved FLOP/s — under the compute roof of the class it runs in and the memory roof of the device
(docs/guide/roofline.md).

For a point of F FLOPs and B bytes that ran T: intensity I = F / B, achieved F / T, attainable
min(peak, I · bandwidth), bound by memory where I · bandwidth < peak. Its *roof time* max(F / peak, B / bandwidth)
is the least time the device could take for that work, so the fraction of the roof it reached is
roof time / T (= achieved / attainable) and the time it wasted is T − roof time = T · (1 − achieved / attainable),
XProf's ranking. Kernels whose work the trace cannot tell (no shapes, a kernel of an unknown operator) are left out
and counted in ``unestimated``; collective (NCCL) kernels are communication, not a roofline point.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..model.arrays import group_rows
from ..model.derived import memoized
from ..model.optree import host_tree
from ..model.tables import TraceModel
from .communication import collective_kernel_mask
from .device_peaks import NO_OVERRIDE, Device, PeakOverride, match, resolve
from .summary import devices
from .work import ROOFS, SOURCE_TEXT, SOURCES, kernel_work, op_work

GROUPINGS = ("kernel", "operator")
ROOF_LABELS = {"fp64": "FP64 (CUDA cores)", "fp64_tensor": "FP64 tensor cores", "fp32": "FP32 (CUDA cores)",
               "tf32": "TF32 tensor cores", "bf16": "BF16 tensor cores", "fp16": "FP16 tensor cores",
               "fp8": "FP8 tensor cores"}


def trace_device(model: TraceModel) -> dict[str, Any] | None:
    """The ``deviceProperties`` entry of the GPU that ran the most kernel time (the first listed without kernels)."""
    props = devices(model)
    if not props:
        return None
    kw = kernel_work(model)
    dev = model["device_events"]
    ids = dev["device"][kw.kernel]
    dur = np.nan_to_num(model["events"]["dur"][dev["row"][kw.kernel]], nan=0.0).clip(min=0.0)
    if len(ids) and (ids >= 0).any():
        values, inverse = np.unique(ids[ids >= 0], return_inverse=True)
        busiest = int(values[int(np.argmax(np.bincount(inverse.reshape(-1), weights=dur[ids >= 0])))])
        for p in props:
            if p["id"] == busiest:
                return p
    return props[0]


def peaks_of(props: dict[str, Any] | None, override: PeakOverride = NO_OVERRIDE) -> Device | None:
    found = match(props.get("name"), props.get("num_sms"), props.get("memory_bytes")) if props else None
    return resolve(found, override)


def device_answer(props: dict[str, Any] | None, device: Device | None) -> dict[str, Any]:
    """What a page says of the peaks it used: the trace's device, the table entry (or none), its source."""
    name = props.get("name") if props else None
    note: str | None
    if device is None:
        note = (f"{name} is not in the peak table: achieved figures only (set the peaks with --profiler_peaks)"
                if name else "The trace names no GPU: achieved figures only (set the peaks with --profiler_peaks)")
    else:
        note = device.note or None
    return {"name": name, "table_entry": device.name if device else None, "key": device.key if device else None,
            "source": device.source if device else None, "note": note}


def roofs_answer(device: Device | None) -> dict[str, Any]:
    if device is None:
        return {"bandwidth_bytes_per_s": None, "compute": []}
    compute = [{"roof": r, "label": ROOF_LABELS[r], "peak_flops_per_s": float(p),
                "ridge_intensity": float(p / device.bandwidth) if device.bandwidth > 0 else None}
               for r in ROOFS if (p := device.peak(r)) is not None]
    return {"bandwidth_bytes_per_s": float(device.bandwidth) or None, "compute": compute}


def _groups(model: TraceModel, group_by: str, keep: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """Per kept kernel: its group, and each group's name (the kernel's, or its counted call's operator)."""
    kw = kernel_work(model)
    ev = model["events"]
    if group_by == "kernel":
        codes = ev["name"][model["device_events"]["row"][kw.kernel[keep]]].astype(np.int64)
    else:
        ops = op_work(model)
        codes = ev["name"][host_tree(model).rows[ops.node[kw.owner[keep]]]].astype(np.int64)
    first, group = group_rows([codes])
    return group, [model.strings[int(c)] for c in codes[first].tolist()]


def _dominant(group: np.ndarray, key: np.ndarray, weight: np.ndarray, n: int, width: int) -> np.ndarray:
    """Per group: the key value (0..width-1; -1 never wins) carrying the most ``weight``; -1 where none does."""
    table = np.zeros((n, width))
    ok = key >= 0
    np.add.at(table, (group[ok], key[ok].astype(np.int64)), weight[ok])
    best = np.argmax(table, axis=1)
    return np.where(table.max(axis=1, initial=0.0) > 0, best, -1)


@memoized
def roofline_points(model: TraceModel, group_by: str = "kernel") -> dict[str, Any]:
    """The points without a device (what the work is, not how it compares): kept on the model."""
    kw = kernel_work(model)
    ev = model["events"]
    rows = model["device_events"]["row"][kw.kernel]
    dur = np.nan_to_num(ev["dur"][rows], nan=0.0).clip(min=0.0)
    collective = collective_kernel_mask(model)[rows]
    estimated = np.isfinite(kw.flops) | np.isfinite(kw.bytes)
    keep = estimated & ~collective & ((kw.owner >= 0) if group_by == "operator" else True)
    missing = ~estimated & ~collective
    unestimated = _unestimated(model, rows[missing], dur[missing])
    if not keep.any():
        return {"points": [], "unestimated": unestimated, "kernel_time_us": float(dur[~collective].sum())}
    group, names = _groups(model, group_by, keep)
    n = len(names)
    d, f, b = dur[keep], np.nan_to_num(kw.flops[keep], nan=0.0), kw.bytes[keep]
    roof = _dominant(group, kw.roof[keep], f + d * 1e-9, n, len(ROOFS))
    source = _dominant(group, kw.source[keep], d + 1e-12, n, len(SOURCES))
    order = np.lexsort((-d, group))
    rep = order[np.searchsorted(group[order], np.arange(n))]  # each group's longest kernel
    ops = op_work(model)
    owner = kw.owner[keep][rep]
    time = np.bincount(group, weights=d, minlength=n)
    tc = np.bincount(group, weights=d * kw.tensor_cores[keep], minlength=n) > 0.5 * time
    known_bytes = np.bincount(group, weights=np.isfinite(b), minlength=n) > 0
    points = [{
        "name": names[g], "calls": int(c), "time_us": float(time[g]), "flops": float(fl),
        "bytes": float(by) if known_bytes[g] else None, "roof": ROOFS[roof[g]] if roof[g] >= 0 else None,
        "tensor_cores": bool(tc[g]), "source": SOURCES[source[g]] if source[g] >= 0 else None,
        "how": _how(ops, int(owner[g]), int(kw.shared[keep][rep[g]]), SOURCES[source[g]] if source[g] >= 0 else ""),
    } for g, (c, fl, by) in enumerate(zip(np.bincount(group, minlength=n).tolist(),
                                          np.bincount(group, weights=f, minlength=n).tolist(),
                                          np.bincount(group, weights=np.nan_to_num(b, nan=0.0), minlength=n).tolist()))]
    return {"points": points, "unestimated": unestimated, "kernel_time_us": float(dur[~collective].sum())}


def _how(ops: Any, owner: int, shared: int, source: str) -> str:
    """One line on where a point's figures come from: the source, the formula of its (longest) kernel's call, and
    the split among that call's kernels."""
    text = SOURCE_TEXT.get(source, "")
    if owner >= 0 and source != "kernel args":
        formula = ops.texts[int(ops.how[owner])] if len(ops.texts) > int(ops.how[owner]) else ""
        text += f": {formula}" if formula else ""
        if shared > 1:
            text += (f"; the call's work split by duration among the {shared} kernels it launched (its FLOPs among its "
                     "compute kernels)")
    return text


def _unestimated(model: TraceModel, rows: np.ndarray, dur: np.ndarray) -> dict[str, Any]:
    """The kernels whose work is unknown: their number, time, and the names taking the most of it."""
    names = model["events"]["name"][rows].astype(np.int64)
    top: list[dict[str, Any]] = []
    if len(rows):
        first, group = group_rows([names])
        time = np.bincount(group, weights=dur)
        for g in np.argsort(-time, kind="stable")[:5].tolist():
            top.append({"name": model.strings[int(names[first[g]])], "time_us": float(time[g])})
    return {"kernels": len(rows), "time_us": float(dur.sum()), "top": top}


def place(point: dict[str, Any], device: Device | None) -> dict[str, Any]:
    """A point against the roofs: intensity, achieved and attainable FLOP/s, bound, fraction of the roof, waste."""
    t = point["time_us"] * 1e-6
    flops, nbytes = point["flops"], point["bytes"]
    out = {**point, "intensity": flops / nbytes if nbytes else None,
           "achieved_flops_per_s": flops / t if t > 0 else None,
           "achieved_bytes_per_s": nbytes / t if nbytes is not None and t > 0 else None,
           "peak_flops_per_s": None, "attainable_flops_per_s": None, "bound": None, "fraction_of_roof": None,
           "wasted_us": None, "above_roof": False}
    peak = device.peak(point["roof"]) if device is not None and point["roof"] else None
    bw = device.bandwidth if device is not None and device.bandwidth > 0 else None
    if peak is None or t <= 0:
        return out
    memory_time = nbytes / bw if nbytes is not None and bw else 0.0
    roof_time = max(flops / peak, memory_time)
    out["peak_flops_per_s"] = peak
    if flops <= 0:
        pass  # a copy: no FLOP roof to reach, only the memory one (fraction and waste from its bytes)
    elif out["intensity"] is not None and bw:
        out["attainable_flops_per_s"] = min(peak, out["intensity"] * bw)
    elif nbytes is None:
        out["attainable_flops_per_s"] = peak
    out["bound"] = "memory" if memory_time > flops / peak else "compute"
    out["fraction_of_roof"] = roof_time / t
    out["wasted_us"] = max(t - roof_time, 0.0) * 1e6
    out["above_roof"] = roof_time > t * 1.0001
    return out


def roofline(model: TraceModel, group_by: str = "kernel", override: PeakOverride = NO_OVERRIDE,
             limit: int = 500) -> dict[str, Any]:
    """The roofline page: the device's roofs, the points (ranked by wasted time, then time; at most ``limit``),
    and the totals over all of them."""
    props = trace_device(model)
    device = peaks_of(props, override)
    raw = roofline_points(model, group_by)
    points = [place(p, device) for p in raw["points"]]
    points.sort(key=lambda p: (-(p["wasted_us"] if p["wasted_us"] is not None else -1.0), -p["time_us"], p["name"]))
    time = sum(p["time_us"] for p in points)
    flops = sum(p["flops"] for p in points)
    wasted = [p["wasted_us"] for p in points if p["wasted_us"] is not None]
    return {
        "group_by": group_by, "device": device_answer(props, device), "roofs": roofs_answer(device),
        "points": points[:limit], "total_points": len(points),
        "totals": {"kernel_time_us": raw["kernel_time_us"], "estimated_time_us": time, "flops": flops,
                   "achieved_flops_per_s": flops / (time * 1e-6) if time > 0 else None,
                   "wasted_us": sum(wasted) if wasted else None},
        "unestimated": raw["unestimated"],
    }
