"""Critical path of a step: the chain of host and device work that determined when the step ended.

Walked backwards from the step's end, always to the dependency that was satisfied last:
- on the GPU, an event started when both its launch had been issued and the previous event on its stream had
  finished: the later of the two is its predecessor (``gpu_wait`` is the stream's gap between them,
  ``launch_delay`` the time from the end of the launch call to the start on the GPU);
- on the host, a thread's time goes back piece by piece through the innermost event it was in (an operator,
  an annotation, a runtime call; ``host_idle`` where it was in no recorded event), except that a synchronising
  call (``cudaDeviceSynchronize``, ``cudaStreamSynchronize``, ``cudaEventSynchronize``, blocking ``cudaMemcpy``)
  waited for the device event that ended last before it returned: the path goes there (``sync``).

So the segments tile the step exactly: their lengths add up to the step's duration, and each category's share
says what the step was bound by (``cpu_op`` and ``launch`` heavy: CPU-bound; ``kernel`` heavy: GPU-bound;
``sync``: the host waited for the GPU). Autograd's engine queue is followed across threads: while the step's thread
waits inside ``backward()`` (in an annotation or in no event), the work it waits for is the backward thread's (a
thread of the same process whose operators carry a forward thread id): the path goes to that thread's operators
where they ended, and back to the waiting thread when that thread was idle (``annotation``: the engine's time between
operators, inside the waiting annotation). Other dependencies not in the trace (cross-stream waits on CUDA events,
other threads waiting on each other) are not followed: such a wait shows as ``gpu_wait`` or ``host_idle``.

A trace without ``ProfilerStep#N`` has no steps: instead of one step over the whole trace, the path of an
annotation (its host range, grown to the end of the device work launched inside it) or of a time range is walked.
HTA builds the same kind of graph but needs its own trace augmentation; this walk needs only the trace.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from typing import Any, Literal

import numpy as np

from ..model.arrays import isin_ints
from ..model.derived import memoized
from ..model.errors import UnknownAnnotation, UnknownStep
from ..model.kinds import Kind
from ..model.names import STEP_PREFIX
from ..model.optree import host_tree, innermost_containing
from ..model.tables import TraceModel
from .launches import DeviceWork, device_work
from .steps import NO_STEPS_NOTE, find_steps

_SYNC_NAMES = ("cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize", "cudaMemcpy",
               "hipDeviceSynchronize", "hipStreamSynchronize", "hipEventSynchronize", "hipMemcpy")
_DEVICE_CATEGORY = {int(Kind.KERNEL): "kernel", int(Kind.MEMCPY): "memcpy", int(Kind.MEMSET): "memset"}
_HOST_CATEGORY = {int(Kind.CPU_OP): "cpu_op", int(Kind.USER_ANNOTATION): "annotation", int(Kind.RUNTIME): "runtime",
                  int(Kind.DRIVER): "runtime"}
OFFERED_ANNOTATIONS = 50  # annotation names a trace without steps offers, longest in total first
CATEGORIES = ("kernel", "memcpy", "memset", "gpu_wait", "launch_delay", "launch", "cpu_op", "annotation",
              "runtime", "sync", "host_idle")


@memoized
def _previous_on_stream(model: TraceModel) -> np.ndarray:
    """Per device event: the one before it on its stream (by start), -1 for the first."""
    work = device_work(model)
    order = np.lexsort((work.start, work.stream, work.device))
    prev = np.full(work.size, -1, dtype=np.int64)
    if work.size > 1:
        same = (work.device[order[1:]] == work.device[order[:-1]]) & (work.stream[order[1:]] == work.stream[order[:-1]])
        prev[order[1:][same]] = order[:-1][same]
    return prev


@memoized
def _by_end(model: TraceModel) -> np.ndarray:
    """Device events ordered by end time."""
    return np.argsort(device_work(model).end, kind="stable")


@memoized(closed=True)
def host_pieces(model: TraceModel, pid: int, tid: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One host thread's time cut where any of its events starts or ends: each piece's innermost event (node)."""
    tree = host_tree(model)
    ev = model["events"]
    on = np.flatnonzero((ev["pid"][tree.rows] == pid) & (ev["tid"][tree.rows] == tid))
    points = np.unique(np.concatenate([tree.start[on], tree.end[on]]))
    if len(points) < 2:
        return np.empty(0), np.empty(0), np.empty(0, np.int64)
    starts = points[:-1]
    inner = innermost_containing(np.full(len(on), pid), np.full(len(on), tid), tree.start[on], tree.end[on],
                                 np.full(len(starts), pid), np.full(len(starts), tid), starts)
    owner = np.where(inner >= 0, on[np.maximum(inner, 0)], -1)
    return starts, points[1:], owner


def _longest_thread(model: TraceModel, lo: float, hi: float) -> tuple[int, int]:
    """The thread of the longest host event in [lo, hi) (a trace without steps: its main thread there)."""
    ev = model["events"]
    tree = host_tree(model)
    inside = np.flatnonzero((tree.end > lo) & (tree.start < hi))
    if len(inside) == 0:
        return -1, -1
    row = int(tree.rows[inside[np.argmax((tree.end - tree.start)[inside])]])
    return int(ev["pid"][row]), int(ev["tid"][row])


def _step_thread(model: TraceModel, name: str, lo: float, hi: float) -> tuple[int, int]:
    """The thread that ran ``ProfilerStep#name`` (of several of that number, ``N (2)``…, the one that starts
    nearest ``lo``); without steps, the thread of the longest host event."""
    ev = model["events"]
    tree = host_tree(model)
    code = model.code(f"{STEP_PREFIX}{name.split(' (')[0]}")
    rows = tree.rows[ev["name"][tree.rows] == code] if code >= 0 else np.empty(0, np.int64)
    if len(rows) > 1:
        rows = rows[np.argsort(np.abs(ev["ts"][rows] - lo), kind="stable")]
    if len(rows) == 0:
        return _longest_thread(model, lo, hi)
    return int(ev["pid"][rows[0]]), int(ev["tid"][rows[0]])


@memoized
def engine_threads(model: TraceModel, pid: int, tid: int) -> list[tuple[tuple[int, int], np.ndarray]]:
    """The threads of process ``pid`` (other than ``tid``) that ran autograd's backward for another thread (their
    operators carry a forward thread id), each with the sorted ends of its busy pieces."""
    ev, ops = model["events"], model["ops"]
    rows = ops["row"][(ops["fwd_tid"] >= 0) & (ev["pid"][ops["row"]] == pid) & (ev["tid"][ops["row"]] != tid)]
    out = []
    for t in sorted({int(x) for x in ev["tid"][rows].tolist()}):
        _, ends, owner = host_pieces(model, pid, t)
        out.append(((pid, t), ends[owner >= 0]))
    return out


def _position(values: list[float], exact: np.ndarray, t: float, side: Literal["left", "right"]) -> int:
    """``np.searchsorted(exact, t, side)`` for ``values``, ``exact`` as a list: by bisection of the list (the walk
    asks hundreds of thousands of times on a real trace, where numpy's call cost 3 µs each), and by numpy itself
    where a NaN takes part (sorted last by numpy, unordered for a bisection)."""
    if t != t or (values and values[-1] != values[-1]):
        return int(np.searchsorted(exact, t, side=side))
    return bisect_left(values, t) if side == "left" else bisect_right(values, t)


class _Pieces:
    """:func:`host_pieces` of one thread, with its columns as lists (read one item at a time by the walk)."""

    def __init__(self, model: TraceModel, pid: int, tid: int) -> None:
        self.starts, ends, owner = host_pieces(model, pid, tid)
        self.start_list: list[float] = self.starts.tolist()
        self.ends: list[float] = ends.tolist()
        self.owner: list[int] = owner.tolist()


class _Walk:
    """The backward walk over one step; ``segments`` are (start, end, category, event row or -1), latest first."""

    def __init__(self, model: TraceModel, lo: float, main: tuple[int, int]) -> None:
        self.model, self.lo, self.main = model, lo, main
        self.work: DeviceWork = device_work(model)
        self.prev = _previous_on_stream(model)
        self.by_end = _by_end(model)
        self.ends = self.work.end[self.by_end]
        self.tree = host_tree(model)
        ev = model["events"]
        self.sync = isin_ints(ev["name"][self.tree.rows], [model.code(n) for n in _SYNC_NAMES])
        self.engines = engine_threads(model, *main) if main[0] >= 0 else []
        self.engine_ends = [(ends, ends.tolist()) for _, ends in self.engines]
        self.pieces: dict[tuple[int, int], _Pieces] = {}  # by thread, as the walk reaches it
        self.segments: list[tuple[float, float, str, int]] = []

    def add(self, start: float, end: float, category: str, row: int) -> None:
        start = max(start, self.lo)
        if end > start:
            self.segments.append((start, end, category, row))

    def last_device_end(self, after: float, until: float) -> int:
        """The device event that ended last in (after, until], -1 if none."""
        k = int(np.searchsorted(self.ends, until + 1e-6, side="right")) - 1
        return int(self.by_end[k]) if k >= 0 and self.ends[k] > after else -1

    def gpu(self, g: int, t: float) -> tuple[str, int, float]:
        """Account device event ``g`` up to ``t``; return the next state (``gpu``/``host``, where, time)."""
        w = self.work
        self.add(float(w.start[g]), t, _DEVICE_CATEGORY.get(int(w.kind[g]), "kernel"), int(w.row[g]))
        t = float(w.start[g])
        p = int(self.prev[g])
        ready_stream = float(w.end[p]) if p >= 0 else -np.inf
        ready_launch = float(w.launch_start[g]) if w.launch_row[g] >= 0 else -np.inf
        if ready_stream == -np.inf and ready_launch == -np.inf:
            return "main", -1, t
        if ready_stream >= ready_launch:
            self.add(min(ready_stream, t), t, "gpu_wait", -1)
            return "gpu", p, min(ready_stream, t)
        launch_end = min(float(w.launch_end[g]), t)
        self.add(launch_end, t, "launch_delay", -1)
        self.add(ready_launch, launch_end, "launch", int(w.launch_row[g]))
        return "launch", g, min(ready_launch, t)

    def handoff(self, since: float, t: float) -> tuple[int, float]:
        """The backward thread whose work ended last in (since, t] (the work a thread waiting since ``since``
        waited for) and that end; (-1, t) when none."""
        best, at = -1, -np.inf
        for i, (exact, ends) in enumerate(self.engine_ends):
            k = _position(ends, exact, t, "right") - 1
            if k >= 0 and since < ends[k] > at:
                best, at = i, float(ends[k])
        return (best, at) if best >= 0 else (-1, t)

    def waiting(self, t: float, k: int, starts: list[float], ends: list[float], owner: list[int],
                ) -> tuple[float, str, int]:
        """Since when the step's thread waited at ``t`` (in no event or in an annotation's own time), and how that
        wait is labelled; (inf, "", -1) while it ran an operator or a call."""
        if k < 0:
            return self.lo, "host_idle", -1
        if ends[k] < t:
            return float(ends[k]), "host_idle", -1
        node = int(owner[k])
        if node < 0:
            return float(starts[k]), "host_idle", -1
        if int(self.tree.kind[node]) == int(Kind.USER_ANNOTATION):
            return float(starts[k]), "annotation", int(self.tree.rows[node])
        return np.inf, "", -1

    def host(self, pid: int, tid: int, t: float, main: bool) -> tuple[str, int, float]:
        """Account the host thread's last piece before ``t``; return the next state. A thread other than the
        step's (``main``) that was in no event had not been handed its work yet: the path goes back to the
        step's thread at the same moment (autograd's backward thread waits for ``backward()`` on the main one);
        the step's thread waiting while a backward thread worked goes to that thread's work (``thread``)."""
        pieces = self.pieces.get((pid, tid))
        if pieces is None:
            pieces = self.pieces[(pid, tid)] = _Pieces(self.model, pid, tid)
        starts, ends, owner = pieces.start_list, pieces.ends, pieces.owner
        k = _position(starts, pieces.starts, t, "left") - 1
        idle = k < 0 or ends[k] < t or owner[k] < 0
        if idle and not main:
            return "main", -1, t
        if main and self.engines:
            since, category, row = self.waiting(t, k, starts, ends, owner)
            engine, at = self.handoff(since, t) if since < t else (-1, t)
            if engine >= 0:
                self.add(at, t, category, row)
                return "thread", engine, at
        if k < 0:
            self.add(self.lo, t, "host_idle", -1)
            return "done", -1, self.lo
        if ends[k] < t:
            self.add(float(ends[k]), t, "host_idle", -1)
            return "host", -1, float(ends[k])
        node = int(owner[k])
        if node < 0:
            self.add(float(starts[k]), t, "host_idle", -1)
            return "host", -1, float(starts[k])
        row = int(self.tree.rows[node])
        if self.sync[node]:
            g = self.last_device_end(float(self.tree.start[node]), t)
            if g >= 0:
                end = min(float(self.work.end[g]), t)
                self.add(end, t, "sync", row)
                return "gpu", g, end
        self.add(float(starts[k]), t, _HOST_CATEGORY.get(int(self.tree.kind[node]), "runtime"), row)
        return "host", -1, float(starts[k])


def _walk(model: TraceModel, main: tuple[int, int], lo: float, hi: float,
          host_end: float) -> list[tuple[float, float, str, int]]:
    walk = _Walk(model, lo, main)
    work = walk.work
    pid, tid = main
    last = walk.last_device_end(lo, hi)
    state, where, t = ("gpu", last, hi) if last >= 0 and work.end[last] >= host_end else ("host", -1, hi)
    if state == "gpu" and work.end[last] < hi:
        walk.add(float(work.end[last]), hi, "host_idle", -1)
        t = float(work.end[last])
    budget = 4 * (work.size + host_tree(model).size) + 100
    while t > lo and state != "done" and budget > 0:
        budget -= 1
        if state == "gpu":
            state, where, t = walk.gpu(where, t)
        elif state == "launch":
            pid, tid = int(work.launch_pid[where]), int(work.launch_tid[where])
            state = "host"
        elif state == "thread":
            (pid, tid), state = walk.engines[where][0], "host"
        elif state == "main" or pid < 0:
            pid, tid = main
            state = "host"
            if pid < 0:
                walk.add(lo, t, "host_idle", -1)
                break
        else:
            state, where, t = walk.host(pid, tid, t, (pid, tid) == main)
    return walk.segments[::-1]


def _merged(segments: list[tuple[float, float, str, int]]) -> list[tuple[float, float, str, int]]:
    """Adjacent segments of the same event and category as one."""
    out: list[tuple[float, float, str, int]] = []
    for seg in segments:
        if out and out[-1][2] == seg[2] and out[-1][3] == seg[3] and abs(out[-1][1] - seg[0]) < 1e-6:
            out[-1] = (out[-1][0], seg[1], seg[2], seg[3])
        else:
            out.append(seg)
    return out


@memoized
def offered_annotations(model: TraceModel) -> list[dict[str, Any]]:
    """The host annotations a path can be walked over (steps left out), longest in total first: name, count,
    total_us."""
    ev = model["events"]
    tree = host_tree(model)
    ann = tree.rows[(tree.kind == int(Kind.USER_ANNOTATION)) & (tree.end > tree.start)]
    names = ev["name"][ann]
    if len(ann) == 0:
        return []
    codes, inverse = np.unique(names, return_inverse=True)
    total = np.bincount(inverse, weights=np.nan_to_num(ev["dur"][ann]), minlength=len(codes))
    count = np.bincount(inverse, minlength=len(codes))
    named = [(model.strings[int(c)], int(n), float(us))
             for c, n, us in zip(codes.tolist(), count.tolist(), total.tolist(), strict=True)]
    named = sorted((r for r in named if not r[0].startswith(STEP_PREFIX)), key=lambda r: (-r[2], r[0]))
    return [{"name": name, "count": n, "total_us": us} for name, n, us in named[:OFFERED_ANNOTATIONS]]


def _annotation_window(model: TraceModel, name: str, occurrence: int) -> tuple[float, float, float, tuple[int, int]]:
    """(start, end, host end, thread) of the ``occurrence``-th (1-based, by start) host annotation ``name``: its
    range grown to the end of the device work launched inside it by its process. :class:`UnknownAnnotation` if there
    is none."""
    ev = model["events"]
    tree = host_tree(model)
    code = model.code(name)
    nodes = np.flatnonzero((tree.kind == int(Kind.USER_ANNOTATION)) & (ev["name"][tree.rows] == code))
    if code < 0 or not 1 <= occurrence <= len(nodes):
        raise UnknownAnnotation(name, occurrence, len(nodes) if code >= 0 else 0)
    node = int(nodes[np.argsort(tree.start[nodes], kind="stable")][occurrence - 1])
    row = int(tree.rows[node])
    lo, host_end = float(tree.start[node]), float(tree.end[node])
    pid = int(ev["pid"][row])
    w = device_work(model)
    inside = (w.launch_pid == pid) & (w.launch_start >= lo) & (w.launch_start <= host_end)
    hi = max(host_end, float(w.end[inside].max())) if inside.any() else host_end
    return lo, hi, host_end, (pid, int(ev["tid"][row]))


def _bounds(model: TraceModel, start: float | None, end: float | None) -> tuple[float, float]:
    """A time range with its missing bounds taken from the trace (its first host or device event's start, its last
    one's end)."""
    tree, work = host_tree(model), device_work(model)
    starts = np.concatenate([tree.start, work.start])
    ends = np.concatenate([tree.end, work.end])
    lo = start if start is not None else float(starts.min()) if len(starts) else 0.0
    hi = end if end is not None else float(ends.max()) if len(ends) else lo
    return lo, max(hi, lo)


def _path(model: TraceModel, lo: float, hi: float, host_end: float, main: tuple[int, int],
          scope: dict[str, Any]) -> dict[str, Any]:
    segments = _merged(_walk(model, main, lo, hi, host_end)) if hi > lo else []
    rows = np.array([r for _, _, _, r in segments], dtype=np.int64)
    names: list[int] = model["events"]["name"][np.maximum(rows, 0)].tolist()  # read whole, not one at a time
    shares = {c: 0.0 for c in CATEGORIES}
    for s, e, c, _ in segments:
        shares[c] += e - s
    return {
        "scope": scope,
        "start_us": lo, "end_us": hi, "duration_us": hi - lo,
        "shares": [{"category": c, "us": us, "share": us / (hi - lo) if hi > lo else 0.0}
                   for c, us in shares.items() if us > 0],
        "segments": [{"start_us": s, "end_us": e, "category": c, "id": r if r >= 0 else None,
                      "name": model.strings[name] if r >= 0 else None}
                     for (s, e, c, r), name in zip(segments, names, strict=True)],
    }


@memoized
def critical_path(model: TraceModel, step: str | None = None, annotation: str | None = None, occurrence: int = 1,
                  window: tuple[float | None, float | None] | None = None) -> dict[str, Any]:
    """The critical path of a time ``window`` (start, end in trace µs; a bound left None is the trace's), else of
    the ``occurrence``-th ``annotation``, else of ``step`` (a step name; the first step when None), as segments and
    shares; plain data. A trace without steps and none of them asked for gets no path, the annotations it offers
    and a note.

    Raises :class:`UnknownStep` or :class:`UnknownAnnotation` for an unknown step or annotation.
    """
    steps = find_steps(model)
    names = [] if NO_STEPS_NOTE in steps.notes else steps.names
    offer = {"steps": names, "annotations": offered_annotations(model), "step": None, "note": None}
    if window is not None:
        lo, hi = _bounds(model, *window)
        main = _step_thread(model, names[0], lo, hi) if names else _longest_thread(model, lo, hi)
        return {**offer, **_path(model, lo, hi, hi, main, {"kind": "range", "label": "time range"})}
    if annotation is not None:
        lo, hi, host_end, main = _annotation_window(model, annotation, occurrence)
        label = f"{annotation} #{occurrence}"
        return {**offer, **_path(model, lo, hi, host_end, main, {"kind": "annotation", "label": label})}
    if not names:
        if step is not None:
            raise UnknownStep(step, [])
        note = ("The trace has no ProfilerStep#N events: choose an annotation or a time range to walk "
                "(call prof.step() once per iteration to get steps).")
        return {**offer, **_path(model, 0.0, 0.0, 0.0, (-1, -1), {"kind": "none", "label": ""}), "note": note}
    i = 0 if step is None else names.index(step) if step in names else -1
    if i < 0:
        raise UnknownStep(step, names)
    lo, hi = float(steps.start[i]), float(steps.end[i])
    main = _step_thread(model, names[i], lo, hi)
    path = _path(model, lo, hi, float(steps.host_end[i]), main, {"kind": "step", "label": f"step {names[i]}"})
    return {**offer, **path, "step": names[i]}
