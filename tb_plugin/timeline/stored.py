"""The Trace view's index, built in the loader process and stored beside the parse.

Building the index of a 2 GB trace takes seconds of one core (sorting 5 M events, nesting each thread). Done by the
server after the trace turns ready, it delayed the Trace view's first window by those seconds and competed with
the Overview for the GIL. The loader process builds it while it still holds the model, writes its columns next to
the model's in the parse cache, and the server maps them back with the model (zero-copy), so the first window only
reads; a warm restart gets it with the parse. An entry without it (an older cache, a preprocessed rank) still works:
the index is then computed on first use, as before.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from ..model.arrays import concat
from ..model.derived import seed
from ..model.tables import TraceModel, columns_of, load, write_columns
from .index import LaneSummary, TimelineIndex, Track, timeline_index

MARKER = "timeline.json"  # written last: an entry holds a whole stored index or none
_VERSION = 1
_FILES = ("events", "lanes", "buckets", "long")
_EVENT_COLUMNS = ("start", "dur", "max_end", "self_time", "name", "row")
_SUMMARY_COLUMNS = ("bucket", "count", "busy", "top", "top_count")


class StoredIndex:
    """What the loader process and the server do with the index (passed to ``jobs`` by the workspace)."""

    def save(self, directory: str, file: Any = None, processes: int = 1, parse_seconds: float | None = None,
             memory: int | None = None, built: TraceModel | None = None, saved: Any = None) -> None:
        """Build the index of the model in the cache entry ``directory`` (mapped back, as the server opens it) and
        write it there, after the model (always before "ready": nothing is left for later)."""
        if saved is not None:
            saved()
        write_index(timeline_index(load(directory)), Path(directory))

    def expect(self, model: TraceModel, file: Any, parts: Mapping[str, float]) -> None:
        """Nothing is ever left for after "ready" (see :meth:`save`)."""

    def abandon(self, model: TraceModel, parts: Any = None) -> None:
        """Nothing is ever left for after "ready" (see :meth:`save`)."""

    def attach(self, model: TraceModel, files: Mapping[str, pa.Buffer]) -> None:
        """Give ``model`` (just opened from a cache entry whose verified files these are) its stored index, if the
        entry holds a whole one."""
        index = read_index(files)
        if index is not None:
            seed(model, timeline_index, index)


def write_index(ix: TimelineIndex, folder: Path) -> None:
    summaries = ix.summaries or {}
    lanes = sorted(summaries)
    _write(folder, "events", {c: getattr(ix, c) for c in _EVENT_COLUMNS})
    _write(folder, "lanes", {"track": ix.lane_track, "depth": ix.lane_depth, "first": ix.lane_offsets[:-1]})
    per_bucket = {c: concat([getattr(summaries[k], c) for k in lanes], _DTYPES[c]) for c in _SUMMARY_COLUMNS}
    per_bucket["lane"] = concat([np.full(len(summaries[k].bucket), k, np.int32) for k in lanes], np.int32)
    _write(folder, "buckets", per_bucket)
    _write(folder, "long", {"lane": concat([np.full(len(summaries[k].long_pos), k, np.int32) for k in lanes], np.int32),
                            "pos": concat([summaries[k].long_pos for k in lanes], np.int64)})
    meta = {"version": _VERSION, "t_min": ix.t_min, "t_max": ix.t_max, "bucket_us": ix.bucket_us,
            "summary_lanes": lanes, "tracks": [_track_json(t) for t in ix.tracks]}
    tmp = folder / f".{MARKER}.tmp"
    tmp.write_text(json.dumps(meta))
    os.replace(tmp, folder / MARKER)


_DTYPES = {"bucket": np.int32, "count": np.int32, "busy": np.float64, "top": np.int32, "top_count": np.int32}


def read_index(source: Path | Mapping[str, pa.Buffer]) -> TimelineIndex | None:
    """The stored index of a cache entry (a folder, or its files by name), or None where there is none whole (or it
    is of another version)."""
    files = source if isinstance(source, Mapping) else {
        f.name: pa.memory_map(str(f), "r").read_buffer() for f in source.glob("timeline.*") if f.is_file()}
    if MARKER not in files or not all(f"timeline.{name}.arrow" in files for name in _FILES):
        return None
    meta = json.loads(files[MARKER].to_pybytes())
    if meta.get("version") != _VERSION:
        return None
    events, lanes, buckets, long = (columns_of(files[f"timeline.{name}.arrow"]) for name in _FILES)
    offsets = np.append(lanes["first"], len(events["start"])).astype(np.int64)
    return TimelineIndex(tracks=[_track(t) for t in meta["tracks"]], lane_track=lanes["track"],
                         lane_depth=lanes["depth"], lane_offsets=offsets, **{c: events[c] for c in _EVENT_COLUMNS},
                         t_min=meta["t_min"], t_max=meta["t_max"], bucket_us=meta["bucket_us"],
                         summaries=_summaries(meta["summary_lanes"], buckets, long))


def _summaries(lanes: list[int], buckets: dict[str, np.ndarray],
               long: dict[str, np.ndarray]) -> dict[int, LaneSummary]:
    b_bounds = np.searchsorted(buckets["lane"], [*lanes, np.iinfo(np.int32).max])  # written lane by lane, ascending
    l_bounds = np.searchsorted(long["lane"], [*lanes, np.iinfo(np.int32).max])
    out = {}
    for k, lane in enumerate(lanes):
        b, e = int(b_bounds[k]), int(b_bounds[k + 1])
        out[lane] = LaneSummary(**{c: buckets[c][b:e] for c in _SUMMARY_COLUMNS},
                                long_pos=long["pos"][int(l_bounds[k]):int(l_bounds[k + 1])])
    return out


def _write(folder: Path, name: str, cols: dict[str, np.ndarray]) -> None:
    tmp = folder / f".timeline.{name}.arrow.tmp"
    write_columns(tmp, cols)
    os.replace(tmp, folder / f"timeline.{name}.arrow")


def _track_json(t: Track) -> dict[str, Any]:
    return {"id": t.id, "pid": t.pid, "tid": t.tid, "kind": t.kind, "process_label": t.process_label,
            "label": t.label, "sort_key": list(t.sort_key), "lanes": [t.lanes.start, t.lanes.stop]}


def _track(d: dict[str, Any]) -> Track:
    return Track(id=d["id"], pid=d["pid"], tid=d["tid"], kind=d["kind"], process_label=d["process_label"],
                 label=d["label"], sort_key=tuple(d["sort_key"]), lanes=range(*d["lanes"]))  # type: ignore[arg-type]
