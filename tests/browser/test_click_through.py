"""Click-through between views (every number leads to its evidence) and call-stack frames, at 1600×1000 and 1280×800.

Step bar → the Trace view on that step; a step-breakdown category (bar segment, table row) → that step with the
category's events highlighted and a chip that removes it; operator row → its kernels → the timeline; kernel row → its operators;
module row → its calls; rank row / heatmap cell → that rank's Trace view at that step; call stacks with the user's
frame first and library frames dimmed; a frame click copies inside a plain iframe and posts to VS Code only under
VS Code's webview origin.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import unquote

import pytest

from tests.browser.conftest import PLUGIN, TensorBoard, open_plugin, table_rows, top_hash
from tests.browser.test_views import RESNET, TRANSFORMER, api, open_view, row_named, set_search, wait_charts

pytestmark = pytest.mark.browser
P = f"p.{PLUGIN}"


SIZES = [(1600, 1000), (1280, 800)]


@pytest.fixture(params=SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def big(page: Any, request: pytest.FixtureRequest) -> Any:
    """The page at each size the Done-when names (the name is from when there was one size)."""
    page.set_viewport_size({"width": request.param[0], "height": request.param[1]})
    return page


@pytest.fixture
def wide(page: Any) -> Any:
    page.set_viewport_size({"width": 1600, "height": 1000})
    return page


def trace_window(page: Any) -> tuple[float, float]:
    h = top_hash(page)
    return float(h[f"{P}.start"]), float(h[f"{P}.end"])


def wait_trace_range(frame: Any) -> dict[str, float]:
    frame.wait_for_function("() => window.__ptpTrace && window.__ptpTrace.stats().firstPaintAt > 0", timeout=60_000)
    r: dict[str, float] = frame.evaluate("() => window.__ptpTrace.visibleRange()")
    return r


# --------------------------------------------------------------------------------------------- Overview


def test_step_bar_opens_the_trace_view_on_that_step(big: Any, tb_samples: TensorBoard) -> None:
    steps = api(tb_samples, "overview", RESNET)["steps"]
    assert len(steps) >= 2
    frame = open_view(big, tb_samples, RESNET, "Overview")
    wait_charts(frame, "step-chart")
    assert "click a bar to open that step" in frame.inner_text("[data-testid=card-steps]")
    frame.locator("[data-testid=step-chart]").scroll_into_view_if_needed()
    # the second step's tallest segment (bars are drawn per category, one path per step)
    box = frame.evaluate("""() => {
        const gd = document.querySelector('[data-testid=step-chart]');
        const paths = [...gd.querySelectorAll('.trace.bars')]
            .map((t, i) => ({path: t.querySelectorAll('.point path')[1], name: gd.data[i].name})).filter(p => p.path)
            .map(p => ({r: p.path.getBoundingClientRect(), name: p.name})).filter(p => p.r.height > 4);
        paths.sort((a, b) => b.r.height - a.r.height);
        const r = paths[0].r;
        return {x: r.x + r.width / 2, y: r.y + r.height / 2, category: paths[0].name};
    }""")
    assert box["category"] in api(tb_samples, "overview", RESNET)["categories"]
    frame_box = big.query_selector('iframe[src*="plugin_entry.html"]').bounding_box()
    big.mouse.click(frame_box["x"] + box["x"], frame_box["y"] + box["y"])
    frame.wait_for_selector("[data-testid=tab-Trace][aria-selected=true]")
    step = steps[1]
    start, end = trace_window(big)
    margin = max(step["duration_us"] * 0.02, 1)
    assert start == pytest.approx(step["start_us"] - margin, abs=1e-3)
    assert end == pytest.approx(step["start_us"] + step["duration_us"] + margin, abs=1e-3)
    shown = wait_trace_range(frame)
    assert shown["start"] == pytest.approx(start, abs=1) and shown["end"] == pytest.approx(end, abs=1)
    # the segment clicked is the category highlighted
    assert unquote(top_hash(big)[f"{P}.cat"]) == box["category"]
    assert frame.get_attribute("[data-testid=trace-highlight-chip]", "data-category") == box["category"]


def _highlight_counts(frame: Any) -> dict[str, int]:
    """Events and boxes of the last frame drawn in full (holding category events) and dimmed."""
    frame.wait_for_function("() => !window.__ptpTrace.stats().loading && window.__ptpTrace.stats().lastDraw.events > 0")
    frame.wait_for_timeout(100)  # the frame after the last answer
    counts: dict[str, int] = frame.evaluate(
        "() => { const d = window.__ptpTrace.stats().lastDraw; return {marked: d.marked, dimmed: d.dimmed}; }")
    return counts


def test_breakdown_category_opens_its_busiest_step_with_its_events_highlighted(big: Any, tb_samples: TensorBoard) -> None:
    """The Memcpy row of the execution summary: the step with the most Memcpy time, the copies drawn in full and
    everything else dimmed; the chip says so and removes the highlight (URL too)."""
    data = api(tb_samples, "overview", TRANSFORMER)
    steps = data["steps"]
    busiest = max(range(len(steps)), key=lambda i: steps[i]["breakdown_us"]["Memcpy"])
    assert steps[busiest]["breakdown_us"]["Memcpy"] > 0
    frame = open_view(big, tb_samples, TRANSFORMER, "Overview")
    row = frame.locator("[data-testid=execution-summary] tr[data-testid=execution-row][data-category=Memcpy]")
    row.locator("[data-testid=category-trace]").click()
    frame.wait_for_selector("[data-testid=tab-Trace][aria-selected=true]")
    step = steps[busiest]
    margin = max(step["duration_us"] * 0.02, 1)
    start, end = trace_window(big)
    assert (start, end) == (pytest.approx(step["start_us"] - margin, abs=1e-3),
                            pytest.approx(step["start_us"] + step["duration_us"] + margin, abs=1e-3))
    assert unquote(top_hash(big)[f"{P}.cat"]) == "Memcpy"
    chip = frame.wait_for_selector("[data-testid=trace-highlight-chip]")
    assert chip.inner_text().startswith("Highlighting Memcpy: the events the step breakdown counts")
    assert chip.is_visible() and chip.bounding_box()["x"] + chip.bounding_box()["width"] <= big.viewport_size["width"]
    wait_trace_range(frame)
    # the window the view drew marks exactly the step's copies: ask the server the same window
    window = frame.evaluate("() => window.__ptpTrace.stats().lastWindow")
    answer = api(tb_samples, "trace/window", TRANSFORMER, start_us=repr(window["t0"]), end_us=repr(window["t1"]),
                 width_px=str(window["width_px"]), category="Memcpy")
    marked = sum(sum(lane["events"]["hl"]) + sum(lane["boxes"]["hl"]) for tr in answer["tracks"] for lane in tr["lanes"])
    assert marked > 0
    counts = _highlight_counts(frame)
    assert counts["marked"] > 0 and counts["dimmed"] > 10 * counts["marked"]  # a few copies among many events
    frame.click("[data-testid=trace-highlight-clear]")
    frame.wait_for_selector("[data-testid=trace-highlight]", state="hidden")
    assert f"{P}.cat" not in top_hash(big)
    frame.wait_for_function("() => window.__ptpTrace.stats().lastDraw.dimmed === 0 && window.__ptpTrace.stats().lastDraw.marked === 0")


def test_a_category_from_the_url_is_validated_and_other_dims_everything(big: Any, tb_samples: TensorBoard) -> None:
    base = f"&{P}.run={TRANSFORMER[0]}&{P}.worker={TRANSFORMER[1]}&{P}.span=1&{P}.view=Trace"
    frame = open_plugin(big, tb_samples, base + f"&{P}.cat=Bogus")
    wait_trace_range(frame)
    assert frame.is_hidden("[data-testid=trace-highlight]") and f"{P}.cat" not in top_hash(big)
    assert frame.is_hidden("[data-testid=trace-window-error]")
    frame = open_plugin(big, tb_samples, base + f"&{P}.cat=Other")
    wait_trace_range(frame)
    assert "time no event covers" in frame.inner_text("[data-testid=trace-highlight-chip]")
    counts = _highlight_counts(frame)
    assert counts["marked"] == 0 and counts["dimmed"] > 0


# --------------------------------------------------------------------------------------------- Operator ↔ Kernel


def test_operator_row_shows_its_kernels_and_a_kernel_row_its_operators(big: Any, tb_samples: TensorBoard) -> None:
    by_op = api(tb_samples, "kernels", TRANSFORMER, group_by="name_op")["rows"]
    launched = sorted({r["name"] for r in by_op if r["operator"] == "aten::mm"})
    assert launched
    frame = open_view(big, tb_samples, TRANSFORMER, "Operator")
    set_search(frame, "search-name", "aten::mm")
    row_named(frame, "operator-table", "aten::mm").locator("[data-testid=operator-kernels]").click()
    frame.wait_for_selector("[data-testid=tab-Kernel][aria-selected=true]")
    frame.wait_for_function("() => document.querySelector('[data-testid=kernel-group-by]')?.value === 'name_op'")
    frame.wait_for_function("() => document.querySelector('[data-testid=search-operator]')?.value === '\"aten::mm\"'")
    shown = table_rows(frame, "kernel-table")
    assert {r["operator"] for r in shown} == {"aten::mm"}
    assert sorted({r["name"] for r in shown}) == launched
    # a row expands to the call stacks of its launching operator (the kernel's source), the user's frame first
    frame.locator("[data-testid=kernel-table] [data-testid=row-expand]").first.click()
    first = frame.wait_for_selector("[data-testid=kernel-table] [data-testid=call-stack] [data-testid=frame]")
    assert first.get_attribute("data-kind") == "user" and first.get_attribute("data-path") == "transformer_bf16.py"
    # … and each kernel links on to the timeline
    frame.locator("[data-testid=kernel-table] [data-testid=find-in-trace]").first.click()
    frame.wait_for_selector("[data-testid=tab-Trace][aria-selected=true]")
    frame.wait_for_function("names => names.includes(document.querySelector('[data-testid=trace-search]')?.value)",
                            arg=[f'"{n}"' for n in launched])

    # kernel row → the operators that launched it
    kernel = launched[0]
    ops = sorted({r["operator"] for r in by_op if r["name"] == kernel})
    frame = open_view(big, tb_samples, TRANSFORMER, "Kernel")
    frame.locator("[data-testid=kernel-table] tr[data-testid=row]").filter(
        has=frame.locator("[data-testid=kernel-name]", has_text=kernel)).locator("[data-testid=kernel-operators]").click()
    frame.wait_for_function("() => document.querySelector('[data-testid=kernel-group-by]')?.value === 'name_op'")
    frame.wait_for_selector("[data-testid=kernel-table] td[data-col=operator]")
    shown = table_rows(frame, "kernel-table")
    assert sorted({r["operator"] for r in shown}) == ops
    # the operator cell goes on to the Operator view, searched for that operator
    frame.locator("[data-testid=kernel-table] [data-testid=operator-link]").first.click()
    frame.wait_for_selector("[data-testid=tab-Operator][aria-selected=true]")
    frame.wait_for_function("ops => ops.includes(document.querySelector('[data-testid=search-name]')?.value)", arg=ops)


def test_kernel_legend_shows_short_names_with_the_full_name_in_the_table(wide: Any, tb_samples: TensorBoard) -> None:
    frame = open_view(wide, tb_samples, RESNET, "Kernel")
    wait_charts(frame, "pie-kernels")
    legend = frame.eval_on_selector_all("[data-testid=pie-kernels] .legendtext", "els => els.map(e => e.textContent)")
    assert legend and not any(t.startswith("void ") for t in legend)
    assert any(re.fullmatch(r"\w+<…>( \(\w+\))?( #\d+)?", t) for t in legend), legend
    full = api(tb_samples, "kernels", RESNET)["rows"]
    templated = [r["name"] for r in full if r["name"].startswith("void ")]
    assert templated
    # the table keeps the full signature
    cells = frame.eval_on_selector_all("[data-testid=kernel-table] [data-testid=kernel-name]", "els => els.map(e => e.title || e.textContent)")
    assert any(c.startswith("void ") for c in cells)
    hover = frame.evaluate("() => document.querySelector('[data-testid=pie-kernels]').data[0].text.join('\\n')")
    assert "void " in hover


# --------------------------------------------------------------------------------------------- Module


def test_module_row_opens_its_calls_and_says_host_or_device(big: Any, tb_samples: TensorBoard) -> None:
    frame = open_view(big, tb_samples, TRANSFORMER, "Module")
    frame.wait_for_selector("[data-testid=module-tree] [data-testid=tree-row]")
    head = frame.inner_text("[data-testid=module-tree] thead")
    assert "Mean per call" in head
    top = frame.locator("[data-testid=module-tree] [data-testid=tree-row][data-name=TinyEncoderClassifier_0]")
    source = top.locator("[data-testid=module-source]")
    assert (source.get_attribute("data-path"), source.get_attribute("data-line")) == ("transformer_bf16.py", "38")
    big.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=tb_samples.url)
    source.click()
    frame.wait_for_function("() => document.querySelector('[data-testid=toast]')?.textContent === 'Copied transformer_bf16.py:38'")
    row = frame.locator("[data-testid=module-tree] [data-testid=tree-row][data-name=TransformerEncoder_0]")
    assert row.locator("td[data-col=operators]").inner_text() == "0 (in sub-modules)"
    assert row.locator("td[data-col=mean]").inner_text().endswith(" device")
    row.locator("[data-testid=find-in-trace]").click()
    frame.wait_for_selector("[data-testid=tab-Trace][aria-selected=true]")
    frame.wait_for_function("() => document.querySelector('[data-testid=trace-search]')?.value === '\"nn.Module: TransformerEncoder_0\"'")
    calls = api(tb_samples, "modules", TRANSFORMER)["modules"][0]["children"][1]
    assert calls["name"] == "TransformerEncoder_0"
    frame.wait_for_function(
        f"() => (document.querySelector('[data-testid=trace-search-count]')?.textContent || '').includes('{calls['occurrences']}')")


# --------------------------------------------------------------------------------------------- call stacks


def test_call_stack_puts_the_users_frame_first_and_dims_library_frames(big: Any, tb_samples: TensorBoard) -> None:
    frame = open_view(big, tb_samples, TRANSFORMER, "Operator")
    set_search(frame, "search-name", "aten::linear")
    row_named(frame, "operator-table", "aten::linear").locator("[data-testid=row-expand]").click()
    entry = frame.wait_for_selector("[data-testid=call-stack]")
    first = entry.query_selector("[data-testid=frame]")
    assert first.get_attribute("data-kind") == "user"
    assert first.query_selector(".ptp-frame-loc").inner_text().startswith("transformer_bf16.py:")
    assert float(first.evaluate("e => getComputedStyle(e).opacity")) == 1
    entry.query_selector("[data-testid=frames-more]").click()
    frames = entry.query_selector_all("[data-testid=frame]")
    kinds = [f.get_attribute("data-kind") for f in frames]
    assert kinds[0] == "library"  # expanded: the whole stack in call order, innermost (torch) first
    assert frames[0].query_selector(".ptp-frame-loc").inner_text().startswith("torch/")
    assert float(frames[0].evaluate("e => getComputedStyle(e).opacity")) < 0.8
    assert "user" in kinds


def _framed(page: Any, tb: TensorBoard, outer_url: str, listener: str, tb_url: str | None = None) -> Any:
    """Open TensorBoard (Operator view of the transformer) inside a host page at ``outer_url``; return the plugin frame.
    ``tb_url``: the origin TensorBoard is reached at (a route proxies it to the real server)."""
    base = tb_url or tb.url
    src = f"{base}/#{PLUGIN}&{P}.run={TRANSFORMER[0]}&{P}.worker={TRANSFORMER[1]}&{P}.span=1&{P}.view=Operator"
    html = f"""<!doctype html><html><body style="margin:0">
        <script>window.__msgs = []; {listener}</script>
        <iframe id="tb" src="{src}" style="width:calc(100vw - 20px);height:calc(100vh - 20px);border:0"></iframe></body></html>"""
    page.route(outer_url, lambda route: route.fulfill(status=200, content_type="text/html", body=html))
    if tb_url:
        page.route(f"{tb_url}/**", lambda route: route.fulfill(
            response=route.fetch(url=tb.url + route.request.url[len(tb_url):])))
    page.goto(outer_url)
    plugin = None
    for _ in range(150):
        plugin = next((f for f in page.frames if "plugin_entry.html" in f.url), None)
        if plugin is not None:
            break
        page.wait_for_timeout(200)
    assert plugin is not None
    plugin.wait_for_selector("[data-testid=operator-table] tr[data-testid=row]")
    plugin.select_option("[data-testid=operator-group-by]", "name_stack")
    return plugin


def test_frame_click_in_a_plain_iframe_copies_the_location(big: Any, tb_samples: TensorBoard) -> None:
    """Jupyter's %tensorboard frames TensorBoard too: not VS Code, so a click copies ``path:line`` and says so."""
    outer = f"{tb_samples.url}/__jupyter_host_stand_in.html"
    big.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=tb_samples.url)
    plugin = _framed(big, tb_samples, outer, "addEventListener('message', e => { if (e.data && e.data.filename) window.__msgs.push(e.data); });")
    button = plugin.wait_for_selector("[data-testid=operator-table] td[data-col=call_stack] button[data-kind=user]")
    path, line = button.get_attribute("data-path"), button.get_attribute("data-line")
    button.click()
    # the toast's text stays after it fades (2.5 s), so a slow machine cannot miss it
    plugin.wait_for_function("t => document.querySelector('[data-testid=toast]')?.textContent === t", arg=f"Copied {path}:{line}")
    assert plugin.evaluate("() => navigator.clipboard.readText()") == f"{path}:{line}"
    assert big.evaluate("() => window.__msgs") == []
    # a library file whose folder the trace does not give is copied and named as such
    lib = plugin.query_selector("[data-testid=operator-table] td[data-col=call_stack] button[data-kind=library]")
    if lib is None:
        plugin.click("[data-testid=operator-table] [data-testid=frames-more]")
        lib = plugin.wait_for_selector("[data-testid=operator-table] td[data-col=call_stack] button[data-kind=library]")
    lib.click()
    plugin.wait_for_function("() => document.querySelector('[data-testid=toast]').textContent.includes('a library file')")


def test_frame_click_inside_vscode_posts_to_the_editor(browser: Any, tb_samples: TensorBoard) -> None:
    """Under VS Code's webview origin (here the browser build's ``https://<id>.vscode-cdn.net``, served by a route),
    a click posts {filename, line} with VS Code's 0-based line to the window above TensorBoard, addressed to that
    origin; the stand-in checks the sender's origin as VS Code's webview does. TensorBoard is reached through an
    https origin proxied to the real server (Chromium blocks a public https page from framing 127.0.0.1)."""
    context = browser.new_context(viewport={"width": 1600, "height": 1000})
    page = context.new_page()
    try:
        outer = "https://0f1e2d3c4b5a.vscode-cdn.net/stable/webview/index.html"
        tb_url = "https://tensorboard.vscode-cdn.net"  # same site as the webview: headless Chromium denies a
        # third-party frame's localStorage, which TensorBoard needs (VS Code's Electron allows it)
        listener = (f"addEventListener('message', e => {{ if (!{tb_url!r}.startsWith(e.origin) || !e.data "
                    "|| !e.data.filename || !e.data.line) return; window.__msgs.push(e.data); });")
        plugin = _framed(page, tb_samples, outer, listener, tb_url)
        assert plugin.evaluate("() => location.ancestorOrigins[1]") == "https://0f1e2d3c4b5a.vscode-cdn.net"
        button = plugin.wait_for_selector("[data-testid=operator-table] td[data-col=call_stack] button[data-kind=user]")
        path, line = button.get_attribute("data-path"), int(button.get_attribute("data-line"))
        assert "Open in the editor" in button.get_attribute("title")
        button.click()
        page.wait_for_function("() => window.__msgs.length > 0")
        assert page.evaluate("() => window.__msgs") == [{"filename": path, "line": line - 1}]
        assert "VS Code" in plugin.inner_text("[data-testid=toast]")
    finally:
        context.close()


# --------------------------------------------------------------------------------------------- Distributed


def test_rank_row_and_heatmap_cell_open_that_ranks_trace_at_that_step(big: Any, tb_dist_diff: TensorBoard) -> None:
    tb = tb_dist_diff  # the worker's server of that logdir (loaded once, whichever file asks first)
    dist = tb.get_json("distributed?run=ddp&span=1")
    rank1 = next(r for r in dist["ranks"] if r["worker"] == "rank1")
    windows = rank1["step_windows_us"]
    assert len(windows) == rank1["steps"] >= 2
    frame = open_plugin(big, tb, f"&{P}.run=ddp&{P}.worker=rank0&{P}.span=1&{P}.view=Distributed")
    frame.wait_for_selector("[data-testid=rank-table] tr[data-testid=row]")
    wait_charts(frame, "comm-heatmap")
    frame.select_option("[data-testid=step-select]", "1")
    frame.locator("[data-testid=rank-table] tr[data-testid=row]").filter(has_text="rank1").locator("[data-testid=rank-trace]").click()
    frame.wait_for_selector("[data-testid=tab-Trace][aria-selected=true]")
    assert top_hash(big)[f"{P}.worker"] == "rank1"
    start, end = trace_window(big)
    a, b = windows[1]
    margin = max((b - a) * 0.02, 1)
    assert (start, end) == (pytest.approx(a - margin, abs=1e-3), pytest.approx(b + margin, abs=1e-3))
    shown = wait_trace_range(frame)
    assert shown["start"] == pytest.approx(start, abs=1) and shown["end"] == pytest.approx(end, abs=1)

    # the heatmap cell of rank 1, step 0
    frame = open_plugin(big, tb, f"&{P}.run=ddp&{P}.worker=rank0&{P}.span=1&{P}.view=Distributed")
    wait_charts(frame, "comm-heatmap")
    frame.locator("[data-testid=comm-heatmap]").scroll_into_view_if_needed()
    i = [r["worker"] for r in dist["ranks"]].index("rank1")
    cell = frame.evaluate("""i => {
        const gd = document.querySelector('[data-testid=comm-heatmap]');
        const xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis;
        const r = gd.querySelector('.nsewdrag').getBoundingClientRect();
        return {x: r.x + xa.l2p(0), y: r.y + ya.l2p(i)};
    }""", i)
    frame_box = big.query_selector('iframe[src*="plugin_entry.html"]').bounding_box()
    big.mouse.click(frame_box["x"] + cell["x"], frame_box["y"] + cell["y"])
    frame.wait_for_selector("[data-testid=tab-Trace][aria-selected=true]")
    assert top_hash(big)[f"{P}.worker"] == "rank1"
    start, end = trace_window(big)
    a, b = windows[0]
    margin = max((b - a) * 0.02, 1)
    assert (start, end) == (pytest.approx(a - margin, abs=1e-3), pytest.approx(b + margin, abs=1e-3))
    assert unquote(top_hash(big)[f"{P}.view"]) == "Trace"


# --------------------------------------------------------------------------------------------- Memory


def test_memory_peak_opens_the_allocations_live_at_the_peak_with_their_stacks(big: Any, tb_samples: TensorBoard) -> None:
    curve = api(tb_samples, "memory/curve", TRANSFORMER)["devices"]["GPU0"]
    live = api(tb_samples, "memory/events", TRANSFORMER, at_us=repr(curve["peak_time_us"]), device="GPU0")
    assert live["allocated_bytes"] == curve["peak_allocated_bytes"]
    frame = open_view(big, tb_samples, TRANSFORMER, "Memory")
    wait_charts(frame, "memory-curve")
    frame.click("[data-testid=memory-peak-live]")
    frame.wait_for_function(
        "() => (document.querySelector('[data-testid=memory-events-range]')?.textContent || '').includes('live at the peak')")
    summary = frame.inner_text("[data-testid=memory-events-range]")
    assert summary.startswith(f"{len(live['rows'])} allocations live at the peak")
    assert "allocated before the trace started" in summary
    frame.fill("[data-testid=memory-min-size]", "0")
    shown = table_rows(frame, "memory-events-table")
    sizes = [int(r["_value:size"]) for r in shown]
    assert sizes == sorted(sizes, reverse=True) and sizes[0] == live["rows"][0]["size_bytes"]
    # the allocating operator's stack, the user's frame first
    with_stack = [i for i, r in enumerate(live["rows"][: len(shown)]) if r["call_stack"] and "transformer_bf16.py(" in r["call_stack"]]
    assert with_stack
    rows = frame.locator("[data-testid=memory-events-table] tr[data-testid=row]")
    rows.nth(with_stack[0]).locator("[data-testid=row-expand]").click()
    first = frame.wait_for_selector("[data-testid=memory-call-stack] [data-testid=frame]")
    assert first.get_attribute("data-kind") == "user"
    assert first.get_attribute("data-path") == "transformer_bf16.py"


def test_memory_range_says_allocated_in_range_or_live_in_range(big: Any, tb_samples: TensorBoard) -> None:
    curve = api(tb_samples, "memory/curve", TRANSFORMER)["devices"]["GPU0"]
    t = curve["peak_time_us"]
    rows = api(tb_samples, "memory/events", TRANSFORMER, start_us=repr(t - 2000), end_us=repr(t), device="GPU0")["rows"]
    expected = {"allocated": sum(r["in_range"] == "allocated" for r in rows), "live": sum(r["in_range"] == "live" for r in rows)}
    assert expected["allocated"] > 0 and expected["live"] > 0
    frame = open_plugin(big, tb_samples, f"&{P}.run={TRANSFORMER[0]}&{P}.worker={TRANSFORMER[1]}&{P}.span=1&{P}.view=Memory"
                        f"&{P}.device=GPU0&{P}.start={t - 2000}&{P}.end={t}")
    frame.wait_for_selector("[data-testid=memory-events-table] th[data-col=in_range]")
    frame.fill("[data-testid=memory-min-size]", "0")
    tags = "els => els.map(e => e.textContent)"
    sel = "[data-testid=memory-events-table] [data-testid=memory-in-range]"
    first_page = frame.eval_on_selector_all(sel, tags)
    assert first_page and set(first_page) == {"live in range"}  # by allocation time: those from before the range
    frame.click("[data-testid=memory-events-table] [data-testid=sort-in_range]")
    frame.wait_for_function(f"() => document.querySelector('{sel}').textContent === 'allocated in range'")
    shown = frame.eval_on_selector_all(sel, tags)
    assert shown.count("allocated in range") == min(expected["allocated"], len(shown))
