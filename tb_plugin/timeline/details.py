"""One event on demand: everything the model knows about it, its launch partners, its call stack; and search."""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from ..model import ids
from ..model.arrays import isin_ints
from ..model.derived import memoized
from ..model.kinds import DEVICE_KINDS, Kind
from ..model.lookups import side_row, tree_node_of_row
from ..model.optree import host_tree
from ..model.tables import SCHEMAS, TraceModel
from .index import depth_of_rows, timeline_index

_SOURCE_FRAME = re.compile(r"\(\d+\): ")
_SIDE_TABLES = ("device_events", "ops", "comms", "python", "memory")


@memoized
def _track_lookup(model: TraceModel) -> dict[tuple[int, int], int]:
    return {(t.pid, t.tid): t.id for t in timeline_index(model).tracks}


def _value(model: TraceModel, table: str, col: str, value: Any) -> Any:
    if SCHEMAS[table][col] == "i4":
        return model.full_text(int(value))  # an argument as written, also where the views show it shortened
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return None if value == -1 and SCHEMAS[table][col] == "i8" else value


def _brief(model: TraceModel, row: int) -> dict[str, Any]:
    ev = model["events"]
    depth = int(depth_of_rows(model)[row])
    return {"id": row, "name": model.strings[int(ev["name"][row])], "start_us": float(ev["ts"][row]),
            "dur_us": float(np.nan_to_num(ev["dur"][row])),
            "track": _track_lookup(model).get((int(ev["pid"][row]), int(ev["tid"][row]))),
            "depth": depth if depth >= 0 else None}


def python_stack(model: TraceModel, row: int) -> list[str]:
    """Source frames enclosing an event on its thread, innermost first (PyTorch 2.x with_stack traces)."""
    ev = model["events"]
    py = model["python"]
    if not len(py["row"]):
        return []
    rows = py["row"]
    start, end = float(ev["ts"][row]), float(ev["ts"][row] + np.nan_to_num(ev["dur"][row]))
    p_start = ev["ts"][rows]
    p_end = p_start + np.nan_to_num(ev["dur"][rows], nan=0.0)
    inside = (ev["pid"][rows] == ev["pid"][row]) & (ev["tid"][rows] == ev["tid"][row]) & (p_start <= start) & (
        p_end >= end) & (rows != row)
    if not inside.any():
        return []
    k = int(np.flatnonzero(inside)[np.argmax(p_start[inside])])
    by_id = {int(i): j for j, i in enumerate(py["python_id"].tolist()) if i >= 0}
    frames: list[str] = []
    seen = 0
    current: int | None = k
    while current is not None and seen < 512:
        name = model.strings[int(ev["name"][rows[current]])]
        if _SOURCE_FRAME.search(name):
            frames.append(name)
        current = by_id.get(int(py["parent_id"][current]))
        seen += 1
    return frames


def event_details(model: TraceModel, row: int) -> dict[str, Any]:
    ev = model["events"]
    kind = Kind(int(ev["kind"][row]))
    out = _brief(model, row)
    out.update({
        "category": model.text(int(ev["cat"][row])),
        "kind": kind.name.lower(),
        "pid": ids.for_json(model.strings, int(ev["pid"][row])),
        "tid": ids.for_json(model.strings, int(ev["tid"][row])),
        "args": {},
    })
    name = int(ev["name"][row])
    if name in model.long_texts:  # shown shortened everywhere else: the whole name, on demand (loader.limits)
        out["full_name"] = model.full_text(name)
    if ev["external_id"][row] >= 0:
        out["args"]["External id"] = int(ev["external_id"][row])
    if ev["correlation"][row] >= 0:
        out["args"]["correlation"] = int(ev["correlation"][row])
    for table in _SIDE_TABLES:
        k = int(side_row(model, table)[row])
        if k < 0:
            continue
        for col, values in model[table].items():
            if col == "row":
                continue
            value = _value(model, table, col, values[k].item())
            if value is not None:
                out["args"][col] = value
    tree = host_tree(model)
    node = int(tree_node_of_row(model)[row])
    dev_pos = int(side_row(model, "device_events")[row])
    if kind in DEVICE_KINDS and dev_pos >= 0:
        launch = int(tree.device_launch[dev_pos])
        out["launched_by"] = _brief(model, int(tree.rows[launch])) if launch >= 0 else None
        op = int(tree.device_op[dev_pos])
        out["operator"] = _brief(model, int(tree.rows[op])) if op >= 0 else None
    if node >= 0 and kind in (Kind.RUNTIME, Kind.DRIVER):
        launched = np.flatnonzero(tree.device_launch == node)
        out["launched"] = [_brief(model, int(model["device_events"]["row"][i])) for i in launched[:100].tolist()]
    if kind in (Kind.CPU_OP, Kind.USER_ANNOTATION, Kind.RUNTIME, Kind.DRIVER, Kind.PYTHON_FUNCTION):
        ops_pos = int(side_row(model, "ops")[row])
        stack_code = int(model["ops"]["call_stack"][ops_pos]) if ops_pos >= 0 else -1
        stack = (model.full_text(stack_code) or "").split(";") if stack_code >= 0 else python_stack(model, row)
        out["call_stack"] = [f for f in stack if f]
    return out


SEARCH_MATCHES = ("substring", "exact")


def search(model: TraceModel, query: str, offset: int, limit: int, exact: bool = False) -> dict[str, Any]:
    """Events whose name contains ``query`` (case-insensitive), or with ``exact`` is ``query`` (case and all: a
    search for ``Linear_1`` must not stop at ``Linear_10``), in time order, one page at a time."""
    ix = timeline_index(model)
    needle = query.lower()
    codes = model.codes_where((lambda s: s == query) if exact else (lambda s: needle in s.lower()))
    hits = np.flatnonzero(isin_ints(ix.name, codes))
    order = np.argsort(ix.start[hits], kind="stable")
    hits = hits[order]
    page = hits[offset:offset + limit]
    return {
        "query": query,
        "total": len(hits),
        "offset": offset,
        "items": [_brief(model, int(r)) for r in ix.row[page].tolist()],
    }


def range_summary(model: TraceModel, t0: float, t1: float, tracks: frozenset[int] | None = None,
                  limit: int = 500) -> dict[str, Any]:
    """Events inside [t0, t1] (optionally on some tracks) aggregated by name: count, total and self time.

    An event counts when it overlaps the range; its time is clipped to the range, and its self time scaled by the
    same share, so a selection across an event's edge counts only the selected part.
    """
    ix = timeline_index(model)
    lanes = np.arange(len(ix.lane_track))
    if tracks is not None:
        lanes = lanes[np.isin(ix.lane_track, list(tracks))]
    picks = []
    for lane in lanes.tolist():
        lo, hi = int(ix.lane_offsets[lane]), int(ix.lane_offsets[lane + 1])
        first = lo + int(np.searchsorted(ix.max_end[lo:hi], t0, side="right"))
        last = lo + int(np.searchsorted(ix.start[lo:hi], t1, side="left"))
        if last > first:
            picks.append(np.arange(first, last))
    idx = np.concatenate(picks) if picks else np.empty(0, dtype=np.int64)
    start, dur = ix.start[idx], ix.dur[idx].astype(np.float64)
    clipped = np.clip(np.minimum(start + dur, t1) - np.maximum(start, t0), 0.0, None)
    keep = (clipped > 0) | ((dur == 0) & (start >= t0) & (start <= t1))
    idx, clipped, dur = idx[keep], clipped[keep], dur[keep]
    share = np.where(dur > 0, clipped / np.where(dur > 0, dur, 1.0), 1.0)
    names, group = np.unique(ix.name[idx], return_inverse=True)
    group = group.reshape(-1)
    count = np.bincount(group, minlength=len(names))
    total = np.bincount(group, weights=clipped, minlength=len(names))
    self_time = np.bincount(group, weights=ix.self_time[idx].astype(np.float64) * share, minlength=len(names))
    order = np.argsort(-total, kind="stable")[:limit]
    return {
        "start_us": t0, "end_us": t1, "events": len(idx), "groups": len(names),
        "rows": [{"name": model.strings[int(names[g])], "count": int(count[g]), "total_us": float(total[g]),
                  "self_us": float(self_time[g])} for g in order.tolist()],
    }
