"""The GPU page (idle time, launches, queue length, bandwidth, kernel sequences) inside the real TensorBoard,
checked against the plugin's JSON routes, and its links into the Trace view."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import unquote

import pytest

from tests.browser.conftest import PLUGIN, TensorBoard, table_rows
from tests.browser.test_views import CPU, TRANSFORMER, api, assert_duration, open_view, wait_charts

pytestmark = pytest.mark.browser


def shown_us(text: str) -> str:
    """'20.89 ms (29.7%)' -> '20.89 ms'."""
    return text.split(" (")[0]


def test_gpu_page_matches_the_api(page: Any, tb_samples: TensorBoard) -> None:
    idle = api(tb_samples, "idle", TRANSFORMER)
    launches = api(tb_samples, "launch_stats", TRANSFORMER)
    queues = api(tb_samples, "queue_length", TRANSFORMER)
    sequences = api(tb_samples, "kernel_sequences", TRANSFORMER)
    frame = open_view(page, tb_samples, TRANSFORMER, "GPU")
    frame.wait_for_selector("[data-testid=gpu-view]")
    wait_charts(frame, "queue-chart")

    rows = table_rows(frame, "idle-table")
    assert len(rows) == len(idle["streams"])
    top = max(idle["streams"], key=lambda s: s["idle_us"])
    assert rows[0]["stream"] == f"GPU {top['device']} · stream {top['stream']}"
    for key in ("busy", "idle", "host_wait", "kernel_wait", "other"):
        assert_duration(shown_us(rows[0][key]), top[f"{key}_us"])
    window = idle["window"]["end_us"] - idle["window"]["start_us"]
    assert f"({100 * top['busy_us'] / window:.1f}%)" in rows[0]["busy"]

    assert_duration(frame.inner_text("[data-testid=launch-p50] .ptp-metric-value"),
                    launches["summary"]["launch_delay_p50_us"])
    assert f"{launches['summary']['short_kernels']:,}" in frame.inner_text("[data-testid=launch-short]")
    outliers = table_rows(frame, "launch-outliers")
    worst = launches["rows"][0]
    assert outliers[0]["name"] == worst["name"] and worst["outlier"]
    assert_duration(outliers[0]["delay"], worst["launch_delay_us"])

    (q,) = queues["streams"]
    (qrow,) = table_rows(frame, "queue-table")
    assert qrow["max"] == str(q["summary"]["max"])
    plotted = frame.evaluate("() => document.querySelector('[data-testid=queue-chart]').data[0].y")
    assert max(plotted) == q["summary"]["max"]

    seq = table_rows(frame, "sequence-table")
    assert len(seq) == min(10, len(sequences["sequences"])) and seq[0]["count"] == str(sequences["sequences"][0]["count"])
    assert_duration(seq[0]["total"], sequences["sequences"][0]["total_us"])
    frame.select_option("[data-testid=sequence-length]", "2")
    longer = api(tb_samples, "kernel_sequences", TRANSFORMER, length="2")["sequences"][0]
    frame.wait_for_function(
        "n => document.querySelector('[data-testid=sequence-table] td[data-col=count]')?.innerText === n",
        arg=str(longer["count"]))

    # A number links to where it comes from: the longest gap opens the Trace view on that gap.
    gap = top["longest_gaps"][0]
    frame.locator("[data-testid=idle-table] [data-testid=trace-range-link]").first.click()
    frame.wait_for_selector("[data-testid=tab-Trace][aria-selected=true]")
    hash_ = unquote(page.evaluate("() => window.location.hash"))
    start = float(re.search(rf"p\.{PLUGIN}\.start=([\d.]+)", hash_).group(1))  # type: ignore[union-attr]
    end = float(re.search(rf"p\.{PLUGIN}\.end=([\d.]+)", hash_).group(1))  # type: ignore[union-attr]
    assert start <= gap["start_us"] and end >= gap["end_us"]
    assert end - start <= 1.3 * (gap["end_us"] - gap["start_us"]) + 2


def test_cpu_only_run_has_no_gpu_tab(page: Any, tb_samples: TensorBoard) -> None:
    assert api(tb_samples, "idle", CPU)["streams"] == []
    frame = open_view(page, tb_samples, CPU, "Overview")
    tabs = frame.eval_on_selector_all("[role=tab]", "els => els.map(e => e.dataset.view)")
    assert "GPU" not in tabs and "Operator" in tabs


def test_trace_view_has_queue_and_bandwidth_tracks_and_the_critical_path_overlay(page: Any, tb_samples: TensorBoard) -> None:
    from tests.browser.test_trace import hook, open_trace, wait_idle

    queues = api(tb_samples, "queue_length", TRANSFORMER)
    frame = open_trace(page, tb_samples)
    counters = [r["label"] for r in hook(frame, "rows") if r["kind"] == "counter"]
    (q,) = queues["streams"]
    assert f"GPU {q['device']} stream {q['stream']} queue length" in counters
    assert any(c.endswith("D2D bandwidth") for c in counters)
    window = api(tb_samples, "trace/window", TRANSFORMER, width_px="400")
    track = next(c for c in window["counters"] if c["name"].endswith("queue length"))
    assert track["unit"] == "count" and track["max"] >= q["summary"]["max"]

    # "Highlight critical path": the last step's path is outlined and summarised, shares as the API gives them.
    steps = [s[0] for s in window["steps"]]
    cp = api(tb_samples, "critical_path", TRANSFORMER, step=steps[-1])
    assert abs(sum(s["us"] for s in cp["shares"]) - cp["duration_us"]) < 1e-6 * cp["duration_us"]
    options = frame.eval_on_selector_all("[data-testid=trace-critical-path] option", "os => os.map(o => o.value)")
    assert options == ["", *(f"step:{s}" for s in dict.fromkeys(steps)), "range"]
    frame.select_option("[data-testid=trace-critical-path]", f"step:{steps[-1]}")
    top = max(cp["shares"], key=lambda s: s["us"])
    frame.wait_for_function("t => document.querySelector('[data-testid=trace-critical-summary]').textContent.includes(t)",
                            arg=f"{top['category'].replace('_', ' ')} {100 * top['share']:.1f}%")
    wait_idle(frame)
    frame.wait_for_function("() => window.__ptpTrace.stats().lastDraw.critical > 0", timeout=30_000)
    r = hook(frame, "visibleRange")
    assert r["start"] <= cp["start_us"] and r["end"] >= cp["end_us"]
    assert r["end"] - r["start"] <= 1.1 * cp["duration_us"]
    frame.select_option("[data-testid=trace-critical-path]", "")
    frame.wait_for_function("() => window.__ptpTrace.stats().lastDraw.critical === 0")
    assert frame.inner_text("[data-testid=trace-critical-summary]") == ""
    # The visible range (here the step fitted with a 2 % margin) is walked as a time range.
    frame.select_option("[data-testid=trace-critical-path]", "range")
    frame.wait_for_function("() => document.querySelector('[data-testid=trace-critical-summary]').textContent"
                            ".startsWith('Time range: ')")


def test_a_trace_without_steps_offers_its_annotations_for_the_critical_path(page: Any, tb_factory: Any,
                                                                            tmp_path: Any) -> None:
    """No ProfilerStep#N: the picker offers the trace's annotations and the range, never one giant step "0"."""
    from tests.browser.conftest import open_plugin
    from tests.browser.test_trace import P, wait_drawn
    from tests.conftest import write_trace
    from tests.unit.test_views_synthetic import kernel, launch, op

    events = [op("forward", 0, 40, cat="user_annotation"), op("aten::mm", 5, 20), launch(10, 5, corr=1),
              kernel("gemm", 20, 30, corr=1), op("optimizer", 60, 10, cat="user_annotation")]
    write_trace(tmp_path / "logs" / "nosteps" / "w.1.pt.trace.json", events)
    tb = tb_factory(tmp_path / "logs")
    tb.wait_settled()
    frame = open_plugin(page, tb, f"&{P}.run=nosteps&{P}.worker=w&{P}.span=1&{P}.view=Trace")
    wait_drawn(frame)
    frame.wait_for_function("() => document.querySelectorAll('[data-testid=trace-critical-path] option').length > 2")
    options = frame.eval_on_selector_all("[data-testid=trace-critical-path] option", "os => os.map(o => o.value)")
    assert options == ["", "annotation:forward", "annotation:optimizer", "range"]
    frame.select_option("[data-testid=trace-critical-path]", "annotation:forward")
    frame.wait_for_function("() => document.querySelector('[data-testid=trace-critical-summary]').textContent"
                            ".startsWith('Forward #1: kernel 60.0%')")


def test_operator_view_has_time_by_annotation(page: Any, tb_samples: TensorBoard) -> None:
    data = api(tb_samples, "annotations", TRANSFORMER)
    frame = open_view(page, tb_samples, TRANSFORMER, "Operator")
    frame.wait_for_selector("[data-testid=annotation-table] tbody tr[data-testid=row]")
    rows = table_rows(frame, "annotation-table")
    assert [r["name"] for r in rows] == [r["name"] for r in data["rows"][:10]]
    first = data["rows"][0]
    assert_duration(rows[0]["host"], first["host_us"])
    assert_duration(rows[0]["device"], first["device_us"])
    nested = next(i for i, r in enumerate(data["rows"][:10]) if r["depth"] > 0)
    indent = frame.eval_on_selector_all("[data-testid=annotation-table] .ptp-annotation", "els => els.map(e => e.style.paddingLeft)")
    assert indent[0] == "0px" and indent[nested] == "16px"
