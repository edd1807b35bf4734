"""The Flame graph page inside the real TensorBoard: a 2026 ``with_stack`` trace (python_function frames), a 2021
trace (``Call stack`` args), zoom, search with its share, orientation, the folded export, the Operator view's link,
and the empty state of a trace without stacks. What is drawn is read from the page's ``window.__ptpFlame`` hook."""

from __future__ import annotations

import gzip
import re
import urllib.request
from collections import Counter
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

import pytest

from tests.browser.conftest import PLUGIN, TensorBoard, link_or_copy, open_plugin
from tests.conftest import REAL_TRACES, SAMPLES

pytestmark = pytest.mark.browser

H200 = ("h200_transformer", "vm_562")
V100 = ("v100_resnet50", "worker0")
EXPORTS = ("exports", "vm_1726")
NO_STACKS = ("ddp", "rank0")


@pytest.fixture(scope="module")
def tb_flame(tb_factory: Callable[..., TensorBoard], tmp_path_factory: pytest.TempPathFactory) -> TensorBoard:
    root = tmp_path_factory.mktemp("logdir_flame")
    for run, src in (
        (H200[0], REAL_TRACES / "h200" / "transformer_bf16"),
        (V100[0], REAL_TRACES / "kineto_v100" / "resnet50_num_workers_0"),
        (EXPORTS[0], SAMPLES / "transformer_bf16_exports"),
        (NO_STACKS[0], REAL_TRACES / "h200" / "ddp_resnet50"),
    ):
        first = sorted(src.glob("*.pt.trace.json.gz"))[0]
        link_or_copy(first, root / run / first.name)
    tb = tb_factory(root)
    tb.wait_settled()
    return tb


def api(tb: TensorBoard, run: tuple[str, str], **params: Any) -> Any:
    return tb.get_json(f"flamegraph?{urlencode({'run': run[0], 'worker': run[1], 'span': '1', **params})}")


def open_flame(page: Any, tb: TensorBoard, run: tuple[str, str]) -> Any:
    p = f"p.{PLUGIN}"
    frame = open_plugin(page, tb, f"&{p}.run={run[0]}&{p}.worker={run[1]}&{p}.span=1&{p}.view=Flame")
    frame.wait_for_selector("[data-testid=tab-Flame][aria-selected=true]")
    wait_drawn(frame)
    return frame


def wait_drawn(frame: Any) -> None:
    frame.wait_for_function("() => window.__ptpFlame && window.__ptpFlame.framesOnScreen().length > 1")


def drawn(frame: Any) -> list[dict[str, Any]]:
    frames: list[dict[str, Any]] = frame.evaluate("() => window.__ptpFlame.framesOnScreen()")
    return frames


def click_frame(frame: Any, f: dict[str, Any]) -> None:
    box = frame.locator("[data-testid=flame-canvas]").bounding_box()
    frame.page.mouse.click(box["x"] + f["x"] + min(f["w"] / 2, 20), box["y"] + f["y"] + f["h"] / 2)


def percent1(fraction: float) -> str:
    return f"{fraction * 100:.1f}%"


def expected_search(data: dict[str, Any], query: str) -> tuple[int, float]:
    """Count of matching frames and their value, a match inside a match not added (computed here from the JSON)."""
    parents, names, values = data["frames"]["parent"], data["frames"]["name"], data["frames"]["value"]
    covered: list[bool] = []
    count, value = 0, 0.0
    for f, p in enumerate(parents):
        hit = query.lower() in data["strings"][names[f]].lower()
        above = p >= 0 and covered[p]
        count += hit
        value += values[f] if hit and not above else 0.0
        covered.append(above or hit)
    return count, value


def test_2026_with_stack_trace_renders_zooms_and_searches(page: Any, tb_flame: TensorBoard) -> None:
    data = api(tb_flame, H200)
    frame = open_flame(page, tb_flame, H200)
    assert frame.locator("[data-testid=flame-no-stacks]").count() == 0
    shown = drawn(frame)
    root = shown[0]
    assert root["frame"] == -1 and root["value"] == pytest.approx(data["total"])
    names = {f["name"] for f in shown}
    assert "gen_traces.py(88): transformer_run" in names  # the user's own code, from python_function frames
    assert {f["kind"] for f in shown} >= {"user", "library", "operator", "runtime"}
    legend = frame.inner_text("[data-testid=flame-legend]")
    assert "Your code" in legend and "Library" in legend
    width = root["w"]

    # click to zoom: the frame spans the width, the breadcrumb names it, "all" zooms back out
    target = max((f for f in shown if f["frame"] >= 0 and f["kind"] == "library" and f["w"] < 0.9 * width),
                 key=lambda f: f["w"])
    click_frame(frame, target)
    frame.wait_for_function(f"() => window.__ptpFlame.zoomed() === {target['name']!r}")
    zoomed = next(f for f in drawn(frame) if f["frame"] == target["frame"])
    assert zoomed["w"] == pytest.approx(width) and zoomed["x"] == 0
    crumbs = frame.locator("[data-testid=flame-crumb]").all_inner_texts()
    assert crumbs[0] == "all" and crumbs[-1] == target["name"]
    children = [f for f in drawn(frame) if f["y"] == pytest.approx(zoomed["y"] - 18)]  # the row above (flame)
    assert children and sum(f["value"] for f in children) <= target["value"] * (1 + 1e-9)
    assert sum(f["w"] for f in children) == pytest.approx(width * sum(f["value"] for f in children) / target["value"],
                                                          abs=len(children))
    frame.locator("[data-testid=flame-crumb]").first.click()
    frame.wait_for_function("() => window.__ptpFlame.zoomed() === null")

    # search: every matching frame counts, also those too thin to draw (the Operator view's aten::mm total)
    frame.fill("[data-testid=flame-search]", "aten::mm")
    drawn_count, drawn_value = expected_search(data, "aten::mm")
    found = tb_flame.get_json("flamegraph/search?" + urlencode({"run": H200[0], "worker": H200[1], "span": "1",
                                                                "q": "aten::mm"}))
    ops = tb_flame.get_json("operators?" + urlencode({"run": H200[0], "worker": H200[1], "span": "1"}))
    (mm,) = [r for r in ops["rows"] if r["name"] == "aten::mm"]
    assert found["value"] == pytest.approx(mm["host_total_us"]) and found["value"] > drawn_value
    assert found["count"] > drawn_count == found["drawn"]
    frame.wait_for_function("() => !document.querySelector('[data-testid=flame-search-info]').textContent"
                            ".startsWith('Searching')")
    info = frame.inner_text("[data-testid=flame-search-info]")
    thin = found["count"] - found["drawn"]
    assert info.startswith(f"{found['count']} frames match ({thin} too thin to draw)")
    assert info.endswith(f"{percent1(found['value'] / data['total'])} of the total")

    # icicle: the root bar moves from the bottom to the top
    assert root["y"] > 0
    frame.click("[data-testid=flame-icicle]")
    frame.wait_for_function("() => window.__ptpFlame.framesOnScreen()[0].y < 2")

    # device time: the total is the kernels', with kernel frames
    device = api(tb_flame, H200, metric="self_device_us")
    frame.select_option("[data-testid=flame-metric]", "self_device_us")
    frame.wait_for_function(f"() => Math.abs(window.__ptpFlame.framesOnScreen()[0].value - {device['total']}) < 1e-6")
    assert "device" in {f["kind"] for f in drawn(frame)}


def test_2021_call_stack_trace_and_merge_by_function(page: Any, tb_flame: TensorBoard) -> None:
    data = api(tb_flame, V100)
    frame = open_flame(page, tb_flame, V100)
    assert frame.locator("[data-testid=flame-no-stacks]").count() == 0
    shown = drawn(frame)
    assert shown[0]["value"] == pytest.approx(data["total"])
    python = [f for f in shown if f["kind"] in ("user", "library")]
    assert python and all(re.search(r"\(\d+\): ", f["name"]) for f in python)  # frames from the Call stack args
    merged = api(tb_flame, V100, merge="function")
    frame.click("[data-testid=flame-merge]")
    frame.wait_for_function("() => !window.__ptpFlame.framesOnScreen().some("
                            "f => (f.kind === 'user' || f.kind === 'library') && /\\(\\d+\\): /.test(f.name))")
    assert drawn(frame)[0]["value"] == pytest.approx(merged["total"])
    assert merged["total"] == pytest.approx(data["total"])


def test_folded_export_link_and_the_text(page: Any, tb_flame: TensorBoard) -> None:
    frame = open_flame(page, tb_flame, EXPORTS)
    frame.hover("[data-testid=flame-open-folded]")
    href = frame.get_attribute("[data-testid=flame-open-folded]", "href")
    assert href and "format=folded" in href and "metric=self_host_us" in href
    with urllib.request.urlopen(tb_flame.plugin_url(href.removeprefix("./")), timeout=30) as resp:
        assert resp.headers["Content-Type"].startswith("text/plain")
        text = resp.read().decode()
    total = sum(int(line.rsplit(" ", 1)[1]) for line in text.splitlines())
    assert total == pytest.approx(api(tb_flame, EXPORTS)["total"], rel=0.002)
    assert_agrees_with_export_stacks(tb_flame, text)
    frame.click("[data-testid=flame-copy-folded]")  # clipboard, or the in-page text box where copying is blocked
    frame.wait_for_selector("[data-testid=toast], [data-testid=flame-folded-overlay]")
    overlay = frame.locator("[data-testid=flame-folded-overlay] [data-testid=overlay-text]")
    if overlay.count():
        assert overlay.input_value() == text
    else:
        assert re.match(r"Copied [\d,]+ folded stacks\.", frame.inner_text("[data-testid=toast]"))


def assert_agrees_with_export_stacks(tb: TensorBoard, text: str) -> None:
    """The served text against torch's ``export_stacks`` file of the same run, written alike: Python frames only
    (kinds from the JSON answer), torch's dropped frames out, spaces as '_'. torch cuts each event to whole µs, so
    its total is lower by less than 1 µs per event (the unit test does the per-event comparison)."""
    tree = api(tb, EXPORTS, min_share=0)
    python = {s for s, k in zip(tree["strings"], tree["kinds"]) if k in ("user", "library", "builtin", "module")}
    drops = (("autograd/__init__", "_make_grads"), ("autograd/__init__", "backward"), ("torch/tensor", "backward"))
    ours: Counter[str] = Counter()
    for line in text.splitlines():
        stack, weight = line.rsplit(" ", 1)
        frames = [f.replace(" ", "_") for f in stack.split(";")
                  if f in python and not any(a in f and b in f for a, b in drops)]
        if frames:
            ours[";".join(frames)] += int(weight)
    torch: Counter[str] = Counter()
    with gzip.open(SAMPLES / "exports" / "transformer_bf16_exports" / "stacks.self_cpu_time_total.txt.gz", "rt") as fh:
        for line in fh:
            stack, weight = line.rstrip("\n").rsplit(" ", 1)
            torch[stack] += int(weight)
    (top, weight), = torch.most_common(1)
    assert ours.most_common(1)[0][0] == top and ours[top] == pytest.approx(weight, rel=0.001)
    assert all(stack in ours for stack, _ in torch.most_common(15))
    assert sum(torch.values()) <= sum(ours.values()) <= 1.05 * sum(torch.values())


def test_operator_row_opens_its_stacks(page: Any, tb_flame: TensorBoard) -> None:
    only = api(tb_flame, H200, operator="aten::mm")
    p = f"p.{PLUGIN}"
    frame = open_plugin(page, tb_flame, f"&{p}.run={H200[0]}&{p}.worker={H200[1]}&{p}.span=1&{p}.view=Operator")
    frame.fill("[data-testid=search-name]", "aten::mm")
    row = frame.locator("[data-testid=operator-table] tr[data-testid=row]").filter(
        has=frame.locator("td[data-col=name]", has_text=re.compile(r"^aten::mm$")))
    row.locator("[data-testid=operator-stacks]").click()
    frame.wait_for_selector("[data-testid=tab-Flame][aria-selected=true]")
    wait_drawn(frame)
    assert "aten::mm" in frame.inner_text("[data-testid=flame-operator-filter]")
    assert drawn(frame)[0]["value"] == pytest.approx(only["total"])
    assert {f["name"] for f in drawn(frame)} >= {"aten::mm"}
    frame.click("[data-testid=flame-clear-operator]")
    frame.wait_for_function(f"() => window.__ptpFlame.framesOnScreen()[0].value > {only['total'] * 1.5}")


def test_a_trace_without_stacks_says_how_to_record_them(page: Any, tb_flame: TensorBoard) -> None:
    frame = open_flame(page, tb_flame, NO_STACKS)
    notice = frame.inner_text("[data-testid=flame-no-stacks]")
    assert "with_stack=True" in notice
    assert all(f["kind"] not in ("user", "library") for f in drawn(frame))



def test_step_picker_hover_and_an_operator_with_no_stacks(page: Any, tb_flame: TensorBoard) -> None:
    whole = api(tb_flame, EXPORTS)
    steps = whole["steps"]
    assert len(steps) >= 2
    frame = open_flame(page, tb_flame, EXPORTS)
    options = frame.eval_on_selector_all("[data-testid=flame-step] option", "els => els.map(e => e.textContent)")
    assert options == ["All steps", *[f"Step {s}" for s in steps]]
    one = api(tb_flame, EXPORTS, step=steps[-1])
    assert 0 < one["total"] < whole["total"]
    frame.select_option("[data-testid=flame-step]", steps[-1])
    frame.wait_for_function(f"() => Math.abs(window.__ptpFlame.framesOnScreen()[0].value - {one['total']}) < 1e-6")

    # hover: the frame's name, its share of the total and its self value
    widest = max((f for f in drawn(frame) if f["frame"] >= 0), key=lambda f: f["w"])
    box = frame.locator("[data-testid=flame-canvas]").bounding_box()
    frame.page.mouse.move(box["x"] + widest["x"] + widest["w"] / 2, box["y"] + widest["y"] + widest["h"] / 2)
    frame.wait_for_selector("[data-testid=flame-tooltip]:not([hidden])")
    tip = frame.inner_text("[data-testid=flame-tooltip]")
    assert widest["name"] in tip and f"{percent1(widest['value'] / one['total'])} of the total" in tip
    assert "self " in tip and "Click to zoom in" in tip

    # a link that names an operator the trace lacks: the empty state says so
    p = f"p.{PLUGIN}"
    frame = open_plugin(page, tb_flame, f"&{p}.run={EXPORTS[0]}&{p}.worker={EXPORTS[1]}&{p}.span=1&{p}.view=Flame"
                                         f"&{p}.flame_op=no%3A%3Asuch_op")
    frame.wait_for_selector("[data-testid=flame-empty]")
    assert frame.inner_text("[data-testid=flame-empty]") == "Nothing to show: no self host time inside no::such_op."
    assert "no::such_op" in frame.inner_text("[data-testid=flame-operator-filter]")
