"""The trace's dependency graph, as the replay reads it: device work per stream with what released each event, and
the host's waits for the device. Built once per model (memoised); a change never alters it, the replay applies
changes on top.

**Device.** Every kernel, copy and set (``launches.device_work``), grouped by stream in stream order. An event
starts at the latest of three things, and the graph records which held it:

- its *stream*: the previous event's end. Its *busy* time is its own duration up to the next event's start (a
  trace's clocks let neighbours overlap by a hair); when the event was *queued* (launched before the stream was free)
  the small gap before it (≤ ``HOLD_US``) is the device's own overhead between queued work and stays with the
  previous event's occupancy, so a faster previous event moves it up by exactly what it saved;
- its *launch*: the host call with the same correlation id (a graph launch releases all of its kernels). A queued
  event's release is its launch plus the trace's typical launch latency (``latency``: the median launch → start of
  events that found their stream idle); an event that started after its stream was free is released at its
  measured start, which moves with its launch;
- another *stream*: an event that started more than ``HOLD_US`` later than its stream and its launch allow, within
  ``DEP_US`` after an event on another stream of the same device ended, waits for that event (a
  ``cudaStreamWaitEvent``: the trace shows the calls but not which streams and events they name, so the edge is
  read from the times). Its release is then its launch's; the edge keeps the measured lag.

An event whose launch is not in the trace (launched before the window) follows its stream if it was queued, else
keeps its measured start. With these three, ``start = max(release, previous end on the stream, source end + lag)``
reproduces every measured start exactly, which is what makes the replay without a change the measured run.

**Host.** Host threads that launch device work or run the steps share one timeline: the main thread waits while
the autograd thread runs the backward pass, so what one saves, the other's later work gains too. A *wait* is a
blocking call (``cudaStreamSynchronize``, ``cudaDeviceSynchronize``, ``cudaEventSynchronize``, a synchronous or
pageable ``cudaMemcpy``, ``cudaFree``; HIP and the driver API alike) that drained device work: its targets are, per
stream, the last event launched before the call, where that event ended by the call's return (a stream still
running at the return was not waited for). A call returns ``lag`` after its targets end (measured: the call's tail
after the last target's end); the time before that is the wait, the rest host work. A call that found the device
done is all host work, but keeps its targets: a host that gets ahead of the device in a replay waits there. A launch
call blocked on a full launch queue is a wait too (``queue.blocked_launches``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ...model.arrays import group_rows, isin_ints, take
from ...model.derived import memoized
from ...model.kinds import Kind
from ...model.names import name_mask, step_number
from ...model.tables import TraceModel
from ..launches import device_work
from ..steps import find_steps
from .queue import blocked_launches

HOLD_US = 10.0  # an event that starts this much later than its stream and launch allow was held by something else
DEP_US = 1000.0  # ... and waits for an event on another stream that ended at most this long before it started
WAIT_TOL_US = 2.0  # host and device clocks may disagree by this much on a wait's return
_BLOCKING = re.compile(r"^(?:(?:cuda|hip)(?:DeviceSynchronize|StreamSynchronize|EventSynchronize|Memcpy\w*|Free|"
                       r"FreeHost)|cu(?:CtxSynchronize|StreamSynchronize|EventSynchronize|MemcpyDtoH\w*|"
                       r"MemcpyHtoD(?:_v2)?|Memcpy(?:_v2)?|MemFree\w*|MemFreeHost))$")


@dataclass(frozen=True)
class Device:
    """Device events in stream order (stream 0's, then stream 1's, …); ``bounds[s]:bounds[s + 1]`` is stream s."""

    pos: np.ndarray  # index into device_work (= device_events row)
    row: np.ndarray  # event row
    stream: np.ndarray  # stream index of each event
    bounds: np.ndarray
    keys: list[tuple[int, int]]  # (device, stream) of each stream index
    start: np.ndarray
    end: np.ndarray
    busy: np.ndarray  # own time on the stream (up to the next event's start)
    gap: np.ndarray  # device overhead before the NEXT event, kept with this one's occupancy (queued next)
    release: np.ndarray  # earliest start the launch allows, in measured time (-inf: follows its stream)
    launch: np.ndarray  # launch start (NaN: unknown or pinned: the release does not move)
    launch_row: np.ndarray  # event row of the launch call (-1 unknown)
    dep: np.ndarray  # the event (index in this order) on another stream it waits for (-1 none)
    dep_lag: np.ndarray
    step: np.ndarray  # the step whose host span launched it (-1 none)
    latency: float  # typical launch → start on an idle stream

    @property
    def size(self) -> int:
        return len(self.row)


@dataclass(frozen=True)
class Waits:
    """Blocking calls on the host timeline that wait for device work, by return time."""

    row: np.ndarray
    start: np.ndarray
    ret: np.ndarray
    wait: np.ndarray  # the waiting part, [start, start + wait)
    lag: np.ndarray  # return after the targets ended
    targets: np.ndarray  # (waits × streams): the event (index in Device order) drained per stream, -1 none

    @property
    def size(self) -> int:
        return len(self.row)


@dataclass(frozen=True)
class Graph:
    device: Device
    waits: Waits
    host_start: np.ndarray  # per step (find_steps' steps)
    host_end: np.ndarray


def _stream_order(model: TraceModel) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[tuple[int, int]]]:
    """device_work positions grouped by stream, by start within; stream index per position; bounds; keys."""
    work = device_work(model)
    first, stream = group_rows([work.device, work.stream])
    keys = [(int(work.device[i]), int(work.stream[i])) for i in first.tolist()]
    order = np.lexsort((work.row, work.start, stream)) if work.size else np.zeros(0, np.int64)
    bounds = np.searchsorted(stream[order], np.arange(len(keys) + 1))
    return order, stream[order], bounds, keys


def _first_of_stream(stream: np.ndarray) -> np.ndarray:
    first = np.ones(len(stream), dtype=bool)
    first[1:] = stream[1:] != stream[:-1]
    return first


@memoized
def graph(model: TraceModel) -> Graph:
    """The dependency graph of the module doc (computed once per model)."""
    device = _device(model)
    steps = find_steps(model)
    return Graph(device=device, waits=_waits(model, device), host_start=steps.host_start, host_end=steps.host_end)


def _device(model: TraceModel) -> Device:
    work = device_work(model)
    order, stream, bounds, keys = _stream_order(model)
    start, end = work.start[order], work.end[order]
    launch = work.launch_start[order]
    first = _first_of_stream(stream)
    nxt = np.append(start[1:], np.inf)
    nxt[np.append(first[1:], True)] = np.inf
    busy = (np.minimum(end, nxt) - start).clip(min=0.0)
    pred_finish = np.where(first, -np.inf, np.append(-np.inf, (start + busy)[:-1]))
    latency = _latency(start, launch, pred_finish)
    launched = np.isfinite(launch)
    allowed = np.maximum(pred_finish, np.where(launched, launch + latency, -np.inf))
    held = start - allowed > HOLD_US
    dep, lag = _dependencies(work.device[order], stream, start, end, bounds, held & launched)
    queued = ~held & (pred_finish >= np.where(launched, launch + latency, -np.inf))
    gap = np.where(queued & ~first, start - pred_finish, 0.0)
    release = np.where(launched, np.where(queued | (dep >= 0), np.minimum(start, launch + latency), start),
                       np.where(queued, -np.inf, start))
    return Device(pos=order, row=work.row[order], stream=stream, bounds=bounds, keys=keys, start=start, end=end,
                  busy=busy, gap=np.append(gap[1:], 0.0), release=release,
                  launch=launch, launch_row=work.launch_row[order], dep=dep, dep_lag=lag,
                  step=_step_of(model, order), latency=latency)


def _latency(start: np.ndarray, launch: np.ndarray, pred_finish: np.ndarray) -> float:
    """Median launch → start of events launched into an idle stream, among those that started within 50 µs (an
    event held longer waited for something else: another stream); 5 µs where none did."""
    idle = np.isfinite(launch) & (launch >= pred_finish)
    delay = (start - launch)[idle]
    delay = delay[(delay >= 0) & (delay <= 50.0)]
    return float(np.median(delay)) if len(delay) else 5.0


def _dependencies(device: np.ndarray, stream: np.ndarray, start: np.ndarray, end: np.ndarray, bounds: np.ndarray,
                  held: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each held event, the event on another stream of its device that ended last at most ``DEP_US`` before it
    started (or up to ``WAIT_TOL_US`` after: clocks), and the lag; -1 where none."""
    dep = np.full(len(start), -1, dtype=np.int64)
    best = np.full(len(start), -np.inf)
    idx = np.flatnonzero(held)
    if not len(idx):
        return dep, np.zeros(len(start))
    for s in range(len(bounds) - 1):
        lo, hi = int(bounds[s]), int(bounds[s + 1])
        if hi == lo:
            continue
        ends = np.maximum.accumulate(end[lo:hi])
        ask = idx[(stream[idx] != s) & (device[idx] == device[lo])]
        k = np.searchsorted(ends, start[ask] + WAIT_TOL_US, side="right") - 1
        ok = k >= 0
        ask, k = ask[ok], k[ok]
        # the event that reached that running end (the latest-ending one so far)
        src = lo + _argmax_prefix(end[lo:hi])[k]
        e = end[src]
        better = (e > best[ask]) & (start[ask] - e <= DEP_US)
        dep[ask[better]], best[ask[better]] = src[better], e[better]
    lag = np.where(dep >= 0, start - take(end, dep, 0.0), 0.0)
    return dep, lag


def _argmax_prefix(values: np.ndarray) -> np.ndarray:
    """For each position, the index of the (last) maximum of values[:i + 1]."""
    run = np.maximum.accumulate(values)
    is_max = values >= run
    idx = np.where(is_max, np.arange(len(values)), 0)
    out: np.ndarray = np.maximum.accumulate(idx)
    return out


def _step_of(model: TraceModel, order: np.ndarray) -> np.ndarray:
    """The step whose host span holds each event's launch (``steps._device_aware``'s rule), -1 none."""
    steps = find_steps(model)
    work = device_work(model)
    l_start, l_end = work.launch_start[order], work.launch_end[order]
    if not steps.count or not len(order):
        return np.full(len(order), -1, dtype=np.int64)
    k = np.searchsorted(steps.host_start, l_start, side="right") - 1
    ok = np.isfinite(l_start) & (k >= 0)
    kk = np.maximum(k, 0)
    ok &= (l_start >= steps.host_start[kk]) & (l_end <= steps.host_end[kk])
    return np.where(ok, k, -1).astype(np.int64)


@memoized
def host_threads(model: TraceModel) -> np.ndarray:
    """Event rows of one event on each thread of the host timeline: those that launched device work or recorded
    steps (a row stands for its (pid, tid))."""
    ev = model["events"]
    work = device_work(model)
    known = work.launch_row[work.launch_row >= 0]
    step_rows = np.flatnonzero(isin_ints(ev["kind"], (Kind.CPU_OP, Kind.USER_ANNOTATION))
                               & name_mask(model, ev["name"], lambda s: step_number(s) is not None))
    rows = np.concatenate([known, step_rows])
    first, _ = group_rows([ev["pid"][rows], ev["tid"][rows]]) if len(rows) else (np.zeros(0, np.int64), None)
    out: np.ndarray = rows[first]
    return out


def on_threads(model: TraceModel, rows: np.ndarray) -> np.ndarray:
    """Which of ``rows`` run on a thread of the host timeline."""
    ev = model["events"]
    threads = host_threads(model)
    if not len(threads) or not len(rows):
        return np.zeros(len(rows), dtype=bool)
    both = np.concatenate([threads, rows])
    _, group = group_rows([ev["pid"][both], ev["tid"][both]])
    out: np.ndarray = np.isin(group[len(threads):], group[:len(threads)])
    return out


def _waits(model: TraceModel, device: Device) -> Waits:
    """The blocking calls of the host timeline and what each drained (module doc)."""
    ev = model["events"]
    rows = np.flatnonzero(isin_ints(ev["kind"], (Kind.RUNTIME, Kind.DRIVER))
                          & name_mask(model, ev["name"], lambda s: _BLOCKING.match(s) is not None))
    rows = rows[on_threads(model, rows) & np.isfinite(ev["ts"][rows])]
    start = ev["ts"][rows].astype(np.float64)
    ret = start + np.nan_to_num(ev["dur"][rows], nan=0.0).clip(min=0.0)
    rows, start, ret = _outermost(rows, start, ret)
    targets = _targets(device, start, ret)
    q_rows, q_start, q_ret, q_targets = blocked_launches(model, device.pos, device.end, device.stream,
                                                         len(device.bounds) - 1)
    rows, start, ret = np.concatenate([rows, q_rows]), np.concatenate([start, q_start]), np.concatenate([ret, q_ret])
    targets = np.concatenate([targets, q_targets])
    t_end = np.where(targets >= 0, device.end[np.maximum(targets, 0)], -np.inf)
    drained = t_end.max(axis=1, initial=-np.inf) if targets.size else np.full(len(rows), -np.inf)
    waited = drained > start
    wait = np.where(waited, np.minimum(drained, ret) - start, 0.0)
    lag = np.where(waited, ret - drained, ret - start)
    order = np.argsort(ret, kind="stable")
    return Waits(row=rows[order], start=start[order], ret=ret[order], wait=wait[order], lag=lag[order],
                 targets=targets[order])


def _outermost(rows: np.ndarray, start: np.ndarray, ret: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Blocking calls not inside another one (a driver call inside a runtime call waits once)."""
    if not len(rows):
        return rows, start, ret
    order = np.lexsort((-ret, start))
    rows, start, ret = rows[order], start[order], ret[order]
    covered = np.maximum.accumulate(ret)
    keep = np.ones(len(rows), dtype=bool)
    keep[1:] = ret[1:] > covered[:-1]
    return rows[keep], start[keep], ret[keep]


def _targets(device: Device, start: np.ndarray, ret: np.ndarray) -> np.ndarray:
    """(calls × streams): per stream, the last event launched before the call, if it ended by the call's return."""
    n_streams = len(device.bounds) - 1
    out = np.full((len(start), n_streams), -1, dtype=np.int64)
    for s in range(n_streams):
        lo, hi = int(device.bounds[s]), int(device.bounds[s + 1])
        if hi == lo:
            continue
        issued = np.where(np.isfinite(device.launch[lo:hi]), device.launch[lo:hi], device.start[lo:hi])
        k = np.searchsorted(np.maximum.accumulate(issued), start, side="right") - 1
        ok = k >= 0
        ok[ok] &= device.end[lo + k[ok]] <= ret[ok] + WAIT_TOL_US
        out[:, s] = np.where(ok, lo + k, -1)
    return out
