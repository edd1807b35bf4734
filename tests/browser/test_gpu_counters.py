"""The GPU page's CUPTI counters card: shown with the counters of a trace that has them (a hand-checked synthetic
trace: no real one can be recorded, docs/guide/gpu.md), absent from one without, and its Trace link."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.browser.conftest import SAMPLES, TensorBoard, link_or_copy, table_rows
from tests.browser.test_views import api, open_view
from tests.conftest import write_trace
from tests.unit.test_cupti_counters import DRAM, FADD, FFMA, _events
from tests.unit.test_views_synthetic import PROPS

pytestmark = pytest.mark.browser

COUNTERS = ("cupti", "w")


@pytest.fixture(scope="module")
def tb_counters(tb_factory: Any, tmp_path_factory: pytest.TempPathFactory) -> TensorBoard:
    root: Path = tmp_path_factory.mktemp("logdir_counters")
    write_trace(root / "cupti" / "w.1.pt.trace.json", _events(), deviceProperties=PROPS)
    for f in sorted((SAMPLES / "tiny_kernels").glob("*.pt.trace.json.gz")):
        link_or_copy(f, root / "tiny_kernels" / f.name)
    tb: TensorBoard = tb_factory(root)
    tb.wait_settled(timeout=120)
    return tb


def test_counters_card_shows_the_joined_counters(page: Any, tb_counters: TensorBoard) -> None:
    page.set_viewport_size({"width": 1600, "height": 1000})
    data = api(tb_counters, "cupti_counters", COUNTERS)
    assert data["metrics"] == [DRAM, FADD, FFMA]
    frame = open_view(page, tb_counters, COUNTERS, "GPU")
    frame.wait_for_selector("[data-testid=card-counters]")
    assert frame.inner_text("[data-testid=counters-summary]") == ("3 kernels measured, 3 joined by kernel name "
                                                                   "order; 3 counters")
    ops = {r["operator"]: r for r in table_rows(frame, "counters-operators")}
    assert ops["aten::cudnn_convolution"]["kernels"] == "2"
    assert ops["aten::cudnn_convolution"]["m1"] == "86,114,404"  # fadd summed over the two fft2d kernels
    assert ops["aten::mm"]["m1"] == "—" and ops["aten::mm"]["sass_flops"] == "2,000"
    kernels = table_rows(frame, "counters-kernels")
    assert [k["name"] for k in kernels] == ["gemm", "fft2d_r2c_32x32", "fft2d_r2c_32x32"]
    assert kernels[1]["operator"] == "aten::cudnn_convolution" and kernels[1]["m1"] == "86,114,304"
    frame.click("[data-testid=counters-kernels] tbody tr[data-testid=row]:nth-child(2) td[data-col=where] button")
    frame.wait_for_selector("[data-testid=tab-Trace][aria-selected=true]")
    frame.wait_for_function("() => window.__ptpTrace && window.__ptpTrace.visibleRange() !== null")
    shown = frame.evaluate("() => window.__ptpTrace.visibleRange()")
    row = data["rows"][1]
    assert shown["start"] <= row["start_us"] and shown["end"] >= row["start_us"] + row["dur_us"]


def test_no_counters_no_card(page: Any, tb_counters: TensorBoard) -> None:
    run = ("tiny_kernels", next((SAMPLES / "tiny_kernels").glob("*.gz")).name.split(".")[0])
    assert api(tb_counters, "cupti_counters", run)["metrics"] == []
    frame = open_view(page, tb_counters, run, "GPU")
    frame.wait_for_selector("[data-testid=card-launch]")
    assert frame.query_selector("[data-testid=card-counters]") is None
