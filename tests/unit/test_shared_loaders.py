"""Small files share a loader process when more are queued than processes are free (``jobs.local.groups``), and a
shared process that dies, runs past the time limit or loses a file takes no other file down with it.

The scheduler's loop is held while the files are requested, so the groups are the rule's, not a race's; the
misbehaving files are made so by the stored views the loader process runs (``faulty_views.py``)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tb_plugin.catalog.catalog import TraceFile
from tb_plugin.jobs.cache import ParseCache
from tb_plugin.jobs.job import Job
from tb_plugin.jobs.local import BATCH_MAX, SMALL_BYTES, groups
from tb_plugin.jobs.scheduler import FAILED, LOADING, READY, LoadScheduler
from tb_plugin.loader import load_trace
from tests.conftest import cpu_op, write_trace
from tests.unit.faulty_views import FaultyViews


def _file(path: Path, run: str) -> TraceFile:
    st = path.stat()
    return TraceFile(run=run, worker="w", span="1", url=str(path), size=st.st_size, mtime=st.st_mtime)


def traces(root: Path, names: list[str]) -> list[TraceFile]:
    """A small trace per name, each in a run of that name, with distinct events (``n + 2`` operators)."""
    out = []
    for n, name in enumerate(names):
        path = root / name / f"{name}.1.pt.trace.json"
        write_trace(path, [cpu_op("ProfilerStep#1", 0, 1000)] + [cpu_op(f"aten::op{k}", 10 + k, 5)
                                                                   for k in range(n + 1)])
        out.append(_file(path, name))
    return out


def names(model: Any) -> list[str]:
    return [model.strings[code] for code in model["events"]["name"]]


@pytest.fixture
def scheduler(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[LoadScheduler]:
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    timeout = getattr(request, "param", None)
    made = LoadScheduler(ParseCache(tmp_path / "cache"), max_workers=1, load_timeout=timeout,
                         stored=FaultyViews(str(tmp_path / "marker"), str(gate)))
    yield made
    made.close()


def request_together(scheduler: LoadScheduler, files: list[TraceFile]) -> None:
    """Request every file before the loop starts any (it starts them as it sees them otherwise)."""
    scheduler._start_jobs = lambda freed=0: None  # type: ignore[method-assign]
    try:
        for f in files:
            scheduler.request(f)
    finally:
        del scheduler._start_jobs
    scheduler._wake()


def settle(scheduler: LoadScheduler, files: list[TraceFile], timeout: float = 120) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        states = {f.run: scheduler.status(f.key) for f in files}
        if all(s is not None and s.state in (READY, FAILED) for s in states.values()):
            return states
        time.sleep(0.05)
    raise AssertionError(f"not settled in {timeout} s: {states}")


def test_small_files_share_processes_and_load_as_alone(scheduler: LoadScheduler, tmp_path: Path) -> None:
    files = traces(tmp_path / "logdir", [f"r{k:02d}" for k in range(2 * BATCH_MAX + 3)])
    request_together(scheduler, files)
    states = settle(scheduler, files)
    assert {s.state for s in states.values()} == {READY}
    # one process free: 19 files in groups of at most 8, in order (8, 8, then the 3 left)
    assert scheduler.local.processes == 3 and scheduler.counts()["parsed_here"] == len(files)
    for f in files:
        model, alone = scheduler.model(f.key), load_trace(f.url)
        assert model is not None and model.n_events == alone.n_events
        assert names(model) == names(alone)


def test_a_shared_process_that_dies_fails_only_the_file_it_died_on(scheduler: LoadScheduler,
                                                                   tmp_path: Path) -> None:
    """The file a shared process died on is tried again alone (it loads, if it was the batch's fault); only a death
    alone fails it, with the reason. The files after it go back to the queue, those before it stay ready."""
    files = traces(tmp_path / "logdir", ["a0", "a1", "crash_once", "b0", "crash", "c0"])
    request_together(scheduler, files)
    states = settle(scheduler, files)
    assert {run: s.state for run, s in states.items()} == {
        "a0": READY, "a1": READY, "crash_once": READY, "b0": READY, "crash": FAILED, "c0": READY}
    assert states["crash"].error == "crash.1.pt.trace.json: the loader process was killed by SIGKILL (most likely " \
                                    "out of memory)"
    # the six together; crash_once alone; b0, crash and c0 together; crash alone; c0
    assert scheduler.local.processes == 5


@pytest.mark.parametrize("scheduler", [3.0], indirect=True)
def test_a_shared_file_past_the_time_limit_fails_and_the_rest_load(scheduler: LoadScheduler,
                                                                   tmp_path: Path) -> None:
    """The time limit counts from a file's turn in its process, not from the process's start."""
    files = traces(tmp_path / "logdir", ["a0", "slow", "b0", "b1"])
    request_together(scheduler, files)
    states = settle(scheduler, files)
    assert {run: s.state for run, s in states.items()} == {"a0": READY, "slow": FAILED, "b0": READY, "b1": READY}
    assert states["slow"].error.startswith("slow.1.pt.trace.json: loading took longer than 3 s and was stopped")


def test_a_file_forgotten_or_rewritten_while_it_waits_its_turn(scheduler: LoadScheduler, tmp_path: Path) -> None:
    files = traces(tmp_path / "logdir", ["gate", "b0", "b1", "b2"])
    request_together(scheduler, files)
    jobs: dict[str, Job] = {f.run: scheduler._jobs[f.key] for f in files}
    deadline = time.monotonic() + 60
    while jobs["gate"].state != LOADING or jobs["b0"].batch is None:
        assert time.monotonic() < deadline, jobs
        time.sleep(0.02)
    assert [job.state for job in jobs.values()] == [LOADING, "queued", "queued", "queued"]
    scheduler.forget(files[2].key)  # b1 leaves the process it waits in
    path = Path(files[3].url)
    write_trace(path, [cpu_op("ProfilerStep#1", 0, 1000), cpu_op("aten::rewritten", 10, 5)])
    rewritten = _file(path, "b2")
    scheduler.request(rewritten)  # b2 rewritten: its new version is loaded on its own
    with open(tmp_path / "gate", "wb"):
        pass  # the gate file's load goes on
    states = settle(scheduler, [files[0], files[1], rewritten])
    assert {s.state for s in states.values()} == {READY} and scheduler.status(files[2].key) is None
    model = scheduler.model(rewritten.key)
    assert model is not None and "aten::rewritten" in names(model)
    assert scheduler.local.processes == 2  # the four together, then b2's new version


def test_groups_fill_the_free_processes_in_order() -> None:
    def job(name: str, size: int = 1000, alone: bool = False) -> Job:
        return Job(file=TraceFile(run=name, worker="w", span="1", url=f"/l/{name}.pt.trace.json", size=size,
                                  mtime=0.0), entry=Path(name), alone=alone)

    def runs(out: list[list[Job]]) -> list[list[str]]:
        return [[j.file.run for j in g] for g in out]

    small = [job(f"s{k}") for k in range(10)]
    assert runs(groups(small[:3], 4)) == [["s0"], ["s1"], ["s2"]]  # enough processes: each alone
    assert runs(groups(small, 4)) == [["s0", "s1", "s2"], ["s3", "s4", "s5"], ["s6", "s7", "s8"], ["s9"]]
    assert runs(groups(small, 1)) == [[f"s{k}" for k in range(BATCH_MAX)]]
    assert groups(small, 0) == []
    # one of 4 processes free, 6 files queued: 2 to a process, as would fill the 4 (the others free up soon)
    assert runs(groups(small[:6], 1, 4)) == [["s0", "s1"]]
    big, retried = job("big", SMALL_BYTES + 1), job("again", alone=True)
    mixed = [small[0], big, small[1], small[2], retried, small[3], small[4]]  # 7 files, 3 processes: 3 a group
    # a big file and one tried again alone never share; a file with no process left waits for the next turn
    assert runs(groups(mixed, 3)) == [["s0"], ["big"], ["s1", "s2", "s3"]]
    remote = Job(file=TraceFile(run="r", worker="w", span="1", url="s3://bucket/r.pt.trace.json", size=10,
                                mtime=0.0), entry=Path("r"))
    assert runs(groups([remote, small[0], small[1]], 1)) == [["r"]]


def test_the_last_file_of_a_shared_process_may_go_on_after_ready_and_leaves_the_batch(tmp_path: Path) -> None:
    """The last file of a shared process whose answer leaves views for after ready keeps the process (as a file
    alone does), and no longer counts as waiting in it: the scheduler never starts a queued file that does (one
    queued again because its entry was found damaged would wait forever)."""
    import multiprocessing
    import time as clock

    from tb_plugin.jobs.job import Batch

    made = LoadScheduler(ParseCache(tmp_path / "cache"), max_workers=1)
    made.close()  # no loop thread: the answer below is taken by hand
    ctx = multiprocessing.get_context("spawn")
    recv, send = ctx.Pipe(duplex=False)
    process = ctx.Process(target=clock.sleep, args=(60,), daemon=True)
    process.start()
    try:
        send.send(("ok", {"events": 1, "later": {"overview": 1.0}}))
        (file,) = traces(tmp_path / "logdir", ["last"])
        job = Job(file=file, entry=tmp_path / "entry", state=LOADING, process=process, conn=recv)
        job.batch = Batch(process, job, [])
        assert made.local.answer(job) is not None
        assert job.after is not None and job.after.process is process and job.batch is None
    finally:
        process.kill()
