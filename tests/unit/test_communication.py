"""One definition of communication for the Overview and the Distributed view: CPU-only (Gloo) runs, host-only
collectives on GPU ranks, and annotation-wrapped NCCL collectives."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tb_plugin.analysis.communication import collectives, communication_intervals
from tb_plugin.analysis.distributed import distributed
from tb_plugin.analysis.overview import overview
from tb_plugin.analysis.views import available_views
from tb_plugin.loader import load_trace
from tb_plugin.model import TraceModel
from tb_plugin.model import intervals as iv
from tests.conftest import cpu_op, write_trace


def annotation(name: str, ts: float, dur: float, **args: Any) -> dict[str, Any]:
    return {**cpu_op(name, ts, dur, **args), "cat": "user_annotation"}


def rpc(ts: float, dur: float, name: str = "allreduce", group: str = "0") -> dict[str, Any]:
    return cpu_op("record_param_comms", ts, dur, **{"Collective name": name, "In msg nelems": 256,
                                                     "Out msg nelems": 256, "dtype": "Float", "Group size": 2,
                                                     "Process Group Name": group})


def _load(tmp_path: Path, name: str, events: list[dict[str, Any]], **top: Any) -> TraceModel:
    return load_trace(str(write_trace(tmp_path / f"{name}.1.pt.trace.json", events, **top)))


def gloo_rank(tmp_path: Path, rank: int, wait: float) -> TraceModel:
    """A CPU-only Gloo rank: compute, a 1.x-style ``gloo:all_reduce`` annotation (no args) and a 2.x-style
    ``c10d::allreduce_`` holding ``record_param_comms`` (one collective, not two); ``wait`` µs longer on rank 0."""
    events = [
        annotation("ProfilerStep#1", 0, 1000),
        cpu_op("aten::mm", 0, 300),
        annotation("gloo:all_reduce", 400 - wait, 200 + wait),
        cpu_op("c10d::allreduce_", 700, 100),
        rpc(710, 80),
    ]
    return _load(tmp_path, f"rank{rank}", events, distributedInfo={"backend": "gloo", "rank": rank, "world_size": 2})


def test_cpu_only_gloo_run_shows_its_collectives_and_both_views_agree(tmp_path: Path) -> None:
    r0, r1 = gloo_rank(tmp_path, 0, wait=50), gloo_rank(tmp_path, 1, wait=0)
    assert "Distributed" in available_views([r0])
    result = distributed([("rank0", r0), ("rank1", r1)])
    for model, row, comm in zip((r0, r1), result["ranks"], (350, 300)):
        assert row["communication_us"] == pytest.approx(comm)
        # the Overview's Communication is the same number (no kernel can take priority on a CPU-only run)
        assert overview(model)["average"]["breakdown_us"]["Communication"] == pytest.approx(comm)
        assert {c["name"]: c["calls"] for c in row["collectives"]} == {"allreduce": 2}
        assert row["computation_us"] == pytest.approx(300)  # aten::mm; host comm spans are not computation
        assert row["overlap_us"] is None and "CPU-only" in row["overlap_note"]
        assert row["per_step"]["overlap_us"] is None
        assert row["transfer_us"] + row["sync_us"] == pytest.approx(comm)
    # matched by (group, seq): rank 0's 50 µs longer gloo:all_reduce is waiting
    assert result["ranks"][0]["sync_us"] == pytest.approx(50)
    assert result["ranks"][1]["sync_us"] == pytest.approx(0)


def test_gloo_annotation_without_distributed_info_still_offers_the_view(tmp_path: Path) -> None:
    model = _load(tmp_path, "solo", [annotation("ProfilerStep#1", 0, 100), annotation("gloo:broadcast", 10, 20)])
    assert "Distributed" in available_views([model])
    col = collectives(model)
    assert col.name == ["broadcast"] and col.on_host.tolist() == [True]


def _gpu_rank(tmp_path: Path, host_only: bool) -> TraceModel:
    """A GPU rank whose kernel runs 100..600; an ``nccl:all_reduce`` annotation 300..500 either launched its NCCL
    kernel (700..800, via record_param_comms) or, host-only, recorded none."""
    events: list[dict[str, Any]] = [
        annotation("ProfilerStep#1", 0, 1000),
        cpu_op("aten::mm", 10, 50),
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 100, "tid": 1, "ts": 20, "dur": 5,
         "args": {"correlation": 1}},
        {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 100, "dur": 500,
         "args": {"device": 0, "stream": 7, "correlation": 1}},
        annotation("nccl:all_reduce", 300, 200),
    ]
    if not host_only:
        events += [
            rpc(310, 50),
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 100, "tid": 1, "ts": 320,
             "dur": 5, "args": {"correlation": 2}},
            {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "pid": 0, "tid": 20,
             "ts": 550, "dur": 250, "args": {"device": 0, "stream": 20, "correlation": 2}},
        ]
    return _load(tmp_path, "gpu_host_only" if host_only else "gpu", events,
                 distributedInfo={"backend": "nccl", "rank": 0, "world_size": 1})


def test_host_only_collective_on_a_gpu_rank_has_no_overlap_number(tmp_path: Path) -> None:
    model = _gpu_rank(tmp_path, host_only=True)
    (row,) = distributed([("rank0", model)])["ranks"]
    assert row["communication_us"] == pytest.approx(200)  # the host span: no kernel did the work
    assert row["overlap_us"] is None and row["per_step"]["overlap_us"] is None
    assert "host" in row["overlap_note"] and "GPU kernels" in row["overlap_note"]
    # the Overview counts the same span where no kernel ran (Kernel comes first); here a kernel ran throughout
    assert overview(model)["average"]["breakdown_us"]["Communication"] == pytest.approx(0)


def test_nccl_annotation_that_launched_a_kernel_is_one_device_collective(tmp_path: Path) -> None:
    model = _gpu_rank(tmp_path, host_only=False)
    col = collectives(model)
    assert col.name == ["allreduce"] and col.group == ["0"] and col.on_host.tolist() == [False]
    assert iv.total(communication_intervals(model)) == pytest.approx(250)  # the kernel, not the host span
    (row,) = distributed([("rank0", model)])["ranks"]
    assert row["overlap_note"] is None
    assert row["overlap_us"] == pytest.approx(50)  # gemm (..600) ∩ NCCL kernel (550..)
    assert row["communication_us"] == pytest.approx(250)
    breakdown = overview(model)["average"]["breakdown_us"]
    # Overview: the communication not hidden behind computation kernels = communication − overlap
    assert breakdown["Communication"] == pytest.approx(row["communication_us"] - row["overlap_us"])


def test_overlap_is_measured_on_a_2021_nccl_rank_whose_kernel_launches_were_not_recorded(tmp_path: Path) -> None:
    """A PyTorch 1.8/1.9 (V100-era) NCCL rank: the ``nccl:all_reduce`` operator launched its ``ncclKernel_…``
    through a call the profiler did not record, so the span holds no launch and the kernel has none. The kernel is
    the communication on the device timeline: overlap is measured on it (it was refused as "n/a" because one span
    was host-only). By hand: gemm 100..600 ∩ NCCL 450..650 = 150 µs of the kernel's 200 µs (75 %)."""
    def v100(cat: str, name: str, ts: float, dur: float, **args: Any) -> dict[str, Any]:
        device = cat in ("Kernel", "Memcpy")
        return {"ph": "X", "cat": cat, "name": name, "pid": 0 if device else 25738, "tid": args.get("stream", 1),
                "ts": ts, "dur": dur, "args": args}

    events = [
        v100("Operator", "ProfilerStep#1", 0, 1000), v100("Operator", "aten::mm", 10, 50),
        v100("Runtime", "cudaLaunchKernel", 20, 5, correlation=1, **{"external id": 1}),
        v100("Kernel", "volta_sgemm_128x64_nn", 100, 500, device=0, stream=7, correlation=1),
        v100("Operator", "nccl:all_reduce", 300, 20),
        v100("Kernel", "ncclKernel_AllReduce_RING_LL_Sum_float", 450, 200, device=0, stream=20, correlation=5),
    ]
    model = _load(tmp_path, "worker0", events, distributedInfo={"backend": "nccl", "rank": 0, "world_size": 1})
    assert collectives(model).on_host.tolist() == [True, False]
    result = distributed([("worker0", model)])
    (row,) = result["ranks"]
    assert row["overlap_note"] is None
    assert row["overlap_us"] == pytest.approx(150) and row["per_step"]["overlap_us"] == [pytest.approx(150)]
    assert row["communication_us"] == pytest.approx(220)  # the host span (20) beside the kernel (200)
    assert any("measured on 1 collective kernel; 1 collective span without a GPU kernel" in n
               for n in result["notes"])


def test_null_overlap_matches_the_api_spec(tmp_path: Path) -> None:
    import yaml

    from tb_plugin.analysis.distributed_page import page_of
    from tests.unit.test_openapi import SPEC_PATH, check

    spec = yaml.safe_load(SPEC_PATH.read_text())
    r0, r1 = gloo_rank(tmp_path, 0, wait=50), gloo_rank(tmp_path, 1, wait=0)
    check(spec, "/distributed", 200, page_of(distributed([("rank0", r0), ("rank1", r1)])))


def test_ddp_overview_communication_is_the_distributed_one_not_hidden_behind_gpu_work(real_traces: Path) -> None:
    """On a GPU run each microsecond counts once in the Overview, GPU work first: its Communication is the
    Distributed view's communication minus what kernels (the overlap), copies and sets covered."""
    files = sorted((real_traces / "h200" / "ddp_resnet50").glob("*.gz"))
    models = [(f.name.split(".")[0], load_trace(str(f))) for f in files]
    result = distributed(models)
    for (_, model), row in zip(models, result["ranks"]):
        assert row["overlap_note"] is None and row["overlap_us"] is not None
        b = overview(model)["average"]["breakdown_us"]
        exposed = row["communication_us"] - row["overlap_us"]
        assert 0 < b["Communication"] <= exposed + 1e-6
        assert b["Communication"] >= exposed - b["Memcpy"] - b["Memset"] - 1e-6
