"""The Trace view's index built by the loader process and stored beside the parse (timeline/stored.py).

The server must get exactly the index it would have built itself, find it without computing anything, draw the
same windows from it, and shrug off a damaged one (computing it again)."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import numpy as np
import pytest

from tb_plugin.catalog.catalog import TraceFile
from tb_plugin.jobs.cache import ParseCache
from tb_plugin.jobs.scheduler import READY, LoadScheduler
from tb_plugin.loader import load_trace
from tb_plugin.model.derived import _key
from tb_plugin.timeline.index import TimelineIndex, timeline_index
from tb_plugin.timeline.stored import MARKER, StoredIndex, read_index, write_index
from tb_plugin.timeline.window import window

DATA = Path(__file__).resolve().parents[1] / "data"
TRANSFORMER = next((DATA / "h200" / "transformer_bf16").glob("*.pt.trace.json.gz"))
TRACES = [TRANSFORMER, next((DATA / "h200" / "ddp_resnet50").glob("rank0.*.gz")),
          next(DATA.rglob("*.pt.trace.json*"))]


def assert_same_index(got: TimelineIndex, want: TimelineIndex) -> None:
    for field in dataclasses.fields(TimelineIndex):
        a, b = getattr(got, field.name), getattr(want, field.name)
        if isinstance(b, np.ndarray):
            assert a.dtype == b.dtype, field.name
            np.testing.assert_array_equal(a, b, err_msg=field.name)
        elif field.name == "summaries":
            assert sorted(a) == sorted(b)
            for lane in b:
                for sub in dataclasses.fields(b[lane]):
                    x, y = getattr(a[lane], sub.name), getattr(b[lane], sub.name)
                    assert x.dtype == y.dtype, sub.name
                    np.testing.assert_array_equal(x, y)
        else:
            assert a == b, field.name


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.parent.name)
def test_a_stored_index_is_the_index(path: Path, tmp_path: Path) -> None:
    built = timeline_index(load_trace(str(path)))
    write_index(built, tmp_path)
    stored = read_index(tmp_path)
    assert stored is not None
    assert_same_index(stored, built)


def test_the_transformer_index_has_summaries_and_long_events(tmp_path: Path) -> None:
    """The stored form must carry the coarse summaries: a trace whose lanes are all short would not test them."""
    import tb_plugin.timeline.index as index_module

    model = load_trace(str(TRANSFORMER))
    old = index_module.SUMMARY_MIN_EVENTS
    index_module.SUMMARY_MIN_EVENTS = 1000  # the test trace is small: summarise its busier lanes
    try:
        built = index_module.timeline_index.__wrapped__(model)  # type: ignore[attr-defined]
    finally:
        index_module.SUMMARY_MIN_EVENTS = old
    assert built.summaries and sum(len(s.long_pos) for s in built.summaries.values()) > 0
    write_index(built, tmp_path)
    stored = read_index(tmp_path)
    assert stored is not None
    assert_same_index(stored, built)


def wait_ready(scheduler: LoadScheduler, file: TraceFile, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = scheduler.status(file.key)
        if status is not None and status.state == READY:
            return
        assert status is None or status.error is None, status.error
        time.sleep(0.05)
    raise AssertionError("not ready in time")


def load_through_scheduler(tmp_path: Path, path: Path) -> tuple[LoadScheduler, TraceFile]:
    scheduler = LoadScheduler(ParseCache(tmp_path / "cache"), max_workers=1, stored=StoredIndex())
    file = TraceFile(run="r", worker="w", span="1", url=str(path), size=path.stat().st_size,
                     mtime=path.stat().st_mtime)
    scheduler.request(file)
    wait_ready(scheduler, file)
    return scheduler, file


def test_the_loader_process_stores_the_index_and_the_server_finds_it(tmp_path: Path) -> None:
    scheduler, file = load_through_scheduler(tmp_path, TRANSFORMER)
    try:
        model = scheduler.model(file.key)
        assert model is not None
        entry = scheduler.cache.entry(file.identity)
        assert (entry / MARKER).is_file()
        # found before anyone asked, so the first window computes no index
        assert _key(timeline_index, ()) in model.memo
        fresh = load_trace(str(TRANSFORMER))
        assert_same_index(timeline_index(model), timeline_index(fresh))
        ix = timeline_index(fresh)
        for t0, t1 in ((ix.t_min, ix.t_max), (ix.t_min + 1000.0, ix.t_min + 3000.0)):
            assert window(model, t0, t1, 2000) == window(fresh, t0, t1, 2000)
    finally:
        scheduler.close()


def test_a_damaged_stored_index_is_computed_again(tmp_path: Path) -> None:
    scheduler, file = load_through_scheduler(tmp_path, TRANSFORMER)
    entry = scheduler.cache.entry(file.identity)
    scheduler.close()
    (entry / "timeline.events.arrow").write_bytes(b"not arrow")
    scheduler, file = load_through_scheduler(tmp_path, TRANSFORMER)  # a restart: the entry is in the cache
    try:
        model = scheduler.model(file.key)
        assert model is not None and _key(timeline_index, ()) not in model.memo
        assert_same_index(timeline_index(model), timeline_index(load_trace(str(TRANSFORMER))))
    finally:
        scheduler.close()
