"""Cache fault injection (issue 26, item 3): truncate, delete or alter each kind of file of the parse cache, under a
running TensorBoard and before one starts. The server never crashes (a file truncated under a memory map used to
kill it with SIGBUS) and never answers a number other than a fresh parse's (a deleted ``ops.arrow`` or 64 altered
bytes used to give wrong answers with status 200; a deleted ``events.arrow`` made seven routes answer 500): a damaged
entry is a miss, parsed again, and the reason is logged."""

from __future__ import annotations

import json
import math
import os
import shutil
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tb_plugin.catalog.catalog import Catalog, Root
from tb_plugin.catalog.storage import Storage
from tb_plugin.jobs.cache import entry_name
from tests.browser.conftest import TensorBoard, start_tensorboard, stop_tensorboard
from tests.conftest import REAL_TRACES, AppFactory, wait_until_settled

TRACE = next((REAL_TRACES / "h200" / "transformer_bf16").glob("*.pt.trace.json.gz"))
# written out (not tb_plugin.model.tables.MODEL_FILES): the files a parse writes, as the cache holds them
MODEL_FILES = ("meta.json", "strings.arrow", "events.arrow", "device_events.arrow", "ops.arrow", "comms.arrow",
               "python.arrow", "memory.arrow", "flows.arrow", "metadata_events.arrow", "work.arrow", "counters.arrow")
TIMELINE_FILES = ("timeline.json", "timeline.events.arrow", "timeline.lanes.arrow", "timeline.buckets.arrow",
                  "timeline.long.arrow")
KINDS = (*MODEL_FILES, *TIMELINE_FILES, "manifest.json")
FAULTS = ("truncate", "delete", "flip")
ROUTES = ("summary", "overview", "operators", "kernels", "memory/curve", "trace/window?width_px=600",
          "operators?group_by=name_shape", "launch_stats")
# asked first after the damage: computed then, from the model's columns (a SIGBUS if they were mapped from a file
# truncated meanwhile)
LIVE_ROUTES = ("trace/window?width_px=777", "trace/search?q=aten", "operators?group_by=name_stack",
               "kernels?group_by=name_op", "idle", "queue_length", "memory/events")


def _plan() -> list[tuple[str, str]]:
    """(file, fault) per damaged run: every kind of file gets a fault (in turn), the tables the defects were seen
    on get all three."""
    plan = [(name, FAULTS[k % 3]) for k, name in enumerate(KINDS)]
    plan += [(name, fault) for name in ("events.arrow", "ops.arrow", "manifest.json") for fault in FAULTS
             if (name, fault) not in plan]
    return plan


def _damage(path: Path, fault: str) -> None:
    if fault == "delete":
        path.unlink()
    elif fault == "truncate":
        os.truncate(path, path.stat().st_size // 3)
    else:  # 64 bytes in the middle, each flipped
        with open(path, "r+b") as fh:
            size = path.stat().st_size
            at = max(0, size // 2 - 32)
            fh.seek(at)
            data = fh.read(64)
            fh.seek(at)
            fh.write(bytes(b ^ 0xFF for b in data))


def _get(tb: TensorBoard, route: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(tb.plugin_url(route), timeout=60) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"null")


def _answers(tb: TensorBoard, run: str, routes: tuple[str, ...] = ROUTES) -> dict[str, tuple[int, Any]]:
    sep = lambda route: "&" if "?" in route else "?"  # noqa: E731
    return {route: _get(tb, f"{route}{sep(route)}run={run}&worker=vm_562&span=1") for route in routes}


def _parsed_once(logdir: Path, cache: Path, runs: list[str]) -> dict[str, Path]:
    """Every run's cache entry, as the first server would write it, by run: the trace is parsed once, by a server on
    the first run alone, and its entry copied (not linked: each is damaged on its own) to every other run's name (an
    entry holds nothing of its run: the same file version anywhere parses to the same files)."""
    (logdir / runs[0]).mkdir(parents=True)
    shutil.copy2(TRACE, logdir / runs[0] / TRACE.name)
    factory = AppFactory(cache)
    try:
        body = wait_until_settled(factory(logdir, profiler_cache_dir=str(cache)), expect_spans=1)
        assert body["runs"][0]["workers"][0]["spans"][0]["state"] == "ready", body
    finally:
        factory.close()
    for run in runs[1:]:
        (logdir / run).mkdir(parents=True)
        shutil.copy2(TRACE, logdir / run / TRACE.name)
    catalog = Catalog([Root(None, Storage(str(logdir)))])
    entries = {f.run: cache / entry_name(f.identity) for f in catalog.scan(now=math.inf)}
    assert sorted(entries) == sorted(runs)
    for run in runs[1:]:
        shutil.copytree(entries[runs[0]], entries[run])
    return entries


@pytest.mark.slow  # 40-110 s on 2 cores: make test runs it, make test-fast leaves it out
def test_damaged_cache_files_never_crash_the_server_nor_change_an_answer(tmp_path: Path) -> None:
    logdir, cache = tmp_path / "logdir", tmp_path / "cache"
    plan = _plan()
    runs = ["ref", *(f"r{k:02d}" for k in range(len(plan)))]  # ref: never damaged
    entries = _parsed_once(logdir, cache, runs)

    first = start_tensorboard(logdir, tmp_path, "--profiler_cache_dir", str(cache))
    try:
        first.wait_settled()
        reference = _answers(first, runs[0])
        assert all(status == 200 for status, _ in reference.values()), reference
        for run in runs[1:]:
            assert _answers(first, run) == reference, run  # the same file in every run: the same answers
        for run, (name, fault) in zip(runs[1:], plan):
            assert (entries[run] / name).is_file(), (run, name)
            _damage(entries[run] / name, fault)
        # under the running server: its models were opened from private copies, so nothing changed for it
        live = _answers(first, runs[0], LIVE_ROUTES)
        assert all(status == 200 for status, _ in live.values()), live
        for run in runs[1:]:
            assert _answers(first, run, LIVE_ROUTES) == live, run
            assert _answers(first, run) == reference, run
        assert first.process.poll() is None, first.log()
    finally:
        stop_tensorboard(first)
    assert first.process.returncode in (0, -15), first.log()  # stopped by us, not killed by a signal of its own

    second = start_tensorboard(logdir, tmp_path, "--profiler_cache_dir", str(cache))
    try:
        body = second.wait_settled()
        states = {r["name"]: r["workers"][0]["spans"][0]["state"] for r in body["runs"]}
        assert set(states.values()) == {"ready"}, states
        for run, (name, fault) in zip(runs[1:], plan):  # a restart on the damaged entries: each answer is a fresh parse's
            assert _answers(second, run) == reference, (run, name, fault)
        log = second.log_path.read_text(errors="replace")
        # each damaged model's entry is discarded with a warning naming it and why; a deleted manifest reads as an
        # entry of an older version (discarded quietly: expected after an upgrade); a damaged stored index only
        # drops the index (computed again on first use)
        warned = [run for run, (name, fault) in zip(runs[1:], plan)
                  if name not in TIMELINE_FILES and (name, fault) != ("manifest.json", "delete")]
        for run in warned:
            assert f"discarding the cache entry {entries[run]}: " in log, run
        assert log.count("discarding the cache entry") == len(warned), log
        assert second.process.poll() is None
    finally:
        stop_tensorboard(second)
