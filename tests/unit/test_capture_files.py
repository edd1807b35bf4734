"""Capture without a job: the request files, what the progress says from hand-made rank answers (pending, no job,
waiting, "3 of 8 ranks capturing, step 40,012", written, a rank that never answered or went silent, a failure),
the options whitelist, the folder (whole writes, readable by another user, no way out of .capture/), old requests
pruned, and the catalog keeping .capture/ out of the runs while listing where a job listens."""

from __future__ import annotations

import errno
import os
import re
import stat
from pathlib import Path

import pytest

from tb_plugin.capture import protocol as p
from tb_plugin.capture.folder import CaptureFolder, FolderError
from tb_plugin.capture.progress import progress
from tb_plugin.capture.requests import KEEP_S, listeners, prune, read_progress, submit
from tb_plugin.catalog.catalog import Catalog, Root
from tb_plugin.catalog.storage import Storage
from tests.conftest import cpu_op, write_trace

NOW = 1_800_000_000.0


def request(steps: int = 3, created: float = NOW - 10, deadline_s: float = 60) -> p.Request:
    return p.Request(id="0123456789abcdef", steps=steps, options=p.Options(), requester="test", created=created,
                     deadline=created + deadline_s)


def status(rank: int, state: str, step: int, world: int = 4, start: int | None = 40_011, updated: float = NOW - 1,
           file: str | None = None, reason: str | None = None) -> p.Status:
    return p.Status(id="0123456789abcdef", rank=rank, world_size=world, state=state, step=step, updated=updated,
                    start_step=start, file=file, reason=reason)


def plan(world: int) -> p.Plan:
    return p.Plan(id="0123456789abcdef", start_step=40_011, steps=3, stamp=1795738053740002619, world_size=world,
                  planned=NOW - 5)


PLAN = plan(8)


# ---- progress, from hand-made answers ------------------------------------------------------------------------------

def test_before_anyone_answers_the_request_is_pending_then_no_job_after_its_deadline() -> None:
    waiting = progress(request(), None, {}, {}, 2.0, NOW, "/logs/run")
    assert (waiting.state, waiting.done, waiting.summary) == ("pending", False,
                                                             "waiting up to 60 s for the job to pick the request up")
    late = progress(request(created=NOW - 61), None, {}, {}, 2.0, NOW, "/logs/run")
    assert (late.state, late.done, late.summary) == ("no_job", True, "no job picked the request up within 60 s")
    assert late.message is not None and late.message.startswith("No job is listening in /logs/run: ")
    assert 'tb_plugin.capture.enable("/logs/run")' in late.message and not late.ok


def test_three_of_eight_ranks_capturing_names_the_step() -> None:
    answers = {r: status(r, p.CAPTURING, 40_012, world=8) for r in (0, 1, 2)}
    answers |= {r: status(r, p.WAITING, 40_011, world=8) for r in range(3, 8)}
    now = progress(request(), PLAN, answers, {}, 2.0, NOW)
    assert (now.state, now.done, now.summary, now.message) == ("capturing", False,
                                                               "3 of 8 ranks capturing, step 40,012", None)
    assert [r.state for r in now.ranks] == ["capturing"] * 3 + ["waiting"] * 5
    assert now.start_step == 40_011 and now.world_size == 8


def test_waiting_for_the_plan_and_for_the_start_step() -> None:
    unplanned = progress(request(), None, {0: status(0, p.WAITING, 7, start=None), 1: status(1, p.WAITING, 7,
                                                                                             start=None)}, {}, 2.0, NOW)
    assert unplanned.summary == "2 of 4 ranks waiting for rank 0's plan"
    assert [r.state for r in unplanned.ranks] == ["waiting", "waiting", "pending", "pending"]
    planned = progress(request(), PLAN, {r: status(r, p.WAITING, 40_001, world=8) for r in range(8)}, {}, 2.0, NOW)
    assert planned.summary == "8 of 8 ranks waiting for step 40,011"


def test_every_rank_written_opens_one_span() -> None:
    answers = {r: status(r, p.WRITTEN, 40_014, world=2, file=p.trace_name(r, PLAN.stamp)) for r in (0, 1)}
    done = progress(request(), plan(2), answers, {}, 2.0, NOW)
    assert (done.state, done.done, done.ok, done.message) == ("written", True, True, None)
    assert done.summary == "2 of 2 ranks written: steps 40,012–40,014"  # recording starts after step 40,011
    assert done.files == [f"rank0.{PLAN.stamp}.pt.trace.json.gz", f"rank1.{PLAN.stamp}.pt.trace.json.gz"]
    assert done.as_dict("job")["span"] == str(PLAN.stamp)


def test_a_rank_that_never_answers_and_one_that_went_silent_are_named() -> None:
    answers = {0: status(0, p.WRITTEN, 40_014, file="a"), 1: status(1, p.WRITTEN, 40_014, file="b"),
               2: status(2, p.CAPTURING, 40_012, updated=NOW - 40)}
    before = progress(request(created=NOW - 30), plan(4), answers, {2: NOW - 40}, 2.0, NOW)
    # rank 2: 40 s of silence > 3 heartbeats of 2 s + 5 s; rank 3: the deadline is 30 s away, so not missing yet
    assert [r.state for r in before.ranks] == ["written", "written", "lost", "pending"] and not before.done
    assert before.message == "rank 2 stopped answering while capturing (last heard of 40 s ago): the job may have " \
                             "ended or hung."
    after = progress(request(created=NOW - 61), plan(4), answers, {2: NOW - 40}, 2.0, NOW)
    assert (after.state, after.done, after.summary) == ("failed", True, "2 of 4 ranks written: steps 40,012–40,014")
    assert after.message is not None and "rank 3 never answered the request" in after.message
    # a fresh heartbeat keeps a rank alive however old its status is
    alive = progress(request(), plan(4), {2: status(2, p.CAPTURING, 40_012, updated=NOW - 40)}, {2: NOW - 1}, 2.0, NOW)
    assert alive.ranks[2].state == "capturing"


def test_failures_are_grouped_by_reason() -> None:
    full = "cannot write rank1.1.pt.trace.json.gz into /logs/run: No space left on device"
    answers = {0: status(0, p.WRITTEN, 9, world=3, file="a", reason="incomplete: the job ended after 1 of 3 steps"),
               1: status(1, p.FAILED, 9, world=3, reason=full), 2: status(2, p.FAILED, 9, world=3, reason=full)}
    done = progress(request(), plan(3), answers, {}, 2.0, NOW)
    assert (done.state, done.done) == ("failed", True)
    assert done.message == f"ranks 1, 2 failed: {full}; rank 0: incomplete: the job ended after 1 of 3 steps."


# ---- options ----------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("steps", "activities", "flags", "deadline", "error"), [
    (0, ["cpu"], {}, 60, "'steps' must be a whole number from 1 to 50"),
    (51, ["cpu"], {}, 60, "'steps'"),
    (True, ["cpu"], {}, 60, "'steps'"),
    ("3", ["cpu"], {}, 60, "'steps'"),
    (3, [], {}, 60, "'activities' must be a non-empty list"),
    (3, "cpu", {}, 60, "'activities' must be a non-empty list"),
    (3, ["cpu", "gpu"], {}, 60, "unknown activity 'gpu'"),
    (3, ["cpu"], {"with_stack": "yes"}, 60, "'with_stack' must be true or false"),
    (3, ["cpu"], {}, 1, "'deadline_s' must be a number of seconds from 2 to 3600"),
    (3, ["cpu"], {}, 1e9, "'deadline_s'"),
])
def test_options_outside_the_whitelist_are_refused(steps: object, activities: object, flags: dict[str, object],
                                                   deadline: object, error: str) -> None:
    with pytest.raises(p.OptionsError, match=error.replace("(", r"\(").replace(")", r"\)")):
        p.check_options(steps, activities, flags, deadline)


def test_options_are_kept_as_asked() -> None:
    steps, options, deadline = p.check_options(5, ["cuda", "cpu", "cpu"], {"record_shapes": True}, 30)
    assert (steps, options, deadline) == (5, p.Options(activities=("cuda", "cpu"), record_shapes=True), 30.0)


# ---- the folder ---------------------------------------------------------------------------------------------------

def test_files_are_written_whole_and_readable_by_another_user(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        folder = CaptureFolder(str(tmp_path / "run"))
        folder.write("request-x.json", b"{}")
    finally:
        os.umask(old)
    path = tmp_path / "run" / ".capture" / "request-x.json"
    assert path.read_bytes() == b"{}" and stat.S_IMODE(path.stat().st_mode) == 0o644
    assert folder.names() == ["request-x.json"] and folder.read("nothing.json") is None
    for bad in ("../escape.json", "a/b.json", "..", ""):
        with pytest.raises(FolderError, match="not a plain file name"):
            folder.write(bad, b"{}")
    assert sorted(p.name for p in tmp_path.rglob("*")) == [".capture", "request-x.json", "run"]


def test_an_unwritable_folder_says_where_and_why(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / ".capture").write_text("a file where the folder should be")
    folder = CaptureFolder(str(tmp_path / "run"))
    with pytest.raises(FolderError) as caught:
        submit(folder, 3, p.Options(), 60, "test")
    assert re.fullmatch(r"cannot write request-[0-9a-f]{16}\.json into (.*)/\.capture: \.capture is a file, not a "
                        r"folder", str(caught.value)).group(1) == str(tmp_path / "run")  # type: ignore[union-attr]
    assert isinstance(caught.value.__cause__, OSError) and caught.value.__cause__.errno == errno.ENOTDIR


def test_old_requests_are_pruned_with_their_answers(tmp_path: Path) -> None:
    folder = CaptureFolder(str(tmp_path / "run"))
    old = submit(folder, 3, p.Options(), 60, "test", now=NOW - KEEP_S - 120)
    folder.write(p.plan_name(old.id), p.encode(PLAN))
    folder.write(p.status_name(old.id, 0), p.encode(status(0, p.WRITTEN, 3)))
    folder.write(p.listener_name(0), b"{}")
    recent = submit(folder, 3, p.Options(), 60, "test", now=NOW)
    assert sorted(folder.names()) == [p.listener_name(0), p.request_name(recent.id)]
    assert prune(folder, NOW) == 0


def test_read_progress_reads_the_files_the_ranks_wrote(tmp_path: Path) -> None:
    folder = CaptureFolder(str(tmp_path / "run"))
    made = submit(folder, 3, p.Options(), 60, "test")
    folder.write(p.plan_name(made.id), p.encode(p.Plan(made.id, 10, 3, 123, 2, made.created)))
    listener = p.Listener(rank=0, world_size=2, step=10, steps_per_s=20.0, heartbeat_s=2.0, updated=made.created)
    folder.write(p.listener_name(0), p.encode(listener))
    for rank in (0, 1):
        folder.write(p.status_name(made.id, rank), p.encode(p.Status(
            id=made.id, rank=rank, world_size=2, state=p.CAPTURING, step=11, updated=made.created, start_step=10)))
    folder.write(p.status_name(made.id, 2) + ".bak", b"not ours")  # a stray file is no rank
    now = read_progress(folder, made.id)
    assert (now.summary, now.start_step, [r.rank for r in now.ranks]) == ("2 of 2 ranks capturing, step 11", 10, [0, 1])
    assert listeners(folder) == (1, listener)
    with pytest.raises(LookupError, match="no capture request 0000000000000000 in "):
        read_progress(folder, "0000000000000000")


# ---- the catalog ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("any_json", [False, True])
def test_the_catalog_keeps_capture_files_out_of_the_runs(tmp_path: Path, any_json: bool) -> None:
    write_trace(tmp_path / "traced" / "rank0.1.pt.trace.json", [cpu_op("x", 0, 1)])
    capture = tmp_path / "job" / ".capture"
    capture.mkdir(parents=True)
    for name in ("listener-rank0.json", "listener-rank1.json", "request-0123456789abcdef.json"):
        (capture / name).write_text("{}")
    write_trace(capture / ".tmp-1-rank0.5.pt.trace.json.gz", [cpu_op("x", 0, 1)])  # an export being staged
    catalog = Catalog([Root(None, Storage(str(tmp_path)))], any_json=any_json)
    files = catalog.scan()
    assert {f.run for f in files} == {"traced"} and not catalog.rejected
    assert list(catalog.capture) == ["job"]
    found = catalog.capture["job"]
    assert found.url == str(tmp_path / "job") and sorted(n for n, _ in found.listeners) == [
        "listener-rank0.json", "listener-rank1.json"]
