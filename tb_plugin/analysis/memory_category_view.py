"""The Memory view's "memory by category" card: stacked bytes per category over time, and what makes up the peak.

The peak is the one the page shows above the card: the device's largest allocator total (``memory.allocated_peak``,
the memory curve's), and its make-up is the series' bytes per category at that moment. torch's export counts less
than the allocator (its categories leave out memory no tensor owns), so its own series may peak lower and a moment
apart: that peak is given beside (``series_peak``), and the allocator's bytes in no category as ``uncategorized``.

Two sources, one shape. With a ``prof.export_memory_timeline`` file matched to the trace, the series is torch's
own (exactly as exported; its times, µs since the epoch, are moved onto the trace's clock with the trace's
``baseTimeNanoseconds``). Without one, it is this plugin's inference (:mod:`.memory_categories`), labelled so. A
raw export also labels every allocation: its create events match the trace's ``[memory]`` records one to one by
time (±1 ns) and size, so the largest live allocations at the peak carry torch's category where it gave one.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..model.derived import memoized
from ..model.memory_categories import CATEGORIES, RAW, MemoryExport
from ..model.optree import host_tree
from ..model.tables import TraceModel
from .memory import _display_name, _downsample, allocated_peak
from .memory_categories import allocations
from .operators import call_stacks, operator_nodes
from .summary import time_range_us

TOP_ALLOCATIONS = 10
_MATCH_NS = 1  # trace timestamps are float µs: a record's ns may be off by one after rounding
_EXPORT_CLOCK_US = 1.0  # export_memory_timeline's json times are whole µs


def base_ns(model: TraceModel) -> int:
    """ns since the epoch of the trace's ``ts`` 0 (Kineto's ``baseTimeNanoseconds``; older traces are absolute)."""
    base = model.meta.get("baseTimeNanoseconds")
    return int(base) if isinstance(base, (int, float)) and not isinstance(base, bool) and np.isfinite(base) else 0


def base_us(model: TraceModel) -> float:
    return base_ns(model) / 1000.0


def export_overlap(model: TraceModel, export: MemoryExport) -> float:
    """µs of the export's time range that fall in the trace's (0 when none): how an export finds its trace."""
    span, trace = export.span_us, _trace_range(model)
    if span is None or trace is None:
        return 0.0
    lo, hi = trace[0] + base_us(model), trace[1] + base_us(model)
    return max(0.0, min(hi, span[1] + 1.0) - max(lo, float(span[0])))


@memoized
def _trace_range(model: TraceModel) -> tuple[float, float] | None:
    return time_range_us(model)


@memoized(closed=True)
def inferred_series(model: TraceModel, device: int) -> tuple[np.ndarray, np.ndarray]:
    """(times µs, live bytes per category after each time) on one device, from the inferred allocations."""
    a = allocations(model)
    mine = a.device == device
    if device >= len(a.devices) or not np.isfinite(a.first_us[device]):
        return np.empty(0), np.empty((0, len(CATEGORIES)), dtype=np.int64)
    start = a.first_us[device]
    alloc_t = np.where(np.isfinite(a.alloc_us[mine]), a.alloc_us[mine], start)
    free_t = a.free_us[mine]
    gone = np.isfinite(free_t)
    t = np.concatenate([[start], alloc_t, free_t[gone]])
    cat = np.concatenate([[0], a.category[mine], a.category[mine][gone]]).astype(np.int64)
    delta = np.concatenate([[0], a.nbytes[mine], -a.nbytes[mine][gone]])
    order = np.argsort(t, kind="stable")
    t, cat, delta = t[order], cat[order], delta[order]
    rows = np.zeros((len(t), len(CATEGORIES)), dtype=np.int64)
    rows[np.arange(len(t)), cat] = delta
    rows[0] += a.baseline[device]
    running = np.cumsum(rows, axis=0)
    last = np.append(t[1:] != t[:-1], True)
    return t[last], running[last]


def export_series(model: TraceModel, export: MemoryExport) -> tuple[np.ndarray, np.ndarray]:
    """torch's series on the trace's clock (µs)."""
    return export.times_us.astype(np.float64) - base_us(model), export.sizes


def export_device(model: TraceModel, export: MemoryExport) -> int:
    """The device (index into ``allocations().devices``) an export is of: the one whose records' µs the export's
    times hold most often (torch exports one device per file and does not name it)."""
    a = allocations(model)
    rec_t = np.floor(np.where(np.isfinite(a.alloc_us), a.alloc_us, np.nan) + base_us(model))
    hits = np.isin(rec_t, export.times_us.astype(np.float64))
    score = np.bincount(a.device[hits], minlength=len(a.devices))
    return int(np.argmax(score)) if len(score) else 0


def card_exports(model: TraceModel, exports: list[MemoryExport],
                 device: str | None) -> tuple[int, int | None, int | None]:
    """What the card shows: (device index, position in ``exports`` of the series drawn, of the raw export that
    labels the allocations; None where there is none). The device is ``device``, else that of the first export,
    else the first GPU; of the exports of that device, a timeline is drawn before a raw one, and among one kind
    the first in the given order."""
    devices = allocations(model).devices
    by_device = [(i, export_device(model, e)) for i, e in enumerate(exports)]
    if device is None:
        gpus = [i for i, d in enumerate(devices) if d != "CPU"]
        index = by_device[0][1] if by_device else (gpus[0] if gpus else 0)
    else:
        index = devices.index(device)
    here = sorted((i for i, d in by_device if d == index), key=lambda i: exports[i].kind == RAW)
    return index, (here[0] if here else None), next((i for i in here if exports[i].kind == RAW), None)


def raw_categories(model: TraceModel, export: MemoryExport) -> np.ndarray:
    """Per allocation: torch's category from a raw export's matching create event, -1 where none matches."""
    a = allocations(model)
    out = np.full(len(a.nbytes), -1, dtype=np.int64)
    if export.kind != RAW or not len(export.event_ns):
        return out
    order = np.lexsort((export.event_bytes, export.event_ns))
    t, b, c = export.event_ns[order], export.event_bytes[order], export.event_category[order]
    ns = np.round(np.where(np.isfinite(a.alloc_us), a.alloc_us, 0.0) * 1000.0).astype(np.int64)
    ns += base_ns(model)
    for shift in range(-_MATCH_NS, _MATCH_NS + 1):
        i = np.searchsorted(t, ns + shift)
        for k in range(3):  # a few events may share one ns
            j = np.clip(i + k, 0, len(t) - 1)
            hit = (out < 0) & np.isfinite(a.alloc_us) & (t[j] == ns + shift) & (b[j] == a.nbytes)
            out[hit] = c[j][hit]
    return out


def _stack_of(model: TraceModel, nodes: np.ndarray) -> list[list[str]]:
    """Call stack frames (innermost first) of operator nodes; empty where the trace has none."""
    ops = operator_nodes(model)
    position = np.full(host_tree(model).size, -1, dtype=np.int64)
    position[ops.node] = np.arange(len(ops.node))
    stacks = call_stacks(model)
    out = []
    for node in nodes.tolist():
        code = int(stacks.codes[position[node]]) if node >= 0 and position[node] >= 0 else -1
        out.append([f for f in stacks.texts[code].split(";") if f] if code >= 0 else [])
    return out


def _top_allocations(model: TraceModel, device: int, at_us: float, torch_labels: np.ndarray) -> list[dict[str, Any]]:
    """The largest allocations live at ``at_us`` on the device, with operator, stack and category."""
    a = allocations(model)
    live = np.flatnonzero((a.device == device) & (a.alloc_us <= at_us) & (a.free_us > at_us))
    top = live[np.lexsort((a.alloc_us[live], -a.nbytes[live]))][:TOP_ALLOCATIONS]
    stacks = _stack_of(model, a.owner[top])
    rows = []
    for i, stack in zip(top.tolist(), stacks):
        from_torch = int(torch_labels[i]) >= 0
        rows.append({
            "bytes": int(a.nbytes[i]),
            "category": CATEGORIES[int(torch_labels[i]) if from_torch else int(a.category[i])],
            "category_source": "export" if from_torch else "inferred",
            "operator": _display_name(model, int(a.owner[i])) if np.isfinite(a.alloc_us[i]) else "(before profiling)",
            "alloc_us": float(a.alloc_us[i]) if np.isfinite(a.alloc_us[i]) else None,
            "free_us": float(a.free_us[i]) if np.isfinite(a.free_us[i]) else None,
            "stack": stack,
        })
    return rows


def _by_category(sizes: np.ndarray) -> dict[str, int]:
    return {name: int(v) for name, v in zip(CATEGORIES, sizes.tolist())}


def _at(times: np.ndarray, sizes: np.ndarray, at_us: float) -> np.ndarray:
    """Bytes per category in effect at a time (zeros before the series starts)."""
    i = int(np.searchsorted(times, at_us, side="right")) - 1
    return sizes[i] if i >= 0 else np.zeros(len(CATEGORIES), dtype=np.int64)


def _near(times: np.ndarray, sizes: np.ndarray, at_us: float, within_us: float) -> np.ndarray:
    """Bytes per category at a time: the sample in effect then, or the largest total sampled within ``within_us``
    of it (an export's times are whole µs, so its sample of the same allocation may be stamped a moment later)."""
    best = _at(times, sizes, at_us)
    lo, hi = np.searchsorted(times, [at_us - within_us, at_us + within_us], side="right")
    if hi > lo:
        near = sizes[lo:hi]
        top = near[int(np.argmax(near.sum(axis=1)))]
        best = top if top.sum() > best.sum() else best
    return best


def category_view(model: TraceModel, device: int, export: MemoryExport | None = None,
                  raw: MemoryExport | None = None, max_points: int = 2000) -> dict[str, Any]:
    """The card's payload for one device: series (downsampled, peaks kept), the peak and its allocations.

    ``export`` (of this device) makes torch's series the source; the inferred bytes at the same peak come along
    so that the two can be compared where both exist. ``raw`` (a raw export of this device, may be ``export``
    itself) gives the peak's allocations torch's categories.
    """
    inferred_t, inferred_s = inferred_series(model, device)
    times, sizes = export_series(model, export) if export is not None else (inferred_t, inferred_s)
    devices = allocations(model).devices
    payload: dict[str, Any] = {"source": "export" if export is not None else "inferred",
                               "categories": list(CATEGORIES), "device": devices[device] if devices else None,
                               "series": {"times_us": [], "bytes": []}, "peak": None, "inferred_at_peak": None,
                               "start_us": (_trace_range(model) or (None,))[0], "reason": None}
    if not len(times):
        payload["reason"] = ("The trace has no memory records: profile with profile_memory=True." if not devices
                             else "This device's memory records have no addresses or totals (PyTorch < 1.10).")
        return payload
    total = sizes.sum(axis=1).astype(np.float64)
    keep = _downsample(times, total, total, max_points)
    payload["series"] = {"times_us": times[keep].tolist(), "bytes": sizes[keep].tolist()}
    p = int(np.argmax(total))
    curve = allocated_peak(model, devices[device]) if devices else None
    at, peak_bytes = curve if curve is not None else (float(times[p]), int(total[p]))
    labels = raw_categories(model, raw) if raw is not None else np.full(len(allocations(model).nbytes), -1)
    by_cat = _by_category(_near(times, sizes, at, _EXPORT_CLOCK_US if export is not None else 0.0))
    categorized = sum(by_cat.values())
    payload["peak"] = {"time_us": at, "total_bytes": max(peak_bytes, categorized), "by_category": by_cat,
                       "uncategorized_bytes": max(peak_bytes - categorized, 0),
                       "series_peak": {"time_us": float(times[p]), "total_bytes": int(total[p])},
                       "dominant": max(by_cat, key=lambda k: by_cat[k]),
                       "top_allocations": _top_allocations(model, device, at, labels)}
    if export is not None:
        payload["inferred_at_peak"] = _by_category(_at(inferred_t, inferred_s, at))
    return payload
