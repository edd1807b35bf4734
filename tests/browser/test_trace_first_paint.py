"""The Trace view at common screen sizes: GPU streams on the first paint of a `with_stack=True` trace, each step
once in "Fit step…", the help panel closed for good, and times that never read "+-" or "-0"."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.browser.conftest import PLUGIN, PLUGIN_IFRAME, TensorBoard
from tests.browser.test_trace import canvas_box, hook, open_trace, wait_drawn, wait_idle

pytestmark = pytest.mark.browser

P = f"p.{PLUGIN}"
SIZES = [(1600, 1000), (1280, 800)]


def open_span(page: Any, tb: TensorBoard, run: str, worker: str, span: str, extra: str = "") -> Any:
    from tests.browser.conftest import open_plugin

    frame = open_plugin(page, tb, f"&{P}.run={run}&{P}.worker={worker}&{P}.span={span}&{P}.view=Trace{extra}")
    wait_drawn(frame)
    return frame


def step_options(frame: Any) -> list[str]:
    texts = frame.eval_on_selector_all("[data-testid=trace-step-select] option", "os => os.map(o => o.textContent)")
    return [t.split(" ")[1] for t in texts if t.startswith("Step ")]


# --------------------------------------------------------------------------------------------- GPU first


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("trace", ["samples_transformer", "h200_resnet18"])
def test_gpu_streams_are_on_the_first_paint(page: Any, tb_samples: TensorBoard, tb_main: TensorBoard,
                                            size: tuple[int, int], trace: str) -> None:
    """Both traces hold Python stacks 28 levels deep on their main thread (with_stack=True)."""
    page.set_viewport_size({"width": size[0], "height": size[1]})
    if trace == "samples_transformer":
        frame = open_span(page, tb_samples, "transformer_bf16", "vm_699", "1")
    else:
        frame = open_span(page, tb_main, "resnet18", "vm_562", "1")
    stats = hook(frame, "stats")
    assert stats["scrollTop"] == 0
    rows = [r for r in hook(frame, "rows") if r["kind"] == "track"]
    gpu = rows[0]
    assert gpu["label"] == "GPU 0 · stream 7"
    assert gpu["y"] > 0 and gpu["y"] + gpu["h"] <= stats["height"]  # wholly in view
    drawn = [e for e in hook(frame, "eventsOnScreen") if e["kind"] == "gpu"]
    assert len(drawn) >= 5 and all(e["y"] + e["h"] <= stats["height"] for e in drawn)  # (the rest: sub-pixel boxes)
    # the main thread's 28 levels open 4 deep, so the host is on screen too
    main = max(rows[1:], key=lambda r: r["h"])
    assert main["h"] == 4 * 18 + 5 and main["y"] < stats["height"]
    assert any(e["kind"] == "cpu" for e in hook(frame, "eventsOnScreen"))


def test_kineto_overhead_and_empty_counters_get_no_row(page: Any, tb_samples: TensorBoard) -> None:
    frame = open_span(page, tb_samples, "transformer_bf16", "vm_699", "1")
    labels = [r["label"] for r in hook(frame, "rows")]
    # CPU memory never exceeds 8 B in this trace: no "CPU memory" row (GPU 0's memory has one)
    assert "CPU memory" not in labels and "GPU 0 memory" in labels
    assert not any(label.startswith("process") for label in labels)


# --------------------------------------------------------------------------------------------- steps


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize(("fixture", "run", "worker", "steps"), [
    ("tb_memory_module", "v100_resnet50", "worker0", ["5", "6", "7", "8", "9", "10"]),
    ("tb_main", "resnet18", "vm_562", ["2", "3", "4"]),
])
def test_each_step_once_in_fit_step(page: Any, request: pytest.FixtureRequest, fixture: str, run: str, worker: str,
                                    steps: list[str], size: tuple[int, int]) -> None:
    page.set_viewport_size({"width": size[0], "height": size[1]})
    tb = request.getfixturevalue(fixture)
    frame = open_span(page, tb, run, worker, "1")
    assert step_options(frame) == steps
    # every window answer lists the steps again, each from its own t0: zoom and pan through several windows
    frame.focus("[data-testid=trace-scroller]")
    for key in ("w", "w", "d", "w", "a", "a", "s"):
        page.keyboard.press(key)
        page.wait_for_timeout(150)
    wait_idle(frame)
    assert hook(frame, "stats")["windows"] >= 3
    assert step_options(frame) == steps
    frame.click("[data-testid=trace-fit]")
    frame.wait_for_function("() => { const r = window.__ptpTrace.visibleRange(); return r.start === r.bounds[0]; }")
    wait_idle(frame)
    drawn = hook(frame, "stats")["lastDraw"]["steps"]
    assert len(drawn) == len(set(drawn)) and all(re.fullmatch(r"Step \d+|S\S*…", s) for s in drawn), drawn
    assert step_options(frame) == steps


# --------------------------------------------------------------------------------------------- help panel


def test_help_panel_closes_and_stays_closed(page: Any, tb_samples: TensorBoard) -> None:
    frame = open_span(page, tb_samples, "transformer_bf16", "vm_699", "1")
    frame.wait_for_selector("[data-testid=trace-details-empty]")
    assert "zoom around the cursor" in frame.inner_text("[data-testid=trace-details-empty]")
    narrow = canvas_box(frame)["width"]
    assert frame.get_attribute("[data-testid=trace-help-toggle]", "aria-pressed") == "true"
    frame.click("[data-testid=trace-help-close]")
    frame.wait_for_selector("[data-testid=trace-side]", state="hidden")
    frame.wait_for_function("w => document.querySelector('[data-testid=trace-canvas]').getBoundingClientRect().width > w + 300",
                            arg=narrow)
    assert frame.get_attribute("[data-testid=trace-help-toggle]", "aria-pressed") == "false"

    page.reload()
    frame = page.wait_for_selector(PLUGIN_IFRAME).content_frame()
    wait_drawn(frame)
    assert frame.query_selector("[data-testid=trace-details-empty]") is None
    assert not frame.is_visible("[data-testid=trace-side]")
    assert canvas_box(frame)["width"] > narrow + 300

    # a selected event still shows its details; "?" brings the help back, for good too
    frame.click("[data-testid=trace-help-toggle]")
    frame.wait_for_selector("[data-testid=trace-details-empty]")
    page.reload()
    frame = page.wait_for_selector(PLUGIN_IFRAME).content_frame()
    wait_drawn(frame)
    frame.wait_for_selector("[data-testid=trace-details-empty]")


# --------------------------------------------------------------------------------------------- signs


BAD_ZERO = re.compile(r"(^|[^\d.,])-0(\.0+)?(?![\d.])")


def check_signs(frame: Any) -> tuple[str, list[str]]:
    readout = frame.inner_text("[data-testid=trace-readout]")
    ticks = hook(frame, "stats")["lastDraw"]["ticks"]
    assert ticks, "no ruler labels drawn"
    for text in [readout, *ticks]:
        assert "+-" not in text and "+\u2212" not in text and not BAD_ZERO.search(text), text
    return readout, ticks


def test_readout_and_axis_never_read_plus_minus_or_minus_zero(page: Any, tb_samples: TensorBoard) -> None:
    frame = open_trace(page, tb_samples)
    bounds = hook(frame, "visibleRange")["bounds"]
    # a view reaching before the trace start (panned left as far as it goes)
    frame.focus("[data-testid=trace-scroller]")
    page.keyboard.down("a")
    page.wait_for_timeout(1200)
    page.keyboard.up("a")
    wait_idle(frame)
    r = hook(frame, "visibleRange")
    assert r["start"] < bounds[0]
    readout, ticks = check_signs(frame)
    assert readout.startswith("Showing \u2212") and " to +" in readout
    assert any(t.startswith("-") for t in ticks) and "0 ms" in ticks

    # 1 µs around the start: ticks a hair either side of zero in tenths of a µs
    start, end = bounds[0] - 0.5, bounds[0] + 0.5
    frame = open_trace(page, tb_samples, f"&{P}.start={start:.3f}&{P}.end={end:.3f}")
    readout, ticks = check_signs(frame)
    assert "0.0 µs" in ticks and any(t.startswith("-0.") for t in ticks)
    assert readout == "Showing \u2212500 ns to +500 ns (1.000 µs)"
