"""Build the timeline index of a model: tracks (process → thread, device → stream), lanes by nesting depth.

Each lane holds its events sorted by start, with the running maximum of their ends, so the events overlapping a
window are one ``searchsorted`` range. Storage is four compact columns (about 28 bytes an event); nothing is a
per-event Python object.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..model import ids
from ..model.derived import memoized
from ..model.kinds import DEVICE_KINDS, Kind
from ..model.optree import nest
from ..model.order import preorder
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


def _summarize(start: np.ndarray, dur: np.ndarray, name: np.ndarray, lo: int, t_min: float,
               width: float) -> LaneSummary:
    bucket = np.minimum(((start - t_min) / width).astype(np.int64), SUMMARY_BUCKETS - 1).astype(np.int32)
    first = np.flatnonzero(np.concatenate([[True], bucket[1:] != bucket[:-1]]))  # start-sorted: runs per bucket
    count = np.diff(np.append(first, len(bucket))).astype(np.int32)
    busy = np.add.reduceat(dur.astype(np.float64), first)
    group = np.repeat(np.arange(len(first)), count)
    order = np.lexsort((name, group))
    sg, sn = group[order], name[order]
    change = np.concatenate([[True], (sg[1:] != sg[:-1]) | (sn[1:] != sn[:-1])])
    run_start = np.flatnonzero(change)
    run_len = np.diff(np.append(run_start, len(sg)))
    by_group = np.lexsort((-run_len, sg[run_start]))
    _, first_run = np.unique(sg[run_start][by_group], return_index=True)
    best = by_group[first_run]
    return LaneSummary(bucket=bucket[first], count=count, busy=busy, top=sn[run_start[best]].astype(np.int32),
                       top_count=run_len[best].astype(np.int32),
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
    negative: np.ndarray = (pid < 0) & ~ids.is_text(pid) & ~np.isin(pid, named)
    return negative


def _by_lane(lane_key: np.ndarray) -> np.ndarray:
    """A stable sort by lane. Lane keys are track × 4096 + depth over few tracks, so they are ranked with a table and
    the ranks, which fit 16 bits on any real trace, sorted by radix in one pass."""
    if not len(lane_key):
        return np.zeros(0, dtype=np.int64)
    present = np.zeros(int(lane_key.max()) + 1, dtype=bool)
    present[lane_key] = True
    rank = (np.cumsum(present) - 1)[lane_key]
    small = rank.astype(np.uint16) if rank[-1] < 1 << 16 and rank.max() < 1 << 16 else rank
    return np.argsort(small, kind="stable")


@memoized
def timeline_index(model: TraceModel) -> TimelineIndex:
    ev = model["events"]
    # Kineto's bookkeeping rows (textual pids such as "Spans" and "Traces") are not part of the program.
    keep = np.isfinite(ev["ts"]) & ~np.isin(ev["kind"], _SKIPPED) & ~ids.is_text(ev["pid"])
    keep &= ~_unnamed_negative_pid(model)
    rows = np.flatnonzero(keep)
    start = ev["ts"][rows]
    dur = np.nan_to_num(ev["dur"][rows], nan=0.0, posinf=0.0, neginf=0.0).clip(min=0.0)
    pid, tid = ev["pid"][rows], ev["tid"][rows]
    order = preorder(pid, tid, start, dur)
    rows, start, dur, pid, tid = rows[order], start[order], dur[order], pid[order], tid[order]
    parent, depth = nest(pid, tid, start, start + dur)
    child_time = np.zeros(len(start))
    nested = parent >= 0
    np.add.at(child_time, parent[nested], dur[nested])
    self_time = np.clip(dur - child_time, 0.0, None)

    # Tracks: one per (pid, tid); GPU tracks are those holding device events. The rows are sorted by pid and tid
    # already, so a track starts where either changes (np.unique(axis=0) would sort them again, slowly).
    first = np.concatenate([[True], (pid[1:] != pid[:-1]) | (tid[1:] != tid[:-1])]) if len(pid) else np.empty(0, bool)
    track_of = np.cumsum(first) - 1
    pairs = np.stack([pid[first], tid[first]], axis=1)
    is_device = np.isin(ev["kind"][rows], (*DEVICE_KINDS, Kind.GPU_USER_ANNOTATION))
    gpu_track = np.bincount(track_of, weights=is_device.astype(float), minlength=len(pairs)) > 0
    processes, threads, sort_index = _labels(model)

    # Lanes: (track, depth), events sorted by start within each.
    lane_key = track_of.astype(np.int64) * 4096 + np.minimum(depth, 4095)
    lane_order = _by_lane(lane_key)  # rows are sorted by track and start already: a stable sort by lane suffices
    lane_key = lane_key[lane_order]
    lane_starts = np.flatnonzero(np.concatenate([[True], lane_key[1:] != lane_key[:-1]])) if len(lane_key) else \
        np.empty(0, np.int64)  # lane_key is sorted: each lane starts where it changes
    lane_ids = lane_key[lane_starts]
    lane_offsets = np.append(lane_starts, len(lane_key)).astype(np.int64)
    s, d = start[lane_order], dur[lane_order]
    ends = s + d
    max_end = ends.copy()
    for k in range(len(lane_ids)):
        lo, hi = lane_offsets[k], lane_offsets[k + 1]
        max_end[lo:hi] = np.maximum.accumulate(ends[lo:hi])
    lane_track = (lane_ids // 4096).astype(np.int32)
    lane_depth = (lane_ids % 4096).astype(np.int16)

    tracks: list[Track] = []
    lane_pos = np.searchsorted(lane_track, np.arange(len(pairs) + 1))
    for t, (p, th) in enumerate(pairs.tolist()):
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
                            lanes=range(int(lane_pos[t]), int(lane_pos[t + 1]))))
    t_min = float(start.min()) if len(start) else 0.0
    t_max = float((start + dur).max()) if len(start) else 0.0
    names = ev["name"][rows][lane_order].astype(np.int32)
    bucket_us = max(t_max - t_min, 1e-3) / SUMMARY_BUCKETS
    summaries = {}
    for k in range(len(lane_ids)):
        lo, hi = int(lane_offsets[k]), int(lane_offsets[k + 1])
        if hi - lo > SUMMARY_MIN_EVENTS:
            summaries[k] = _summarize(s[lo:hi], d[lo:hi], names[lo:hi], lo, t_min, bucket_us)
    return TimelineIndex(tracks=sorted(tracks, key=lambda tr: tr.sort_key), lane_track=lane_track,
                         lane_depth=lane_depth, lane_offsets=lane_offsets, start=s, dur=d.astype(np.float32),
                         max_end=max_end, self_time=self_time[lane_order].astype(np.float32), name=names,
                         row=rows[lane_order].astype(np.int32), t_min=t_min, t_max=t_max, bucket_us=bucket_us,
                         summaries=summaries)


@memoized
def depth_of_rows(model: TraceModel) -> np.ndarray:
    """Lane depth of every event row in the timeline (-1 for rows not drawn)."""
    ix = timeline_index(model)
    depth = np.full(model.n_events, -1, dtype=np.int16)
    sizes = np.diff(ix.lane_offsets)
    depth[ix.row] = np.repeat(ix.lane_depth, sizes)
    return depth
