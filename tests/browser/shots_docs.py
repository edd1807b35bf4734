"""The documentation's screenshots (docs/images/*.png): run by ``make screenshots``, never by ``make test``.

These drive the same real TensorBoard and Chromium as the browser tests, through their helpers, but they check
nothing a test does not already check: they only pose each page and save it. Light-theme images go to
docs/images/, dark-theme ones (for a look) to test-artifacts/. Collected only with
``-o python_files=shots_*.py -o python_functions=shot_*`` (see the Makefile).
"""

from __future__ import annotations

from typing import Any

from tests.browser import test_distributed_diff as dist
from tests.browser import test_memory_categories_view as memcat
from tests.browser import test_memory_module as mm
from tests.browser import test_memory_snapshot as snap
from tests.browser import test_shell as shell
from tests.browser import test_trace as trace
from tests.browser import test_views as views
from tests.browser.conftest import ARTIFACTS, DOCS_IMAGES, PLUGIN, TensorBoard, open_plugin, save_screenshot
from tests.browser.test_capture import job  # noqa: F401 - the running job the capture shot captures
from tests.browser.test_memory_categories_view import tb_memcat  # noqa: F401 - a fixture the memcat shot uses
from tests.browser.test_memory_snapshot import tb_snap  # noqa: F401 - a fixture the snapshot shot uses
from tests.browser.test_shell import settled  # noqa: F401 - a fixture the shell shot uses
from tests.browser.test_trace import tb  # noqa: F401 - a fixture the trace shot uses


def dark_screenshot(page: Any, frame_of: Any, name: str, chart: str) -> None:
    """The page in the dark theme, for a look (test-artifacts only). TensorBoard (2.21) reads the colour scheme
    when it loads: the page is left first, so that ``frame_of`` loads TensorBoard anew (not the shared shell page
    reopened), and again after, for the next shot's light one."""
    page.emulate_media(color_scheme="dark")
    page.goto("about:blank")
    frame = frame_of()
    frame.wait_for_function("() => document.documentElement.dataset.theme === 'dark'")
    frame.wait_for_selector(f"[data-testid={chart}] .main-svg")
    page.wait_for_timeout(500)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}-dark.png"))
    page.emulate_media(color_scheme="light")
    page.goto("about:blank")


def shot_shell(page: Any, tb_main: TensorBoard, settled: dict[str, Any]) -> None:  # noqa: F811
    frame = open_plugin(page, tb_main, f"&p.{PLUGIN}.run=resnet18&p.{PLUGIN}.span=1&p.{PLUGIN}.view=info")
    shell.wait_trace_info_for(frame, shell.span_files(settled)[("resnet18", "vm_562", "1")]["file"])
    frame.wait_for_selector("[data-testid=files] [data-testid=error-card]")
    page.wait_for_timeout(300)  # let the bars' width transition finish
    save_screenshot(page, "shell.png")


def shot_overview_operator_kernel(page: Any, tb_samples: TensorBoard) -> None:
    frame = views.open_view(page, tb_samples, views.RESNET, "Overview")
    views.wait_charts(frame, "step-chart", "breakdown-pie")
    save_screenshot(page, "overview.png", full_height=True)

    frame = views.open_view(page, tb_samples, views.TRANSFORMER, "Operator")
    views.wait_charts(frame, "pie-device_self", "pie-device_total", "pie-host_self", "pie-host_total")
    # 20 rows a page, so the whole table (and its pager) is in the picture
    frame.select_option("[data-testid=table-page-size]", "20")
    views.row_named(frame, "operator-table", "aten::mm").locator("[data-testid=row-expand]").click()
    frame.wait_for_selector("[data-testid=call-stack]")
    save_screenshot(page, "operator.png", full_height=True)

    frame = views.open_view(page, tb_samples, views.TRANSFORMER, "Kernel")
    views.wait_charts(frame, "pie-kernels", "pie-tensor-cores")
    save_screenshot(page, "kernel.png", full_height=True)

    for run, view, chart in ((views.RESNET, "Overview", "step-chart"), (views.TRANSFORMER, "Operator", "pie-host_total"),
                             (views.TRANSFORMER, "Kernel", "pie-kernels")):
        dark_screenshot(page, lambda r=run, v=view: views.open_view(page, tb_samples, r, v), view.lower(), chart)


def shot_flamegraph(page: Any, tb_samples: TensorBoard) -> None:
    """The Flame graph of the bf16 transformer's self host time, with aten::mm searched."""
    frame = views.open_view(page, tb_samples, views.TRANSFORMER, "Flame")
    frame.wait_for_function("() => window.__ptpFlame && window.__ptpFlame.framesOnScreen().length > 1")
    frame.fill("[data-testid=flame-search]", "aten::mm")
    page.wait_for_timeout(200)
    save_screenshot(page, "flamegraph.png", full_height=True)


def shot_gpu(page: Any, tb_samples: TensorBoard) -> None:
    """The GPU view of the bf16 transformer: idle time by cause, launches, queue length, bandwidth, sequences."""
    frame = views.open_view(page, tb_samples, views.TRANSFORMER, "GPU")
    frame.wait_for_selector("[data-testid=gpu-view]")
    views.wait_charts(frame, "queue-chart")
    save_screenshot(page, "gpu.png", full_height=True, max_height=4400)  # every card


def shot_roofline(page: Any, tb_samples: TensorBoard) -> None:
    """The roofline card of the bf16 transformer (the GPU view's first card): docs/guide/roofline.md."""
    frame = views.open_view(page, tb_samples, views.TRANSFORMER, "GPU")
    views.wait_charts(frame, "roofline-chart")
    save_screenshot(page, "roofline.png")


def shot_trace(page: Any, tb: TensorBoard) -> None:  # noqa: F811
    """Part of a forward pass, a GEMM kernel selected with its launch arrow and details."""
    hit, details = trace.kernel_with_launcher(tb, "nvjet")
    launcher = details["launched_by"]
    start = launcher["start_us"] - 650
    end = hit["start_us"] + hit["dur_us"] + 900
    frame = trace.open_trace(page, tb, f"&{trace.P}.start={start:.3f}&{trace.P}.end={end:.3f}")
    # Collapse the CPU threads other than the launching one (idle here), so the launch and the kernel fit.
    box = trace.canvas_box(frame)
    for r in trace.hook(frame, "rows"):
        if r["kind"] == "track" and r["track"] != launcher["track"] and r["h"] > 40 and "GPU" not in r["label"]:
            page.mouse.click(box["x"] + 20, box["y"] + r["y"] + 10)
    trace.wait_idle(frame)
    trace.click_event(page, frame, trace.on_screen(frame, hit["id"]))
    frame.wait_for_function("id => window.__ptpTrace.selected()?.details && window.__ptpTrace.selected().id === id",
                            arg=hit["id"])
    trace.wait_idle(frame)
    page.mouse.move(5, 890)
    page.wait_for_timeout(300)
    save_screenshot(page, "trace.png")


def shot_trace_highlight(page: Any, tb_samples: TensorBoard) -> None:
    """The Overview's Memcpy row opens its busiest step with the copies highlighted, every other event dimmed."""
    frame = views.open_view(page, tb_samples, views.TRANSFORMER, "Overview")
    frame.locator("[data-testid=execution-row][data-category=Memcpy] [data-testid=category-trace]").click()
    frame.wait_for_selector("[data-testid=trace-highlight-chip]")
    frame.wait_for_function("() => window.__ptpTrace && window.__ptpTrace.stats().lastDraw.marked > 0")
    trace.wait_idle(frame)
    page.mouse.move(5, 890)
    page.wait_for_timeout(300)
    save_screenshot(page, "trace_highlight.png")


def shot_memory(page: Any, tb_memory_module: TensorBoard) -> None:
    frame = mm.open_view(page, tb_memory_module, mm.TRANSFORMER, "Memory")
    frame.wait_for_selector("[data-testid=memory-curve] .main-svg")
    mm.wait_memory_settled(frame)
    # A long-lived large allocation marked on the curve.
    frame.select_option("[data-testid=memory-min-size-unit]", label="MiB")
    frame.fill("[data-testid=memory-min-size]", "8")
    frame.click(f"[data-testid={mm.EVENTS}] [data-testid=sort-lifetime]")
    frame.click(f"[data-testid={mm.EVENTS}] tbody tr[data-testid=row] >> nth=0")
    frame.wait_for_selector("[data-testid=memory-marked]")
    frame.evaluate("() => window.scrollTo(0, 0)")  # the curve with the allocation marked (the row click scrolled)
    page.mouse.move(5, 300)
    page.wait_for_timeout(300)
    save_screenshot(page, "memory.png")
    dark_screenshot(page, lambda: mm.open_view(page, tb_memory_module, mm.TRANSFORMER, "Memory"), "memory",
                    "memory-curve")


def shot_memory_categories(page: Any, tb_memcat: TensorBoard) -> None:  # noqa: F811
    """The "Memory by category" card of the run with torch's export, its top allocation's stack open."""
    frame = mm.open_view(page, tb_memcat, memcat.EXPORTED, "Memory")
    memcat.card_settled(frame, "GPU0")
    memcat.chart(frame)
    frame.click("[data-testid=memcat-allocations] tbody tr[data-testid=row] [data-testid=row-expand]")
    page.set_viewport_size({"width": 1400, "height": 1600})
    page.wait_for_timeout(800)  # plotly resizes on the next frame
    # the card's top below the shell's sticky bar, then the card alone
    frame.evaluate(f"() => window.scrollBy(0, document.querySelector('{memcat.CARD}').getBoundingClientRect().top - 64)")
    page.wait_for_timeout(200)
    box = frame.locator(memcat.CARD).bounding_box()
    page.screenshot(path=str(DOCS_IMAGES / "memory_categories.png"), clip=box)


def shot_memory_snapshot(page: Any, tb_snap: TensorBoard) -> None:  # noqa: F811
    """The recorded out-of-memory snapshot on its out-of-memory moment, its largest band hovered."""
    frame = snap.open_snapshot(page, tb_snap, "oom", snap.OOM_FILE.name)
    frame.wait_for_selector("[data-testid=snapshot-segment]")
    bands = snap.wait_bands(frame)
    biggest = max(bands, key=lambda b: b["w"] * b["h"])
    page.set_viewport_size({"width": 1400, "height": 1500})
    page.wait_for_timeout(500)
    frame.evaluate("() => window.scrollTo(0, 0)")
    box = frame.query_selector("[data-testid=snapshot-canvas]").bounding_box()
    page.mouse.move(box["x"] + biggest["x"] + biggest["w"] * 0.8, box["y"] + biggest["y"] + biggest["h"] / 2)
    frame.wait_for_selector("[data-testid=snapshot-tooltip] [data-testid=frame][data-kind=user]")
    page.wait_for_timeout(300)
    page.screenshot(path=str(DOCS_IMAGES / "memory_snapshot.png"))


def shot_module(page: Any, tb_memory_module: TensorBoard) -> None:
    frame = mm.open_view(page, tb_memory_module, mm.TRANSFORMER, "Module")
    frame.wait_for_selector("[data-testid=module-icicle] .main-svg")
    frame.wait_for_selector("[data-testid=module-timeline] .main-svg")
    frame.click("[data-testid=module-tree] tr[data-name=TransformerEncoder_0] [data-testid=tree-toggle]")
    page.mouse.move(5, 300)
    page.wait_for_timeout(300)
    save_screenshot(page, "module.png")
    dark_screenshot(page, lambda: mm.open_view(page, tb_memory_module, mm.TRANSFORMER, "Module"), "module",
                    "module-timeline")


def shot_distributed_diff(page: Any, tb_dist_diff: TensorBoard) -> None:
    frame = dist.open_view(page, tb_dist_diff, "ddp", "Distributed")
    for testid in ("overlap-chart", "wait-chart", "comm-heatmap"):
        frame.wait_for_selector(f"[data-testid={testid}] .main-svg", timeout=60_000)
    save_screenshot(page, "distributed.png")

    frame = dist.open_view(page, tb_dist_diff, dist.BASE[0], "Diff", worker=dist.BASE[1])
    frame.wait_for_selector("[data-testid=diff-breakdown-chart] .main-svg", timeout=120_000)
    frame.wait_for_selector("[data-testid=drill-chart] .main-svg", timeout=60_000)
    save_screenshot(page, "diff.png")


def shot_capture(page: Any, tb_factory: Any, job: Any) -> None:  # noqa: F811
    """The Capture dialog after a capture of the 4-rank CPU job (the slow rescan keeps it open on the result)."""
    from tests.browser.test_capture import capture_from_the_page

    tb_capture = tb_factory(job.logdir, "--profiler_capture", "--profiler_rescan_interval", "60")
    frame = open_plugin(page, tb_capture)
    capture_from_the_page(page, frame)
    frame.wait_for_selector("[data-testid=capture-opening]")
    save_screenshot(page, "capture.png")
