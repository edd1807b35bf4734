"""A torch.multiprocessing.spawn job in the Trace view (samples/ddp_resnet, at 1600×1000 and 1280×800): the main
thread nests ProfilerStep under <module>/spawn_main/_main/_bootstrap/… (7 levels), so it opens at the step level
with those frames folded above ("▴ 7 levels above" brings them back), and a link to a step keeps the step's lane on
screen."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.browser.conftest import PLUGIN, TensorBoard, link_or_copy, open_plugin
from tests.browser.test_click_through import SIZES
from tests.browser.test_trace import hook, wait_drawn, wait_idle
from tests.conftest import SAMPLES

pytestmark = pytest.mark.browser
P = f"p.{PLUGIN}"
LANE_H = 18  # traceLayout.LANE_H (the rows hook gives canvas y, the ruler and step bar included)


@pytest.fixture(scope="module")
def tb_spawn(tb_factory: Callable[..., TensorBoard], tmp_path_factory: pytest.TempPathFactory) -> TensorBoard:
    root: Path = tmp_path_factory.mktemp("logdir_spawn")
    for f in sorted((SAMPLES / "ddp_resnet").glob("*.pt.trace.json.gz")):
        link_or_copy(f, root / "ddp_resnet" / f.name)
    tb = tb_factory(root)
    tb.wait_settled()
    return tb


@pytest.fixture(params=SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def sized(page: Any, request: pytest.FixtureRequest) -> Any:
    page.set_viewport_size({"width": request.param[0], "height": request.param[1]})
    return page


def on_screen(frame: Any) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = hook(frame, "eventsOnScreen")
    return events


def open_trace(page: Any, tb: TensorBoard, extra: str = "") -> Any:
    frame = open_plugin(page, tb, f"&{P}.run=ddp_resnet&{P}.worker=rank0&{P}.span=1&{P}.view=Trace{extra}")
    wait_drawn(frame)
    return frame


def test_the_main_thread_opens_at_its_steps(sized: Any, tb_spawn: TensorBoard) -> None:
    frame = open_trace(sized, tb_spawn)
    names = {e["name"] for e in on_screen(frame)}
    assert {"ProfilerStep#2", "ProfilerStep#3"} <= names  # the step level, not hidden behind "more levels"
    assert not any(n.endswith("<module>") or n.endswith("spawn_main") for n in names)
    steps = [e for e in on_screen(frame) if e["name"].startswith("ProfilerStep#") and e["kind"] == "cpu"]
    assert {e["depth"] for e in steps} == {0}
    # "▴ 7 levels above", on the label of the thread's second lane, brings the frames above back
    row = next(r for r in hook(frame, "rows") if r["track"] == steps[0]["track"])
    stats = hook(frame, "stats")
    box = frame.query_selector("[data-testid=trace-canvas]").bounding_box()
    sized.mouse.click(box["x"] + 60, box["y"] - stats["scrollTop"] + row["y"] + 2 + LANE_H * 1.5)
    frame.wait_for_function("() => window.__ptpTrace.eventsOnScreen().some(e => e.name === 'ProfilerStep#2' "
                            "&& e.depth === 7)")  # the step's lane stays on screen, 7 levels down now
    wait_idle(frame)
    frame.evaluate("() => { document.querySelector('[data-testid=trace-scroller]').scrollTop = 0; }")
    frame.wait_for_function("() => window.__ptpTrace.eventsOnScreen().some(e => e.name.endsWith('<module>'))")


def test_a_step_link_keeps_the_steps_lane_on_screen(sized: Any, tb_spawn: TensorBoard) -> None:
    """The Overview's step bar opens the Trace view on the step with a category highlighted: the step's lane (on
    the main thread, below the GPU streams) is scrolled into view."""
    window = tb_spawn.get_json("trace/window?run=ddp_resnet&worker=rank0&span=1&width_px=100")
    name, start, dur = window["steps"][-1]
    start += window["t0"]
    frame = open_trace(sized, tb_spawn, f"&{P}.start={start - dur * 0.02:.3f}&{P}.end={start + dur * 1.02:.3f}"
                                        f"&{P}.cat=CPU%20Exec")
    frame.wait_for_function("n => window.__ptpTrace.eventsOnScreen().some(e => e.name === n && e.kind === 'cpu')",
                            arg=f"ProfilerStep#{name}")
