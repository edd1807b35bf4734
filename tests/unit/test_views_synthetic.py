"""Hand-checked synthetic traces for every formula and edge case of the Overview, Operator and Kernel views."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tb_plugin.analysis.kernels import kernel_table
from tb_plugin.analysis.operators import operator_table
from tb_plugin.analysis.overview import overview
from tb_plugin.loader import load_trace
from tb_plugin.model import TraceModel
from tests.conftest import write_trace

HOST = {"pid": 100, "tid": 1}
PROPS = [{"id": 0, "name": "Test GPU", "totalGlobalMem": 1 << 34, "computeMajor": 8, "computeMinor": 0, "numSms": 100}]


def step(n: int, ts: float, dur: float, cat: str = "user_annotation") -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": f"ProfilerStep#{n}", **HOST, "ts": ts, "dur": dur, "args": {}}


def op(name: str, ts: float, dur: float, cat: str = "cpu_op", tid: int = 1) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": 100, "tid": tid, "ts": ts, "dur": dur, "args": {}}


def launch(ts: float, dur: float, corr: int, name: str = "cudaLaunchKernel", cat: str = "cuda_runtime",
           tid: int = 1) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": 100, "tid": tid, "ts": ts, "dur": dur,
            "args": {"correlation": corr}}


def kernel(name: str, ts: float, dur: float, corr: int, stream: int = 7, cat: str = "kernel",
           **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": stream, "ts": ts, "dur": dur,
            "args": {"device": 0, "stream": stream, "correlation": corr, **args}}


def model_of(tmp_path: Path, events: list[dict[str, Any]], **top: Any) -> TraceModel:
    return load_trace(str(write_trace(tmp_path / "w.1.pt.trace.json", events, **top)))


def test_breakdown_priorities_and_exact_sum(tmp_path: Path) -> None:
    events = [
        step(1, 0, 100),
        op("aten::mm", 0, 60),
        launch(5, 7, corr=1),
        kernel("gemm", 10, 20, corr=1),
        kernel("Memcpy HtoD (Pageable -> Device)", 25, 15, corr=1, cat="gpu_memcpy"),
        op("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 60, 20, cat="user_annotation"),
    ]
    o = overview(model_of(tmp_path, events, deviceProperties=PROPS))
    (s,) = o["steps"]
    assert s["duration_us"] == 100
    assert s["breakdown_us"] == {"Kernel": 20, "Memcpy": 10, "Memset": 0, "Communication": 0, "Runtime": 5,
                                 "DataLoader": 20, "CPU Exec": 25, "Other": 20}


def test_device_aware_step_boundaries_and_tail_trimming(tmp_path: Path) -> None:
    events = [
        step(1, 100, 100), step(2, 200, 100), step(3, 300, 100),
        launch(30, 5, corr=9), kernel("early", 110, 10, corr=9),  # launched before step 1, done before its kernels
        launch(150, 5, corr=1), kernel("k1", 160, 80, corr=1),  # runs past step 1's host end (200) to 240
        launch(250, 5, corr=2), kernel("k2", 260, 20, corr=2),
        # step 3 launches nothing: its GPU work was not captured, so it is dropped
    ]
    o = overview(model_of(tmp_path, events, deviceProperties=PROPS))
    assert [s["name"] for s in o["steps"]] == ["1", "2"]
    assert (o["steps"][0]["start_us"], o["steps"][0]["duration_us"]) == (120, 120)  # [120, 240)
    assert (o["steps"][1]["start_us"], o["steps"][1]["duration_us"]) == (240, 60)  # [240, 300)
    assert any("3" in n for n in o["notes"])


def test_gpu_copies_of_annotations_are_not_steps_and_not_cpu_time(tmp_path: Path) -> None:
    events = [
        step(1, 0, 100), op("aten::add", 0, 10), launch(2, 2, corr=1), kernel("k", 20, 10, corr=1),
        step(1, 20, 60, cat="gpu_user_annotation") | {"pid": 0, "tid": 7},
        op("forward", 30, 50, cat="gpu_user_annotation") | {"pid": 0, "tid": 7},
    ]
    o = overview(model_of(tmp_path, events, deviceProperties=PROPS))
    assert [s["name"] for s in o["steps"]] == ["1"]
    assert o["steps"][0]["breakdown_us"]["CPU Exec"] == pytest.approx(8)  # aten::add [0,10) minus runtime [2,4)


def test_a_trace_without_steps_is_one_step(tmp_path: Path) -> None:
    o = overview(model_of(tmp_path, [op("aten::add", 10, 5), op("aten::mul", 20, 10)]))
    assert [(s["name"], s["start_us"], s["duration_us"]) for s in o["steps"]] == [("0", 10, 20)]
    assert o["notes"] and "ProfilerStep" in o["notes"][0]
    assert o["environment"]["device_type"] == "CPU" and o["gpus"] == []
    assert o["steps"][0]["breakdown_us"]["CPU Exec"] == 15 and o["steps"][0]["breakdown_us"]["Other"] == 5


def test_steps_with_the_same_number_are_each_a_step_and_said_so(tmp_path: Path) -> None:
    """Three ``ProfilerStep#1`` one after another (a profiler started three times) are three steps, each with its
    time and a name of its own; the same step recorded on a second thread over the same time is counted once.
    Both are said in the notes (they used to be one step of 100 µs, silently)."""
    from tb_plugin.analysis.diff import diff_summary

    events = [step(1, 0, 100), op("aten::mm", 10, 50), step(1, 100, 200), op("aten::mm", 110, 150),
              step(1, 300, 100), op("aten::add", 310, 20), step(2, 400, 50), op("aten::add", 410, 20),
              step(2, 405, 40) | {"tid": 2}]  # step 2 again, on another thread, over the same time
    model = model_of(tmp_path, events)
    o = overview(model)
    assert [(s["name"], s["start_us"], s["duration_us"]) for s in o["steps"]] == [
        ("1", 0, 100), ("1 (2)", 100, 200), ("1 (3)", 300, 100), ("2", 400, 50)]
    assert o["average"]["duration_us"] == pytest.approx(112.5)
    assert o["steps"][1]["breakdown_us"]["CPU Exec"] == 150
    assert ("Several steps have the same number, one after another: ProfilerStep#1 3 times (shown as 1, 1 (2), "
            "1 (3)).") in o["notes"][0]
    assert o["notes"][1] == ("Steps recorded more than once over the same time (on other threads): ProfilerStep#2 "
                             "2 times. Each is counted once, as the one recorded first.")
    # a step picked by its name is that step: the Diff of step "1 (2)" with itself holds its operator only
    d = diff_summary(model, model, "1 (2)", "1 (2)")
    assert d["breakdown"]["step_baseline_us"] == 200 and d["step_names"]["baseline"] == ["1", "1 (2)", "1 (3)", "2"]
    assert [(r["name"], r["baseline_calls"], r["baseline_host_self_us"]) for r in d["operators"]] == [
        ("aten::mm", 1, 150)]
    from tb_plugin.analysis.critical_path import critical_path

    path = critical_path(model, "1 (2)")
    assert (path["step"], path["start_us"], path["duration_us"]) == ("1 (2)", 100, 200)
    assert {s["name"] for s in path["segments"]} >= {"aten::mm"}


def test_negative_durations_count_as_zero_and_are_said(tmp_path: Path) -> None:
    """A step (or any event) with a negative duration took no time: never a negative step time. Clamped at
    loading, and the Overview says how many and the worst."""
    events = [step(1, 0, 100), op("aten::mm", 10, 50), step(2, 100, -30), op("aten::add", 100, -5),
              step(3, 200, 100), op("aten::add", 210, 20)]
    model = model_of(tmp_path, events)
    o = overview(model)
    assert [(s["name"], s["duration_us"]) for s in o["steps"]] == [("1", 100), ("2", 0), ("3", 100)]
    assert all(v >= 0 for s in o["steps"] for v in s["breakdown_us"].values())
    assert (model["events"]["dur"] >= 0).all()
    assert o["notes"] == ["2 events of the trace had a negative duration (down to -30.000 µs, on ProfilerStep#2): "
                          "each counts as 0 µs."]


def test_gpu_metrics_formulas(tmp_path: Path) -> None:
    events = [
        step(1, 0, 100), op("aten::mm", 0, 50), launch(1, 1, corr=1), launch(3, 1, corr=2), launch(5, 1, corr=3),
        # [10,30) bps 0.5 occ 40; [20,40) bps 0.75 occ 80 on another stream; [60,70) with inf/missing values
        kernel("a", 10, 20, corr=1, **{"blocks per SM": 0.5, "est. achieved occupancy %": 40}),
        kernel("b", 20, 20, corr=2, stream=8, **{"blocks per SM": 0.75, "est. achieved occupancy %": 80}),
        kernel("c", 60, 10, corr=3, **{"blocks per SM": "inf"}),
        kernel("zero", 80, 0, corr=3),
    ]
    o = overview(model_of(tmp_path, events, deviceProperties=PROPS))
    (gpu,) = o["gpus"]
    assert gpu["utilization"] == pytest.approx(40 / 100)  # [10,40) + [60,70)
    # [10,20): 0.5; [20,30): min(1.25, 1) = 1; [30,40): 0.75; kernel c has no finite value and is left out
    assert gpu["sm_efficiency"] == pytest.approx((10 * 0.5 + 10 * 1 + 10 * 0.75) / 100)
    assert gpu["achieved_occupancy"] == pytest.approx((20 * 0.4 + 20 * 0.8) / 40)


def test_gpu_busy_counts_copies_and_sets_utilization_only_kernels(tmp_path: Path) -> None:
    events = [
        step(1, 0, 100), op("aten::mm", 0, 50), launch(1, 1, corr=1), launch(3, 1, corr=2), launch(5, 1, corr=3),
        kernel("gemm", 10, 20, corr=1),  # [10,30)
        kernel("Memcpy HtoD (Pageable -> Device)", 25, 15, corr=2, cat="gpu_memcpy"),  # [25,40): 10 µs beyond
        kernel("Memset (Device)", 60, 5, corr=3, cat="gpu_memset"),  # [60,65)
        kernel("Memcpy DtoH (Device -> Pageable)", 150, 10, corr=99, cat="gpu_memcpy"),  # after the step
    ]
    (gpu,) = overview(model_of(tmp_path, events, deviceProperties=PROPS))["gpus"]
    assert gpu["utilization"] == pytest.approx(20 / 100)
    assert gpu["gpu_busy"] == pytest.approx((20 + 10 + 5) / 100)


def test_gpu_utilization_with_and_without_communication_kernels(tmp_path: Path) -> None:
    """A rank that waits 90 % of its step in an all-reduce: 93 % utilization with the NCCL kernel, 3 % without."""
    events = [
        step(1, 0, 100), op("aten::mm", 0, 50), launch(1, 1, corr=1), launch(3, 1, corr=2),
        kernel("gemm", 2, 3, corr=1),  # [2,5): the model's work
        kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 5, 90, corr=2, stream=20),  # [5,95): waiting for peers
    ]
    (gpu,) = overview(model_of(tmp_path, events, deviceProperties=PROPS))["gpus"]
    assert gpu["utilization"] == pytest.approx(93 / 100)
    assert gpu["compute_utilization"] == pytest.approx(3 / 100)


def test_gpu_utilization_without_communication_on_the_fsdp_sample() -> None:
    """Hand-counted from the JSON of samples/fsdp_comm rank 0 (union of kernel intervals over the steps' span,
    47,964.5 µs): 96.38 % with the NCCL kernels, 20.73 % without."""
    from tests.conftest import SAMPLES

    model = load_trace(str(next((SAMPLES / "fsdp_comm").glob("rank0.*.gz"))))
    (gpu,) = overview(model)["gpus"]
    assert gpu["utilization"] == pytest.approx(0.9638, abs=5e-5)
    assert gpu["compute_utilization"] == pytest.approx(0.2073, abs=5e-5)


def test_a_cpu_only_run_on_a_gpu_machine_lists_no_gpus_or_cuda_versions(tmp_path: Path) -> None:
    """activities=[CPU] on a machine with GPUs: the trace still carries deviceProperties and the CUDA versions;
    they describe the machine, not the run, so the configuration leaves them out and counts the GPUs apart."""
    events = [step(1, 0, 100), op("aten::mm", 10, 50)]
    model = model_of(tmp_path, events, deviceProperties=[*PROPS, {**PROPS[0], "id": 1}], cuda_runtime_version=13000,
                     cuda_driver_version=13000, cupti_version=130001)
    env = overview(model)["environment"]
    assert env["device_type"] == "CPU" and env["devices"] == [] and env["unprofiled_gpus"] == 2
    assert env["cuda_runtime_version"] is env["cuda_driver_version"] is env["cupti_version"] is None
    gpu_env = overview(model_of(tmp_path / "gpu", [*events, launch(12, 2, corr=1), kernel("k", 20, 5, corr=1)],
                                deviceProperties=PROPS, cupti_version=130001))["environment"]
    assert gpu_env["device_type"] == "GPU" and len(gpu_env["devices"]) == 1 and gpu_env["unprofiled_gpus"] == 0
    assert gpu_env["cupti_version"] == 130001


def test_concurrent_streams_sum_versus_wall_time(tmp_path: Path) -> None:
    events = [
        step(1, 0, 100), op("aten::mm", 0, 50), launch(1, 1, corr=1), launch(3, 1, corr=2),
        kernel("a", 10, 20, corr=1, stream=7), kernel("b", 20, 20, corr=2, stream=8),
    ]
    (row,) = operator_table(model_of(tmp_path, events, deviceProperties=PROPS))
    assert (row["device_self_us"], row["device_total_us"], row["device_total_wall_us"]) == (40, 40, 30)


def test_driver_launches_attribute_kernels_to_their_operator(tmp_path: Path) -> None:
    events = [
        step(1, 0, 100), op("triton_poi_fused_add_0", 10, 20),
        launch(12, 3, corr=5, name="cuLaunchKernel", cat="cuda_driver"),
        kernel("triton_poi_fused_add_0", 40, 5, corr=5),
    ]
    model = model_of(tmp_path, events, deviceProperties=PROPS)
    (row,) = operator_table(model)
    assert row["name"] == "triton_poi_fused_add_0" and row["device_self_us"] == 5
    (k,) = kernel_table(model, "name_op")
    assert k["operator"] == "triton_poi_fused_add_0"
    assert overview(model)["steps"][0]["breakdown_us"]["Runtime"] == 3


def test_operator_self_and_total_times(tmp_path: Path) -> None:
    events = [
        step(1, 0, 200),
        op("aten::linear", 10, 100), op("aten::addmm", 20, 60), launch(30, 10, corr=1),
        kernel("gemm", 50, 40, corr=1),
        op("aten::t", 85, 10),
        # a same-name nested call is folded into its parent, as the autograd profiler does
        op("aten::copy_", 120, 30), op("aten::copy_", 125, 20),
    ]
    rows = {r["name"]: r for r in operator_table(model_of(tmp_path, events, deviceProperties=PROPS))}
    assert rows["aten::linear"]["host_total_us"] == 100 and rows["aten::linear"]["host_self_us"] == 30
    assert rows["aten::linear"]["device_self_us"] == 0 and rows["aten::linear"]["device_total_us"] == 40
    assert rows["aten::addmm"]["host_self_us"] == 50 and rows["aten::addmm"]["device_self_us"] == 40
    assert rows["aten::copy_"]["calls"] == 1 and rows["aten::copy_"]["host_self_us"] == 30
    assert rows["aten::addmm"]["tc_eligible"] and rows["aten::linear"]["tc_eligible"]


def test_overlapping_host_events_are_kept(tmp_path: Path) -> None:
    # b starts inside a but ends after it: not nested, still counted (the old plugin dropped it)
    events = [step(1, 0, 100), op("a", 10, 30), op("b", 20, 40)]
    rows = {r["name"]: r for r in operator_table(model_of(tmp_path, events))}
    assert rows["b"]["calls"] == 1 and rows["b"]["host_total_us"] == 40


def test_kernel_table_weighting_and_launch_configuration(tmp_path: Path) -> None:
    events = [
        step(1, 0, 100), op("aten::conv2d", 0, 50), launch(1, 1, corr=1), launch(3, 1, corr=2), launch(5, 1, corr=3),
        kernel("conv", 10, 30, corr=1, grid=[4, 2, 1], block=[256, 1, 1], **{"blocks per SM": 2.0,
               "est. achieved occupancy %": 50, "registers per thread": 64, "shared memory": 1024}),
        kernel("conv", 50, 10, corr=2, grid=[4, 2, 1], block=[256, 1, 1], **{"blocks per SM": 1.0,
               "est. achieved occupancy %": 20, "registers per thread": 64, "shared memory": 1024}),
        kernel("conv", 70, 10, corr=3, grid=[8, 1, 1], block=[128, 1, 1], **{"blocks per SM": "inf"}),
    ]
    model = model_of(tmp_path, events, deviceProperties=PROPS)
    (by_name,) = kernel_table(model)
    assert (by_name["calls"], by_name["total_us"], by_name["min_us"], by_name["max_us"]) == (3, 50, 10, 30)
    assert by_name["blocks_per_sm"] == pytest.approx((30 * 2 + 10 * 1) / 40)  # the inf one is left out
    assert by_name["achieved_occupancy"] == pytest.approx((30 * 0.5 + 10 * 0.2) / 40)
    rows = kernel_table(model, "name_op")
    assert [(r["grid"], r["block"], r["calls"]) for r in rows] == [("[4, 2, 1]", "[256, 1, 1]", 2),
                                                                  ("[8, 1, 1]", "[128, 1, 1]", 1)]
    assert rows[0]["operator"] == "aten::conv2d" and rows[0]["op_tc_eligible"]
    assert rows[0]["registers_per_thread"] == 64 and rows[0]["shared_memory"] == 1024
    assert rows[1]["registers_per_thread"] is None


def test_kernels_outside_steps_still_count_in_the_kernel_view(tmp_path: Path) -> None:
    events = [step(1, 0, 100), launch(150, 1, corr=1), kernel("late", 160, 10, corr=1)]
    model = model_of(tmp_path, events, deviceProperties=PROPS)
    assert kernel_table(model)[0]["calls"] == 1
    assert overview(model)["steps"][0]["breakdown_us"]["Kernel"] == 0


def test_memory_recommendation_compares_each_gpu_with_its_own_capacity(tmp_path: Path) -> None:
    props = [{"id": 0, "name": "Small", "totalGlobalMem": 1000}, {"id": 1, "name": "Big", "totalGlobalMem": 10**6}]

    def mem(device_type: int, device_id: int, total: int) -> dict[str, Any]:
        return {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", **HOST, "ts": 5, "s": "t",
                "args": {"Device Type": device_type, "Device Id": device_id, "Addr": 1, "Bytes": total,
                         "Total Allocated": total, "Total Reserved": total}}

    base = [step(1, 0, 100), launch(1, 1, corr=1), kernel("k", 10, 80, corr=1)]
    # CPU memory and a GPU far from full: no advice (the old plugin compared CPU memory against a GPU)
    recs = overview(model_of(tmp_path, base + [mem(0, -1, 10**9), mem(1, 1, 500)], deviceProperties=props))
    assert "memory_pressure" not in [r["id"] for r in recs["recommendations"]]
    recs = overview(load_trace(str(write_trace(tmp_path / "m.2.pt.trace.json", base + [mem(1, 0, 950)],
                                               deviceProperties=props))))
    assert "memory_pressure" in [r["id"] for r in recs["recommendations"]]
