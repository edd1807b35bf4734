"""Which tracks and counters the Trace view gets, in what order, and how many lanes of each (real traces)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from tb_plugin.loader import load_trace
from tb_plugin.timeline.index import timeline_index
from tb_plugin.timeline.window import lane_limits, window
from tests.conftest import API, wait_until_settled

REPO = Path(__file__).resolve().parents[2]


def _load(folder: Path) -> Any:
    return load_trace(str(sorted(folder.glob("*.pt.trace.json.gz"))[0]))


@pytest.fixture(scope="module")
def transformer() -> Any:
    """samples/transformer_bf16: with_stack, a main thread 28 levels deep, GPU 0 stream 7, CPU memory max 8 B."""
    return _load(REPO / "samples" / "transformer_bf16")


def test_gpu_streams_come_first(transformer: Any) -> None:
    ix = timeline_index(transformer)
    assert [(t.kind, t.label, len(t.lanes)) for t in ix.tracks] == [
        ("gpu", "GPU 0 · stream 7", 3),
        ("cpu", "thread 699 (python3)", 28),
        ("cpu", "thread 774 (python3)", 8),
    ]
    answer = window(transformer, ix.t_min, ix.t_max, 400)
    assert [t["kind"] for t in answer["tracks"]] == ["gpu", "cpu", "cpu"]


def test_kineto_overhead_process_is_not_a_track() -> None:
    """samples/ddp_resnet rank 0 holds one 'Activity Buffer Request' in pid -1 (no process_name): no track."""
    folder = REPO / "samples" / "ddp_resnet"
    path = sorted(folder.glob("rank0.*.pt.trace.json.gz"))[0]
    with gzip.open(path) as fh:
        overhead = [e for e in json.load(fh)["traceEvents"] if e.get("pid") == -1]
    assert [e["name"] for e in overhead] == ["Activity Buffer Request"]
    ix = timeline_index(load_trace(str(path)))
    assert all(t.pid >= 0 for t in ix.tracks)
    assert not any("process" in t.process_label for t in ix.tracks)
    assert [t.kind for t in ix.tracks][:1] == ["gpu"]


def test_empty_memory_counters_are_left_out(transformer: Any, real_traces: Path) -> None:
    ix = timeline_index(transformer)
    names = [c["name"] for c in window(transformer, ix.t_min, ix.t_max, 100)["counters"]]
    # CPU memory never exceeds 8 B in this trace: no row; GPU 0 memory peaks at 674 MiB: a row
    assert "CPU memory allocated" not in names
    assert {"GPU 0 memory allocated", "GPU 0 memory reserved"} <= set(names)
    resnet = _load(real_traces / "h200" / "resnet18_workers0")  # CPU memory up to 55 MiB: kept
    rx = timeline_index(resnet)
    kept = window(resnet, rx.t_min, rx.t_max, 100)["counters"]
    cpu = next(c for c in kept if c["name"] == "CPU memory allocated")
    assert cpu["max"] == 57803264


def test_levels_send_the_first_lanes_only(transformer: Any) -> None:
    ix = timeline_index(transformer)
    main = ix.tracks[1].id
    full = window(transformer, ix.t_min, ix.t_max, 800)
    four = window(transformer, ix.t_min, ix.t_max, 800, levels={main: 4})
    track = next(t for t in four["tracks"] if t["id"] == main)
    assert sorted(lane["depth"] for lane in track["lanes"]) == [0, 1, 2, 3]
    assert track["depths"] == 28 and track["collapsed"] is False
    whole = next(t for t in full["tracks"] if t["id"] == main)
    assert len(whole["lanes"]) == 28
    # the other tracks are untouched (names are indices into each answer's own table: compare event ids)
    def ids(answer: dict[str, Any]) -> list[list[int]]:
        return [lane["events"]["id"] for t in answer["tracks"] if t["id"] != main for lane in t["lanes"]]
    assert ids(four) == ids(full) and ids(full)
    one = window(transformer, ix.t_min, ix.t_max, 800, levels={main: 1})
    assert next(t for t in one["tracks"] if t["id"] == main)["collapsed"] is True


def test_host_levels_limit_deep_host_threads_only(transformer: Any) -> None:
    """The first window of the Trace view: threads of 28 and 8 levels send 4; GPU 0's stream (3) all."""
    ix = timeline_index(transformer)
    answer = window(transformer, ix.t_min, ix.t_max, 600, host_levels=4)
    shown = [(t["kind"], t["depths"], t["shown_depths"], len(t["lanes"])) for t in answer["tracks"]]
    assert shown == [("gpu", 3, 3, 3), ("cpu", 28, 4, 4), ("cpu", 8, 4, 4)]
    # a thread one level deeper than host_levels is sent whole (hiding one level saves nothing)
    assert [t["shown_depths"] for t in window(transformer, ix.t_min, ix.t_max, 600, host_levels=7)["tracks"]] == [3, 7, 8]
    # a track the client names keeps its own count
    named = window(transformer, ix.t_min, ix.t_max, 600, levels={ix.tracks[1].id: 10}, host_levels=4)
    assert [t["shown_depths"] for t in named["tracks"]] == [3, 10, 4]
    assert [t["shown_depths"] for t in window(transformer, ix.t_min, ix.t_max, 600)["tracks"]] == [3, 28, 8]


def test_lane_limits_take_the_fewer_lanes() -> None:
    assert lane_limits(frozenset({1}), {1: 5, 2: 3, 3: 0}) == {1: 1, 2: 3, 3: 1}
    assert lane_limits(frozenset(), {}) == {}


def test_levels_parameter(tensorboard_app: Any, real_traces: Path) -> None:
    client = tensorboard_app(real_traces / "h200" / "transformer_bf16")
    wait_until_settled(client)
    q = f"{API}/trace/window?run=transformer_bf16&worker=vm_562&span=1&width_px=300"
    tracks = client.get(q).get_json()["tracks"]
    deep = max(tracks, key=lambda t: t["depths"])
    limited = client.get(f"{q}&levels={deep['id']}:2").get_json()["tracks"]
    assert sorted(lane["depth"] for t in limited if t["id"] == deep["id"] for lane in t["lanes"]) == [0, 1]
    for bad in ("1", "1:x", "1:2:3", "²:1", "-1:2", "1:2,"):
        r = client.get(f"{q}&levels={bad}")
        assert r.status_code == 400 and "id:count" in r.get_json()["error"]
    first = client.get(f"{q}&host_levels=4").get_json()["tracks"]
    assert [t["shown_depths"] for t in first] == [min(t["depths"], 4) if t["kind"] == "cpu" and t["depths"] > 5
                                                  else t["depths"] for t in first]
    assert client.get(f"{q}&host_levels=-1").status_code == 400


def test_an_old_stream_id_is_not_named_twice(real_traces: Path) -> None:
    """PyTorch 1.9 (kineto_v100) gives GPU events the tid "stream 7": the track is "stream 7", not "stream stream 7"."""
    ix = timeline_index(_load(real_traces / "kineto_v100" / "resnet50_num_workers_0"))
    assert [t.label for t in ix.tracks if t.kind == "gpu"] == ["GPU 0 · stream 7"]


def test_a_spawn_jobs_main_thread_opens_at_the_step_level() -> None:
    """samples/ddp_resnet (torch.multiprocessing.spawn): the main thread nests ProfilerStep 7 levels deep, under
    <module>/spawn_main/_main/_bootstrap/…; the first window skips those 7 levels, so the step is its first lane."""
    model = _load(REPO / "samples" / "ddp_resnet")
    ix = timeline_index(model)
    first = window(model, ix.t_min, ix.t_max, 600, host_levels=4)
    main = next(t for t in first["tracks"] if t["kind"] == "cpu" and t["skipped"])
    assert (main["skipped"], main["depths"], main["shown_depths"]) == (7, 30, 4)
    lane0 = next(lane for lane in main["lanes"] if lane["depth"] == 0)
    names = {first["names"][n] for n in lane0["events"]["n"]}
    assert {"ProfilerStep#2", "ProfilerStep#3"} <= names
    assert all(t["skipped"] == 0 for t in first["tracks"] if t is not main)  # the other threads open as before
    # the client keeps the skip it was given; skip 0 shows the frames above again
    kept = window(model, ix.t_min, ix.t_max, 600, levels={main["id"]: 4}, skips={main["id"]: 7})
    assert next(t for t in kept["tracks"] if t["id"] == main["id"])["skipped"] == 7
    whole = window(model, ix.t_min, ix.t_max, 600, skips={main["id"]: 0})
    top = next(t for t in whole["tracks"] if t["id"] == main["id"])
    assert (top["skipped"], top["depths"]) == (0, 37)
    assert whole["names"][next(la for la in top["lanes"] if la["depth"] == 0)["events"]["n"][0]].endswith("<module>")
