"""Operator view: per operator name (and input shape or call stack), calls and host/device self/total time.

Operators are the non-folded ``cpu_op`` nodes of the host tree, without step, DataLoader, optimizer and DP/DDP
wrapper events. Host self time is the operator's duration minus its children's (operators, annotations and
runtime calls). Device time is the **sum** of the durations of the GPU events (kernels, memcpy, memset) that the
operator launched itself (self) or through its descendants (total); ``device_total_wall_us`` is the same time as a
union, which is smaller only where the operator's GPU work ran concurrently on several streams.
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..model import intervals as iv
from ..model.arrays import group_rows, take
from ..model.derived import memoized
from ..model.kinds import Kind
from ..model.lookups import side_row
from ..model.optree import HostTree, host_tree
from ..model.tables import TraceModel
from . import python_stacks
from .tensor_cores import op_is_tensor_core_eligible, tensor_core_mask

GROUPINGS = ("name", "name_shape", "name_stack")
_NOT_OPERATORS = re.compile(
    r"^(?:ProfilerStep#|enumerate\(DataLoader\)#|enumerate\(DataPipe\)#|Optimizer\.|DataParallel\.forward$"
    r"|DistributedDataParallel\.forward$|\[pl\]\[)"
)


@dataclass(frozen=True)
class OperatorNodes:
    """Per operator node (a subset of host-tree nodes): the numbers that aggregate into the table."""

    node: np.ndarray
    name: np.ndarray  # string codes
    host_total: np.ndarray
    host_self: np.ndarray
    device_self: np.ndarray
    device_total: np.ndarray
    device_total_wall: np.ndarray
    tc_self: np.ndarray
    tc_total: np.ndarray
    eligible: np.ndarray


def _durations(tree: HostTree) -> np.ndarray:
    spans: np.ndarray = tree.end - tree.start
    return spans


@memoized
def tree_levels(model: TraceModel) -> list[np.ndarray]:
    """The host-tree nodes that have a parent, by depth (item d: those at depth d, ascending), sorted once: a loop
    over the levels that selected each level with a mask over all nodes was depth × nodes of work."""
    return host_tree(model).levels


def _subtree_last(model: TraceModel, tree: HostTree) -> np.ndarray:
    """Largest node number in each node's subtree (subtrees are contiguous in preorder)."""
    last = np.arange(tree.size)
    for level in reversed(tree_levels(model)[1:]):
        np.maximum.at(last, tree.parent[level], last[level])
    return last


@memoized
def operator_nodes(model: TraceModel) -> OperatorNodes:
    tree = host_tree(model)
    ev = model["events"]
    dev = model["device_events"]
    names = ev["name"][tree.rows]
    dur = _durations(tree)

    in_tree = tree.parent >= -1  # folded nodes have parent -2
    child_sum = np.zeros(tree.size)
    has_parent = tree.parent >= 0
    np.add.at(child_sum, tree.parent[has_parent], dur[has_parent])
    host_self = np.clip(dur - child_sum, 0.0, None)

    # Device events, sorted by the operator node that launched them: a subtree's events form one range.
    dev_rows = dev["row"]
    d_start = ev["ts"][dev_rows]
    d_dur = np.nan_to_num(ev["dur"][dev_rows], nan=0.0).clip(min=0.0)
    tc = tensor_core_mask(model, ev["name"][dev_rows]) & (ev["kind"][dev_rows] == Kind.KERNEL)
    owner = tree.device_op
    launched = owner >= 0
    order = np.argsort(owner[launched], kind="stable")
    o_node = owner[launched][order]
    o_start, o_dur, o_tc = d_start[launched][order], d_dur[launched][order], tc[launched][order]
    o_stream = dev["stream"][launched][order]
    prefix = np.concatenate([[0.0], np.cumsum(o_dur)])
    prefix_tc = np.concatenate([[0.0], np.cumsum(np.where(o_tc, o_dur, 0.0))])

    last = _subtree_last(model, tree)
    nodes = np.flatnonzero(in_tree & (tree.kind == Kind.CPU_OP) & ~tree.merged)
    keep = ~np.isin(names[nodes], model.codes_where(lambda s: _NOT_OPERATORS.match(s) is not None))
    nodes = nodes[keep]
    # where each node's launches begin in o_node (sorted): the count of launches by nodes before it
    before = np.concatenate([[0], np.cumsum(np.bincount(o_node, minlength=tree.size))])
    self_lo, self_hi, tot_hi = before[nodes], before[nodes + 1], before[last[nodes] + 1]
    device_self = prefix[self_hi] - prefix[self_lo]
    device_total = prefix[tot_hi] - prefix[self_lo]
    tc_self = prefix_tc[self_hi] - prefix_tc[self_lo]
    tc_total = prefix_tc[tot_hi] - prefix_tc[self_lo]

    # Wall (union) time differs from the sum only where a subtree's GPU work spans several streams.
    wall = device_total.copy()
    if len(o_stream):
        switches_before = np.concatenate([[0], np.cumsum(o_stream[1:] != o_stream[:-1])])
        ranged = tot_hi - self_lo >= 2
        switches = np.zeros(len(nodes), dtype=np.int64)
        switches[ranged] = switches_before[tot_hi[ranged] - 1] - switches_before[self_lo[ranged]]
        for i in np.flatnonzero(switches > 0).tolist():
            lo, hi = int(self_lo[i]), int(tot_hi[i])
            wall[i] = iv.total(iv.union(o_start[lo:hi], o_start[lo:hi] + o_dur[lo:hi]))

    # Eligible: by name, or any eligible descendant, or launched a tensor-core kernel itself.
    eligible_node = np.zeros(tree.size, dtype=bool)
    code_ok = model.codes_where(op_is_tensor_core_eligible)
    eligible_node[nodes] = np.isin(names[nodes], code_ok) | (tc_self > 0)
    for level in reversed(tree_levels(model)[1:]):
        eligible_node[tree.parent[level[eligible_node[level]]]] = True
    return OperatorNodes(node=nodes, name=names[nodes], host_total=dur[nodes], host_self=host_self[nodes],
                         device_self=device_self, device_total=device_total, device_total_wall=wall,
                         tc_self=tc_self, tc_total=tc_total, eligible=eligible_node[nodes])


@dataclass(frozen=True)
class CallStacks:
    """Per operator node of :func:`operator_nodes`: ``codes`` indexes ``texts``, the distinct call stacks
    (innermost frame first, ``;``-joined ``file(line): function`` frames), -1 where the call has none.

    The stacks of 2.x traces are built here, not read from the trace, so they live in their own table: the model
    (its string table included) never changes after loading.
    """

    codes: np.ndarray
    texts: list[str]


@memoized
def call_stacks(model: TraceModel) -> CallStacks:
    """The call stack of each operator call.

    PyTorch 1.x wrote a ``Call stack`` arg; 2.x writes ``python_function`` events instead, so there the stack is
    the chain of Python frames enclosing the operator on its thread.
    """
    if len(model["python"]["row"]) and not (model["ops"]["call_stack"] >= 0).any():
        # the stacks come from the frames: what of them the operators do not change, made while the operators are
        with ThreadPoolExecutor(2, thread_name_prefix="pytorch-profiler-frames") as pool:
            sweep = pool.submit(python_stacks.frame_sweep, model)
            chains = pool.submit(python_stacks.source_chains, model)
            rows = host_tree(model).rows[operator_nodes(model).node]
            return _python_stacks(model, rows, sweep.result(), chains.result())
    ops = operator_nodes(model)
    rows = host_tree(model).rows[ops.node]
    ops_row = side_row(model, "ops")[rows]
    arg = take(model["ops"]["call_stack"], ops_row, -1).astype(np.int64)
    if (arg >= 0).any() or len(model["python"]["row"]) == 0:
        return _own_table(arg, model.strings)
    return _python_stacks(model, rows)


def _own_table(string_codes: np.ndarray, strings: list[str]) -> CallStacks:
    """Model string codes (-1: none) renumbered into a table of their own distinct texts."""
    distinct, inverse = np.unique(string_codes, return_inverse=True)
    texts = [strings[c] for c in distinct.tolist() if c >= 0]
    shift = 1 if len(distinct) and distinct[0] < 0 else 0  # -1 sorts first: it stays -1
    return CallStacks(inverse.reshape(-1).astype(np.int64) - shift, texts)


def _python_stacks(model: TraceModel, op_rows: np.ndarray, sweep: python_stacks.FrameSweep | None = None,
                   chains: python_stacks.SourceChains | None = None) -> CallStacks:
    """Call stacks from ``python_function`` events: each operator's innermost enclosing frame, followed up its
    chain of Python parents (source frames only), one chain per distinct frame (``python_stacks``)."""
    frames, inverse = np.unique(python_stacks.innermost_frames(model, op_rows, sweep), return_inverse=True)
    codes = np.full(len(frames), -1, dtype=np.int64)
    used = frames >= 0
    codes[used], texts = python_stacks.stack_table(model, frames[used], chains)
    return CallStacks(codes[inverse.reshape(-1)], texts)


@memoized(closed=True)
def operator_table(model: TraceModel, group_by: str = "name") -> list[dict[str, Any]]:
    """One row per operator group; kept on the model (the Operator view and Diff both read it): never modify it."""
    ops = operator_nodes(model)
    if len(ops.node) == 0:
        return []
    keys = [ops.name.astype(np.int64)]
    shapes = stacks = None
    if group_by == "name_shape":
        rows = host_tree(model).rows[ops.node]
        ops_row = side_row(model, "ops")[rows]
        shapes = take(model["ops"]["input_dims"], ops_row, -1).astype(np.int64)
        keys.append(shapes)
    elif group_by == "name_stack":
        stacks = call_stacks(model)
        keys.append(stacks.codes)
    first, group = group_rows(keys)
    n = len(first)

    def total(values: np.ndarray) -> np.ndarray:
        return np.bincount(group, weights=values, minlength=n)

    calls = np.bincount(group, minlength=n)
    eligible = np.bincount(group, weights=ops.eligible.astype(float), minlength=n) > 0
    with_stack = np.bincount(group, weights=(call_stacks(model).codes >= 0).astype(float), minlength=n) > 0
    columns = {
        "host_self_us": total(ops.host_self), "host_total_us": total(ops.host_total),
        "device_self_us": total(ops.device_self), "device_total_us": total(ops.device_total),
        "device_total_wall_us": total(ops.device_total_wall),
        "tc_self": total(ops.tc_self), "tc_total": total(ops.tc_total),
    }
    out = []
    for g in range(n):
        row: dict[str, Any] = {"name": model.strings[int(ops.name[first[g]])], "calls": int(calls[g])}
        for key in ("host_self_us", "host_total_us", "device_self_us", "device_total_us", "device_total_wall_us"):
            row[key] = float(columns[key][g])
        d_self, d_total = columns["device_self_us"][g], columns["device_total_us"][g]
        row["tc_eligible"] = bool(eligible[g])
        row["has_call_stack"] = bool(with_stack[g])
        row["tc_self_ratio"] = float(columns["tc_self"][g] / d_self) if d_self > 0 else 0.0
        row["tc_total_ratio"] = float(columns["tc_total"][g] / d_total) if d_total > 0 else 0.0
        if shapes is not None:
            row["input_shape"] = model.text(int(shapes[first[g]])) or ""
        if stacks is not None:
            code = int(stacks.codes[first[g]])
            if code < 0:
                continue  # grouping by stack lists only calls that have one
            row["call_stack"] = stacks.texts[code]
        out.append(row)
    has_device = bool(len(model["device_events"]["row"]))
    out.sort(key=lambda r: (-(r["device_self_us"] if has_device else r["host_self_us"]), r["name"]))
    return out


@memoized
def device_time_totals(model: TraceModel) -> tuple[float, float]:
    """(sum of all GPU event durations, time the GPUs were busy as a union per device summed over devices)."""
    ev = model["events"]
    dev = model["device_events"]
    start = ev["ts"][dev["row"]]
    dur = np.nan_to_num(ev["dur"][dev["row"]], nan=0.0).clip(min=0.0)
    busy = 0.0
    for device in np.unique(dev["device"]).tolist():
        on = dev["device"] == device
        busy += iv.total(iv.union(start[on], start[on] + dur[on]))
    return float(dur.sum()), busy


@memoized
def subtree_device_time(model: TraceModel) -> np.ndarray:
    """Per host-tree node: the summed duration of the GPU events launched in its subtree (any node kind)."""
    tree = host_tree(model)
    ev = model["events"]
    dev = model["device_events"]
    dur = np.nan_to_num(ev["dur"][dev["row"]], nan=0.0).clip(min=0.0)
    launch = tree.device_launch
    has = launch >= 0
    order = np.argsort(launch[has], kind="stable")
    node = launch[has][order]
    prefix = np.concatenate([[0.0], np.cumsum(dur[has][order])])
    last = _subtree_last(model, tree)
    before = np.concatenate([[0], np.cumsum(np.bincount(node, minlength=tree.size))])  # launches by earlier nodes
    out: np.ndarray = prefix[before[last + 1]] - prefix[before[:-1]]
    return out


def operator_view(model: TraceModel, group_by: str = "name", name: str = "") -> dict[str, Any]:
    """The Operator view's answer: the table (only the rows of operator ``name`` when given), the device-time
    totals its note compares (summed vs busy), and which groupings the trace can offer (the recording options)."""
    rows = operator_table(model, group_by)
    if name:
        rows = [r for r in rows if r["name"] == name]
    device_sum, device_busy = device_time_totals(model)
    return {
        "group_by": group_by,
        "device_time": "sum",
        "rows": rows,
        "totals": {"device_sum_us": device_sum, "device_busy_us": device_busy},
        # with_stack=True: a `Call stack` arg (1.x) or python_function events (2.x); record_shapes=True: Input Dims
        "has_call_stacks": bool((model["ops"]["call_stack"] >= 0).any() or len(model["python"]["row"])),
        "has_input_shapes": bool((model["ops"]["input_dims"] >= 0).any()),
    }
