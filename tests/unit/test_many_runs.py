"""Logdirs of thousands of small runs (issue 26, item 6): 5,000 runs were half loaded after 15 minutes, because the
parse cache was listed whole after every load, and ``/runs`` grew to 944 KB and 1.2 s, polled every 2 s by the page.
The cache keeps a running total (listed once), and ``/runs`` answers a page (``limit``) with counts over every run."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from tb_plugin.jobs.cache import ParseCache
from tests.conftest import API, wait_until_settled


def _tiny_runs(logdir: Path, count: int) -> None:
    """``count`` runs of one small trace each (a step and an operator; run k's step lasts 100 + k µs)."""
    stamp = time.time() - 60  # settled
    for k in range(count):
        events = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0,
                   "dur": 100 + k}, {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1,
                                     "ts": 10, "dur": 50}]
        path = logdir / f"run{k:04d}" / "w.1.pt.trace.json"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps({"traceEvents": events}))
        os.utime(path, (stamp, stamp))


def _count_listings(monkeypatch: pytest.MonkeyPatch, folder: Path) -> list[int]:
    """Count the listings of ``folder`` (``os.scandir``, ``os.listdir`` and ``Path.iterdir``, however the cache
    lists it)."""
    listed = [0]
    real_scandir, real_listdir, real_iterdir = os.scandir, os.listdir, Path.iterdir

    def named(path: Any) -> bool:  # shutil.rmtree lists by descriptor
        return isinstance(path, (str, os.PathLike)) and Path(path) == folder

    def scandir(path: Any = ".") -> Any:
        listed[0] += named(path)
        return real_scandir(path)

    def listdir(path: Any = ".") -> Any:
        listed[0] += named(path)
        return real_listdir(path)

    def iterdir(self: Path) -> Any:
        listed[0] += self == folder
        return real_iterdir(self)

    monkeypatch.setattr(os, "scandir", scandir)
    monkeypatch.setattr(os, "listdir", listdir)
    monkeypatch.setattr(Path, "iterdir", iterdir)
    return listed


LOADS = 40  # the cache was listed after each load: 40 listings where at most 2 may be


def test_loading_many_runs_lists_the_cache_once(tensorboard_app: Any, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The cache was listed (and every entry measured) after each load: quadratic in the runs."""
    logdir = tmp_path / "logdir"
    _tiny_runs(logdir, LOADS)
    listed = _count_listings(monkeypatch, tmp_path / "cache")
    client = tensorboard_app(logdir, profiler_workers=2)
    body = wait_until_settled(client, timeout=240, expect_spans=LOADS)
    assert {s["state"] for r in body["runs"] for w in r["workers"] for s in w["spans"]} == {"ready"}
    assert listed[0] <= 2, f"the cache folder was listed {listed[0]} times for {LOADS} loads"


def test_trimming_after_each_of_5000_loads_is_cheap_and_keeps_the_bound(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """5,000 entries added one at a time, the cache trimmed after each (as after each load): one listing in all,
    and the oldest entries go once the total passes the bound."""
    cache = ParseCache(tmp_path / "cache", max_bytes=4_000 * 1_000)
    listed = _count_listings(monkeypatch, cache.directory)
    started = time.monotonic()
    entries = []
    for k in range(5_000):
        entry = cache.directory / f"v5-{k:032x}"
        entry.mkdir()
        (entry / "events.arrow").write_bytes(b"x" * 1_000)
        entries.append(entry)
        cache.added(entry, 1_000)
        cache.evict(keep=set())
    trimming = time.monotonic() - started
    assert listed[0] == 1
    assert cache.total_bytes() <= cache.max_bytes
    assert not entries[0].exists() and not entries[999].exists() and entries[1000].exists() and entries[-1].exists()
    assert trimming < 60, trimming  # file writes included; listing the cache after each load took minutes


def test_runs_of_a_5000_run_logdir_come_in_small_pages(tensorboard_app: Any, tmp_path: Path) -> None:
    logdir = tmp_path / "logdir"
    _tiny_runs(logdir, 5_000)
    client = tensorboard_app(logdir, profiler_workers=1)
    deadline = time.monotonic() + 120
    while client.get(f"{API}/runs?limit=0").get_json().get("total_runs") != 5_000:
        assert time.monotonic() < deadline, "the logdir was not listed in time"
        time.sleep(0.5)
    started = time.monotonic()
    r = client.get(f"{API}/runs?limit=200&run=run4321")
    took = time.monotonic() - started
    body = r.get_json()
    assert r.status_code == 200 and len(r.data) < 80_000, len(r.data)  # the whole listing is over 1 MB
    assert took < 2.0, took
    names = [run["name"] for run in body["runs"]]
    assert names[:200] == [f"run{k:04d}" for k in range(200)] and "run4321" in names and body["newest"] in names
    assert (body["total_runs"], body["matched"], body["offset"], body["limit"]) == (5_000, 5_000, 0, 200)
    states = body["states"]
    assert sum(states[s] for s in ("queued", "loading", "ready", "failed")) == 5_000
    assert len(body["attention"]) <= 100
    assert all(a["state"] in ("queued", "loading", "failed") for a in body["attention"])
    found = client.get(f"{API}/runs?limit=200&q=RUN432").get_json()  # any case
    assert [run["name"] for run in found["runs"] if run["name"] != found["newest"]] == [
        f"run432{k}" for k in range(10)]
    assert found["matched"] == 10
    page = client.get(f"{API}/runs?limit=100&offset=4950").get_json()
    assert [run["name"] for run in page["runs"] if run["name"] != page["newest"]] == [
        f"run{k:04d}" for k in range(4950, 5000)]
    assert client.get(f"{API}/runs?limit=1001").status_code == 400
    assert client.get(f"{API}/runs?limit=10&offset=-1").status_code == 400
    whole = client.get(f"{API}/runs").get_json()  # what older clients ask: every run, as before
    assert len(whole["runs"]) == 5_000 and "total_runs" not in whole
