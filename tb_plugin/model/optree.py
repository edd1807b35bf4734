"""Host call trees and launch correlations: which operator encloses what, and which launched each GPU event.

Per host thread, operators, annotations and runtime/driver calls nest by time. Each GPU event (kernel, memcpy,
memset) joins its launching runtime or driver call by ``correlation`` and through it the innermost enclosing
operator, so Triton's ``cuLaunchKernel`` launches count like ``cudaLaunchKernel`` ones. Overlapping host events
that do not nest are kept (attached to their innermost full container), never dropped.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from .arrays import isin_ints, take
from .derived import memoized
from .kinds import Kind
from .nesting import MAX_JUMPS, nest, previous_later_end
from .order import common_threads, preorder, sweep_order
from .tables import TraceModel

TREE_KINDS = (Kind.CPU_OP, Kind.USER_ANNOTATION, Kind.RUNTIME, Kind.DRIVER)


@dataclass(frozen=True)
class HostTree:
    """Nodes are host events (ops, annotations, launches); arrays are indexed by node number."""

    rows: np.ndarray  # event row of each node, in preorder per thread
    parent: np.ndarray  # node number of the parent, -1 for a root
    depth: np.ndarray
    kind: np.ndarray
    start: np.ndarray
    end: np.ndarray
    merged: np.ndarray  # True for an operator folded into its same-name parent (autograd-profiler style)
    op_of: np.ndarray  # innermost non-merged CPU_OP node at or above each node, -1 if none
    device_launch: np.ndarray  # per device_events row: the launching runtime/driver node, -1 if unknown
    device_op: np.ndarray  # per device_events row: the operator node that launched it, -1 if none

    @property
    def size(self) -> int:
        return len(self.rows)

    @functools.cached_property
    def levels(self) -> list[np.ndarray]:
        """The nodes that have a parent, by depth (item d: those at depth d, ascending; item 0 empty), sorted once:
        every pass over the tree's levels (a mask's spread to the subtrees below, sums up to the roots) reads them.
        A node's parent is always at a smaller depth (a folded node's children hang from its own parent)."""
        nodes = np.flatnonzero(self.parent >= 0)
        by_depth = nodes[np.argsort(self.depth[nodes], kind="stable")]
        bounds = np.searchsorted(self.depth[by_depth], np.arange(int(self.depth.max(initial=0)) + 2))
        return [by_depth[lo:hi] for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist())]


def _by_depth(depth: np.ndarray) -> list[np.ndarray]:
    if len(depth) == 0:
        return []
    order = np.argsort(depth, kind="stable")
    bounds = np.searchsorted(depth[order], np.arange(int(depth.max()) + 2))
    return [order[bounds[d]:bounds[d + 1]] for d in range(len(bounds) - 1)]


@memoized
def host_tree(model: TraceModel) -> HostTree:
    """The host tree of a model (computed once)."""
    return build_host_tree(model)


def build_host_tree(model: TraceModel) -> HostTree:
    ev = model["events"]
    rows = np.flatnonzero(isin_ints(ev["kind"], TREE_KINDS) & np.isfinite(ev["ts"]))
    start = ev["ts"][rows]
    dur = np.nan_to_num(ev["dur"][rows], nan=0.0, posinf=0.0, neginf=0.0).clip(min=0.0)
    end = start + dur
    pid, tid = ev["pid"][rows], ev["tid"][rows]
    order = preorder(pid, tid, start, dur)
    rows, start, end, pid, tid = rows[order], start[order], end[order], pid[order], tid[order]
    kind = ev["kind"][rows]
    parent, depth = nest(pid, tid, start, end)
    levels = _by_depth(depth)

    merged = _fold_duplicates(kind, ev["name"][rows], parent)
    # Children of a folded node hang from the node it folded into.
    target = np.arange(len(rows))
    for level in levels:
        fold = level[merged[level]]
        target[fold] = target[parent[fold]]
    parent = take(target, parent, -1)
    parent[merged] = -2  # folded nodes are out of the tree

    is_op = (kind == Kind.CPU_OP) & ~merged
    op_of = np.full(len(rows), -1, dtype=np.int64)
    for level in levels:
        up = parent[level]
        inherited = take(op_of, up, -1)
        op_of[level] = np.where(is_op[level], level, inherited)
    op_of[merged] = op_of[target[merged]]

    device_launch, device_op = _correlate(model, rows, kind, op_of)
    return HostTree(rows=rows, parent=parent, depth=depth, kind=kind, start=start, end=end, merged=merged,
                    op_of=op_of, device_launch=device_launch, device_op=device_op)


@memoized
def launch_rows(model: TraceModel) -> np.ndarray:
    """Per ``device_events`` row: the event row of its launching runtime or driver call, -1 if unknown.

    The same join as the host tree's (``host_tree(model).rows[device_launch]``: by correlation id, the first
    launch in the tree's order where ids repeat) without nesting the host threads: the Trace view's arrows and the
    GPU views' launch delays need only this, so they never wait for the tree.
    """
    ev = model["events"]
    rows = np.flatnonzero(isin_ints(ev["kind"], (Kind.RUNTIME, Kind.DRIVER)) & np.isfinite(ev["ts"]))
    corr = ev["correlation"][rows]
    rows, corr = rows[corr >= 0], corr[corr >= 0]
    order = np.argsort(corr, kind="stable")
    rows, corr = rows[order], corr[order]
    _tree_order_among_equal(ev, rows, corr)
    dev_corr = ev["correlation"][model["device_events"]["row"]]
    if not len(rows):
        return np.full(len(dev_corr), -1, dtype=np.int64)
    pos = np.minimum(np.searchsorted(corr, dev_corr), len(corr) - 1)
    found = (dev_corr >= 0) & (corr[pos] == dev_corr)
    return np.where(found, rows[pos], -1).astype(np.int64)


def _tree_order_among_equal(ev: dict[str, np.ndarray], rows: np.ndarray, corr: np.ndarray) -> None:
    """Launches sharing a correlation id (rare: a trace that repeats ids) put in the host tree's order, in place, so
    the first of each is the one the tree's join takes; ordering only those spares sorting every launch."""
    tie = np.flatnonzero(corr[1:] == corr[:-1])
    if not len(tie):
        return
    pos = np.unique(np.concatenate([tie, tie + 1]))
    sub = rows[pos]
    dur = np.nan_to_num(ev["dur"][sub], nan=0.0, posinf=0.0, neginf=0.0).clip(min=0.0)
    rank = np.empty(len(sub), dtype=np.int64)
    rank[preorder(ev["pid"][sub], ev["tid"][sub], ev["ts"][sub], dur)] = np.arange(len(sub))
    rows[pos] = sub[np.lexsort((rank, corr[pos]))]


def _fold_duplicates(kind: np.ndarray, name: np.ndarray, parent: np.ndarray) -> np.ndarray:
    """Operators whose parent is an operator of the same name with no other host children are folded in."""
    n = len(kind)
    merged = np.zeros(n, dtype=bool)
    not_launch = (kind != Kind.RUNTIME) & (kind != Kind.DRIVER)
    with_parent = (parent >= 0) & not_launch
    child_count = np.bincount(parent[with_parent], minlength=n) if n else np.zeros(0, np.int64)
    candidate = (with_parent & (kind == Kind.CPU_OP))
    idx = np.flatnonzero(candidate)
    p = parent[idx]
    ok = (kind[p] == Kind.CPU_OP) & (name[p] == name[idx]) & (child_count[p] == 1)
    merged[idx[ok]] = True
    return merged


def _correlate(model: TraceModel, rows: np.ndarray, kind: np.ndarray,
               op_of: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Device event → launching node (by correlation id) → its operator."""
    ev = model["events"]
    dev_rows = model["device_events"]["row"]
    launch_nodes = np.flatnonzero((kind == Kind.RUNTIME) | (kind == Kind.DRIVER))
    launch_corr = ev["correlation"][rows[launch_nodes]]
    valid = launch_corr >= 0
    launch_nodes, launch_corr = launch_nodes[valid], launch_corr[valid]
    order = np.argsort(launch_corr, kind="stable")
    launch_nodes, launch_corr = launch_nodes[order], launch_corr[order]
    dev_corr = ev["correlation"][dev_rows]
    pos = np.searchsorted(launch_corr, dev_corr)
    pos_ok = pos < len(launch_corr)
    found = pos_ok & (dev_corr >= 0)
    found[pos_ok] &= launch_corr[pos[pos_ok]] == dev_corr[pos_ok]
    device_launch = np.where(found, launch_nodes[np.minimum(pos, max(len(launch_nodes) - 1, 0))], -1) \
        if len(launch_nodes) else np.full(len(dev_rows), -1, dtype=np.int64)
    device_op = take(op_of, device_launch, -1) \
        if len(op_of) else np.full(len(dev_rows), -1, dtype=np.int64)
    return device_launch.astype(np.int64), device_op.astype(np.int64)


def innermost_containing(span_pid: np.ndarray, span_tid: np.ndarray, span_start: np.ndarray, span_end: np.ndarray,
                         pid: np.ndarray, tid: np.ndarray, ts: np.ndarray, ordered: bool = False) -> np.ndarray:
    """For each point (pid, tid, ts): the index of the innermost span on the same thread with start ≤ ts < end.

    -1 where none. Spans should nest (host operators do); for overlapping ones the latest-starting open span wins
    (in the order thread, start, longest first): that is the rule of the stack sweep :func:`_innermost_walk`,
    computed here with numpy. From the last span starting at or before the point, follow "previous span ending
    later" links (each skips only spans that end sooner, so closed ones) until one is still open at the point.
    The links and the follow are pointer jumps; a pathological input that needs too many falls back to the sweep.
    Spans and points are sorted apart (``ordered``: the spans already are, as a subset of the host tree's preorder)
    and met by a binary search per thread: a sort of both together took twice as long on a big trace.
    """
    n_spans = len(span_start)
    if n_spans == 0 or len(ts) == 0:
        return np.full(len(ts), -1, dtype=np.int64)
    spans = np.arange(n_spans) if ordered else sweep_order(span_pid, span_tid, span_start,
                                                           (-(span_end - span_start),))
    points = sweep_order(pid, tid, ts, ())
    span_thread, point_thread = common_threads(span_pid[spans], span_tid[spans], pid[points], tid[points])
    starts = span_start[spans]
    ends = span_end[spans]
    later = previous_later_end(ends, span_thread)
    if later is None:
        return _innermost_walk(span_pid, span_tid, span_start, span_end, pid, tid, ts)
    when = ts[points]
    cand = np.full(len(points), -1, dtype=np.int64)  # the last span before each point, on the point's thread
    s_bounds = np.searchsorted(span_thread, np.arange(int(span_thread[-1]) + 2))
    p_heads = np.flatnonzero(np.concatenate([[True], point_thread[1:] != point_thread[:-1]]))
    for lo, hi in zip(p_heads.tolist(), [*p_heads[1:].tolist(), len(points)]):
        k = int(point_thread[lo])
        if k > int(span_thread[-1]) or s_bounds[k] == s_bounds[k + 1]:
            continue  # no span on this thread
        first, stop = int(s_bounds[k]), int(s_bounds[k + 1])
        at = first + np.searchsorted(starts[first:stop], when[lo:hi], side="right") - 1
        cand[lo:hi] = np.where(at >= first, at, -1)
    active = np.flatnonzero(cand >= 0)  # points whose candidate may still be closed
    for _ in range(MAX_JUMPS):
        active = active[ends[cand[active]] <= when[active]]
        if not len(active):
            out = np.full(len(ts), -1, dtype=np.int64)
            out[points] = np.where(cand >= 0, spans[np.maximum(cand, 0)], -1)
            return out
        cand[active] = later[cand[active]]
        active = active[cand[active] >= 0]
    return _innermost_walk(span_pid, span_tid, span_start, span_end, pid, tid, ts)


def _innermost_walk(span_pid: np.ndarray, span_tid: np.ndarray, span_start: np.ndarray, span_end: np.ndarray,
                         pid: np.ndarray, tid: np.ndarray, ts: np.ndarray) -> np.ndarray:
    """The reference rule of :func:`innermost_containing`: one sweep over spans and points sorted by thread and
    time, with a stack of open spans."""
    n_spans = len(span_start)
    kind = np.concatenate([np.zeros(n_spans, np.int8), np.ones(len(ts), np.int8)])  # spans before points at ties
    t = np.concatenate([span_start, ts])
    length = np.concatenate([span_end - span_start, np.zeros(len(ts))])
    order = np.lexsort((-length, kind, t, np.concatenate([span_tid, tid]), np.concatenate([span_pid, pid])))
    p_all = np.concatenate([span_pid, pid])[order].tolist()
    t_all = np.concatenate([span_tid, tid])[order].tolist()
    when = t[order].tolist()
    is_point = kind[order].tolist()
    idx = order.tolist()
    ends = span_end.tolist()
    out = [-1] * len(ts)
    stack: list[int] = []
    thread: tuple[int, int] | None = None
    for k in range(len(idx)):
        here = (p_all[k], t_all[k])
        if here != thread:
            stack.clear()
            thread = here
        now = when[k]
        while stack and ends[stack[-1]] <= now:
            stack.pop()
        if is_point[k]:
            if stack:
                out[idx[k] - n_spans] = stack[-1]
        else:
            stack.append(idx[k])
    return np.asarray(out, dtype=np.int64)
