"""The Trace view (timeline) inside the real TensorBoard, checked against the plugin's ./trace/* routes.

The page exposes a read-only debug hook in its frame, ``window.__ptpTrace`` (visibleRange, selected, stats,
eventsOnScreen, selectedRange), which the tests use to find what is drawn where on the canvas.
"""

from __future__ import annotations

import gzip
import json
import re
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlencode, urlparse

import pytest

from tests.browser.conftest import PLUGIN, PLUGIN_IFRAME, REPO, SAMPLES, ConsoleLog, TensorBoard, open_plugin, top_hash

pytestmark = pytest.mark.browser

RUN, WORKER = "transformer_bf16", "vm_699"
TRACE_FILE = next(iter(sorted((SAMPLES / RUN).glob("*.pt.trace.json.gz"))), None)
SCREENSHOT = REPO / "docs" / "images" / "trace.png"
P = f"p.{PLUGIN}"

FAKE_PERFETTO = """<!doctype html><html><head><title>fake perfetto</title></head><body><script>
window.addEventListener('message', (e) => {
  if (e.data === 'PING') { e.source.postMessage('PONG', '*'); return; }
  if (e.data && e.data.perfetto) {
    const p = e.data.perfetto;
    document.title = 'got ' + p.buffer.byteLength + ' ' + p.fileName;
  }
});
</script></body></html>"""


# --------------------------------------------------------------------------------------------- helpers


def api(tb: TensorBoard, route: str, **params: Any) -> Any:
    query = urlencode({"run": RUN, "worker": WORKER, "span": "1", **params})
    return tb.get_json(f"{route}?{query}")



def open_trace(page: Any, tb: TensorBoard, extra: str = "") -> Any:
    """Open the Trace tab of the transformer sample and wait for the first frame drawn from data."""
    frame = open_plugin(page, tb, f"&{P}.run={RUN}&{P}.worker={WORKER}&{P}.span=1&{P}.view=Trace{extra}")
    wait_drawn(frame)
    return frame


def wait_drawn(frame: Any) -> None:
    frame.wait_for_function("() => window.__ptpTrace && window.__ptpTrace.stats().firstPaintAt > 0", timeout=60_000)
    wait_idle(frame)


# true once the view has been settled for three animation frames in a row: no window request in flight or waiting
# for its debounce, no zoom or pan gliding (a glide's end asks for a window, an answer may ask for the next one)
SETTLED_FRAMES = """() => {
    const s = window.__ptpTrace.stats();
    window.__ptpSettledFrames = !s.loading && !s.scheduled && !s.animating ? (window.__ptpSettledFrames || 0) + 1 : 0;
    return window.__ptpSettledFrames >= 3;
}"""


def wait_idle(frame: Any) -> None:
    """No window request in flight or pending, no glide under way, and frames drawn since."""
    frame.evaluate("() => { window.__ptpSettledFrames = 0; }")
    frame.wait_for_function(SETTLED_FRAMES, timeout=30_000)  # polled once an animation frame


def hook(frame: Any, fn: str) -> Any:
    return frame.evaluate(f"() => window.__ptpTrace.{fn}()")


def span_of(frame: Any) -> float:
    r = hook(frame, "visibleRange")
    return float(r["end"] - r["start"])


def canvas_box(frame: Any) -> dict[str, float]:
    box = frame.query_selector("[data-testid=trace-canvas]").bounding_box()
    assert box is not None
    return box


def click_event(page: Any, frame: Any, event: dict[str, Any], **kwargs: Any) -> None:
    box = canvas_box(frame)
    page.mouse.click(box["x"] + event["x"] + min(event["w"] / 2, 40), box["y"] + event["y"] + event["h"] / 2, **kwargs)


def on_screen(frame: Any, event_id: int) -> dict[str, Any]:
    """Where an event is drawn; scroll down to the host threads when it is not in view."""
    present = "id => window.__ptpTrace.eventsOnScreen().some(e => e.id === id)"
    wait_idle(frame)
    if not frame.evaluate(present, event_id):
        frame.eval_on_selector("[data-testid=trace-scroller]", "e => { e.scrollTop = e.scrollHeight; }")
    frame.wait_for_function(present, arg=event_id)
    events = hook(frame, "eventsOnScreen")
    return next(e for e in events if e["id"] == event_id)


def pixel(frame: Any, x: float, y: float) -> list[int]:
    return frame.evaluate(
        """([x, y]) => {
            const c = document.querySelector('[data-testid=trace-canvas]');
            const r = window.devicePixelRatio || 1;
            return Array.from(c.getContext('2d').getImageData(Math.round(x * r), Math.round(y * r), 1, 1).data);
        }""",
        [x, y],
    )


def kernel_with_launcher(tb: TensorBoard, query: str = "nvjet") -> tuple[dict[str, Any], dict[str, Any]]:
    """A kernel (search hit) and its details, whose launching call is known."""
    hits = api(tb, "trace/search", q=query, limit=50)["items"]
    for hit in hits[5:]:
        details = api(tb, "trace/event", id=hit["id"])
        if details.get("launched_by"):
            return hit, details
    raise AssertionError(f"no {query} kernel with a launching call")


def range_hash(hit: dict[str, Any], before: float = 8, after: float = 12) -> str:
    start = hit["start_us"] - before * max(hit["dur_us"], 2.0)
    end = hit["start_us"] + after * max(hit["dur_us"], 2.0)
    return f"&{P}.start={start:.3f}&{P}.end={end:.3f}"


def track_rows(frame: Any) -> dict[str, Any]:
    return frame.evaluate("() => window.__ptpTrace.stats()")


@pytest.fixture(scope="module")
def tb(tb_samples: TensorBoard) -> TensorBoard:
    assert TRACE_FILE is not None, f"samples/{RUN} has no trace file"
    return tb_samples


# --------------------------------------------------------------------------------------------- drawing


def test_tracks_steps_and_counters_are_drawn(page: Any, tb: TensorBoard) -> None:
    window = api(tb, "trace/window", width_px=800)
    frame = open_trace(page, tb)
    stats = hook(frame, "stats")
    assert stats["tracks"] == len(window["tracks"])
    assert stats["windows"] >= 1 and stats["lastDraw"]["events"] > 100
    r = hook(frame, "visibleRange")
    assert r["bounds"] == window["bounds"]
    assert (r["start"], r["end"]) == tuple(window["bounds"])  # the whole trace at first

    # Events are painted where the page says they are (not the background colour).
    events = [e for e in hook(frame, "eventsOnScreen") if e["w"] >= 6]
    assert any(e["kind"] == "cpu" for e in events)
    background = pixel(frame, stats["labelW"] + 2, stats["height"] - 2)
    painted = sum(1 for e in events[:40] if pixel(frame, e["x"] + e["w"] / 2, e["y"] + e["h"] / 2)[:3] != background[:3])
    assert painted >= min(20, len(events[:40]))

    # Steps fill the step selector; the readout names the visible range.
    steps = [o for o in frame.eval_on_selector_all("[data-testid=trace-step-select] option", "os => os.map(o => o.textContent)") if o.startswith("Step ")]
    assert [s.split(" ")[1] for s in steps] == [s[0] for s in window["steps"]]
    total_ms = (window["bounds"][1] - window["bounds"][0]) / 1000
    assert f"({total_ms:,.3f} ms)" in frame.inner_text("[data-testid=trace-readout]")


def test_zoom_with_keys_and_wheel_fetches_new_windows(page: Any, tb: TensorBoard) -> None:
    frame = open_trace(page, tb)
    windows: list[str] = []
    page.on("request", lambda r: windows.append(r.url) if "/trace/window?" in r.url else None)
    full = span_of(frame)
    first_px_us = hook(frame, "stats")["lastWindow"]["px_us"]

    frame.focus("[data-testid=trace-scroller]")
    page.keyboard.press("w")
    frame.wait_for_function("s => { const r = window.__ptpTrace.visibleRange(); return r.end - r.start < s * 0.85; }", arg=full)
    wait_idle(frame)
    after_key = span_of(frame)
    assert windows, "zooming asked for no new window"
    q = parse_qs(urlparse(windows[-1]).query)
    px_us = (float(q["end_us"][0]) - float(q["start_us"][0])) / int(q["width_px"][0])
    assert px_us < first_px_us * 0.9  # finer: the screen's resolution of the narrower view
    assert int(q["width_px"][0]) >= 500

    # Holding S zooms out continuously.
    page.keyboard.down("s")
    page.wait_for_timeout(500)
    page.keyboard.up("s")
    assert span_of(frame) > after_key * 1.3

    # A plain wheel scrolls the tracks (Perfetto's model) and leaves the time range alone.
    box = canvas_box(frame)
    stats = hook(frame, "stats")
    x = stats["labelW"] + (stats["width"] - stats["labelW"]) * 0.3
    page.mouse.move(box["x"] + x, box["y"] + 200)
    before = hook(frame, "visibleRange")
    top = frame.eval_on_selector("[data-testid=trace-scroller]", "e => e.scrollTop")
    page.mouse.wheel(0, 120)
    frame.wait_for_function("t => document.querySelector('[data-testid=trace-scroller]').scrollTop > t", arg=top)
    page.wait_for_timeout(200)
    assert hook(frame, "visibleRange") == before
    frame.eval_on_selector("[data-testid=trace-scroller]", "e => { e.scrollTop = 0; }")

    # Ctrl + wheel (a trackpad pinch) zooms around the cursor: the time under it stays put (from the whole trace,
    # so that no point of the zoomed view falls outside the trace, where the view would be moved back in).
    frame.click("[data-testid=trace-fit]")
    frame.wait_for_function("() => { const r = window.__ptpTrace.visibleRange(); return r.start === r.bounds[0] && r.end === r.bounds[1]; }")
    page.mouse.move(box["x"] + x, box["y"] + 200)
    before = hook(frame, "visibleRange")
    t_under = before["start"] + (x - stats["labelW"]) / (stats["width"] - stats["labelW"]) * (before["end"] - before["start"])
    n = len(windows)
    page.keyboard.down("Control")
    for _ in range(2):
        page.mouse.wheel(0, -200)
    page.keyboard.up("Control")
    frame.wait_for_function("s => { const r = window.__ptpTrace.visibleRange(); return r.end - r.start < s * 0.4; }", arg=before["end"] - before["start"])
    wait_idle(frame)
    after = hook(frame, "visibleRange")
    t_after = after["start"] + (x - stats["labelW"]) / (stats["width"] - stats["labelW"]) * (after["end"] - after["start"])
    assert abs(t_after - t_under) < (after["end"] - after["start"]) * 0.01
    assert len(windows) > n
    assert frame.eval_on_selector("[data-testid=trace-scroller]", "e => e.scrollTop") == 0  # zooming scrolled nothing

    # shift+wheel pans, keeping the span; A/D pan too; Fit shows everything again.
    span = span_of(frame)
    start = hook(frame, "visibleRange")["start"]
    page.keyboard.down("Shift")
    page.mouse.wheel(0, 300)
    page.keyboard.up("Shift")
    frame.wait_for_function("s => window.__ptpTrace.visibleRange().start > s", arg=start)
    assert abs(span_of(frame) - span) < span * 1e-6
    start = hook(frame, "visibleRange")["start"]
    frame.focus("[data-testid=trace-scroller]")
    page.keyboard.press("a")
    frame.wait_for_function("s => window.__ptpTrace.visibleRange().start < s", arg=start)
    frame.click("[data-testid=trace-fit]")
    frame.wait_for_function("() => { const r = window.__ptpTrace.visibleRange(); return r.start === r.bounds[0] && r.end === r.bounds[1]; }")


def test_drag_pans_and_step_selector_fits_a_step(page: Any, tb: TensorBoard) -> None:
    window = api(tb, "trace/window", width_px=100)
    frame = open_trace(page, tb)
    frame.select_option("[data-testid=trace-step-select]", "1")
    _name, t, dur = window["steps"][1]
    t0 = window["t0"] + t
    frame.wait_for_function(
        "([a, b]) => { const r = window.__ptpTrace.visibleRange(); return Math.abs(r.start - a) < 1 && Math.abs(r.end - b) < 1; }",
        arg=[t0 - dur * 0.02, t0 + dur * 1.02])
    before = hook(frame, "visibleRange")
    box = canvas_box(frame)
    stats = hook(frame, "stats")
    y = box["y"] + stats["height"] - 30
    page.mouse.move(box["x"] + 600, y)
    page.mouse.down()
    page.mouse.move(box["x"] + 500, y, steps=5)
    page.mouse.up()
    after = hook(frame, "visibleRange")
    moved = (after["start"] - before["start"]) / (before["end"] - before["start"]) * (stats["width"] - stats["labelW"])
    assert abs(moved - 100) < 2  # dragged 100 px left = the view moved 100 px right
    assert hook(frame, "selected") is None  # a drag is not a click


def row_of(frame: Any, label: str) -> dict[str, Any]:
    return next(r for r in hook(frame, "rows") if r["label"] == label)


def levels_param(url: str) -> dict[int, int]:
    raw = parse_qs(urlparse(url).query).get("levels", [""])[0]
    return {int(k): int(v) for k, v in (p.split(":") for p in raw.split(",") if p)}


def test_collapse_expand_and_fold_tracks(page: Any, tb: TensorBoard) -> None:
    window = api(tb, "trace/window", width_px=100)
    deep = max(window["tracks"], key=lambda t: t["depths"])
    assert deep["kind"] == "cpu" and deep["depths"] == 28  # the main thread's Python stacks
    windows: list[str] = []
    page.on("request", lambda r: windows.append(r.url) if "/trace/window?" in r.url else None)
    frame = open_trace(page, tb)
    # A deep host thread opens 4 levels deep: the first window (asked before the tracks are known) says so with
    # host_levels=4, and was answered with those lanes only, so no second window was needed for them.
    assert parse_qs(urlparse(windows[0]).query).get("host_levels") == ["4"]
    assert all("levels" not in parse_qs(urlparse(u).query) for u in windows)
    box = canvas_box(frame)
    row = row_of(frame, deep["label"])
    assert row["h"] == 4 * 18 + 5 and not row["collapsed"]
    assert all(e["depth"] < 4 for e in hook(frame, "eventsOnScreen") if e["track"] == deep["id"])

    # The last lane's label ("▸ 24 more levels") expands it to every level.
    height = frame.eval_on_selector("[data-testid=trace-scroller]", "e => e.scrollHeight")
    page.mouse.click(box["x"] + 40, box["y"] + row["y"] + 3 * 18 + 10)
    frame.wait_for_function("h => document.querySelector('[data-testid=trace-scroller]').scrollHeight > h", arg=height)
    assert row_of(frame, deep["label"])["h"] == 28 * 18 + 5
    wait_idle(frame)
    # (the autograd thread, 8 levels deep, still shows 4 of them)
    assert levels_param(windows[-1]) == {t["id"]: 4 for t in window["tracks"] if t["kind"] == "cpu" and t["id"] != deep["id"]}
    assert any(e["depth"] >= 4 for e in hook(frame, "eventsOnScreen") if e["track"] == deep["id"])

    # The triangle beside the label collapses it to depth 0.
    height = frame.eval_on_selector("[data-testid=trace-scroller]", "e => e.scrollHeight")
    page.mouse.click(box["x"] + 20, box["y"] + row_of(frame, deep["label"])["y"] + 10)
    frame.wait_for_function("h => document.querySelector('[data-testid=trace-scroller]').scrollHeight < h", arg=height)
    assert row_of(frame, deep["label"])["collapsed"]
    wait_idle(frame)
    assert levels_param(windows[-1])[deep["id"]] == 1
    assert all(e["depth"] == 0 for e in hook(frame, "eventsOnScreen") if e["track"] == deep["id"])

    # Folding the process hides all its tracks (and asks for none of their nested lanes).
    process = row_of(frame, deep["process"])
    page.mouse.click(box["x"] + 10, box["y"] + process["y"] + 10)
    wait_idle(frame)
    ids = sorted(t["id"] for t in window["tracks"] if t["process"] == deep["process"])
    assert levels_param(windows[-1]) == dict.fromkeys(ids, 1)
    assert not any(r["track"] in ids for r in hook(frame, "rows"))
    page.mouse.click(box["x"] + 10, box["y"] + row_of(frame, deep["process"])["y"] + 10)
    frame.wait_for_function("id => window.__ptpTrace.rows().some(r => r.track === id)", arg=deep["id"])


# --------------------------------------------------------------------------------------------- selection


def test_click_kernel_shows_launch_and_follows_it(page: Any, tb: TensorBoard) -> None:
    hit, details = kernel_with_launcher(tb)
    launcher = details["launched_by"]
    frame = open_trace(page, tb, range_hash(hit))
    kernel = on_screen(frame, hit["id"])
    assert kernel["kind"] == "gpu"
    click_event(page, frame, kernel)
    frame.wait_for_function("id => window.__ptpTrace.selected()?.id === id && window.__ptpTrace.selected().details", arg=hit["id"])
    assert frame.inner_text("[data-testid=trace-details-name]") == hit["name"]
    facts = frame.inner_text("[data-testid=trace-details-facts]")
    assert "kernel" in facts and "GPU 0 · stream" in facts
    link = frame.wait_for_selector("[data-testid=trace-launched-by-link]")
    assert link.get_attribute("data-id") == str(launcher["id"])
    assert launcher["name"] in link.inner_text()
    assert frame.query_selector(f"[data-testid=trace-operator-link][data-id='{details['operator']['id']}']") is not None
    assert hook(frame, "stats")["arrows"] >= 1  # the launch → kernel flow is drawn

    # Follow the link: the launching call is selected and shown, with the kernel among its launches.
    link.click()
    frame.wait_for_function("id => window.__ptpTrace.selected()?.id === id && window.__ptpTrace.selected().details", arg=launcher["id"])
    assert frame.inner_text("[data-testid=trace-details-name]") == launcher["name"]
    assert frame.query_selector(f"[data-testid=trace-launched-link][data-id='{hit['id']}']") is not None
    wait_idle(frame)
    shown = on_screen(frame, launcher["id"])  # revealed: on screen, in its CPU lane
    assert shown["kind"] == "cpu"
    r = hook(frame, "visibleRange")
    assert r["start"] <= launcher["start_us"] and launcher["start_us"] + launcher["dur_us"] <= r["end"]
    assert hook(frame, "stats")["arrows"] >= 1

    # Its call stack: a frame click copies path:line (outside VS Code) and says so.
    stack = api(tb, "trace/event", id=launcher["id"]).get("call_stack") or []
    assert stack, "the launching call has no call stack"
    frames = frame.query_selector_all("[data-testid=trace-call-stack] [data-testid=frame]")
    assert frames
    frames[0].click()
    # the user's own frame leads (the innermost one outside torch and the standard library; see ./sources)
    users = [f for f in stack if frames[0].get_attribute("data-path") and f.startswith(frames[0].get_attribute("data-path") + "(")]
    assert frames[0].get_attribute("data-kind") == "user" and users
    path, line = re.match(r"^(.*)\((\d+)\): ", users[0]).groups()  # type: ignore[union-attr]
    frame.wait_for_function("t => document.querySelector('[data-testid=toast]')?.textContent.includes(t)", arg=f"{path}:{line}")

    # Escape clears the selection; double-click zooms to an event.
    frame.focus("[data-testid=trace-scroller]")
    page.keyboard.press("Escape")
    frame.wait_for_function("() => window.__ptpTrace.selected() === null")
    shown = on_screen(frame, launcher["id"])
    box = canvas_box(frame)
    page.mouse.dblclick(box["x"] + shown["x"] + min(shown["w"] / 2, 30), box["y"] + shown["y"] + 8)
    frame.wait_for_function(
        "([s, d]) => { const r = window.__ptpTrace.visibleRange(); return r.start <= s && r.end >= s + d && r.end - r.start < d * 1.5; }",
        arg=[launcher["start_us"], launcher["dur_us"]])


def test_call_stack_frame_in_a_plain_frame_copies(page: Any, tb: TensorBoard, console: ConsoleLog) -> None:
    """TensorBoard framed by a page that is not VS Code's webview (Jupyter, Colab, a portal): a frame click copies
    its location and posts nothing (VS Code's own origin is tested in test_click_through.py)."""
    hit, details = kernel_with_launcher(tb)
    launcher = api(tb, "trace/event", id=details["launched_by"]["id"])
    url = f"{tb.url}/#{PLUGIN}&{P}.run={RUN}&{P}.worker={WORKER}&{P}.span=1&{P}.view=Trace" + range_hash(hit)
    # A stand-in for VS Code's webview: a page that frames TensorBoard and records the messages it gets. (Chromium
    # blocks a page fulfilled by the test from framing 127.0.0.1, so it is one of the server's own pages, emptied.)
    console.allowed.append("/favicon.ico")  # that page has no icon
    page.goto(f"{tb.url}/data/plugins_listing")
    page.evaluate("""url => {
        window.__messages = [];
        window.addEventListener('message', e => window.__messages.push(e.data));
        document.body.textContent = '';
        const f = document.createElement('iframe');
        f.src = url; f.style.cssText = 'width:1380px;height:880px;border:0';
        document.body.appendChild(f);
    }""", url)
    tb_frame = page.wait_for_selector("iframe").content_frame()
    frame = tb_frame.wait_for_selector(PLUGIN_IFRAME).content_frame()
    wait_drawn(frame)
    click_event(page, frame, on_screen(frame, hit["id"]))
    frame.wait_for_selector("[data-testid=trace-launched-by-link]").click()
    frame.wait_for_selector(f"[data-testid=trace-details][data-id='{launcher['id']}'] [data-testid=trace-call-stack] [data-testid=frame]")
    first = frame.wait_for_selector("[data-testid=trace-call-stack] [data-testid=frame] >> nth=0")
    where = f"{first.get_attribute('data-path')}:{first.get_attribute('data-line')}"
    first.click()
    frame.wait_for_function("t => (document.querySelector('[data-testid=toast]')?.textContent || '').includes(t)", arg=where)
    messages = [m for m in page.evaluate("() => window.__messages") if isinstance(m, dict) and "filename" in m]
    assert messages == []
    assert any(f.startswith(where.rsplit(":", 1)[0] + "(") for f in launcher["call_stack"])


# --------------------------------------------------------------------------------------------- search


def test_search_steps_through_hits(page: Any, tb: TensorBoard) -> None:
    first = api(tb, "trace/search", q="nvjet", limit=100)
    total = first["total"]
    assert total > 2
    last = api(tb, "trace/search", q="nvjet", offset=total - 1, limit=1)["items"][0]
    frame = open_trace(page, tb)
    frame.fill("[data-testid=trace-search]", "nvjet")
    frame.press("[data-testid=trace-search]", "Enter")
    count = "[data-testid=trace-search-count]"

    def at(k: int, item: dict[str, Any]) -> None:
        frame.wait_for_function("([sel, t]) => document.querySelector(sel).textContent === t", arg=[count, f"{k} of {total}"])
        frame.wait_for_function("id => window.__ptpTrace.selected()?.id === id", arg=item["id"])
        frame.wait_for_function(  # the view glides to the hit
            "([s, d]) => { const r = window.__ptpTrace.visibleRange(); return r.start <= s && s + d <= r.end; }",
            arg=[item["start_us"], item["dur_us"]])

    at(1, first["items"][0])
    wait_idle(frame)
    on_screen(frame, first["items"][0]["id"])  # zoomed until the hit is drawn as itself
    frame.press("[data-testid=trace-search]", "Enter")
    at(2, first["items"][1])
    frame.press("[data-testid=trace-search]", "Shift+Enter")
    at(1, first["items"][0])
    frame.click("[data-testid=trace-search-prev]")
    at(total, last)  # wraps to the last hit (another page of results)
    frame.click("[data-testid=trace-search-next]")
    at(1, first["items"][0])
    assert top_hash(page)[f"{P}.q"] == "nvjet"
    frame.fill("[data-testid=trace-search]", "no-such-event-anywhere")
    frame.press("[data-testid=trace-search]", "Enter")
    frame.wait_for_function("sel => document.querySelector(sel).textContent === 'no matches'", arg=count)


def test_quoted_search_finds_the_exact_name_only(page: Any, tb: TensorBoard) -> None:
    """`aten::add` also finds aten::add_, aten::addmm…; `"aten::add"` finds aten::add alone (Linear_1 vs Linear_10)."""
    exact = api(tb, "trace/search", q="aten::add", match="exact", limit=1000)
    loose = api(tb, "trace/search", q="aten::add", limit=1)["total"]
    assert 0 < exact["total"] < loose and {i["name"] for i in exact["items"]} == {"aten::add"}
    frame = open_trace(page, tb)
    count = "[data-testid=trace-search-count]"
    frame.fill("[data-testid=trace-search]", "aten::add")
    frame.wait_for_function("([sel, t]) => document.querySelector(sel).textContent === t", arg=[count, f"{loose:,} matches"])
    frame.fill("[data-testid=trace-search]", '"aten::add"')
    frame.wait_for_function("([sel, t]) => document.querySelector(sel).textContent === t",
                            arg=[count, f"{exact['total']:,} exact matches"])
    frame.press("[data-testid=trace-search]", "Enter")
    frame.wait_for_function("id => window.__ptpTrace.selected()?.id === id", arg=exact["items"][0]["id"])
    assert hook(frame, "selected")["name"] == "aten::add"
    assert unquote(top_hash(page)[f"{P}.q"]) == '"aten::add"'


def test_search_deep_link_selects_the_first_hit(page: Any, tb: TensorBoard) -> None:
    first = api(tb, "trace/search", q="aten::mm", limit=1)
    frame = open_trace(page, tb, f"&{P}.q=aten%3A%3Amm")
    assert frame.input_value("[data-testid=trace-search]") == "aten::mm"
    frame.wait_for_function("id => window.__ptpTrace.selected()?.id === id", arg=first["items"][0]["id"])
    assert frame.inner_text("[data-testid=trace-search-count]") == f"1 of {first['total']:,}"


# --------------------------------------------------------------------------------------------- box select


def test_box_select_aggregates_the_range(page: Any, tb: TensorBoard) -> None:
    frame = open_trace(page, tb)
    box = canvas_box(frame)
    stats = hook(frame, "stats")
    x0 = box["x"] + stats["labelW"] + 100
    y_top = box["y"] + 50
    with page.expect_request(lambda r: "/trace/range?" in r.url) as req:
        page.keyboard.down("Shift")
        page.mouse.move(x0, y_top)
        page.mouse.down()
        page.mouse.move(x0 + 150, box["y"] + stats["height"] - 5, steps=4)
        page.mouse.up()
        page.keyboard.up("Shift")
    rows = frame.wait_for_selector("[data-testid=trace-range-table]")
    assert rows is not None
    sel = hook(frame, "selectedRange")
    query = parse_qs(urlparse(req.value.url).query)
    assert abs(float(query["start_us"][0]) - sel["start"]) < 1e-3 and abs(float(query["end_us"][0]) - sel["end"]) < 1e-3
    expected = tb.get_json("trace/range?" + urlparse(req.value.url).query)
    shown = frame.eval_on_selector_all("[data-testid=trace-range-row]", "rs => rs.map(r => [r.dataset.name, Number(r.dataset.count)])")
    assert shown == [[r["name"], r["count"]] for r in expected["rows"]]
    assert f"{expected['events']:,} events" in frame.inner_text("[data-testid=trace-range-summary]")

    # Zoom to selection; then the box-select mode over the GPU stream only asks for that track.
    frame.click("[data-testid=trace-zoom-selection]")
    frame.wait_for_function(
        "([a, b]) => { const r = window.__ptpTrace.visibleRange(); return Math.abs(r.start - a) < (b - a) * 0.05 && Math.abs(r.end - b) < (b - a) * 0.05; }",
        arg=[sel["start"], sel["end"]])
    wait_idle(frame)
    frame.click("[data-testid=trace-box-select]")
    frame.eval_on_selector("[data-testid=trace-scroller]", "e => { e.scrollTop = e.scrollHeight; }")
    page.wait_for_timeout(200)
    gpu = next(e for e in hook(frame, "eventsOnScreen") if e["kind"] == "gpu")
    with page.expect_request(lambda r: "/trace/range?" in r.url) as req:
        page.mouse.move(box["x"] + stats["labelW"] + 50, box["y"] + gpu["y"] + 4)
        page.mouse.down()
        page.mouse.move(box["x"] + stats["labelW"] + 300, box["y"] + gpu["y"] + 10, steps=3)
        page.mouse.up()
    assert parse_qs(urlparse(req.value.url).query)["tracks"] == [str(gpu["track"])]
    frame.wait_for_selector("[data-testid=trace-range] >> text=1 track")
    frame.click("[data-testid=trace-range-clear]")
    frame.wait_for_function("() => window.__ptpTrace.selectedRange() === null")


# --------------------------------------------------------------------------------------------- deep links


def test_deep_link_restores_the_range(page: Any, tb: TensorBoard) -> None:
    frame = open_trace(page, tb)
    frame.focus("[data-testid=trace-scroller]")
    for _ in range(3):
        page.keyboard.press("w")
    page.keyboard.press("d")
    page.wait_for_function(f"() => location.hash.includes('{P}.start=')")
    page.wait_for_timeout(600)  # the URL follows the view 350 ms after it settles
    state = top_hash(page)
    start, end = float(state[f"{P}.start"]), float(state[f"{P}.end"])
    r = hook(frame, "visibleRange")
    assert abs(r["start"] - start) < 1e-3 and abs(r["end"] - end) < 1e-3
    assert end - start < (r["bounds"][1] - r["bounds"][0]) * 0.6

    page.reload()
    frame = page.wait_for_selector(PLUGIN_IFRAME).content_frame()
    wait_drawn(frame)
    r = hook(frame, "visibleRange")
    assert abs(r["start"] - start) < 1e-6 and abs(r["end"] - end) < 1e-6
    assert frame.eval_on_selector_all("[data-testid=trace-step-select] option", "os => os.length") > 1  # all steps known

    # Leaving the page drops its keys, so other pages' links do not carry them.
    frame.click("[data-testid=tab-info]")
    page.wait_for_function(f"() => !location.hash.includes('{P}.start=')")
    assert top_hash(page)[f"{P}.run"] == RUN


# --------------------------------------------------------------------------------------------- hand-off


def test_open_in_perfetto_posts_the_file(page: Any, tb: TensorBoard) -> None:
    assert TRACE_FILE is not None
    page.context.route("https://ui.perfetto.dev/**", lambda route: route.fulfill(status=200, content_type="text/html", body=FAKE_PERFETTO))
    frame = open_trace(page, tb)
    with page.context.expect_page() as info:
        frame.click("[data-testid=trace-perfetto]")
    popup = info.value
    assert popup.url.startswith("https://ui.perfetto.dev/")
    popup.wait_for_function("() => document.title.startsWith('got ')", timeout=20_000)
    assert popup.title() == f"got {TRACE_FILE.stat().st_size} {TRACE_FILE.name}"
    frame.wait_for_selector("[data-testid=perfetto-sent]")
    popup.close()


@pytest.mark.fresh_page  # an init script stays with a page: not on the shell page the next test gets
def test_blocked_popup_is_explained_with_a_link(page: Any, tb: TensorBoard) -> None:
    assert TRACE_FILE is not None
    page.add_init_script("window.open = () => null;")
    frame = open_trace(page, tb)
    frame.click("[data-testid=trace-perfetto]")
    notice = frame.wait_for_selector("[data-testid=trace-notice] [data-testid=perfetto-blocked]")
    assert "could not be opened" in notice.inner_text()
    link = frame.input_value("[data-testid=trace-file-link]")
    assert link.startswith(f"{tb.url}/data/plugin/{PLUGIN}/trace/file?")
    with urllib.request.urlopen(link, timeout=20) as resp:
        body = resp.read()
    assert len(body) == TRACE_FILE.stat().st_size
    assert json.loads(gzip.decompress(body))["traceEvents"]


def test_download_link(page: Any, tb: TensorBoard) -> None:
    assert TRACE_FILE is not None
    frame = open_trace(page, tb)
    assert frame.get_attribute("[data-testid=trace-download]", "download") == TRACE_FILE.name
    with page.expect_download() as info:
        frame.click("[data-testid=trace-download]")
    download = info.value
    assert download.suggested_filename == TRACE_FILE.name
    assert Path(download.path()).stat().st_size == TRACE_FILE.stat().st_size


# --------------------------------------------------------------------------------------------- robustness


@pytest.mark.fresh_page  # an emulated colour scheme stays with a page: not on the shell page the next test gets
def test_hidden_tab_theme_and_no_console_errors(page: Any, tb: TensorBoard, console: ConsoleLog) -> None:
    page.emulate_media(color_scheme="dark")
    frame = open_trace(page, tb)
    frame.wait_for_function("() => document.documentElement.dataset.theme === 'dark'")
    dark = pixel(frame, 5, 5)
    assert sum(dark[:3]) < 3 * 90  # a dark ruler corner

    # TensorBoard hides an inactive plugin tab by shrinking its iframe to 0 px: the canvas comes back intact.
    page.eval_on_selector(PLUGIN_IFRAME, "f => Object.assign(f.style, {maxHeight: '0px', visibility: 'hidden'})")
    frame.wait_for_function("() => window.innerHeight === 0")
    page.wait_for_timeout(200)
    page.eval_on_selector(PLUGIN_IFRAME, "f => Object.assign(f.style, {maxHeight: '', visibility: ''})")
    frame.wait_for_function("() => window.innerHeight > 0")
    frame.wait_for_function("() => window.__ptpTrace.stats().height >= 320")
    page.evaluate("() => document.body.classList.remove('dark-mode')")
    frame.wait_for_function("() => document.documentElement.dataset.theme === 'light'")
    page.wait_for_timeout(200)
    light = pixel(frame, 5, 5)
    assert sum(light[:3]) > 3 * 180
    assert not console.unexpected()
