"""The timeline index against the raw JSON: completeness at full zoom, exact merge accounting, flows, counters."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tb_plugin.loader import load_trace
from tb_plugin.timeline.details import event_details, search
from tb_plugin.timeline.index import timeline_index
from tb_plugin.timeline.window import window
from tests.conftest import API, raw_events, wait_until_settled

DRAWN = {"X"}




def all_ids(answer: dict[str, Any]) -> list[int]:
    return [i for tr in answer["tracks"] for lane in tr["lanes"] for i in lane["events"]["id"]]


def test_full_zoom_shows_every_event_exactly_once(h200_transformer: tuple[Path, Any]) -> None:
    path, model = h200_transformer
    events = [e for e in raw_events(path) if e.get("ph") == "X" and isinstance(e.get("pid"), int)]
    ix = timeline_index(model)
    # One window so fine that every event with a duration is at least a pixel wide.
    lo = min(e["ts"] for e in events)
    hi = max(e["ts"] + e["dur"] for e in events)
    shortest = min(e["dur"] for e in events if e["dur"] > 0)
    answer = window(model, lo, hi, int((hi - lo) / shortest) + 1)
    seen: Counter[int] = Counter(all_ids(answer))
    assert max(seen.values()) == 1
    zero = sum(1 for e in events if e["dur"] == 0)  # zero-length events are boxes at any zoom
    assert len(seen) + zero >= len(events)
    assert len(ix.start) == len(events)
    names = Counter(e["name"] for e in events if e["dur"] > 0)
    got = Counter(model.strings[int(model["events"]["name"][i])] for i in seen)
    assert got == names


def test_merged_boxes_account_for_exactly_the_events_they_replace(h200_transformer: tuple[Path, Any]) -> None:
    _, model = h200_transformer
    ix = timeline_index(model)
    for width in (200, 2000):
        answer = window(model, ix.t_min, ix.t_max, width)
        px = answer["px_us"]
        shown = sum(len(lane["events"]["id"]) for tr in answer["tracks"] for lane in tr["lanes"])
        merged = sum(sum(lane["boxes"]["count"]) for tr in answer["tracks"] for lane in tr["lanes"])
        assert shown + merged == len(ix.start)
        wide = int((ix.dur.astype(np.float64) >= px).sum())
        assert shown == wide
        for tr in answer["tracks"]:
            for lane in tr["lanes"]:
                assert all(0 <= b <= 1 for b in lane["boxes"]["busy"])
        # the answer is bounded by the width, not by the trace
        assert len(json.dumps(answer)) < 1_000_000


def test_flows_join_launches_to_their_kernels(h200_transformer: tuple[Path, Any]) -> None:
    path, model = h200_transformer
    events = raw_events(path)
    launches = {e["args"]["correlation"]: e for e in events
                if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    ix = timeline_index(model)
    answer = window(model, ix.t_min, ix.t_max, 2000)
    assert answer["flows"]
    ev = model["events"]
    for src, _, _, dst, _, _, _, _ in answer["flows"]:
        corr = int(ev["correlation"][dst])
        assert int(ev["correlation"][src]) == corr
        assert model.strings[int(ev["name"][src])] == launches[corr]["name"]


def test_utilization_counter_equals_busy_time(h200_transformer: tuple[Path, Any]) -> None:
    path, model = h200_transformer
    kernels = sorted((e["ts"], e["ts"] + e["dur"]) for e in raw_events(path) if e.get("cat") == "kernel")
    ix = timeline_index(model)
    t0, t1, width = ix.t_min, ix.t_max, 500
    answer = window(model, t0, t1, width)
    util = next(c for c in answer["counters"] if c["name"] == "GPU 0 utilization")["values"]
    px = (t1 - t0) / width
    busy_counter = sum(util) * px
    busy, end = 0.0, -np.inf  # union of kernel intervals, recomputed here
    for s, e in kernels:
        if s > end:
            busy += e - s
            end = e
        elif e > end:
            busy += e - end
            end = e
    assert busy_counter == pytest.approx(busy, rel=0.002)  # values are rounded to 3 decimals per pixel


def test_memory_counter_keeps_the_peak(h200_transformer: tuple[Path, Any]) -> None:
    path, model = h200_transformer
    peak = max(e["args"]["Total Allocated"] for e in raw_events(path)
               if e.get("name") == "[memory]" and e["args"].get("Device Type") == 1)
    ix = timeline_index(model)
    for width in (50, 2000):
        answer = window(model, ix.t_min, ix.t_max, width)
        series = next(c for c in answer["counters"] if c["name"] == "GPU 0 memory allocated")["values"]
        assert max(v for v in series if v is not None) == peak


def test_event_details_and_search(h200_transformer: tuple[Path, Any]) -> None:
    _, model = h200_transformer
    hits = search(model, "NVJET", 0, 50)
    assert hits["total"] > 5 and len(hits["items"]) == min(50, hits["total"])
    starts = [h["start_us"] for h in hits["items"]]
    assert starts == sorted(starts)
    # The first kernels started before the profiler saw their launch; later ones have their launching call.
    details = [event_details(model, h["id"]) for h in hits["items"]]
    kernel = next(d for d in details if d["launched_by"] is not None)
    assert kernel["kind"] == "kernel" and kernel["args"]["grid_x"] > 0
    assert kernel["launched_by"]["name"] in ("cudaLaunchKernel", "cuLaunchKernelEx", "cuLaunchKernel")
    assert kernel["operator"]["name"].startswith("aten::")
    launch = event_details(model, kernel["launched_by"]["id"])
    assert kernel["id"] in [k["id"] for k in launch["launched"]]
    assert launch["call_stack"] and all("): " in frame for frame in launch["call_stack"])


def test_trace_routes(tensorboard_app: Any, real_traces: Path, tmp_path: Path) -> None:
    run = real_traces / "h200" / "transformer_bf16"
    client = tensorboard_app(run)
    wait_until_settled(client)
    q = "run=transformer_bf16&worker=vm_562&span=1"
    r = client.get(f"{API}/trace/window?{q}&width_px=1500")
    assert r.status_code == 200 and r.get_json()["tracks"]
    backwards = client.get(f"{API}/trace/window?{q}&start_us=5&end_us=1").get_json()  # read forwards
    assert (backwards["t0"], backwards["t1"]) == (1, 5)
    empty = client.get(f"{API}/trace/window?{q}&start_us=5&end_us=5").get_json()  # 1 ns wide
    assert (empty["t0"], empty["t1"]) == (5, 5.001)
    assert client.get(f"{API}/trace/window?{q}&collapsed=1,x").status_code == 400
    hit = client.get(f"{API}/trace/search?{q}&q=aten::mm&limit=2").get_json()
    assert hit["total"] >= 2 and len(hit["items"]) == 2
    assert client.get(f"{API}/trace/event?{q}&id={hit['items'][0]['id']}").get_json()["name"] == "aten::mm"
    assert client.get(f"{API}/trace/event?{q}&id=99999999").status_code == 404
    original_path = next(run.glob("*.gz"))
    original, original_name = original_path.read_bytes(), original_path.name
    r = client.get(f"{API}/trace/file?{q}")
    assert r.status_code == 200 and r.data == original
    from werkzeug.http import parse_options_header

    assert parse_options_header(r.headers["Content-Disposition"]) == ("attachment", {"filename": original_name})


def test_range_summary_counts_and_clips(tmp_path: Path) -> None:
    from tb_plugin.timeline.details import range_summary
    from tests.conftest import cpu_op, write_trace

    events = [cpu_op("outer", 0, 100), cpu_op("inner", 10, 20), cpu_op("inner", 50, 20), cpu_op("late", 200, 10)]
    model = load_trace(str(write_trace(tmp_path / "w.1.pt.trace.json", events)))
    rows = {r["name"]: r for r in range_summary(model, 0, 60)["rows"]}
    assert rows["outer"]["count"] == 1 and rows["outer"]["total_us"] == 60
    assert rows["outer"]["self_us"] == pytest.approx(60 * 60 / 100)  # self 60 µs of 100, 60 % selected
    assert rows["inner"]["count"] == 2 and rows["inner"]["total_us"] == 30  # 20 + the first 10 of the second
    assert "late" not in rows


def test_coarse_windows_of_big_lanes_come_from_bucket_summaries(h200_transformer: tuple[Path, Any],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """With summaries forced on every lane, a whole-trace window still accounts for every event exactly, long
    events are drawn one by one, and the busy time in the boxes is the events' own time."""
    from tb_plugin.timeline import index as index_module
    from tb_plugin.timeline import window as window_module

    _, model = h200_transformer
    monkeypatch.setattr(index_module, "SUMMARY_MIN_EVENTS", 10)
    monkeypatch.setattr(window_module, "SUMMARY_FACTOR", 0)
    ix = index_module.timeline_index.__wrapped__(model)  # a fresh index with summaries, not the memoised one
    assert ix.summaries
    monkeypatch.setattr(window_module, "timeline_index", lambda _m: ix)
    width = 500
    answer = window_module.window(model, ix.t_min, ix.t_max, width)
    px = answer["px_us"]
    assert px >= ix.bucket_us
    shown = sum(len(lane["events"]["id"]) for tr in answer["tracks"] for lane in tr["lanes"])
    merged = sum(sum(lane["boxes"]["count"]) for tr in answer["tracks"] for lane in tr["lanes"])
    assert shown + merged == len(ix.start)
    assert shown == int((ix.dur.astype(np.float64) >= px).sum())
    busy = sum(b * d for tr in answer["tracks"] for lane in tr["lanes"]
               for b, d in zip(lane["boxes"]["busy"], lane["boxes"]["d"]))
    small = float(ix.dur[ix.dur.astype(np.float64) < px].astype(np.float64).sum())
    assert busy == pytest.approx(small, rel=0.02)  # busy shares are rounded to 3 decimals and capped at 1
