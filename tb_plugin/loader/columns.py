"""Structs to columns: turn decoded events into the :class:`~tb_plugin.model.tables.TraceModel` tables.

Each field is pulled out with one C-level ``map(attrgetter(...))`` pass over just the events that carry it and
converted to numpy in one call; a per-element slow path runs only when a column holds odd values (``"N/A"``,
strings for numbers, lists), so an odd value costs that one field of that one event, never the file.
"""

from __future__ import annotations

import functools
import itertools
import math
import os
import pickle
import threading
from collections.abc import Callable, Sequence
from operator import attrgetter, itemgetter
from typing import Any

import msgspec
import numpy as np

from ..model import ids
from ..model.arrays import isin_ints, take
from ..model.kinds import DEVICE_KINDS, Kind, kind_of
from ..model.lifetime import die_with_parent
from ..model.tables import SCHEMAS, Columns, TraceModel, empty_table
from . import pages
from .limits import DISPLAY_CHARS, kept_in_full, shorten
from .schema import Args, Event, TraceDocument

_EMPTY_ARGS = Args()
_RANGE_CAT = b'"cuda_profiler_range"'


def _range_args(raw: bytes) -> tuple[bool, dict[str, Any]]:
    """(is it a range-profiler event, its ``args``): a slice that mentions the category may be another event
    (a name quoting it); one that no longer decodes on its own counts as a range without counters."""
    try:
        event = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return True, {}
    if not isinstance(event, dict) or event.get("cat") != "cuda_profiler_range":
        return False, {}
    args = event.get("args")
    return True, args if isinstance(args, dict) else {}
_FLOW_PHASES = ("s", "f", "t")
_META_KEYS = (
    "schemaVersion", "deviceProperties", "distributedInfo", "baseTimeNanoseconds", "displayTimeUnit",
    "traceName", "trace_id", "Framework", "cupti_version", "cuda_runtime_version", "cuda_driver_version",
    "hip_runtime_version", "record_shapes", "profile_memory", "with_stack", "with_flops", "with_modules",
)


class Interner:
    """One string table for the whole trace; columns hold int32 codes into it (``-1`` for missing).

    A text longer than ``limits.DISPLAY_CHARS`` (a hostile 1 GiB name, a call stack of thousands of frames) is
    stored shortened, as the views show it (``limits.shorten``), so that no answer repeats it whole; its text as
    written (up to ``limits.FULL_TEXT_CHARS``) is kept in ``full`` for the event's details. Two long texts stay
    two codes, however alike their beginnings.
    """

    def __init__(self) -> None:
        self.values: list[str] = []
        self._index: dict[str, int] = {}
        self.full: dict[int, str] = {}  # code -> the text as written, for the shortened ones

    def add(self, text: str) -> int:
        long = len(text) > DISPLAY_CHARS
        if long:
            text = kept_in_full(text)
        code = self._index.get(text)
        if code is None:
            code = self._index[text] = len(self.values)
            self.values.append(shorten(text) if long else text)
            if long:
                self.full[code] = text
        return code

    def find(self, text: str) -> int:
        """The code of ``text``, -1 if the trace never wrote it (without adding it)."""
        return self._index.get(kept_in_full(text), -1)

    def codes(self, items: Sequence[Any]) -> np.ndarray:
        """Codes for a list of values; ``None`` becomes -1, non-strings their JSON text.

        Deduplicates with ``dict.fromkeys`` and maps with ``map``: both run in C, so the Python-level work is per
        distinct value, not per event.
        """
        if not items:
            return np.empty(0, dtype=np.int32)
        try:
            local: dict[Any, Any] = dict.fromkeys(items)
        except TypeError:  # unhashable values (lists, dicts) somewhere: intern their text instead
            items = [x if x is None or isinstance(x, (str, int, float, bytes)) else _as_text(x) for x in items]
            local = dict.fromkeys(items)
        for value in local:
            local[value] = -1 if value is None else self.add(_as_text(value))
        return np.fromiter(map(local.__getitem__, items), dtype=np.int32, count=len(items))


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", "replace")
    if isinstance(value, msgspec.Raw):
        return bytes(value).decode("utf-8", "replace")
    try:
        return msgspec.json.encode(value).decode()
    except (TypeError, msgspec.EncodeError):
        return str(value)


def _to_float(value: Any) -> float:
    if value is None or isinstance(value, bool):
        return math.nan if value is None else float(value)
    try:
        return float(value)
    except OverflowError:  # an integer of hundreds of digits: beyond any float, as 1e400 is
        return math.inf if value > 0 else -math.inf
    except (TypeError, ValueError):
        return math.nan


def floats(items: Sequence[Any]) -> np.ndarray:
    """float64 column; None, "N/A" and other non-numbers become NaN, "inf"/"Infinity" stay infinite."""
    try:
        out = np.array(items, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        out = None
    if out is None or out.ndim != 1:  # odd values; equal-length lists ([[], []]) would make a 2-D array
        out = np.fromiter(map(_to_float, items), dtype=np.float64, count=len(items))
    return out


def _to_int(value: Any) -> int:
    if value is None:
        return -1
    try:
        f = float(value)
    except (TypeError, ValueError, OverflowError):
        return -1
    return int(f) if math.isfinite(f) and abs(f) < _INT_LIMIT else -1


_INT_LIMIT = float(1 << 62)


# Beyond this many µs (300,000 years; a nanosecond clock since 1970 reads ~1.8e18) a time is no time: ``1e308`` is
# as unusable as a missing value, and kept it would turn every sum it joins into infinity.
MAX_TIME_US = 1e19


def times(items: Sequence[Any]) -> np.ndarray:
    """A time column (``ts``, ``dur``): like :func:`floats`, but an infinite or absurd time (beyond
    :data:`MAX_TIME_US`) is as unusable as a missing one."""
    out = floats(items)
    with np.errstate(invalid="ignore"):
        out[~(np.abs(out) <= MAX_TIME_US)] = np.nan
    return out


def ints(items: Sequence[Any]) -> np.ndarray:
    """int64 column; None and non-numbers become -1.

    Goes through float64 (exact below 2**53, which ids, sizes and addresses stay under) because numpy converts a
    list holding ``None`` to float in C but not to int.
    """
    try:
        as_float = np.array(items, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        as_float = None
    if as_float is None or as_float.ndim != 1:  # odd values; equal-length lists would make a 2-D array
        return np.fromiter(map(_to_int, items), dtype=np.int64, count=len(items))
    bad = ~np.isfinite(as_float) | (np.abs(as_float) >= _INT_LIMIT)
    if bad.any():
        as_float[bad] = -1.0
    return as_float.astype(np.int64)


def raw_texts(items: Sequence[msgspec.Raw]) -> list[bytes | None]:
    """Raw JSON slices as bytes; an empty slice (the field was absent) or ``null`` becomes None."""
    out: list[bytes | None] = [bytes(r) if r else None for r in items]
    return [None if b == b"null" else b for b in out]


class _Ids:
    """pid/tid columns in the encoding of :mod:`tb_plugin.model.ids` (numbers as themselves, text interned)."""

    def __init__(self, interner: Interner) -> None:
        self.interner = interner

    def column(self, items: Sequence[Any]) -> np.ndarray:
        try:
            local: dict[Any, Any] = dict.fromkeys(items)
        except TypeError:
            return np.fromiter(map(self._one, items), dtype=np.int64, count=len(items))
        for value in local:
            local[value] = self._one(value)
        return np.fromiter(map(local.__getitem__, items), dtype=np.int64, count=len(items))

    def _one(self, value: Any) -> int:
        if value is None:
            return ids.MISSING
        number = ids.numeric(value)
        if number is not None:
            return number
        if isinstance(value, float) and value.is_integer():
            text = str(int(value))  # a float-valued 64-bit id reads as the integer it stands for
        else:
            text = _as_text(value)
        stripped = text.strip()
        digits = stripped.lstrip("-")
        # not "²", which isdigit() takes and int() refuses, nor thousands of digits (beyond any id): it is text
        if digits.isascii() and digits.isdigit() and len(digits) < 40:
            number = ids.numeric(int(stripped))
            if number is not None:
                return number
            text = stripped
        return ids.encode_text(self.interner.add(text))


def _fields(items: Sequence[Any], names: tuple[str, ...]) -> list[list[Any]]:
    """Columns of attributes, one C-level ``map`` per attribute (faster than transposing tuples with zip)."""
    return [list(map(attrgetter(name), items)) for name in names]


def _take(values: Sequence[Any], rows: np.ndarray) -> list[Any]:
    """``values[rows]`` for a Python sequence, in C."""
    if len(rows) == 0:
        return []
    if len(rows) == 1:
        return [values[int(rows[0])]]
    return list(itemgetter(*rows.tolist())(values))


def _grid(values: Sequence[Any], axis: int) -> list[Any]:
    return [v[axis] if type(v) is list and len(v) > axis else None for v in values]


class ModelBuilder:
    """Accumulates the tables chunk by chunk; ``finish`` concatenates them into a :class:`TraceModel`."""

    def __init__(self) -> None:
        self.strings = Interner()
        self.ids = _Ids(self.strings)
        self.parts: dict[str, list[Columns]] = {name: [] for name in SCHEMAS}
        self.n_events = 0
        self._kinds: dict[tuple[int, int], int] = {}
        self._compacted: dict[str, int] = {}  # per table, the chunks before this index are compacted blocks
        self._room: dict[str, Columns] = {}  # per table, columns made ahead for the rows to come (:meth:`reserve`)
        self._filled: dict[str, int] = {}  # per table, the rows of ``_room`` written
        self._flow_codes = [self.strings.add(p) for p in _FLOW_PHASES]
        self._meta_code = self.strings.add("M")
        self._memory_name = self.strings.add("[memory]")

    def add(self, events: Sequence[Event]) -> None:
        if self._room:  # a builder that reserved columns only absorbs (the streamed parse's loader)
            raise RuntimeError("events added after the tables' columns were reserved")
        ph, cat, name, pid, tid, ts, dur, args = _fields(
            events, ("ph", "cat", "name", "pid", "tid", "ts", "dur", "args"))
        strings = self.strings
        phases, cats = strings.codes(ph), strings.codes(cat)
        is_flow = np.isin(phases, self._flow_codes)
        is_meta = phases == self._meta_code
        core = np.flatnonzero(~(is_flow | is_meta))
        if len(core) == len(events):
            c_name, c_pid, c_tid, c_ts, c_dur, some_args = name, pid, tid, ts, dur, args
        else:
            c_name, c_pid, c_tid, c_ts, c_dur, some_args = (
                _take(col, core) for col in (name, pid, tid, ts, dur, args))
        c_args: list[Args] = [a if a is not None else _EMPTY_ARGS for a in some_args]
        names = strings.codes(c_name)
        kinds = self._classify(phases[core], cats[core], names)
        ext, ext_lower, corr = _fields(c_args, ("external_id", "external_id_lower", "correlation"))
        external = ints(ext)
        missing = external < 0
        if missing.any():
            external = np.where(missing, ints(ext_lower), external)
        pids, tids = self.ids.column(c_pid), self.ids.column(c_tid)
        self.parts["events"].append({
            "kind": kinds, "ph": phases[core], "cat": cats[core], "name": names,
            "pid": pids, "tid": tids,
            "ts": times(c_ts), "dur": times(c_dur), "external_id": external, "correlation": ints(corr),
        })
        for table, cols in _side_tables(c_args, kinds, strings, pids, tids).items():
            cols["row"] = cols["row"] + self.n_events
            self.parts[table].append(cols)
        self.n_events += len(core)
        if is_flow.any():
            rows = np.flatnonzero(is_flow)
            f_name, f_pid, f_tid, f_ts = (_take(col, rows) for col in (name, pid, tid, ts))
            flows = _take(events, rows)
            f_id, f_bp = _fields(flows, ("id", "bp"))
            self.parts["flows"].append({
                "ph": phases[rows], "cat": cats[rows], "name": strings.codes(f_name), "id": ints(f_id),
                "pid": self.ids.column(f_pid), "tid": self.ids.column(f_tid), "ts": times(f_ts),
                "bp": strings.codes(f_bp),
            })
        if is_meta.any():
            rows = np.flatnonzero(is_meta)
            m_args = [a if a is not None else _EMPTY_ARGS for a in _take(args, rows)]
            m_name, m_pid, m_tid = (_take(col, rows) for col in (name, pid, tid))
            a_name, a_labels, a_sort = _fields(m_args, ("name", "labels", "sort_index"))
            self.parts["metadata_events"].append({
                "name": strings.codes(m_name), "pid": self.ids.column(m_pid), "tid": self.ids.column(m_tid),
                "value": strings.codes([n if n is not None else lab for n, lab in zip(a_name, a_labels)]),
                "sort_index": ints(a_sort),
            })

    def add_counters(self, raws: Sequence[msgspec.Raw], first: int) -> None:
        """The counters of the CUPTI range-profiler events among the events just added (rows ``first`` on).

        Their ``args`` are arbitrary metric names, which the typed schema cannot declare: only chunks that hold
        such events are looked at again, their ranges re-decoded as plain objects, in order (a trace without
        counters costs one comparison per chunk).
        """
        if first >= self.n_events:
            return
        ranges = np.flatnonzero(self.parts["events"][-1]["kind"] == Kind.COUNTER_RANGE) + first
        if not len(ranges):
            return
        found = (_range_args(bytes(r)) for r in raws if _RANGE_CAT in bytes(r))
        rows, metrics, values = [], [], []
        for row, args in zip(ranges.tolist(), (a for is_range, a in found if is_range)):
            for key, value in args.items():
                number = _to_float(value) if not isinstance(value, bool) else math.nan
                if math.isfinite(number):
                    rows.append(row)
                    metrics.append(self.strings.add(str(key)))
                    values.append(number)
        self.parts["counters"].append({"row": np.asarray(rows, np.int64), "metric": np.asarray(metrics, np.int32),
                                       "value": np.asarray(values, np.float64)})

    def _classify(self, phases: np.ndarray, cats: np.ndarray, names: np.ndarray) -> np.ndarray:
        """Kind per event, computed once per distinct (phase, category) pair."""
        pairs = (phases.astype(np.int64) << 32) | (cats.astype(np.int64) & 0xFFFFFFFF)
        uniq, inverse = np.unique(pairs, return_inverse=True)
        lut = np.empty(len(uniq), dtype=np.uint8)
        for i, key in enumerate(uniq.tolist()):
            ph_code, cat_code = key >> 32, np.int32(np.uint32(key & 0xFFFFFFFF))
            cached = self._kinds.get((ph_code, int(cat_code)))
            if cached is None:
                cat = self.strings.values[cat_code] if cat_code >= 0 else ""
                cached = self._kinds[(ph_code, int(cat_code))] = int(kind_of(cat, self.strings.values[ph_code], ""))
            lut[i] = cached
        kinds = lut[inverse.reshape(-1)] if len(phases) else np.empty(0, dtype=np.uint8)
        kinds[(kinds == Kind.INSTANT) & (names == self._memory_name)] = Kind.MEMORY
        return kinds

    def compact(self, every: int = 2) -> None:
        """Concatenate each table's chunks added since its last compaction into one block, once there are
        ``every`` of them.

        Why: a part's tables were thousands of small arrays (a 2 GB trace's part: ~20k), and every array costs
        the same to pickle, unpickle, absorb and concatenate whatever its size: the loader merged the 2 GB
        trace's 14 parts in 3.3 s, in series. Blocks of 32 chunks (a few MB; the chunks are let go) merge 4-5x
        faster (164 MB trace, half of it: unpickle 11.9 -> 2.2 ms, absorb 15.3 -> 3.8 ms, concatenate 6.2 ->
        1.5 ms). Only between chunks: ``add_counters`` reads the last chunk's kinds.
        """
        for name, chunks in self.parts.items():
            start = self._compacted.get(name, 0)
            if len(chunks) - start >= max(every, 2):
                chunks[start:] = [{col: np.concatenate([c[col] for c in chunks[start:]]) for col in SCHEMAS[name]}]
                self._compacted[name] = start + 1

    def tables(self) -> dict[str, Columns]:
        """Concatenate the chunks' columns; the builder is spent afterwards.

        Each column's chunks are let go as soon as it is whole, so the peak is the model plus one column's chunks,
        not the model twice (on a 2 GB trace the tables are ~600 MB).
        """
        out: dict[str, Columns] = {}
        for name, room in self._room.items():  # written in place (:meth:`reserve`): the rows filled, as they are
            out[name] = {col: values[:self._filled[name]] for col, values in room.items()}
            self.parts.pop(name, None)
        self._room = {}
        for name in list(self.parts):
            parts = self.parts.pop(name)
            if not parts:
                out[name] = empty_table(name)
                continue
            out[name] = {}
            for col, dtype in SCHEMAS[name].items():
                out[name][col] = np.concatenate([p.pop(col) for p in parts]).astype(dtype, copy=False)
        return out

    @property
    def reserved(self) -> bool:
        """Whether the tables absorbed from now on are written into columns made ahead (:meth:`reserve`)."""
        return bool(self._room)

    def reserve(self, events: int) -> None:
        """Write the tables absorbed from now on into columns made for about ``events`` events (each table's rows in
        the proportion absorbed so far, half again: pages never written are never touched), so that finishing
        concatenates nothing.

        Why: the streamed parse's loader absorbs a job's tables at a time and concatenated all of them at the end,
        on the way to "ready" (0.30 s of the 2 GB trace's on a lent 16-core host); written into their place as each
        job is merged, while the loader waits for the next, the copy is off that way. Columns too short grow by half
        (a copy, rarely); the pages never written are never touched."""
        if self._room or not self.n_events or events <= self.n_events:
            return
        for name, chunks in self.parts.items():
            rows = sum(len(next(iter(c.values()))) for c in chunks) if chunks else 0
            room = int(rows / self.n_events * events * 1.5) + 1024
            self._room[name] = {col: np.empty(room, dtype=dtype) for col, dtype in SCHEMAS[name].items()}
            self._filled[name] = 0
            for cols in chunks:
                self._place(name, cols)
            chunks.clear()

    def _place(self, name: str, cols: Columns) -> None:
        """Write one block of table ``name`` after the rows already in its reserved columns (grown if short)."""
        room, at = self._room[name], self._filled[name]
        n = len(next(iter(cols.values()))) if cols else 0
        if at + n > len(next(iter(room.values()))):
            size = max(at + n, len(next(iter(room.values()))) * 3 // 2)
            for col, values in room.items():
                grown = np.empty(size, dtype=values.dtype)
                grown[:at] = values[:at]
                room[col] = grown
        for col, values in room.items():
            values[at:at + n] = cols[col]
        self._filled[name] = at + n

    def absorb(self, strings: list[str], parts: dict[str, list[Columns]], full: dict[int, str] | None = None) -> None:
        """Append the chunk tables another builder made from the events that follow ours (a parallel part).

        Its string codes are translated into our string table (its long texts by their ``full`` text) and its
        event rows shifted after ours.
        """
        texts = [full.get(i, s) for i, s in enumerate(strings)] if full else strings
        lut = np.fromiter(map(self.strings.add, texts), dtype=np.int64, count=len(texts))
        n_events = sum(len(p["ts"]) for p in parts["events"])
        for name, chunks in parts.items():
            for cols in chunks:
                moved: Columns = {}
                for col, values in cols.items():
                    if SCHEMAS[name][col] == "i4":  # every int32 column holds string codes
                        values = take(lut, values, -1).astype(np.int32)
                    elif col in ("pid", "tid"):  # textual ids carry string codes too
                        text = ids.is_text(values)
                        if text.any():
                            values = values.copy()
                            values[text] = ids.TEXT_BASE + lut[values[text] - ids.TEXT_BASE]
                    elif col == "row":
                        values = values + self.n_events
                    moved[col] = values
                if name in self._room:
                    self._place(name, moved)
                else:
                    self.parts[name].append(moved)
        self.n_events += n_events

    def finish(self, doc: TraceDocument, source: str) -> TraceModel:
        meta = {key: getattr(doc, key) for key in _META_KEYS}
        meta["pytorch_version"] = doc.pytorch_version or doc.pytorch_version_alt
        meta["source"] = source
        tables = self.tables()
        correlation_from_flows(tables, self.strings.find("ac2g"))
        clamped = clamp_negative_durations(tables["events"], self.strings.values)
        if clamped is not None:
            meta["negative_durations"] = clamped
        return TraceModel(strings=self.strings.values, tables=tables, meta=meta, long_texts=self.strings.full)


def clamp_negative_durations(events: Columns, strings: list[str]) -> dict[str, Any] | None:
    """Set every negative ``dur`` to 0 (a span cannot end before it starts: kept, a step would take negative time
    and a sum of them shrink), and say how many there were, the most negative and its event's name, for the
    notes that tell the user (``analysis.steps``). None when there is none."""
    dur = events["dur"]
    negative = np.flatnonzero(dur < 0)
    if not len(negative):
        return None
    worst = int(negative[np.argmin(dur[negative])])
    code = int(events["name"][worst])
    clamped = {"count": len(negative), "min_us": float(dur[worst]), "example": strings[code] if code >= 0 else None}
    dur[negative] = 0.0
    return clamped


_CORRELATED_KINDS = (Kind.RUNTIME, Kind.DRIVER, *DEVICE_KINDS)


def correlation_from_flows(tables: dict[str, Columns], ac2g: int) -> None:
    """Give launches and device events without a ``correlation`` arg the id of their ``ac2g`` flow end.

    Kineto writes the launch-to-device flow for every family (its id is the correlation id, at the event's own
    pid, tid and ts), but only some families repeat it as an arg (CUPTI, ROCm, XPU do; MTIA need not), so launches
    still correlate where the arg is missing. Events that have the arg keep it.
    """
    ev, fl = tables["events"], tables["flows"]
    need = np.flatnonzero((ev["correlation"] < 0) & isin_ints(ev["kind"], _CORRELATED_KINDS))
    flows = np.flatnonzero((fl["cat"] == ac2g) & (fl["id"] >= 0)) if ac2g >= 0 else np.empty(0, np.int64)
    if not len(need) or not len(flows):
        return
    key = np.empty(len(flows) + len(need), dtype=[("pid", "i8"), ("tid", "i8"), ("ts", "f8")])
    for col in ("pid", "tid", "ts"):
        key[col] = np.concatenate([fl[col][flows], ev[col][need]])
    _, inverse = np.unique(key, return_inverse=True)
    inverse = inverse.reshape(-1)
    flow_id = np.full(int(inverse.max()) + 1, -1, dtype=np.int64)
    flow_id[inverse[:len(flows)]] = fl["id"][flows]
    ev["correlation"][need] = flow_id[inverse[len(flows):]]


def _or_id(values: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """``values`` where known, else the event's numeric pid/tid (textual ids, negative, stay unknown)."""
    return np.where((values < 0) & (ids >= 0), ids, values)


def _side_tables(args: list[Args], kinds: np.ndarray, strings: Interner, pids: np.ndarray,
                 tids: np.ndarray) -> dict[str, Columns]:
    """Per-kind tables of the args only some events carry; ``row`` is the event's index in this chunk.

    A device event's device and stream fall back to its pid and tid: Kineto writes every device activity with
    pid = device and tid = stream (or queue), while only CUPTI repeats them as ``device``/``stream`` args; ROCm,
    XPU (``sycl queue``) and MTIA events may carry neither, or a stream that is a pointer string.
    """
    out: dict[str, Columns] = {}

    rows = np.flatnonzero(np.isin(kinds, DEVICE_KINDS))
    if len(rows):
        (device, stream, grid, block, registers, smem, bps, wps, occupancy, nbytes, bandwidth) = _fields(
            _take(args, rows), ("device", "stream", "grid", "block", "registers", "shared_memory",
                                "blocks_per_sm", "warps_per_sm", "occupancy", "nbytes", "bandwidth"))
        out["device_events"] = {
            "row": rows.astype(np.int64), "device": _or_id(ints(device), pids[rows]),
            "stream": _or_id(ints(stream), tids[rows]),
            "grid_x": ints(_grid(grid, 0)), "grid_y": ints(_grid(grid, 1)), "grid_z": ints(_grid(grid, 2)),
            "block_x": ints(_grid(block, 0)), "block_y": ints(_grid(block, 1)), "block_z": ints(_grid(block, 2)),
            "registers": ints(registers), "shared_memory": ints(smem), "blocks_per_sm": floats(bps),
            "warps_per_sm": floats(wps), "occupancy": floats(occupancy), "nbytes": ints(nbytes),
            "bandwidth": floats(bandwidth),
        }

    rows = np.flatnonzero((kinds == Kind.CPU_OP) | (kinds == Kind.USER_ANNOTATION))
    if len(rows):
        dims, dims_lower, types, stack, seq, fwd, kernel_name, concrete = _fields(
            _take(args, rows), ("input_dims", "input_dims_lower", "input_type", "call_stack", "seq", "fwd_tid",
                                "kernel_name", "concrete_inputs"))
        if not all(dims):
            dims = [d if d else low for d, low in zip(dims, dims_lower)]
        out["ops"] = {
            "row": rows.astype(np.int64), "input_dims": strings.codes(raw_texts(dims)),
            "input_type": strings.codes(raw_texts(types)), "call_stack": strings.codes(stack),
            "seq": ints(seq), "fwd_tid": ints(fwd), "kernel_name": strings.codes(kernel_name),
            "concrete_inputs": strings.codes(raw_texts(concrete)),
        }

    work = _work_table(args, kinds)
    if work is not None:
        out["work"] = work

    candidates = np.flatnonzero(np.isin(kinds, (Kind.CPU_OP, Kind.USER_ANNOTATION, Kind.KERNEL, Kind.COMMUNICATION)))
    (collective,) = _fields(_take(args, candidates), ("collective_name",))
    rows = candidates[np.fromiter((c is not None for c in collective), dtype=bool, count=len(collective))]
    if len(rows):
        (name, in_n, out_n, dtype, group, pg_name, pg_desc, pg_ranks, rank) = _fields(
            _take(args, rows), ("collective_name", "in_nelems", "out_nelems", "dtype", "group_size", "pg_name",
                                "pg_desc", "pg_ranks", "rank"))
        out["comms"] = {
            "row": rows.astype(np.int64), "collective_name": strings.codes(name), "in_nelems": ints(in_n),
            "out_nelems": ints(out_n), "dtype": strings.codes(dtype), "group_size": ints(group),
            "pg_name": strings.codes(pg_name), "pg_desc": strings.codes(pg_desc),
            "pg_ranks": strings.codes(pg_ranks), "rank": ints(rank),
        }

    rows = np.flatnonzero(kinds == Kind.PYTHON_FUNCTION)
    if len(rows):
        pyid, parent, module = _fields(_take(args, rows), ("python_id", "python_parent_id", "python_module_id"))
        out["python"] = {"row": rows.astype(np.int64), "python_id": ints(pyid), "parent_id": ints(parent),
                         "module_id": ints(module)}

    rows = np.flatnonzero(kinds == Kind.MEMORY)
    if len(rows):
        dev_type, dev_id, addr, nbytes, total_alloc, total_res = _fields(
            _take(args, rows), ("device_type", "device_id", "addr", "mem_bytes", "total_allocated", "total_reserved"))
        out["memory"] = {
            "row": rows.astype(np.int64), "device_type": ints(dev_type), "device_id": ints(dev_id),
            "addr": ints(addr), "bytes": ints(nbytes), "total_allocated": ints(total_alloc),
            "total_reserved": ints(total_res),
        }
    return out


def _work_table(args: list[Args], kinds: np.ndarray) -> Columns | None:
    """The work figures some operators, launches and kernels carry (``flops``, ``kernel_flop``, ``kernel_num_gb``),
    one row per event that has any of them (most traces have none: three C-level passes over the candidates)."""
    candidates = np.flatnonzero(np.isin(kinds, (Kind.CPU_OP, Kind.USER_ANNOTATION, Kind.KERNEL)))
    flops, kernel_flop, num_gb = _fields(_take(args, candidates), ("flops", "kernel_flop", "kernel_num_gb"))
    has = np.fromiter((a is not None or b is not None or c is not None for a, b, c in zip(flops, kernel_flop, num_gb)),
                      dtype=bool, count=len(candidates))
    if not has.any():
        return None
    keep = np.flatnonzero(has)
    return {"row": candidates[keep].astype(np.int64), "flops": floats(_take(flops, keep)),
            "kernel_flop": floats(_take(kernel_flop, keep)), "kernel_num_gb": floats(_take(num_gb, keep))}


# Below this many events a file is built in one process: forking costs more than it saves.
PARALLEL_MIN_EVENTS = 150_000
MIN_PART_EVENTS = 40_000


def default_parts() -> int:
    """How many processes may build one file: the cores, and 1 wherever forking is unsafe.

    Forking is only safe from a single-threaded process (the loader's worker processes are); a server or a test
    process with threads builds in-process. The scheduler narrows this to its share of the machine.
    """
    if not hasattr(os, "fork") or threading.active_count() > 1:
        return 1
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


# Chunks of a table concatenated into one block (ModelBuilder.compact): ~1,300 events each, a few MB together.
COMPACT_CHUNKS = 32


def _build_range(doc: TraceDocument, lo: int, hi: int, progress: Callable[[float], None] | None) -> ModelBuilder:
    from .read import iter_event_chunks

    builder = ModelBuilder()
    start = lo
    for done, chunk in iter_event_chunks(doc, lo=lo, hi=hi):
        first = builder.n_events
        builder.add(chunk)
        builder.add_counters((doc.traceEvents or [])[start:done], first)
        builder.compact(COMPACT_CHUNKS)
        start = done
        if progress:
            progress(min((done - lo) / max(1, hi - lo), 1.0))
    builder.compact()
    return builder


def _build_text(data: Any, lo: int, hi: int, progress: Callable[[float], None] | None,
                give_back: bool = False, drop: Callable[[int, int], Any] | None = None) -> ModelBuilder:
    """Build the events in ``data[lo:hi]``; with ``give_back``, this process drops its pages of the text outside
    that range at once and each chunk's once decoded (``pages.give_back``: the text is never read here again);
    ``drop(start, stop)`` frees a decoded chunk's text some other way (``pages.remove``)."""
    from .read import raw_text, text_chunks

    if give_back:
        pages.give_back(data, 0, lo)
        pages.give_back(data, hi, len(data))
        drop = functools.partial(pages.give_back, data)
    builder = ModelBuilder()
    start = lo
    for begin, done, chunk in text_chunks(data, lo, hi):
        # the counters' args are read from the text (a chunk that names their category), before its pages go
        raws = raw_text(memoryview(data)[begin:done]) if data.find(_RANGE_CAT, begin, done) >= 0 else []
        if drop is not None:
            drop(start, done)
        start = done
        first = builder.n_events
        builder.add(chunk)
        builder.add_counters(raws, first)
        builder.compact(COMPACT_CHUNKS)
        if progress:
            progress(min((done - lo) / max(1, hi - lo), 1.0))
    builder.compact()
    return builder


def _fork_part(build: Callable[[], ModelBuilder]) -> tuple[int, int]:
    """Fork a child that runs ``build`` (one range of events) and pickles (strings, tables) into a pipe; returns
    (pid, fd)."""
    return fork_worker(functools.partial(_send, build))


def _send(build: Callable[[], ModelBuilder], fd: int) -> None:
    builder = build()
    with os.fdopen(fd, "wb") as out:
        # the blocks as built (ModelBuilder.compact): concatenating them here would hold a second copy at the peak
        pickle.dump((builder.strings.values, builder.parts, builder.strings.full), out,
                    protocol=pickle.HIGHEST_PROTOCOL)


def fork_worker(body: Callable[[int], None]) -> tuple[int, int]:
    """Fork a child running ``body(write_fd)``; (pid, the read end of its answers). It exits 0 when ``body``
    returns, 1 if it raises: the parent sees a short read or the exit code, and builds the file another way.

    A plain fork, not multiprocessing: the loader's worker processes are daemons, which multiprocessing forbids
    to have children, and the child needs nothing but the text it inherits (copy-on-write, or a shared map).
    """
    read_fd, write_fd = os.pipe()
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:  # child
        code = 0
        try:
            die_with_parent(parent)
            os.close(read_fd)
            body(write_fd)
        except BaseException:  # noqa: BLE001 - the parent sees it fail and builds the file another way
            code = 1
        finally:
            os._exit(code)
    os.close(write_fd)
    return pid, read_fd


def join_worker(worker: tuple[int, int]) -> tuple[bool, bytes]:
    """Wait for a :func:`fork_worker` child: (whether it exited 0, what it wrote, read to its end)."""
    pid, read_fd = worker
    with os.fdopen(read_fd, "rb") as answer:
        data = answer.read()
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0, data


class ParallelBuildFailed(RuntimeError):
    """A forked part died (e.g. killed for memory); the caller may build the file again in one process."""


Part = tuple[list[str], dict[str, list[Columns]], dict[int, str]]  # strings, chunk tables, long texts


def build_model(doc: TraceDocument, source: str, progress: Callable[[float], None] | None = None,
                parts: int = 1) -> TraceModel:
    """Decode the events of ``doc`` chunk by chunk and build every table.

    With ``parts > 1`` and a large file, later ranges of events are built by forked processes at the same time
    (they share the decoded buffer copy-on-write) and merged in order.
    """
    total = len(doc.traceEvents or [])
    parts = min(parts, total // MIN_PART_EVENTS)  # a part smaller than this costs more to fork than it saves
    if parts <= 1 or total < PARALLEL_MIN_EVENTS:
        builder = _build_range(doc, 0, total, progress)
        doc.traceEvents = None  # the raw slices pin the whole decoded buffer: let it go before concatenating
        return builder.finish(doc, source)
    bounds = np.linspace(0, total, parts + 1).astype(int).tolist()
    children = [_fork_part(functools.partial(_build_range, doc, lo, hi, None))
                for lo, hi in itertools.pairwise(bounds[1:])]
    builder = _build_range(doc, 0, bounds[1], progress)
    # The children hold their own (copy-on-write) view of the buffer: free ours before receiving their parts,
    # which lowers the peak of the process tree by the size of the decoded JSON.
    doc.traceEvents = None
    return _merge(builder, children).finish(doc, source)


def _merge(builder: ModelBuilder, children: list[tuple[int, int]]) -> ModelBuilder:
    """Absorb the children's parts in order; every child is waited for, and any that failed fails the build.

    Every child's pipe is read at once on a thread of its own (the reads release the GIL): a part that finishes
    early no longer waits in its ``pickle.dump`` until the parts before it are merged (on 16 cores the 2 GB
    trace's 14 parts were read one after another for 2.5 s after the first ended, 1.3 s after the last)."""
    return merge_drained(builder, [_Drain(pid, fd) for pid, fd in children])


def merge_drained(builder: ModelBuilder, drains: list[_Drain]) -> ModelBuilder:
    """:func:`_merge` of parts whose pipes are already being read (``stream``: from their fork on)."""
    failed = False
    for drain in drains:
        part = drain.part()
        if part is None:
            failed = True
            continue
        if not failed:
            builder.absorb(*part)
    if failed:
        raise ParallelBuildFailed("a parallel loader process died (out of memory?) or its range did not parse")
    return builder


class _Drain:
    """A forked part's answer, read whole from its pipe on a thread as soon as the child writes it."""

    def __init__(self, pid: int, read_fd: int) -> None:
        self.pid, self.ok = pid, False
        self.chunks: list[bytes] = []
        self.thread = threading.Thread(target=self._read, args=(read_fd,), daemon=True)
        self.thread.start()

    def _read(self, read_fd: int) -> None:
        try:
            with os.fdopen(read_fd, "rb", buffering=0) as src:
                while chunk := src.read(DRAIN_CHUNK):
                    self.chunks.append(chunk)
            self.ok = True
        except OSError:
            pass

    def part(self) -> Part | None:
        """The child's (strings, tables, long texts), or None if it died or wrote something unreadable."""
        self.thread.join()
        os.waitpid(self.pid, 0)
        data, self.chunks = b"".join(self.chunks), []
        if not self.ok or not data:
            return None
        try:
            loaded: Part = pickle.loads(data)
        except (EOFError, pickle.UnpicklingError, ValueError):
            return None
        return loaded


DRAIN_CHUNK = 4 << 20  # bytes a drain thread reads at a time


# Below this many bytes of JSON a file is built in one process (about PARALLEL_MIN_EVENTS Kineto events), and no
# part of a larger one is smaller than MIN_PART_BYTES (about 25k events).
PARALLEL_MIN_BYTES = 48 << 20
MIN_PART_BYTES = 8 << 20


# How much more each forked part builds than the one before it (a fraction of a part): the parent merges the parts
# one after another as they finish (unpickling and remapping a part costs about 3 % of building it), so parts that
# finish a little apart keep it busy instead of all arriving at once.
MERGE_STAGGER = 0.03


def staggered(parts: int) -> list[float]:
    """Byte shares of the parts: the parent's own range first, then the children's, each slightly larger."""
    return [1.0] + [1.0 + MERGE_STAGGER * k for k in range(parts - 1)]


def build_text_parts(data: bytes, lo: int, hi: int, progress: Callable[[float], None] | None = None,
                     parts: int = 1, give_back: bool = False) -> ModelBuilder:
    """Build every table from the text of ``traceEvents`` (``data[lo:hi]``, see ``read.outline_by_text``).

    Each of ``parts`` processes decodes and builds its own byte range, so nothing decodes the whole array first.
    Returns the merged builder, not yet finished, so that the caller can free the text before the tables are
    concatenated. A range that does not parse (a separator inside a nested value), or no event at all, raises
    :class:`ParallelBuildFailed`, and the caller builds the same bytes the usual way (:func:`build_model` after
    one outline decode). With ``give_back`` every process gives back the pages of the text it is done with
    (``pages``): ``data`` is then unreadable afterwards, also when this raises, so only a caller that can
    inflate it again may ask for it.
    """
    from .read import split_text

    parts = max(1, min(parts, (hi - lo) // MIN_PART_BYTES))  # a smaller part costs more to fork than it saves
    ranges = split_text(data, lo, hi, parts, staggered(parts))
    children = [_fork_part(functools.partial(_build_text, data, start, stop, None, give_back))
                for start, stop in ranges[1:]]
    try:
        builder = _build_text(data, *ranges[0], progress, give_back) if ranges else ModelBuilder()
    except ValueError as err:  # read.TextSplitFailed: our own range did not parse
        for pid, fd in children:
            _Drain(pid, fd).part()
        raise ParallelBuildFailed(f"the trace's text could not be split into events ({err})") from None
    builder = _merge(builder, children)
    if not builder.n_events:  # nothing usable: the usual path says precisely what is wrong with the file
        raise ParallelBuildFailed("no events in the trace's text")
    return builder


def build_model_from_text(data: bytes, doc: TraceDocument, lo: int, hi: int, source: str,
                          progress: Callable[[float], None] | None = None, parts: int = 1) -> TraceModel:
    """:func:`build_text_parts`, finished into the model (``doc`` holds the trace's other top-level keys)."""
    return build_text_parts(data, lo, hi, progress, parts).finish(doc, source)
