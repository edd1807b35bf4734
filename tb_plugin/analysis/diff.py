"""Diff view: what changed between a baseline and an experiment trace.

Step-time breakdowns side by side; operator and kernel tables joined by name with deltas (``delta_ratio_*``, a
fraction as its name says, 0.05 for +5 %, is null where the baseline is zero, so nothing reads ``Infinity%``; rows
only in one trace are marked new or gone); and a
drill-down that aligns the two runs' host activity from the step level down. Alignment pairs *anchors* (data
loading, record_function regions, optimizer and backward phases, modules...) by a longest-common-subsequence match
of normalised names — data loader iterators of different classes align as "DataLoader" — and groups what lies
between matched anchors, so a drill-down never drops time.

Step against step: ``diff_summary`` and ``diff_node`` also take one step of each side (``step``, ``exp_step``:
step names as ``steps.find_steps`` gives them; the two traces may be the same file), for "what made the slowest
step slow": the breakdown of the two steps, operators whose host call starts in the step's host bounds and kernels
that start in its device-aware bounds, and the drill-down of the two steps' host activity.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..model.arrays import isin_ints
from ..model.derived import memoized
from ..model.errors import UnknownPath, UnknownStep
from ..model.kinds import Kind
from ..model.names import name_mask, step_number
from ..model.optree import HostTree, host_tree
from ..model.tables import TraceModel
from .align import matcher
from .kernels import kernel_table
from .operators import operator_nodes, operator_table, subtree_device_time
from .steps import CATEGORIES, breakdown, find_steps

_OP_METRICS = ("calls", "host_total_us", "host_self_us", "device_total_us", "device_self_us")
_KERNEL_METRICS = ("calls", "total_us", "mean_us")
_DATALOADER = re.compile(r"^enumerate\((?:DataLoader|DataPipe)\)#")
_OPTIMIZER = re.compile(r"^Optimizer\.(\w+)#?")
_BACKWARD = "autograd::engine::evaluate_function: "


def _ratio(delta: float, base: float) -> float | None:
    return delta / base if base else None


def _join(base: list[dict[str, Any]], exp: list[dict[str, Any]], metrics: tuple[str, ...]) -> list[dict[str, Any]]:
    left = {r["name"]: r for r in base}
    right = {r["name"]: r for r in exp}
    out = []
    for name in sorted(set(left) | set(right)):
        a, b = left.get(name), right.get(name)
        row: dict[str, Any] = {"name": name, "status": "both" if a and b else ("gone" if a else "new")}
        for m in metrics:
            va = float(a[m]) if a else 0.0
            vb = float(b[m]) if b else 0.0
            row[f"baseline_{m}"] = va if a else None
            row[f"experiment_{m}"] = vb if b else None
            row[f"delta_{m}"] = vb - va
            row[f"delta_ratio_{m}"] = _ratio(vb - va, va) if a and b else None
        out.append(row)
    key = "delta_device_total_us" if "device_total_us" in metrics else "delta_total_us"
    out.sort(key=lambda r: -abs(r[key]))
    return out


def step_index(model: TraceModel, step: str | None) -> int | None:
    """The position of step ``step`` (its name, "12" for ProfilerStep#12); None for all steps; :class:`UnknownStep`
    if the trace has no such step."""
    if step is None:
        return None
    names = find_steps(model).names
    if step not in names:
        raise UnknownStep(step, names)
    return names.index(step)


def _step_breakdown(model: TraceModel, k: int | None) -> tuple[dict[str, float], float]:
    """Per category and the step time: the mean per step, or step ``k``'s own."""
    b = breakdown(model)
    if not b.steps.count:
        return dict.fromkeys(CATEGORIES, 0.0), 0.0
    if k is None:
        return {c: float(b.per_step[c].mean()) for c in CATEGORIES}, float(b.steps.duration.mean())
    return {c: float(b.per_step[c][k]) for c in CATEGORIES}, float(b.steps.duration[k])


def _grouped(model: TraceModel, names: np.ndarray, columns: dict[str, np.ndarray]) -> list[dict[str, Any]]:
    """Rows of sums by name code (``calls`` counts), as the operator and kernel tables name them."""
    codes, group = np.unique(names, return_inverse=True)
    group = group.reshape(-1)
    sums = {k: np.bincount(group, weights=v, minlength=len(codes)) for k, v in columns.items()}
    calls = np.bincount(group, minlength=len(codes))
    return [{"name": model.strings[int(c)], "calls": int(calls[g]), **{k: float(v[g]) for k, v in sums.items()}}
            for g, c in enumerate(codes.tolist())]


def _step_operators(model: TraceModel, k: int) -> list[dict[str, Any]]:
    """The operator table's numbers for the operators whose call starts inside step ``k``'s host bounds."""
    ops = operator_nodes(model)
    steps = find_steps(model)
    start = host_tree(model).start[ops.node]
    inside = (start >= steps.host_start[k]) & (start < steps.host_end[k])
    return _grouped(model, ops.name[inside], {
        "host_total_us": ops.host_total[inside], "host_self_us": ops.host_self[inside],
        "device_total_us": ops.device_total[inside], "device_self_us": ops.device_self[inside]})


def _step_kernels(model: TraceModel, k: int) -> list[dict[str, Any]]:
    """The kernel table's numbers for the kernels that start inside step ``k``'s device-aware bounds."""
    ev = model["events"]
    rows = model["device_events"]["row"]
    steps = find_steps(model)
    ts = ev["ts"][rows]
    inside = (ev["kind"][rows] == Kind.KERNEL) & (ts >= steps.start[k]) & (ts < steps.end[k])
    out = _grouped(model, ev["name"][rows[inside]],
                   {"total_us": np.nan_to_num(ev["dur"][rows[inside]], nan=0.0).clip(min=0.0)})
    for r in out:
        r["mean_us"] = r["total_us"] / r["calls"]
    return out


def diff_summary(base: TraceModel, exp: TraceModel, step: str | None = None,
                 exp_step: str | None = None) -> dict[str, Any]:
    """The comparison of the two traces (means per step, sums over the span), or of one step of each."""
    kb, ke = step_index(base, step), step_index(exp, exp_step)
    ab, step_b = _step_breakdown(base, kb)
    ae, step_e = _step_breakdown(exp, ke)
    return {
        "breakdown": {
            "categories": list(CATEGORIES),
            "baseline": ab, "experiment": ae,
            "delta": {c: ae[c] - ab[c] for c in CATEGORIES},
            "step_baseline_us": step_b, "step_experiment_us": step_e,
            "step_delta_us": step_e - step_b, "step_delta_ratio": _ratio(step_e - step_b, step_b),
        },
        "steps": {"baseline": step, "experiment": exp_step},
        "step_names": {"baseline": find_steps(base).names, "experiment": find_steps(exp).names},
        # the tables by name as the Operator and Kernel views memoise them (the same key: computed once for both)
        "operators": _join(operator_table(base, "name") if kb is None else _step_operators(base, kb),
                           operator_table(exp, "name") if ke is None else _step_operators(exp, ke), _OP_METRICS),
        "kernels": _join(kernel_table(base, "name") if kb is None else _step_kernels(base, kb),
                         kernel_table(exp, "name") if ke is None else _step_kernels(exp, ke), _KERNEL_METRICS),
    }


# ---- drill-down ------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Side:
    """One trace's host tree as the drill-down reads it: each node's children as a range of ``child_nodes``, its
    name code, and per distinct name code what it is matched by and whether it is an anchor or a backward root
    (worked out once per name, never a Python object per node: a 10 GB trace's tree has 15 M nodes)."""

    model: TraceModel
    tree: HostTree
    device: np.ndarray
    child_nodes: np.ndarray
    child_start: np.ndarray  # children of node n: child_nodes[child_start[n]:child_start[n + 1]]
    name_code: np.ndarray  # per node
    annotation: np.ndarray  # per node: a user annotation (record_function region)
    keys: dict[int, str]  # per name code: the name it is matched by
    anchor_code: np.ndarray  # per name code: data loading or an optimizer step (a phase of its own)
    backward_code: np.ndarray  # per name code: a backward root

    def children(self, node: int) -> list[int]:
        nodes: list[int] = self.child_nodes[self.child_start[node]:self.child_start[node + 1]].tolist()
        return nodes

    def children_of(self, nodes: np.ndarray) -> np.ndarray:
        """The children of each of ``nodes``, node after node (each one's in its order): :meth:`children` of each,
        concatenated, without a Python list per node (a 10 GB trace's steps have a million children)."""
        lo, hi = self.child_start[nodes], self.child_start[nodes + 1]
        counts = hi - lo
        at = np.repeat(lo - np.concatenate([[0], np.cumsum(counts)[:-1]]), counts) + np.arange(int(counts.sum()))
        out: np.ndarray = self.child_nodes[at]
        return out


@memoized
def _side(model: TraceModel) -> _Side:
    tree = host_tree(model)
    keep = (tree.parent >= -1) & isin_ints(tree.kind, (Kind.CPU_OP, Kind.USER_ANNOTATION))
    nodes = np.flatnonzero(keep & (tree.parent >= 0))
    parents = tree.parent[nodes]
    by_parent = np.argsort(parents, kind="stable")  # children in node order, as appended one by one
    start = np.searchsorted(parents[by_parent], np.arange(tree.size + 1))
    codes = model["events"]["name"][tree.rows]
    keys = {c: _key_of(model.strings[c]) for c in np.unique(codes).tolist()}
    anchor = np.zeros(len(model.strings) + 1, dtype=bool)
    backward = np.zeros(len(model.strings) + 1, dtype=bool)
    for code, key in keys.items():
        anchor[code] = key == "DataLoader" or key.startswith("Optimizer.")
        backward[code] = model.strings[code].startswith(_BACKWARD)
    return _Side(model, tree, subtree_device_time(model), nodes[by_parent], start, codes,
                 tree.kind == Kind.USER_ANNOTATION, keys, anchor, backward)


def _key(side: _Side, node: int) -> str:
    return side.keys[int(side.name_code[node])]


def _key_of(name: str) -> str:
    """The name nodes are matched by: data loaders of any iterator class align, backward roots by their op."""
    if _DATALOADER.match(name):
        return "DataLoader"
    m = _OPTIMIZER.match(name)
    if m:
        return f"Optimizer.{m.group(1)}"
    if step_number(name) is not None:
        return "ProfilerStep"
    return name


@memoized
def _root(model: TraceModel, step: int | None = None) -> tuple[list[int], list[tuple[str, list[int]]]]:
    """The drill-down's top level of one trace (or of its step at position ``step``) and its phases: the start of
    every ``/diff/node`` request, so it is computed once per trace (it visits every host operator: seconds on a
    large trace)."""
    side = _side(model)
    nodes = _top_level(side, step)
    return nodes, _phases(side, nodes)


def _top_level(side: _Side, step: int | None = None) -> list[int]:
    """Host activity inside the steps (or the one step at position ``step``): the children of each step, then
    top-level work of other threads (the autograd thread's backward) that falls inside the steps, in time order."""
    steps = find_steps(side.model)  # the steps alone: not the breakdown of their time (0.27 s of a 2 GB trace)
    tree = side.tree
    host = isin_ints(tree.kind, (Kind.CPU_OP, Kind.USER_ANNOTATION))
    names = side.model["events"]["name"][tree.rows]
    is_step = (tree.parent >= -1) & host & name_mask(side.model, names, lambda s: step_number(s) is not None)
    if step is not None:  # by time: steps of the same number one after another are steps of their own
        lo, hi = float(steps.host_start[step]), float(steps.host_end[step])
        is_step &= (tree.start >= lo) & ((tree.start < hi) | (tree.start == lo))
    step_nodes = np.flatnonzero(is_step)
    if not len(step_nodes) or not steps.count:
        return np.flatnonzero((tree.parent == -1) & host).tolist()  # type: ignore[no-any-return]
    first, last = (0, steps.count - 1) if step is None else (step, step)
    lo, hi = float(steps.start[first]), float(steps.end[last])
    roots = np.flatnonzero((tree.parent == -1) & host & ~is_step & (tree.start >= lo) & (tree.start < hi))
    nodes = np.concatenate([side.children_of(step_nodes), roots])
    return _by_start(tree, nodes)


def _by_start(tree: HostTree, nodes: np.ndarray) -> list[int]:
    """``nodes`` in the order of their start, ties in their given order (a stable sort: the tree holds only events
    with a time, so no start is NaN)."""
    return nodes[np.argsort(tree.start[nodes], kind="stable")].tolist()  # type: ignore[no-any-return]


def _stats(side: _Side, nodes: list[int]) -> dict[str, Any] | None:
    """Count, host and device time of the nodes; added one by one in their order (a cumulative sum, not numpy's
    pairwise sum: the same floats as adding them in a loop)."""
    if not nodes:
        return None
    index = np.asarray(nodes, dtype=np.int64)
    host = float(np.cumsum(side.tree.end[index] - side.tree.start[index])[-1])
    device = float(np.cumsum(side.device[index])[-1])
    return {"count": len(nodes), "host_us": host, "device_us": device}


def _label(side: _Side | None, nodes: list[int]) -> str:
    if side is None or not nodes:
        return ""
    codes = side.name_code[np.asarray(nodes, dtype=np.int64)]
    first, last = side.model.strings[int(codes[0])], side.model.strings[int(codes[-1])]
    if len(nodes) == 1:
        return first
    distinct = np.unique(codes)
    if len({side.model.strings[c] for c in distinct.tolist()}) == 1:
        return f"{first} ×{len(nodes)}"
    if side.backward_code[distinct].all():
        return f"Backward ({len(nodes)} operations)"
    return f"{len(nodes)} operations ({first} … {last})"


_ANCHOR, _BACKWARD_RUN, _OPERATORS_RUN = 0, 1, 2


def _phases(side: _Side, nodes: list[int]) -> list[tuple[str, list[int]]]:
    """Split a sequence at anchors (data loading, record_function regions, optimizer steps); runs of plain
    operators and of backward roots between them become one entry each."""
    if not nodes:
        return []
    index = np.asarray(nodes, dtype=np.int64)
    codes = side.name_code[index]
    kind = np.where(side.anchor_code[codes] | side.annotation[index], _ANCHOR,
                    np.where(side.backward_code[codes], _BACKWARD_RUN, _OPERATORS_RUN))
    # an entry starts at every anchor and wherever the kind of run changes
    starts = np.flatnonzero(np.concatenate([[True], (kind[1:] != kind[:-1]) | (kind[1:] == _ANCHOR)]))
    bounds = np.append(starts, len(nodes)).tolist()
    names = {_BACKWARD_RUN: "Backward", _OPERATORS_RUN: "Operators"}
    return [(side.keys[int(codes[lo])] if kind[lo] == _ANCHOR else names[int(kind[lo])], nodes[lo:hi])
            for lo, hi in itertools.pairwise(bounds)]


def _has_anchor(phases: list[tuple[str, list[int]]]) -> bool:
    return any(key not in ("Operators", "Backward") for key, _ in phases)


def _pair_label(a: _Side, left: list[int], b: _Side, right: list[int]) -> str:
    """One name for an aligned entry; both when the two sides differ (e.g. two DataLoader iterator classes)."""
    la, lb = _label(a, left), _label(b, right)
    if la and lb and la != lb:
        return f"{la} ⇄ {lb}"
    return la or lb


def _align(a: _Side, left: list[int], b: _Side, right: list[int]) -> list[tuple[list[int], list[int]]]:
    """Pairs of (baseline nodes, experiment nodes): matched entries and the groups between them."""
    return _align_phases(a, left, _phases(a, left), b, right, _phases(b, right))


def _align_phases(a: _Side, left: list[int], pa: list[tuple[str, list[int]]], b: _Side, right: list[int],
                  pb: list[tuple[str, list[int]]]) -> list[tuple[list[int], list[int]]]:
    """:func:`_align` with the phases of both sides given: sequences with anchors align phase by phase; plain
    operator sequences align operator by operator."""
    if _has_anchor(pa) or _has_anchor(pb):
        ka, kb = [k for k, _ in pa], [k for k, _ in pb]
        ga, gb = [g for _, g in pa], [g for _, g in pb]
    else:
        ka, kb = _keys(a, left), _keys(b, right)
        ga, gb = [[n] for n in left], [[n] for n in right]
    pairs: list[tuple[list[int], list[int]]] = []
    for tag, i1, i2, j1, j2 in matcher(ka, kb).get_opcodes():
        if tag == "equal":
            pairs.extend((ga[i1 + k], gb[j1 + k]) for k in range(i2 - i1))
        else:
            pairs.append(([n for g in ga[i1:i2] for n in g], [n for g in gb[j1:j2] for n in g]))
    return pairs


def _keys(side: _Side, nodes: list[int]) -> list[str]:
    """The name each node is matched by."""
    return [side.keys[c] for c in side.name_code[np.asarray(nodes, dtype=np.int64)].tolist()]


def _members(side: _Side, nodes: list[int]) -> list[int]:
    """What a drill-down entry expands into: a single node's children; a group's members."""
    return side.children(nodes[0]) if len(nodes) == 1 else list(nodes)


def _expand(a: _Side, left: list[int], b: _Side, right: list[int]) -> list[tuple[list[int], list[int]]]:
    pairs = _align(a, _members(a, left), b, _members(b, right))
    if len(pairs) == 1 and pairs[0] == (left, right):  # nothing aligns inside a group: list its members one by one
        return [([n], []) for n in left] + [([], [n]) for n in right]
    return pairs


def _expandable(a: _Side, left: list[int], b: _Side, right: list[int]) -> bool:
    return bool(_members(a, left) or _members(b, right)) if left or right else False


def diff_node(base: TraceModel, exp: TraceModel, path: str = "0", step: str | None = None,
              exp_step: str | None = None) -> dict[str, Any]:
    """The entry at ``path`` ("0" is all the steps, or the two chosen steps; "0-3" its fourth child…) with its
    aligned children."""
    a, b = _side(base), _side(exp)
    parts = path.split("-")
    if parts[0] != "0" or not all(p.isascii() and p.isdigit() for p in parts):  # not "²": int() refuses it
        raise UnknownPath(path)
    kb, ke = step_index(base, step), step_index(exp, exp_step)
    (left, pa), (right, pb) = _root(base, kb), _root(exp, ke)
    # The root is a group even when it holds a single node.
    pairs = _align_phases(a, left, pa, b, right, pb)
    name = "All steps" if kb is None and ke is None else f"Step {step} ⇄ step {exp_step}"
    for p in parts[1:]:
        k = int(p)
        if k >= len(pairs):
            raise UnknownPath(path)
        left, right = pairs[k]
        name = _pair_label(a, left, b, right)
        pairs = _expand(a, left, b, right)
    return {
        "path": path,
        "name": name,
        "baseline": _stats(a, left), "experiment": _stats(b, right),
        "children": [{
            "path": f"{path}-{i}",
            "name": _pair_label(a, lft, b, rgt),
            "baseline": _stats(a, lft), "experiment": _stats(b, rgt),
            "matched": bool(lft and rgt and _key(a, lft[0]) == _key(b, rgt[0])),
            "expandable": _expandable(a, lft, b, rgt),
        } for i, (lft, rgt) in enumerate(pairs)],
    }
