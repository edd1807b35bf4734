"""Build the timeline index of a model: tracks (process → thread, device → stream), lanes by nesting depth.

Each lane holds its events sorted by start, with the running maximum of their ends, so the events overlapping a
window are one ``searchsorted`` range. Storage is four compact columns (about 28 bytes an event); nothing is a
per-event Python object.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from ..model import ids
from ..model.arrays import concat, isin_ints
from ..model.derived import memoized
from ..model.kinds import DEVICE_KINDS, Kind
from ..model.nesting import nest, workers
from ..model.order import by_thread, start_order, thread_rank
from ..model.tables import TraceModel

# Everything with a duration is drawn; instants other than [memory] are drawn as zero-width events.
_SKIPPED = (Kind.MEMORY, Kind.TRACE)


@dataclass(frozen=True)
class Track:
    id: int
    pid: int
    tid: int
    kind: str  # "gpu" or "cpu"
    process_label: str
    label: str
    sort_key: tuple[int, int, int]
    lanes: range  # lane numbers of this track, depth 0 first


# Lanes with more events than this get a coarse summary, so windows over much of a big trace cost O(width).
SUMMARY_MIN_EVENTS = 32768
SUMMARY_BUCKETS = 32768  # over the whole trace: a whole-trace window at 2000 px spans ~16 buckets a pixel


@dataclass(frozen=True)
class LaneSummary:
    """Fixed-width time buckets of one lane: events starting in each, their busy time, most common name, and
    the lane's long events (at least a bucket wide), which a coarse window may have to draw one by one."""

    bucket: np.ndarray  # int32 bucket numbers that hold events, ascending
    count: np.ndarray  # int32 events starting in the bucket
    busy: np.ndarray  # float64 summed durations
    top: np.ndarray  # int32 most common name code
    top_count: np.ndarray  # int32 how many events carry it
    long_pos: np.ndarray  # int64 positions (in the index arrays) of events at least one bucket long


@dataclass(frozen=True)
class TimelineIndex:
    tracks: list[Track]
    lane_track: np.ndarray  # track id of each lane
    lane_depth: np.ndarray
    lane_offsets: np.ndarray  # events of lane k are [lane_offsets[k], lane_offsets[k + 1])
    start: np.ndarray  # float64
    dur: np.ndarray  # float32 (µs; sub-ns precision is not needed to draw)
    max_end: np.ndarray  # float64 running max of ends within each lane
    self_time: np.ndarray  # float32: duration minus the durations of the events nested directly inside
    name: np.ndarray  # int32 string codes
    row: np.ndarray  # int32 event rows (ids for details)
    t_min: float
    t_max: float
    bucket_us: float = 0.0  # width of the summary buckets (from t_min)
    summaries: dict[int, LaneSummary] | None = None  # by lane, for lanes with many events

    def nbytes(self) -> int:
        arrays = [self.lane_track, self.lane_depth, self.lane_offsets, self.start, self.dur, self.max_end,
                  self.self_time, self.name, self.row]
        for summary in (self.summaries or {}).values():
            arrays += [summary.bucket, summary.count, summary.busy, summary.top, summary.top_count, summary.long_pos]
        return sum(a.nbytes for a in arrays)


def bucket_numbers(start: np.ndarray, t_min: float, width: float) -> np.ndarray:
    """The summary bucket of each start (the last bucket holds the trace's end)."""
    bucket: np.ndarray = np.minimum(((start - t_min) / width).astype(np.int64), SUMMARY_BUCKETS - 1)
    return bucket


def most_common(group: np.ndarray, name: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per group (``group`` ascending from 0 without gaps, one entry per event), its most common name code and how
    many carry it; of equally common names the smallest code. One sort of (group, name) in one int64 key."""
    low = int(name.min())
    span = int(name.max()) - low + 1
    key = np.sort(group.astype(np.int64) * span + (name - low))  # names are int32 codes: no overflow
    change = np.empty(len(key), dtype=bool)
    change[0] = True
    change[1:] = key[1:] != key[:-1]
    run_start = np.flatnonzero(change)
    run_len = np.diff(np.append(run_start, len(key)))
    run_key = key[run_start]
    run_group = run_key // span
    group_first = np.flatnonzero(np.concatenate([[True], run_group[1:] != run_group[:-1]]))
    # per group the longest run, the smallest name of equals: a segmented max of (length, -name) in one int64
    best = np.maximum.reduceat(run_len * span + (span - 1 - run_key % span), group_first)
    return low + span - 1 - best % span, best // span


def summarize_lane(start: np.ndarray, dur: np.ndarray, name: np.ndarray, lo: int, t_min: float,
                   width: float) -> LaneSummary:
    """The summary of one lane's events (sorted by start; ``lo`` is the lane's first position in the index)."""
    bucket = bucket_numbers(start, t_min, width)
    first = np.flatnonzero(np.concatenate([[True], bucket[1:] != bucket[:-1]]))  # start-sorted: runs per bucket
    count = np.diff(np.append(first, len(bucket)))
    dur = dur.astype(np.float64)
    top, top_count = most_common(np.repeat(np.arange(len(first), dtype=np.int64), count), name)
    return LaneSummary(bucket=bucket[first].astype(np.int32), count=count.astype(np.int32),
                       busy=np.add.reduceat(dur, first), top=top.astype(np.int32), top_count=top_count.astype(np.int32),
                       long_pos=(lo + np.flatnonzero(dur >= width)).astype(np.int64))


def _labels(model: TraceModel) -> tuple[dict[int, str], dict[tuple[int, int], str], dict[int, int]]:
    meta = model["metadata_events"]
    process: dict[int, str] = {}
    process_label: dict[int, str] = {}
    threads: dict[tuple[int, int], str] = {}
    sort_index: dict[int, int] = {}
    for name, pid, tid, value, order in zip(meta["name"].tolist(), meta["pid"].tolist(), meta["tid"].tolist(),
                                            meta["value"].tolist(), meta["sort_index"].tolist()):
        key = model.strings[name]
        text = model.text(value)
        if key == "process_name" and text:
            process.setdefault(pid, text)
        elif key == "process_labels" and text:
            process_label.setdefault(pid, text)
        elif key == "thread_name" and text:
            threads.setdefault((pid, tid), text.strip())
        elif key == "process_sort_index" and order >= 0:
            sort_index.setdefault(pid, order)
    names = {}
    for pid in set(process) | set(process_label):
        label, proc = process_label.get(pid), process.get(pid)
        if label and (label.startswith("GPU") or not proc):
            names[pid] = label  # "GPU 0"
        else:
            names[pid] = f"{proc} ({pid})" + (f" · {label}" if label else "")
    return names, threads, sort_index


def _unnamed_negative_pid(model: TraceModel) -> np.ndarray:
    """Events of a negative process id that no ``process_name`` names: Kineto's own overhead ("Activity Buffer
    Request" in "process -1 / thread 0"), not the program's; drawn, they are a track of noise."""
    pid = model["events"]["pid"]
    meta = model["metadata_events"]
    named = [p for name, p in zip(meta["name"].tolist(), meta["pid"].tolist())
             if model.strings[name] in ("process_name", "process_labels")]
    negative: np.ndarray = (pid < 0) & ~ids.is_text(pid)
    rows = np.flatnonzero(negative)  # few: a search of every event's pid among the named took 0.2 s at 2 GB
    negative[rows] = ~np.isin(pid[rows], named)
    return negative


@dataclass(frozen=True)
class _Piece:
    """One track's lanes (its events are written into the index's columns at the track's place)."""

    depths: np.ndarray  # the lanes' depths, ascending
    offsets: np.ndarray  # lane k holds the track's events [offsets[k], offsets[k + 1])
    gpu: bool  # the track holds device events
    summaries: dict[int, LaneSummary]  # by lane number within the track


@dataclass(frozen=True)
class _Columns:
    """The index's per-event columns, each track's part written by its own thread."""

    start: np.ndarray
    dur: np.ndarray
    max_end: np.ndarray
    self_time: np.ndarray
    name: np.ndarray
    row: np.ndarray

    @staticmethod
    def empty(n: int) -> _Columns:
        return _Columns(start=np.empty(n), dur=np.empty(n, np.float32), max_end=np.empty(n),
                        self_time=np.empty(n, np.float32), name=np.empty(n, np.int32), row=np.empty(n, np.int32))


_PARALLEL_MIN_EVENTS = 200_000  # below this the threads' start costs more than they save
_GPU_TRACK_KINDS = (*DEVICE_KINDS, Kind.GPU_USER_ANNOTATION)


def _track_piece(ev: dict[str, np.ndarray], rows: np.ndarray, lo: int, out: _Columns, t_min: float,
                 bucket_us: float) -> _Piece:
    """Order one track's events (start, longest first), nest them, lay them out in lanes by depth and write them
    into ``out`` from position ``lo``."""
    n = len(rows)
    ts = ev["ts"][rows]
    dur = np.nan_to_num(ev["dur"][rows], nan=0.0, posinf=0.0, neginf=0.0).clip(min=0.0)
    order = start_order(ts, dur)
    rows, start, dur = rows[order], ts[order], dur[order]
    parent, depth = nest(np.zeros(n, np.int8), np.zeros(n, np.int8), start, start + dur)
    nested = parent >= 0
    self_time = np.clip(dur - np.bincount(parent[nested], weights=dur[nested], minlength=n), 0.0, None)
    lane = np.minimum(depth, 4095).astype(np.uint16)
    order = np.argsort(lane, kind="stable")  # a radix sort: events keep their start order within a lane
    lane = lane[order]
    first = np.flatnonzero(np.concatenate([[True], lane[1:] != lane[:-1]])) if n else np.empty(0, np.int64)
    offsets = np.append(first, n).astype(np.int64)
    here = slice(lo, lo + n)
    s, d = start[order], dur[order]  # float64: the summaries are of the exact durations
    out.start[here], out.dur[here], out.row[here] = s, d, rows[order]
    out.name[here] = ev["name"][rows[order]]
    out.self_time[here] = self_time[order]
    ends = s + d
    summaries = {}
    for k in range(len(first)):
        a, b = int(offsets[k]), int(offsets[k + 1])
        out.max_end[lo + a:lo + b] = np.maximum.accumulate(ends[a:b])
        if b - a > SUMMARY_MIN_EVENTS:
            summaries[k] = summarize_lane(s[a:b], d[a:b], out.name[lo + a:lo + b], lo + a, t_min, bucket_us)
    return _Piece(depths=lane[first].astype(np.int16), offsets=offsets, summaries=summaries,
                  gpu=bool(isin_ints(ev["kind"][rows], _GPU_TRACK_KINDS).any()))


def _pieces(ev: dict[str, np.ndarray], rows: np.ndarray, bounds: list[tuple[int, int]], out: _Columns,
            t_min: float, bucket_us: float) -> list[_Piece]:
    """Every track's piece; tracks are independent, so a big trace lays them out on threads (the work is numpy
    sorts, gathers and comparisons over large arrays, which release the GIL): the host threads of a 2 GB trace
    hold millions of events each."""
    def piece(lo: int, hi: int) -> _Piece:
        return _track_piece(ev, rows[lo:hi], lo, out, t_min, bucket_us)

    threads = min(len(bounds), workers())
    if threads < 2 or len(rows) < _PARALLEL_MIN_EVENTS:
        return [piece(lo, hi) for lo, hi in bounds]
    with ThreadPoolExecutor(threads, thread_name_prefix="pytorch-profiler-lanes") as pool:
        biggest_first = sorted(range(len(bounds)), key=lambda k: bounds[k][0] - bounds[k][1])
        futures = {k: pool.submit(piece, *bounds[k]) for k in biggest_first}
        return [futures[k].result() for k in range(len(bounds))]


@memoized
def timeline_index(model: TraceModel) -> TimelineIndex:
    ev = model["events"]
    # Kineto's bookkeeping rows (textual pids such as "Spans" and "Traces") are not part of the program.
    keep = np.isfinite(ev["ts"]) & ~isin_ints(ev["kind"], _SKIPPED) & ~ids.is_text(ev["pid"])
    keep &= ~_unnamed_negative_pid(model)
    rows = np.flatnonzero(keep)
    start = ev["ts"][rows]
    t_min = float(start.min()) if len(start) else 0.0
    t_max = float((start + np.nan_to_num(ev["dur"][rows], nan=0.0, posinf=0.0, neginf=0.0).clip(min=0.0)).max()) \
        if len(start) else 0.0
    bucket_us = max(t_max - t_min, 1e-3) / SUMMARY_BUCKETS

    # Tracks: one per (pid, tid), in (pid, tid) order, each contiguous in the index; each orders its own events.
    thread = thread_rank(ev["pid"][rows], ev["tid"][rows])
    grouped = by_thread(thread)
    rows, thread = rows[grouped], thread[grouped]
    starts = np.flatnonzero(np.concatenate([[True], thread[1:] != thread[:-1]])) if len(rows) else \
        np.empty(0, np.int64)
    bounds = list(zip(starts.tolist(), np.append(starts[1:], len(rows)).tolist()))
    out = _Columns.empty(len(rows))
    pieces = _pieces(ev, rows, bounds, out, t_min, bucket_us)

    lane_count = np.array([len(p.depths) for p in pieces], dtype=np.int64)
    lane_first = np.concatenate([[0], np.cumsum(lane_count)])
    summaries = {int(lane_first[t]) + k: summary for t, p in enumerate(pieces) for k, summary in p.summaries.items()}
    pairs = [(int(ev["pid"][rows[lo]]), int(ev["tid"][rows[lo]])) for lo, _ in bounds]
    tracks = _tracks(model, pairs, np.array([p.gpu for p in pieces], dtype=bool), lane_first)
    return TimelineIndex(
        tracks=sorted(tracks, key=lambda tr: tr.sort_key),
        lane_track=np.repeat(np.arange(len(pieces), dtype=np.int32), lane_count),
        lane_depth=concat([p.depths for p in pieces], np.int16),
        lane_offsets=np.append(concat([lo + p.offsets[:-1] for (lo, _), p in zip(bounds, pieces)], np.int64),
                               len(rows)).astype(np.int64),
        start=out.start, dur=out.dur, max_end=out.max_end, self_time=out.self_time, name=out.name, row=out.row,
        t_min=t_min, t_max=t_max, bucket_us=bucket_us, summaries=summaries)


def _tracks(model: TraceModel, pairs: list[tuple[int, int]], gpu_track: np.ndarray,
            lane_first: np.ndarray) -> list[Track]:
    processes, threads, sort_index = _labels(model)
    tracks: list[Track] = []
    for t, (p, th) in enumerate(pairs):
        gpu = bool(gpu_track[t])
        process_label = processes.get(p, f"{'GPU' if gpu else 'process'} {ids.display(model.strings, p)}")
        shown = ids.display(model.strings, th)
        # PyTorch 1.9 traces name a stream's tid "stream 7" already: no "stream stream 7"
        default = (shown if shown.startswith("stream ") else f"stream {shown}") if gpu else f"thread {shown}"
        label = threads.get((p, th), default)
        rank = 0 if gpu else 1  # GPU first: the device is what a trace is opened for, the host stacks are deep
        tracks.append(Track(id=t, pid=p, tid=th, kind="gpu" if gpu else "cpu", process_label=process_label,
                            label=f"{process_label} · {label}" if gpu else label,
                            sort_key=(rank, sort_index.get(p, p), th),
                            lanes=range(int(lane_first[t]), int(lane_first[t + 1]))))
    return tracks


@memoized
def depth_of_rows(model: TraceModel) -> np.ndarray:
    """Lane depth of every event row in the timeline (-1 for rows not drawn)."""
    ix = timeline_index(model)
    depth = np.full(model.n_events, -1, dtype=np.int16)
    sizes = np.diff(ix.lane_offsets)
    depth[ix.row] = np.repeat(ix.lane_depth, sizes)
    return depth
