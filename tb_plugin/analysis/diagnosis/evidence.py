"""The measured evidence behind each finding: one small function per finding kind, each returning numbers per
step (µs), so a finding's rule only compares and words them. When the HTA-class analyses (idle time split into
host/kernel wait, launch statistics, queue length) land, a function here switches to them and the rules stay.

Intervals are unions over the whole trace (``model.intervals``); ``per_step`` turns them into one length per step
(device-aware step bounds from ``steps.find_steps``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...model import intervals as iv
from ...model.arrays import isin_ints, take, unique_ints
from ...model.derived import memoized
from ...model.kinds import Kind
from ...model.lookups import tree_node_of_row
from ...model.names import name_mask, step_mask
from ...model.optree import host_tree
from ...model.tables import TraceModel
from .. import launches
from ..idle import idle_time
from ..operators import operator_nodes
from ..python_frames import python_frames
from ..steps import breakdown, find_steps, role_intervals
from .causes import claimed, claims, graph_kernels, optimizer_work
from .gpu_time import ends
from .gpu_time import gpu_idle as gpu_idle  # re-exported: the rules read every measure through this module
from .gpu_time import spans as _spans
from .host_only import loader_intervals as loader_intervals
from .sync_cost import sync_cost as sync_cost

PerStep = np.ndarray  # one value per step, µs
_CREATION = re.compile(r"^aten::(?:normal_|uniform_|randn|rand|randint|randperm|random_|bernoulli_|exponential_|"
                       r"multinomial|randn_like|rand_like|arange|linspace|full|ones|zeros|eye)$")


def per_step(model: TraceModel, intervals: iv.Intervals) -> PerStep:
    """Length of ``intervals`` inside each step."""
    steps = find_steps(model)
    return iv.lengths_within(intervals, steps.start, steps.end)


@memoized
def creation_nodes(model: TraceModel) -> np.ndarray:
    """Host-tree nodes of tensor-creation operators (``aten::normal_``, ``randn``, …) that ran on the CPU: they
    launched no device work themselves."""
    tree = host_tree(model)
    ev = model["events"]
    on_gpu = np.zeros(tree.size, dtype=bool)
    launched = tree.device_op[tree.device_op >= 0]
    on_gpu[launched] = True
    creation = name_mask(model, ev["name"][tree.rows], lambda s: _CREATION.match(s) is not None)
    nodes: np.ndarray = np.flatnonzero((tree.kind == Kind.CPU_OP) & ~tree.merged & ~on_gpu & creation)
    # outermost only: randn calls normal_, both match
    parent_op = take(tree.op_of, tree.parent[nodes], -1)
    outer: np.ndarray = nodes[~np.isin(parent_op, nodes)]
    return outer


@memoized
def host_gap_intervals(model: TraceModel) -> iv.Intervals:
    """GPU idle while the host runs operators or Python; DataLoader waits, CPU tensor creation, the GPU-idle
    time charged to host syncs (``sync_cost``) and the time the root causes claim (``causes.claims``: allocator
    churn, compilation, host compute, an unfused optimizer's launch gaps) not counted (they have findings of their
    own): the time a faster host would give back to the GPU."""
    busy = iv.subtract(host_busy(model), loader_intervals(model))
    busy = iv.subtract(busy, creation_intervals(model))
    idle = iv.subtract(iv.subtract(gpu_idle(model), sync_cost(model).charged), claimed(model))
    return iv.intersect(idle, busy)


def host_busy(model: TraceModel) -> iv.Intervals:
    """The union of the host's operators, annotations and Python frames, the steps themselves aside: exactly
    ``_spans`` of them all, from the few not inside another of them (nested by the host tree and the Python frames,
    each checked to lie within its parent). A union of all 3.9 M of a 2 GB trace took 0.2-0.3 s, most of it
    faulting in its temporaries' fresh pages."""
    ev = model["events"]
    tree, frames = host_tree(model), python_frames(model)
    member = isin_ints(tree.kind, (Kind.CPU_OP, Kind.USER_ANNOTATION)) & ~step_mask(model, ev["name"][tree.rows])
    inside = _within_parent(tree.parent, tree.start, tree.end, member)
    frame = ~step_mask(model, frames.name)
    in_frame = _within_parent(frames.parent, frames.start, ends(model, frames.rows), frame)
    rows = np.concatenate([tree.rows[member & ~inside], frames.rows[frame & ~in_frame]])
    return iv.union(ev["ts"][rows], ends(model, rows))


def _within_parent(parent: np.ndarray, start: np.ndarray, end: np.ndarray, member: np.ndarray) -> np.ndarray:
    """Which nodes lie within their parent (``parent`` < 0: none), the parent a ``member`` too."""
    up = np.maximum(parent, 0)
    found: np.ndarray = (parent >= 0) & member[up] & (start[up] <= start) & (end[up] >= end)
    return found


def host_gap(model: TraceModel) -> PerStep:
    """``host_gap_intervals`` per step."""
    return per_step(model, host_gap_intervals(model))


@memoized
def creation_intervals(model: TraceModel) -> iv.Intervals:
    """CPU tensor creation outside the DataLoader (a Dataset that builds samples is data loading)."""
    tree = host_tree(model)
    nodes = creation_nodes(model)
    return iv.subtract(iv.union(tree.start[nodes], tree.end[nodes]), loader_intervals(model))


def creation_time(model: TraceModel) -> PerStep:
    """CPU tensor creation inside steps."""
    return per_step(model, creation_intervals(model))


@dataclass(frozen=True)
class HotOp:
    name: str
    gap_us: float  # per step: GPU-idle time while this operator itself (not an operator inside it) ran
    region: str | None  # the innermost annotation around most of its calls (forward, optimizer, …)


@memoized(closed=True)
def hot_ops_in_gaps(model: TraceModel, limit: int = 3) -> list[HotOp]:
    """The host operators that fill the GPU-idle gaps (DataLoader time aside): each operator's overlap with GPU
    idle time minus that of the operators inside it (self), summed by name; the top ``limit``. CPU-only: the step
    time is all "GPU idle", so this is the operators' self time."""
    tree = host_tree(model)
    steps = find_steps(model)
    if not steps.count:
        return []
    ops = np.flatnonzero((tree.kind == Kind.CPU_OP) & ~tree.merged)
    if not len(ops):
        return []
    idle = gpu_idle(model) if len(model["device_events"]["row"]) else iv.union(steps.start, steps.end)
    idle = iv.subtract(idle, loader_intervals(model))
    overlap = iv.lengths_within(idle, tree.start[ops], tree.end[ops])
    parent_op = take(tree.op_of, tree.parent[ops], -1)
    inner = np.zeros(tree.size)
    has_parent = parent_op >= 0
    np.add.at(inner, parent_op[has_parent], overlap[has_parent])
    own = (overlap - inner[ops]).clip(min=0.0)
    names = model["events"]["name"][tree.rows[ops]]
    codes, group = unique_ints(names, return_inverse=True)
    totals = np.bincount(group.reshape(-1), weights=own, minlength=len(codes))
    out = []
    for g in np.argsort(-totals)[:limit].tolist():
        if totals[g] <= 0:
            break
        members = ops[group.reshape(-1) == g]
        out.append(HotOp(name=model.strings[int(codes[g])], gap_us=float(totals[g]) / steps.count,
                         region=_region(model, members)))
    return out


def _region(model: TraceModel, nodes: np.ndarray) -> str | None:
    """The most common innermost user annotation (not a step) around ``nodes``: where they are called from."""
    tree = host_tree(model)
    ev = model["events"]
    is_region = (tree.kind == Kind.USER_ANNOTATION) & ~step_mask(model, ev["name"][tree.rows])
    found = np.full(len(nodes), -1, dtype=np.int64)
    cur = tree.parent[nodes].copy()
    for _ in range(int(tree.depth.max(initial=0)) + 1):
        open_ = (found < 0) & (cur >= 0)
        if not open_.any():
            break
        hit = open_ & take(is_region, cur, False).astype(bool)
        found[hit] = cur[hit]
        cur = np.where(open_ & ~hit, take(tree.parent, cur, -1), -1)
    found = found[found >= 0]
    if not len(found):
        return None
    codes, counts = np.unique(ev["name"][tree.rows[found]], return_counts=True)
    return model.strings[int(codes[np.argmax(counts)])]


@dataclass(frozen=True)
class Syncs:
    names: list[str]  # the blocking calls
    sources: list[str]  # the operators they ran in (aten::_local_scalar_dense is .item())
    calls: PerStep  # host synchronisations per step


@memoized
def host_syncs(model: TraceModel) -> Syncs:
    """The blocking calls inside steps that ``sync_cost`` replays (a sync nested in another's ``.item()`` counts
    once), by name and by the operator they ran in. Only runtime/driver calls count: ``aten::_local_scalar_dense``
    on a CPU tensor does not wait for anything."""
    ev = model["events"]
    tree = host_tree(model)
    cost = sync_cost(model)
    n = find_steps(model).count
    calls = np.bincount(cost.step, minlength=n)[:n] if n else np.zeros(0)
    op = take(tree.op_of, tree_node_of_row(model)[cost.rows], -1)
    src = np.unique(take(ev["name"][tree.rows], op, -1))
    return Syncs(names=sorted({model.strings[c] for c in np.unique(ev["name"][cost.rows]).tolist()}),
                 sources=sorted(model.strings[c] for c in src.tolist() if c >= 0), calls=calls.astype(np.float64))


@dataclass(frozen=True)
class Launches:
    kernels: int  # kernels launched one by one inside steps (a graph launch's kernels are not)
    short: int  # of them, shorter than the host call that launched them
    graphed: int  # kernels launched inside steps by graph launches (cudaGraphLaunch)
    rows: np.ndarray  # the launch calls of the short kernels
    median_kernel_us: float
    median_launch_us: float
    overhead: PerStep  # Σ (launch − kernel) over the short ones, capped at the step's GPU idle not charged to syncs


@memoized
def launch_overhead(model: TraceModel) -> Launches:
    tree = host_tree(model)
    ev = model["events"]
    dev = model["device_events"]
    steps = find_steps(model)
    kernel = (ev["kind"][dev["row"]] == Kind.KERNEL) & (tree.device_launch >= 0)
    graph = graph_kernels(model)
    # an unfused optimizer's kernels are its finding's (the fix is fused=True, not a graph of the whole step)
    theirs = np.isin(dev["row"], optimizer_work(model).device_rows) if "unfused_optimizer" in claims(model) else False
    k = np.flatnonzero(kernel & ~graph & ~theirs)
    launch = tree.device_launch[k]
    l_start = tree.start[launch]
    step = np.searchsorted(steps.start, l_start, side="right") - 1
    inside = (step >= 0) & (l_start < take(steps.end, step, -np.inf))
    k, launch, step = k[inside], launch[inside], step[inside]
    k_dur = np.nan_to_num(ev["dur"][dev["row"][k]], nan=0.0)
    l_dur = tree.end[launch] - tree.start[launch]
    short = k_dur < l_dur
    n = steps.count
    extra = np.bincount(step[short], weights=(l_dur - k_dur)[short], minlength=n)[:n] if n else np.zeros(0)
    # the GPU-idle time a sync costs (``sync_cost``) is the sync's: kernels launched into a queue a sync drained
    # wait for their launches because of the sync, so the overhead is capped at the idle time left; so is the
    # time a root cause claims (an unfused optimizer's launch gaps are the optimizer's)
    left = iv.subtract(iv.subtract(gpu_idle(model), sync_cost(model).charged), claimed(model))
    overhead = np.minimum(extra, per_step(model, left))
    g_step = np.searchsorted(steps.start, tree.start[tree.device_launch[graph]], side="right") - 1
    graphed = int(((g_step >= 0) & (tree.start[tree.device_launch[graph]] < take(steps.end, g_step, -np.inf))).sum())
    return Launches(kernels=len(k), short=int(short.sum()), graphed=graphed, rows=tree.rows[launch[short]],
                    median_kernel_us=float(np.median(k_dur)) if len(k) else 0.0,
                    median_launch_us=float(np.median(l_dur)) if len(k) else 0.0, overhead=overhead)


@dataclass(frozen=True)
class Copies:
    pageable: int  # host-to-device copies from pageable memory (whole trace)
    nbytes: int
    time: PerStep  # their device time per step
    pinned: int  # host-to-device copies from pinned memory
    per_step: float = 0.0  # pageable copies that start inside a step, per step (a mean, like ``time``)
    bytes_per_step: float = 0.0  # and their bytes per step


@memoized
def h2d_copies(model: TraceModel) -> Copies:
    ev = model["events"]
    dev = model["device_events"]
    names = ev["name"][dev["row"]]
    copies = ev["kind"][dev["row"]] == Kind.MEMCPY
    pageable = copies & name_mask(model, names, lambda s: "HtoD" in s and "Pageable" in s)
    pinned = copies & name_mask(model, names, lambda s: "HtoD" in s and "Pinned" in s)
    rows = dev["row"][pageable]
    mask = np.zeros(model.n_events, dtype=bool)
    mask[rows] = True
    steps = find_steps(model)
    start = ev["ts"][rows]
    k = np.searchsorted(steps.start, start, side="right") - 1
    inside = (k >= 0) & (start < steps.end[np.maximum(k, 0)]) if steps.count else np.zeros(len(rows), bool)
    n = max(steps.count, 1)
    return Copies(pageable=int(pageable.sum()), nbytes=int(dev["nbytes"][pageable].clip(min=0).sum()),
                  time=per_step(model, _spans(model, mask)), pinned=int(pinned.sum()),
                  per_step=float(inside.sum()) / n,
                  bytes_per_step=float(dev["nbytes"][pageable][inside].clip(min=0).sum()) / n)


@memoized
def copy_directions(model: TraceModel) -> tuple[dict[str, float], np.ndarray, str]:
    """Per step: device time of copies by direction (HtoD, DtoH, DtoD, PtoP), the launch calls of the dominant
    direction's copies inside steps, and that direction."""
    ev = model["events"]
    dev = model["device_events"]
    tree = host_tree(model)
    names = ev["name"][dev["row"]]
    copies = ev["kind"][dev["row"]] == Kind.MEMCPY
    n = max(find_steps(model).count, 1)
    out: dict[str, float] = {}
    for d in ("HtoD", "DtoH", "DtoD", "PtoP"):
        mask = np.zeros(model.n_events, dtype=bool)
        mask[dev["row"][copies & name_mask(model, names, lambda s, d=d: d in s)]] = True
        out[d] = float(per_step(model, _spans(model, mask)).sum()) / n
    top = max(out, key=lambda d: out[d])
    mine = copies & name_mask(model, names, lambda s: top in s) & (tree.device_launch >= 0)
    launches = tree.device_launch[mine]
    steps = find_steps(model)
    k = np.searchsorted(steps.start, tree.start[launches], side="right") - 1
    inside = (k >= 0) & (tree.start[launches] < take(steps.end, k, -np.inf))
    return out, tree.rows[launches[inside]], top


@dataclass(frozen=True)
class TensorCoreGap:
    eligible: PerStep  # kernel time of tensor-core-eligible operators without tensor-core kernels, per step
    share: float  # of all kernel time


def tensor_core_gap(model: TraceModel) -> TensorCoreGap:
    """Kernel time of the bottom-most tensor-core-eligible operators (matmul, convolution, attention) whose
    kernels use no tensor cores."""
    ops = operator_nodes(model)
    tree = host_tree(model)
    steps = find_steps(model)
    eligible = np.zeros(tree.size, dtype=bool)
    eligible[ops.node[ops.eligible]] = True
    parent = tree.parent[ops.node[ops.eligible]]
    above = np.zeros(tree.size, dtype=bool)  # eligible operators with an eligible child
    above[parent[(parent >= 0) & eligible[np.maximum(parent, 0)]]] = True
    bottom = ~above[ops.node] & ops.eligible
    no_tc = bottom & (np.nan_to_num(ops.tc_self, nan=0.0) <= 0)
    total = float(ops.device_self.sum())
    time = float(ops.device_self[no_tc].sum())
    n = max(steps.count, 1)
    return TensorCoreGap(eligible=np.full(steps.count, time / n), share=time / total if total > 0 else 0.0)


def step_times(model: TraceModel) -> np.ndarray:
    return breakdown(model).steps.duration


def communication(model: TraceModel) -> PerStep:
    """Communication not hidden behind computation (the Overview's Communication category)."""
    return breakdown(model).per_step["Communication"]


def dataloader(model: TraceModel) -> PerStep:
    return breakdown(model).per_step["DataLoader"]


def host_busy_share(model: TraceModel) -> float:
    """CPU-only runs: share of the step time in which host operators ran."""
    steps = find_steps(model)
    busy = per_step(model, role_intervals(model)["CPU Exec"])
    total = float(steps.duration.sum())
    return float(busy.sum()) / total if total > 0 else 0.0


@dataclass(frozen=True)
class HostWait:
    device: int | None
    stream: int
    host_wait: float  # per step, µs: idle gaps of the stream that ended when the host launched the next work
    idle: float  # per step, µs: all idle time of the stream


def host_wait(model: TraceModel) -> HostWait | None:
    """The GPU insights' idle-time split (``idle.idle_time``) on the busiest stream: how much of its idle time per
    step the host caused (the next work was not yet launched when the gap began)."""
    streams = idle_time(model)["streams"]
    n = max(find_steps(model).count, 1)
    if not streams:
        return None
    s = max(streams, key=lambda r: r["busy_us"])
    return HostWait(device=s["device"], stream=s["stream"], host_wait=s["host_wait_us"] / n, idle=s["idle_us"] / n)


def launch_summary(model: TraceModel) -> dict[str, Any]:
    """The GPU insights' launch statistics (``launches.launch_stats``): launch delay p50/p95, short kernels."""
    summary: dict[str, Any] = launches.launch_summary(model)["summary"]
    return summary
