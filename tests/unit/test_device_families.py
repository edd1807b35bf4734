"""Device work is recognised by kind, whatever the device family's Kineto calls it: CUDA, ROCm/HIP, XPU, MTIA.

Each family gets the same small trace (one step, an operator that launches a kernel and a copy through the
family's runtime, the kernel and the copy on the device) written the way that family's Kineto writes it (see
``tb_plugin/model/kinds.py``), and every family must give the same Overview, Kernel view and launch correlation.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tb_plugin.analysis.kernels import kernel_table
from tb_plugin.analysis.overview import overview
from tb_plugin.analysis.views import available_views
from tb_plugin.loader import load_trace
from tb_plugin.model import Kind, TraceModel
from tb_plugin.model.optree import host_tree
from tests.conftest import cpu_op, write_trace

DEVICE, STREAM = 1, 5
CORR = "<the launch's correlation id>"


def _event(cat: str, name: str, ts: float, dur: float, pid: int, tid: int, **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _flow(ph: str, flow_id: int, pid: int, tid: int, ts: float) -> dict[str, Any]:
    end = {"bp": "e"} if ph == "f" else {}
    return {"ph": ph, "id": flow_id, "pid": pid, "tid": tid, "ts": ts, "cat": "ac2g", "name": "ac2g", **end}


def _trace(runtime: str, launch: str, copy_call: str, kernel_cat: str, copy_cat: str,
           kernel_args: dict[str, Any], copy_args: dict[str, Any], launch_args: dict[str, Any],
           flows: bool = False) -> list[dict[str, Any]]:
    """Step 0..1000; aten::mm 10..200 launches the kernel (corr 7) and the copy (corr 8); kernel 100..500,
    copy 600..700 on device 1, stream/queue 5."""
    def call(name: str, ts: float, corr: int) -> dict[str, Any]:
        args = {k: (corr if v == CORR else v) for k, v in launch_args.items()}
        return _event(runtime, name, ts, 10, 100, 1, **args)

    events = [
        {**cpu_op("ProfilerStep#1", 0, 1000), "cat": "user_annotation"},
        cpu_op("aten::mm", 10, 190),
        call(launch, 20, 7),
        call(copy_call, 40, 8),
        _event(kernel_cat, "gemm_kernel", 100, 400, DEVICE, STREAM, **kernel_args),
        _event(copy_cat, "Memcpy HtoD (Host -> Device)", 600, 100, DEVICE, STREAM, **copy_args),
    ]
    if flows:
        events += [_flow("s", 7, 100, 1, 20), _flow("f", 7, DEVICE, STREAM, 100),
                   _flow("s", 8, 100, 1, 40), _flow("f", 8, DEVICE, STREAM, 600)]
    return events


FAMILIES: dict[str, list[dict[str, Any]]] = {
    # CUPTI: device, stream and correlation as args.
    "cuda": _trace("cuda_runtime", "cudaLaunchKernel", "cudaMemcpyAsync", "kernel", "gpu_memcpy",
                   {"device": DEVICE, "stream": STREAM, "correlation": 7, "grid": [4, 1, 1]},
                   {"device": DEVICE, "stream": STREAM, "correlation": 8, "bytes": 4096},
                   {"correlation": CORR}),
    # rocprofiler-sdk: the HIP API as cuda_runtime; device, stream (queue id), correlation, kind on the kernel.
    "rocm": _trace("cuda_runtime", "hipLaunchKernel", "hipMemcpyAsync", "kernel", "gpu_memcpy",
                   {"device": DEVICE, "stream": STREAM, "correlation": 7, "kind": "Dispatch Kernel"},
                   {"device": DEVICE, "stream": STREAM, "correlation": 8, "kind": "HtoD", "bytes": 4096},
                   {"cid": 1, "correlation": CORR}),
    # roctracer (older ROCm): device events carry no args at all (device = pid, stream = tid, link = ac2g flow);
    # the runtime's stream is a pointer string.
    "rocm_roctracer": _trace("cuda_runtime", "hipLaunchKernel", "hipMemcpyAsync", "kernel", "gpu_memcpy",
                             {}, {}, {"cid": 1, "correlation": CORR, "stream": "0x55d0c0a1b2c0"}, flows=True),
    # XPU (PTI): xpu_runtime launches; kernels carry device and correlation, the queue only as "sycl queue" + tid.
    "xpu": _trace("xpu_runtime", "urEnqueueKernelLaunch", "urEnqueueUSMMemcpy", "kernel", "gpu_memcpy",
                  {"device": DEVICE, "sycl queue": 94011122334455, "correlation": 7, "kernel_id": 3},
                  {"device": DEVICE, "sycl queue": 94011122334455, "correlation": 8, "bytes": 4096},
                  {"correlation": CORR}),
    # MTIA: mtia_runtime launches, mtia_ccp_events device work, linked by ac2g flows only.
    "mtia": _trace("mtia_runtime", "launchKernel", "memcpyAsync", "mtia_ccp_events", "gpu_memcpy",
                   {}, {}, {}, flows=True),
}


def _model(tmp_path: Path, family: str) -> TraceModel:
    return load_trace(str(write_trace(tmp_path / f"{family}.1.pt.trace.json", FAMILIES[family])))


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_device_work_is_recognised_by_kind(tmp_path: Path, family: str) -> None:
    model = _model(tmp_path, family)
    o = overview(model)
    (step,) = o["steps"]
    breakdown = step["breakdown_us"]
    assert breakdown["Kernel"] == pytest.approx(400) and breakdown["Memcpy"] == pytest.approx(100)
    assert breakdown["Runtime"] == pytest.approx(20)  # the two launches, before the kernel starts
    assert o["environment"]["device_type"] == "GPU"
    assert [g["id"] for g in o["gpus"]] == [DEVICE]
    assert o["gpus"][0]["utilization"] == pytest.approx(0.4) and o["gpus"][0]["gpu_busy"] == pytest.approx(0.5)

    assert "Kernel" in available_views([model])
    (row,) = kernel_table(model, "name_op")
    assert row["name"] == "gemm_kernel" and row["calls"] == 1 and row["operator"] == "aten::mm"
    assert row["streams"] == [STREAM]

    dev = model["device_events"]
    assert dev["device"].tolist() == [DEVICE, DEVICE] and dev["stream"].tolist() == [STREAM, STREAM]
    tree = host_tree(model)
    assert (tree.device_launch >= 0).all()  # both the kernel and the copy joined their launch
    assert model["events"]["correlation"][dev["row"]].tolist() == [7, 8]


def test_mtia_ccp_events_are_kernels_and_mtia_insight_is_not_device_work(tmp_path: Path) -> None:
    events = FAMILIES["mtia"] + [_event("mtia_insight", "insight", 100, 800, DEVICE, 99)]
    model = load_trace(str(write_trace(tmp_path / "mtia.1.pt.trace.json", events)))
    kinds = {model.strings[int(c)]: Kind(int(k)) for c, k in zip(model["events"]["cat"], model["events"]["kind"])}
    assert kinds["mtia_ccp_events"] == Kind.KERNEL and kinds["mtia_runtime"] == Kind.RUNTIME
    assert kinds["mtia_insight"] == Kind.OTHER
    assert overview(model)["steps"][0]["breakdown_us"]["Kernel"] == pytest.approx(400)


def test_an_arg_correlation_is_never_replaced_by_a_flow(tmp_path: Path) -> None:
    events = FAMILIES["cuda"] + [_flow("s", 70, 100, 1, 20), _flow("f", 70, DEVICE, STREAM, 100)]
    model = load_trace(str(write_trace(tmp_path / "cuda.1.pt.trace.json", events)))
    corr = model["events"]["correlation"]
    assert sorted(corr[corr >= 0].tolist()) == [7, 7, 8, 8]
    assert np.all(host_tree(model).device_launch >= 0)
