"""CUPTI range-profiler counters: kept by the loader, joined to kernels and operators, served by /cupti_counters.

No real trace with counters exists (docs/guide/gpu.md says why: the range profiler is not in open-source PyTorch
builds, and Kineto on CUDA 13 drops its config), so the format follows HTA's test trace (``cuda_profiler_range``
events named after the kernel, counters in ``args``; its 5th kernel, fft2d_r2c_32x32, has
smsp__sass_thread_inst_executed_op_fadd_pred_on.sum = 86114304 under aten::conv2d → aten::cudnn_convolution).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tb_plugin.analysis.cupti_counters import cupti_counters
from tb_plugin.loader import load_trace
from tests.conftest import API, REPO, wait_until_settled, write_trace
from tests.unit.test_views_synthetic import PROPS, kernel, launch, model_of, op, step

FADD = "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum"
FFMA = "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum"
DRAM = "dram__bytes_read.sum"


def counter_range(name: str, ts: float, dur: float, **values: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": "cuda_profiler_range", "name": name, "pid": 0, "tid": 99, "ts": ts, "dur": dur,
            "args": values}


def _events(with_kernels: bool = True) -> list[dict[str, Any]]:
    """conv (aten::conv2d → aten::cudnn_convolution → fft2d kernel), mm (gemm kernel), conv again. The ranges come
    gemm first (the range profiler replays kernels in its own order), then the two fft2d ranges; one carries an
    "N/A" and a boolean that are no counters."""
    events = [step(1, 0, 1_000),
              op("aten::conv2d", 10, 100), op("aten::cudnn_convolution", 20, 80), launch(30, 10, corr=1),
              op("aten::mm", 200, 50), launch(210, 10, corr=2),
              op("aten::conv2d", 400, 100), op("aten::cudnn_convolution", 410, 80), launch(420, 10, corr=3)]
    if with_kernels:
        events += [kernel("fft2d_r2c_32x32", 50, 40, corr=1), kernel("gemm", 230, 60, corr=2),
                   kernel("fft2d_r2c_32x32", 440, 40, corr=3)]
    events += [counter_range("gemm", 600, 60, **{FFMA: 1_000, DRAM: 4_096}),
               counter_range("fft2d_r2c_32x32", 700, 40, **{FADD: 86_114_304, FFMA: 10, DRAM: 512}),
               counter_range("fft2d_r2c_32x32", 800, 40, **{FADD: 100, DRAM: "N/A", "flag": True})]
    return events


def test_counters_join_kernels_and_operators(tmp_path: Path) -> None:
    model = model_of(tmp_path, _events(), deviceProperties=PROPS)
    assert len(model["counters"]["row"]) == 2 + 3 + 1  # "N/A" and the boolean are not counters
    c = cupti_counters(model)
    assert c["metrics"] == [DRAM, FADD, FFMA] and c["total_rows"] == 3 and c["matched"] == 3
    assert c["join"] == "kernel name order"
    gemm, fft1, fft2 = c["rows"]
    ev = model["events"]
    assert model.strings[int(ev["name"][gemm["kernel_id"]])] == "gemm" and ev["ts"][gemm["kernel_id"]] == 230
    assert (gemm["operator"], gemm["top_operator"], gemm["values"]) == ("aten::mm", "aten::mm", [4_096, None, 1_000])
    assert ev["ts"][fft1["kernel_id"]] == 50 and ev["ts"][fft2["kernel_id"]] == 440  # n-th range ↔ n-th kernel
    assert (fft1["operator"], fft1["top_operator"]) == ("aten::cudnn_convolution", "aten::conv2d")
    assert fft1["values"] == [512, 86_114_304, 10] and fft2["values"] == [None, 100, None]
    # SASS FLOPs: fadd once, ffma twice
    assert (gemm["sass_flops"], fft1["sass_flops"], fft2["sass_flops"]) == (2_000, 86_114_304 + 20, 100)
    ops = {r["operator"]: r for r in c["operators"]}
    assert ops["aten::cudnn_convolution"]["kernels"] == 2
    assert ops["aten::cudnn_convolution"]["values"] == [512, 86_114_404, 10]
    assert ops["aten::mm"]["values"] == [4_096, None, 1_000]
    assert [r["operator"] for r in c["operators"]] == ["aten::mm", "aten::cudnn_convolution"]  # by dram bytes


def test_without_kernel_events_ranges_follow_the_launches(tmp_path: Path) -> None:
    """HTA's rule: the n-th range (by time) is the n-th launch: gemm's range (first) goes to conv's launch."""
    c = cupti_counters(model_of(tmp_path, _events(with_kernels=False), deviceProperties=PROPS))
    assert c["join"] == "launch order" and c["matched"] == 3
    assert [r["operator"] for r in c["rows"]] == ["aten::cudnn_convolution", "aten::mm", "aten::cudnn_convolution"]
    assert all(r["kernel_id"] is None for r in c["rows"])


def test_a_trace_without_counters_answers_empty() -> None:
    model = load_trace(str(next((REPO / "samples" / "tiny_kernels").glob("*.gz"))))
    assert cupti_counters(model) == {"metrics": [], "rows": [], "total_rows": 0, "matched": 0, "join": "none",
                                     "operators": [], "has_sass_flops": False}


def test_route(tmp_path: Path, tensorboard_app: Any) -> None:
    write_trace(tmp_path / "logdir" / "cupti" / "w.1.pt.trace.json", _events(), deviceProperties=PROPS)
    client = tensorboard_app(tmp_path / "logdir")
    wait_until_settled(client, expect_spans=1)
    body = client.get(f"{API}/cupti_counters?run=cupti&worker=w&span=1&limit=2").get_json()
    assert body["total_rows"] == 3 and len(body["rows"]) == 2 and body["rows"][1]["values"][1] == 86_114_304
    r = client.get(f"{API}/cupti_counters?run=cupti&worker=w&span=1&limit=0")
    assert r.status_code == 400 and "limit" in r.get_json()["error"]
    assert client.get(f"{API}/cupti_counters?run=cupti&worker=w").status_code == 400


@pytest.mark.parametrize("parts", [2])
def test_counters_survive_a_parallel_build(tmp_path: Path, parts: int) -> None:
    """Parts built in forked processes bring their counters, rows shifted and metric codes translated."""
    from tb_plugin.loader import columns

    events = [e for n in range(60) for e in _shifted(_events(), n * 1_000, n)]
    path = write_trace(tmp_path / "big.1.pt.trace.json", events, deviceProperties=PROPS)
    old = (columns.PARALLEL_MIN_EVENTS, columns.MIN_PART_EVENTS)
    columns.PARALLEL_MIN_EVENTS, columns.MIN_PART_EVENTS = 100, 100
    try:
        model = load_trace(str(path), parts=parts)
    finally:
        columns.PARALLEL_MIN_EVENTS, columns.MIN_PART_EVENTS = old
    c = cupti_counters(model, limit=1_000)
    assert c["total_rows"] == 180 and c["matched"] == 180
    assert sum(r["values"][1] or 0 for r in c["rows"]) == 60 * (86_114_304 + 100)


def _shifted(events: list[dict[str, Any]], dt: float, n: int) -> list[dict[str, Any]]:
    out = []
    for e in events:
        e = {**e, "ts": e["ts"] + dt, "args": dict(e["args"])}
        if e["name"].startswith("ProfilerStep#"):
            e["name"] = f"ProfilerStep#{n + 1}"
        if "correlation" in e["args"]:
            e["args"]["correlation"] += 10 * n
        out.append(e)
    return out


def test_the_python_api_gives_one_column_per_counter(tmp_path: Path) -> None:
    import tb_plugin
    from tests.conftest import write_trace

    path = write_trace(tmp_path / "logs" / "run" / "w.1.pt.trace.json", _events(), deviceProperties=PROPS)
    t = tb_plugin.open(path, cache_dir=str(tmp_path / "cache"))
    c = t.cupti_counters()
    assert list(c.columns[-3:]) == [DRAM, FADD, FFMA] and c.attrs["metrics"] == [DRAM, FADD, FFMA]
    assert list(c["name"]) == ["gemm", "fft2d_r2c_32x32", "fft2d_r2c_32x32"]
    assert c.loc[1, FADD] == 86_114_304 and c.loc[0, "operator"] == "aten::mm"
    ops = c.attrs["operators"].set_index("operator")
    assert ops.loc["aten::cudnn_convolution", "kernels"] == 2 and ops.loc["aten::mm", DRAM] == 4_096


def test_the_text_path_keeps_the_counters_as_the_usual_path_does(tmp_path: Path) -> None:
    """A trace of 48 MB or more is built from its text in parts (``columns.build_text_parts``), never decoded whole:
    its counters come from the text of the chunks that name their category, the same rows, metrics and values."""
    from tb_plugin.loader import columns
    from tb_plugin.loader.read import outline_by_text
    from tests.unit.test_load_paths import kineto_text

    usual = model_of(tmp_path, _events(), deviceProperties=PROPS)
    data = kineto_text(_events(), deviceProperties=PROPS).encode()
    found = outline_by_text(data)
    assert found is not None
    doc, lo, hi = found
    model = columns.build_text_parts(data, lo, hi, None, 1).finish(doc, "t.pt.trace.json")
    got, want = model["counters"], usual["counters"]
    assert len(got["row"]) == 6
    assert got["row"].tolist() == want["row"].tolist() and got["value"].tolist() == want["value"].tolist()
    assert [model.strings[int(m)] for m in got["metric"]] == [usual.strings[int(m)] for m in want["metric"]]
    assert cupti_counters(model)["rows"] == cupti_counters(usual)["rows"]
