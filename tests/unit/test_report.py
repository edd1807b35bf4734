"""The HTML report (``pytorch-tb-profiler report``): one palette for the step-breakdown categories in every chart
(the plugin's), the GPU table formatted as the Overview shows it, and the GPU view's section."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import tb_plugin
from tb_plugin.cli.report import gpu_table, render
from tb_plugin.sdk.plots import CATEGORY_COLORS, share_pie, step_bars
from tests.conftest import REAL_TRACES, REPO


def test_one_palette_the_plugins() -> None:
    """The Python palette is the frontend's (views/common/stepCategories.ts), colour for colour."""
    ts = (REPO / "frontend" / "src" / "views" / "common" / "stepCategories.ts").read_text()
    block = ts.split("export const CATEGORY_COLORS", 1)[1].split("};", 1)[0]
    frontend = {k.strip('"'): v for k, v in re.findall(r'\s*("?[\w ]+"?): "(#[0-9a-f]{6})"', block)}
    assert frontend == CATEGORY_COLORS


def test_bar_and_pie_colour_a_category_alike(tmp_path: Path) -> None:
    t = tb_plugin.open(REAL_TRACES / "kineto_v100" / "resnet50_num_workers_0", cache_dir=str(tmp_path))
    o = t.overview()
    bars = {trace.name: trace.marker.color for trace in step_bars(o.steps, list(o.breakdown.index)).data}
    pie = share_pie(o.breakdown).data[0]
    slices = dict(zip(pie.labels, pie.marker.colors, strict=True))
    assert bars == {c: CATEGORY_COLORS[c] for c in bars} and set(bars) == set(o.breakdown.index)
    assert slices == {c: CATEGORY_COLORS[c] for c in slices} and "DataLoader" in slices
    assert o.plot().data[0].marker.color == bars[o.plot().data[0].name]  # Overview.plot() draws the same
    assert o.plot("pie").data[0].marker.colors == pie.marker.colors


def test_gpu_table_is_formatted_and_the_gpu_section_is_there(tmp_path: Path) -> None:
    t = tb_plugin.open(REAL_TRACES / "h200" / "ddp_resnet50", cache_dir=str(tmp_path))
    (row,) = gpu_table(t.overview().gpus).to_dict("records")
    assert row["GPU"] == "GPU 0" and row["name"] == "NVIDIA H200"
    assert re.fullmatch(r"1[34]\d\.\d GiB", row["memory"]), row["memory"]  # not 150,1xx,xxx,xxx bytes
    assert re.fullmatch(r"\d{1,3}\.\d %", row["utilization (all kernels)"])
    assert re.fullmatch(r"\d{1,3}\.\d %", row["utilization without communication"])
    assert re.fullmatch(r"[\d,]+\.\d\d ms", row["kernel time"])
    page = render(t)
    assert "<h2>GPU</h2>" in page and "Busy and idle time per stream" in page
    assert "launch delay p50" in page
    gpu = page.split("<h2>GPU</h2>", 1)[1].split("<h2>", 1)[0]
    assert "0.0 GiB" not in gpu and "nan" not in gpu.lower()


@pytest.mark.parametrize("kind", ["bar", "pie"])
def test_overview_plot_is_a_plotly_figure(kind: str, tmp_path: Path) -> None:
    import plotly.graph_objects as go

    t = tb_plugin.open(REAL_TRACES / "h200" / "transformer_bf16", cache_dir=str(tmp_path))
    assert isinstance(t.overview().plot(kind), go.Figure)
    with pytest.raises(ValueError, match="kind must be one of bar, pie"):
        t.overview().plot("line")
