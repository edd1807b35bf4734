"""Reading an allocator snapshot (``torch.cuda.memory._dump_snapshot``'s pickle) into columns.

Where each field comes from (``torch/cuda/memory.py`` ``_snapshot`` documents the dict; ``torch/csrc/cuda/Module.cpp``
builds it, ``torch/csrc/cuda/memory_snapshot.cpp`` is the C++ API's pickled twin; ``torch/utils/viz/MemoryViz.js``
reads every version, and so does this):

- ``segments[]``: ``device``, ``address``, ``total_size``, ``stream``, ``segment_type`` (``large``/``small``),
  ``segment_pool_id`` (a pair), ``is_expandable`` (2.1+), ``blocks[]``; each block ``size``, ``requested_size``,
  ``state`` (``active_allocated``, ``active_awaiting_free`` — ``active_pending_free`` in the C++ dump —,
  ``inactive``), ``frames`` and, from 2.1 on, ``address``. torch 2.0 kept a block's stack and requested size in
  ``history[0]`` (``frames``, ``real_size``) instead; a block's address is its segment's plus the sizes before it.
- ``device_traces[device][]`` (only with ``_record_memory_history``): ``action``, ``addr`` (``device_free`` in its
  place on an ``oom`` entry: what ``cudaMemGetInfo`` said was free), ``size`` (the request for alloc/free, the
  rounded request of an oom, the segment's for segment_*; a ``snapshot`` entry's is the active bytes then),
  ``stream``, ``frames``, and from 2.1 on ``time_us`` (µs since the epoch).
- ``allocator_settings`` (2.6+: ``PYTORCH_CUDA_ALLOC_CONF``, ``expandable_segments``, ``max_split_size``, …) and
  ``external_annotations`` (2.6+, ``global_record_annotations``: ``device``, ``time_us``, ``stage``, ``name``).
- ``pytorch_tb_profiler.oom`` (this project's :func:`tb_plugin.record_memory_history` only): the arguments torch
  gave its out-of-memory observer (the segment it failed to get, the process's limit, the device's free bytes).
- a frame: ``filename``, ``line``, ``name`` (FX fields beside them are ignored); innermost first.

Keys a version does not write are missing values, keys a later version adds are ignored. The pickle's dicts live
only while the columns are pulled out of them (one list comprehension per column, no object per entry kept).
"""

from __future__ import annotations

import pickle
import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..catalog.names import file_name
from ..model.snapshot import ACTIONS, A, AllocatorSnapshot
from .errors import TraceLoadError
from .source import read_source
from .unpickle import Refused, load_data, no_gc

MAX_INFLATED_BYTES = 4 << 30  # a snapshot that inflates beyond this is not read (a gzip bomb, or ~10 M entries)
_STATES = {"active_allocated": 0, "active_pending_free": 1, "active_awaiting_free": 1, "inactive": 2}
_OTHER = A["other"]
_ACTION = {name: i for i, name in enumerate(ACTIONS) if name != "other"}
_SETTING_TYPES = (str, int, float, bool, type(None))


class SnapshotError(Exception):
    """Why one snapshot file cannot be shown: ``"<file>: <reason>"`` in one line."""


def load_snapshot(url: str, access: Any = None) -> AllocatorSnapshot:
    """Read, inflate, unpickle (data only) and decode one snapshot file (local path or fsspec URL)."""
    name = file_name(url)
    try:
        raw = read_source(url, access)
    except TraceLoadError as err:
        raise SnapshotError(str(err)) from None
    return decode_snapshot_bytes(raw, name)


def decode_snapshot_bytes(raw: bytes, name: str) -> AllocatorSnapshot:
    data = inflate(raw, name)
    try:
        obj = load_data(data)
    except Refused as err:
        raise SnapshotError(f"{name}: refused: {err}") from None
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, IndexError, KeyError, AttributeError,
            MemoryError, OverflowError) as err:
        short = isinstance(err, EOFError) or "truncated" in str(err)
        what = "cut short (was it still being written?)" if short else f"damaged ({err})"
        raise SnapshotError(f"{name}: not a readable pickle: {what}") from None
    del data
    return decode_snapshot(obj, name)


def inflate(raw: bytes, name: str) -> bytes:
    """The pickle's bytes: gunzipped when gzip data, up to :data:`MAX_INFLATED_BYTES`."""
    if not raw:
        raise SnapshotError(f"{name}: the file is empty")
    if raw[:2] != b"\x1f\x8b":
        return raw
    inflater = zlib.decompressobj(wbits=31)
    try:
        out = inflater.decompress(raw, MAX_INFLATED_BYTES + 1)
    except zlib.error as err:
        raise SnapshotError(f"{name}: the gzip data is corrupt ({err})") from None
    if len(out) > MAX_INFLATED_BYTES:
        raise SnapshotError(f"{name}: inflates to more than {MAX_INFLATED_BYTES >> 30} GiB; not read")
    if not inflater.eof:
        raise SnapshotError(f"{name}: the gzip data is cut short (was the file still being written?)")
    return out


def decode_snapshot(obj: Any, name: str) -> AllocatorSnapshot:
    """Columns of the unpickled snapshot dict; :class:`SnapshotError` when it is not one."""
    if not isinstance(obj, dict) or not ({"segments", "device_traces"} & set(obj)):
        kind = type(obj).__name__
        raise SnapshotError(f"{name}: not a PyTorch allocator snapshot (a pickled {kind} without 'segments' and "
                            "'device_traces'; torch.cuda.memory._dump_snapshot writes them)")
    try:
        with no_gc():
            return _decode(obj, name)
    except _Bad as err:
        raise SnapshotError(f"{name}: not a PyTorch allocator snapshot: {err}") from None
    except (TypeError, ValueError, OverflowError, AttributeError, KeyError) as err:
        raise SnapshotError(f"{name}: not a PyTorch allocator snapshot: a field has a value of the wrong kind "
                            f"({type(err).__name__}: {err})") from None


class _Bad(Exception):
    pass


def _list(value: Any, what: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, (list, tuple)):
        raise _Bad(f"'{what}' is a {type(value).__name__}, not a list")
    return list(value)


def _dicts(items: Sequence[Any], what: str) -> None:
    bad = next((i for i, item in enumerate(items) if not isinstance(item, dict)), None)
    if bad is not None:
        raise _Bad(f"{what}[{bad}] is a {type(items[bad]).__name__}, not a dict")


def _ints(values: list[Any], what: str) -> np.ndarray:
    try:
        return np.array(values, dtype=np.int64) if values else np.empty(0, dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        bad = next((v for v in values if not isinstance(v, int)), None)
        raise _Bad(f"a '{what}' is {bad!r}, not a whole number") from None


class _Stacks:
    """Interns frames and stacks: each distinct frame and stack once, whatever the pickle shared or not."""

    def __init__(self) -> None:
        self.strings: list[str] = []
        self._string: dict[str, int] = {}
        self.files: list[int] = []
        self.lines: list[int] = []
        self.names: list[int] = []
        self._frame: dict[tuple[str, int, str], int] = {}
        self._frame_by_id: dict[int, int] = {}
        self._stack: dict[tuple[int, ...], int] = {}
        self._stack_by_id: dict[int, int] = {}
        self._stack_by_ids: dict[tuple[int, ...], int] = {}
        self.stacks: list[tuple[int, ...]] = []

    def code(self, text: Any) -> int:
        text = text if isinstance(text, str) else str(text)
        found = self._string.get(text)
        if found is None:
            found = self._string[text] = len(self.strings)
            self.strings.append(text)
        return found

    def frame(self, f: Any) -> int:
        found = self._frame_by_id.get(id(f))
        if found is not None:
            return found
        if not isinstance(f, dict):
            raise _Bad(f"a stack frame is a {type(f).__name__}, not a dict of filename, line and name")
        line = f.get("line", -1)
        key = (str(f.get("filename", "??")), int(line) if isinstance(line, int) else -1, str(f.get("name", "??")))
        found = self._frame.get(key)
        if found is None:
            found = self._frame[key] = len(self.files)
            self.files.append(self.code(key[0]))
            self.lines.append(key[1])
            self.names.append(self.code(key[2]))
        self._frame_by_id[id(f)] = found
        return found

    def of(self, frames: Any) -> int:
        """The stack index of a ``frames`` list, -1 for none or an empty one.

        torch gathers a traceback per entry but shares the frame dicts, so most lists are new while their frames
        are not: a list is looked up by its frames' ids (C-speed ``map(id, …)``), and only a new combination is
        interned frame by frame. The unpickled snapshot stays alive while decoding, so no id is reused meanwhile.
        """
        if not frames:
            return -1
        found = self._stack_by_id.get(id(frames))
        if found is not None:
            return found
        if not isinstance(frames, (list, tuple)):
            raise _Bad(f"'frames' is a {type(frames).__name__}, not a list")
        ids = tuple(map(id, frames))
        found = self._stack_by_ids.get(ids)
        if found is None:
            key = tuple(self.frame(f) for f in frames)
            found = self._stack.get(key)
            if found is None:
                found = self._stack[key] = len(self.stacks)
                self.stacks.append(key)
            self._stack_by_ids[ids] = found
        self._stack_by_id[id(frames)] = found
        return found

    def codes(self, lists: list[Any]) -> np.ndarray:
        """:meth:`of` for each of many ``frames`` lists, its fast paths inlined (a call per entry is half the time
        of a 100,000-entry history)."""
        by_id, by_ids = self._stack_by_id, self._stack_by_ids
        out = np.empty(len(lists), dtype=np.int32)
        for i, frames in enumerate(lists):
            if not frames:
                out[i] = -1
                continue
            found = by_id.get(id(frames))
            if found is None:
                found = by_ids.get(tuple(map(id, frames))) if isinstance(frames, (list, tuple)) else None
                found = self.of(frames) if found is None else found
                by_id[id(frames)] = found
            out[i] = found
        return out

    def csr(self) -> tuple[np.ndarray, np.ndarray]:
        lengths = np.fromiter((len(s) for s in self.stacks), dtype=np.int64, count=len(self.stacks))
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        flat = np.fromiter((i for s in self.stacks for i in s), dtype=np.int32, count=int(offsets[-1]))
        return offsets, flat


def _decode(obj: dict[str, Any], name: str) -> AllocatorSnapshot:
    stacks = _Stacks()
    events = _events(_list(obj.get("device_traces"), "device_traces"), stacks)
    segments, blocks, legacy = _segments(_list(obj.get("segments"), "segments"), stacks)
    annotations = _annotations(_list(obj.get("external_annotations"), "external_annotations"), stacks)
    offsets, flat = stacks.csr()
    notes = _notes(events, legacy)
    return AllocatorSnapshot(
        name=name, strings=stacks.strings, frame_file=np.array(stacks.files, dtype=np.int32),
        frame_line=np.array(stacks.lines, dtype=np.int64), frame_name=np.array(stacks.names, dtype=np.int32),
        stack_offsets=offsets, stack_frames=flat, **events, **segments, **blocks, **annotations,
        settings=_settings(obj.get("allocator_settings")), observed_oom=_observed(obj.get("pytorch_tb_profiler")),
        notes=notes)


def _events(traces: list[Any], stacks: _Stacks) -> dict[str, Any]:
    per_device = [_list(t, f"device_traces[{d}]") for d, t in enumerate(traces)]
    entries = [e for trace in per_device for e in trace]
    _dicts(entries, "a device_traces entry")
    device = np.repeat(np.arange(len(per_device), dtype=np.int32), [len(t) for t in per_device])
    action = np.fromiter((_ACTION.get(e.get("action"), _OTHER) for e in entries), dtype=np.int8, count=len(entries))
    times = [e.get("time_us") for e in entries]
    time_us = np.array([t if isinstance(t, (int, float)) else np.nan for t in times], dtype=np.float64)
    return {
        "ev_device": device, "ev_action": action,
        "ev_addr": _ints([e.get("addr", -1) for e in entries], "addr"),
        "ev_size": _ints([e.get("size", 0) for e in entries], "size"),
        "ev_stream": _ints([e.get("stream", 0) for e in entries], "stream"),
        "ev_time_us": time_us.reshape(len(entries)),
        "ev_stack": stacks.codes([e.get("frames") for e in entries]),
        "ev_device_free": _ints([e.get("device_free", -1) for e in entries], "device_free"),
    }


def _block_extra(b: dict[str, Any]) -> tuple[Any, Any]:
    """(frames, requested size) of a block: its own fields, or torch 2.0's ``history[0]``."""
    if "frames" in b or "history" not in b:
        return b.get("frames"), b.get("requested_size", b.get("size", 0))
    history = _list(b.get("history"), "history")
    first = history[0] if history and isinstance(history[0], dict) else {}
    return first.get("frames"), b.get("requested_size", first.get("real_size", b.get("size", 0)))


def _segments(segments: list[Any], stacks: _Stacks) -> tuple[dict[str, Any], dict[str, Any], bool]:
    _dicts(segments, "segments")
    address = _ints([s.get("address", 0) for s in segments], "address")
    blocks = [_list(s.get("blocks"), "blocks") for s in segments]
    flat = [b for bs in blocks for b in bs]
    _dicts(flat, "a segment's blocks")
    sizes = _ints([b.get("size", 0) for b in flat], "size")
    owner = np.repeat(np.arange(len(segments), dtype=np.int32), [len(bs) for bs in blocks])
    # a block's address: its own (2.1+) or its segment's plus the sizes of the blocks before it
    per_segment = np.zeros(len(segments), dtype=np.int64)
    np.add.at(per_segment, owner, sizes)
    before = np.cumsum(sizes) - sizes - (np.cumsum(per_segment) - per_segment)[owner]
    given = [b.get("address") for b in flat]
    has = np.array([isinstance(a, int) for a in given], dtype=bool).reshape(len(flat))
    blk_address = np.where(has, _ints([a if isinstance(a, int) else -1 for a in given], "address"),
                           address[owner] + before)
    extra = [_block_extra(b) for b in flat]
    legacy = any("history" in b and "frames" not in b for b in flat)
    pools = [s.get("segment_pool_id") for s in segments]
    pool = _ints([list(p)[:2] if isinstance(p, (list, tuple)) and len(p) >= 2 else [0, 0] for p in pools],
                 "segment_pool_id").reshape(len(segments), 2)
    seg = {
        "seg_device": _ints([s.get("device", 0) for s in segments], "device").astype(np.int32),
        "seg_address": address, "seg_total_size": _ints([s.get("total_size", 0) for s in segments], "total_size"),
        "seg_stream": _ints([s.get("stream", 0) for s in segments], "stream"),
        "seg_is_large": np.array([s.get("segment_type") != "small" for s in segments], dtype=bool).reshape(-1),
        "seg_expandable": np.array([bool(s.get("is_expandable", False)) for s in segments], dtype=bool).reshape(-1),
        "seg_pool": pool,
    }
    blk = {
        "blk_segment": owner, "blk_address": blk_address.astype(np.int64).reshape(len(flat)), "blk_size": sizes,
        "blk_requested": _ints([r for _, r in extra], "requested_size"),
        "blk_state": np.fromiter((_STATES.get(b.get("state"), 2) for b in flat), dtype=np.int8, count=len(flat)),
        "blk_stack": stacks.codes([f for f, _ in extra]),
    }
    return seg, blk, legacy


def _annotations(items: list[Any], stacks: _Stacks) -> dict[str, Any]:
    items = [a for a in items if isinstance(a, dict)]
    times = [a.get("time_us") for a in items]
    return {
        "ann_device": _ints([a.get("device", 0) for a in items], "device").astype(np.int32),
        "ann_time_us": np.array([t if isinstance(t, (int, float)) else np.nan for t in times],
                                dtype=np.float64).reshape(len(items)),
        "ann_start": np.array([str(a.get("stage", "")).upper() == "START" for a in items], dtype=bool).reshape(-1),
        "ann_name": np.array([stacks.code(a.get("name", "")) for a in items], dtype=np.int32).reshape(len(items)),
    }


def _settings(value: Any) -> dict[str, Any] | None:
    """``allocator_settings`` with plain values only (nested dicts of them kept one level deep)."""
    if not isinstance(value, dict):
        return None
    out: dict[str, Any] = {}
    for key, v in value.items():
        if isinstance(v, dict):
            out[str(key)] = {str(k): x for k, x in v.items() if isinstance(x, _SETTING_TYPES)}
        elif isinstance(v, _SETTING_TYPES):
            out[str(key)] = v
    return out


def _observed(value: Any) -> dict[str, int | None] | None:
    """What ``tb_plugin.record_memory_history``'s out-of-memory observer adds (torch's observer arguments)."""
    oom = value.get("oom") if isinstance(value, dict) else None
    if not isinstance(oom, dict):
        return None
    keys = ("device", "segment_bytes", "limit_bytes", "device_free_bytes", "device_total_bytes")
    return {k: oom[k] if isinstance(oom.get(k), int) else None for k in keys}


def _notes(events: dict[str, Any], legacy: bool) -> tuple[str, ...]:
    notes = []
    if len(events["ev_action"]) == 0:
        notes.append("The snapshot holds no allocation history, only the memory held when it was taken: call "
                     "torch.cuda.memory._record_memory_history() before the code to look at.")
    elif np.isnan(events["ev_time_us"]).all():
        notes.append("Its history entries have no times (torch < 2.1): moments are entry numbers only.")
    if legacy:
        notes.append("Blocks keep their stacks in 'history' (torch 2.0's format).")
    return tuple(notes)
