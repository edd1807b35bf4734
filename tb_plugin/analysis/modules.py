"""Module view: the nn.Module hierarchy with occurrences, operators, host and device time per module.

Modules come from ``python_function`` frames named ``nn.Module: <Class>_<k>`` (recorded with ``with_stack`` or
``with_modules``), nested through ``Python parent id``. Operators belong to the innermost module frame enclosing
them on their thread. Per occurrence: host total = the frame's duration; host self = that minus its child modules
and its direct operators; device self = GPU time of the operators directly in it; device total adds the child
modules'. Occurrences aggregate per (module name, module id). PyTorch Lightning traces add their hook annotations
(``[pl][profile]…``) and, when present, ``[pl][module]`` events whose dotted names give the hierarchy.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from ..model.arrays import group_rows, isin_ints, take, unique_pairs
from ..model.derived import memoized
from ..model.kinds import Kind
from ..model.nesting import nest
from ..model.optree import host_tree, innermost_containing
from ..model.order import preorder
from ..model.tables import TraceModel
from .operators import operator_nodes, subtree_device_time, tree_levels

MODULE_PREFIX = "nn.Module: "
_PL_MODULE = re.compile(r"^\[pl\]\[module\](?:[\w.]+: )?(?P<path>[\w.]+)$")
_PL_HOOK = "[pl][profile]"


def _module_frames(model: TraceModel) -> np.ndarray:
    """Rows of the python table that are module frames."""
    py = model["python"]
    names = model["events"]["name"][py["row"]]
    is_module = (py["module_id"] >= 0) | isin_ints(names, model.codes_where(lambda s: s.startswith(MODULE_PREFIX)))
    return np.flatnonzero(is_module)


@memoized
def module_occurrences(model: TraceModel) -> dict[str, np.ndarray]:
    """One row per module frame (nesting by time on its thread, which holds even where the Python parent-id
    chain is cut by the profiling window), with its times, direct operators and device time."""
    py = model["python"]
    ev = model["events"]
    frames = _module_frames(model)
    rows = py["row"][frames]
    start = ev["ts"][rows]
    dur = np.nan_to_num(ev["dur"][rows], nan=0.0).clip(min=0.0)
    pid, tid = ev["pid"][rows], ev["tid"][rows]
    order = preorder(pid, tid, start, dur)
    frames, rows, start, dur, pid, tid = frames[order], rows[order], start[order], dur[order], pid[order], tid[order]
    parent, _ = nest(pid, tid, start, start + dur)
    n = len(frames)

    ops = operator_nodes(model)
    tree = host_tree(model)
    op_rows = tree.rows[ops.node]
    op_module = _innermost_on_shared_threads(pid, tid, start, start + dur, ev["pid"][op_rows],
                                            ev["tid"][op_rows], ev["ts"][op_rows])
    # Direct operators: those whose enclosing operator is in another module (or none).
    node_pos = np.full(tree.size, -1, dtype=np.int64)
    node_pos[ops.node] = np.arange(len(ops.node))
    parent_op = take(tree.op_of, tree.parent[ops.node], -1)
    parent_pos = take(node_pos, parent_op, -1)
    parent_module_of_op = take(op_module, parent_pos, -2)
    direct = (op_module >= 0) & (parent_module_of_op != op_module)

    direct_ops = np.bincount(op_module[direct], minlength=n)
    direct_op_time = np.bincount(op_module[direct], weights=ops.host_total[direct], minlength=n)
    inside = op_module >= 0
    device_self = np.bincount(op_module[inside], weights=ops.device_self[inside], minlength=n)
    has_parent = parent >= 0
    child_time = np.bincount(parent[has_parent], weights=dur[has_parent], minlength=n)
    device_total = device_self.copy()
    bwd_host, bwd_device = _backward_of_modules(model, op_module, n)
    for level in _levels_up(parent):  # children before their parents
        for values in (device_total, bwd_host, bwd_device):
            np.add.at(values, parent[level], values[level])
    return {
        "frame": frames,
        "name": ev["name"][rows],
        "module_id": py["module_id"][frames],
        "parent": parent,  # index into these occurrences
        "start": start,
        "dur": dur,
        "host_self": np.clip(dur - child_time - direct_op_time, 0.0, None),
        "operators": direct_ops,
        "device_self": device_self,
        "device_total": device_total,
        "backward_host": bwd_host,
        "backward_device": bwd_device,
    }


def _innermost_on_shared_threads(span_pid: np.ndarray, span_tid: np.ndarray, span_start: np.ndarray,
                                 span_end: np.ndarray, pid: np.ndarray, tid: np.ndarray, ts: np.ndarray) -> np.ndarray:
    """``innermost_containing`` given only the spans on the points' threads and the points on the spans' threads:
    it only ever matches a point to a span of its own thread, so the answer is the same for less to sort (module
    frames and forward operators are on the main thread, backward operators on the autograd thread). The spans
    come in the host tree's preorder (or the module frames', the same rule), and so do those kept."""
    spans = _on_threads(span_pid, span_tid, pid, tid)
    points = _on_threads(pid, tid, span_pid[spans], span_tid[spans])
    out = np.full(len(ts), -1, dtype=np.int64)
    inner = innermost_containing(span_pid[spans], span_tid[spans], span_start[spans], span_end[spans],
                                 pid[points], tid[points], ts[points], ordered=True)
    out[points] = take(spans, inner, -1)
    return out


def _on_threads(pid: np.ndarray, tid: np.ndarray, other_pid: np.ndarray, other_tid: np.ndarray) -> np.ndarray:
    """Indices of the rows (pid, tid) whose thread is among the other rows' threads (compared thread by thread
    where there are a few, else by thread numbers of both sides)."""
    threads = unique_pairs(other_pid, other_tid)
    if len(threads) > 32:
        _, thread = group_rows([np.concatenate([pid, other_pid]), np.concatenate([tid, other_tid])])
        return np.flatnonzero(np.isin(thread[:len(pid)], thread[len(pid):]))
    keep = np.zeros(len(pid), dtype=bool)
    for p, t in threads:
        keep |= (pid == p) & (tid == t)
    return np.flatnonzero(keep)


def _depth(parent: np.ndarray) -> np.ndarray:
    """Nesting depth of each occurrence (0 at the top), one step up all of them at a time."""
    depth = np.zeros(len(parent), dtype=np.int64)
    up = parent.copy()
    while True:
        below = np.flatnonzero(up >= 0)
        if not len(below):
            return depth
        depth[below] += 1
        up[below] = parent[up[below]]


def _levels_up(parent: np.ndarray) -> list[np.ndarray]:
    """The occurrences with a parent by depth, deepest first, each level in reverse preorder: adding a level into
    the parents in this order makes the same float sums as a loop over the occurrences in reverse preorder."""
    depth = _depth(parent)
    return [np.flatnonzero(depth == d)[::-1] for d in range(int(depth.max(initial=0)), 0, -1)]


def _backward_of_modules(model: TraceModel, op_module: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Host and device time of the backward pass of each module occurrence's own operators.

    A ``fwdbwd`` flow joins a forward operator to the backward operator that differentiates it; the backward work
    is that operator's root on the autograd thread (``autograd::engine::evaluate_function: …``). Each root counts
    once per module occurrence.
    """
    host = np.zeros(n)
    device = np.zeros(n)
    flows = model["flows"]
    code = model.code("fwdbwd")
    if code < 0 or n == 0:
        return host, device
    ev = model["events"]
    tree = host_tree(model)
    ops = operator_nodes(model)
    is_flow = flows["cat"] == code
    start_code, finish_code = model.code("s"), model.code("f")
    starts = np.flatnonzero(is_flow & (flows["ph"] == start_code))
    finishes = np.flatnonzero(is_flow & (flows["ph"] == finish_code))
    if not len(starts) or not len(finishes):
        return host, device
    op_rows = tree.rows[ops.node]
    op_end = tree.end[ops.node]
    fwd = _innermost_on_shared_threads(ev["pid"][op_rows], ev["tid"][op_rows], tree.start[ops.node], op_end,
                                       flows["pid"][starts], flows["tid"][starts], flows["ts"][starts])
    cpu = np.flatnonzero((tree.kind == Kind.CPU_OP) & (tree.parent >= -1))
    bwd = _innermost_on_shared_threads(ev["pid"][tree.rows[cpu]], ev["tid"][tree.rows[cpu]], tree.start[cpu],
                                       tree.end[cpu], flows["pid"][finishes], flows["tid"][finishes],
                                       flows["ts"][finishes])
    # The root (top-level node) above each backward operator.
    root = np.arange(tree.size)
    for level in tree_levels(model)[1:]:
        root[level] = root[tree.parent[level]]
    r = _backward_root(flows["id"][finishes], take(root[cpu], bwd, -1), flows["id"][starts])
    module = take(op_module, fwd, -1)
    # each (module, root) once, the first flow's; added in flow order, as a loop would (np.add.at is in order)
    pair = np.flatnonzero((r >= 0) & (module >= 0))
    _, first = np.unique(module[pair] * (tree.size + 1) + r[pair], return_index=True)
    pair = pair[np.sort(first)]
    np.add.at(host, module[pair], tree.end[r[pair]] - tree.start[r[pair]])
    np.add.at(device, module[pair], subtree_device_time(model)[r[pair]])
    return host, device


def _backward_root(finish_id: np.ndarray, finish_root: np.ndarray, start_id: np.ndarray) -> np.ndarray:
    """Per flow start: the backward root of the flow finish with its id (the last such finish where ids repeat,
    as a dict built from them keeps), -1 when none."""
    order = np.argsort(finish_id, kind="stable")
    ids = finish_id[order]
    last = order[np.concatenate([ids[1:] != ids[:-1], [True]])] if len(ids) else order
    ids = finish_id[last]
    if not len(ids):
        return np.full(len(start_id), -1, dtype=np.int64)
    pos = np.minimum(np.searchsorted(ids, start_id), len(ids) - 1)
    out: np.ndarray = np.where(ids[pos] == start_id, finish_root[last[pos]], -1).astype(np.int64)
    return out


_SOURCE_FRAME = re.compile(r"\(\d+\): ")


def _forward_frames(model: TraceModel, frames: np.ndarray) -> np.ndarray:
    """Per module frame (rows of the python table): the string code of its ``forward`` frame
    (``model.py(42): forward``), where the module's code is, or -1. PyTorch 2.x puts ``_call_impl`` between the
    ``nn.Module`` frame and ``forward``, so a ``forward`` child or grandchild counts; the first in time wins."""
    py, ev = model["python"], model["events"]
    names = ev["name"][py["row"]]
    forward = np.flatnonzero(isin_ints(names, model.codes_where(
        lambda t: _SOURCE_FRAME.search(t) is not None and t.endswith("): forward"))))
    out = np.full(len(frames), -1, dtype=np.int64)
    if not len(forward) or not len(frames):
        return out
    forward = forward[np.argsort(ev["ts"][py["row"][forward]], kind="stable")]
    ids = py["python_id"]
    by_id = np.argsort(ids, kind="stable")

    def parent_of(k: np.ndarray) -> np.ndarray:
        """The python-table index of each frame's parent, -1 where unknown."""
        pid = py["parent_id"][k]
        pos = np.clip(np.searchsorted(ids[by_id], pid), 0, len(ids) - 1)
        ok = (pid >= 0) & (ids[by_id][pos] == pid)
        return np.where(ok, by_id[pos], -1)

    up1 = parent_of(forward)
    up2 = np.where(up1 >= 0, parent_of(np.maximum(up1, 0)), -1)
    owner = np.where(np.isin(up1, frames), up1, np.where(np.isin(up2, frames), up2, -1))
    mine = owner >= 0
    owners, first = np.unique(owner[mine], return_index=True)  # forward frames are in time order: the first wins
    pos = np.searchsorted(owners, frames)
    hit = (pos < len(owners)) & (owners[np.minimum(pos, max(len(owners) - 1, 0))] == frames) if len(owners) else \
        np.zeros(len(frames), dtype=bool)
    out[hit] = names[forward[mine][first[pos[hit]]]]
    return out


def _module_label(text: str) -> str:
    return text[len(MODULE_PREFIX):] if text.startswith(MODULE_PREFIX) else text


def module_tree(model: TraceModel) -> list[dict[str, Any]]:
    occ = module_occurrences(model)
    if len(occ["frame"]) == 0:
        return []
    first, group = group_rows([occ["name"], occ["module_id"]])
    m = len(first)
    parent_group = np.full(m, -1, dtype=np.int64)  # the group of the first occurrence's parent in another group
    parent = occ["parent"]
    across = np.flatnonzero((parent >= 0) & (group[np.maximum(parent, 0)] != group))
    groups, at = np.unique(group[across], return_index=True)
    parent_group[groups] = group[parent[across[at]]]

    def total(values: np.ndarray) -> np.ndarray:
        return np.bincount(group, weights=values.astype(np.float64), minlength=m)

    occurrences = np.bincount(group, minlength=m)
    host_total, host_self = total(occ["dur"]), total(occ["host_self"])
    dev_total, dev_self = total(occ["device_total"]), total(occ["device_self"])
    bwd_host, bwd_device = total(occ["backward_host"]), total(occ["backward_device"])
    operators = total(occ["operators"])
    first_start = occ["start"][first]
    source = _forward_frames(model, occ["frame"][first])
    nodes: list[dict[str, Any]] = []
    for g in range(m):
        mean = (dev_total[g] if dev_total[g] > 0 else host_total[g]) / occurrences[g]
        nodes.append({
            "name": _module_label(model.strings[int(occ["name"][first[g]])]),
            "id": int(occ["module_id"][first[g]]),
            "occurrences": int(occurrences[g]),
            "operators": int(operators[g]),
            "host_total_us": float(host_total[g]), "host_self_us": float(host_self[g]),
            "device_total_us": float(dev_total[g]), "device_self_us": float(dev_self[g]),
            "backward_host_us": float(bwd_host[g]), "backward_device_us": float(bwd_device[g]),
            "avg_us": float(mean),
            "source": model.strings[int(source[g])] if source[g] >= 0 else None,
            "children": [],
        })
    roots: list[dict[str, Any]] = []
    for g in np.argsort(first_start, kind="stable").tolist():
        p = int(parent_group[g])
        (nodes[p]["children"] if p >= 0 else roots).append(nodes[g])
    return roots


def module_timeline(model: TraceModel, limit: int = 20000) -> list[dict[str, Any]]:
    """Module occurrences (name, start, duration, depth) for a call-tree timeline, the first ``limit`` in time."""
    occ = module_occurrences(model)
    depth = _depth(occ["parent"])
    order = np.argsort(occ["start"], kind="stable")
    return [{"name": _module_label(model.strings[int(occ["name"][k])]), "start_us": float(occ["start"][k]),
             "dur_us": float(occ["dur"][k]), "depth": int(depth[k])} for k in order[:limit].tolist()]


TIMELINE_LIMIT = 20000  # the occurrences the Module page's timeline asks for (the route's default)


def module_timeline_view(model: TraceModel, limit: int = TIMELINE_LIMIT) -> dict[str, Any]:
    """The first ``limit`` module occurrences in time, and whether there were more."""
    occurrences = module_timeline(model, limit + 1)
    return {"occurrences": occurrences[:limit], "truncated": len(occurrences) > limit}


def lightning_hooks(model: TraceModel) -> list[dict[str, Any]]:
    """``[pl][profile]`` hook annotations on the host, aggregated by name."""
    ev = model["events"]
    codes = model.codes_where(lambda s: s.startswith(_PL_HOOK))
    rows = np.flatnonzero(isin_ints(ev["name"], codes) & isin_ints(ev["kind"], (Kind.USER_ANNOTATION, Kind.CPU_OP)))
    if not len(rows):
        return []
    names, group = np.unique(ev["name"][rows], return_inverse=True)
    group = group.reshape(-1)
    dur = np.nan_to_num(ev["dur"][rows], nan=0.0)
    calls = np.bincount(group, minlength=len(names))
    total = np.bincount(group, weights=dur, minlength=len(names))
    out = [{"name": model.strings[int(c)][len(_PL_HOOK):], "calls": int(n), "host_total_us": float(t)}
           for c, n, t in zip(names.tolist(), calls.tolist(), total.tolist())]
    return sorted(out, key=lambda r: -r["host_total_us"])


def lightning_modules(model: TraceModel) -> list[dict[str, Any]]:
    """``[pl][module]<Type>: <dotted.name>`` events: hierarchy from the dotted names (longest existing prefix)."""
    ev = model["events"]
    codes = model.codes_where(lambda s: _PL_MODULE.match(s) is not None)
    rows = np.flatnonzero(isin_ints(ev["name"], codes))
    if not len(rows):
        return []
    stats: dict[str, dict[str, Any]] = {}
    for r in rows.tolist():
        match = _PL_MODULE.match(model.strings[int(ev["name"][r])])
        assert match is not None
        path = match.group("path")
        row = stats.setdefault(path, {"name": path, "occurrences": 0, "host_total_us": 0.0, "children": []})
        row["occurrences"] += 1
        row["host_total_us"] += float(np.nan_to_num(ev["dur"][r]))
    roots: list[dict[str, Any]] = []
    for path in sorted(stats):
        parts = path.split(".")
        parent = next((".".join(parts[:i]) for i in range(len(parts) - 1, 0, -1) if ".".join(parts[:i]) in stats),
                      None)
        (stats[parent]["children"] if parent else roots).append(stats[path])
    return roots


def has_modules(model: TraceModel) -> bool:
    py = model["python"]
    if (py["module_id"] >= 0).any():
        return True
    ev = model["events"]
    return bool(isin_ints(ev["name"], model.codes_where(lambda s: s.startswith(("[pl][module]", _PL_HOOK)))).any())


def module_view(model: TraceModel) -> dict[str, Any]:
    framework = model.meta.get("Framework")
    return {
        "framework": framework,
        "modules": module_tree(model),
        "lightning_modules": lightning_modules(model),
        "hooks": lightning_hooks(model),
    }
