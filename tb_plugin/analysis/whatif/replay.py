"""The what-if replay: the trace's graph (``graph.py``) run again with changes applied (``apply.py``), and the step
time it predicts.

**Host.** One timeline (every thread that launches or runs steps: ``graph.py``). Its work is every microsecond but
the waits and the dropped time; with ``W(t)`` the work done by measured time ``t``, the replayed time of ``t`` is
``u(t) = W(t) + M(t)``, where ``M(t)`` is the running maximum over the waits returned by ``t`` of ``D'ₖ − W(Rₖ)``:
a wait returns at ``D'ₖ`` (its targets' replayed end plus its lag), and the host's later work follows from there.
Without a change ``M(t)`` is the time waited so far and ``u(t) = t``.

**Device.** Per stream, with ``C`` the running sum of the events' occupancy (busy time plus the overhead gap kept
before a queued successor), an event starts at ``C + max≤i(x − C)``: a running maximum, where ``x`` is its
release (its launch's replayed time plus the measured launch latency, or its measured start moved as far as its
launch moved) raised to its cross-stream source's replayed end plus lag. No Python loop runs per event.

**Coupling.** A wait needs its targets' replayed ends, which need the launches before it, which need the waits
before those; a cross-stream edge needs its source's end. The replay visits the waits (by return) and the edges (by
the dependent's start) in time order; at each it advances the streams it reads up to the event it needs (one numpy
running maximum over the events since the last visit), so a Python loop runs per wait and per edge, never per event.
After the last, every stream is finished the same way.

**Steps.** A step completes at the later of its host ``ProfilerStep`` end and the end of the last device event it
launched (``u`` of the one, the replayed ends of the others; never before the previous step completes); the step
time is the cadence, the mean interval between completions (a single step: its completion minus its start). The
replay without a change is the measured run exactly (``tests/unit/test_whatif.py`` checks it on every sample and
test trace).
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, replace

import numpy as np

from ...model import intervals as iv
from ...model.derived import memoized
from ...model.tables import TraceModel
from ..steps import find_steps
from .apply import Applied, apply
from .changes import Change, FasterPeer, flatten
from .graph import Graph, graph
from .peers import Peers, relieved

GONE_X = -1e300  # the release of a dropped event: never the one that holds its stream


@dataclass(frozen=True)
class HostMap:
    """``u(t)``: the replayed time of measured host time ``t``."""

    excluded: iv.Intervals  # waits and dropped time: not host work
    prefix: np.ndarray  # covered_before(excluded)
    at: np.ndarray  # return times of the waits that raised M, ascending
    raise_to: np.ndarray  # M from each of them on

    def work(self, t: np.ndarray) -> np.ndarray:
        """W(t): measured time minus the excluded time before it."""
        t = np.asarray(t, dtype=np.float64)
        out: np.ndarray = t - iv.covered_until(self.excluded, t, self.prefix)
        return out

    def shift(self, t: np.ndarray) -> np.ndarray:
        """M(t): the waits' running maximum returned by ``t`` (0 before the first)."""
        k = np.searchsorted(self.at, np.asarray(t, dtype=np.float64), side="right") - 1
        out: np.ndarray = np.where(k >= 0, self.raise_to[np.maximum(k, 0)], 0.0) if len(self.at) else \
            np.zeros(np.shape(t))
        return out

    def __call__(self, t: np.ndarray) -> np.ndarray:
        out: np.ndarray = self.work(t) + self.shift(t)
        return out


@dataclass(frozen=True)
class Replay:
    completions: np.ndarray  # per step (find_steps' steps), µs, replayed clock
    starts: np.ndarray  # per step: replayed start (the previous completion, or the host step start for the first)
    step_us: float  # the cadence
    device_start: np.ndarray  # per device event, graph order
    device_end: np.ndarray
    host: HostMap

    @property
    def count(self) -> int:
        return len(self.completions)


class _Streams:
    """The per-stream running maxima, advanced lazily up to the event a visit needs. Events are kept in *chain*
    order (by stream, then start): the graph's order, unless a change moved events to another stream. A visit
    usually needs a few events more: those are advanced with Python floats, longer runs with numpy."""

    SHORT = 16  # advance this many events or fewer one by one (numpy's call overhead is larger)

    def __init__(self, g: Graph, a: Applied, x_offset: np.ndarray, launch: np.ndarray) -> None:
        d = g.device
        order = np.arange(d.size) if np.array_equal(a.stream, d.stream) else np.lexsort((d.start, a.stream))
        self.pos = np.empty(d.size, dtype=np.int64)
        self.pos[order] = np.arange(d.size)
        self.order = order
        stream = a.stream[order]
        n_streams = int(stream.max(initial=-1)) + 1
        self.bounds = np.searchsorted(stream, np.arange(n_streams + 1))
        cum = np.concatenate([[0.0], np.cumsum((a.busy + a.gap)[order])])
        self.c = cum[:-1] - cum[self.bounds[stream]]  # exclusive running sum within each stream
        self.launch = launch[order]  # the launch's measured host time (a change may move it: ``launch_at``)
        self.launched = np.isfinite(self.launch)
        # a dropped event releases nothing: it follows its stream (a finite floor, so that one opening a stream has a
        # start and a zero length, not -inf and NaN)
        self.x_base = np.where(a.gone[order], GONE_X, np.where(self.launched, x_offset[order], d.release[order]))
        self.dur = a.dur[order]
        self.override: list[float] = [-np.inf] * d.size  # chain order
        self.start = np.full(d.size, np.nan)
        self.next = self.bounds[:-1].tolist()
        self.best = [-np.inf] * n_streams
        self.stream_l: list[int] = stream.tolist()
        self.pos_l: list[int] = self.pos.tolist()
        self.c_l: list[float] = self.c.tolist()
        self.x_l: list[float] = self.x_base.tolist()
        self.launch_l: list[float] = self.launch.tolist()
        self.start_l: list[float] = [np.nan] * d.size
        self.dur_l: list[float] = self.dur.tolist()
        self.at: list[float] = []
        self.raise_to: list[float] = []

    def _m(self, t: float) -> float:
        k = bisect_right(self.at, t) - 1
        return self.raise_to[k] if k >= 0 else 0.0

    def _advance(self, s: int, lo: int, p: int) -> None:
        best = self.best[s]
        if p - lo < self.SHORT:
            for q in range(lo, p + 1):
                launch = self.launch_l[q]
                x = self.x_l[q] + self._m(launch) if launch == launch else self.x_l[q]
                x = max(x, self.override[q])
                best = max(best, x - self.c_l[q])
                self.start_l[q] = self.c_l[q] + best
        else:
            sl = slice(lo, p + 1)
            x = self.x_base[sl].copy()
            if self.at:
                k = np.searchsorted(np.asarray(self.at), self.launch[sl], side="right") - 1
                shift = np.where(k >= 0, np.asarray(self.raise_to)[np.maximum(k, 0)], 0.0)
                x = np.where(self.launched[sl], x + shift, x)
            x = np.maximum(x, np.asarray(self.override[lo:p + 1]))
            run = np.maximum(np.maximum.accumulate(x - self.c[sl]), best)
            self.start_l[lo:p + 1] = (self.c[sl] + run).tolist()
            best = float(run[-1])
        self.best[s] = best
        self.next[s] = p + 1

    def raise_at(self, t: float, value: float) -> None:
        """M is at least ``value`` from ``t`` on (waits come in return order but for a clock hair: keep ``at``
        ascending and M a running maximum)."""
        k = bisect_right(self.at, t)
        if value <= (self.raise_to[k - 1] if k else 0.0):
            return
        later = [max(v, value) for v in self.raise_to[k:]]
        self.at[k:] = [t, *self.at[k:]]
        self.raise_to[k:] = [value, *later]

    def end_of(self, i: int) -> float:
        """The replayed end of event ``i`` (graph order), advancing its stream up to it."""
        p = self.pos_l[i]
        s = self.stream_l[p]
        if p >= self.next[s]:
            self._advance(s, self.next[s], p)
        return self.start_l[p] + self.dur_l[p]

    def hold(self, i: int, until: float) -> None:
        """Event ``i`` (graph order) starts no earlier than ``until``."""
        p = self.pos_l[i]
        self.override[p] = max(self.override[p], until)

    def finish(self) -> np.ndarray:
        """Every event's replayed start, in graph order."""
        for s in range(len(self.bounds) - 1):
            if self.bounds[s + 1] > self.next[s]:
                self._advance(s, self.next[s], int(self.bounds[s + 1]) - 1)
        out = np.empty(len(self.order))
        out[self.order] = np.asarray(self.start_l, dtype=np.float64)
        return out


def replay(model: TraceModel, changes: tuple[Change, ...] | list[Change] = (), job: Peers | None = None) -> Replay:
    """The replay of the module doc with ``changes`` applied (none: the measured run); ``job``: the other ranks
    (``peers.py``), whose arrival then bounds this rank's collectives (for changes only this rank makes)."""
    g = graph(model)
    a = apply(model, tuple(changes))
    if job is not None and job.size:
        a = _waiting_for_peers(a, job)
    w = g.waits
    live = a.live_waits
    excluded = iv.union(np.concatenate([a.dropped[0], w.start[live]]),
                        np.concatenate([a.dropped[1], (w.start + w.wait)[live]]))
    host = HostMap(excluded=excluded, prefix=iv.covered_before(excluded), at=np.zeros(0), raise_to=np.zeros(0))
    d = g.device
    launch = np.where(np.isfinite(a.launch_at) & np.isfinite(d.launch), a.launch_at, d.launch)
    launched = np.isfinite(launch)
    x_offset = np.where(launched, d.release - np.nan_to_num(d.launch) + host.work(np.nan_to_num(launch)), 0.0)
    streams = _Streams(g, a, x_offset, launch)
    _visit(g, a, host, streams, _arrivals(job, tuple(changes)))
    start = streams.finish()
    host = HostMap(excluded=excluded, prefix=host.prefix, at=np.asarray(streams.at, dtype=np.float64),
                   raise_to=np.asarray(streams.raise_to, dtype=np.float64))
    end = start + a.dur
    return _steps(model, g, host, start, end)


def _waiting_for_peers(a: Applied, job: Peers) -> Applied:
    """A collective's measured time less its wait for the last peer: the transfer, held until the peers arrive."""
    busy, dur = a.busy.copy(), a.dur.copy()
    busy[job.op] = np.maximum(busy[job.op] - job.wait, 0.0)
    dur[job.op] = np.maximum(dur[job.op] - job.wait, 0.0)
    return replace(a, busy=busy, dur=dur)


def _arrivals(job: Peers | None, changes: tuple[Change, ...]) -> tuple[Peers, np.ndarray] | None:
    """The peers and their bases, with the gaps of peers a ``FasterPeer`` change speeds up shortened."""
    if job is None or not job.size:
        return None
    base = job.base
    for change in flatten(changes):
        if isinstance(change, FasterPeer):
            base = relieved(replace(job, base=base), change.worker, change.us_per_step)
    return job, base


def _visit(g: Graph, a: Applied, host: HostMap, streams: _Streams, peers: tuple[Peers, np.ndarray] | None) -> None:
    """The waits, the cross-stream edges and the collectives that wait for peers, in time order (module doc)."""
    w, d = g.waits, g.device
    edges = np.flatnonzero((d.dep >= 0) & a.live_deps)
    waits = np.flatnonzero(a.live_waits)
    shared = np.arange(peers[0].size) if peers else np.zeros(0, np.int64)
    # an edge is visited once its source has started too (clocks let a source end a hair after its dependent's
    # start: the source's own edge must be visited first)
    # a wait too, after its targets have started (a copy may end a hair after the call that waited for it returned)
    edge_keys = np.maximum(d.start[edges], np.nextafter(d.start[d.dep[edges]], np.inf))
    t = w.targets[waits]
    first = np.where(t >= 0, d.start[np.maximum(t, 0)], -np.inf).max(axis=1, initial=-np.inf) if t.size else \
        np.full(len(waits), -np.inf)
    wait_keys = np.maximum(w.ret[waits], np.nextafter(first, np.inf))
    keys = np.concatenate([edge_keys, wait_keys, d.start[peers[0].op] if peers else np.zeros(0)])
    kinds = np.concatenate([np.zeros(len(edges), np.int8), np.ones(len(waits), np.int8),
                            np.full(len(shared), 2, np.int8)])
    what = np.concatenate([edges, waits, shared])
    order = np.lexsort((kinds, keys))
    ret_work = host.work(w.ret)
    for kind, i in zip(kinds[order].tolist(), what[order].tolist()):
        if kind == 0:
            streams.hold(i, streams.end_of(int(d.dep[i])) + float(d.dep_lag[i]))
            continue
        if kind == 2 and peers is not None:
            if not a.gone[int(peers[0].op[i])]:
                _hold_for_peers(streams, peers[0], peers[1], i)
            continue
        targets = w.targets[i]
        done = max((streams.end_of(int(t)) for t in targets[targets >= 0].tolist()), default=-np.inf)
        value = done + float(w.lag[i]) - float(ret_work[i])
        streams.raise_at(float(w.ret[i]), value)


def _hold_for_peers(streams: _Streams, job: Peers, base: np.ndarray, k: int) -> None:
    """Instance ``k``'s transfer starts when its last peer arrives: after the peer's previous collective, if this
    rank shared it, replayed here; else when the peer arrived."""
    lo, hi = np.searchsorted(job.pair, [k, k + 1])
    arrival = -np.inf
    for prev, b in zip(job.prev[lo:hi].tolist(), base[lo:hi].tolist()):
        arrival = max(arrival, (streams.end_of(int(prev)) + b) if prev >= 0 else b)
    streams.hold(int(job.op[k]), arrival)


def _steps(model: TraceModel, g: Graph, host: HostMap, start: np.ndarray, end: np.ndarray) -> Replay:
    """Step completions and the cadence (module doc)."""
    steps = find_steps(model)
    n = steps.count
    done = host(steps.host_end) if n else np.zeros(0)
    step = g.device.step
    mine = (step >= 0) & (step < n)
    np.maximum.at(done, step[mine], end[mine])
    done = np.maximum.accumulate(done) if n else done
    first = float(host(steps.start[:1])[0]) if n else 0.0
    begins = np.concatenate([[first], done[:-1]]) if n else np.zeros(0)
    if n >= 2:
        cadence = float(done[-1] - done[0]) / (n - 1)
    else:
        cadence = float(done[0] - first) if n else 0.0
    return Replay(completions=done, starts=begins, step_us=cadence, device_start=start, device_end=end, host=host)


def measured_step_us(model: TraceModel) -> float:
    """The measured cadence, from ``find_steps`` alone (what the replay without a change must reproduce)."""
    steps = find_steps(model)
    if steps.count >= 2:
        return float(steps.end[-1] - steps.end[0]) / (steps.count - 1)
    return float(steps.duration[0]) if steps.count else 0.0


@memoized
def baseline(model: TraceModel) -> Replay:
    """The replay without a change: the measured run (memoised; every saving is measured from it)."""
    return replay(model, ())
