"""GPU Kernel view: kernels by name, or by name + launching operator + launch configuration.

All kernel events count, in steps or not, NCCL kernels included. Blocks per SM and achieved occupancy are
duration-weighted means over the kernels that carry a finite value (missing or infinite values are left out,
not counted as zero, which biased the old plugin's means down). CUPTI writes an occupancy of 0 where it could not
estimate one (cuBLAS ``nvjet_*``, cuDNN-generated kernels: a full block per SM, "0 %"): ``occupancy`` reads that
as unknown, so such a kernel shows "n/a" and stays out of every mean; a 0 under a grid too small to fill one warp
per SM is a real (rounded) value and stays.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..model.arrays import group_rows, take
from ..model.derived import memoized
from ..model.kinds import Kind
from ..model.optree import host_tree
from ..model.tables import TraceModel
from .tensor_cores import op_is_tensor_core_eligible, tensor_core_mask

GROUPINGS = ("name", "name_op")
NO_OPERATOR = "(no operator)"


@memoized
def _kernel_rows(model: TraceModel) -> np.ndarray:
    """Positions in ``device_events`` of the kernels."""
    dev = model["device_events"]
    return np.flatnonzero(model["events"]["kind"][dev["row"]] == Kind.KERNEL)


@memoized
def occupancy(model: TraceModel) -> np.ndarray:
    """Per ``device_events`` row: est. achieved occupancy in %, NaN where unknown (missing, or 0 while the launch
    put at least one warp on every SM: CUPTI's "not estimated")."""
    dev = model["device_events"]
    occ = dev["occupancy"].astype(np.float64, copy=True)
    occ[(occ <= 0) & (np.nan_to_num(dev["warps_per_sm"], nan=0.0) >= 1.0)] = np.nan
    return occ


def _weighted(values: np.ndarray, weights: np.ndarray, group: np.ndarray, n: int) -> np.ndarray:
    ok = np.isfinite(values) & (values >= 0)
    num = np.bincount(group[ok], weights=values[ok] * weights[ok], minlength=n)
    den = np.bincount(group[ok], weights=weights[ok], minlength=n)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


def _dims(x: int, y: int, z: int) -> str | None:
    return None if x < 0 else f"[{x}, {y}, {z}]"


@memoized(closed=True)
def kernel_table(model: TraceModel, group_by: str = "name") -> list[dict[str, Any]]:
    """One row per kernel group; kept on the model (the Kernel view and Diff both read it): never modify it."""
    ev = model["events"]
    dev = model["device_events"]
    k = _kernel_rows(model)
    if len(k) == 0:
        return []
    rows = dev["row"][k]
    names = ev["name"][rows].astype(np.int64)
    dur = np.nan_to_num(ev["dur"][rows], nan=0.0).clip(min=0.0)
    keys = [names]
    op_names = None
    if group_by == "name_op":
        tree = host_tree(model)
        op_node = tree.device_op[k]
        op_names = take(ev["name"][tree.rows], op_node, -1).astype(np.int64)
        keys += [op_names] + [dev[c][k] for c in ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z",
                                                  "registers", "shared_memory")]
    first, group = group_rows(keys)
    n = len(first)
    calls = np.bincount(group, minlength=n)
    total = np.bincount(group, weights=dur, minlength=n)
    mins = np.full(n, np.inf)
    maxs = np.full(n, -np.inf)
    np.minimum.at(mins, group, dur)
    np.maximum.at(maxs, group, dur)
    bps = _weighted(dev["blocks_per_sm"][k], dur, group, n)
    occ = _weighted(occupancy(model)[k], dur, group, n)
    tc = tensor_core_mask(model, names)
    streams: dict[int, set[int]] = {}
    for g, s in zip(group.tolist(), dev["stream"][k].tolist()):
        streams.setdefault(g, set()).add(s)
    out = []
    for g in range(n):
        i = int(first[g])
        row: dict[str, Any] = {
            "name": model.strings[int(names[i])],
            "calls": int(calls[g]),
            "total_us": float(total[g]),
            "mean_us": float(total[g] / calls[g]),
            "min_us": float(mins[g]),
            "max_us": float(maxs[g]),
            "tensor_cores": bool(tc[i]),
            "blocks_per_sm": None if np.isnan(bps[g]) else float(bps[g]),
            "achieved_occupancy": None if np.isnan(occ[g]) else float(occ[g]) / 100.0,
            "streams": sorted(s for s in streams[g] if s >= 0),
        }
        if op_names is not None:
            op = model.text(int(op_names[i]))
            row["operator"] = op or NO_OPERATOR
            row["op_tc_eligible"] = bool(op and op_is_tensor_core_eligible(op))
            j = int(k[i])
            row["grid"] = _dims(int(dev["grid_x"][j]), int(dev["grid_y"][j]), int(dev["grid_z"][j]))
            row["block"] = _dims(int(dev["block_x"][j]), int(dev["block_y"][j]), int(dev["block_z"][j]))
            regs, smem = int(dev["registers"][j]), int(dev["shared_memory"][j])
            row["registers_per_thread"] = regs if regs >= 0 else None
            row["shared_memory"] = smem if smem >= 0 else None
        out.append(row)
    out.sort(key=lambda r: (-r["total_us"], r["name"], r.get("operator", "")))
    return out


def kernel_view(model: TraceModel, group_by: str = "name") -> dict[str, Any]:
    """The GPU kernel page: the table grouped by ``group_by``, its total time, and the tensor-core share."""
    rows = kernel_table(model, group_by)
    return {"group_by": group_by, "rows": rows, "total_us": float(sum(r["total_us"] for r in rows)),
            "tensor_core_ratio": tensor_core_share(model)}


def tensor_core_share(model: TraceModel) -> float | None:
    """Fraction of all kernel time spent in tensor-core kernels (None without kernels)."""
    ev = model["events"]
    k = _kernel_rows(model)
    if len(k) == 0:
        return None
    rows = model["device_events"]["row"][k]
    dur = np.nan_to_num(ev["dur"][rows], nan=0.0).clip(min=0.0)
    all_time = float(dur.sum())
    if all_time <= 0:
        return 0.0
    return float(dur[tensor_core_mask(model, ev["name"][rows])].sum() / all_time)
