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
