"""GPU insights (idle time, launches, queue length, bandwidth, kernel sequences, critical path, annotations) on
hand-checked synthetic traces and on real ones (every sample, 2021 V100 and 2026 H200 traces)."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import msgspec
import pytest

from tb_plugin.analysis.annotations import annotation_times
from tb_plugin.analysis.bandwidth import memory_bandwidth
from tb_plugin.analysis.critical_path import critical_path
from tb_plugin.analysis.idle import idle_time
from tb_plugin.analysis.launches import launch_stats
from tb_plugin.analysis.queues import queue_length
from tb_plugin.analysis.sequences import kernel_sequences
from tb_plugin.analysis.steps import find_steps
from tb_plugin.loader import load_trace
from tb_plugin.model import TraceModel
from tb_plugin.model.errors import NotFound, UnknownStep
from tests.conftest import (
    SAMPLES,
    distinct_trace_files,
    parsed_trace,
    sample_trace_files,
    write_trace,
)
from tests.unit.test_views_synthetic import kernel, launch, op, step


def model_of(tmp_path: Path, events: list[dict[str, Any]]) -> TraceModel:
    return load_trace(str(write_trace(tmp_path / "w.1.pt.trace.json", events)))


def four_kernels() -> list[dict[str, Any]]:
    """One stream in a step [0, 100): host wait, kernel wait and other gaps, one kernel shorter than its launch."""
    return [
        step(1, 0, 100),
        launch(5, 5, corr=1), kernel("A", 10, 10, corr=1),  # leading gap [0, 10): launched at 5 > 0: host wait
        launch(12, 5, corr=2), kernel("B", 22, 8, corr=2),  # [20, 22): launched before 20, short: kernel wait
        launch(50, 5, corr=3), kernel("C", 60, 10, corr=3),  # [30, 60): launched at 50 > 30: host wait
        launch(65, 5, corr=4), kernel("D", 90, 4, corr=4),  # [70, 90): launched at 65, 20 µs: other
    ]  # trailing gap [94, 100): no next kernel: other


def test_idle_time_splits_every_gap_and_adds_up_to_the_window(tmp_path: Path) -> None:
    answer = idle_time(model_of(tmp_path, four_kernels()))
    assert answer["window"] == {"start_us": 0, "end_us": 100}
    (s,) = answer["streams"]
    assert (s["device"], s["stream"]) == (0, 7)
    assert s["busy_us"] == 32
    assert (s["host_wait_us"], s["kernel_wait_us"], s["other_us"]) == (40, 2, 26)
    assert s["idle_us"] == 68 and s["busy_us"] + s["idle_us"] == 100
    assert s["steps"] == [{"step": "1", "busy_us": 32, "host_wait_us": 40, "kernel_wait_us": 2, "other_us": 26}]
    assert s["longest_gaps"][0] == {"start_us": 30, "end_us": 60, "category": "host_wait"}


def test_a_one_kernel_trace_is_not_100_percent_busy(tmp_path: Path) -> None:
    """HTA measures from the first to the last kernel; the step window shows the starved rest."""
    (s,) = idle_time(model_of(tmp_path, [step(1, 0, 100), launch(40, 5, corr=1),
                                         kernel("k", 50, 10, corr=1)]))["streams"]
    assert (s["busy_us"], s["host_wait_us"], s["other_us"]) == (10, 50, 40)


def test_launch_stats_delays_percentiles_short_kernels_and_outliers(tmp_path: Path) -> None:
    answer = launch_stats(model_of(tmp_path, four_kernels()))
    summary = answer["summary"]
    assert (summary["kernels"], summary["launched"], summary["unlaunched"]) == (4, 4, 0)
    assert summary["launch_delay_p50_us"] == 10  # delays 5, 10, 10, 25
    assert summary["launch_delay_p95_us"] == pytest.approx(22.75)  # numpy's linear interpolation
    assert (summary["short_kernels"], summary["short_kernels_us"], summary["outliers"]) == (1, 4, 1)
    first = answer["rows"][0]
    assert (first["name"], first["launch_delay_us"], first["cpu_duration_us"], first["gpu_duration_us"]) == \
        ("D", 25, 5, 4)
    assert first["short"] and first["outlier"] and first["launch_name"] == "cudaLaunchKernel"
    assert [r["launch_delay_us"] for r in answer["rows"]] == [25, 10, 10, 5]


def test_kernels_without_their_launch_are_counted_not_dropped(tmp_path: Path) -> None:
    events = [step(1, 0, 100), launch(5, 5, corr=1), kernel("a", 10, 10, corr=1), kernel("b", 30, 7, corr=99)]
    summary = launch_stats(model_of(tmp_path, events))["summary"]
    assert (summary["kernels"], summary["launched"], summary["unlaunched"], summary["unlaunched_us"]) == (2, 1, 1, 7)


def test_a_host_op_with_a_stream_arg_is_not_a_kernel(tmp_path: Path) -> None:
    """Triton's launcher is a cpu_op with a ``stream`` arg; HTA counts it as a 95 µs kernel."""
    events = [step(1, 0, 200), op("triton_launcher", 10, 95) | {"args": {"stream": 7}},
              launch(20, 5, corr=1, cat="cuda_driver", name="cuLaunchKernel"), kernel("triton_k", 40, 1.76, corr=1)]
    answer = launch_stats(model_of(tmp_path, events))
    assert answer["summary"]["kernels"] == 1
    assert answer["rows"][0]["gpu_duration_us"] == pytest.approx(1.76)
    assert answer["rows"][0]["launch_name"] == "cuLaunchKernel"


def test_queue_length_summary_and_series(tmp_path: Path) -> None:
    answer = queue_length(model_of(tmp_path, four_kernels()), 10)
    (s,) = answer["streams"]
    # joins at launch start, leaves at the end: 5→1, 12→2, 20→1, 30→0, 50→1, 65→2, 70→1, 94→0
    assert s["summary"] == {"max": 2, "mean": pytest.approx(0.82), "time_at_max_us": 13, "time_blocked_us": 0}
    assert answer["bucket_us"] == 10
    assert s["series"]["max"] == [1, 2, 1, 0, 0, 1, 2, 1, 1, 1]


def test_memory_bandwidth_by_direction(tmp_path: Path) -> None:
    def copy(name: str, ts: float, dur: float, nbytes: int, cat: str = "gpu_memcpy") -> dict[str, Any]:
        return kernel(name, ts, dur, corr=-1, cat=cat, bytes=nbytes)

    events = [step(1, 0, 100), copy("Memcpy HtoD (Pageable -> Device)", 10, 10, 1000),
              copy("Memcpy HtoD (Pinned -> Device)", 15, 10, 2000), copy("Memcpy DtoH (Device -> Pinned)", 40, 10, 500),
              copy("Memset (Device)", 60, 4, 4000, cat="gpu_memset")]
    answer = memory_bandwidth(model_of(tmp_path, events), 10)
    rows = {r["direction"]: r for r in answer["rows"]}
    assert set(rows) == {"H2D", "D2H", "Memset"}
    h2d = rows["H2D"]
    assert (h2d["count"], h2d["bytes"], h2d["busy_us"]) == (2, pytest.approx(3000), 20)
    assert h2d["mean_gbps"] == pytest.approx(0.15) and h2d["peak_gbps"] == pytest.approx(0.3)
    assert h2d["series"]["gbps"][1] == pytest.approx((0.1 * 5 + 0.3 * 5) / 10)  # bucket [10, 20)
    assert rows["Memset"]["peak_gbps"] == pytest.approx(1.0)


def test_kernel_sequences_count_overlaps_once(tmp_path: Path) -> None:
    names, durs = "AAABCDCD", {"A": 1, "B": 2, "C": 5, "D": 5}
    events: list[dict[str, Any]] = [step(1, 0, 200)]
    t = 1.0
    for i, n in enumerate(names):
        events += [launch(t - 0.5, 0.2, corr=i + 1), kernel(n, t, durs[n], corr=i + 1)]
        t += durs[n] + 1
    answer = kernel_sequences(model_of(tmp_path, events), 2, 10)
    got = [(s["kernels"], s["count"], s["total_us"]) for s in answer["sequences"]]
    assert got == [(["C", "D"], 2, 20), (["A", "A"], 2, 3)]  # "A A" covers 3 kernels, not 4
    cd = answer["sequences"][0]
    assert (cd["span_us"], cd["gap_us"]) == (11, 1)
    assert [o["start_us"] for o in cd["occurrences"]] == [10, 22]  # A 1, 3, 5; B 7; C 10; D 16; C 22


def critical_events() -> list[dict[str, Any]]:
    return [
        step(1, 0, 80),
        op("aten::mm", 2, 18), launch(5, 5, corr=1), kernel("K1", 12, 28, corr=1),
        op("aten::relu", 21, 5), launch(22, 3, corr=2), kernel("K2", 40, 30, corr=2),
        launch(30, 42, corr=-1, name="cudaDeviceSynchronize"),
        op("aten::add", 72, 8), launch(73, 3, corr=3), kernel("K3", 78, 12, corr=3),
    ]


def test_critical_path_follows_launches_streams_and_syncs(tmp_path: Path) -> None:
    cp = critical_path(model_of(tmp_path, critical_events()), "1")
    assert (cp["start_us"], cp["end_us"]) == (0, 90)
    path = [(s["start_us"], s["end_us"], s["category"], s["name"]) for s in cp["segments"]]
    assert path == [
        (0, 2, "annotation", "ProfilerStep#1"), (2, 5, "cpu_op", "aten::mm"), (5, 10, "launch", "cudaLaunchKernel"),
        (10, 12, "launch_delay", None), (12, 40, "kernel", "K1"), (40, 70, "kernel", "K2"),
        (70, 72, "sync", "cudaDeviceSynchronize"), (72, 73, "cpu_op", "aten::add"),
        (73, 76, "launch", "cudaLaunchKernel"), (76, 78, "launch_delay", None), (78, 90, "kernel", "K3"),
    ]
    shares = {s["category"]: s["us"] for s in cp["shares"]}
    assert shares == {"kernel": 70, "launch_delay": 4, "launch": 8, "cpu_op": 4, "sync": 2, "annotation": 2}
    assert sum(shares.values()) == cp["duration_us"]
    with pytest.raises(UnknownStep, match="no step '7'"):
        critical_path(model_of(tmp_path, critical_events()), "7")


def test_critical_path_follows_the_backward_thread_back_to_the_main_one(tmp_path: Path) -> None:
    events = [step(1, 0, 50), op("backward", 10, 30, cat="user_annotation"),
              op("MulBackward0", 20, 10, tid=2), launch(22, 4, corr=1, tid=2), kernel("k", 30, 25, corr=1)]
    cp = critical_path(model_of(tmp_path, events), "1")
    path = [(s["start_us"], s["end_us"], s["category"], s["name"]) for s in cp["segments"]]
    assert path == [(0, 10, "annotation", "ProfilerStep#1"), (10, 20, "annotation", "backward"),
                    (20, 22, "cpu_op", "MulBackward0"), (22, 26, "launch", "cudaLaunchKernel"),
                    (26, 30, "launch_delay", None), (30, 55, "kernel", "k")]


def engine_op(name: str, ts: float, dur: float) -> dict[str, Any]:
    """An operator of autograd's backward thread (tid 2): it carries the forward thread's id."""
    return op(name, ts, dur, tid=2) | {"args": {"Fwd thread id": 1, "Sequence number": 7}}


def test_critical_path_follows_the_engine_queue_into_the_backward_thread(tmp_path: Path) -> None:
    """Hand-checked: the main thread waits in "backward" from 13 to 80 while the backward thread runs two
    operators; the path goes through them, the backward annotation keeps only the engine's gaps."""
    events = [step(1, 0, 100), op("aten::mul", 2, 8), op("backward", 10, 70, cat="user_annotation"),
              op("aten::ones_like", 11, 2), engine_op("MulBackward0", 20, 15), op("aten::mul", 22, 8, tid=2),
              engine_op("AddBackward0", 40, 20), op("aten::add_", 82, 10)]
    cp = critical_path(model_of(tmp_path, events), "1")
    path = [(s["start_us"], s["end_us"], s["category"], s["name"]) for s in cp["segments"]]
    assert path == [
        (0, 2, "annotation", "ProfilerStep#1"), (2, 10, "cpu_op", "aten::mul"), (10, 11, "annotation", "backward"),
        (11, 13, "cpu_op", "aten::ones_like"), (13, 20, "annotation", "backward"),
        (20, 22, "cpu_op", "MulBackward0"), (22, 30, "cpu_op", "aten::mul"), (30, 35, "cpu_op", "MulBackward0"),
        (35, 40, "annotation", "backward"), (40, 60, "cpu_op", "AddBackward0"), (60, 80, "annotation", "backward"),
        (80, 82, "annotation", "ProfilerStep#1"), (82, 92, "cpu_op", "aten::add_"),
        (92, 100, "annotation", "ProfilerStep#1"),
    ]
    assert sum(e - s for s, e, _, _ in path) == cp["duration_us"] == 100


def test_critical_path_of_the_h200_transformer_runs_through_the_backward_thread(real_traces: Path) -> None:
    """Hand-counted from the JSON (step 3): "backward" on the main thread (tid 562) lasts 13,205.3 µs, with
    41.6 µs of operators; the backward thread (tid 639) has 10,651.7 µs of operators in it (their union), all of
    which the path takes; the annotation keeps only the engine's gaps between them."""
    model = parsed_trace(next((real_traces / "h200" / "transformer_bf16").glob("*.gz")))
    cp = critical_path(model, "3")
    ev = model["events"]
    on_thread: dict[int, float] = {}
    for s in cp["segments"]:
        if s["id"] is not None and s["category"] in ("cpu_op", "runtime", "launch"):
            tid = int(ev["tid"][s["id"]])
            on_thread[tid] = on_thread.get(tid, 0.0) + s["end_us"] - s["start_us"]
    assert on_thread[639] == pytest.approx(10651.7, abs=0.1)
    backward = [s["end_us"] - s["start_us"] for s in cp["segments"] if s["name"] == "backward"]
    assert sum(backward) == pytest.approx(13205.3 - 10651.7 - 41.6, abs=0.5)
    assert max(backward) < 300
    assert sum(s["end_us"] - s["start_us"] for s in cp["segments"]) == pytest.approx(cp["duration_us"], rel=1e-9)


def test_a_trace_without_steps_offers_annotations_and_ranges(tmp_path: Path) -> None:
    """No ProfilerStep: no giant step "0"; the annotations are offered and walked, and so is a time range."""
    events = [op("forward", 0, 40, cat="user_annotation"), op("aten::mm", 5, 20), launch(10, 5, corr=1),
              kernel("gemm", 20, 30, corr=1), op("optimizer", 60, 10, cat="user_annotation"),
              op("forward", 100, 40, cat="user_annotation"), op("aten::relu", 110, 5)]
    model = model_of(tmp_path, events)
    none = critical_path(model)
    assert (none["steps"], none["step"], none["segments"], none["scope"]["kind"]) == ([], None, [], "none")
    assert "annotation or a time range" in none["note"]
    assert [(a["name"], a["count"], a["total_us"]) for a in none["annotations"]] == [("forward", 2, 80),
                                                                                     ("optimizer", 1, 10)]
    first = critical_path(model, None, "forward", 1)
    assert (first["start_us"], first["end_us"], first["scope"]) == (0, 50, {"kind": "annotation",
                                                                            "label": "forward #1"})
    path = [(s["start_us"], s["end_us"], s["category"], s["name"]) for s in first["segments"]]
    assert path == [(0, 5, "annotation", "forward"), (5, 10, "cpu_op", "aten::mm"),
                    (10, 15, "launch", "cudaLaunchKernel"), (15, 20, "launch_delay", None), (20, 50, "kernel", "gemm")]
    second = critical_path(model, None, "forward", 2)
    assert (second["start_us"], second["end_us"]) == (100, 140)
    ranged = critical_path(model, None, None, 1, (100.0, 120.0))
    assert [(s["start_us"], s["end_us"], s["name"]) for s in ranged["segments"]] == [
        (100, 110, "forward"), (110, 115, "aten::relu"), (115, 120, "forward")]
    assert ranged["scope"]["kind"] == "range"
    for bad, says in [((None, "forward", 3), "no annotation 'forward' #3 in this trace (it has 2)"),
                      (("0", None, 1), "no step '0'"), ((None, "nope", 1), "no annotation 'nope' #1")]:
        with pytest.raises(NotFound) as err:
            critical_path(model, *bad)
        assert str(err.value).startswith(says) and not isinstance(err.value, KeyError)


def test_annotation_times_nest_and_sum_launched_device_time(tmp_path: Path) -> None:
    gpu_range = op("forward", 10, 40, cat="gpu_user_annotation") | {"pid": 0, "tid": 7}
    events = [step(1, 0, 100), op("forward", 0, 50, cat="user_annotation"),
              op("attention", 5, 20, cat="user_annotation"), op("aten::mm", 6, 10), launch(7, 2, corr=1),
              kernel("gemm", 10, 15, corr=1), launch(30, 2, corr=2), kernel("add", 40, 10, corr=2), gpu_range,
              op("optimizer", 60, 30, cat="user_annotation")]
    answer = annotation_times(model_of(tmp_path, events))
    rows = [(r["path"], r["count"], r["host_us"], r["device_us"], r["gpu_range_us"]) for r in answer["rows"]]
    assert rows == [(["forward"], 1, 50, 25, 40), (["forward", "attention"], 1, 20, 15, None),
                    (["optimizer"], 1, 30, 0, None)]
    assert answer["has_gpu_ranges"]


def test_cpu_only_runs_get_empty_answers() -> None:
    model = parsed_trace(next((SAMPLES / "cpu_only").glob("*.gz")))
    assert idle_time(model)["streams"] == []
    assert launch_stats(model)["summary"]["kernels"] == 0 and launch_stats(model)["rows"] == []
    assert queue_length(model)["streams"] == []
    assert memory_bandwidth(model)["rows"] == []
    assert kernel_sequences(model)["sequences"] == []
    assert {s["category"] for s in critical_path(model)["shares"]} <= {"cpu_op", "annotation", "runtime", "host_idle"}


class _Event(msgspec.Struct):
    """The fields of a raw event that the kernel count reads (a missing ``cat`` is ""; the rest of the event is
    skipped, not decoded: 20 times faster than ``json.load`` of the whole trace, a third of this file's time)."""

    cat: Any = ""
    ph: Any = None
    ts: Any = None


class _Trace(msgspec.Struct):
    traceEvents: list[_Event]  # the trace's own key


def raw(path: Path) -> list[_Event]:
    """The events of a gzipped trace as its JSON has them (their ``cat``, ``ph`` and ``ts``)."""
    return msgspec.json.decode(gzip.decompress(path.read_bytes()), type=_Trace).traceEvents


@pytest.mark.parametrize("path", distinct_trace_files() + sample_trace_files(), ids=lambda p: p.parent.name + "/" + p.name[:12])
def test_every_real_trace_adds_up(path: Path) -> None:
    model = parsed_trace(path)
    steps = find_steps(model)
    window = float(steps.end[-1] - steps.start[0])
    for s in idle_time(model)["streams"]:
        assert s["busy_us"] + s["idle_us"] == pytest.approx(window, rel=1e-9)
        assert s["host_wait_us"] + s["kernel_wait_us"] + s["other_us"] == pytest.approx(s["idle_us"], rel=1e-9)
    for name in steps.names:
        cp = critical_path(model, name)
        assert sum(x["us"] for x in cp["shares"]) == pytest.approx(cp["duration_us"], rel=1e-9)
        ends = [s["end_us"] for s in cp["segments"]]
        assert [s["start_us"] for s in cp["segments"][1:]] == pytest.approx(ends[:-1])
    stats = launch_stats(model)["summary"]
    kernels = sum(1 for e in raw(path) if e.cat.lower() == "kernel" and e.ph == "X"
                  and steps.start[0] <= e.ts < steps.end[-1])
    assert stats["kernels"] == kernels
    for q in queue_length(model)["streams"]:
        assert q["summary"]["max"] == max(q["series"]["max"])


def test_real_figures_h200_transformer(real_traces: Path) -> None:
    """Recomputed by hand from the JSON (stream 7 of the bf16 transformer): CPU-bound, as its Overview says."""
    model = parsed_trace(next((real_traces / "h200" / "transformer_bf16").glob("*.gz")))
    (s,) = idle_time(model)["streams"]
    assert s["busy_us"] == pytest.approx(47834.8, abs=0.1)
    assert s["host_wait_us"] == pytest.approx(20890.0, abs=0.1)
    assert s["host_wait_us"] > 0.9 * s["idle_us"]
    summary = launch_stats(model)["summary"]
    assert (summary["kernels"], summary["unlaunched"], summary["short_kernels"]) == (1017, 0, 155)
    assert summary["launch_delay_p50_us"] == pytest.approx(116.97, abs=0.01)
    (q,) = queue_length(model)["streams"]
    assert q["summary"]["max"] == 65
    rows = {tuple(r["path"]): r for r in annotation_times(model)["rows"]}
    assert set(rows) >= {("forward",), ("backward",), ("optimizer",), ("optimizer", "Optimizer.step#AdamW.step")}
    assert rows[("forward",)]["device_us"] > 0.3 * rows[("forward",)]["host_us"]


def test_real_figures_v100_resnet50_2021(real_traces: Path) -> None:
    """The 2021 trace's Overview says DataLoader is a third of the step: the GPU waits on the host."""
    model = load_trace(str(real_traces / "kineto_v100" / "resnet50_num_workers_0" /
                           "worker0.1623143089861.pt.trace.json.gz"))
    (s,) = idle_time(model)["streams"]
    assert s["busy_us"] == pytest.approx(603558, abs=1)
    assert s["host_wait_us"] == pytest.approx(451752, abs=1)
    summary = launch_stats(model)["summary"]
    assert (summary["kernels"], summary["short_kernels"]) == (8772, 5429)
    rows = {r["direction"]: r for r in memory_bandwidth(model)["rows"]}
    assert rows["H2D"]["count"] == 12 and rows["H2D"]["mean_gbps"] == pytest.approx(10.06, abs=0.01)
