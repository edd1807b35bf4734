"""Time by user annotation: host and device time per ``record_function`` range, nested (HTA's GPU time by
annotation, with the host side beside it).

Rows are the distinct paths of annotation names (``forward`` › ``attention``), ``ProfilerStep#N`` left out of the
path (steps are the Overview's). Per path, over the whole trace:
- host_us: the ranges' wall time on their threads;
- device_us: the GPU time (sum of durations) of the kernels, copies and memsets launched from inside the ranges;
  work launched on another thread (autograd's backward thread) is not inside a range of the forward thread;
- gpu_range_us: the wall time of the GPU-side copies of the ranges (``gpu_user_annotation``, Kineto's span from
  the first to the last GPU event the range launched, any thread), when the trace has them: this is HTA's number.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..model.arrays import isin_ints
from ..model.derived import memoized
from ..model.kinds import Kind
from ..model.names import STEP_PREFIX
from ..model.optree import host_tree
from ..model.tables import TraceModel


def _paths(model: TraceModel, nodes: np.ndarray, ann_parent: np.ndarray) -> tuple[np.ndarray, list[tuple[int, ...]]]:
    """Path id of each annotation node (nodes in preorder, so a parent comes before its children)."""
    tree = host_tree(model)
    names = model["events"]["name"][tree.rows[nodes]].tolist()
    index = {int(n): i for i, n in enumerate(nodes.tolist())}
    path_of = np.full(len(nodes), -1, dtype=np.int64)
    ids: dict[tuple[int, ...], int] = {}
    paths: list[tuple[int, ...]] = []
    for i in np.argsort(tree.depth[nodes], kind="stable").tolist():
        parent = int(ann_parent[i])
        prefix = paths[int(path_of[index[parent]])] if parent >= 0 else ()
        key = (*prefix, int(names[i]))
        if key not in ids:
            ids[key] = len(paths)
            paths.append(key)
        path_of[i] = ids[key]
    return path_of, paths


def _annotation_parent(tree: Any, is_ann: np.ndarray) -> np.ndarray:
    """Per node: the nearest annotation strictly above it, -1 if none (one pass per tree level)."""
    up = np.where(tree.parent >= 0, tree.parent, -1)
    out = np.full(len(up), -1, dtype=np.int64)
    current = up.copy()
    while (current >= 0).any():
        ok = current >= 0
        hit = ok & (out < 0) & is_ann[np.maximum(current, 0)]
        out[hit] = current[hit]
        current = np.where(ok & (out < 0), up[np.maximum(current, 0)], -1)
    return out


@memoized
def annotation_times(model: TraceModel) -> dict[str, Any]:
    """One row per annotation path: count, host, device and GPU-range time; empty without annotations."""
    tree = host_tree(model)
    ev = model["events"]
    names = ev["name"][tree.rows]
    steps = isin_ints(names, model.codes_where(lambda s: s.startswith(STEP_PREFIX)))
    is_ann = (tree.kind == Kind.USER_ANNOTATION) & ~steps & (tree.parent != -2)
    nodes = np.flatnonzero(is_ann)
    if len(nodes) == 0:
        return {"rows": [], "has_gpu_ranges": False}
    nearest = _annotation_parent(tree, is_ann)
    node_pos = np.full(tree.size, -1, dtype=np.int64)
    node_pos[nodes] = np.arange(len(nodes))
    path_of, paths = _paths(model, nodes, nearest[nodes])

    # device time: each device event counts for every annotation path above its launch
    dev = model["device_events"]
    dur = np.nan_to_num(ev["dur"][dev["row"]], nan=0.0).clip(min=0.0)
    device_us = np.zeros(len(paths))
    launch = tree.device_launch
    at = np.where(launch >= 0, np.where(is_ann[np.maximum(launch, 0)], launch, nearest[np.maximum(launch, 0)]), -1)
    while (at >= 0).any():
        ok = at >= 0
        np.add.at(device_us, path_of[node_pos[at[ok]]], dur[ok])
        at = np.where(ok, nearest[np.maximum(at, 0)], -1)

    host_us = np.bincount(path_of, weights=tree.end[nodes] - tree.start[nodes], minlength=len(paths))
    count = np.bincount(path_of, minlength=len(paths))
    gpu = _gpu_ranges(model)
    shared = _nested_names(paths)
    rows = [{"path": [model.strings[c] for c in key], "name": model.strings[key[-1]], "depth": len(key) - 1,
             "count": int(count[i]), "host_us": float(host_us[i]), "device_us": float(device_us[i]),
             "gpu_range_us": None if key[-1] in shared else gpu.get(key[-1])}
            for i, key in enumerate(paths)]
    return {"rows": _preorder_by_time(rows), "has_gpu_ranges": bool(gpu)}


def _nested_names(paths: list[tuple[int, ...]]) -> set[int]:
    """Names that occur under more than one path: their GPU ranges cannot be split by path."""
    seen: dict[int, int] = {}
    for key in paths:
        seen[key[-1]] = seen.get(key[-1], 0) + 1
    return {name for name, n in seen.items() if n > 1}


def _gpu_ranges(model: TraceModel) -> dict[int, float]:
    """Wall time of the GPU-side annotation copies, by name code."""
    ev = model["events"]
    rows = np.flatnonzero((ev["kind"] == Kind.GPU_USER_ANNOTATION) & np.isfinite(ev["dur"]))
    if len(rows) == 0:
        return {}
    codes, group = np.unique(ev["name"][rows], return_inverse=True)
    total = np.bincount(group.reshape(-1), weights=ev["dur"][rows].clip(min=0.0), minlength=len(codes))
    return {int(c): float(t) for c, t in zip(codes.tolist(), total.tolist())}


def _preorder_by_time(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Parents before children, siblings by host time, largest first."""
    children: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for r in rows:
        children.setdefault(tuple(r["path"][:-1]), []).append(r)
    out: list[dict[str, Any]] = []

    def visit(prefix: tuple[str, ...]) -> None:
        for r in sorted(children.get(prefix, []), key=lambda r: -float(r["host_us"])):
            out.append(r)
            visit(tuple(r["path"]))

    visit(())
    return out
