#!/usr/bin/env python3
"""Issue 29, session 35: can a columnar JSON decoder (``pyarrow.json``) build a part's tables faster than msgspec?

    python benchmarks/probe_decode.py [TRACE ...] [--samples] [--odd] [--repeat N] [--json FILE]

For each trace the text of ``traceEvents`` is cut into the chunks a loader part decodes (``read.text_chunks``:
512 KB at separators) and built four ways, each timed in CPU seconds of this one process (``time.process_time``),
reported per 100 MB of event text:

- **current**: the part parser as it is (``columns._build_text``: msgspec typed decode into ``schema.Event``
  structs, then the Python-level columns of ``ModelBuilder.add``);
- **typed decode**: only the msgspec decode of the same chunks into structs (what ``current`` spends decoding);
- **floor (untyped)**: ``msgspec.json.decode`` of the same chunks into plain dicts and lists;
- **arrow**: each chunk rewritten to a stream of objects (the ``,`` between events dropped), read by
  ``pyarrow.json.read_json`` with an explicit schema of every field the loader reads (``args`` as a struct), and
  turned into the same tables with Arrow compute and numpy only (string columns interned through
  ``dictionary_encode``, so the string table comes out in the same order). A chunk Arrow cannot take (a field whose
  JSON type varies, ``"N/A"``, a bare ``NaN``, a duplicate key, an escape inside an argument list, nested shapes)
  falls back to the current path, chunk by chunk; the count of such chunks is reported.

The arrow path's ``TraceModel`` is compared with the current one column by column (dtype and values, NaN equal to
NaN), with the string table, the long texts and the metadata. ``--samples`` runs every trace in ``samples/`` and
``tests/data/`` (identity and fallbacks; their timings are too small to mean much); ``--odd`` builds a trace from
a test trace with planted odd events (each in its own chunk) and checks both paths agree there too.
The raw argument lists (``Input Dims``, ``Input type``, ``Concrete Inputs``) are kept by the loader as the text the
trace wrote; Arrow parses them, so the probe writes them back in Kineto's form (``[[1, 2], []]``, ``["a", ""]``):
exact for Kineto's writer, which the comparison checks, but a production version would need a check that the
file used that form.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tb_plugin.loader import columns, read  # noqa: E402
from tb_plugin.model import ids  # noqa: E402
from tb_plugin.model.kinds import DEVICE_KINDS, Kind  # noqa: E402
from tb_plugin.model.tables import Columns, TraceModel  # noqa: E402

F64, I64, STR = pa.float64(), pa.int64(), pa.string()
NUMBERS = ("External id", "external id", "correlation", "device", "stream", "registers per thread", "shared memory",
           "blocks per SM", "warps per SM", "est. achieved occupancy %", "bytes", "memory bandwidth (GB/s)",
           "Sequence number", "Fwd thread id", "flops", "kernel_flop", "kernel_num_gb", "Python id",
           "Python parent id", "Python module id", "Device Type", "Device Id", "Addr", "Bytes", "Total Allocated",
           "Total Reserved", "In msg nelems", "Out msg nelems", "Group size", "Rank", "sort_index")
TEXTS = ("Call stack", "kernel_name", "Collective name", "dtype", "Process Group Name", "Process Group Description",
         "Process Group Ranks", "name", "labels")
DIMS = ("Input Dims", "Input dims")
LISTS = ("Input type", "Concrete Inputs")
ARGS = pa.struct([*((k, F64) for k in NUMBERS), *((k, STR) for k in TEXTS), ("grid", pa.list_(F64)),
                  ("block", pa.list_(F64)), *((k, pa.list_(pa.list_(I64))) for k in DIMS),
                  *((k, pa.list_(STR)) for k in LISTS)])
SCHEMA = pa.schema([("ph", STR), ("cat", STR), ("name", STR), ("pid", I64), ("tid", I64), ("ts", F64), ("dur", F64),
                    ("id", F64), ("bp", STR), ("args", ARGS)])
PARSE = pj.ParseOptions(explicit_schema=SCHEMA, unexpected_field_behavior="ignore", newlines_in_values=True)
KINETO_SEPARATOR = b"},\n  {"


def chunk_bounds(data: Any, lo: int, hi: int, size: int = read.TEXT_CHUNK_BYTES) -> Iterator[tuple[int, int]]:
    """The byte ranges ``read.text_chunks`` decodes one at a time (the same cuts, so the same string order)."""
    start = lo
    while start < hi:
        found = read._SEPARATOR.search(data, start + size, hi) if hi - start > size + size // 2 else None
        stop, after = (found.start(), found.end() - 1) if found is not None else (hi, hi)
        yield start, stop
        start = after


def arrow_events(chunk: bytes) -> pa.Table | None:
    """The chunk's events as an Arrow table, or None where Arrow cannot take it (the caller falls back).

    Kineto writes ``},\\n  {`` between events; dropping the comma leaves a stream of objects, which Arrow reads
    with ``newlines_in_values`` (an object over several lines). A separator written otherwise leaves a comma
    between two objects, which Arrow refuses: that chunk falls back. Escapes ``\\u``/``\\/`` would be decoded
    inside the argument lists the loader keeps as written: such chunks fall back too.
    """
    if b"\\u" in chunk or b"\\/" in chunk or (b'"Input dims"' in chunk and b'"Input Dims"' in chunk):
        return None
    if not chunk.isascii():
        try:
            chunk.decode()
        except UnicodeDecodeError:
            return None
    text = chunk.replace(KINETO_SEPARATOR, b"}\n  {")
    try:
        table = pj.read_json(pa.py_buffer(text), parse_options=PARSE,
                             read_options=pj.ReadOptions(use_threads=False, block_size=len(text) + 64))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    return table if lists_written_back(table) else None


def lists_written_back(table: pa.Table) -> bool:
    """Whether every argument list the loader keeps as text can be written back as Kineto wrote it: no null
    inside ``Input Dims``, no string that needed an escape (``"``, ``\\``, a control character)."""
    args = table.column("args").combine_chunks()
    for key in DIMS:
        inner = args.field(key).flatten()
        if inner.null_count or inner.flatten().null_count:
            return False
    for key in LISTS:
        items = args.field(key).flatten()
        if items.null_count or (len(items) and pc.any(pc.match_substring_regex(items, r'["\\\x00-\x1f]')).as_py()):
            return False
    return True


def _wrap(texts: pa.Array, left: str, right: str) -> pa.Array:
    return pc.binary_join_element_wise(left, texts, right, "")


def _joined(lists: pa.ListArray, items: pa.Array, left: str, right: str) -> pa.Array:
    """Each list of ``lists`` (its items replaced by ``items``, text) as ``left + ", ".join(items) + right``."""
    lengths = np.asarray(pc.list_value_length(lists).fill_null(0).to_numpy(), dtype=np.int32)
    offsets = np.concatenate([np.zeros(1, np.int32), np.cumsum(lengths, dtype=np.int32)])
    rebuilt = pa.ListArray.from_arrays(pa.array(offsets), items)
    out = _wrap(pc.binary_join(rebuilt, ", "), left, right)
    return pc.if_else(lists.is_valid(), out, pa.scalar(None, STR))


def dims_text(lists: pa.Array) -> pa.Array:
    """``Input Dims`` as Kineto writes them: ``[[16, 512], []]``."""
    inner = lists.flatten()
    numbers = pc.cast(inner.flatten(), STR)
    return _joined(lists, _joined(inner, numbers, "[", "]"), "[", "]")


def list_text(lists: pa.Array) -> pa.Array:
    """A list of strings as Kineto writes it: ``["float", ""]``."""
    return _joined(lists, _wrap(lists.flatten(), '"', '"'), "[", "]")


class ArrowBuilder(columns.ModelBuilder):
    """``ModelBuilder`` fed Arrow tables: the same tables, string codes included, without a Python object per
    event (per distinct string only)."""

    def codes(self, values: pa.Array) -> np.ndarray:
        """``Interner.codes`` for a string column: ``dictionary_encode`` keeps first-appearance order."""
        if len(values) == 0:
            return np.empty(0, dtype=np.int32)
        encoded = pc.dictionary_encode(values)
        lut = np.fromiter(map(self.strings.add, encoded.dictionary.to_pylist()), dtype=np.int32,
                          count=len(encoded.dictionary))
        index = encoded.indices.fill_null(-1).to_numpy()
        out = np.full(len(index), -1, dtype=np.int32)
        known = index >= 0
        out[known] = lut[index[known]]
        return out

    def id_column(self, values: pa.Array) -> np.ndarray:
        """``_Ids.column`` for an int64 id column; ids beyond the numeric range (text) go the Python way."""
        out = values.fill_null(ids.MISSING).to_numpy()
        if ((out < -ids.NUMERIC_LIMIT) | (out >= ids.NUMERIC_LIMIT)).any():
            return self.ids.column(values.to_pylist())
        return out.astype(np.int64)

    def add_table(self, table: pa.Table) -> None:
        """:meth:`ModelBuilder.add` for an Arrow table of events (same tables, same order of interning)."""
        top = {name: table.column(name).combine_chunks() for name in table.column_names}
        args = dict(zip(ARGS.names, top["args"].flatten()))  # children with the struct's nulls
        phases, cats = self.codes(top["ph"]), self.codes(top["cat"])
        is_flow = np.isin(phases, self._flow_codes)
        is_meta = phases == self._meta_code
        core = np.flatnonzero(~(is_flow | is_meta))
        rows = pa.array(core)
        pick: Callable[[pa.Array], pa.Array] = (
            (lambda a: a) if len(core) == table.num_rows else (lambda a: a.take(rows)))
        core_args = {k: pick(v) for k, v in args.items()}
        names = self.codes(pick(top["name"]))
        kinds = self._classify(phases[core], cats[core], names)
        external = columns.ints(_floats(core_args["External id"]))
        missing = external < 0
        if missing.any():
            external = np.where(missing, columns.ints(_floats(core_args["external id"])), external)
        pids, tids = self.id_column(pick(top["pid"])), self.id_column(pick(top["tid"]))
        self.parts["events"].append({
            "kind": kinds, "ph": phases[core], "cat": cats[core], "name": names, "pid": pids, "tid": tids,
            "ts": columns.times(_floats(pick(top["ts"]))), "dur": columns.times(_floats(pick(top["dur"]))),
            "external_id": external, "correlation": columns.ints(_floats(core_args["correlation"])),
        })
        for name, cols in self.side_tables(core_args, kinds, pids, tids).items():
            cols["row"] = cols["row"] + self.n_events
            self.parts[name].append(cols)
        self.n_events += len(core)
        if is_flow.any():
            self.add_flows(top, np.flatnonzero(is_flow), phases, cats)
        if is_meta.any():
            self.add_meta(top, args, np.flatnonzero(is_meta))

    def add_flows(self, top: dict[str, pa.Array], rows: np.ndarray, phases: np.ndarray, cats: np.ndarray) -> None:
        at = pa.array(rows)
        self.parts["flows"].append({
            "ph": phases[rows], "cat": cats[rows], "name": self.codes(top["name"].take(at)),
            "id": columns.ints(_floats(top["id"].take(at))), "pid": self.id_column(top["pid"].take(at)),
            "tid": self.id_column(top["tid"].take(at)), "ts": columns.times(_floats(top["ts"].take(at))),
            "bp": self.codes(top["bp"].take(at)),
        })

    def add_meta(self, top: dict[str, pa.Array], args: dict[str, pa.Array], rows: np.ndarray) -> None:
        at = pa.array(rows)
        value = pc.coalesce(args["name"].take(at), args["labels"].take(at))
        self.parts["metadata_events"].append({
            "name": self.codes(top["name"].take(at)), "pid": self.id_column(top["pid"].take(at)),
            "tid": self.id_column(top["tid"].take(at)), "value": self.codes(value),
            "sort_index": columns.ints(_floats(args["sort_index"].take(at))),
        })

    def side_tables(self, args: dict[str, pa.Array], kinds: np.ndarray, pids: np.ndarray,
                    tids: np.ndarray) -> dict[str, Columns]:
        """``columns._side_tables`` from Arrow columns, in the same order."""
        out: dict[str, Columns] = {}
        rows = np.flatnonzero(np.isin(kinds, DEVICE_KINDS))
        if len(rows):
            out["device_events"] = _device_table(args, rows, pids, tids)
        rows = np.flatnonzero((kinds == Kind.CPU_OP) | (kinds == Kind.USER_ANNOTATION))
        if len(rows):
            out["ops"] = self.ops_table(args, rows)
        work = _work_table(args, kinds)
        if work is not None:
            out["work"] = work
        candidates = np.flatnonzero(np.isin(kinds, (Kind.CPU_OP, Kind.USER_ANNOTATION, Kind.KERNEL,
                                                    Kind.COMMUNICATION)))
        if len(candidates):
            rows = candidates[args["Collective name"].take(pa.array(candidates)).is_valid().to_numpy(
                zero_copy_only=False)]
            if len(rows):
                out["comms"] = self.comms_table(args, rows)
        for name, keys, table in (("python", ("Python id", "Python parent id", "Python module id"), "python"),
                                  ("memory", ("Device Type", "Device Id", "Addr", "Bytes", "Total Allocated",
                                              "Total Reserved"), "memory")):
            rows = np.flatnonzero(kinds == (Kind.PYTHON_FUNCTION if name == "python" else Kind.MEMORY))
            if len(rows):
                out[table] = _int_table(args, rows, keys, _INT_COLUMNS[table])
        return out

    def ops_table(self, args: dict[str, pa.Array], rows: np.ndarray) -> Columns:
        at = pa.array(rows)
        dims = args["Input Dims"].take(at)
        if dims.null_count:
            dims = pc.if_else(dims.is_valid(), dims, args["Input dims"].take(at))
        return {
            "row": rows.astype(np.int64), "input_dims": self.codes(dims_text(dims)),
            "input_type": self.codes(list_text(args["Input type"].take(at))),
            "call_stack": self.codes(args["Call stack"].take(at)),
            "seq": columns.ints(_floats(args["Sequence number"].take(at))),
            "fwd_tid": columns.ints(_floats(args["Fwd thread id"].take(at))),
            "kernel_name": self.codes(args["kernel_name"].take(at)),
            "concrete_inputs": self.codes(list_text(args["Concrete Inputs"].take(at))),
        }

    def comms_table(self, args: dict[str, pa.Array], rows: np.ndarray) -> Columns:
        at = pa.array(rows)

        def num(key: str) -> np.ndarray:
            return columns.ints(_floats(args[key].take(at)))

        return {
            "row": rows.astype(np.int64), "collective_name": self.codes(args["Collective name"].take(at)),
            "in_nelems": num("In msg nelems"), "out_nelems": num("Out msg nelems"),
            "dtype": self.codes(args["dtype"].take(at)), "group_size": num("Group size"),
            "pg_name": self.codes(args["Process Group Name"].take(at)),
            "pg_desc": self.codes(args["Process Group Description"].take(at)),
            "pg_ranks": self.codes(args["Process Group Ranks"].take(at)), "rank": num("Rank"),
        }


_INT_COLUMNS = {"python": ("python_id", "parent_id", "module_id"),
                "memory": ("device_type", "device_id", "addr", "bytes", "total_allocated", "total_reserved")}


def _floats(values: pa.Array) -> np.ndarray:
    """A float64 column as numpy, nulls as NaN (what ``columns.floats`` makes of None)."""
    return np.asarray(values.to_numpy(zero_copy_only=False), dtype=np.float64)


def _grid(values: pa.Array, axis: int) -> np.ndarray:
    """``columns._grid``: element ``axis`` of each list, NaN where the list is shorter or missing."""
    lengths = np.asarray(pc.list_value_length(values).fill_null(0).to_numpy(), dtype=np.int64)
    starts = values.offsets.to_numpy()[:-1]
    flat = _floats(values.values)
    out = np.full(len(values), np.nan)
    has = lengths > axis
    out[has] = flat[starts[has] + axis]
    return out


def _device_table(args: dict[str, pa.Array], rows: np.ndarray, pids: np.ndarray, tids: np.ndarray) -> Columns:
    at = pa.array(rows)

    def col(key: str) -> np.ndarray:
        return _floats(args[key].take(at))

    grid, block = args["grid"].take(at), args["block"].take(at)
    out: Columns = {"row": rows.astype(np.int64),
                    "device": columns._or_id(columns.ints(col("device")), pids[rows]),
                    "stream": columns._or_id(columns.ints(col("stream")), tids[rows])}
    for axis, name in enumerate("xyz"):
        out[f"grid_{name}"] = columns.ints(_grid(grid, axis))
    for axis, name in enumerate("xyz"):
        out[f"block_{name}"] = columns.ints(_grid(block, axis))
    out.update({"registers": columns.ints(col("registers per thread")),
                "shared_memory": columns.ints(col("shared memory")),
                "blocks_per_sm": columns.floats(col("blocks per SM")),
                "warps_per_sm": columns.floats(col("warps per SM")),
                "occupancy": columns.floats(col("est. achieved occupancy %")), "nbytes": columns.ints(col("bytes")),
                "bandwidth": columns.floats(col("memory bandwidth (GB/s)"))})
    return out


def _work_table(args: dict[str, pa.Array], kinds: np.ndarray) -> Columns | None:
    candidates = np.flatnonzero(np.isin(kinds, (Kind.CPU_OP, Kind.USER_ANNOTATION, Kind.KERNEL)))
    at = pa.array(candidates)
    flops, kflop, gb = (_floats(args[k].take(at)) for k in ("flops", "kernel_flop", "kernel_num_gb"))
    has = ~(np.isnan(flops) & np.isnan(kflop) & np.isnan(gb))
    if not has.any():
        return None
    return {"row": candidates[has].astype(np.int64), "flops": columns.floats(flops[has]),
            "kernel_flop": columns.floats(kflop[has]), "kernel_num_gb": columns.floats(gb[has])}


def _int_table(args: dict[str, pa.Array], rows: np.ndarray, keys: tuple[str, ...],
               names: tuple[str, ...]) -> Columns:
    at = pa.array(rows)
    out: Columns = {"row": rows.astype(np.int64)}
    for key, name in zip(keys, names):
        out[name] = columns.ints(_floats(args[key].take(at)))
    return out


def build_arrow(data: Any, bounds: list[tuple[int, int]], stats: dict[str, float]) -> ArrowBuilder:
    """Every chunk through Arrow, or through the current path where Arrow cannot take it."""
    builder = ArrowBuilder()
    for start, stop in bounds:
        chunk = bytes(data[start:stop])
        table = arrow_events(chunk)
        if table is not None:
            builder.add_table(table)
            continue
        stats["fallback_chunks"] += 1
        builder.add(read.decode_text(chunk))
    return builder


def build_current(data: Any, bounds: list[tuple[int, int]]) -> columns.ModelBuilder:
    """The part parser's loop (``columns._build_text`` over ``read.text_chunks``), over the given chunks."""
    builder = columns.ModelBuilder()
    for start, stop in bounds:
        builder.add(read.decode_text(memoryview(data)[start:stop]))
    return builder


def compare(ours: TraceModel, theirs: TraceModel) -> list[str]:
    """What differs between two models: the string table, long texts, metadata, each table's columns."""
    diffs = []
    if ours.strings != theirs.strings:
        diffs.append(f"strings ({len(ours.strings)} against {len(theirs.strings)})")
    if dict(ours.long_texts) != dict(theirs.long_texts):
        diffs.append("long_texts")
    if ours.meta != theirs.meta:
        diffs.append("meta")
    for name, cols in theirs.tables.items():
        for col, want in cols.items():
            got = ours.tables[name][col]
            floating = want.dtype.kind == "f"
            if got.dtype != want.dtype or not np.array_equal(got, want, equal_nan=floating):
                diffs.append(f"{name}.{col}")
    return diffs


def _cpu(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t = time.process_time()
        out = fn()
        best = min(best, time.process_time() - t)
    return best, out


def probe(path: Path, repeat: int, data: bytes | None = None, size: int = read.TEXT_CHUNK_BYTES,
          timings: bool = True) -> dict[str, Any]:
    """Identity and CPU seconds per 100 MB of event text for one trace (decode-only figures with ``timings``)."""
    data = read.decompress(path.read_bytes(), path.name) if data is None else data
    found = read.outline_by_text(data)
    if found is None:
        return {"trace": str(path), "skipped": "no text layout (the loader decodes it the usual way)"}
    doc, lo, hi = found
    bounds = list(chunk_bounds(data, lo, hi, size))
    per_100mb = 1e8 / max(1, hi - lo)
    current_s, current = _cpu(lambda: build_current(data, bounds).finish(doc, path.name), repeat)
    stats = {"fallback_chunks": 0.0}
    arrow_s, arrow = _cpu(lambda: build_arrow(data, bounds, stats).finish(doc, path.name), repeat)
    out = {
        "trace": str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path), "mb": (hi - lo) / 1e6,
        "events": current.n_events, "chunks": len(bounds), "fallback_chunks": int(stats["fallback_chunks"] / repeat),
        "differs": compare(arrow, current), "current": current_s * per_100mb, "arrow": arrow_s * per_100mb,
    }
    if timings:
        out.update({key: seconds * per_100mb for key, seconds in decode_timings(data, bounds, repeat).items()})
    return out


def decode_timings(data: Any, bounds: list[tuple[int, int]], repeat: int) -> dict[str, float]:
    """CPU seconds of the decode steps alone over the same chunks: msgspec typed (what the current path spends
    decoding), msgspec untyped (dicts and lists: the brief's floor), Arrow's rewrite + parse + list check."""
    typed_s, _ = _cpu(lambda: [read.decode_text(memoryview(data)[a:b]) for a, b in bounds], repeat)
    untyped = msgspec.json.Decoder()
    try:
        floor_s, _ = _cpu(lambda: [untyped.decode(b"[" + data[a:b] + b"]") for a, b in bounds], repeat)
    except msgspec.DecodeError:  # not JSON as written (bare NaN): only the loader's repair reads it
        floor_s = float("nan")
    parse_s, _ = _cpu(lambda: [arrow_events(bytes(data[a:b])) for a, b in bounds], repeat)
    return {"typed_decode": typed_s, "floor_untyped": floor_s, "arrow_parse_only": parse_s}


# Odd inputs the current path handles, each planted once into the first events of a real trace: (what, pattern,
# replacement) for ``re.sub(..., count=1)``.
ODD_CASES: list[tuple[str, bytes, bytes]] = [
    ('"dur": "N/A"', rb'"dur": [0-9.]+', b'"dur": "N/A"'),
    ("a number written as a string", rb'"ts": ([0-9.]+)', rb'"ts": "\1"'),
    ("bare NaN (repaired by the loader)", rb'"dur": [0-9.]+', b'"dur": NaN'),
    ("bare -Infinity for an External id", rb'"External id": [0-9]+', b'"External id": -Infinity'),
    ("bare inf (lower case) for a dur", rb'"dur": [0-9.]+', b'"dur": inf'),
    ("a name of 20,000 characters (limits.py)", rb'"name": "aten::[a-z_]+"', b'"name": "' + b"y" * 20000 + b'"'),
    ("an event without ts, dur and args", rb'"ts": [0-9.]+, "dur": [0-9.]+,\s*"args": \{[^}]*\}', b'"x": 1'),
    ("a textual tid among numbers", rb'"tid": 639', b'"tid": "stream 7"'),
    ("a float tid", rb'"tid": 639', b'"tid": 639.0'),
    ("a pid beyond 2**62 (stored as text)", rb'"pid": 562', b'"pid": 9223372036854775000'),
    ("Input Dims three deep (a TensorList)", rb'"Input Dims": \[[^\n]*?\]\]', b'"Input Dims": [[[1, 2], [3]], []]'),
    ("an escaped quote in Input type", rb'"Input type": \[', b'"Input type": ["a\\"b", '),
    ("Input Dims written without spaces", rb'"Input Dims": \[[^\n]*?\]\]', b'"Input Dims": [[1,2],[3]]'),
    ("a duplicate key", rb'"dur": ', b'"dur": 1.5, "dur": '),
    ("a \\u escape in a name", rb'"name": "aten::', b'"name": "caf\\u00e9::'),
    ("invalid UTF-8 in a name", rb'"name": "aten::', b'"name": "\xff::'),
    ("an entry that is not an object", rb'\},\n  \{', b'},\n  "not an event",\n  {'),
    ("args that is a list", rb'"args": \{[^}]*\}', b'"args": [1, 2]'),
]


def odd_probe(source: Path, events: int = 400) -> list[dict[str, Any]]:
    """Both paths on the first ``events`` events of ``source`` with each odd input planted once."""
    import re

    data = read.decompress(source.read_bytes(), source.name)
    _, lo, hi = read.outline_by_text(data) or (None, 0, 0)
    cuts = [m.start() for m in read._SEPARATOR.finditer(data, lo, hi)]
    head, body, tail = data[:lo], data[lo:cuts[events]], data[hi:]
    out = []
    for what, pattern, repl in [("none (the events as written)", rb"^", b""), *ODD_CASES]:
        planted, n = re.subn(pattern, lambda m, r=repl: m.expand(r) if b"\\1" in r else r, body, count=1)
        if n != 1:
            out.append({"case": what, "error": "pattern not found"})
            continue
        row = probe(source, 1, head + planted + tail, size=1 << 20, timings=False)
        out.append({"case": what, "fallback_chunks": row["fallback_chunks"], "chunks": row["chunks"],
                    "identical": not row["differs"], "differs": row["differs"]})
    return out


def _duckdb_type(t: pa.DataType) -> str:
    if pa.types.is_list(t):
        return _duckdb_type(t.value_type) + "[]"
    if pa.types.is_struct(t):  # DuckDB's field names ignore case: "bytes" and "Bytes" are one field there
        return "STRUCT(" + ", ".join(f'"{f.name}" {_duckdb_type(f.type)}' for f in t
                                     if f.name not in ("external id", "Input dims", "bytes")) + ")"
    return {pa.float64(): "DOUBLE", pa.int64(): "BIGINT", pa.string(): "VARCHAR"}[t]


def other_decoders(data: Any, lo: int, hi: int) -> dict[str, float]:
    """Decode-only CPU seconds per 100 MB of DuckDB's ``read_json`` and Polars' ``read_ndjson`` (one thread each,
    the same schema, values that do not fit it nulled), where they are importable: neither is a dependency; this
    says what they would save (``pip install --target DIR duckdb polars`` and ``PYTHONPATH=DIR``)."""
    import tempfile

    out: dict[str, float] = {}
    per_100mb = 1e8 / max(1, hi - lo)
    with tempfile.NamedTemporaryFile(suffix=".json") as fh:
        fh.write(b"[")
        fh.write(memoryview(data)[lo:hi])
        fh.write(b"]")
        fh.flush()
        try:
            import duckdb
        except ImportError:
            pass
        else:
            con = duckdb.connect(config={"threads": 1})
            cols = "{" + ", ".join(f"'{f.name}': '{_duckdb_type(f.type)}'" for f in SCHEMA) + "}"
            query = (f"select * from read_json('{fh.name}', format='array', columns={cols}, ignore_errors=true, "
                     "maximum_object_size=1000000000)")
            out["duckdb_decode"] = _cpu(lambda: con.sql(query).arrow().read_all(), 1)[0] * per_100mb
    try:
        import polars as pl
    except ImportError:
        return out
    text = bytes(data[lo:hi]).replace(KINETO_SEPARATOR, b"}\x1e{").translate(
        bytes(32 if b in (10, 13) else 10 if b == 0x1E else b for b in range(256)))
    schema = pl.Schema(pa.schema(SCHEMA))  # type: ignore[attr-defined]
    out["polars_decode"] = _cpu(lambda: pl.read_ndjson(text, schema=schema, ignore_errors=True), 1)[0] * per_100mb
    return out


def traces(samples: bool) -> list[Path]:
    found = [Path(p) for p in sys.argv[1:] if not p.startswith("-") and os.path.exists(p)]
    if samples:
        found += sorted(ROOT.glob("samples/**/*.pt.trace.json*")) + sorted(ROOT.glob("tests/data/**/*.pt.trace.json*"))
    return found


def main() -> None:
    os.environ.setdefault("POLARS_MAX_THREADS", "1")
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace", nargs="*")
    parser.add_argument("--samples", action="store_true", help="every trace in samples/ and tests/data/")
    parser.add_argument("--odd", action="store_true", help="planted odd inputs")
    parser.add_argument("--repeat", type=int, default=1, help="best of N timings")
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--others", action="store_true",
                        help="also DuckDB's and Polars' decode, where importable (POLARS_MAX_THREADS=1 is set)")
    opts = parser.parse_args()
    results: dict[str, Any] = {"load_before": os.getloadavg(), "traces": [], "odd": []}
    for path in traces(opts.samples):
        row = probe(path, opts.repeat)
        if opts.others:
            data = read.decompress(path.read_bytes(), path.name)
            _, lo, hi = read.outline_by_text(data) or (None, 0, 0)
            row.update(other_decoders(data, lo, hi))
        results["traces"].append(row)
        print(json.dumps(row), flush=True)
    if opts.odd:
        source = ROOT / "tests/data/h200/transformer_bf16/vm_562.1795654446295758078.pt.trace.json.gz"
        for row in odd_probe(source):
            results["odd"].append(row)
            print(json.dumps(row), flush=True)
    results["load_after"] = os.getloadavg()
    print("load average before / after:", results["load_before"], results["load_after"])
    if opts.json:
        Path(opts.json).parent.mkdir(parents=True, exist_ok=True)
        Path(opts.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
