"""Inflating while the parts parse (``loader.stream``) gives exactly the usual path's model, and anything unusual
sends the file to the usual path, which says what is wrong with it."""

from __future__ import annotations

import gzip
import itertools
import mmap
import os
import random
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tb_plugin.loader as loader
from tb_plugin.loader import Limits, TraceLoadError, columns, load_trace, pages, read, stream
from tests.unit.test_load_paths import RANK0, assert_same_model, events, kineto_text


@pytest.fixture
def streamed(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The streamed path for any size; records its outcomes and the parts it forked."""
    seen: dict[str, Any] = {"ok": 0, "failed": [], "forked": []}
    real, real_fork = stream.stream_parts, stream.fork_worker

    def spy(*args: Any, **kwargs: Any) -> Any:
        try:
            out = real(*args, **kwargs)
        except columns.ParallelBuildFailed as err:
            seen["failed"].append(str(err))
            raise
        seen["ok"] += 1
        return out

    def fork(build: Any) -> tuple[int, int]:
        pid, fd = real_fork(build)
        seen["forked"].append(pid)
        return pid, fd

    monkeypatch.setattr(stream, "STREAM_MIN_BYTES", 0)
    monkeypatch.setattr(stream, "_JOB_MIN", 32 << 10)  # the test traces' text in many jobs
    monkeypatch.setattr(stream, "_JOB_MAX", 32 << 10)
    monkeypatch.setattr(stream, "stream_parts", spy)
    monkeypatch.setattr(stream, "fork_worker", fork)
    return seen


def all_waited_for(pids: list[int]) -> bool:
    for pid in pids:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            continue
        return False
    return True


@pytest.mark.parametrize("small", [True, False])
def test_streamed_parts_equal_the_usual_path_on_a_real_trace(streamed: dict[str, Any], small: bool,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Small: jobs of 64 KB from pieces of 64 KB, and at most 1 MB of text not yet parsed (the loader waits for
    the parts): ~180 jobs; else the jobs' sizes as loads have them: the trace's text (12 MB) in jobs of 4 MB."""
    ahead: list[int] = []
    if not small:
        monkeypatch.setattr(stream, "_JOB_MIN", 4 << 20)
        monkeypatch.setattr(stream, "_JOB_MAX", 64 << 20)
    else:
        monkeypatch.setattr(stream, "_PIECE", 64 << 10)
        monkeypatch.setattr(stream, "_JOB_MIN", 64 << 10)
        monkeypatch.setattr(stream, "_JOB_MAX", 64 << 10)
        monkeypatch.setattr(stream, "_RESIDENT_MIN", 1 << 20)
        real_post = stream._Loader.post

        def post(self: Any, hi: int | None = None) -> None:
            if self.merged < len(self.starts):
                ahead.append(self.size - self.starts[self.merged])
            real_post(self, hi)

        monkeypatch.setattr(stream._Loader, "post", post)
    reserved: list[tuple[int, int]] = []  # (events absorbed, events reserved for)
    real_reserve = columns.ModelBuilder.reserve
    monkeypatch.setattr(columns.ModelBuilder, "reserve",
                        lambda self, n: reserved.append((self.n_events, n)) or real_reserve(self, n))
    one = load_trace(str(RANK0), parts=1)
    reported: list[float] = []
    many = load_trace(str(RANK0), parts=4, progress=reported.append)
    assert streamed["ok"] == 1 and not streamed["failed"] and len(streamed["forked"]) == 4
    # the loader wrote the jobs' tables into columns reserved after the first (for about the trace's events)
    assert len(reserved) == 1 and reserved[0][0] < 29630 and 0.5 < reserved[0][1] / 29630 < 2
    assert reported == sorted(reported) and 0.45 <= reported[-1] <= 1.0  # a progress bar never goes back
    assert many.n_events == one.n_events == 29630
    assert_same_model(one, many)
    assert all_waited_for(streamed["forked"])
    if small:  # the text not yet parsed stays within its bound (checked after each piece: one piece and job more)
        assert len(ahead) > 100 and max(ahead) <= (1 << 20) + (64 << 10) + (128 << 10)
        assert max(ahead) > 3 * (64 << 10)  # the inflater did run ahead of the parts


@pytest.mark.parametrize("nested", [False, True])
def test_streamed_parts_equal_the_usual_path_on_synthetic_layouts(tmp_path: Path, streamed: dict[str, Any],
                                                                  nested: bool) -> None:
    path = tmp_path / "w.1.pt.trace.json.gz"
    text = kineto_text(events(3000, nested), schemaVersion=1, deviceProperties=[{"name": "H100"}])
    path.write_bytes(gzip.compress(text.encode()))
    one, many = load_trace(str(path), parts=1), load_trace(str(path), parts=5)
    # objects nested in args, across lines, hold separators: a cut lands in one, and the usual path builds it
    assert streamed["ok"] == (0 if nested else 1) and len(streamed["forked"]) == 5
    assert many.n_events == 3000 and many.meta["traceName"] == "x]y"
    assert many.meta["deviceProperties"] == [{"name": "H100"}]
    assert_same_model(one, many)


def test_two_gzip_members_stream_as_one_text(tmp_path: Path, streamed: dict[str, Any]) -> None:
    text = kineto_text(events(3000)).encode()
    path = tmp_path / "w.1.pt.trace.json.gz"
    path.write_bytes(gzip.compress(text[:len(text) // 3]) + gzip.compress(text[len(text) // 3:]))
    many = load_trace(str(path), parts=4)
    assert streamed["ok"] == 1
    assert_same_model(load_trace(str(path), parts=1), many)


def test_a_range_that_does_not_parse_falls_back_to_the_usual_path(tmp_path: Path, streamed: dict[str, Any],
                                                                   usual_builds: list[int]) -> None:
    """Objects nested in an event's args, across lines, hold separators: a cut there fails the streamed parts,
    which are all waited for, and the usual path (one outline decode, then parts) builds the same bytes."""
    usual = usual_builds
    evs = events(300)
    for ev in evs:
        ev["args"] = {"External id": 1, "list": [{"k": i} for i in range(40)]}
    path = tmp_path / "w.1.pt.trace.json.gz"
    path.write_bytes(gzip.compress(kineto_text(evs).encode()))
    one, many = load_trace(str(path), parts=1), load_trace(str(path), parts=4)
    assert many.n_events == 300 and usual == [1, 4]
    assert streamed["ok"] == 0 and len(streamed["failed"]) == 1 and "could not be split" not in streamed["failed"][0]
    assert_same_model(one, many)
    assert all_waited_for(streamed["forked"])


@pytest.mark.parametrize(("damage", "message"), [
    ("cut", r"^w\.1\.pt\.trace\.json\.gz: the gzip data is cut short"),
    ("flip", r"^w\.1\.pt\.trace\.json\.gz: the gzip data is corrupt \("),
])
def test_bad_gzip_data_is_named_by_the_usual_path(tmp_path: Path, streamed: dict[str, Any], damage: str,
                                                  message: str) -> None:
    packed = bytearray(gzip.compress(kineto_text(named_at_random(60000)).encode()))
    assert len(packed) > 1 << 20  # the size is guessed from the ratio: the cut file's last bytes are no trailer
    if damage == "cut":
        packed = packed[:len(packed) * 2 // 3]
    else:
        packed[len(packed) * 2 // 3] ^= 0xFF
    path = tmp_path / "w.1.pt.trace.json.gz"
    path.write_bytes(bytes(packed))
    with pytest.raises(TraceLoadError, match=message):
        load_trace(str(path), parts=4)
    assert len(streamed["failed"]) == 1 and len(streamed["forked"]) == 4
    assert all_waited_for(streamed["forked"])


def test_text_larger_than_expected_goes_to_the_usual_path(tmp_path: Path, streamed: dict[str, Any],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A trailer that understates the size (the map is made from it) costs the usual path, not a wrong model."""
    text = kineto_text(events(3000)).encode()
    path = tmp_path / "w.1.pt.trace.json.gz"
    path.write_bytes(gzip.compress(text))
    monkeypatch.setattr(stream, "expected_size", lambda packed: len(text) // 4)
    monkeypatch.setattr(stream, "_Loader", _tight(stream._Loader))
    many = load_trace(str(path), parts=4)
    assert streamed["failed"] == ["inflating while parsing failed (the text is larger than expected)"]
    assert_same_model(load_trace(str(path), parts=1), many)


def _tight(cls: type) -> type:
    class Tight(cls):  # type: ignore[misc, valid-type]
        """A map only as large as the expected size (the real one has 16 MB of room, more than this text)."""

        def __init__(self, packed: bytes, limit: int, expected: int, *args: Any) -> None:
            super().__init__(packed, limit, expected, *args)
            self.text.close()
            self.capacity = expected
            self.text = mmap.mmap(-1, expected)
            self.pieces = read.inflated_pieces(packed, expected, stream._PIECE)
    return Tight


def test_no_events_array_at_the_start_goes_to_the_usual_path(tmp_path: Path, streamed: dict[str, Any]) -> None:
    path = tmp_path / "w.1.pt.trace.json.gz"
    path.write_bytes(gzip.compress(b'{"traceName": "x", "other": [' + b"1, " * 100000 + b"2]}"))
    with pytest.raises(TraceLoadError, match="not a Kineto trace: a JSON object without 'traceEvents'"):
        load_trace(str(path), parts=4)
    assert streamed["forked"] == [] and streamed["failed"] == ["inflating while parsing failed (not a Kineto trace's layout)"]


def test_a_part_that_dies_sends_the_file_to_the_usual_path(tmp_path: Path, streamed: dict[str, Any],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    parent = os.getpid()
    real = stream._build_text

    def dies_in_a_child(*args: Any, **kwargs: Any) -> columns.ModelBuilder:
        if os.getpid() != parent:
            os._exit(9)
        return real(*args, **kwargs)

    monkeypatch.setattr(stream, "_build_text", dies_in_a_child)
    path = tmp_path / "w.1.pt.trace.json.gz"
    path.write_bytes(gzip.compress(kineto_text(events(3000)).encode()))
    many = load_trace(str(path), parts=4)
    assert len(streamed["failed"]) == 1 and streamed["ok"] == 0 and len(streamed["forked"]) == 4
    assert all_waited_for(streamed["forked"])
    assert_same_model(load_trace(str(path), parts=1), many)


def test_text_larger_than_the_memory_bound_streams_and_too_many_events_stop_it_early(
        tmp_path: Path, streamed: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """The memory's bound on the text (a third of the memory: the usual path holds the text whole) refuses this
    file on the usual path; streamed, the text is never whole in memory, and it loads. A bound on the events
    stops the streamed load as the jobs are merged, before the text is all inflated, with the usual reason."""
    path = tmp_path / "w.1.pt.trace.json.gz"
    text = kineto_text(events(20000)).encode()
    path.write_bytes(gzip.compress(text))
    tight = Limits(max_text_bytes=len(text) // 2, memory_bytes=len(text) * 3 // 2)
    with pytest.raises(TraceLoadError, match="too large for the memory available"):
        loader.load_trace(str(path), parts=2, limits=tight)  # the usual path
    assert_same_model(load_trace(str(path), parts=1), load_trace(str(path), parts=4, limits=tight))
    assert streamed["ok"] == 1

    monkeypatch.setattr(stream, "_PIECE", 64 << 10)  # merges between pieces, the text in 64 KB jobs
    monkeypatch.setattr(stream, "_JOB_MAX", 64 << 10)
    monkeypatch.setattr(stream, "_RESIDENT_MIN", 256 << 10)
    finished: list[int] = []
    real_finish = stream._Loader.finish
    monkeypatch.setattr(stream._Loader, "finish", lambda self, hi: finished.append(hi) or real_finish(self, hi))
    forked = len(streamed["forked"])
    with pytest.raises(TraceLoadError, match=r"^w\.1\.pt\.trace\.json\.gz: too many events for the memory "):
        load_trace(str(path), parts=4, limits=Limits(max_events=5000))
    assert finished == [] and len(streamed["forked"]) == forked + 4  # stopped while inflating
    assert all_waited_for(streamed["forked"])


def test_removed_pages_are_gone_for_every_process_and_the_edges_stay() -> None:
    """``MADV_REMOVE`` on the shared map frees the pages for the loader too (which wrote them), unlike the
    ``MADV_DONTNEED`` of a private copy: what a part has decoded is no longer anyone's memory."""
    size = 64 * mmap.PAGESIZE
    text = mmap.mmap(-1, size)
    text[:] = bytes(range(256)) * (size // 256)
    start, stop = 3 * mmap.PAGESIZE + 5, 9 * mmap.PAGESIZE + 7
    pid = os.fork()
    if pid == 0:
        pages.remove(text, start, stop)
        os._exit(0)
    assert os.waitpid(pid, 0)[1] == 0
    first, last = 4 * mmap.PAGESIZE, 9 * mmap.PAGESIZE  # whole pages inside [start, stop)
    assert text[first:last] == bytes(last - first)
    assert text[start:first] == (bytes(range(256)) * 64)[start % 256:][:first - start]
    assert text[last:last + 256] == bytes(range(256))
    text.close()


def test_jobs_are_a_quarter_of_a_parts_share_within_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    """A job is a quarter of a part's share of the text, 4 to 64 MB; the text not yet parsed at most two jobs a
    part, at least 1 GiB; fewer than four processes (a machine of four cores or fewer) take the usual path."""
    assert stream.job_bytes(2000 << 20, 15) == (2000 << 20) // 60
    assert stream.job_bytes(100 << 20, 15) == 4 << 20 and stream.job_bytes(10 << 30, 15) == 64 << 20
    assert stream.resident_limit(33 << 20, 15) == 1 << 30 and stream.resident_limit(64 << 20, 15) == 1920 << 20
    monkeypatch.setattr(stream, "STREAM_MIN_BYTES", 0)
    packed = gzip.compress(kineto_text(named_at_random(60000)).encode())
    assert stream.applies(packed, 4, Limits())[0] > 0
    assert stream.applies(packed, 3, Limits()) == (0, 0)


def test_the_last_stretch_of_the_text_comes_in_smaller_jobs() -> None:
    """Jobs taper towards the text's expected end (never above the job's size, never below ``_JOB_MIN``): with
    parts that parse 1/``_TAPER`` as fast as the inflate or faster (each job starting as it is posted), every job
    ends within ``_JOB_MIN``'s parse or one job's inflate of the inflate's end, where 34 MB jobs throughout left the
    last one's whole parse after it."""
    job, tail = 34 << 20, stream._JOB_MIN
    assert stream.tapered(job, 2000 << 20) == job and stream.tapered(job, 100 << 20) == (100 << 20) // stream._TAPER
    assert stream.tapered(job, 1 << 20) == tail and stream.tapered(job, -(5 << 20)) == job  # past the estimate
    assert stream.tapered(64 << 10, 1 << 20) == 64 << 10  # never above the job
    text, inflate = 2000 << 20, 770e6  # bytes; bytes a second (one core)
    for parse in (inflate / stream._TAPER, inflate / 12, inflate / 4):  # a part's bytes a second
        start, ends, sizes = 0, [], []
        while start < text:
            size = min(stream.tapered(job, text - start), text - start)
            sizes.append(size)
            ends.append((start + size) / inflate + size / parse)  # posted once inflated, parsed at once
            start += size
        assert sizes == sorted(sizes, reverse=True) and min(sizes[:-1]) >= tail
        after = max(ends) - text / inflate
        assert after <= max(tail / parse, job / inflate) + 1e-9 < job / parse  # untapered: the last job's parse
        assert len(sizes) < text // job + 40  # 34 more of 58 here: each a merge of a few ms


def named_at_random(n: int) -> list[dict[str, object]]:
    """Events that compress to about 60 bytes each (a random name each)."""
    rng = random.Random(0)
    return [{**ev, "name": rng.randbytes(24).hex()} for ev in events(n)]


def test_expected_size_trusts_the_trailer_only_near_the_ratio() -> None:
    text = kineto_text(named_at_random(60000)).encode()
    packed = gzip.compress(text)
    assert len(packed) > 1 << 20 and stream.expected_size(packed) == len(text)
    lying = packed[:-4] + (len(text) // 10).to_bytes(4, "little")  # far off the ratio's guess: the guess
    guess = stream.expected_size(lying)
    assert guess != len(text) // 10 and len(text) * 0.7 < guess < len(text) * 1.3


def shmem_bytes() -> int:
    """This process's resident shared memory (``RssShmem``), in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssShmem:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no RssShmem")


def test_pages_are_faulted_in_only_a_little_ahead_of_the_inflater() -> None:
    """The thread faulting the map's pages in stays ``_AHEAD`` bytes ahead of what is inflated, not the whole
    text ahead (which would hold it all in memory at once), nor behind it (pages a part may have removed), and
    the loader's removal frees them again. A kernel
    without ``MADV_POPULATE_WRITE`` (before 5.14) faults nothing in: the inflater's writes do."""
    probe = mmap.mmap(-1, mmap.PAGESIZE)
    supported = pages.populate(pages.address(probe), 0, mmap.PAGESIZE)
    probe.close()
    capacity = 4 * stream._AHEAD
    text = mmap.mmap(-1, capacity)
    before = shmem_bytes()
    faults = stream._FaultAhead(text, capacity)
    faults.ahead_of(stream._AHEAD // 2)
    want = stream._AHEAD * 3 // 2 if supported else 0
    deadline = time.monotonic() + 10
    while faults.done < want and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.05)  # a thread that ran on would have faulted more in by now
    faults.close()
    faulted = shmem_bytes() - before
    assert faults.done == want
    ahead = stream._AHEAD if supported else 0  # from where the inflater writes on: never the pages behind it
    assert ahead <= faulted < ahead + (1 << 20)
    pages.remove(text, 0, capacity)
    assert shmem_bytes() - before < 1 << 20
    text.close()


def test_a_small_trailer_spares_the_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    """A gzip trailer under half the streamed path's minimum says the text is small: no first megabyte inflated to
    guess its size (20 ms of a 1.2 MB file's load); a larger trailer is still checked against the guess."""
    from tb_plugin.loader import read
    from tb_plugin.loader.limits import Limits

    probed: list[int] = []
    real = stream.projected_size
    monkeypatch.setattr(stream, "projected_size", lambda raw: probed.append(len(raw)) or real(raw))
    small = gzip.compress(kineto_text(events(3000)).encode())
    assert stream.applies(small, 8, Limits()) == (0, 0) and probed == []
    monkeypatch.setattr(stream, "STREAM_MIN_BYTES", 2)  # the same file, now large enough to stream: probed
    expected, limit = stream.applies(small, 8, Limits())
    assert expected == len(gzip.decompress(small)) and limit == read.ratio_limit(len(small), Limits()) and probed
    assert stream.applies(small, 3, Limits()) == (0, 0)  # too few processes


@pytest.mark.parametrize("room", [0.3, 1.0, 3.0])
def test_reserved_columns_hold_what_the_concatenation_gave(tmp_path: Path, room: float) -> None:
    """Blocks absorbed into reserved columns, too short (grown), about right or too long, give the tables the usual
    concatenation gives, row for row; adding events once reserved is refused."""
    text = kineto_text(events(4000)).encode()
    lo = text.index(b"[", text.index(b'"traceEvents"')) + 1
    hi = text.rindex(b"]", 0, text.rindex(b'"traceName"'))
    seps = [read._SEPARATOR.search(text, lo + k * (hi - lo) // 4) for k in (1, 2, 3)]
    ranges = [(lo, seps[0].start()), *((a.end() - 1, b.start()) for a, b in itertools.pairwise(seps)),
              (seps[-1].end() - 1, hi)]  # whole elements each, as the loader's jobs are cut
    blocks = []
    for a, b in ranges:
        built = columns._build_text(text, a, b, None)
        blocks.append((built.strings.values, built.parts, built.strings.full))
    usual, reserving = columns.ModelBuilder(), columns.ModelBuilder()
    for k, block in enumerate(blocks):
        usual.absorb(*block)
        reserving.absorb(*block)
        if k == 0:
            reserving.reserve(int(reserving.n_events * 4 * room))
    want, got = usual.tables(), reserving.tables()
    assert got.keys() == want.keys() and want["events"]["ts"].size == 4000
    for name, cols in want.items():
        for col, values in cols.items():
            assert got[name][col].dtype == values.dtype, (name, col)
            assert np.array_equal(got[name][col], values, equal_nan=values.dtype.kind == "f"), (name, col)
    again = columns.ModelBuilder()
    again.absorb(*blocks[0])
    again.reserve(10_000)
    with pytest.raises(RuntimeError):
        again.add([])


def test_the_columns_are_reserved_at_the_first_merge_that_knows_the_texts_share() -> None:
    """The builder's columns are made for the events the text is expected to hold as soon as the jobs merged end where
    a posted job starts (their share of the text): after the first job, or, where its answer came before a second
    job was posted (a busy machine), after a later one; never twice."""

    class Builder:
        def __init__(self) -> None:
            self.n_events, self.reserved = 0, []  # type: ignore[var-annotated]

        def absorb(self, events: int, *_: Any) -> None:
            self.n_events += events

        def reserve(self, events: int) -> None:
            self.reserved.append(events)

    came: set[int] = set()

    class Answers:
        def take(self, index: int, wait: bool) -> Any:
            return (100, None, None) if index in came else None

    loader = stream._Loader.__new__(stream._Loader)
    loader.builder, loader.answers = Builder(), Answers()  # type: ignore[assignment]
    loader.expected, loader.merged, loader.reserved, loader.check, loader.progress = 1000, 0, False, None, None
    loader.starts = [0]
    came.add(0)
    loader.merge(wait=False)  # the first job's answer before a second job was posted: its share is not known yet
    assert loader.merged == 1 and loader.builder.reserved == []  # type: ignore[attr-defined]
    loader.starts += [250, 500]
    came.add(1)
    loader.merge(wait=False)  # two jobs merged, ending where the third starts: 200 events in half the text
    assert loader.builder.reserved == [400]  # type: ignore[attr-defined]
    loader.starts.append(750)
    came.update({2, 3})
    loader.merge(wait=False)
    assert loader.merged == 4 and loader.builder.reserved == [400]  # type: ignore[attr-defined]
