"""Memory view: allocated/reserved curves per device, allocation events paired with their frees, and statistics
per operator and device.

Each ``[memory]`` record belongs to the deepest operator that contains it on its thread. When that operator is an
allocator primitive (``aten::empty…``), the event is shown as ``parent (aten::empty…)``: the parent is the
operator that asked for the memory. Allocations and frees pair by (device, address) in time order; traces of
PyTorch < 1.10 have no addresses, so they get statistics but no curve or pairs.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..model.arrays import take
from ..model.derived import memoized
from ..model.kinds import Kind
from ..model.optree import host_tree, innermost_containing
from ..model.tables import TraceModel
from .operators import call_stacks, operator_nodes

_DEVICE_TYPES = {0: "CPU", 1: "GPU", 6: "HIP", 12: "XPU", 13: "MPS", 15: "HPU", 19: "MTIA", 20: "PrivateUse1"}
UNKNOWN = "<unknown>"


def device_name(device_type: int, device_id: int) -> str:
    """``GPU0``, ``CPU``; a missing or non-numeric device id (stored as -1) is unknown, never ``GPU-1``."""
    if device_type == 0:
        return "CPU"
    base = _DEVICE_TYPES.get(device_type, f"device type {device_type} #")
    return f"{base}{device_id}" if device_id >= 0 else f"{base.rstrip(' #')} (unknown device)"


@dataclass(frozen=True)
class MemoryRecords:
    """The ``[memory]`` records in time order, with their device label and owning operator node."""

    ts: np.ndarray
    nbytes: np.ndarray
    addr: np.ndarray
    allocated: np.ndarray
    reserved: np.ndarray
    device: list[str]  # label per record
    owner: np.ndarray  # host-tree node of the deepest containing operator, -1 if none
    has_addresses: bool


@memoized
def memory_records(model: TraceModel) -> MemoryRecords:
    mem = model["memory"]
    ev = model["events"]
    rows = mem["row"]
    ts = ev["ts"][rows]
    order = np.argsort(ts, kind="stable")
    rows = rows[order]
    ts = ts[order]
    tree = host_tree(model)
    ops = np.flatnonzero((tree.kind == Kind.CPU_OP) & ~tree.merged)
    ev_pid, ev_tid = ev["pid"], ev["tid"]
    inner = innermost_containing(ev_pid[tree.rows[ops]], ev_tid[tree.rows[ops]], tree.start[ops], tree.end[ops],
                                 ev_pid[rows], ev_tid[rows], ts)
    owner = take(ops, inner, -1)
    device = _device_labels(mem["device_type"][order], mem["device_id"][order])
    addr = mem["addr"][order]
    return MemoryRecords(ts=ts, nbytes=mem["bytes"][order], addr=addr, allocated=mem["total_allocated"][order],
                         reserved=mem["total_reserved"][order], device=device, owner=owner,
                         has_addresses=bool((addr >= 0).any()))


def _device_labels(device_type: np.ndarray, device_id: np.ndarray) -> list[str]:
    """The device label of each record, named once per distinct (type, id) pair, not once per record."""
    types, type_of = np.unique(device_type, return_inverse=True)
    ids, id_of = np.unique(device_id, return_inverse=True)
    pairs, pair_of = np.unique(type_of.reshape(-1) * len(ids) + id_of.reshape(-1), return_inverse=True)
    names = np.array([device_name(int(types[p // len(ids)]), int(ids[p % len(ids)])) for p in pairs.tolist()],
                     dtype=object)
    labels: list[str] = names[pair_of.reshape(-1)].tolist() if len(pairs) else []
    return labels


def _downsample(t: np.ndarray, alloc: np.ndarray, res: np.ndarray, max_points: int) -> np.ndarray:
    """At most ~max_points points, keeping the first, last, lowest and highest allocated value of each bucket."""
    if len(t) <= max_points:
        return np.arange(len(t))
    buckets = max(1, max_points // 4)
    edges = np.linspace(t[0], t[-1], buckets + 1)
    b = np.clip(np.searchsorted(edges, t, side="right") - 1, 0, buckets - 1)
    starts = np.flatnonzero(np.concatenate([[True], b[1:] != b[:-1]]))
    ends = np.append(starts[1:], len(t))
    keep = [starts, ends - 1]
    keep.append(np.array([s + int(np.argmax(alloc[s:e])) for s, e in zip(starts.tolist(), ends.tolist())]))
    keep.append(np.array([s + int(np.argmin(alloc[s:e])) for s, e in zip(starts.tolist(), ends.tolist())]))
    return np.unique(np.concatenate(keep))


def memory_curve(model: TraceModel, max_points: int = 4000) -> dict[str, Any]:
    rec = memory_records(model)
    devices: dict[str, Any] = {}
    ok = (rec.allocated >= 0) & (rec.addr >= 0) if rec.has_addresses else np.zeros(len(rec.ts), dtype=bool)
    labels = np.array(rec.device, dtype=object)
    for label in sorted(set(labels[ok].tolist()), key=lambda s: (s != "CPU", s)):
        on = ok & (labels == label)
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


def _display_name(model: TraceModel, node: int) -> str:
    if node < 0:
        return UNKNOWN
    tree = host_tree(model)
    ev = model["events"]
    name = model.strings[int(ev["name"][tree.rows[node]])]
    if name.startswith("aten::empty"):
        parent = int(tree.op_of[tree.parent[node]]) if tree.parent[node] >= 0 else -1
        if parent >= 0:
            return f"{model.strings[int(ev['name'][tree.rows[parent]])]} ({name})"
    return name


def _record_stacks(model: TraceModel, owner: np.ndarray) -> list[str | None]:
    """Per memory record: the Python call stack of the operator that made it (None without one): what code to
    change to allocate less at the peak."""
    stacks = call_stacks(model)
    nodes = operator_nodes(model).node
    by_node = np.full(host_tree(model).size + 1, -1, dtype=np.int64)  # last slot: owner -1
    by_node[nodes] = stacks.codes
    per_record = by_node[np.where(owner >= 0, owner, len(by_node) - 1)]
    return [stacks.texts[c] if c >= 0 else None for c in per_record.tolist()]


@memoized
def memory_pairs(model: TraceModel) -> list[dict[str, Any]]:
    """Allocations with their frees, in allocation time order (frees with no allocation in the trace too), each
    with the call stack of its operator."""
    rec = memory_records(model)
    if not rec.has_addresses:
        return []
    stacks = _record_stacks(model, rec.owner)
    pending: dict[tuple[str, int], int] = {}
    rows: list[dict[str, Any]] = []
    names: dict[int, str] = {}

    def name_of(node: int) -> str:
        if node not in names:
            names[node] = _display_name(model, node)
        return names[node]

    for i, (t, size, addr, device, owner) in enumerate(zip(rec.ts.tolist(), rec.nbytes.tolist(), rec.addr.tolist(),
                                                            rec.device, rec.owner.tolist())):
        if addr < 0 or size == 0:
            continue
        key = (device, addr)
        if size > 0:
            if key in pending:  # an address reused before its free was recorded: close the old one as unfreed
                pending.pop(key)
            pending[key] = len(rows)
            rows.append({"name": name_of(owner), "device": device, "size_bytes": int(size), "alloc_us": t,
                         "free_us": None, "lifetime_us": None, "addr": int(addr), "call_stack": stacks[i],
                         "record": i})
        else:
            j = pending.pop(key, None)
            if j is None:
                rows.append({"name": name_of(owner), "device": device, "size_bytes": int(-size), "alloc_us": None,
                             "free_us": t, "lifetime_us": None, "addr": int(addr), "call_stack": None, "record": i})
            else:
                rows[j]["free_us"] = t
                rows[j]["lifetime_us"] = t - rows[j]["alloc_us"]
    return rows


def memory_events(model: TraceModel, start: float | None = None, end: float | None = None,
                  device: str | None = None) -> list[dict[str, Any]]:
    """Pairs touching [start, end): allocated in it (``in_range`` "allocated") or allocated before it and live in it
    ("live": alive at its start, freed in it or later), on one device if given. Without a range every pair counts
    as allocated."""
    lo = -np.inf if start is None else start
    hi = np.inf if end is None else end
    return [_shown(row, "allocated" if a >= lo else "live") for row, a, f in _timed_pairs(model, device)
            if a < hi and f >= lo]


def _timed_pairs(model: TraceModel, device: str | None) -> Iterator[tuple[dict[str, Any], float, float]]:
    """Each allocation pair (on ``device`` if given) with its allocation and free µs: -inf for one allocated
    before the trace began, inf for one never freed in it."""
    for row in memory_pairs(model):
        if device is None or row["device"] == device:
            a = row["alloc_us"] if row["alloc_us"] is not None else -np.inf
            f = row["free_us"] if row["free_us"] is not None else np.inf
            yield row, a, f


def _shown(row: dict[str, Any], state: str) -> dict[str, Any]:
    """A pair as the API shows it: without its record index, with how it touches the range asked for."""
    return {**{k: v for k, v in row.items() if k != "record"}, "in_range": state}


def live_at(model: TraceModel, at: float, device: str | None = None) -> dict[str, Any]:
    """Allocations live at the instant ``at`` (allocated at or before it, freed after it or never in the trace),
    largest first: at the curve's peak, what the peak is made of. ``allocated_bytes`` is the device's total
    allocated at that instant (its last record at or before it; None without a device or a record): the part of
    it the rows do not add up to was allocated before the trace started (weights, optimizer state)."""
    rows = [_shown(row, "live") for row, a, f in _timed_pairs(model, device) if a <= at < f]
    rows.sort(key=lambda r: -r["size_bytes"])
    total = None
    if device is not None:
        rec = memory_records(model)
        on = np.flatnonzero((np.array(rec.device, dtype=object) == device) & (rec.ts <= at) & (rec.allocated >= 0))
        total = int(rec.allocated[on[-1]]) if len(on) else None
    return {"rows": rows, "allocated_bytes": total}


def memory_statistics(model: TraceModel, start: float | None = None, end: float | None = None) -> list[dict[str, Any]]:
    """Per operator name and device: calls, size increase, allocation count/size — inclusive and self."""
    rec = memory_records(model)
    tree = host_tree(model)
    ev = model["events"]
    lo = -np.inf if start is None else start
    hi = np.inf if end is None else end
    pick = (rec.ts >= lo) & (rec.ts < hi) & (rec.owner >= 0)
    labels = np.array(rec.device, dtype=object)[pick] if len(rec.device) else np.empty(0, dtype=object)
    owner, size = rec.owner[pick], rec.nbytes[pick].astype(np.float64)
    out: list[dict[str, Any]] = []
    has_parent = tree.parent >= 0
    levels = [np.flatnonzero((tree.depth == d) & has_parent) for d in range(int(tree.depth.max(initial=0)), 0, -1)]
    for device in sorted(set(labels.tolist()), key=lambda s: (s != "CPU", s)):
        on = labels == device
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
