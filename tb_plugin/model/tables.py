"""The columnar model of one trace: numpy columns, one string table, and the trace's top-level metadata.

Why columns: a 2 GB trace has tens of millions of events; per-event Python objects would cost gigabytes and make
every analysis a Python loop. Each table is a dict of equal-length numpy arrays. Side tables (device events,
operators, memory, ...) point into ``events`` with a ``row`` column, so the common columns are stored once.

Missing values: ``-1`` in integer id and code columns, ``NaN`` in float columns.
The model is saved as Arrow IPC files and memory-mapped back, so a parse done in a worker process reaches the
server without being copied or pickled, and a restart reuses it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Hashable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from .memo import Memo

Columns = dict[str, np.ndarray]

# Column names and dtypes of every table; the single source of truth for builders, savers and tests.
SCHEMAS: dict[str, dict[str, str]] = {
    "events": {
        "kind": "u1", "ph": "i4", "cat": "i4", "name": "i4", "pid": "i8", "tid": "i8",
        "ts": "f8", "dur": "f8", "external_id": "i8", "correlation": "i8",
    },
    "device_events": {
        "row": "i8", "device": "i8", "stream": "i8",
        "grid_x": "i8", "grid_y": "i8", "grid_z": "i8", "block_x": "i8", "block_y": "i8", "block_z": "i8",
        "registers": "i8", "shared_memory": "i8", "blocks_per_sm": "f8", "warps_per_sm": "f8",
        "occupancy": "f8", "nbytes": "i8", "bandwidth": "f8",
    },
    "ops": {
        "row": "i8", "input_dims": "i4", "input_type": "i4", "call_stack": "i4", "seq": "i8", "fwd_tid": "i8",
        "kernel_name": "i4", "concrete_inputs": "i4",
    },
    "comms": {
        "row": "i8", "collective_name": "i4", "in_nelems": "i8", "out_nelems": "i8", "dtype": "i4",
        "group_size": "i8", "pg_name": "i4", "pg_desc": "i4", "pg_ranks": "i4", "rank": "i8",
    },
    "python": {"row": "i8", "python_id": "i8", "parent_id": "i8", "module_id": "i8"},
    "memory": {
        "row": "i8", "device_type": "i8", "device_id": "i8", "addr": "i8", "bytes": "i8",
        "total_allocated": "i8", "total_reserved": "i8",
    },
    "flows": {"ph": "i4", "cat": "i4", "name": "i4", "id": "i8", "pid": "i8", "tid": "i8", "ts": "f8", "bp": "i4"},
    "metadata_events": {"name": "i4", "pid": "i8", "tid": "i8", "value": "i4", "sort_index": "i8"},
    # work figures the trace carries (NaN: absent): an operator's "flops" arg, a launch's or kernel's "kernel_flop"
    # and "kernel_num_gb" (10^9 bytes); only the events carrying one of them have a row
    "work": {"row": "i8", "flops": "f8", "kernel_flop": "f8", "kernel_num_gb": "f8"},
    # CUPTI range-profiler counters: one row per (range event, counter) with a numeric value
    "counters": {"row": "i8", "metric": "i4", "value": "f8"},
}


CODES_KEPT = 256  # predicates ``TraceModel.codes_where`` keeps the answers of (most a few codes: kilobytes in all)
CODES_BYTES = 8 << 20  # and their bytes together at most (a predicate most strings satisfy, on a trace of millions)


def predicate_key(predicate: Any) -> Hashable | None:
    """What makes two predicates ask the same question: a function's code, defaults and the values its closure
    holds (a lambda written once and made again per call), else the predicate itself when hashable (a named
    function, a bound ``re.Pattern.match``); None when its values cannot be hashed, or a closure holds a string
    (a user's search text: one answer per text would never be asked again)."""
    code = getattr(predicate, "__code__", None)
    if code is None:
        try:
            hash(predicate)
        except TypeError:
            return None
        return ("callable", predicate)
    try:
        values = tuple(cell.cell_contents for cell in predicate.__closure__ or ())
        key = ("code", code, predicate.__defaults__, values)
        hash(key)
    except (TypeError, ValueError):  # an unhashable value, an empty cell
        return None
    return None if any(isinstance(v, str) for v in values) else key


def empty_table(schema: str) -> Columns:
    return {col: np.empty(0, dtype=dt) for col, dt in SCHEMAS[schema].items()}


@dataclass
class TraceModel:
    """One loaded trace file."""

    strings: list[str]
    tables: dict[str, Columns]
    meta: dict[str, Any] = field(default_factory=dict)
    _index: dict[str, int] | None = field(default=None, repr=False)
    _codes: dict[Hashable, np.ndarray] = field(default_factory=dict, repr=False)  # ``codes_where``'s answers
    memo: Memo = field(default_factory=Memo, repr=False)  # derived results, see model.derived and model.memo
    computing: dict[Any, Any] = field(default_factory=dict, repr=False)  # memo keys being computed: their futures
    # the text as written of every string ``strings`` holds shortened (loader.limits: a name of a million
    # characters is shown cut); read one at a time, for an event's details
    long_texts: Mapping[int, str] = field(default_factory=dict, repr=False)

    def __getitem__(self, table: str) -> Columns:
        return self.tables[table]

    def text(self, code: int) -> str | None:
        """The string behind a code column value, or None for ``-1``."""
        return self.strings[code] if code >= 0 else None

    def full_text(self, code: int) -> str | None:
        """:meth:`text`, whole where the views show it shortened (an event's details)."""
        if code < 0:
            return None
        full = self.long_texts.get(code)
        return full if full is not None else self.strings[code]

    def code(self, text: str) -> int:
        """The code of a string, or -1 when the trace never mentions it (so masks simply match nothing)."""
        if self._index is None:
            self._index = {s: i for i, s in enumerate(self.strings)}
        return self._index.get(text, -1)

    def codes_where(self, predicate: Any) -> np.ndarray:
        """Codes of all strings satisfying ``predicate``: the way to select names by prefix or pattern.

        Read-only, and kept per predicate (``predicate_key``: the same function, or a lambda of the same code over
        the same values): the analyses ask the same few questions (``ProfilerStep#``, syncs, collectives...) about
        every string again and again, a third of a multi-rank Overview's time on a 14k-event rank. At most
        ``CODES_KEPT`` answers of ``CODES_BYTES`` together are kept; predicates over a string (a search's text) are
        answered, not kept."""
        key = predicate_key(predicate)
        if key is not None and (codes := self._codes.get(key)) is not None:
            return codes
        codes = np.fromiter((i for i, s in enumerate(self.strings) if predicate(s)), dtype=np.int32)
        codes.setflags(write=False)
        kept = list(self._codes.values())  # a copy taken at once: another thread (a part's ahead work) may add one
        if key is not None and len(kept) < CODES_KEPT and sum(a.nbytes for a in kept) + codes.nbytes <= CODES_BYTES:
            self._codes[key] = codes
        return codes

    @property
    def n_events(self) -> int:
        return len(self.tables["events"]["ts"])

    def nbytes(self) -> int:
        return sum(a.nbytes for t in self.tables.values() for a in t.values())


def save(model: TraceModel, directory: str | os.PathLike[str]) -> None:
    """Write ``model`` into ``directory`` (created if missing): one Arrow IPC file per table, the string table, and
    ``meta.json``. Not atomic by itself: the parse cache builds an entry in a private folder and renames it into
    place whole (``jobs.entries``)."""
    target = Path(directory)
    target.mkdir(parents=True, exist_ok=True)
    for name, cols in model.tables.items():
        write_columns(target / f"{name}.arrow", cols)
    strings = pa.record_batch([_strings_to_arrow(model.strings)], names=["s"])
    with pa.OSFile(str(target / "strings.arrow"), "wb") as sink, pa.ipc.new_file(sink, strings.schema) as w:
        w.write_batch(strings)
    (target / "meta.json").write_text(json.dumps(model.meta, default=_json_default))
    if model.long_texts:
        codes = sorted(model.long_texts)
        texts = pa.record_batch([_to_arrow(np.asarray(codes, dtype=np.int32)),
                                 _strings_to_arrow([model.long_texts[c] for c in codes])], names=["code", "s"])
        with pa.OSFile(str(target / LONG_TEXTS), "wb") as sink, pa.ipc.new_file(sink, texts.schema) as w:
            w.write_batch(texts)


# The files of a saved model (what an entry must hold for its model to open).
MODEL_FILES = ("meta.json", "strings.arrow", *(f"{name}.arrow" for name in SCHEMAS))

def write_columns(path: str | os.PathLike[str], cols: Mapping[str, np.ndarray]) -> None:
    """One table of equally long numeric columns as an Arrow IPC file (what :func:`read_columns` maps back)."""
    batch = pa.record_batch([_to_arrow(v) for v in cols.values()], names=list(cols))
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, batch.schema) as w:
        w.write_batch(batch)


def read_columns(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """The columns of an Arrow IPC file, memory-mapped: zero-copy, read-only views of the file. For files nobody
    changes meanwhile (tests, tools): the server reads the parse cache through verified private copies instead
    (:func:`columns_of`, ``jobs.entries``), since a mapped file truncated by someone else is a SIGBUS."""
    return columns_of(pa.memory_map(str(path), "r"))


def columns_of(source: pa.Buffer | pa.NativeFile) -> dict[str, np.ndarray]:
    """The columns of an Arrow IPC file held in ``source`` (a buffer or an open file): zero-copy views of it."""
    table = pa.ipc.open_file(source).read_all()
    return {c: _to_numpy(table.column(c)) for c in table.column_names}


# Columns cross into and out of Arrow as raw buffers, never through ``pa.array`` or ``to_numpy``: those import
# pandas on first use (0.3-0.5 s), which every loader process paid before it could write its parse and the server
# paid before its first trace turned ready.


def _to_arrow(values: np.ndarray) -> pa.Array:
    """A numeric column as an Arrow array over the same bytes (no nulls: missing values are -1 or NaN)."""
    values = np.ascontiguousarray(values)
    return pa.Array.from_buffers(pa.from_numpy_dtype(values.dtype), len(values), [None, pa.py_buffer(values)])


def _strings_to_arrow(strings: list[str]) -> pa.Array:
    encoded = [s.encode() for s in strings]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded)), out=offsets[1:])
    return pa.Array.from_buffers(pa.large_string(), len(encoded),
                                 [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded))])


def load(directory: str | os.PathLike[str]) -> TraceModel:
    """Memory-map a saved model: columns are zero-copy (read-only) views of the files (tests and tools; the server
    opens cache entries through ``jobs.entries``, which verifies them and maps a private copy)."""
    src = Path(directory)
    return model_of({name: pa.memory_map(str(src / name), "r").read_buffer()
                     for name in (*MODEL_FILES, LONG_TEXTS) if (src / name).is_file()})


def model_of(files: Mapping[str, pa.Buffer]) -> TraceModel:
    """The model whose files (:data:`MODEL_FILES`, by name) are these buffers; columns are zero-copy views of them.
    A table without its file is empty (an entry written before the table existed)."""
    meta = json.loads(files["meta.json"].to_pybytes())
    tables = {name: columns_of(files[f"{name}.arrow"]) if f"{name}.arrow" in files else empty_table(name)
              for name in SCHEMAS}
    strings_tbl = pa.ipc.open_file(files["strings.arrow"]).read_all()
    strings = strings_tbl.column("s").to_pylist()
    long_texts = _MappedTexts(files[LONG_TEXTS]) if LONG_TEXTS in files else {}
    return TraceModel(strings=strings, tables=tables, meta=meta, long_texts=long_texts)


LONG_TEXTS = "long_strings.arrow"  # TraceModel.long_texts, where there are any


class _MappedTexts(Mapping[int, str]):
    """``long_texts`` of a saved model, zero-copy over its file's buffer: a text is made a ``str`` when asked for
    (at most a megabyte each, and a hostile trace may hold many), never all of them at opening."""

    def __init__(self, buffer: pa.Buffer) -> None:
        table = pa.ipc.open_file(buffer).read_all()
        self._codes = _to_numpy(table.column("code"))
        self._texts = table.column("s")

    def __getitem__(self, code: int) -> str:
        i = int(np.searchsorted(self._codes, code))
        if i >= len(self._codes) or self._codes[i] != code:
            raise KeyError(code)
        text: str = self._texts[i].as_py()
        return text

    def __iter__(self) -> Iterator[int]:
        return iter(self._codes.tolist())

    def __len__(self) -> int:
        return len(self._codes)


# Arrow type → numpy dtype for the columns ``save`` writes, looked up: ``DataType.to_pandas_dtype`` goes through
# pyarrow's pandas shim, which some pyarrow builds load (importing pandas) on first use: py-spy caught 0.3 s of it
# in the server's first model opening on the 16-core machine.
_NUMPY_DTYPES = {pa.from_numpy_dtype(np.dtype(name)): np.dtype(name) for name in (
    "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64")}


def _to_numpy(col: pa.ChunkedArray) -> np.ndarray:
    """The column's values buffer as numpy, without a copy (one chunk, as ``save`` writes) or concatenated."""
    dtype = _NUMPY_DTYPES.get(col.type) or np.dtype(col.type.to_pandas_dtype())
    pieces = []
    for chunk in col.chunks:
        if chunk.null_count:
            raise ValueError(f"column {col.type} has nulls; a saved model never has")
        data = chunk.buffers()[1]
        pieces.append(np.frombuffer(data, dtype=dtype, count=len(chunk), offset=chunk.offset * dtype.itemsize)
                      if data is not None else np.empty(0, dtype))
    if len(pieces) == 1:
        return pieces[0]
    return np.concatenate(pieces) if pieces else np.empty(0, dtype)


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Mapping):
        return dict(value)
    return str(value)
