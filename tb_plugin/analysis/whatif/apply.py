"""Changes resolved against a trace's graph: which host time vanishes, which device events take how long, which
waits and cross-stream edges go. Pure arithmetic on the graph's arrays; ``replay.py`` runs the result."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...model import intervals as iv
from ...model.arrays import isin_ints, take
from ...model.derived import memoized
from ...model.kinds import Kind
from ...model.lookups import tree_node_of_row
from ...model.names import is_dataloader, name_mask, step_number
from ...model.optree import host_tree
from ...model.tables import TraceModel
from ..operators import tree_levels
from ..steps import find_steps
from .changes import (
    CaptureGraph,
    Change,
    DropDevice,
    DropHost,
    OverlapComm,
    ReplaceDevice,
    ScaleDevice,
    SideStream,
    flatten,
)
from .graph import Graph, graph


@dataclass(frozen=True)
class Applied:
    busy: np.ndarray  # per device event (graph order): its time on its stream
    gap: np.ndarray  # the device overhead kept before the next queued event
    dur: np.ndarray  # its duration
    dropped: iv.Intervals  # host time that vanishes
    live_waits: np.ndarray  # per wait: still waits (its call was not dropped)
    live_deps: np.ndarray  # per device event: its cross-stream edge still holds
    stream: np.ndarray  # per device event: the stream it runs on (a side stream past the graph's own)
    launch_at: np.ndarray  # per device event: the measured host time its launch moves to (NaN: its own launch)
    gone: np.ndarray  # per device event: dropped (no time, and it neither holds its stream nor releases another)


@memoized
def device_index(model: TraceModel) -> np.ndarray:
    """Per event row: its index in the graph's device order (-1 for host events); int32, as ``model.lookups``'."""
    g = graph(model)
    out = np.full(model.n_events, -1, dtype=np.int32)
    out[g.device.row] = np.arange(g.device.size, dtype=np.int32)
    return out


def _spans(model: TraceModel, rows: np.ndarray, keep: float | np.ndarray = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """[ts + keep, ts + dur) of host event rows: what vanishes of them."""
    ev = model["events"]
    rows = rows[(rows >= 0) & (rows < model.n_events)]
    start = ev["ts"][rows].astype(np.float64)
    end = start + np.nan_to_num(ev["dur"][rows], nan=0.0).clip(min=0.0)
    keep_at = np.broadcast_to(np.asarray(keep, dtype=np.float64), rows.shape) if np.ndim(keep) == 0 else \
        np.asarray(keep, dtype=np.float64)[: len(rows)]
    return np.minimum(start + keep_at, end), end


def apply(model: TraceModel, changes: tuple[Change, ...]) -> Applied:
    """The changes (``Combined`` ones opened) on the model's graph."""
    g = graph(model)
    d = g.device
    idx = device_index(model)
    busy, gap, dur = d.busy.copy(), d.gap.copy(), (d.end - d.start).copy()
    lo: list[np.ndarray] = []
    hi: list[np.ndarray] = []
    live_deps = d.dep >= 0
    stream = d.stream.copy()
    launch_at = np.full(d.size, np.nan)
    gone = np.zeros(d.size, dtype=bool)
    for change in flatten(changes):
        if isinstance(change, DropHost):
            _add(lo, hi, _spans(model, change.rows, change.keep_us))
            if change.spans is not None:
                _add(lo, hi, (np.asarray(change.spans[0], np.float64), np.asarray(change.spans[1], np.float64)))
        elif isinstance(change, ScaleDevice):
            at, f = _scaled(model, change)
            busy[at], dur[at] = busy[at] / f, dur[at] / f
        elif isinstance(change, (ReplaceDevice, DropDevice)):
            gone |= _replace(model, g, change, busy, gap, dur, lo, hi)
        elif isinstance(change, CaptureGraph):
            _add(lo, hi, _captured(model, g, change, launch_at))
        elif isinstance(change, SideStream):
            _side_stream(model, g, change, stream, gap)
        elif isinstance(change, OverlapComm):
            at = idx[_valid(model, change.rows)]
            live_deps &= ~np.isin(d.dep, at[at >= 0])
    dropped = iv.union(np.concatenate(lo), np.concatenate(hi)) if lo else iv.EMPTY
    w = g.waits
    covered = iv.lengths_within(dropped, w.start, w.ret) if w.size else np.zeros(0)
    # a call dropped but for a kept head (``keep_us``: its non-blocking replacement; its return dropped, at least
    # its wait's length gone) waits no more either
    tail = iv.lengths_within(dropped, w.ret - 1e-3, w.ret) > 0 if w.size else np.zeros(0, bool)
    gone_waits = ~(covered < (w.ret - w.start) - 1e-6) | (tail & (covered > 0) & (covered >= w.wait - 1e-6))
    live = ~gone_waits
    live_deps &= ~gone & ~((d.dep >= 0) & gone[np.maximum(d.dep, 0)])  # a dropped event holds and releases nothing
    return Applied(busy=busy, gap=gap, dur=dur, dropped=dropped, live_waits=live,
                   live_deps=live_deps, stream=stream, launch_at=launch_at, gone=gone)


def _scaled(model: TraceModel, change: ScaleDevice) -> tuple[np.ndarray, np.ndarray]:
    """The graph positions of a ScaleDevice's rows and the factor of each."""
    rows = change.rows
    valid = (rows >= 0) & (rows < model.n_events)
    factor = np.broadcast_to(np.asarray(change.factor, dtype=np.float64), rows.shape)[valid]
    at = device_index(model)[rows[valid]]
    keep = at >= 0
    return at[keep], np.maximum(factor[keep], 1e-9)


def _side_stream(model: TraceModel, g: Graph, change: SideStream, stream: np.ndarray, gap: np.ndarray) -> None:
    """Move the events to a side stream of their device (one per device, after the graph's streams)."""
    at = device_index(model)[_valid(model, change.rows)]
    at = np.unique(at[at >= 0])
    if not len(at):
        return
    n_streams = len(g.device.keys)
    devices = sorted({k[0] for k in g.device.keys})
    device_of = np.asarray([devices.index(g.device.keys[s][0]) for s in range(n_streams)], dtype=np.int64)
    stream[at] = n_streams + device_of[g.device.stream[at]]
    gap[at] = 0.0
    before = at - 1  # the event queued before a moved one keeps no overhead gap for it
    before = before[(before >= 0) & (g.device.stream[np.maximum(before, 0)] == g.device.stream[at])]
    gap[before] = 0.0


def _valid(model: TraceModel, rows: np.ndarray) -> np.ndarray:
    out: np.ndarray = rows[(rows >= 0) & (rows < model.n_events)]
    return out


def _add(lo: list[np.ndarray], hi: list[np.ndarray], spans: tuple[np.ndarray, np.ndarray]) -> None:
    lo.append(np.asarray(spans[0], dtype=np.float64))
    hi.append(np.asarray(spans[1], dtype=np.float64))


def _replace(model: TraceModel, g: Graph, change: ReplaceDevice | DropDevice, busy: np.ndarray, gap: np.ndarray,
             dur: np.ndarray, lo: list[np.ndarray], hi: list[np.ndarray]) -> np.ndarray:
    """N events → one of ``cost_us`` (ReplaceDevice; its first launch costs ``launch_us``), or none (DropDevice);
    the other launch calls vanish. Returns which events are gone (all of a DropDevice's, all but the first of a
    ReplaceDevice's)."""
    gone = np.zeros(g.device.size, dtype=bool)
    at = device_index(model)[_valid(model, change.rows)]
    at = np.unique(at[at >= 0])
    if not len(at):
        return gone
    gone[at] = True
    busy[at], gap[at], dur[at] = 0.0, 0.0, 0.0
    launches = np.unique(g.device.launch_row[at][g.device.launch_row[at] >= 0])
    if isinstance(change, ReplaceDevice):
        first = at[0]
        gone[first] = False
        busy[first] = dur[first] = max(float(change.cost_us), 0.0)
        own = int(g.device.launch_row[first])
        if own >= 0:
            _add(lo, hi, _spans(model, np.array([own]), float(change.launch_us)))
            launches = launches[launches != own]
    _add(lo, hi, _spans(model, launches))
    return gone


def _captured(model: TraceModel, g: Graph, change: CaptureGraph,
              launch_at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The host time a graph replay removes: per step, the outermost operators around the events' launches (or
    the launch calls themselves where no operator is around them) and ``region_rows`` (``whole``: the span from the
    first to the last of them), but the blocking calls (a graph cannot capture a sync) and the DataLoader's spans,
    less one graph launch: the first ``cost`` µs of each step's captured time stay. The captured events are all
    launched at that graph launch's start (``launch_at``): a graph's kernels start while the host is still in
    cudaGraphLaunch, and none waits for a later launch call."""
    at = device_index(model)[_valid(model, change.rows)]
    at = at[at >= 0]
    launch = g.device.launch_row[at]
    launch = launch[launch >= 0]
    region = _valid(model, change.region_rows)
    if len(region):  # the regions hold the launching operators; a launch outside them is captured alone
        rows = np.concatenate([region, launch])
    else:
        outer = outermost_op(model)[tree_node_of_row(model)[launch]]
        rows = np.where(outer >= 0, host_tree(model).rows[np.maximum(outer, 0)], launch)
    ev = model["events"]
    if change.whole:  # the record_function regions around them (Optimizer.step#…, "forward") are captured whole
        region_of = outermost_region(model)[tree_node_of_row(model)[rows]]
        rows = np.concatenate([rows, host_tree(model).rows[np.unique(region_of[region_of >= 0])]])
    start = ev["ts"][rows].astype(np.float64)
    spans = iv.union(start, start + np.nan_to_num(ev["dur"][rows], nan=0.0).clip(min=0.0))
    steps = find_steps(model)
    if change.whole:
        spans = _hulls(spans, steps.host_start)
    lo, hi = iv.subtract(iv.subtract(spans, _blocking_calls(model, g)), _loader_spans(model))
    step = (np.searchsorted(steps.host_start, lo, side="right") - 1) if steps.count else np.zeros(len(lo), int)
    nodes = _nodes_per_step(g, at, steps.count)
    per_step = np.asarray(change.costs_of(nodes), dtype=np.float64)
    cost = take(per_step, step, float(change.cost_of(0)))
    # the graph launch is the first ``cost`` µs of each step's captured time (however many spans that takes)
    length = hi - lo
    before = np.cumsum(length) - length
    first = np.searchsorted(step, step, side="left")
    kept = np.clip(cost - (before - before[first]), 0.0, length) if len(lo) else np.zeros(0)
    if len(lo):
        begin = np.full(max(steps.count, 1), np.nan)
        begin[step[first]] = lo[first]
        own = g.device.step[at]
        launch_at[at] = np.where(own >= 0, take(begin, own, np.nan), np.nan)
    return lo + kept, hi


def _hulls(spans: iv.Intervals, step_starts: np.ndarray) -> iv.Intervals:
    """Per step, one span from the first captured span's start to the last one's end: the captured region, the
    Python between its operators included (a graph replay runs none of it)."""
    lo, hi = spans
    if not len(lo):
        return spans
    step = np.searchsorted(step_starts, lo, side="right") - 1 if len(step_starts) else np.zeros(len(lo), np.int64)
    first = np.flatnonzero(np.concatenate([[True], step[1:] != step[:-1]]))
    return lo[first], np.maximum.reduceat(hi, first)


def _loader_spans(model: TraceModel) -> iv.Intervals:
    """The DataLoader's spans: data loading is never captured in a graph."""
    ev = model["events"]
    mask = isin_ints(ev["kind"], (Kind.CPU_OP, Kind.USER_ANNOTATION)) & name_mask(model, ev["name"], is_dataloader)
    ts = ev["ts"][mask].astype(np.float64)
    return iv.union(ts, ts + np.nan_to_num(ev["dur"][mask], nan=0.0).clip(min=0.0))


def _blocking_calls(model: TraceModel, g: Graph) -> iv.Intervals:
    """The blocking calls' own spans: a graph cannot capture a host sync, so its wait stays."""
    w = g.waits
    return iv.union(w.start, w.ret)


def _nodes_per_step(g: Graph, at: np.ndarray, n: int) -> np.ndarray:
    """How many of the captured events each step launched (the graph's size: its launch cost)."""
    step = g.device.step[at]
    step = step[step >= 0]
    out: np.ndarray = np.bincount(step, minlength=max(n, 1))
    return out


@memoized
def outermost_op(model: TraceModel) -> np.ndarray:
    """Per host-tree node: the outermost operator node at or above it (not an annotation: operators only), -1 where
    no operator is around it. One pass over the tree's levels, top down."""
    tree = host_tree(model)
    out = np.where((tree.kind == Kind.CPU_OP) & ~tree.merged & (tree.parent == -1), np.arange(tree.size), -1)
    for level in tree_levels(model):
        above = out[tree.parent[level]]
        own = (tree.kind[level] == Kind.CPU_OP) & ~tree.merged[level]
        out[level] = np.where(above >= 0, above, np.where(own, level, -1))
    out[tree.merged] = take(out, tree.op_of[tree.merged], -1)
    return out


@memoized
def outermost_region(model: TraceModel) -> np.ndarray:
    """Per host-tree node: the outermost ``record_function`` region at or above it (a user annotation, not a
    ``ProfilerStep#`` nor the DataLoader's), -1 where none is around it; top down as ``outermost_op``."""
    tree = host_tree(model)
    names = model["events"]["name"][tree.rows]
    region = (tree.kind == Kind.USER_ANNOTATION) & ~name_mask(
        model, names, lambda s: step_number(s) is not None or is_dataloader(s))
    out = np.where(region & (tree.parent == -1), np.arange(tree.size), -1)
    for level in tree_levels(model):
        above = out[tree.parent[level]]
        out[level] = np.where(above >= 0, above, np.where(region[level], level, -1))
    return out


def launched_within(model: TraceModel, rows: np.ndarray) -> np.ndarray:
    """Event rows of the device work launched inside the host events ``rows`` (on their threads' timeline): what a
    ``DropHost`` of them leaves on the device unless a ``DropDevice`` takes it too (the benchmark kernels an
    autotuning compile launches, say)."""
    g = graph(model)
    ev = model["events"]
    rows = _valid(model, rows)
    start = ev["ts"][rows].astype(np.float64)
    spans = iv.union(start, start + np.nan_to_num(ev["dur"][rows], nan=0.0).clip(min=0.0))
    launch = g.device.launch
    known = np.isfinite(launch)
    inside = np.zeros(g.device.size, dtype=bool)
    if len(spans[0]):
        k = np.searchsorted(spans[0], np.where(known, launch, -np.inf), side="right") - 1
        inside = known & (k >= 0) & (launch < take(spans[1], k, -np.inf))
    out: np.ndarray = g.device.row[inside]
    return out
