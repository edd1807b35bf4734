"""Decoding ``prof.export_memory_timeline`` output: the ``*.json[.gz]`` timeline and the ``*.raw.json[.gz]`` events.

torch writes (``torch/profiler/_memory_profiler.py``, ``MemoryProfileTimeline``):

- ``export_memory_timeline(path.json)``: ``[times, sizes]``; ``times`` in µs since the epoch (torch divides its ns
  by 1000 and gives pre-existing tensors the smallest time), ``sizes[i]`` = ``[0, bytes of category 0, ...,
  bytes of category 7]`` (a leading slot torch keeps at 0, then its 8 categories).
- ``export_memory_timeline_raw(path.raw.json)``: ``[t_ns, action, bytes, category]`` per event, ``t_ns = -1``
  before profiling, action 1 PREEXISTING, 2 CREATE, 3 INCREMENT_VERSION (a pair: -bytes in the old category,
  +bytes in the new), 4 DESTROY (-bytes).

Both decode with msgspec into typed lists, then numpy. Anything else raises :class:`ExportError` with one line a
person can act on; the caller shows it for that file and carries on.
"""

from __future__ import annotations

from typing import Any

import msgspec
import numpy as np

from ..catalog.names import file_name
from ..model.memory_categories import CATEGORIES, RAW, TIMELINE, MemoryExport
from .errors import TraceLoadError
from .limits import Limits
from .read import decompress
from .source import read_source

_N = len(CATEGORIES)
_CREATE_ACTIONS = (1, 2)
_DESTROY = 4
_NS_EPOCH = 10**17  # a time beyond this is ns since the epoch (µs since the epoch stay below it until year 5138)


class ExportError(Exception):
    """Why one export file cannot be shown (the run and its traces are not affected)."""


# Exports are decoded in the server's scan thread, not in a loader process: a bound of their own on their JSON
# (a raw export of a long run is tens of MB), beside the compression ratio's.
EXPORT_LIMITS = Limits(max_text_bytes=1 << 30)


def load_export(url: str, kind: str, access: Any = None) -> MemoryExport:
    """Read and decode one export file (local path or fsspec URL) of the kind the catalog recognised."""
    name = file_name(url)
    try:
        data = decompress(read_source(url, access, limits=EXPORT_LIMITS), name, EXPORT_LIMITS)
    except TraceLoadError as err:  # any read failure is this file's problem, said in one line
        raise ExportError(str(err)) from None
    return decode_export(data, name, kind)


def decode_export(data: bytes, name: str, kind: str) -> MemoryExport:
    """Decode the bytes of one export (already gunzipped)."""
    try:
        return _decode_raw(data, name) if kind == RAW else _decode_timeline(data, name)
    except msgspec.ValidationError as err:
        what = "[[time_ns, action, bytes, category], ...]" if kind == RAW else "[times, [[0, bytes x 8], ...]]"
        raise ExportError(f"{name}: not a torch memory timeline export of the form {what} ({err})") from None
    except (msgspec.DecodeError, RecursionError) as err:
        raise ExportError(f"{name}: not valid JSON ({err})") from None


def _decode_timeline(data: bytes, name: str) -> MemoryExport:
    times, sizes = msgspec.json.decode(data, type=tuple[list[int], list[list[int]]])
    if len(times) != len(sizes):
        raise ExportError(f"{name}: {len(times):,} times but {len(sizes):,} size rows; the export is cut or edited")
    t = np.asarray(times, dtype=np.int64)
    widths = {len(row) for row in sizes}
    if widths - {_N + 1}:
        raise ExportError(f"{name}: size rows of {sorted(widths)} values; torch writes {_N + 1} (a leading 0, then "
                          f"{', '.join(CATEGORIES)})")
    s = np.asarray(sizes, dtype=np.int64).reshape(len(sizes), _N + 1)[:, 1:]
    if len(t) and int(t.max()) > _NS_EPOCH:  # an export that kept torch's ns: µs as torch's own export makes them
        t = np.fromiter((int(v / 1000) if v > 0 else v for v in times), dtype=np.int64, count=len(times))
    if len(t) > 1 and (np.diff(t) < 0).any():
        raise ExportError(f"{name}: its times go backwards; torch writes them in order")
    empty = np.empty(0, dtype=np.int64)
    return MemoryExport(name=name, kind=TIMELINE, times_us=t, sizes=s, event_ns=empty, event_bytes=empty,
                        event_category=np.empty(0, dtype=np.int8))


def _decode_raw(data: bytes, name: str) -> MemoryExport:
    rows = msgspec.json.decode(data, type=list[tuple[int, int, int, int]])
    ev = np.asarray(rows, dtype=np.int64).reshape(len(rows), 4)
    t_ns, action, nbytes, category = ev[:, 0], ev[:, 1], ev[:, 2], ev[:, 3]
    if ((category < 0) | (category >= _N)).any() or ((action < 1) | (action > _DESTROY)).any():
        raise ExportError(f"{name}: categories must be 0..{_N - 1} and actions 1..4, as torch writes them")
    times_us, sizes = coalesce(t_ns, nbytes, category)
    live = np.isin(action, (*_CREATE_ACTIONS, _DESTROY)) & (t_ns >= 0)
    return MemoryExport(name=name, kind=RAW, times_us=times_us, sizes=sizes, event_ns=t_ns[live],
                        event_bytes=np.abs(nbytes[live]), event_category=category[live].astype(np.int8))


def coalesce(t_ns: np.ndarray, nbytes: np.ndarray, category: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """torch's ``_coalesce_timeline`` over raw events, step for step: in file order, a new row whenever the µs
    changes (``int(t / 1000)``, float division as torch does it), the bytes of each category after the row's
    last event; pre-existing events (``-1``) form their own first row, then take the smallest positive time."""
    if len(t_ns) == 0:
        return np.empty(0, dtype=np.int64), np.empty((0, _N), dtype=np.int64)
    # Python's int / int rounds the exact quotient once; numpy would round t_ns to float64 first and land on
    # another µs for some events. The decode already made one Python int per value, so this loop costs little.
    t_us = np.fromiter((int(t / 1000) if t != -1 else -1 for t in t_ns.tolist()), dtype=np.int64, count=len(t_ns))
    positive = t_us[t_us > 0]
    t_min = int(positive.min()) if len(positive) else -1
    deltas = np.zeros((len(t_us), _N), dtype=np.int64)
    deltas[np.arange(len(t_us)), category] = nbytes
    running = np.cumsum(deltas, axis=0)
    last = np.append(t_us[1:] != t_us[:-1], True)  # the state after the last event of each run of one µs
    return np.where(t_us[last] < 0, t_min, t_us[last]), running[last]
