"""``pytorch-tb-profiler report`` writes one self-contained HTML file: it opens in headless Chromium with the
network cut off (no request leaves the page) and every plotly chart in it renders its data."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tb_plugin.cli import main
from tests.browser.conftest import REAL_TRACES, SAMPLES

CASES = {
    # multi-rank GPU run: overview bars and pie, operators, kernels, GPU idle time, roofline, memory curve, per-rank bars
    "ddp": (REAL_TRACES / "h200" / "ddp_resnet50", 8),
    # CPU-only: no kernel chart and no roofline (notes instead), no distributed chart
    "cpu_only": (SAMPLES / "cpu_only", 4),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_report_renders_every_chart_offline(case: str, tmp_path: Path, browser: Any) -> None:
    source, charts = CASES[case]
    report = tmp_path / "report.html"
    assert main(["report", str(source), "-o", str(report), "--cache-dir", str(tmp_path / "cache")]) == 0

    context = browser.new_context(offline=True, viewport={"width": 1400, "height": 900})
    requests: list[str] = []
    errors: list[str] = []

    def route(r: Any) -> None:
        if not r.request.url.startswith("file://"):
            requests.append(r.request.url)
            r.abort()
        else:
            r.continue_()

    context.route("**/*", route)
    page = context.new_page()
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(report.as_uri())
    page.wait_for_function(
        "() => [...document.querySelectorAll('.plotly-graph-div')].every(d => d._fullLayout && d.querySelector("
        "'.main-svg'))", timeout=30_000)
    drawn = page.evaluate("""() => [...document.querySelectorAll('.plotly-graph-div')].map(d => ({
        title: d._fullLayout.title.text,
        traces: d._fullData.length,
        marks: d.querySelectorAll('.point, .slice, .js-line').length,
    }))""")
    context.close()

    assert requests == [] and errors == []
    assert len(drawn) == charts, drawn
    for chart in drawn:
        assert chart["traces"] > 0 and chart["marks"] > 0, chart  # bars, pie slices or lines really drawn
    titles = [c["title"] for c in drawn]
    assert titles[:2] == ["Step time breakdown (ms)", "Average step, by category"]
    assert ("Per rank, average step (ms)" in titles) == (case == "ddp")
    assert ("Roofline: kernels under the roofs of their class" in titles) == (case == "ddp")
