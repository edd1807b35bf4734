"""CUPTI range-profiler counters joined to the kernels that ran them and to those kernels' operators.

With ``experimental_config=_ExperimentalConfig(profiler_metrics=[...], profiler_measure_per_kernel=True)`` Kineto
writes one ``cuda_profiler_range`` event per kernel (its name is the kernel's, its ``args`` the counter values);
the loader keeps them in the ``counters`` table (range row → counter name → value). A range carries no
correlation id, so it is joined by order, as HTA's ``CuptiCounterAnalysis`` does:

- where the trace has kernel events, the *n*-th range of a kernel name is the *n*-th kernel of that name (by start
  time); the kernel's launching operator comes from the host tree. Matching per name, not by position over all
  kernels, keeps one missing or extra range from shifting every later one;
- without kernel events (the range profiler serialises kernels and may run without kernel tracing), the *n*-th
  range is the *n*-th kernel launch call (``cudaLaunchKernel``, ``cuLaunchKernel``, …), HTA's rule, only where
  the counts agree; the operator is the launch's.

Ranges left unmatched keep their counters with no kernel or operator, and the answer says how many matched.
Operators are the innermost (``operator``, e.g. ``aten::cudnn_convolution``) and outermost (``top_operator``, e.g.
``aten::conv2d``) ``cpu_op`` around the launch. Where the SASS instruction counters are present, ``sass_flops`` per
kernel is Σ weight × count over HTA's ``CUDA_SASS_INSTRUCTION_COUNTER_FLOPS`` (an FMA counts 2).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from ..model.arrays import isin_ints, take
from ..model.derived import memoized
from ..model.kinds import Kind
from ..model.lookups import tree_node_of_row
from ..model.names import name_mask
from ..model.optree import host_tree
from ..model.tables import TraceModel

SASS_FLOPS = {f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum": 2.0 if "fma" in op else 1.0
              for op in ("ffma", "fmul", "fadd", "hfma", "hmul", "hadd", "dfma", "dmul", "dadd")}
_LAUNCH = re.compile(r"^(?:cuda|cu|hip|hipModule)LaunchKernel")


def _ranges(model: TraceModel) -> np.ndarray:
    """Event rows of the range-profiler ranges, by start time."""
    ev = model["events"]
    rows = np.flatnonzero(ev["kind"] == Kind.COUNTER_RANGE)
    return rows[np.argsort(ev["ts"][rows], kind="stable")]


def _rank_within(names: np.ndarray) -> np.ndarray:
    """Position of each item among the items of the same name, in the given order."""
    order = np.argsort(names, kind="stable")
    sorted_names = names[order]
    first = np.searchsorted(sorted_names, sorted_names, side="left")
    rank = np.empty(len(names), np.int64)
    rank[order] = np.arange(len(names)) - first
    return rank


def _by_kernel_name(model: TraceModel, ranges: np.ndarray) -> np.ndarray:
    """Per range: the ``device_events`` position of its kernel (same name, same position among that name's), -1."""
    ev, dev = model["events"], model["device_events"]
    k = np.flatnonzero(ev["kind"][dev["row"]] == Kind.KERNEL)
    if not len(k) or not len(ranges):
        return np.full(len(ranges), -1, np.int64)
    k = k[np.argsort(ev["ts"][dev["row"][k]], kind="stable")]
    k_names, r_names = ev["name"][dev["row"][k]].astype(np.int64), ev["name"][ranges].astype(np.int64)
    k_key = k_names * (len(k) + 1) + _rank_within(k_names)
    r_key = r_names * (len(k) + 1) + _rank_within(r_names)
    order = np.argsort(k_key, kind="stable")
    at = np.clip(np.searchsorted(k_key[order], r_key), 0, len(k) - 1)
    hit = k_key[order][at] == r_key
    return np.where(hit, k[order][at], -1)


def _by_launch_order(model: TraceModel, ranges: np.ndarray) -> np.ndarray:
    """Per range: the host-tree node of the n-th kernel launch call (HTA's rule), all -1 unless counts agree."""
    ev = model["events"]
    launch = isin_ints(ev["kind"], (Kind.RUNTIME, Kind.DRIVER)) & name_mask(
        model, ev["name"], lambda s: _LAUNCH.match(s) is not None)
    rows = np.flatnonzero(launch)
    if len(rows) != len(ranges):
        return np.full(len(ranges), -1, np.int64)
    return tree_node_of_row(model)[rows[np.argsort(ev["ts"][rows], kind="stable")]]


def _operators(model: TraceModel, launch_nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Name codes of the innermost and outermost ``cpu_op`` around each launch node (-1 where none)."""
    tree = host_tree(model)
    names = model["events"]["name"][tree.rows]
    inner = take(tree.op_of, launch_nodes, -1)
    outer = inner.copy()
    for _ in range(int(tree.depth.max(initial=0)) + 1):
        up = take(tree.op_of, take(tree.parent, outer, -1), -1)
        if not (up >= 0).any():
            break
        outer = np.where(up >= 0, up, outer)
    return take(names, inner, -1), take(names, outer, -1)


def _matrix(model: TraceModel, ranges: np.ndarray) -> tuple[list[str], np.ndarray]:
    """Counter names (sorted) and a ranges × counters matrix of values (NaN where a range lacks one)."""
    c = model["counters"]
    position = np.full(model.n_events, -1, np.int64)
    position[ranges] = np.arange(len(ranges))
    codes = np.unique(c["metric"])
    metrics = sorted(model.strings[int(x)] for x in codes.tolist())
    col = {model.code(m): i for i, m in enumerate(metrics)}
    values = np.full((len(ranges), len(metrics)), np.nan)
    at = position[c["row"]]
    keep = at >= 0
    cols = np.fromiter((col[int(x)] for x in c["metric"][keep].tolist()), np.int64, count=int(keep.sum()))
    values[at[keep], cols] = c["value"][keep]
    return metrics, values


@memoized
def counter_join(model: TraceModel) -> dict[str, Any]:
    """Every range with its kernel, operators and counters, as columns; computed once per model."""
    ranges = _ranges(model)
    metrics, values = _matrix(model, ranges)
    dev = model["device_events"]
    kernel = _by_kernel_name(model, ranges)
    tree = host_tree(model)
    launch = take(tree.device_launch, kernel, -1)
    how = "kernel name order" if (kernel >= 0).any() else "none"
    if not (kernel >= 0).any() and len(ranges):
        launch = _by_launch_order(model, ranges)
        how = "launch order" if (launch >= 0).any() else "none"
    inner, outer = _operators(model, launch)
    flops = np.zeros(len(ranges))
    has_flops = False
    for name, weight in SASS_FLOPS.items():
        if name in metrics:
            has_flops = True
            flops += weight * np.nan_to_num(values[:, metrics.index(name)], nan=0.0)
    return {"ranges": ranges, "metrics": metrics, "values": values, "kernel_row": take(dev["row"], kernel, -1),
            "operator": inner, "top_operator": outer, "join": how,
            "sass_flops": flops if has_flops else None}


def cupti_counters(model: TraceModel, limit: int = 500) -> dict[str, Any]:
    """Per-kernel rows (the first ``limit`` by start time) with counter values and operators, and per-operator
    sums over every range; an empty answer (no rows, no metrics) for a trace without range-profiler events."""
    j = counter_join(model)
    ev = model["events"]
    ranges, values = j["ranges"], j["values"]
    flops = j["sass_flops"]
    rows = [{
        "id": int(r), "name": model.strings[int(ev["name"][r])], "start_us": float(ev["ts"][r]),
        "dur_us": float(np.nan_to_num(ev["dur"][r], nan=0.0)),
        "kernel_id": None if j["kernel_row"][i] < 0 else int(j["kernel_row"][i]),
        "operator": model.text(int(j["operator"][i])), "top_operator": model.text(int(j["top_operator"][i])),
        "values": [None if np.isnan(v) else float(v) for v in values[i].tolist()],
        "sass_flops": None if flops is None else float(flops[i]),
    } for i, r in enumerate(ranges[:limit].tolist())]
    return {"metrics": j["metrics"], "rows": rows, "total_rows": len(ranges),
            "matched": int(((j["kernel_row"] >= 0) | (j["operator"] >= 0)).sum()), "join": j["join"],
            "operators": _per_operator(model, j), "has_sass_flops": flops is not None}


def _per_operator(model: TraceModel, j: dict[str, Any]) -> list[dict[str, Any]]:
    """Sums per innermost operator over every range (ranges without an operator under null), largest first by the
    first counter."""
    values, op = j["values"], j["operator"]
    if not len(op):
        return []
    codes, group = np.unique(op, return_inverse=True)
    group = group.reshape(-1)
    n = len(codes)
    present = ~np.isnan(values)
    sums = np.stack([np.bincount(group, weights=np.where(present[:, m], values[:, m], 0.0), minlength=n)
                     for m in range(values.shape[1])], axis=1) if values.shape[1] else np.zeros((n, 0))
    seen = np.stack([np.bincount(group, weights=present[:, m].astype(float), minlength=n)
                     for m in range(values.shape[1])], axis=1) if values.shape[1] else np.zeros((n, 0))
    kernels = np.bincount(group, minlength=n)
    flops = None if j["sass_flops"] is None else np.bincount(group, weights=j["sass_flops"], minlength=n)
    first = sums[:, 0] if values.shape[1] else np.zeros(n)
    order = sorted(range(n), key=lambda g: (-float(first[g]), model.text(int(codes[g])) or ""))
    return [{"operator": model.text(int(codes[g])), "kernels": int(kernels[g]),
             "values": [float(sums[g, m]) if seen[g, m] else None for m in range(values.shape[1])],
             "sass_flops": None if flops is None else float(flops[g])} for g in order]
