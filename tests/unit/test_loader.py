"""The loader on every real trace (counts equal a plain JSON count) and on hand-made odd and broken files."""

from __future__ import annotations

import gzip
import json
import math
import os
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from tb_plugin.loader import TraceLoadError, load_trace
from tb_plugin.model import Kind, TraceModel, ids
from tb_plugin.model.tables import load, save
from tests.conftest import REAL_TRACES, cpu_op, distinct_trace_files, real_trace_files, sample_trace_files, write_trace


def plain_counts(path: Path) -> tuple[Counter[tuple[str, str | None]], int]:
    """(ph, cat) counts of non-metadata events, and the number of metadata events, with the stdlib json."""
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rb") as fh:
        doc = json.load(fh)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    counts = Counter((e.get("ph"), e.get("cat")) for e in events if e.get("ph") != "M")
    return counts, sum(1 for e in events if e.get("ph") == "M")


def model_counts(model: TraceModel) -> tuple[Counter[tuple[str, str | None]], int]:
    counts: Counter[tuple[str, str | None]] = Counter()
    for table in ("events", "flows"):
        cols = model[table]
        for ph, cat in zip(cols["ph"].tolist(), cols["cat"].tolist()):
            counts[(model.strings[ph], model.text(cat))] += 1
    return counts, len(model["metadata_events"]["name"])


REAL = distinct_trace_files() + sample_trace_files()


def test_real_traces_are_present() -> None:
    assert REAL_TRACES.is_dir(), f"real traces missing at {REAL_TRACES}"
    assert len(real_trace_files()) >= 10


@pytest.mark.parametrize("path", REAL, ids=[str(p.relative_to(p.parents[2])) for p in REAL])
def test_every_event_of_real_traces_is_kept(path: Path) -> None:
    model = load_trace(str(path))
    assert model_counts(model) == plain_counts(path)
    ev = model["events"]
    assert np.isfinite(ev["ts"]).all()
    # Kernels carry their launch correlation, and each kernel row has a device_events row.
    kernels = np.flatnonzero(ev["kind"] == Kind.KERNEL)
    assert len(kernels) > 0 or "cpu" in path.as_posix()
    assert set(model["device_events"]["row"].tolist()) >= set(kernels.tolist())
    if len(kernels):
        assert (ev["correlation"][kernels] >= 0).all()


def test_h200_kernel_args_match_the_json(real_traces: Path) -> None:
    path = next((real_traces / "h200" / "transformer_bf16").glob("*.gz"))
    with gzip.open(path) as fh:
        raw = [e for e in json.load(fh)["traceEvents"] if e.get("cat") == "kernel"]
    model = load_trace(str(path))
    dev = model["device_events"]
    ev = model["events"]
    is_kernel = ev["kind"][dev["row"]] == Kind.KERNEL
    assert int(is_kernel.sum()) == len(raw)
    assert dev["grid_x"][is_kernel].sum() == sum(e["args"]["grid"][0] for e in raw)
    assert dev["registers"][is_kernel].sum() == sum(e["args"]["registers per thread"] for e in raw)
    assert math.isclose(ev["dur"][dev["row"][is_kernel]].sum(), sum(e["dur"] for e in raw), rel_tol=1e-12)
    occ = [e["args"]["est. achieved occupancy %"] for e in raw]
    assert math.isclose(np.nansum(dev["occupancy"][is_kernel]), sum(occ), rel_tol=1e-9)


def test_synthetic_trace_columns(tmp_path: Path) -> None:
    events = [
        cpu_op("ProfilerStep#3", 0, 100, **{"External id": 1}),
        cpu_op("aten::mm", 10, 50, **{"External id": 2, "Input Dims": [[2, 3], [3, 4]], "Sequence number": 7}),
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 100, "tid": 1, "ts": 20, "dur": 5,
         "args": {"External id": 2, "correlation": 99}},
        {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 30, "dur": 8,
         "args": {"External id": 2, "correlation": 99, "device": 0, "stream": 7, "grid": [4, 2, 1],
                  "block": [128, 1, 1], "est. achieved occupancy %": 50}},
        {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 100, "tid": 1, "ts": 12, "s": "t",
         "args": {"Device Type": 1, "Device Id": 0, "Addr": 4096, "Bytes": 512, "Total Allocated": 512,
                  "Total Reserved": 2097152}},
        {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 99, "pid": 100, "tid": 1, "ts": 20},
        {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 99, "pid": 0, "tid": 7, "ts": 30, "bp": "e"},
        {"ph": "M", "name": "thread_name", "pid": 100, "tid": 1, "args": {"name": "main thread"}},
    ]
    path = write_trace(tmp_path / "w.1.pt.trace.json", events, deviceProperties=[{"id": 0, "name": "G"}])
    m = load_trace(str(path))
    ev = m["events"]
    assert [m.strings[c] for c in ev["name"]] == ["ProfilerStep#3", "aten::mm", "cudaLaunchKernel", "gemm",
                                                   "[memory]"]
    assert ev["kind"].tolist() == [Kind.CPU_OP, Kind.CPU_OP, Kind.RUNTIME, Kind.KERNEL, Kind.MEMORY]
    assert ev["correlation"].tolist() == [-1, -1, 99, 99, -1]
    ops = m["ops"]
    assert m.text(int(ops["input_dims"][1])) == "[[2, 3], [3, 4]]"  # verbatim and ops["seq"].tolist() == [-1, 7]
    dev = m["device_events"]
    assert (dev["grid_x"][0], dev["block_x"][0], dev["stream"][0], dev["occupancy"][0]) == (4, 128, 7, 50.0)
    mem = m["memory"]
    assert (mem["addr"][0], mem["bytes"][0], mem["total_reserved"][0]) == (4096, 512, 2097152)
    assert m["flows"]["id"].tolist() == [99, 99]
    assert m.text(int(m["metadata_events"]["value"][0])) == "main thread"
    assert m.meta["deviceProperties"] == [{"id": 0, "name": "G"}]


def test_saved_model_maps_back_identically(tmp_path: Path, real_traces: Path) -> None:
    path = next((real_traces / "h200" / "resnet18_workers0").glob("*.gz"))
    model = load_trace(str(path))
    save(model, tmp_path / "entry")
    back = load(tmp_path / "entry")
    assert back.strings == model.strings and back.meta == json.loads(json.dumps(model.meta))
    for name, cols in model.tables.items():
        for col, values in cols.items():
            np.testing.assert_array_equal(back[name][col], values, err_msg=f"{name}.{col}")


# ---- tolerated oddities ---------------------------------------------------------------------------------------------

def test_non_json_number_tokens_are_tolerated_per_field(tmp_path: Path) -> None:
    text = (b'{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 3, "tid": 7, "ts": 5, "dur": 2, '
            b'"args": {"blocks per SM": Infinity, "est. achieved occupancy %": NaN, "correlation": 3}},'
            b'{"ph": "X", "cat": "kernel", "name": "k2", "pid": 3, "tid": 7, "ts": 8, "dur": 1, '
            b'"args": {"blocks per SM": inf, "est. achieved occupancy %": nan, "device": N/A}},'
            b'{"ph": "X", "cat": "kernel", "name": "k3", "pid": 0, "tid": 7, "ts": 9, "dur": 1, '
            b'"args": {"blocks per SM": "inf", "est. achieved occupancy %": "N/A", "grid": "bad", "device": 0}}]}')
    m = load_trace(str(write_trace(tmp_path / "t.pt.trace.json", raw=text)))
    dev = m["device_events"]
    assert np.isinf(dev["blocks_per_sm"]).tolist() == [True, True, True]
    assert np.isnan(dev["occupancy"]).all()
    # a missing or unreadable device arg falls back to the pid, which Kineto writes as the device
    assert dev["device"].tolist() == [3, 3, 0] and dev["grid_x"].tolist() == [-1, -1, -1]
    assert m["events"]["correlation"].tolist() == [3, -1, -1]


@pytest.mark.parametrize("number", ["9" * 400, "-" + "9" * 400, "1e400", "-1e999", "9" * 5000])
def test_numbers_beyond_float_range_cost_only_their_field(tmp_path: Path, number: str) -> None:
    """A 400-digit ``dur`` (or ``ts``, ``pid``, an id) is as unusable as ``1e400``: that field of that event is
    missing, the file loads (it used to fail with "internal error ... please report it")."""
    events = (f'{{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 0, "dur": {number}, '
              f'"args": {{"External id": {number}}}}}, '
              f'{{"ph": "X", "cat": "cpu_op", "name": "b", "pid": {number}, "tid": 1, "ts": {number}, "dur": 5}}, '
              '{"ph": "X", "cat": "cpu_op", "name": "c", "pid": 1, "tid": 1, "ts": 2, "dur": 3, '
              '"args": {"note": "1e400 in a string stays text"}}')
    m = load_trace(str(write_trace(tmp_path / "t.pt.trace.json", raw=f'{{"traceEvents": [{events}]}}'.encode())))
    ev = m["events"]
    assert [m.strings[c] for c in ev["name"]] == ["a", "b", "c"]
    assert math.isnan(ev["dur"][0]) and ev["dur"][1:].tolist() == [5.0, 3.0]
    assert ev["ts"][0] == 0.0 and math.isnan(ev["ts"][1]) and ev["ts"][2] == 2.0
    assert ev["external_id"].tolist() == [-1, -1, -1]
    assert ids.is_text(ev["pid"][1:2])[0] and ev["pid"][0] == ev["pid"][2] == 1  # an id beyond 2**62 is text


def test_wrong_field_types_are_tolerated(tmp_path: Path) -> None:
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "a", "pid": "100", "tid": "main", "ts": "5", "dur": None,
         "args": {"External id": "12", "Input Dims": "not a list", "Sequence number": [1]}},
        {"ph": "X", "cat": "cpu_op", "name": 42, "pid": 100, "tid": 1, "ts": 6, "dur": 1, "args": "oops"},
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 7, "dur": 1},  # no args, no device
        "not an event",
    ]
    m = load_trace(str(write_trace(tmp_path / "t.pt.trace.json", events)))
    ev = m["events"]
    assert [m.strings[c] for c in ev["name"]] == ["a", "42", "k"]
    assert ev["ts"].tolist() == [5.0, 6.0, 7.0] and math.isnan(ev["dur"][0])
    assert ev["external_id"].tolist() == [12, -1, -1]
    assert ev["pid"][0] == 100 and ids.is_text(ev["tid"][:1])[0] and ids.display(m.strings, int(ev["tid"][0])) == "main"
    assert m.text(int(m["ops"]["input_dims"][0])) == '"not a list"' and m["ops"]["seq"][0] == -1
    assert m["device_events"]["device"].tolist() == [0]  # no device arg: the pid (Kineto's device) stands in


def test_empty_trace_stays_loadable(tmp_path: Path) -> None:
    """``traceEvents: []`` is a valid trace with nothing in it, not a broken file (only entries that are all unusable
    fail)."""
    assert load_trace(str(write_trace(tmp_path / "e.1.pt.trace.json", []))).n_events == 0
    assert load_trace(str(write_trace(tmp_path / "a.1.pt.trace.json", raw=b"[]"))).n_events == 0


def test_some_unusable_events_cost_only_themselves(tmp_path: Path) -> None:
    events = [cpu_op("aten::add", 0, 3), {"ph": "X", "cat": "kernel", "name": 5, "ts": "x", "dur": None}]
    m = load_trace(str(write_trace(tmp_path / "p.1.pt.trace.json", events)))
    assert m.n_events == 2 and np.isfinite(m["events"]["ts"]).sum() == 1


def test_bare_array_is_a_trace(tmp_path: Path) -> None:
    events = [cpu_op("aten::add", 0, 3), cpu_op("aten::mul", 4, 3)]
    path = write_trace(tmp_path / "cpu.pt.trace.json", raw=json.dumps(events).encode())
    assert load_trace(str(path)).n_events == 2


def test_control_characters_in_strings_are_tolerated(tmp_path: Path) -> None:
    raw = b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a\tb\x01", "pid": 1, "tid": 1, "ts": 0, "dur": 1}]}'
    m = load_trace(str(write_trace(tmp_path / "c.pt.trace.json", raw=raw)))
    assert m.strings[int(m["events"]["name"][0])] == "a b "


def test_invalid_utf8_costs_only_the_odd_characters(tmp_path: Path) -> None:
    """Invalid UTF-8 in an event name, an args string and a top-level string: those bytes become U+FFFD."""
    raw = (b'{"traceName": "run\xff", "traceEvents": ['
           b'{"ph": "X", "cat": "cpu_op", "name": "ok", "pid": 1, "tid": 1, "ts": 0, "dur": 1},'
           b'{"ph": "X", "cat": "cpu_op", "name": "bad\xc3\x28name", "pid": 1, "tid": 1, "ts": 2, "dur": 1,'
           b' "args": {"Call stack": "f\xfe.py", "ignored": "\xff"}},'
           b'{"ph": "X", "cat": "cpu_op", "name": "caf\xc3\xa9", "pid": 1, "tid": 1, "ts": 4, "dur": 1}]}')
    for gz in (False, True):
        m = load_trace(str(write_trace(tmp_path / f"u{int(gz)}.pt.trace.json", raw=raw, gz=gz)))
        names = [m.strings[c] for c in m["events"]["name"].tolist()]
        assert names == ["ok", "bad\ufffd(name", "caf\u00e9"]
        assert m.text(int(m["ops"]["call_stack"][1])) == "f\ufffd.py"
        assert m.meta["traceName"] == "run\ufffd"


def test_invalid_utf8_beside_non_json_tokens(tmp_path: Path) -> None:
    raw = b'{"traceEvents": [{"ph": "X", "name": "n\xff", "ts": 0, "dur": NaN, "pid": 1, "tid": 1}], "x": "\xff"}'
    m = load_trace(str(write_trace(tmp_path / "t.pt.trace.json", raw=raw)))
    assert m.strings[int(m["events"]["name"][0])] == "n\ufffd" and math.isnan(m["events"]["dur"][0])


DEEP = b"[" * 200_000 + b"]" * 200_000


@pytest.mark.parametrize("where", ["whole_file", "an_event", "an_ignored_arg", "a_used_arg", "top_level_key"])
def test_deep_nesting_fails_with_a_reason(tmp_path: Path, where: str) -> None:
    raw = {
        "whole_file": DEEP,
        "an_event": b'{"traceEvents": [' + DEEP + b"]}",
        "an_ignored_arg": b'{"traceEvents": [{"ph": "X", "args": {"zz": ' + DEEP + b"}}]}",
        "a_used_arg": b'{"traceEvents": [{"ph": "X", "args": {"Input Dims": ' + DEEP + b"}}]}",
        "top_level_key": b'{"traceEvents": [], "foo": {"a": ' + DEEP + b"}}",
    }[where]
    path = write_trace(tmp_path / f"deep_{where}.1.pt.trace.json", raw=raw)
    with pytest.raises(TraceLoadError) as err:
        load_trace(str(path))
    message = str(err.value)
    assert message.startswith(path.name) and "nested too deeply" in message and "\n" not in message


def test_plain_json_inside_a_gz_name_is_read(tmp_path: Path) -> None:
    path = write_trace(tmp_path / "p.pt.trace.json.gz", [cpu_op("x", 0, 1)], gz=False)
    assert load_trace(str(path)).n_events == 1


# ---- broken files: a clear one-line reason naming the file ----------------------------------------------------------

BROKEN = {
    "empty": (b"", False, "the file is empty"),
    "truncated_gzip": (None, True, "gzip data is cut short"),
    "cut_json": (b'{"traceEvents": [{"ph": "X", "name": "a", "ts": 1', False, "JSON is cut short"),
    "not_gzip": (b"\x00\x01garbage bytes that are not gzip", True, "not gzip data"),
    "no_trace_events": (b'{"schemaVersion": 1, "events": []}', False, "not a Kineto trace: a JSON object without "
                        "'traceEvents'"),
    "not_json": (b"hello world", False, "not valid JSON"),
    "trace_events_not_a_list": (b'{"traceEvents": 5}', False, "not a Kineto trace: 'traceEvents' is not a list"),
    "array_of_arrays": (b"[[1, 2], [3]]", False, "not a Kineto trace: none of its 2 trace entries is an event"),
    "events_of_strings": (b'{"traceEvents": ["a", 1]}', False, "not a Kineto trace: none of its 2 trace entries"),
    "execution_trace": (b'{"schema": "1.1.1-chakra.0.0.4", "pid": 7, "nodes": [{"id": 1, "name": "[pytorch|profiler'
                        b'|execution_trace|thread]"}]}', False, "not a Kineto trace: a PyTorch execution trace"),
    "number": (b"5", False, "not a Kineto trace: the top level is neither an object nor a list"),
    "no_usable_ts": (b'{"traceEvents":[{"ph":"X","cat":"kernel","name":5,"ts":"x","dur":null}]}', False,
                     "no usable event: none of its 1 trace entries has a numeric timestamp"),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_broken_files_fail_with_a_reason(tmp_path: Path, case: str) -> None:
    raw, gz, reason = BROKEN[case]
    name = f"bad_{case}.1.pt.trace.json" + (".gz" if gz else "")
    if case == "truncated_gzip":
        good = gzip.compress(json.dumps({"traceEvents": [cpu_op("a", i, 1) for i in range(2000)]}).encode())
        raw = good[: len(good) // 2]
    path = tmp_path / name
    path.write_bytes(raw or b"")
    with pytest.raises(TraceLoadError) as err:
        load_trace(str(path))
    message = str(err.value)
    assert name in message and reason in message and "\n" not in message


def test_unreadable_file_fails_with_a_reason(tmp_path: Path) -> None:
    link = tmp_path / "gone.1.pt.trace.json"
    os.symlink(tmp_path / "missing-target", link)
    with pytest.raises(TraceLoadError, match=r"gone\.1\.pt\.trace\.json: cannot read the file"):
        load_trace(str(link))


def test_parallel_build_equals_sequential(real_traces: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tb_plugin.loader import columns

    monkeypatch.setattr(columns, "PARALLEL_MIN_EVENTS", 1000)
    monkeypatch.setattr(columns, "MIN_PART_EVENTS", 1000)
    path = next((real_traces / "h200" / "ddp_resnet50").glob("rank0.*.gz"))
    one, three = load_trace(str(path), parts=1), load_trace(str(path), parts=3)
    for name, cols in one.tables.items():
        for col, values in cols.items():
            other = three[name][col]
            if col in ("pid", "tid"):  # textual ids are string codes too
                values = [ids.display(one.strings, v) for v in values.tolist()]
                other = [ids.display(three.strings, v) for v in other.tolist()]
            elif values.dtype == np.int32:  # string codes: compare the strings
                values = [one.text(v) for v in values.tolist()]
                other = [three.text(v) for v in other.tolist()]
            np.testing.assert_array_equal(other, values, err_msg=f"{name}.{col}")


def test_long_names_are_shortened_alike_by_every_parallel_part(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Names over 8,192 characters are stored shortened, with the text as written beside (``long_texts``): a
    name in several parts' ranges is one code once merged, two names alike but for their end stay two, and the
    saved model maps the texts back."""
    from tb_plugin.loader import columns

    monkeypatch.setattr(columns, "PARALLEL_MIN_EVENTS", 1000)
    monkeypatch.setattr(columns, "MIN_PART_EVENTS", 1000)
    names = ["y" * 20_000 + "1", "y" * 20_000 + "2", "aten::mm"]
    events = [cpu_op(names[i % 3], i, 1) for i in range(3000)]
    path = write_trace(tmp_path / "w.1.pt.trace.json.gz", events)
    one, three = load_trace(str(path), parts=1), load_trace(str(path), parts=3)
    save(three, tmp_path / "saved")
    back = load(tmp_path / "saved")
    for model in (one, three, back):
        codes = model["events"]["name"]
        assert len(set(codes.tolist())) == 3
        assert [model.full_text(int(c)) for c in codes[:6]] == names * 2
        shown = model.strings[int(codes[0])]
        assert shown.startswith("y" * 8192 + "… [20,001 characters, #") and shown != model.strings[int(codes[1])]
        assert sorted(model.long_texts) == sorted({int(codes[0]), int(codes[1])})


def test_limits_fail_a_file_early_and_say_whether_the_failure_lasts(tmp_path: Path) -> None:
    """Over the memory left: refused by its size (plain JSON), or inflated no further than the bound (gzip), or by
    its number of events, none of it lasting (it may load elsewhere or later); over the ratio or not JSON: lasting
    (the parse cache remembers it); a file that cannot be read: not lasting."""
    from tb_plugin.loader import Limits

    events = [cpu_op(f"op{i}", i * 1.5, 1.25, **{"External id": i * 7919 % 10007}) for i in range(2000)]
    plain = write_trace(tmp_path / "a.1.pt.trace.json", events)
    packed = write_trace(tmp_path / "b.1.pt.trace.json.gz", events)
    memory = Limits(max_text_bytes=50_000, always_inflate_bytes=0, memory_bytes=150_000)
    cases = [
        (plain, memory, False, "a.1.pt.trace.json: too large for the memory available: its "
                               f"{plain.stat().st_size:,} bytes of JSON need about"),
        (packed, memory, False, "b.1.pt.trace.json.gz: too large for the memory available: it inflates to more "
                                "than 50,000 bytes of JSON, which need about three times that to load, and "
                                "150,000 bytes is available now"),
        (packed, Limits(max_events=1999), False, "b.1.pt.trace.json.gz: too many events for the memory available: "
                                                 "2,000, and at most 1,999 fit"),
        (packed, Limits(max_ratio=2, always_inflate_bytes=0), True, "b.1.pt.trace.json.gz: refused: its "),
        (write_trace(tmp_path / "c.1.pt.trace.json", raw=b"\x89PNG\r\n\x1a\n" + bytes(100)), Limits(), True,
         "c.1.pt.trace.json: not valid JSON: the file is neither an object nor an array"),
        (tmp_path / "gone.1.pt.trace.json", Limits(), False, "gone.1.pt.trace.json: cannot read the file"),
    ]
    for path, limits, lasting, reason in cases:
        with pytest.raises(TraceLoadError) as err:
            load_trace(str(path), limits=limits)
        assert str(err.value).startswith(reason) and err.value.lasting is lasting, str(err.value)
    assert load_trace(str(packed), limits=Limits(max_events=2000, max_text_bytes=10 << 20)).n_events == 2000
