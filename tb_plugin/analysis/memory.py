"""Memory view: allocated/reserved curves per device, allocation events paired with their frees, and statistics
per operator and device.

Each ``[memory]`` record belongs to the deepest operator that contains it on its thread. When that operator is an
allocator primitive (``aten::empty…``), the event is shown as ``parent (aten::empty…)``: the parent is the
operator that asked for the memory. Allocations and frees pair by (device, address) in time order; traces of
PyTorch < 1.10 have no addresses, so they get statistics but no curve or pairs.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..model.arrays import take
from ..model.derived import memoized
from ..model.kinds import Kind
from ..model.optree import host_tree, innermost_containing
from ..model.tables import TraceModel
from .operators import call_stacks, operator_nodes, tree_levels
from .table_search import search_mask

_DEVICE_TYPES = {0: "CPU", 1: "GPU", 6: "HIP", 12: "XPU", 13: "MPS", 15: "HPU", 19: "MTIA", 20: "PrivateUse1"}
UNKNOWN = "<unknown>"


def device_name(device_type: int, device_id: int) -> str:
    """``GPU0``, ``CPU``; a missing or non-numeric device id (stored as -1) is unknown, never ``GPU-1``."""
    if device_type == 0:
        return "CPU"
    base = _DEVICE_TYPES.get(device_type, f"device type {device_type} #")
    return f"{base}{device_id}" if device_id >= 0 else f"{base.rstrip(' #')} (unknown device)"


def _device_mask(codes: np.ndarray, labels: Sequence[str], label: str) -> np.ndarray:
    """Which of ``codes`` (indices into ``labels``) are the device ``label``: none where it is not one of them."""
    mask: np.ndarray = codes == (labels.index(label) if label in labels else -1)
    return mask


@dataclass(frozen=True)
class MemoryRecords:
    """The ``[memory]`` records in time order, with their device. The device is a code into ``labels`` (the
    distinct labels, sorted), not a label per record: a 2 GB trace holds 0.7 M records. Their owning operators are
    :func:`memory_owners`, apart: the Overview reads the curve's peaks only, and finding each record's operator in the
    host tree was an eighth of its time at 2 GB (0.42 of 3.5 s, 2-core VM)."""

    rows: np.ndarray  # event row of each record
    ts: np.ndarray
    nbytes: np.ndarray
    addr: np.ndarray
    allocated: np.ndarray
    reserved: np.ndarray
    device: np.ndarray  # per record: its label's index in ``labels``
    labels: list[str]
    has_addresses: bool

    def on(self, label: str) -> np.ndarray:
        """Which records are on the device ``label``."""
        return _device_mask(self.device, self.labels, label)

    def devices_of(self, mask: np.ndarray) -> list[int]:
        """The codes of the devices the records of ``mask`` are on, the CPU first, then by label."""
        codes: list[int] = np.unique(self.device[mask]).tolist()
        return sorted(codes, key=lambda c: (self.labels[c] != "CPU", self.labels[c]))


@memoized
def memory_records(model: TraceModel) -> MemoryRecords:
    mem = model["memory"]
    ev = model["events"]
    timed = np.flatnonzero(np.isfinite(ev["ts"][mem["row"]]))  # a record without a usable time is on no curve
    order = timed[np.argsort(ev["ts"][mem["row"][timed]], kind="stable")]
    rows = mem["row"][order]
    device, labels = _device_codes(mem["device_type"][order], mem["device_id"][order])
    addr = mem["addr"][order]
    return MemoryRecords(rows=rows, ts=ev["ts"][rows], nbytes=mem["bytes"][order], addr=addr,
                         allocated=mem["total_allocated"][order], reserved=mem["total_reserved"][order],
                         device=device, labels=labels, has_addresses=bool((addr >= 0).any()))


@memoized
def memory_owners(model: TraceModel) -> np.ndarray:
    """Per record of :func:`memory_records`: the host-tree node of the deepest operator containing it on its thread,
    -1 if none."""
    rows = memory_records(model).rows
    ev = model["events"]
    tree = host_tree(model)
    ops = np.flatnonzero((tree.kind == Kind.CPU_OP) & ~tree.merged)
    ev_pid, ev_tid = ev["pid"], ev["tid"]
    inner = innermost_containing(ev_pid[tree.rows[ops]], ev_tid[tree.rows[ops]], tree.start[ops], tree.end[ops],
                                 ev_pid[rows], ev_tid[rows], ev["ts"][rows], ordered=True)  # ops in preorder
    owner: np.ndarray = take(ops, inner, -1)
    return owner


def _device_codes(device_type: np.ndarray, device_id: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """Each record's device as a code into the sorted distinct labels, each named once per (type, id) pair."""
    types, type_of = np.unique(device_type, return_inverse=True)
    ids, id_of = np.unique(device_id, return_inverse=True)
    pairs, pair_of = np.unique(type_of.reshape(-1) * len(ids) + id_of.reshape(-1), return_inverse=True)
    names = [device_name(int(types[p // len(ids)]), int(ids[p % len(ids)])) for p in pairs.tolist()]
    labels = sorted(set(names))
    code = np.array([labels.index(name) for name in names], dtype=np.int16)
    return code[pair_of.reshape(-1)] if len(pairs) else np.zeros(0, dtype=np.int16), labels


def _downsample(t: np.ndarray, alloc: np.ndarray, res: np.ndarray, max_points: int) -> np.ndarray:
    """At most ~max_points points, keeping the first, last, lowest and highest allocated value of each bucket."""
    if len(t) <= max_points:
        return np.arange(len(t))
    buckets = max(1, max_points // 4)
    edges = np.linspace(t[0], t[-1], buckets + 1)
    b = np.clip(np.searchsorted(edges, t, side="right") - 1, 0, buckets - 1)
    starts = np.flatnonzero(np.concatenate([[True], b[1:] != b[:-1]]))
    ends = np.append(starts[1:], len(t))
    keep = [starts, ends - 1, _first_extreme(alloc, starts, ends, largest=True),
            _first_extreme(alloc, starts, ends, largest=False)]
    return np.unique(np.concatenate(keep))


def _first_extreme(values: np.ndarray, starts: np.ndarray, ends: np.ndarray, largest: bool) -> np.ndarray:
    """Per bucket ``[start, end)``: ``start + argmax`` (or ``argmin``) of the bucket, the first index holding its
    extreme, for all buckets at once (a NaN, which argmax picks and ``==`` never finds, takes the loop)."""
    if np.isnan(values).any():
        arg = np.argmax if largest else np.argmin
        return np.array([s + int(arg(values[s:e])) for s, e in zip(starts.tolist(), ends.tolist())])
    extreme = (np.maximum if largest else np.minimum).reduceat(values, starts)
    bucket = np.repeat(np.arange(len(starts)), ends - starts)
    hit = np.flatnonzero(values == extreme[bucket])
    _, first = np.unique(bucket[hit], return_index=True)
    out: np.ndarray = hit[first]
    return out


def memory_curve(model: TraceModel, max_points: int = 4000) -> dict[str, Any]:
    rec = memory_records(model)
    devices: dict[str, Any] = {}
    ok = (rec.allocated >= 0) & (rec.addr >= 0) if rec.has_addresses else np.zeros(len(rec.ts), dtype=bool)
    for code in rec.devices_of(ok):
        label = rec.labels[code]
        on = ok & (rec.device == code)
        t, a, r = rec.ts[on], rec.allocated[on].astype(np.float64), rec.reserved[on].astype(np.float64)
        keep = _downsample(t, a, r, max_points)
        peak = int(np.argmax(a))
        devices[label] = {
            "points": [[float(x), int(y), int(z)] for x, y, z in zip(t[keep].tolist(), a[keep].tolist(),
                                                                      r[keep].tolist())],
            "peak_allocated_bytes": int(a[peak]),
            "peak_time_us": float(t[peak]),
            "peak_reserved_bytes": int(r.max()),
            "records": int(on.sum()),
        }
    reason = None
    if not devices:
        reason = ("This trace's memory records have no addresses or totals (PyTorch < 1.10), so there is no curve; "
                  "the statistics table still works." if len(rec.ts) else
                  "The trace has no memory records: profile with profile_memory=True.")
    from .summary import time_range_us

    span = time_range_us(model)
    return {"devices": devices, "reason": reason, "start_us": span[0] if span else None}


def _display_names(model: TraceModel, owner: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """Per record: the index in the texts returned of its operator's name, ``parent (aten::empty…)`` where an
    allocator primitive made it (the parent is the operator that asked for the memory), ``<unknown>`` without
    one; each distinct text built once."""
    tree = host_tree(model)
    names = model["events"]["name"]
    node = np.maximum(owner, 0)
    code = take(names[tree.rows], owner, -1).astype(np.int64)
    up = np.where(tree.parent[node] >= 0, tree.op_of[np.maximum(tree.parent[node], 0)], -1)
    empty = np.isin(code, model.codes_where(lambda s: s.startswith("aten::empty")))
    parent_code = np.where(empty & (up >= 0), take(names[tree.rows], up, -1), -1).astype(np.int64)
    width = len(model.strings) + 1  # codes from -1: one key per (code, parent code)
    keys, inverse = np.unique((code + 1) * width + (parent_code + 1), return_inverse=True)
    texts = [f"{model.strings[pc]} ({model.strings[c] if c >= 0 else UNKNOWN})" if pc >= 0
             else (model.strings[c] if c >= 0 else UNKNOWN) for c, pc in zip((keys // width - 1).tolist(),
                                                                           (keys % width - 1).tolist())]
    return inverse.reshape(-1).astype(np.int32), texts


def _display_name(model: TraceModel, node: int) -> str:
    codes, texts = _display_names(model, np.array([node], dtype=np.int64))
    return texts[int(codes[0])]


def _record_stacks(model: TraceModel, owner: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """Per memory record: the index in the texts of the Python call stack of the operator that made it (-1:
    none): what code to change to allocate less at the peak."""
    stacks = call_stacks(model)
    nodes = operator_nodes(model).node
    by_node = np.full(host_tree(model).size + 1, -1, dtype=np.int64)  # last slot: owner -1
    by_node[nodes] = stacks.codes
    return by_node[np.where(owner >= 0, owner, len(by_node) - 1)].astype(np.int32), stacks.texts


@dataclass(frozen=True)
class MemoryPairs:
    """Allocations with their frees, in allocation time order (frees with no allocation in the trace too), as
    columns (texts as codes into tables of the distinct ones: a 10 GB trace holds millions of pairs): a row dict
    per pair is built only for the pairs an answer shows. ``alloc``/``free`` are the times, -inf / inf where the
    trace has none (``has_alloc``/``has_free`` false: allocated before it began, never freed in it), which is how
    a range selects them."""

    name: np.ndarray  # per pair: its index in ``names``
    names: list[str]
    device: np.ndarray  # per pair: its index in ``devices``
    devices: list[str]
    size: np.ndarray
    alloc: np.ndarray
    free: np.ndarray
    has_alloc: np.ndarray
    has_free: np.ndarray
    addr: np.ndarray
    call_stack: np.ndarray  # per pair: its index in ``call_stacks``, -1 for none
    call_stacks: list[str]

    def on(self, device: str | None) -> np.ndarray | bool:
        """Which pairs are on ``device`` (all of them for None)."""
        return True if device is None else _device_mask(self.device, self.devices, device)

    def rows(self, picked: np.ndarray, state: list[str]) -> list[dict[str, Any]]:
        """The pairs ``picked`` as the API shows them, each with how it touches the range asked for."""
        a, f = self.alloc[picked], self.free[picked]
        has_a, has_f = self.has_alloc[picked], self.has_free[picked]
        alloc = [t if h else None for t, h in zip(a.tolist(), has_a.tolist())]
        free = [t if h else None for t, h in zip(f.tolist(), has_f.tolist())]
        life = [t if h else None for t, h in zip((f - a).tolist(), (has_a & has_f).tolist())]
        names, devices, stacks = self.names, self.devices, self.call_stacks
        return [{"name": names[n], "device": devices[d], "size_bytes": sz, "alloc_us": al, "free_us": fr,
                 "lifetime_us": li, "addr": ad, "call_stack": stacks[c] if c >= 0 else None, "in_range": st}
                for n, d, sz, ad, c, al, fr, li, st in zip(
                    self.name[picked].tolist(), self.device[picked].tolist(), self.size[picked].tolist(),
                    self.addr[picked].tolist(), self.call_stack[picked].tolist(), alloc, free, life, state)]


@memoized
def memory_pairs(model: TraceModel) -> MemoryPairs:
    """Allocations and frees paired by (device, address) in time order: a free closes the allocation just before
    it at its address, if the record just before it there is one (an address reused before its free was recorded
    leaves the older allocation unfreed); found with one sort by (device, address, time)."""
    rec = memory_records(model)
    if not rec.has_addresses:
        none, no = np.zeros(0, dtype=bool), np.zeros(0, dtype=np.int64)
        return MemoryPairs(no, [], no, [], no, np.zeros(0), np.zeros(0), none, none, no, no, [])
    kept = np.flatnonzero((rec.addr >= 0) & (rec.nbytes != 0))
    device = rec.device[kept]
    addr, size = rec.addr[kept], rec.nbytes[kept]
    order = np.lexsort((kept, addr, device))
    alloc = size[order] > 0
    follows = np.zeros(len(kept), dtype=bool)  # a free just after an allocation at the same (device, address)
    follows[1:] = ((device[order][1:] == device[order][:-1]) & (addr[order][1:] == addr[order][:-1])
                   & alloc[:-1] & ~alloc[1:])
    freed_by = np.full(len(kept), -1, dtype=np.int64)  # per kept record (an allocation): its free's record
    freed_by[order[np.flatnonzero(follows) - 1]] = kept[order[follows]]
    paired_free = np.zeros(len(kept), dtype=bool)
    paired_free[order[follows]] = True
    rows = kept[~paired_free]  # allocations, and frees with no allocation, in record (time) order
    is_alloc = rec.nbytes[rows] > 0
    free_of = freed_by[~paired_free]
    owner = memory_owners(model)[rows]
    names, name_texts = _display_names(model, owner)
    stacks, stack_texts = _record_stacks(model, owner)
    has_free = ~is_alloc | (free_of >= 0)
    return MemoryPairs(
        name=names, names=name_texts, device=rec.device[rows], devices=list(rec.labels),
        size=np.abs(rec.nbytes[rows]), addr=rec.addr[rows],
        alloc=np.where(is_alloc, rec.ts[rows], -np.inf), has_alloc=is_alloc, has_free=has_free,
        free=np.where(is_alloc, np.where(free_of >= 0, rec.ts[np.maximum(free_of, 0)], np.inf), rec.ts[rows]),
        call_stack=np.where(is_alloc, stacks, -1).astype(np.int32), call_stacks=stack_texts)


def _touching(pairs: MemoryPairs, start: float | None, end: float | None, device: str | None
              ) -> tuple[np.ndarray, np.ndarray]:
    """The pairs touching [start, end) on ``device`` (in pair order) and whether each was allocated in it (else
    allocated before it and live in it): the rows of the range, before the table's filters."""
    lo = -np.inf if start is None else start
    hi = np.inf if end is None else end
    picked = np.flatnonzero((pairs.alloc < hi) & (pairs.free >= lo) & pairs.on(device))
    allocated: np.ndarray = pairs.alloc[picked] >= lo
    return picked, allocated


def _states(allocated: np.ndarray) -> list[str]:
    """The ``in_range`` text of each row."""
    return ["allocated" if a else "live" for a in allocated.tolist()]


def memory_events(model: TraceModel, start: float | None = None, end: float | None = None,
                  device: str | None = None) -> list[dict[str, Any]]:
    """Pairs touching [start, end): allocated in it (``in_range`` "allocated") or allocated before it and live in it
    ("live": alive at its start, freed in it or later), on one device if given. Without a range every pair counts
    as allocated."""
    pairs = memory_pairs(model)
    picked, allocated = _touching(pairs, start, end, device)
    return pairs.rows(picked, _states(allocated))


def _live(pairs: MemoryPairs, at: float, device: str | None) -> np.ndarray:
    """The pairs live at the instant ``at`` on ``device``, in pair order."""
    return np.flatnonzero((pairs.alloc <= at) & (at < pairs.free) & pairs.on(device))


def _allocated_at(model: TraceModel, at: float, device: str | None) -> int | None:
    """The device's total allocated at the instant ``at`` (its last record at or before it; None without a device
    or a record)."""
    if device is None:
        return None
    rec = memory_records(model)
    on = np.flatnonzero(rec.on(device) & (rec.ts <= at) & (rec.allocated >= 0))
    return int(rec.allocated[on[-1]]) if len(on) else None


def live_at(model: TraceModel, at: float, device: str | None = None) -> dict[str, Any]:
    """Allocations live at the instant ``at`` (allocated at or before it, freed after it or never in the trace),
    largest first: at the curve's peak, what the peak is made of. ``allocated_bytes`` is the device's total
    allocated at that instant (its last record at or before it; None without a device or a record): the part of
    it the rows do not add up to was allocated before the trace started (weights, optimizer state)."""
    pairs = memory_pairs(model)
    picked = _live(pairs, at, device)
    rows = pairs.rows(picked, ["live"] * len(picked))
    rows.sort(key=lambda r: -r["size_bytes"])
    return {"rows": rows, "allocated_bytes": _allocated_at(model, at, device)}


# ---- one page of the events table, filtered and sorted on the server ------------------------------------------

EVENT_SORTS = ("name", "size", "alloc", "free", "lifetime", "in_range")  # the events table's columns
EVENT_ORDERS = ("asc", "desc")
EVENTS_DEFAULT_LIMIT = 100
EVENTS_MAX_LIMIT = 10_000  # rows one page may hold (6 MB of JSON with call stacks, 2 GB trace); the CSV pages
_NATURAL = re.compile(r"([0-9]+)")


@dataclass(frozen=True)
class EventQuery:
    """What one page of the events table asks for: the table's filters (``q`` the operator search, ``min_bytes``
    the "Min size"), its sort (None: the table's default, by allocation time, or largest first at an instant) and
    which rows. Hashable: the sorted order of a query (``_event_order``) is memoised by it."""

    offset: int = 0
    limit: int = EVENTS_DEFAULT_LIMIT
    sort: str | None = None
    order: str | None = None
    q: str = ""
    min_bytes: float = 0.0

    def resolved(self, at: float | None) -> tuple[str, str]:
        """(column, order) the page is sorted by: the default column and order where not given (a column without
        an order: ascending, as the Distributed ranks do)."""
        default = ("size", "desc") if at is not None else ("alloc", "asc")
        if self.sort is None:
            return default[0], self.order or default[1]
        return self.sort, self.order or "asc"


def _name_ranks(names: list[str]) -> np.ndarray:
    """Per distinct name, its place in the name column's order: case-insensitive, numbers by value ("layer2"
    before "layer10"), as the browser's ``localeCompare(numeric)`` ordered them; equal names share a place."""
    def key(name: str) -> list[str | int]:  # text, number, text, ...: split on a group alternates the two
        return [int(p) if i % 2 else p for i, p in enumerate(_NATURAL.split(name.lower()))]

    keys = [key(n) for n in names]
    order = sorted(range(len(names)), key=lambda i: keys[i])  # type: ignore[arg-type, return-value]
    ranks = np.zeros(len(names), dtype=np.float64)
    for place, (before, i) in enumerate(zip([None, *order], order)):
        ranks[i] = ranks[before] if before is not None and keys[before] == keys[i] else place
    return ranks


def _sort_values(pairs: MemoryPairs, picked: np.ndarray, allocated: np.ndarray, sort: str
                 ) -> tuple[np.ndarray, np.ndarray]:
    """(value, missing) per picked pair for the column ``sort``: a time the trace does not hold is missing."""
    if sort == "name":
        return _name_ranks(pairs.names)[pairs.name[picked]] if pairs.names else np.zeros(len(picked)), \
            np.zeros(len(picked), dtype=bool)
    if sort == "size":
        return pairs.size[picked].astype(np.float64), np.zeros(len(picked), dtype=bool)
    if sort == "in_range":
        return (~allocated).astype(np.float64), np.zeros(len(picked), dtype=bool)
    has_a, has_f = pairs.has_alloc[picked], pairs.has_free[picked]
    if sort == "alloc":
        return np.where(has_a, pairs.alloc[picked], 0.0), ~has_a
    if sort == "free":
        return np.where(has_f, pairs.free[picked], 0.0), ~has_f
    both = has_a & has_f
    return np.where(both, pairs.free[picked] - pairs.alloc[picked], 0.0), ~both


@dataclass(frozen=True)
class EventOrder:
    """The rows of one query, sorted: ``pairs`` (pair indices, the page is a slice of them) with ``allocated``
    (allocated in the range, per row), and over the rows before the table's filters their count and bytes."""

    pairs: np.ndarray
    allocated: np.ndarray
    unfiltered: int
    unfiltered_bytes: int


@memoized
def _event_order(model: TraceModel, start: float | None, end: float | None, at: float | None, device: str | None,
                 q: str, min_bytes: float, sort: str, order: str) -> EventOrder:
    """The rows matching the filters in the order asked; missing values last in either order, ties in pair
    (allocation time) order, so that consecutive pages never overlap or skip a row. Memoised within the byte
    budget of results keyed by a request's choice: the next page of the same query is a slice."""
    pairs = memory_pairs(model)
    if at is not None:
        picked = _live(pairs, at, device)
        allocated = np.zeros(len(picked), dtype=bool)
    else:
        picked, allocated = _touching(pairs, start, end, device)
    unfiltered, unfiltered_bytes = len(picked), int(pairs.size[picked].sum())
    keep = pairs.size[picked] >= min_bytes
    if q.strip():
        keep &= search_mask(pairs.names, q)[pairs.name[picked]]
    picked, allocated = picked[keep], allocated[keep]
    value, missing = _sort_values(pairs, picked, allocated, sort)
    ranked = np.lexsort((picked, -value if order == "desc" else value, missing))
    return EventOrder(picked[ranked], allocated[ranked], unfiltered, unfiltered_bytes)


@memoized
def pair_devices(model: TraceModel) -> list[str]:
    """The devices holding pairs, in label order: the page's device picker needs them without every row."""
    pairs = memory_pairs(model)
    return [pairs.devices[c] for c in np.unique(pairs.device).tolist()]


def events_page(model: TraceModel, query: EventQuery, start: float | None = None, end: float | None = None,
                device: str | None = None, at: float | None = None) -> dict[str, Any]:
    """One page of the events table (of the range, or with ``at`` of the allocations live at that instant):
    ``rows`` of the page only, built from the columns for those rows; ``total`` rows match the filters;
    ``unfiltered``/``unfiltered_bytes`` count the rows before them (what "N of M rows match" and the live
    summary show); ``devices`` has every device holding pairs (the device picker's, without every row)."""
    sort, order = query.resolved(at)
    ranked = _event_order(model, start, end, at, device, query.q, float(query.min_bytes), sort, order)
    pairs = memory_pairs(model)
    window = slice(query.offset, query.offset + query.limit)
    rows = pairs.rows(ranked.pairs[window], _states(ranked.allocated[window]) if at is None
                      else ["live"] * len(ranked.pairs[window]))
    page: dict[str, Any] = {
        "rows": rows, "total": len(ranked.pairs), "offset": query.offset, "limit": query.limit,
        "sort": sort, "order": order, "unfiltered": ranked.unfiltered, "unfiltered_bytes": ranked.unfiltered_bytes,
        "devices": pair_devices(model),
    }
    if at is not None:
        page["allocated_bytes"] = _allocated_at(model, at, device)
    return page


def memory_statistics(model: TraceModel, start: float | None = None, end: float | None = None) -> list[dict[str, Any]]:
    """Per operator name and device: calls, size increase, allocation count/size — inclusive and self."""
    rec = memory_records(model)
    tree = host_tree(model)
    ev = model["events"]
    lo = -np.inf if start is None else start
    hi = np.inf if end is None else end
    owners = memory_owners(model)
    pick = (rec.ts >= lo) & (rec.ts < hi) & (owners >= 0)
    codes = rec.device[pick]
    owner, size = owners[pick], rec.nbytes[pick].astype(np.float64)
    out: list[dict[str, Any]] = []
    levels = list(reversed(tree_levels(model)[1:]))
    for code in rec.devices_of(pick):
        device = rec.labels[code]
        on = codes == code
        n = tree.size
        self_inc = np.bincount(owner[on], weights=size[on], minlength=n)
        self_cnt = np.bincount(owner[on], weights=(size[on] > 0).astype(float), minlength=n)
        self_size = np.bincount(owner[on], weights=np.clip(size[on], 0, None), minlength=n)
        inc, cnt, alloc = self_inc.copy(), self_cnt.copy(), self_size.copy()
        for level in levels:  # deepest first: add each node's inclusive values to its parent
            for values in (inc, cnt, alloc):
                np.add.at(values, tree.parent[level], values[level])
        active = np.flatnonzero(((cnt > 0) | (inc != 0)) & (tree.kind == Kind.CPU_OP) & ~tree.merged)
        names = ev["name"][tree.rows[active]]
        groups, inverse = np.unique(names, return_inverse=True)
        inverse = inverse.reshape(-1)
        m = len(groups)

        def total(values: np.ndarray, nodes: np.ndarray = active, group: np.ndarray = inverse, k: int = m
                  ) -> np.ndarray:
            return np.bincount(group, weights=values[nodes], minlength=k)

        calls = np.bincount(inverse, minlength=m)
        rows = zip(groups.tolist(), calls.tolist(), total(inc).tolist(), total(self_inc).tolist(),
                   total(cnt).tolist(), total(self_cnt).tolist(), total(alloc).tolist(), total(self_size).tolist())
        for name, c, i, si, ac, sac, asz, sasz in rows:
            out.append({"name": model.strings[name], "device": device, "calls": int(c), "size_increase_bytes": int(i),
                        "self_size_increase_bytes": int(si), "allocation_count": int(ac),
                        "self_allocation_count": int(sac), "allocation_size_bytes": int(asz),
                        "self_allocation_size_bytes": int(sasz)})
    out.sort(key=lambda r: (r["device"] != "CPU", r["device"], -r["self_size_increase_bytes"], r["name"]))
    return out


def allocated_peak(model: TraceModel, label: str) -> tuple[float, int] | None:
    """(time µs, bytes) of the device's largest ``Total Allocated``: the peak ``memory_curve`` marks (the first
    record holding it), None where the device's records have no totals."""
    rec = memory_records(model)
    if not rec.has_addresses:
        return None
    on = np.flatnonzero((rec.allocated >= 0) & (rec.addr >= 0) & rec.on(label))
    if not len(on):
        return None
    peak = int(on[np.argmax(rec.allocated[on])])
    return float(rec.ts[peak]), int(rec.allocated[peak])
