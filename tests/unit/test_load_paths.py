"""The loader's fast paths give exactly what the usual ones give: the parse cache without pandas, gunzip in one
call, and parallel parts that split the trace's text instead of decoding the whole array first."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tb_plugin.loader as loader
from tb_plugin.loader import TraceLoadError, columns, load_trace, pages
from tb_plugin.loader.read import decompress, outline_by_text, split_text
from tb_plugin.model import ids
from tb_plugin.model.tables import TraceModel

DATA = Path(__file__).resolve().parents[1] / "data"
RANK0 = next((DATA / "h200" / "ddp_resnet50").glob("rank0.*.gz"))
REPO = Path(__file__).resolve().parents[2]


def assert_same_model(one: TraceModel, other: TraceModel) -> None:
    assert one.meta == other.meta
    for name, cols in one.tables.items():
        for col, values in cols.items():
            theirs = other[name][col]
            if col in ("pid", "tid"):  # textual ids are string codes too
                values = [ids.display(one.strings, v) for v in values.tolist()]
                theirs = [ids.display(other.strings, v) for v in theirs.tolist()]
            elif values.dtype == np.int32:  # string codes: compare the strings
                values = [one.text(v) for v in values.tolist()]
                theirs = [other.text(v) for v in theirs.tolist()]
            np.testing.assert_array_equal(theirs, values, err_msg=f"{name}.{col}")


@pytest.fixture
def text_split(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Parallel text parts for any size; records which path built each load."""
    taken: list[str] = []
    real = columns.build_text_parts

    def spy(*args: object, **kwargs: object) -> columns.ModelBuilder:
        taken.append("text")
        return real(*args, **kwargs)  # type: ignore[arg-type]

    real_fork = columns._fork_part

    def fork(*args: object) -> tuple[int, int]:
        taken.append("fork")
        return real_fork(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(loader, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(columns, "MIN_PART_BYTES", 1)
    monkeypatch.setattr(columns, "_fork_part", fork)
    monkeypatch.setattr(loader, "build_text_parts", spy)
    return taken


def test_text_parts_equal_the_usual_path_on_a_real_trace(text_split: list[str]) -> None:
    one = load_trace(str(RANK0), parts=1)
    three = load_trace(str(RANK0), parts=3)
    assert text_split == ["text", "fork", "fork"]
    assert three.n_events == one.n_events == 29630
    assert_same_model(one, three)


def kineto_text(events: list[dict[str, object]], **top: object) -> str:
    """Kineto's layout: one event over several lines, "},\\n  {" between events."""
    body = ",\n  ".join(json.dumps(ev, indent=2).replace("\n", "\n  ") for ev in events)
    head = "".join(f'  "{k}": {json.dumps(v)},\n' for k, v in top.items())
    return '{\n' + head + '  "traceEvents": [\n  ' + body + '\n  ],\n  "traceName": "x]y"\n}'


def events(n: int, nested: bool = False) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for i in range(n):
        args: dict[str, object] = {"External id": i}
        if nested:
            args["list"] = [{"a": i}, {"b": [i, i]}]  # objects inside an event: their separators are no split
        out.append({"ph": "X", "cat": "cpu_op", "name": f"op{i % 7}", "pid": 1, "tid": 2, "ts": 10.0 * i,
                    "dur": 5.0, "args": args})
    return out


def test_a_range_that_does_not_parse_falls_back_to_the_usual_parts(tmp_path: Path, text_split: list[str],
                                                                   usual_builds: list[int]) -> None:
    """Objects nested in an event's args, written across lines, hold separators too: a cut there fails the text
    parts, and the same bytes are built by the usual parallel path (not re-read and built in one process)."""
    usual = usual_builds
    evs = events(300)
    for ev in evs:  # one big nested list of objects per event: most cuts land inside one
        ev["args"] = {"External id": 1, "list": [{"k": i} for i in range(40)]}
    path = tmp_path / "w.1.pt.trace.json"
    path.write_text(kineto_text(evs))
    gz = tmp_path / "w.2.pt.trace.json.gz"  # inflated here: the parts gave its pages back, it is inflated again
    gz.write_bytes(gzip.compress(path.read_bytes()))
    for source in (path, gz):
        one, many = load_trace(str(source), parts=1), load_trace(str(source), parts=4)
        assert many.n_events == 300
        assert_same_model(one, many)
    assert text_split[0] == "text" and text_split.count("text") == 2 and usual == [1, 4, 1, 4]


@pytest.mark.parametrize("nested", [False, True])
def test_text_parts_equal_the_usual_path_on_synthetic_layouts(tmp_path: Path, text_split: list[str],
                                                              nested: bool) -> None:
    path = tmp_path / "w.1.pt.trace.json"
    path.write_text(kineto_text(events(400, nested), schemaVersion=1, deviceProperties=[{"name": "H100"}]))
    one, many = load_trace(str(path), parts=1), load_trace(str(path), parts=5)
    assert text_split == ["text", *["fork"] * 4]
    assert many.n_events == 400 and many.meta["traceName"] == "x]y"
    assert many.meta["deviceProperties"] == [{"name": "H100"}]
    assert_same_model(one, many)


def test_bare_tokens_are_repaired_in_each_part(tmp_path: Path, text_split: list[str]) -> None:
    evs = events(300)
    text = kineto_text(evs).replace('"dur": 5.0', '"dur": NaN', 3)
    path = tmp_path / "w.1.pt.trace.json"
    path.write_text(text)
    one, many = load_trace(str(path), parts=1), load_trace(str(path), parts=4)
    assert text_split == ["text", *["fork"] * 3]
    assert int(np.isnan(many["events"]["dur"]).sum()) == 3
    assert_same_model(one, many)


def test_given_back_pages_read_as_zeros_and_the_edges_stay() -> None:
    data = bytes(range(256)) * (64 << 10)  # 16 MiB of its own
    base = int(np.frombuffer(data, dtype=np.uint8).ctypes.data)
    start, stop = 1000, 5 * 4096 * 100 + 7
    dropped = pages.give_back(data, start, stop)
    first, last = -(-(base + start) // 4096) * 4096 - base, (base + stop) // 4096 * 4096 - base
    assert dropped == last - first > 0
    view = np.frombuffer(data, dtype=np.uint8)
    assert not view[first:last].any()
    expected = np.arange(len(data), dtype=np.int64) % 256
    np.testing.assert_array_equal(view[:first], expected[:first])  # the page holding ``start`` is kept
    np.testing.assert_array_equal(view[last:], expected[last:])
    assert pages.give_back(data, 10, 20) == 0  # no whole page inside


def test_text_parts_give_back_the_parents_copy_of_the_childrens_text(text_split: list[str]) -> None:
    """After the build the parent's text reads as zeros wherever a child built it (whole pages): each page lived
    in one process only, the one that decoded it. The model is still the usual path's."""
    data = decompress(RANK0.read_bytes(), RANK0.name)
    _, lo, hi = outline_by_text(data) or (None, 0, 0)
    builder = columns.build_text_parts(data, lo, hi, None, 3, give_back=True)
    assert text_split == ["fork", "fork"] and builder.n_events == 29630
    view = np.frombuffer(data, dtype=np.uint8)
    second = split_text(data, lo, hi, 3, columns.staggered(3))[1]
    inside = view[second[0] + 4096:second[1] - 4096]
    assert len(inside) > 1 << 20 and not inside.any()


def test_split_text_cuts_only_at_separators() -> None:
    data = kineto_text(events(50)).encode()
    doc_and_range = outline_by_text(data)
    assert doc_and_range is not None
    doc, lo, hi = doc_and_range
    assert doc.traceName == "x]y" and data[lo:lo + 1] == b"{" and data[hi - 1:hi] == b"}"
    ranges = split_text(data, lo, hi, 4)
    assert len(ranges) == 4 and ranges[0][0] == lo and ranges[-1][1] == hi
    decoded = [json.loads(b"[" + data[a:b] + b"]") for a, b in ranges]
    assert sum(len(d) for d in decoded) == 50 and decoded[0][0]["name"] == "op0"
    # compact JSON has no line breaks between events: nothing to cut at, one range
    compact = json.dumps({"traceEvents": events(50)}).encode()
    found = outline_by_text(compact)
    assert found is not None and len(split_text(compact, found[1], found[2], 4)) == 1


def test_gunzip_reads_every_member_and_never_trusts_the_trailer() -> None:
    text = kineto_text(events(2000)).encode()
    single = gzip.compress(text)
    assert decompress(single, "t.json.gz") == text
    # two members whose last one has the size of the first: the trailer's size matches, its CRC does not
    a, b = text[:len(text) // 2], text[len(text) // 2:]
    double = gzip.compress(a) + gzip.compress(b)
    assert decompress(double, "t.json.gz") == a + b
    # a trailer that says 10 bytes of what inflates to 200 kB: inflated within the bounds, not the trailer's word
    # (which only makes the data corrupt), and said so in one line
    lying = single[:-4] + (10).to_bytes(4, "little")
    with pytest.raises(TraceLoadError, match=r"^t\.json\.gz: the gzip data is corrupt \("):
        decompress(lying, "t.json.gz")
    flipped = bytearray(single)
    flipped[len(single) // 2] ^= 0xFF
    with pytest.raises(TraceLoadError, match=r"^t\.json\.gz: the gzip data is corrupt \("):
        decompress(bytes(flipped), "t.json.gz")


def test_every_saved_column_type_maps_to_numpy_without_pyarrow_pandas_shim() -> None:
    """``DataType.to_pandas_dtype`` imports pandas on some pyarrow builds (25.x: 0.55 s on the 16-core machine,
    caught by py-spy in the server's first model opening); the parse cache's reader looks every column type of the
    model up instead, so that fallback never runs for a model."""
    import pyarrow as pa

    from tb_plugin.model.tables import _NUMPY_DTYPES, SCHEMAS

    for table, cols in SCHEMAS.items():
        for col, dtype in cols.items():
            assert _NUMPY_DTYPES.get(pa.from_numpy_dtype(np.dtype(dtype))) == np.dtype(dtype), (table, col)


def test_parse_cache_round_trip_does_not_import_pandas(tmp_path: Path) -> None:
    """pyarrow's pa.array and to_numpy import pandas (0.3-0.5 s) on first use: the loader process and the server
    must not pay that to write and map a parse."""
    code = (
        "import sys, numpy as np\n"
        "from tb_plugin.loader import load_trace\n"
        "from tb_plugin.model.tables import save, load\n"
        f"m = load_trace({str(RANK0)!r})\n"
        f"save(m, {str(tmp_path / 'entry')!r})\n"
        f"back = load({str(tmp_path / 'entry')!r})\n"
        "assert 'pandas' not in sys.modules, 'pandas was imported'\n"
        "for t, cols in m.tables.items():\n"
        "    for c, v in cols.items():\n"
        "        w = back[t][c]\n"
        "        assert w.dtype == v.dtype and np.array_equal(v, w, equal_nan=True), (t, c)\n"
        "assert back.strings == m.strings and back.meta == m.meta and back.n_events == 29630\n"
        "assert not back['events']['ts'].flags.writeable\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=str(REPO),
                            env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]


def test_a_span_turns_ready_on_the_workers_answer_not_its_exit(tmp_path: Path) -> None:
    """A loader process answers, then frees the inflated trace (seconds for gigabytes): the span must not wait for
    that. Here the "worker" has answered and would sleep a minute before exiting; finishing the job makes the span
    ready at once and stops the process (killed, not exited)."""
    import multiprocessing
    import time

    from tb_plugin.catalog.catalog import TraceFile
    from tb_plugin.jobs.cache import ParseCache
    from tb_plugin.jobs.scheduler import LOADING, READY, LoadScheduler, _Job
    from tb_plugin.model.tables import save

    scheduler = LoadScheduler(ParseCache(tmp_path / "cache"), max_workers=1)
    try:
        entry = tmp_path / "cache" / "entry"
        built = scheduler.cache.staging()  # written as a loader process writes an entry: built, sealed, renamed
        save(load_trace(str(RANK0)), built)
        scheduler.cache.publish(built, entry)
        ctx = multiprocessing.get_context("spawn")
        recv, send = ctx.Pipe(duplex=False)
        process = ctx.Process(target=time.sleep, args=(60,), daemon=True)
        process.start()
        send.send(("ok", {"events": 29630}))
        joined: list[object] = []
        process.join = lambda timeout=None: joined.append(timeout)  # type: ignore[method-assign]
        file = TraceFile(run="r", worker="w", span="1", url=str(RANK0), size=1, mtime=0.0)
        job = _Job(file=file, entry=entry, state=LOADING, process=process, conn=recv)
        scheduler._finish(job)
        assert job.state == READY and job.model is not None and job.model.n_events == 29630
        assert joined == []  # never waited for the process
        multiprocessing.process.BaseProcess.join(process, 10)
        assert process.exitcode is not None and process.exitcode < 0  # stopped, not exited by itself
    finally:
        scheduler.close()


def test_a_part_that_dies_fails_the_parallel_build_and_the_others_are_waited_for(
        text_split: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The parent reads every part's pipe on a thread (``columns._Drain``); a part whose process ends without an
    answer (here: its build raises in the child) fails the build as ParallelBuildFailed, and no child is left
    unwaited. The loader then builds the file in one process: the model is the usual one."""
    data = decompress(RANK0.read_bytes(), RANK0.name)
    _, lo, hi = outline_by_text(data) or (None, 0, 0)
    real_build = columns._build_text
    parent = os.getpid()

    def dies_in_the_child(*args: Any, **kwargs: Any) -> columns.ModelBuilder:
        if os.getpid() != parent and args[1] > lo:  # the last part's child
            ranges = split_text(data, lo, hi, 3, columns.staggered(3))
            if args[1] == ranges[-1][0]:
                raise MemoryError("killed")
        return real_build(*args, **kwargs)

    forked: list[int] = []
    spied_fork = columns._fork_part

    def fork(build: Any) -> tuple[int, int]:
        pid, fd = spied_fork(build)
        forked.append(pid)
        return pid, fd

    monkeypatch.setattr(columns, "_build_text", dies_in_the_child)
    monkeypatch.setattr(columns, "_fork_part", fork)
    with pytest.raises(columns.ParallelBuildFailed):
        columns.build_text_parts(data, lo, hi, None, 3)
    assert text_split == ["fork", "fork"] and len(forked) == 2
    for pid in forked:  # every forked part was waited for
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
    assert load_trace(str(RANK0), parts=3).n_events == 29630
