"""Flame graph: weights on the frame tree of :mod:`.stacks`, as a pruned tree for the view and as folded stacks.

Weights (each counted once, on the frame where it happens; a frame's value adds its descendants'):

* ``self_host_us``: self time of every operator, ``record_function`` annotation and runtime / driver call
  (its duration minus its children's), so the host frames add up to the time those events cover;
* ``self_device_us``: the duration of every kernel, memcpy and memset, on a frame of its own under the operator
  that launched it (``torch.profiler``'s ``self_cuda_time_total`` with the kernel names added);
* ``calls``: one per operator or annotation;
* ``alloc_bytes``: the bytes of every allocation (``[memory]`` record with bytes > 0), under the innermost
  operator that made it.

Folded stacks are the text ``flamegraph.pl`` and speedscope read: one ``frame;frame;… weight`` line per stack
with a non-zero self weight, the weight rounded to a whole unit (µs, bytes or calls).

Search (``flame_search``) runs over every frame, not the pruned tree the view draws: frames too thin to draw still
count, so the matches' weight is the Operator view's and the folded export's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..model.arrays import isin_ints
from ..model.derived import memoized
from ..model.errors import UnknownStep
from ..model.optree import host_tree
from ..model.tables import TraceModel
from .memory import memory_owners, memory_records
from .stacks import WEIGHTED_HOST_KINDS, FrameKind, FrameTree, frame_tree, levels
from .steps import find_steps

METRICS = ("self_host_us", "self_device_us", "calls", "alloc_bytes")
UNITS = {"self_host_us": "us", "self_device_us": "us", "calls": "calls", "alloc_bytes": "bytes"}
DEFAULT_MIN_SHARE = 0.0005  # frames below 0.05 % of the total are left out of the view's tree
MAX_FRAMES = 20_000  # and never more than this many frames, the heaviest kept


@dataclass(frozen=True)
class Leaves:
    """Where one metric's weight lands: a frame, a weight, a time (for the step filter) and a host-tree node
    (for the operator filter), per contributing event."""

    frame: np.ndarray
    weight: np.ndarray
    time: np.ndarray
    node: np.ndarray


@memoized(closed=True)
def leaves(model: TraceModel, metric: str, merge: bool) -> Leaves:
    """The contributing events of ``metric`` (computed once per metric and merge mode)."""
    tree = host_tree(model)
    frames = frame_tree(model, merge)
    if metric == "self_device_us":
        return _device_leaves(model, frames)
    if metric == "alloc_bytes":
        mem, owners = memory_records(model), memory_owners(model)
        keep = (mem.nbytes > 0) & (owners >= 0)
        owner = owners[keep]
        return Leaves(frames.node_frame[owner], mem.nbytes[keep].astype(np.float64), mem.ts[keep], owner)
    host = frames.node_frame >= 0
    if metric == "calls":
        host &= isin_ints(tree.kind, WEIGHTED_HOST_KINDS)
        nodes = np.flatnonzero(host)
        return Leaves(frames.node_frame[nodes], np.ones(len(nodes)), tree.start[nodes], nodes)
    dur = tree.end - tree.start
    child = np.zeros(tree.size)
    has_parent = tree.parent >= 0
    np.add.at(child, tree.parent[has_parent], dur[has_parent])
    nodes = np.flatnonzero(host)
    self_time = np.clip(dur - child, 0.0, None)[nodes]
    return Leaves(frames.node_frame[nodes], self_time, tree.start[nodes], nodes)


def _device_leaves(model: TraceModel, frames: FrameTree) -> Leaves:
    tree = host_tree(model)
    ev = model["events"]
    rows = model["device_events"]["row"]
    dur = np.nan_to_num(ev["dur"][rows], nan=0.0).clip(min=0.0)
    launch = tree.device_launch
    when = np.where(launch >= 0, tree.start[np.maximum(launch, 0)], ev["ts"][rows]) if len(launch) else ev["ts"][rows]
    return Leaves(frames.device_frame, dur, when, frames.device_owner)


def _under_operator(model: TraceModel, name: str) -> np.ndarray:
    """Per host-tree node: whether it is, or runs inside, an operator or annotation named ``name``."""
    tree = host_tree(model)
    code = model.code(name)
    if code < 0:
        return np.zeros(tree.size, dtype=bool)
    flag: np.ndarray = (model["events"]["name"][tree.rows] == code) & isin_ints(tree.kind, WEIGHTED_HOST_KINDS)
    parent = np.where(tree.parent >= 0, tree.parent, -1)
    for level in levels(parent)[1:]:
        flag[level] |= flag[parent[level]]
    return flag


def self_weights(model: TraceModel, metric: str, merge: bool = False, step: str | None = None,
                 operator: str | None = None) -> np.ndarray:
    """Self weight per frame, over the whole trace or one step (by name), optionally only what runs inside the
    operator named ``operator``. Raises :class:`UnknownStep` for an unknown step."""
    if operator is None:
        return _self_weights(model, metric, merge, step)
    lv = _step_leaves(model, metric, merge, step)
    inside = _under_operator(model, operator)
    keep = (lv.node >= 0) & inside[np.maximum(lv.node, 0)] if len(inside) else np.zeros(len(lv.node), bool)
    return np.bincount(lv.frame[keep], weights=lv.weight[keep], minlength=frame_tree(model, merge).size)


@memoized
def _self_weights(model: TraceModel, metric: str, merge: bool, step: str | None) -> np.ndarray:
    lv = _step_leaves(model, metric, merge, step)
    return np.bincount(lv.frame, weights=lv.weight, minlength=frame_tree(model, merge).size)


def _step_leaves(model: TraceModel, metric: str, merge: bool, step: str | None) -> Leaves:
    lv = leaves(model, metric, merge)
    if step is None:
        return lv
    steps = find_steps(model)
    if step not in steps.names:
        raise UnknownStep(step, steps.names)
    i = steps.names.index(step)
    keep = (lv.time >= steps.host_start[i]) & (lv.time < steps.host_end[i])
    return Leaves(lv.frame[keep], lv.weight[keep], lv.time[keep], lv.node[keep])


def total_weights(frames: FrameTree, self_weight: np.ndarray) -> np.ndarray:
    """Each frame's value: its self weight plus its descendants' (children are numbered after parents)."""
    total: np.ndarray = self_weight.astype(np.float64).copy()
    for level in reversed(levels(frames.parent)[1:]):
        np.add.at(total, frames.parent[level], total[level])
    return total


def _kept_frames(frames: FrameTree, total: np.ndarray, min_share: float) -> np.ndarray:
    """Frames at or above ``min_share`` of the whole (at most MAX_FRAMES, the heaviest), in frame order, so
    parents come before children; a parent is always heavier than its child, so the kept set is a tree."""
    grand = float(total[frames.parent < 0].sum()) if frames.size else 0.0
    keep = np.flatnonzero((total > 0) & (total >= min_share * grand))
    if len(keep) > MAX_FRAMES:
        keep = np.sort(keep[np.argsort(-total[keep], kind="stable")[:MAX_FRAMES]])
        # a parent is at least as heavy as its child; ties may cut one: keep only frames whose parent is kept
        kept = np.zeros(frames.size, dtype=bool)
        kept[keep] = True
        for _ in range(64):
            ok = (frames.parent[keep] < 0) | kept[np.maximum(frames.parent[keep], 0)]
            if ok.all():
                break
            kept[keep[~ok]] = False
            keep = keep[ok]
    return keep


def flame_tree(model: TraceModel, metric: str, merge: bool = False, step: str | None = None,
               operator: str | None = None, min_share: float = DEFAULT_MIN_SHARE) -> dict[str, Any]:
    """The view's payload: frames as parallel arrays (name id, parent index, value, self) over a string table,
    pruned below ``min_share`` of the total so the answer stays small on any trace."""
    frames = frame_tree(model, merge)
    own = self_weights(model, metric, merge, step, operator)
    total = total_weights(frames, own)
    keep = _kept_frames(frames, total, min_share)
    index = np.full(frames.size, -1, dtype=np.int64)
    index[keep] = np.arange(len(keep))
    names_used, name_index = np.unique(frames.name[keep], return_inverse=True)
    parent = frames.parent[keep]
    return {
        "metric": metric,
        "unit": UNITS[metric],
        "merge": merge,
        "step": step,
        "operator": operator,
        "total": float(total[frames.parent < 0].sum()) if frames.size else 0.0,
        "python_stacks": frames.python_stacks,
        "steps": find_steps(model).names,
        "strings": [frames.names[i] for i in names_used.tolist()],
        "kinds": [FrameKind(int(frames.name_kind[i])).name.lower() for i in names_used.tolist()],
        "frames": {
            "name": name_index.reshape(-1).tolist(),
            "parent": np.where(parent >= 0, index[np.maximum(parent, 0)], -1).tolist(),
            "value": np.round(total[keep], 3).tolist(),
            "self": np.round(own[keep], 3).tolist(),
        },
        "frames_total": int((total > 0).sum()),
        "min_share": min_share,
    }


def folded_stacks(model: TraceModel, metric: str, merge: bool = False, step: str | None = None,
                  operator: str | None = None) -> str:
    """Folded stacks (``flamegraph.pl``, speedscope): one ``outer;…;inner weight`` line per frame with a self
    weight of at least one whole unit, heaviest first; nothing is pruned."""
    frames = frame_tree(model, merge)
    own = np.rint(self_weights(model, metric, merge, step, operator)).astype(np.int64)
    lines = []
    for f in np.argsort(-own, kind="stable")[:int((own > 0).sum())].tolist():
        path = []
        k = f
        while k >= 0:
            path.append(frames.names[int(frames.name[k])])
            k = int(frames.parent[k])
        lines.append(f"{';'.join(reversed(path))} {int(own[f])}\n")
    return "".join(lines)


def flame_search(model: TraceModel, metric: str, merge: bool = False, step: str | None = None,
                 operator: str | None = None, query: str = "", min_share: float = DEFAULT_MIN_SHARE,
                 ) -> dict[str, Any]:
    """Frames whose name holds ``query`` (case-insensitive) over the whole frame tree: how many (with a weight),
    how many of them the view draws (at or above ``min_share``), and their weight, a match inside a match counted
    once (its outermost match's value holds it). Raises :class:`UnknownStep` for an unknown step."""
    frames = frame_tree(model, merge)
    total = total_weights(frames, self_weights(model, metric, merge, step, operator))
    q = query.strip().lower()
    hit_name = np.fromiter((bool(q) and q in n.lower() for n in frames.names), bool, len(frames.names))
    matched = hit_name[frames.name] & (total > 0) if frames.size else np.zeros(0, bool)
    covered = matched.copy()  # a match at or above each frame
    outermost = matched.copy()
    for level in levels(frames.parent)[1:]:
        above = covered[frames.parent[level]]
        outermost[level] &= ~above
        covered[level] |= above
    drawn = np.zeros(frames.size, dtype=bool)
    drawn[_kept_frames(frames, total, min_share)] = True
    return {"query": query, "metric": metric, "unit": UNITS[metric],
            "total": float(total[frames.parent < 0].sum()) if frames.size else 0.0,
            "count": int(matched.sum()), "drawn": int((matched & drawn).sum()),
            "value": float(total[outermost].sum())}
