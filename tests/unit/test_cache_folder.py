"""The parse cache's folder and bound (issue 26, item 10): ``--profiler_cache_max_mb`` is kept (a 10 MB bound kept
96 MB: every loaded trace's entry was kept), and a cache folder that cannot be written is replaced by one folder in
the temp folder, the same at every start, said once (log and page), instead of a new temp folder per start left
behind."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from tb_plugin.jobs import cache as cache_module
from tb_plugin.jobs.cache import ParseCache
from tests.conftest import API, REAL_TRACES, wait_until_settled

TRACES = [*sorted((REAL_TRACES / "h200" / "resnet18_workers0").glob("*.gz")),
          *(REAL_TRACES / "h200" / "transformer_bf16").glob("*.gz"), *(REAL_TRACES / "h200" / "mlp_compiled").glob("*.gz")]


def _entries_bytes(folder: Path) -> int:
    return sum(f.stat().st_size for entry in folder.iterdir() if not entry.name.startswith(".")
               for f in entry.iterdir() if f.is_file())


def test_the_cache_bound_is_kept(tensorboard_app: Any, tmp_path: Path) -> None:
    logdir = tmp_path / "logdir"
    for k, trace in enumerate(TRACES):
        (logdir / f"run{k}").mkdir(parents=True)
        shutil.copy2(trace, logdir / f"run{k}" / trace.name)
    client = tensorboard_app(logdir, profiler_cache_max_mb=2)
    body = wait_until_settled(client, expect_spans=len(TRACES), timeout=120)
    cache = tmp_path / "cache"
    assert _entries_bytes(cache) <= 2 << 20  # the four entries hold ~5 MB
    for run in body["runs"]:  # every trace still answers: its model was copied from the cache when opened
        worker = run["workers"][0]["name"]
        assert client.get(f"{API}/operators?run={run['name']}&worker={worker}&span=1").status_code == 200
    again = tensorboard_app(logdir, profiler_cache_max_mb=2)  # a restart parses what was evicted
    states = [s["state"] for r in wait_until_settled(again, expect_spans=len(TRACES))["runs"]
              for w in r["workers"] for s in w["spans"]]
    assert states == ["ready"] * len(TRACES)
    assert _entries_bytes(cache) <= 2 << 20


@pytest.fixture
def temp_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    monkeypatch.setattr(cache_module, "_warned", set(), raising=False)  # said once per process: afresh here
    return folder


def test_an_unwritable_cache_folder_is_replaced_by_one_folder_said_once(temp_folder: Path, tmp_path: Path,
                                                                        caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "a_file").write_text("not a folder")
    wanted = tmp_path / "a_file" / "cache"  # cannot be made (root may write anywhere else)
    old = time.time() - 7200
    leftovers = {name: temp_folder / name for name in
                 ("pytorch-tb-profiler-ab12cd34", "pytorch-tb-profiler-young123", "pytorch-tb-profiler-others12")}
    for folder in leftovers.values():  # what earlier versions left: one temp cache per start
        (folder / "v5-0123456789abcdef0123456789abcdef").mkdir(parents=True)
    (leftovers["pytorch-tb-profiler-others12"] / "notes.txt").write_text("not ours")
    for name in ("pytorch-tb-profiler-ab12cd34", "pytorch-tb-profiler-others12"):
        os.utime(leftovers[name], (old, old))
    with caplog.at_level(logging.WARNING, logger="tb_plugin.jobs.cache"):
        first, second = ParseCache(wanted), ParseCache(wanted)
    assert first.directory == second.directory  # reused, not a new folder per start
    assert first.directory.parent == temp_folder and first.directory.is_dir()
    assert first.problem == second.problem
    assert first.problem is not None and str(wanted) in first.problem and str(first.directory) in first.problem
    assert [r.getMessage() for r in caplog.records] == [first.problem]  # said once
    assert not leftovers["pytorch-tb-profiler-ab12cd34"].exists()  # an old temp cache of ours: removed
    assert leftovers["pytorch-tb-profiler-young123"].exists()  # maybe another server's, in use
    assert leftovers["pytorch-tb-profiler-others12"].exists()  # holds something else
    assert sorted(p.name for p in temp_folder.iterdir() if p.name.startswith("pytorch-tb-profiler-cache")) == [
        first.directory.name]


def test_the_page_says_which_cache_folder_is_used(tensorboard_app: Any, temp_folder: Path, tmp_path: Path) -> None:
    (tmp_path / "a_file").write_text("not a folder")
    logdir = tmp_path / "logdir"
    (logdir / "run").mkdir(parents=True)
    shutil.copy2(TRACES[0], logdir / "run" / TRACES[0].name)
    client = tensorboard_app(logdir, profiler_cache_dir=str(tmp_path / "a_file" / "cache"))
    body = wait_until_settled(client, expect_spans=1)
    assert body["runs"][0]["workers"][0]["spans"][0]["state"] == "ready"
    (error,) = body["errors"]
    assert error.startswith(f"the cache folder {tmp_path / 'a_file' / 'cache'} cannot be used")
    assert str(temp_folder) in error


def _one_trace(tmp_path: Path) -> Path:
    logdir = tmp_path / "logdir"
    (logdir / "run").mkdir(parents=True)
    shutil.copy2(TRACES[2], logdir / "run" / TRACES[2].name)  # the transformer: 2.3 MB parsed, 4 MB with its views
    return logdir


def test_a_trace_says_ready_with_its_cache_within_the_bound(tensorboard_app: Any, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The cache is trimmed before a trace turns ready (it was trimmed just after: a run that said ready could
    still hold its cache over the bound, which a test saw under load)."""
    from tb_plugin.jobs import opening

    cache = tmp_path / "cache"
    at_ready: list[int] = []
    real = opening.EntryOpener.loaded

    def loaded(self: Any, job: Any, model: Any) -> None:
        at_ready.append(_entries_bytes(cache))
        real(self, job, model)

    monkeypatch.setattr(opening.EntryOpener, "loaded", loaded)
    client = tensorboard_app(_one_trace(tmp_path), profiler_cache_max_mb=3)
    assert wait_until_settled(client, expect_spans=1)["runs"][0]["workers"][0]["spans"][0]["state"] == "ready"
    assert len(at_ready) == 1 and at_ready[0] <= 3 << 20, at_ready  # its 4 MB entry went before it said ready
    assert client.get(f"{API}/operators?run=run&worker=vm_562&span=1").status_code == 200  # opened from a copy


def test_parts_added_after_ready_are_counted_and_the_cache_trimmed(tensorboard_app: Any, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The views a loader adds to an entry after its trace turned ready (``api/warm.py`` ``Later``) count against
    the bound as they land, and the cache is trimmed then (they were held uncounted until the next load). The
    parts wait at a gate (``gated_views.py``) so that they land after "ready", whatever the machine's load."""
    from tb_plugin.api import warm
    from tests.unit.gated_views import GatedViews
    from tests.unit.test_warm_views import _models, _plugin
    from tests.unit.test_warm_views_later import _open_gate, _until

    gate = tmp_path / "gate"
    os.mkfifo(gate)
    monkeypatch.setattr(warm, "WarmViews", lambda peaks: GatedViews(peaks, str(gate)))
    cache = tmp_path / "cache"
    client = tensorboard_app(_one_trace(tmp_path), profiler_cache_max_mb=3)
    body = wait_until_settled(client, expect_spans=1)
    (model,) = _models(client, body)
    assert warm.awaiting_any(model)  # ready with its parse: every view is still to come
    (entry,) = [p for p in cache.iterdir() if not p.name.startswith(".")]
    parsed = _entries_bytes(cache)
    assert 0 < parsed <= 3 << 20  # the parse alone is within the bound
    scheduler = _plugin(client).workspace.scheduler
    assert scheduler.cache.total_bytes() == parsed
    _open_gate(gate)
    _until(lambda: not warm.awaiting_any(model) and scheduler.cache.total_bytes() == _entries_bytes(cache) <= 3 << 20,
           "the parts landed, were counted, and the cache was trimmed")
    assert not entry.exists()  # with its views it outgrew the bound: evicted (its model was copied when opened)
    assert client.get(f"{API}/operators?run=run&worker=vm_562&span=1").status_code == 200
