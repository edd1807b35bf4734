"""Structs to columns: turn decoded events into the :class:`~tb_plugin.model.tables.TraceModel` tables.

Each field is pulled out with one C-level ``map(attrgetter(...))`` pass over just the events that carry it and
converted to numpy in one call; a per-element slow path runs only when a column holds odd values (``"N/A"``,
strings for numbers, lists), so an odd value costs that one field of that one event, never the file.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from operator import attrgetter
from typing import Any

import msgspec
import numpy as np

from ..model.kinds import DEVICE_KINDS, Kind, kind_of
from ..model.tables import SCHEMAS, Columns, TraceModel, empty_table
from .schema import Args, Event, TraceDocument

_EMPTY_ARGS = Args()
_FLOW_PHASES = ("s", "f", "t")
_META_KEYS = (
    "schemaVersion", "deviceProperties", "distributedInfo", "baseTimeNanoseconds", "displayTimeUnit",
    "traceName", "trace_id", "Framework", "cupti_version", "cuda_runtime_version", "cuda_driver_version",
    "hip_runtime_version", "record_shapes", "profile_memory", "with_stack", "with_flops", "with_modules",
)


class Interner:
    """One string table for the whole trace; columns hold int32 codes into it (``-1`` for missing)."""

    def __init__(self) -> None:
        self.values: list[str] = []
        self._index: dict[str, int] = {}

    def add(self, text: str) -> int:
        code = self._index.get(text)
        if code is None:
            code = self._index[text] = len(self.values)
            self.values.append(text)
        return code

    def codes(self, items: Sequence[Any]) -> np.ndarray:
        """Codes for a list of values; ``None`` becomes -1, non-strings their JSON text."""
        local: dict[Any, int] = {}
        try:
            raw = [local.setdefault(x, len(local)) for x in items]
        except TypeError:  # unhashable values (lists, dicts) somewhere: hash their text instead
            items = [x if x is None or isinstance(x, (str, int, float, bytes)) else _as_text(x) for x in items]
            local = {}
            raw = [local.setdefault(x, len(local)) for x in items]
        lut = np.empty(len(local), dtype=np.int32)
        for value, lc in local.items():
            lut[lc] = -1 if value is None else self.add(_as_text(value))
        return lut[np.asarray(raw, dtype=np.int32)] if raw else np.empty(0, dtype=np.int32)


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
    except (TypeError, ValueError):
        return math.nan


def floats(items: Sequence[Any]) -> np.ndarray:
    """float64 column; None, "N/A" and other non-numbers become NaN, "inf"/"Infinity" stay infinite."""
    try:
        return np.array(items, dtype=np.float64)
    except (TypeError, ValueError):
        return np.fromiter(map(_to_float, items), dtype=np.float64, count=len(items))


def _to_int(value: Any) -> int:
    if value is None:
        return -1
    try:
        f = float(value)
    except (TypeError, ValueError):
        return -1
    return int(f) if math.isfinite(f) else -1


def ints(items: Sequence[Any]) -> np.ndarray:
    """int64 column; None and non-numbers become -1."""
    try:
        return np.array([-1 if x is None else x for x in items], dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        return np.fromiter(map(_to_int, items), dtype=np.int64, count=len(items))


def raw_texts(items: Sequence[msgspec.Raw]) -> list[bytes | None]:
    """Raw JSON slices as bytes; an empty slice (the field was absent) or ``null`` becomes None."""
    out: list[bytes | None] = [bytes(r) if r else None for r in items]
    return [None if b == b"null" else b for b in out]


class _Ids:
    """pid/tid columns: numbers stay numbers; a textual id (``"Spans"``) gets a negative id ``-(2 + code)``."""

    def __init__(self, interner: Interner) -> None:
        self.interner = interner

    def column(self, items: Sequence[Any]) -> np.ndarray:
        try:
            return np.array([-1 if x is None else x for x in items], dtype=np.int64)
        except (TypeError, ValueError, OverflowError):
            pass
        local: dict[Any, int] = {}
        try:
            raw = [local.setdefault(x, len(local)) for x in items]
        except TypeError:
            return np.fromiter(map(self._one, items), dtype=np.int64, count=len(items))
        lut = np.fromiter(map(self._one, local), dtype=np.int64, count=len(local))
        return lut[np.asarray(raw, dtype=np.int64)]

    def _one(self, value: Any) -> int:
        if value is None:
            return -1
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        text = _as_text(value)
        if text.lstrip("-").isdigit():
            return int(text)
        return -(2 + self.interner.add(text))


def _pick(items: Sequence[Any], name: str) -> list[Any]:
    return list(map(attrgetter(name), items))


def _grid(values: list[Any], axis: int) -> list[Any]:
    return [v[axis] if type(v) is list and len(v) > axis else None for v in values]


def build_model(doc: TraceDocument, source: str, progress: Callable[[float], None] | None = None) -> TraceModel:
    """Build every table of the model from a decoded document."""
    events: list[Event] = doc.traceEvents or []
    strings = Interner()
    ids = _Ids(strings)
    report = progress or (lambda _f: None)

    phases = strings.codes(_pick(events, "ph"))
    cats = strings.codes(_pick(events, "cat"))
    flow_codes = [strings.add(p) for p in _FLOW_PHASES]
    meta_code = strings.add("M")
    is_flow = np.isin(phases, flow_codes)
    is_meta = phases == meta_code
    core_idx = np.flatnonzero(~(is_flow | is_meta))
    report(0.2)

    tables: dict[str, Columns] = {}
    core = [events[i] for i in core_idx]
    tables["events"], kinds, core_args = _events_table(core, phases[core_idx], cats[core_idx], strings, ids)
    report(0.5)
    tables.update(_side_tables(core, core_args, kinds, strings))
    report(0.8)
    tables["flows"] = _flows_table([events[i] for i in np.flatnonzero(is_flow)], phases[is_flow], cats[is_flow],
                                   strings, ids)
    tables["metadata_events"] = _metadata_table([events[i] for i in np.flatnonzero(is_meta)], strings, ids)
    meta = {key: getattr(doc, key) for key in _META_KEYS}
    meta["pytorch_version"] = doc.pytorch_version or doc.pytorch_version_alt
    meta["source"] = source
    report(1.0)
    return TraceModel(strings=strings.values, tables=tables, meta=meta)


def _events_table(core: list[Event], phases: np.ndarray, cats: np.ndarray, strings: Interner,
                  ids: _Ids) -> tuple[Columns, np.ndarray, list[Args]]:
    names = strings.codes(_pick(core, "name"))
    # Kind per (phase, category) pair, computed once per distinct pair.
    pairs = phases.astype(np.int64) * (len(strings.values) + 1) + (cats + 1)
    uniq, inverse = np.unique(pairs, return_inverse=True)
    lut = np.empty(len(uniq), dtype=np.uint8)
    for i, key in enumerate(uniq.tolist()):
        ph = strings.values[key // (len(strings.values) + 1)]
        cat_code = key % (len(strings.values) + 1) - 1
        lut[i] = kind_of(strings.values[cat_code] if cat_code >= 0 else "", ph, "")
    kinds = lut[inverse] if len(core) else np.empty(0, dtype=np.uint8)
    memory_name = strings.add("[memory]")
    kinds[(kinds == Kind.INSTANT) & (names == memory_name)] = Kind.MEMORY

    args = [a if a is not None else _EMPTY_ARGS for a in _pick(core, "args")]
    ext = ints(_pick(args, "external_id"))
    missing = ext < 0
    if missing.any():
        lower = ints(_pick(args, "external_id_lower"))
        ext = np.where(missing, lower, ext)
    cols: Columns = {
        "kind": kinds,
        "ph": phases.astype(np.int32),
        "cat": cats.astype(np.int32),
        "name": names,
        "pid": ids.column(_pick(core, "pid")),
        "tid": ids.column(_pick(core, "tid")),
        "ts": floats(_pick(core, "ts")),
        "dur": floats(_pick(core, "dur")),
        "external_id": ext,
        "correlation": ints(_pick(args, "correlation")),
    }
    return cols, kinds, args


def _side_tables(core: list[Event], args: list[Args], kinds: np.ndarray, strings: Interner) -> dict[str, Columns]:
    out: dict[str, Columns] = {}

    rows = np.flatnonzero(np.isin(kinds, DEVICE_KINDS))
    a = [args[i] for i in rows]
    grids, blocks = _pick(a, "grid"), _pick(a, "block")
    out["device_events"] = {
        "row": rows.astype(np.int64),
        "device": ints(_pick(a, "device")),
        "stream": ints(_pick(a, "stream")),
        "grid_x": ints(_grid(grids, 0)), "grid_y": ints(_grid(grids, 1)), "grid_z": ints(_grid(grids, 2)),
        "block_x": ints(_grid(blocks, 0)), "block_y": ints(_grid(blocks, 1)), "block_z": ints(_grid(blocks, 2)),
        "registers": ints(_pick(a, "registers")),
        "shared_memory": ints(_pick(a, "shared_memory")),
        "blocks_per_sm": floats(_pick(a, "blocks_per_sm")),
        "warps_per_sm": floats(_pick(a, "warps_per_sm")),
        "occupancy": floats(_pick(a, "occupancy")),
        "nbytes": ints(_pick(a, "nbytes")),
        "bandwidth": floats(_pick(a, "bandwidth")),
    }

    rows = np.flatnonzero((kinds == Kind.CPU_OP) | (kinds == Kind.USER_ANNOTATION))
    a = [args[i] for i in rows]
    dims = _pick(a, "input_dims")
    if not all(dims):
        lower = _pick(a, "input_dims_lower")
        dims = [d if d else low for d, low in zip(dims, lower)]
    out["ops"] = {
        "row": rows.astype(np.int64),
        "input_dims": strings.codes(raw_texts(dims)),
        "input_type": strings.codes(raw_texts(_pick(a, "input_type"))),
        "call_stack": strings.codes(_pick(a, "call_stack")),
        "seq": ints(_pick(a, "seq")),
        "fwd_tid": ints(_pick(a, "fwd_tid")),
        "kernel_name": strings.codes(_pick(a, "kernel_name")),
    }

    candidates = np.flatnonzero(np.isin(kinds, (Kind.CPU_OP, Kind.USER_ANNOTATION, Kind.KERNEL, Kind.COMMUNICATION)))
    names = _pick([args[i] for i in candidates], "collective_name")
    rows = candidates[np.fromiter((n is not None for n in names), dtype=bool, count=len(names))]
    a = [args[i] for i in rows]
    out["comms"] = {
        "row": rows.astype(np.int64),
        "collective_name": strings.codes(_pick(a, "collective_name")),
        "in_nelems": ints(_pick(a, "in_nelems")),
        "out_nelems": ints(_pick(a, "out_nelems")),
        "dtype": strings.codes(_pick(a, "dtype")),
        "group_size": ints(_pick(a, "group_size")),
        "pg_name": strings.codes(_pick(a, "pg_name")),
        "pg_desc": strings.codes(_pick(a, "pg_desc")),
        "pg_ranks": strings.codes(_pick(a, "pg_ranks")),
        "rank": ints(_pick(a, "rank")),
    }

    rows = np.flatnonzero(kinds == Kind.PYTHON_FUNCTION)
    a = [args[i] for i in rows]
    out["python"] = {
        "row": rows.astype(np.int64),
        "python_id": ints(_pick(a, "python_id")),
        "parent_id": ints(_pick(a, "python_parent_id")),
        "module_id": ints(_pick(a, "python_module_id")),
    }

    rows = np.flatnonzero(kinds == Kind.MEMORY)
    a = [args[i] for i in rows]
    out["memory"] = {
        "row": rows.astype(np.int64),
        "device_type": ints(_pick(a, "device_type")),
        "device_id": ints(_pick(a, "device_id")),
        "addr": ints(_pick(a, "addr")),
        "bytes": ints(_pick(a, "mem_bytes")),
        "total_allocated": ints(_pick(a, "total_allocated")),
        "total_reserved": ints(_pick(a, "total_reserved")),
    }
    for name, cols in out.items():
        assert set(cols) == set(SCHEMAS[name]), name
    return out


def _flows_table(flows: list[Event], phases: np.ndarray, cats: np.ndarray, strings: Interner,
                 ids: _Ids) -> Columns:
    if not flows:
        return empty_table("flows")
    return {
        "ph": phases.astype(np.int32),
        "cat": cats.astype(np.int32),
        "name": strings.codes(_pick(flows, "name")),
        "id": ints(_pick(flows, "id")),
        "pid": ids.column(_pick(flows, "pid")),
        "tid": ids.column(_pick(flows, "tid")),
        "ts": floats(_pick(flows, "ts")),
        "bp": strings.codes(_pick(flows, "bp")),
    }


def _metadata_table(meta_events: list[Event], strings: Interner, ids: _Ids) -> Columns:
    if not meta_events:
        return empty_table("metadata_events")
    args = [a if a is not None else _EMPTY_ARGS for a in _pick(meta_events, "args")]
    values = [a.name if a.name is not None else a.labels for a in args]
    return {
        "name": strings.codes(_pick(meta_events, "name")),
        "pid": ids.column(_pick(meta_events, "pid")),
        "tid": ids.column(_pick(meta_events, "tid")),
        "value": strings.codes(values),
        "sort_index": ints(_pick(args, "sort_index")),
    }
