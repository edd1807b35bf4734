"""The plugin shell inside the real TensorBoard: pickers, loading, Trace info, error cards, URL state, themes."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser.conftest import (
    CORRUPT_FILE,
    PLUGIN,
    PLUGIN_IFRAME,
    REPO,
    STATIC,
    VIEWPORT,
    ConsoleLog,
    TensorBoard,
    open_plugin,
    top_hash,
    trace_facts,
)

pytestmark = pytest.mark.browser

SCREENSHOT = REPO / "docs" / "images" / "shell.png"
# ./runs with or without a query (the shell asks for a page: ?limit=…); a scripted answer of every run is what an
# older server sends, which the shell still reads
RUNS_ROUTE = re.compile(rf".*/data/plugin/{PLUGIN}/runs(\?.*)?$")
# the shell's timers (frontend/src/app/runs.ts): ./runs again 10 s after an answer when nothing loads, 5 s after the
# server could not be reached
POLL_IDLE_MS, POLL_UNREACHABLE_MS = 10_000, 5_000


def options(frame: Any, testid: str) -> list[str]:
    return frame.eval_on_selector_all(f"[data-testid={testid}] option", "els => els.map(e => e.value)")


def value(frame: Any, testid: str) -> str:
    return frame.input_value(f"[data-testid={testid}]")


def wait_value(frame: Any, testid: str, expected: str) -> None:
    frame.wait_for_function(
        "([id, v]) => document.querySelector(`[data-testid=${id}]`)?.value === v", arg=[testid, expected]
    )


def span_files(body: dict[str, Any]) -> dict[tuple[str, str, str], dict[str, Any]]:
    return {(r["name"], w["name"], s["span"]): s for r in body["runs"] for w in r["workers"] for s in w["spans"]}


def wait_trace_info_for(frame: Any, file_name: str) -> Any:
    """Wait until the Trace info tab shows the summary of `file_name`."""
    frame.wait_for_function(
        "f => document.querySelector('[data-testid=file-facts]')?.textContent.includes(f)", arg=file_name
    )
    return frame.query_selector("[data-testid=trace-info]")


@pytest.fixture(scope="module")
def settled(tb_main: TensorBoard) -> dict[str, Any]:
    return tb_main.wait_settled()


@pytest.fixture
def clock_page(browser: Any, console: ConsoleLog) -> Iterator[Any]:
    """A page whose clock the test moves on (``page.clock``: time flows as usual until the test jumps it), so the
    shell's next poll or retry comes when the test has set the scene rather than 5-10 s later; the timers fire as
    they would (``fast_forward`` only runs those due). A context of its own: a clock stays installed in its
    context, which ``browser_context`` shares with every other test. Console errors fail the test as ``page``'s."""
    context = browser.new_context(viewport=VIEWPORT)
    context.clock.install()
    pg = context.new_page()
    pg.set_default_timeout(30_000)
    pg.on("console", lambda msg: console.errors.append(f"console.error: {msg.text}") if msg.type == "error" else None)
    pg.on("pageerror", lambda e: console.errors.append(f"pageerror: {e}"))
    try:
        yield pg
    finally:
        context.close()
    assert not console.unexpected(), "console errors:\n" + "\n".join(console.unexpected())


def test_runs_appear_and_every_span_finishes_loading(page: Any, tb_main: TensorBoard) -> None:
    frame = open_plugin(page, tb_main)
    frame.wait_for_function("() => document.querySelectorAll('[data-testid=run-select] option').length >= 2")
    assert options(frame, "run-select") == ["broken", "resnet18"]

    body = tb_main.wait_settled()
    states = {key: s["state"] for key, s in span_files(body).items()}
    assert states[("resnet18", "vm_562", "1")] == "ready"
    assert states[("resnet18", "vm_562", "2")] == "ready"
    assert [state for (run, _, _), state in states.items() if run == "broken"] == ["failed"]

    # The UI catches up: no progress bar left, and the default selection skips the failed run (the newest: its
    # file was written when the test started, resnet18's are the repository's) for the Overview of resnet18.
    frame.wait_for_function("() => !document.querySelector('[data-testid=progress-row]')", timeout=30_000)
    wait_value(frame, "run-select", "resnet18")
    assert options(frame, "worker-select") == ["vm_562"]
    assert options(frame, "span-select") == ["1", "2"]
    frame.wait_for_selector("[data-testid=tab-Overview][aria-selected=true]")
    frame.wait_for_selector("[data-testid=execution-summary]")
    assert frame.get_attribute("[data-testid=tab-info]", "aria-selected") == "false"
    assert frame.inner_text("[data-testid=tab-info]") == "Trace info"


def test_trace_info_matches_the_trace_file(page: Any, tb_main: TensorBoard, settled: dict[str, Any],
                                           resnet_files: list[Path]) -> None:
    span1 = span_files(settled)[("resnet18", "vm_562", "1")]
    source = next(f for f in resnet_files if f.name == span1["file"])
    facts = trace_facts(source)

    frame = open_plugin(page, tb_main, f"&p.{PLUGIN}.run=resnet18&p.{PLUGIN}.span=1&p.{PLUGIN}.view=info")
    info = wait_trace_info_for(frame, span1["file"])
    assert info is not None

    names = frame.eval_on_selector_all("[data-testid=device-name]", "els => els.map(e => e.textContent)")
    assert names == facts["devices"] == ["NVIDIA H200", "NVIDIA H200"]

    kernel_row = frame.query_selector('[data-testid=event-count-row][data-category="kernel"]')
    assert kernel_row is not None
    assert int(kernel_row.get_attribute("data-count")) == facts["categories"]["kernel"] == 1128
    assert "1,128" in kernel_row.inner_text()
    assert frame.inner_text("[data-testid=event-total]") == f"{facts['events']:,}"

    duration = frame.inner_text("[data-testid=tile-duration]")
    assert re.search(r"\d[\d,]*\.\d{3} ms", duration), duration
    assert "9.0" in frame.inner_text("[data-testid=devices-table]")
    assert "132" in frame.inner_text("[data-testid=devices-table]")
    assert span1["file"] in frame.inner_text("[data-testid=file-facts]")


def test_failed_file_shows_an_error_card_naming_the_file(page: Any, tb_main: TensorBoard,
                                                         settled: dict[str, Any]) -> None:
    broken = next(s for (run, _, _), s in span_files(settled).items() if run == "broken")
    assert broken["file"] == CORRUPT_FILE and broken["error"]

    frame = open_plugin(page, tb_main)
    wait_value(frame, "run-select", "resnet18")
    notice = frame.wait_for_selector("[data-testid=files] [data-testid=error-card]")
    assert CORRUPT_FILE in notice.inner_text()
    assert broken["error"] in notice.inner_text()

    frame.select_option("[data-testid=run-select]", "broken")
    card = frame.wait_for_selector("[data-testid=content] [data-testid=error-card]")
    text = card.inner_text()
    assert f"Could not load {CORRUPT_FILE}" in text
    assert broken["error"] in text
    # The selected failed file is not repeated in the notices above the tabs.
    assert frame.query_selector("[data-testid=files] [data-testid=error-card]") is None
    page.wait_for_function("() => location.hash.includes('p.pytorch_profiler.run=broken')")


def test_url_state_survives_a_reload(page: Any, tb_main: TensorBoard, settled: dict[str, Any]) -> None:
    span2 = span_files(settled)[("resnet18", "vm_562", "2")]
    # the stable key of a span is its file's stamp (a file with an older stamp added later shifts the numbers)
    assert span2["key"] == span2["file"].split(".")[1] == "1795654442665628614"
    frame = open_plugin(page, tb_main, f"&p.{PLUGIN}.view=info")
    wait_value(frame, "run-select", "resnet18")
    frame.select_option("[data-testid=span-select]", "2")
    wait_trace_info_for(frame, span2["file"])
    page.wait_for_function("k => location.hash.includes('p.pytorch_profiler.span=' + k)", arg=span2["key"])

    state = top_hash(page)
    assert state["__tab__"] == PLUGIN
    assert state[f"p.{PLUGIN}.run"] == "resnet18"
    assert state[f"p.{PLUGIN}.worker"] == "vm_562"
    assert state[f"p.{PLUGIN}.span"] == span2["key"]
    assert state[f"p.{PLUGIN}.view"] == "info"

    page.reload()
    frame = page.wait_for_selector(PLUGIN_IFRAME, state="attached").content_frame()
    wait_trace_info_for(frame, span2["file"])
    assert value(frame, "run-select") == "resnet18"
    assert value(frame, "span-select") == "2"
    # TensorBoard kept our keys through its own start-up (tab restore, URL migration).
    after = top_hash(page)
    assert after["__tab__"] == PLUGIN
    assert {k: v for k, v in after.items() if k.startswith(f"p.{PLUGIN}.")} == {
        k: v for k, v in state.items() if k.startswith(f"p.{PLUGIN}.")
    }

    # Back/forward-style edits of the hash are followed too; a link by position (older links) is rewritten to the
    # span's stable key.
    page.evaluate("k => { location.hash = location.hash.replace('span=' + k, 'span=1'); }", span2["key"])
    span1 = span_files(settled)[("resnet18", "vm_562", "1")]
    wait_trace_info_for(frame, span1["file"])
    assert value(frame, "span-select") == "1"
    page.wait_for_function("k => location.hash.includes('p.pytorch_profiler.span=' + k)", arg=span1["key"])


@pytest.mark.fresh_page  # an emulated colour scheme stays with a page: not on the shell page the next test gets
def test_standalone_entry_page_keeps_state_in_its_own_hash(page: Any, tb_main: TensorBoard, console: ConsoleLog,
                                                            settled: dict[str, Any]) -> None:
    """Without a reachable TensorBoard parent, URL state and theme fall back to the frame itself."""
    console.allowed.append("/favicon.ico")  # the browser's own request for a top-level page
    page.emulate_media(color_scheme="dark")
    page.goto(f"{tb_main.url}/data/plugin_entry.html?name={PLUGIN}#p.{PLUGIN}.run=resnet18&p.{PLUGIN}.span=2"
              f"&p.{PLUGIN}.view=info")
    wait_trace_info_for(page.main_frame, span_files(settled)[("resnet18", "vm_562", "2")]["file"])
    page.wait_for_function("() => location.hash.includes('p.pytorch_profiler.worker=vm_562')")
    assert page.evaluate("() => document.documentElement.dataset.theme") == "dark"
    page.select_option("[data-testid=span-select]", "1")
    key1 = span_files(settled)[("resnet18", "vm_562", "1")]["key"]
    page.wait_for_function("k => location.hash.includes('p.pytorch_profiler.span=' + k)", arg=key1)


def test_unknown_run_in_link_falls_back_and_fixes_the_url(page: Any, tb_main: TensorBoard,
                                                           settled: dict[str, Any]) -> None:
    frame = open_plugin(page, tb_main, f"&p.{PLUGIN}.run=gone&p.{PLUGIN}.span=9&p.{PLUGIN}.view=Nope")
    wait_value(frame, "run-select", "resnet18")
    wait_value(frame, "span-select", "1")
    # an unknown view falls back to the first screen, the Overview
    page.wait_for_function("() => location.hash.includes('p.pytorch_profiler.view=Overview')")
    state = top_hash(page)
    assert state[f"p.{PLUGIN}.run"] == "resnet18"
    assert state[f"p.{PLUGIN}.span"] == span_files(settled)[("resnet18", "vm_562", "1")]["key"]


def test_progress_bars_and_state_changes_follow_runs(page: Any, tb_main: TensorBoard) -> None:
    """./runs is replaced by a scripted answer, so the loading UI is seen whatever the machine's speed."""
    span = {"span": "1", "state": "loading", "progress": 0.42, "error": None, "file": "w.1.pt.trace.json.gz",
            "size_bytes": 123456789}
    queued = {"span": "2", "state": "queued", "progress": 0.0, "error": None, "file": "w.2.pt.trace.json.gz",
              "size_bytes": 1000}
    answer = {"runs": [{"name": "big", "workers": [{"name": "w", "spans": [span, queued]}]}],
              "logdir": "/somewhere", "scanning": False}

    def fulfill(route: Any) -> None:
        route.fulfill(status=200, content_type="application/json", body=json.dumps(answer))

    page.route(RUNS_ROUTE, fulfill)
    frame = open_plugin(page, tb_main)
    frame.wait_for_selector("[data-testid=loading-files]")
    rows = frame.query_selector_all("[data-testid=loading-files] [data-testid=progress-row]")
    assert [r.get_attribute("data-file") for r in rows] == ["w.1.pt.trace.json.gz", "w.2.pt.trace.json.gz"]
    bar = rows[0].query_selector("[role=progressbar]")
    assert bar.get_attribute("aria-valuenow") == "42"
    assert "42%" in rows[0].inner_text()
    assert "queued" in rows[1].inner_text()
    assert rows[1].query_selector("[role=progressbar]").get_attribute("aria-valuenow") is None
    frame.wait_for_selector("[data-testid=content] [data-testid=span-loading]")

    # Loading → failed: the next poll (2 s while loading) swaps the bar for an error card.
    span.update(state="failed", progress=0.42, error="w.1.pt.trace.json.gz: not a trace (no traceEvents)")
    queued.update(state="failed", error="w.2.pt.trace.json.gz: empty file")
    card = frame.wait_for_selector("[data-testid=content] [data-testid=error-card]", timeout=10_000)
    assert "w.1.pt.trace.json.gz: not a trace (no traceEvents)" in card.inner_text()
    frame.wait_for_function("() => !document.querySelector('[data-testid=progress-row]')")
    other = frame.wait_for_selector("[data-testid=files] [data-testid=error-card]")
    assert "w.2.pt.trace.json.gz" in other.inner_text()


def test_default_selection_does_not_jump_while_files_load(page: Any, tb_main: TensorBoard) -> None:
    def spans(state: str) -> list[dict[str, Any]]:
        return [{"span": "1", "state": state, "progress": 0.5 if state == "loading" else 1.0, "error": None,
                 "file": "x.1.pt.trace.json.gz", "size_bytes": 10}]

    answer: dict[str, Any] = {"runs": [{"name": "a", "workers": [{"name": "w", "spans": spans("loading")}]},
                                       {"name": "b", "workers": [{"name": "w", "spans": spans("ready")}]}],
                              "logdir": "/x", "scanning": False}
    summary = {"file": "x.1.pt.trace.json.gz", "size_bytes": 10, "duration_us": 1500.0,
               "event_counts": {"kernel": 3, "cpu_op": 5},
               "devices": [{"id": 0, "name": "Fake GPU", "memory_bytes": 1 << 30, "compute_capability": "8.0",
                            "num_sms": 108}],
               "metadata": {"schema_version": 1, "pytorch_version": "2.11.0", "cuda_runtime_version": 12040,
                            "cuda_driver_version": None, "framework": "pytorch", "with_stack": False,
                            "record_shapes": True, "profile_memory": None,
                            "distributed": {"backend": "nccl", "rank": 1, "world_size": 2}}}

    def json_reply(body: Any) -> Callable[[Any], None]:
        return lambda route: route.fulfill(status=200, content_type="application/json", body=json.dumps(body))

    page.route(RUNS_ROUTE, lambda route: json_reply(answer)(route))
    page.route(f"**/data/plugin/{PLUGIN}/views?*", json_reply({"views": []}))
    page.route(f"**/data/plugin/{PLUGIN}/summary?*", json_reply(summary))
    frame = open_plugin(page, tb_main)
    # The ready run wins over the one still loading ...
    wait_value(frame, "run-select", "b")
    wait_trace_info_for(frame, "x.1.pt.trace.json.gz")
    text = frame.inner_text("[data-testid=trace-info]")
    for expected in ("Fake GPU", "1.500 ms", "2.11.0", "12.4 (12040)", "nccl · rank 1 of 2", "1.00 GiB", "108"):
        assert expected in text, expected
    assert frame.inner_text("[data-testid=event-total]") == "8"
    # ... and stays shown when the other run becomes ready (no jump back to the first run).
    answer["runs"][0]["workers"][0]["spans"] = spans("ready")
    frame.wait_for_function("() => !document.querySelector('[data-testid=progress-row]')", timeout=10_000)
    assert value(frame, "run-select") == "b"
    assert top_hash(page)[f"p.{PLUGIN}.run"] == "b"


def test_logdir_errors_and_many_failed_files_are_folded(page: Any, tb_main: TensorBoard) -> None:
    spans = [{"span": str(i), "state": "failed", "progress": 0, "error": f"w.{i}.pt.trace.json.gz: empty file",
              "file": f"w.{i}.pt.trace.json.gz", "size_bytes": 0} for i in range(1, 11)]
    answer = {"runs": [{"name": "many", "workers": [{"name": "w", "spans": spans}]}], "logdir": "/x,/nope",
              "scanning": False, "errors": ["/nope: the directory does not exist."]}
    page.route(RUNS_ROUTE, lambda route: route.fulfill(status=200, content_type="application/json",
                                                       body=json.dumps(answer)))
    frame = open_plugin(page, tb_main)
    assert "/nope: the directory does not exist." in frame.inner_text("[data-testid=logdir-error]")
    # Span 1 is selected (its error is the page); 9 others: 3 cards shown, 6 folded.
    frame.wait_for_selector("[data-testid=content] [data-testid=error-card]")
    visible = frame.query_selector_all("[data-testid=files] > [data-testid=error-card]")
    assert len(visible) == 3
    more = frame.query_selector("[data-testid=more-failed]")
    assert "6 more files could not be loaded" in more.inner_text()
    assert len(more.query_selector_all("[data-testid=error-card]")) == 6


def test_only_registered_views_get_a_tab(page: Any, tb_main: TensorBoard, settled: dict[str, Any]) -> None:
    # The server may list views the frontend does not implement (yet): they get no tab, Trace info stays.
    page.route(f"**/data/plugin/{PLUGIN}/views?*", lambda route: route.fulfill(
        status=200, content_type="application/json", body=json.dumps({"views": ["Bogus", "Overview"]})))
    frame = open_plugin(page, tb_main, f"&p.{PLUGIN}.view=Bogus")
    frame.wait_for_selector("[data-testid=tab-Overview][aria-selected=true]")
    tabs = frame.eval_on_selector_all("[role=tab]", "els => els.map(e => e.dataset.view)")
    registry = (REPO / "frontend" / "src" / "views" / "registry.ts").read_text()
    expected = ["info"] + (["Overview"] if re.search(r"^\s*Overview:", registry, re.M) else [])
    # views that compare traces (Diff) are offered for every run, whatever /views lists
    always = re.search(r"ALWAYS_AVAILABLE[^=]*= new Set<ViewName>\(\[([^\]]*)\]", registry)
    expected += [v.strip().strip('"') for v in always.group(1).split(",") if v.strip()] if always else []
    assert tabs == expected
    page.wait_for_function("() => location.hash.includes('p.pytorch_profiler.view=Overview')")


def test_trace_derived_text_is_never_parsed_as_html(page: Any, tb_main: TensorBoard) -> None:
    evil = '<img src=x onerror="window.__pwned=1">'
    answer = {"runs": [{"name": evil, "workers": [{"name": evil, "spans": [
        {"span": "1", "state": "failed", "progress": 0, "error": evil, "file": evil, "size_bytes": 1}]}]}],
        "logdir": evil, "scanning": False}
    page.route(RUNS_ROUTE, lambda route: route.fulfill(status=200, content_type="application/json",
                                                       body=json.dumps(answer)))
    frame = open_plugin(page, tb_main)
    card = frame.wait_for_selector("[data-testid=content] [data-testid=error-card]")
    assert evil in card.inner_text()
    assert frame.query_selector("img") is None
    assert frame.evaluate("() => window.__pwned === undefined")


def test_empty_logdir_explains_how_to_record_a_trace(page: Any, tb_factory: Callable[..., TensorBoard],
                                                     empty_logdir: Path, console: ConsoleLog) -> None:
    # Also under --path_prefix: every request of the frontend must be relative to the plugin root.
    console.allowed.append("/font-roboto/")  # TensorBoard's own CSS ignores --path_prefix for its fonts
    tb = tb_factory(empty_logdir, path_prefix="/pfx")
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url) if "plugin_entry.html" in r.frame.url else None)
    frame = open_plugin(page, tb)
    empty = frame.wait_for_selector("[data-testid=empty-state] >> text=No profiler traces found", timeout=30_000)
    assert empty is not None
    text = frame.inner_text("[data-testid=empty-state]")
    assert "torch.profiler.profile(" in text
    assert 'on_trace_ready=torch.profiler.tensorboard_trace_handler("./log")' in text
    assert "tensorboard --logdir ./log" in text
    assert str(empty_logdir) in text
    assert frame.is_disabled("[data-testid=run-select]")
    assert requests and all(u.startswith(f"{tb.url}/data/plugin/{PLUGIN}/") for u in requests), requests


def test_unreachable_server_is_explained_and_recovers(clock_page: Any, tb_main: TensorBoard, console: ConsoleLog,
                                                      settled: dict[str, Any]) -> None:
    page = clock_page
    console.allowed += ["net::ERR_FAILED", "Failed to load resource"]
    page.route(RUNS_ROUTE, lambda route: route.abort())
    frame = open_plugin(page, tb_main, f"&p.{PLUGIN}.view=info")
    card = frame.wait_for_selector("[data-testid=content] [data-testid=unreachable]")
    assert "Cannot reach the TensorBoard server" in card.inner_text()

    page.unroute(RUNS_ROUTE)  # the server is back: the next retry (5 s) recovers by itself
    page.clock.fast_forward(POLL_UNREACHABLE_MS)
    wait_trace_info_for(frame, span_files(settled)[("resnet18", "vm_562", "1")]["file"])

    page.route(RUNS_ROUTE, lambda route: route.abort())  # lost again while showing data: a banner, data kept
    page.clock.fast_forward(POLL_IDLE_MS)  # the next poll: nothing loads
    banner = frame.wait_for_selector("[data-testid=banner] [data-testid=unreachable]", timeout=20_000)
    assert "Cannot reach the TensorBoard server" in banner.inner_text()
    assert frame.query_selector("[data-testid=trace-info]") is not None


def test_server_error_sentence_is_shown(page: Any, tb_main: TensorBoard, console: ConsoleLog) -> None:
    console.allowed += ["status of 500"]
    sentence = "The logdir /data/x cannot be listed: permission denied."
    page.route(RUNS_ROUTE, lambda route: route.fulfill(status=500, content_type="application/json",
                                                       body=json.dumps({"error": sentence})))
    frame = open_plugin(page, tb_main)
    card = frame.wait_for_selector("[data-testid=server-error]")
    assert sentence in card.inner_text()


@pytest.mark.fresh_page  # an emulated colour scheme stays with a page: not on the shell page the next test gets
def test_theme_follows_tensorboard(page: Any, tb_main: TensorBoard) -> None:
    page.emulate_media(color_scheme="dark")  # TensorBoard's default theme follows the browser
    frame = open_plugin(page, tb_main)
    page.wait_for_function("() => document.body.classList.contains('dark-mode')")
    frame.wait_for_function("() => document.documentElement.dataset.theme === 'dark'")
    dark_bg = frame.evaluate("() => getComputedStyle(document.body).backgroundColor")

    page.evaluate("() => document.body.classList.remove('dark-mode')")  # as TensorBoard's theme toggle does
    frame.wait_for_function("() => document.documentElement.dataset.theme === 'light'")
    light_bg = frame.evaluate("() => getComputedStyle(document.body).backgroundColor")
    assert dark_bg != light_bg

    page.evaluate("() => document.body.classList.add('dark-mode')")
    frame.wait_for_function("() => document.documentElement.dataset.theme === 'dark'")


def test_hidden_tab_and_plotly_chunk(page: Any, tb_main: TensorBoard, settled: dict[str, Any]) -> None:
    frame = open_plugin(page, tb_main, f"&p.{PLUGIN}.view=info")
    wait_trace_info_for(frame, span_files(settled)[("resnet18", "vm_562", "1")]["file"])
    frame.evaluate("""() => { window.__csp = []; document.addEventListener('securitypolicyviolation',
        e => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI)); }""")

    # TensorBoard hides an inactive plugin tab with max-height:0; the page must come back intact.
    page.eval_on_selector(PLUGIN_IFRAME, "f => Object.assign(f.style, {maxHeight: '0px', visibility: 'hidden'})")
    frame.wait_for_function("() => window.innerHeight === 0")
    page.eval_on_selector(PLUGIN_IFRAME, "f => Object.assign(f.style, {maxHeight: '', visibility: ''})")
    frame.wait_for_function("() => window.innerHeight > 0")
    box = frame.query_selector("[data-testid=trace-info]").bounding_box()
    assert box is not None and box["height"] > 100

    # plotly.js is bundled in a lazily loaded chunk served by the plugin, and draws under TensorBoard's CSP.
    assert (STATIC / "index.js").stat().st_size < 200_000  # plotly (~4.7 MB) is not in the entry module
    drawn = frame.evaluate("""async () => {
        const m = await import('./index.js');
        const Plotly = await m.loadPlotly();
        const div = document.createElement('div');
        div.style.width = '400px'; div.style.height = '300px';
        document.body.appendChild(div);
        await Plotly.newPlot(div, [{x: [1, 2, 3], y: [2, 1, 3], type: 'bar'}], {}, {staticPlot: true});
        const ok = !!div.querySelector('svg.main-svg');
        Plotly.purge(div); div.remove();
        return ok;
    }""")
    assert drawn is True
    assert frame.evaluate("() => window.__csp") == []
    # The chunk came from the plugin's own route, not a CDN.
    chunks = frame.evaluate("() => performance.getEntriesByType('resource').map(e => e.name)")
    assert any(re.search(rf"/data/plugin/{PLUGIN}/chunk-[A-Z0-9]+\.js$", c) for c in chunks), chunks
    assert all(c.startswith(tb_main.url) for c in chunks), chunks


def test_first_screen_is_the_overview_of_the_newest_run(page: Any, tb_factory: Callable[..., TensorBoard],
                                                        tmp_path: Path) -> None:
    """As the old plugin did: the Overview of the run profiled last, whatever the runs' names; Trace info stays a
    tab, and an explicit link still wins."""
    import os
    import shutil

    samples = REPO / "samples"
    logdir = tmp_path / "first_screen"
    stamps = {"a_older": 1_700_000_000, "b_newest": 1_700_000_900, "c_middle": 1_700_000_500}
    for run, source in zip(stamps, ("cpu_only", "tiny_kernels", "item_sync")):
        src = sorted((samples / source).glob("*.pt.trace.json.gz"))[0]
        dst = logdir / run / src.name
        dst.parent.mkdir(parents=True)
        shutil.copyfile(src, dst)
        os.utime(dst, (stamps[run], stamps[run]))
    tb = tb_factory(logdir)
    body = tb.wait_settled()
    assert [(r["name"], r["workers"][0]["spans"][0]["mtime"]) for r in body["runs"]] == [
        ("a_older", 1_700_000_000.0), ("b_newest", 1_700_000_900.0), ("c_middle", 1_700_000_500.0)]
    frame = open_plugin(page, tb)
    wait_value(frame, "run-select", "b_newest")
    frame.wait_for_selector("[data-testid=tab-Overview][aria-selected=true]")
    frame.wait_for_selector("[data-testid=execution-summary]")
    assert frame.inner_text("[data-testid=tab-info]") == "Trace info"
    state = top_hash(page)
    assert (state[f"p.{PLUGIN}.run"], state[f"p.{PLUGIN}.view"]) == ("b_newest", "Overview")
    frame.click("[data-testid=tab-info]")
    frame.wait_for_selector("[data-testid=trace-info]")

    frame = open_plugin(page, tb, f"&p.{PLUGIN}.run=a_older&p.{PLUGIN}.view=info")
    frame.wait_for_selector("[data-testid=trace-info]")
    assert value(frame, "run-select") == "a_older"
    assert frame.get_attribute("[data-testid=tab-info]", "aria-selected") == "true"


def test_a_saved_link_keeps_its_file_when_an_older_one_is_added(clock_page: Any,
                                                                 tb_factory: Callable[..., TensorBoard],
                                                                 resnet_files: list[Path], tmp_path: Path) -> None:
    """Spans are numbered by stamp, so an older file shifts the numbers; the link carries the stamp instead."""
    import os
    import shutil
    import time

    page = clock_page
    older, newer = sorted(resnet_files)  # vm_562.1795654441914410211 and vm_562.1795654442665628614
    logdir = tmp_path / "stable"
    (logdir / "r").mkdir(parents=True)
    shutil.copyfile(newer, logdir / "r" / newer.name)
    tb = tb_factory(logdir, "--profiler_rescan_interval", "0.5")
    tb.wait_settled()
    frame = open_plugin(page, tb, f"&p.{PLUGIN}.span=1&p.{PLUGIN}.view=info")  # an older link, by position
    wait_trace_info_for(frame, newer.name)
    key = newer.name.split(".")[1]
    page.wait_for_function("k => location.hash.includes('p.pytorch_profiler.span=' + k)", arg=key)  # rewritten
    saved = page.url

    shutil.copyfile(older, logdir / "r" / older.name)
    os.utime(logdir / "r" / older.name, (1_700_000_000, 1_700_000_000))  # settled at once
    deadline = time.time() + 60  # the next rescan (every 0.5 s here) finds it
    while len(spans := tb.wait_settled()["runs"][0]["workers"][0]["spans"]) < 2 and time.time() < deadline:
        time.sleep(0.1)
    assert [(s["span"], s["file"]) for s in spans] == [("1", older.name), ("2", newer.name)]
    # the open page follows its file to its new number (it does not move to the new span 1) at its next poll
    page.clock.fast_forward(POLL_IDLE_MS)
    frame.wait_for_function("() => document.querySelectorAll('[data-testid=span-select] option').length === 2",
                            timeout=30_000)
    wait_value(frame, "span-select", "2")
    wait_trace_info_for(frame, newer.name)
    assert top_hash(page)[f"p.{PLUGIN}.span"] == key

    page.goto("about:blank")
    page.goto(saved)
    frame = page.wait_for_selector(PLUGIN_IFRAME, state="attached").content_frame()
    wait_trace_info_for(frame, newer.name)  # span 1 is the older file now; the link still opens its own
    assert value(frame, "span-select") == "2"
    assert top_hash(page)[f"p.{PLUGIN}.span"] == key


def test_a_logdir_of_many_runs_is_paged_and_searched(page: Any, tb_factory: Callable[..., TensorBoard],
                                                     tmp_path: Path) -> None:
    """250 runs (more than a page of 200): the run picker lists a page, says how many more there are, and a search
    box finds any run by name on the server; the newest run opens first as with a small logdir."""
    import os

    logdir = tmp_path / "many_runs"
    for k in range(250):
        events = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0,
                   "dur": 100 + k}, {"ph": "X", "cat": "cpu_op", "name": f"aten::op{k}", "pid": 1, "tid": 1,
                                     "ts": 10, "dur": 50}]
        path = logdir / f"run{k:03d}" / "w.1.pt.trace.json"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps({"traceEvents": events}))
        stamp = 1_700_000_000 + (900 if k == 123 else k)  # run123 is the newest
        os.utime(path, (stamp, stamp))
    tb = tb_factory(logdir)
    tb.wait_settled(timeout=300)
    frame = open_plugin(page, tb)
    frame.wait_for_selector("[data-testid=run-search]:not([hidden])")
    wait_value(frame, "run-select", "run123")  # the newest, though it is not on the first page's top
    runs = [o for o in options(frame, "run-select") if o.startswith("run")]
    assert len(runs) == 200 and runs[0] == "run000"
    assert frame.inner_text("[data-testid=run-select] option[data-more]") == "… 50 more: type to search"
    assert frame.inner_text("[data-testid=status]") == "250 runs"

    frame.fill("[data-testid=run-search]", "run24")
    frame.wait_for_function("() => document.querySelectorAll('[data-testid=run-select] option').length <= 12")
    assert options(frame, "run-select") == ["run123", *(f"run24{k}" for k in range(10))]  # the one shown stays
    assert frame.inner_text("[data-testid=status]") == "10 of 250 runs match"
    frame.select_option("[data-testid=run-select]", "run247")
    frame.wait_for_function(
        "() => document.querySelector('[data-testid=file-facts], [data-testid=execution-summary], "
        "[data-testid=span-loading]') !== null")
    assert top_hash(page)[f"p.{PLUGIN}.run"] == "run247"
    body = tb.get_json("runs?limit=5&q=run24&run=run001")
    assert [r["name"] for r in body["runs"]] == ["run001", "run123", "run240", "run241", "run242", "run243", "run244"]
    assert (body["total_runs"], body["matched"]) == (250, 10)
