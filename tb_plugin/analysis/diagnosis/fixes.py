"""Each finding's fix as a what-if change (``whatif/changes.py``): what the advice does to the trace's events. The
finding's saving is then the replayed step time without it (``diagnosis.replayed``), not a per-rule formula.

One function per rule, named after it; docs/guide/overview.md lists the change each finding replays.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...model import intervals as iv
from ...model.arrays import isin_ints, take
from ...model.kinds import Kind
from ...model.names import is_dataloader, name_mask, step_number
from ...model.optree import host_tree
from ...model.tables import TraceModel
from ..communication import collectives
from ..launches import device_work
from ..operators import operator_nodes
from ..steps import find_steps
from ..whatif.apply import outermost_op
from ..whatif.changes import (
    CaptureGraph,
    Change,
    Combined,
    DropDevice,
    DropHost,
    FasterPeer,
    OverlapComm,
    ScaleDevice,
    SideStream,
)
from ..whatif.constants import (
    KERNEL_LAUNCH_US,
    compute_capability,
    peak_speedup,
    pinned_h2d_gbps,
)
from .causes import readbacks
from .cold_host import recovered, wake_up
from .evidence import creation_nodes
from .gpu_time import spans
from .sync_cost import sync_cost


def _in_steps(model: TraceModel, mask: np.ndarray) -> np.ndarray:
    """Device events (device_work positions) that run in a step, of those in ``mask``."""
    work = device_work(model)
    steps = find_steps(model)
    k = np.searchsorted(steps.start, work.start, side="right") - 1
    inside = (k >= 0) & (work.start < steps.end[np.maximum(k, 0)]) if steps.count else np.zeros(work.size, bool)
    out: np.ndarray = np.flatnonzero(mask & inside)
    return out


def input_wait(model: TraceModel) -> Change:
    """Input-bound: batches ready before they are asked for (workers prefetch): the DataLoader's waits vanish."""
    ev = model["events"]
    rows = np.flatnonzero(isin_ints(ev["kind"], (Kind.CPU_OP, Kind.USER_ANNOTATION))
                          & name_mask(model, ev["name"], is_dataloader))
    return DropHost(id="input_bound", label="DataLoader batches ready in time", rows=rows)


def gpu_creation(model: TraceModel) -> Change:
    """CPU tensor creation: made on the GPU, each costs one kernel launch on the host instead; and the copy that
    took the tensor to the GPU (``_their_copies``) goes, its call and its transfer."""
    tree = host_tree(model)
    nodes = creation_nodes(model)
    copies = _their_copies(model, nodes)
    calls = tree.rows[np.unique(outermost_op(model)[tree.device_op[copies]])] if len(copies) else copies
    per_step = float(model["device_events"]["nbytes"][copies].sum()) / max(find_steps(model).count, 1)
    return Combined(id="cpu_tensor_creation", label="create the tensors on the GPU", parts=(
        DropHost(id="cpu_tensor_creation", label="no creation on the host", rows=tree.rows[nodes],
                 keep_us=KERNEL_LAUNCH_US),
        DropHost(id="cpu_tensor_creation", label="no copy to the GPU", rows=calls),
        DropDevice(id="cpu_tensor_creation", label="no copy to the GPU", rows=model["device_events"]["row"][copies]),
        DropHost(id="cpu_tensor_creation", label="the rest of the step's host work at its warm speed",
                 spans=recovered(model, tree.rows[nodes], per_step, "cpu_creation"))))


def _their_copies(model: TraceModel, nodes: np.ndarray) -> np.ndarray:
    """Device-event positions of the host-to-device copies that take the created tensors to the GPU: per creation,
    the first device work its thread launches after it, where that is a host-to-device copy (a tensor made on the
    host in the step is there to be copied; the trace has no data flow to say more)."""
    tree = host_tree(model)
    work = device_work(model)
    ev = model["events"]
    known = np.flatnonzero(np.isfinite(work.launch_start) & (tree.device_op >= 0))
    if not len(nodes) or not len(known):
        return np.zeros(0, np.int64)
    h2d = (work.kind == Kind.MEMCPY) & name_mask(model, work.name, lambda t: "HtoD" in t)
    pid, tid = ev["pid"][tree.rows[nodes]], ev["tid"][tree.rows[nodes]]
    out: list[np.ndarray] = []
    for p, t in set(zip(pid.tolist(), tid.tolist())):  # per thread (a few), never per creation
        mine = known[(work.launch_pid[known] == p) & (work.launch_tid[known] == t)]
        mine = mine[np.argsort(work.launch_start[mine], kind="stable")]
        ends = tree.end[nodes[(pid == p) & (tid == t)]]
        at = np.searchsorted(work.launch_start[mine], ends, side="left")
        first = mine[at[at < len(mine)]]
        out.append(first[h2d[first]])
    return np.unique(np.concatenate(out)).astype(np.int64) if out else np.zeros(0, np.int64)


def _own_launches(model: TraceModel) -> np.ndarray:
    """Rows of the device events in steps launched one by one (not by a graph launch)."""
    work = device_work(model)
    ev = model["events"]
    graph_launch = name_mask(model, ev["name"][np.maximum(work.launch_row, 0)],
                             lambda s: s.startswith(("cudaGraphLaunch", "cuGraphLaunch", "hipGraphLaunch")))
    rows: np.ndarray = work.row[_in_steps(model, (work.launch_row >= 0) & ~graph_launch)]
    return rows


def graph_replay(model: TraceModel, kind: str) -> Change:
    """Launch-bound: the step's kernels replayed as a CUDA graph (torch.compile(mode='reduce-overhead')): the host
    work from the first launch of a step to its last, Python included, collapses into one graph launch (kernels a
    graph already launches stay as they are; syncs and data loading stay)."""
    return CaptureGraph(id=kind, label="replay the step as a CUDA graph", rows=_own_launches(model), whole=True)


def compiled_step(model: TraceModel, kind: str) -> Change:
    """CPU-bound / GPU idle gaps: the step compiled and replayed as a CUDA graph: every operator's host work in the
    step (the outermost operators, also those that launch nothing) collapses into the graph launch; the Python
    between operators, the DataLoader's waits, CPU tensor creation (findings of their own) and host syncs stay."""
    tree = host_tree(model)
    ev = model["events"]
    parent_op = np.where(tree.parent >= 0, tree.op_of[np.maximum(tree.parent, 0)], -1)
    outer = (tree.kind == Kind.CPU_OP) & ~tree.merged & (parent_op < 0)
    outer &= ~name_mask(model, ev["name"][tree.rows], is_dataloader)
    outer[creation_nodes(model)] = False
    steps = find_steps(model)
    k = np.searchsorted(steps.host_start, tree.start, side="right") - 1
    outer &= (k >= 0) & (tree.end <= take(steps.host_end, k, -np.inf))
    return CaptureGraph(id=kind, label="compile the step and replay it as a CUDA graph", rows=_own_launches(model),
                        region_rows=tree.rows[outer])


def drop_syncs(model: TraceModel) -> Change:
    """Sync-bound: the host never blocks on the GPU: each sync's held time (the call, or the whole .item())
    vanishes, and with it the wait; so do the blocks that read values back and format or print them
    (``causes.readbacks``), each less one launch (the accumulation into a device tensor that replaces it)."""
    cost = sync_cost(model)
    reads = readbacks(model)
    return Combined(id="sync_bound", label="keep values on the GPU (no .item() / syncs)", parts=(
        DropHost(id="sync_bound", label="no blocking calls", spans=(cost.blocked_start, cost.blocked_end)),
        DropHost(id="sync_bound", label="no reading back and printing",
                 spans=(np.minimum(reads.start + KERNEL_LAUNCH_US, reads.end), reads.end))))


def pinned_copies(model: TraceModel, context: dict[str, Any]) -> Change:
    """Pageable copies: pinned and non-blocking, the operator that copies (``.to(device)``: its staging copy on
    the host and the stream sync after it) returns at once (one launch's cost) and the copy runs at the host link's
    pinned bandwidth (``constants.pinned_h2d_gbps``), never slower than measured."""
    work = device_work(model)
    dev = model["device_events"]
    names = model["events"]["name"][work.row]
    pageable = (work.kind == Kind.MEMCPY) & name_mask(model, names, lambda s: "HtoD" in s and "Pageable" in s)
    at = np.flatnonzero(pageable)
    dur = (work.end - work.start)[at]
    nbytes = dev["nbytes"][at].astype(np.float64)
    measured = np.where((dur > 0) & (nbytes > 0), nbytes / np.maximum(dur, 1e-9) / 1e3, np.nan)  # GB/s
    target = pinned_h2d_gbps(compute_capability(context.get("compute_capability")))
    factor = np.where(np.isfinite(measured), np.maximum(target / np.where(measured > 0, measured, target), 1.0), 1.0)
    # the operators that made them (aten::to → copy_: the staging copy and the stream sync after it) cost one launch
    tree = host_tree(model)
    ops = tree.device_op[at]
    outer = _copy_call(model, ops[ops >= 0])
    calls = np.concatenate([tree.rows[np.unique(outer)], work.launch_row[at][ops < 0]])
    calls = calls[calls >= 0]
    return Combined(id="pageable_copies", label="pin the host memory, copy non_blocking", parts=(
        DropHost(id="pageable_copies", label="the copy calls stop blocking", rows=calls, keep_us=KERNEL_LAUNCH_US),
        ScaleDevice(id="pageable_copies", label="pinned bandwidth", rows=work.row[at], factor=factor),
        DropHost(id="pageable_copies", label="the host work after each copy at its warm speed",
                 spans=wake_up(model, calls))))


_COPY_OPS = ("aten::copy_", "aten::_to_copy", "aten::to", "aten::contiguous", "aten::clone")


def _copy_call(model: TraceModel, nodes: np.ndarray) -> np.ndarray:
    """The copy's own call: from the operator that launched it up through the copying operators above it
    (``aten::copy_`` ← ``aten::_to_copy`` ← ``aten::to``), never into what called them (a DataLoader, a module)."""
    tree = host_tree(model)
    copying = (tree.kind == Kind.CPU_OP) & name_mask(model, model["events"]["name"][tree.rows],
                                                      lambda t: t in _COPY_OPS)
    out: np.ndarray = np.asarray(nodes, dtype=np.int64).copy()
    for _ in range(8):  # the copying operators nest a few deep
        up = tree.parent[out]
        climb = (up >= 0) & copying[np.maximum(up, 0)]
        if not climb.any():
            break
        out = np.where(climb, up, out).astype(np.int64)
    return out


def overlap_copies(model: TraceModel) -> Change:
    """Copy-bound: the copies run on a side stream, overlapped with the compute (they still take their time)."""
    work = device_work(model)
    rows = work.row[_in_steps(model, work.kind == Kind.MEMCPY)]
    return SideStream(id="copy_bound", label="overlap the copies with compute", rows=rows)


def tensor_cores(model: TraceModel, context: dict[str, Any]) -> Change:
    """Low tensor-core use: the eligible kernels without tensor cores run at the tensor-core peak over the fp32
    peak of this GPU generation (``constants.peak_speedup``): TF32 for an fp32 run, bf16 where autocast is on."""
    ops = operator_nodes(model)
    tree = host_tree(model)
    eligible = np.zeros(tree.size, dtype=bool)
    eligible[ops.node[ops.eligible]] = True
    parent = tree.parent[ops.node[ops.eligible]]
    above = np.zeros(tree.size, dtype=bool)
    above[parent[(parent >= 0) & eligible[np.maximum(parent, 0)]]] = True
    bottom = ~above[ops.node] & ops.eligible & (np.nan_to_num(ops.tc_self, nan=0.0) <= 0)
    hit = np.zeros(tree.size, dtype=bool)
    hit[ops.node[bottom]] = True
    owner = tree.device_op
    rows = model["device_events"]["row"][(owner >= 0) & hit[np.maximum(owner, 0)]]
    cc = compute_capability(context.get("compute_capability"))
    # TF32 where the generation has it (Ampere on); autocast (fp16 on Volta and Turing) where it has not, or where
    # a low precision is in use already and these operators run outside it
    to = "bf16" if context.get("precision") or peak_speedup(cc, "tf32") <= 1.0 else "tf32"
    factor = peak_speedup(cc, to)
    label = "bf16 autocast for these operators" if to == "bf16" else "TF32 matmuls and convolutions"
    return ScaleDevice(id="low_tensor_cores", label=label, rows=rows, factor=factor)


def overlap_comm(model: TraceModel) -> Change:
    """Communication-bound: the collectives overlap the compute (prefetch, bucketing): other streams no longer
    wait for them."""
    col = collectives(model)
    rows = np.asarray(col.row, dtype=np.int64)[~np.asarray(col.on_host, dtype=bool)]
    return OverlapComm(id="communication_bound", label="overlap the communication with compute", rows=rows)


def even_out(model: TraceModel, extra_us: float) -> Change | None:
    """Straggler: this rank's extra idle host time (per step, the longest gaps with no host activity, up to
    ``extra_us``) vanishes on this rank only; the others keep their pace."""
    steps = find_steps(model)
    if extra_us <= 0 or not steps.count:
        return None
    ev = model["events"]
    host = isin_ints(ev["kind"], (Kind.CPU_OP, Kind.USER_ANNOTATION, Kind.PYTHON_FUNCTION, Kind.RUNTIME, Kind.DRIVER))
    host &= ~name_mask(model, ev["name"], lambda s: step_number(s) is not None)
    idle = iv.subtract(iv.union(steps.host_start, steps.host_end), spans(model, host))
    lo, hi = idle
    step = np.searchsorted(steps.host_start, lo, side="right") - 1
    order = np.lexsort((-(hi - lo), step))
    length = (hi - lo)[order]
    first = np.searchsorted(step[order], step[order], side="left")
    before = np.cumsum(length) - length - (np.cumsum(length) - length)[first]
    take_len = np.clip(extra_us - before, 0.0, length)
    keep = take_len > 0
    starts = lo[order][keep]
    return DropHost(id="straggler", label="even out this rank's extra host time", own_rank=True,
                    spans=(starts, starts + take_len[keep]))


def faster_straggler(job: dict[str, Any]) -> Change | None:
    """Waiting for a straggler: the straggler evens out its extra host time (``extra_idle_us`` per step, where it
    is above 0.5 ms): replayed against this rank's peers, the straggler among them arrives that much earlier."""
    worker, extra = job.get("straggler_worker"), float(job.get("extra_idle_us") or 0.0)
    if not worker or extra <= 500:
        return None
    return FasterPeer(id="straggler_wait", label=f"{worker} evens out its extra host time", worker=str(worker),
                      us_per_step=extra)
