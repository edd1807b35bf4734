"""The Overview, Operator and Kernel pages inside the real TensorBoard, checked against the plugin's JSON routes."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from tests.browser.conftest import (
    PLUGIN,
    PLUGIN_IFRAME,
    ConsoleLog,
    TensorBoard,
    open_plugin,
    read_csv,
    table_rows,
)

pytestmark = pytest.mark.browser

TRANSFORMER = ("transformer_bf16", "vm_699")
RESNET = ("resnet_slow_dataloader", "vm_618")
CPU = ("cpu_only", "vm_9609")


# --------------------------------------------------------------------------------------------- helpers


def api(tb: TensorBoard, route: str, run: tuple[str, str], **params: str) -> Any:
    query = urlencode({"run": run[0], "worker": run[1], "span": "1", **params})
    return tb.get_json(f"{route}?{query}")


def open_view(page: Any, tb: TensorBoard, run: tuple[str, str], view: str) -> Any:
    p = f"p.{PLUGIN}"
    frame = open_plugin(page, tb, f"&{p}.run={run[0]}&{p}.worker={run[1]}&{p}.span=1&{p}.view={view}")
    frame.wait_for_selector(f"[data-testid=tab-{view}][aria-selected=true]")
    return frame


def wait_charts(frame: Any, *testids: str) -> None:
    for testid in testids:
        frame.wait_for_selector(f"[data-testid={testid}] .main-svg", timeout=30_000)


def parse_duration(text: str) -> tuple[float, float]:
    """'114.25 ms' -> (114250.0, half a unit of the last digit, in µs)."""
    m = re.fullmatch(r"([\d,]+(?:\.(\d+))?) (ms|µs)", text.strip())
    assert m, f"not a duration: {text!r}"
    value = float(m.group(1).replace(",", ""))
    digits = len(m.group(2) or "")
    scale = 1000.0 if m.group(3) == "ms" else 1.0
    return value * scale, 0.5 * 10 ** -digits * scale + 1e-9


def assert_duration(text: str, expected_us: float) -> None:
    if expected_us == 0:
        assert text == "0 µs"
        return
    value, tol = parse_duration(text)
    assert abs(value - expected_us) <= tol, f"{text!r} shown for {expected_us} µs"
    # the unit follows the size: µs under 1 ms, ms above
    assert text.endswith("µs") == (abs(expected_us) < 1000), text


def assert_percent(text: str, fraction: float) -> None:
    m = re.fullmatch(r"(-?[\d,]+\.\d)%", text.strip())
    assert m, f"not a percentage with one decimal: {text!r}"
    assert abs(float(m.group(1).replace(",", "")) - 100 * fraction) <= 0.05 + 1e-9, f"{text!r} for {fraction}"


def row_named(frame: Any, table: str, name: str) -> Any:
    """Locator of the table row whose name cell is exactly `name`."""
    return frame.locator(f"[data-testid={table}] tr[data-testid=row]").filter(
        has=frame.locator("td[data-col=name]", has_text=re.compile(f"^{re.escape(name)}$")))


def legend_texts(frame: Any, testid: str) -> list[str]:
    return frame.eval_on_selector_all(f"[data-testid={testid}] .legendtext", "els => els.map(e => e.textContent)")




def header_keys(frame: Any, testid: str) -> list[str]:
    return frame.eval_on_selector_all(f"[data-testid={testid}] thead th[data-col]", "els => els.map(e => e.dataset.col)")


def set_search(frame: Any, testid: str, text: str) -> None:
    frame.fill(f"[data-testid={testid}]", text)




# --------------------------------------------------------------------------------------------- Overview


def test_overview_matches_the_api(page: Any, tb_samples: TensorBoard) -> None:
    data = api(tb_samples, "overview", RESNET)
    frame = open_view(page, tb_samples, RESNET, "Overview")
    wait_charts(frame, "step-chart", "breakdown-pie")

    # Average step time and the execution summary: every category, in the API's order, time and share.
    assert_duration(frame.inner_text("[data-testid=avg-step-time]"), data["average"]["duration_us"])
    assert_duration(frame.inner_text("[data-testid=execution-total]"), data["average"]["duration_us"])
    rows = frame.query_selector_all("[data-testid=execution-row]")
    assert [r.get_attribute("data-category") for r in rows] == data["categories"]
    for row in rows:
        cat = row.get_attribute("data-category")
        assert_duration(row.query_selector("[data-testid=execution-time]").inner_text(), data["average"]["breakdown_us"][cat])
        assert_percent(row.query_selector("[data-testid=execution-share]").inner_text(), data["average"]["share"][cat])
        assert "first matching category" in (row.query_selector("[data-testid=execution-share]").get_attribute("title") or "")
    loader = frame.query_selector("[data-testid=execution-row][data-category=DataLoader] [data-testid=execution-share]")
    assert_percent(loader.inner_text(), data["average"]["share"]["DataLoader"])
    assert data["average"]["share"]["DataLoader"] > 0.5  # the point of this sample

    # The stacked bars: one trace per category in order (+ the hover-only step total), per-step values in ms.
    traces = frame.evaluate("""() => document.querySelector('[data-testid=step-chart]').data
        .map(t => ({name: t.name, x: t.x, y: t.y, type: t.type}))""")
    assert [t["name"] for t in traces[: len(data["categories"])]] == data["categories"]
    assert frame.evaluate("() => document.querySelector('[data-testid=step-chart]').layout.barmode") == "stack"
    for t in traces[: len(data["categories"])]:
        assert t["x"] == [s["name"] for s in data["steps"]]
        assert t["y"] == pytest.approx([s["breakdown_us"][t["name"]] / 1000 for s in data["steps"]], rel=1e-9, abs=1e-9)

    # Recommendations: the DataLoader one first, with a docs link that opens a new tab.
    recs = frame.query_selector_all("[data-testid=recommendation]")
    assert [r.get_attribute("data-id") for r in recs] == [r["id"] for r in data["recommendations"]]
    dataloader = next(r for r in recs if r.get_attribute("data-id") == "input_bound")
    expected = next(r for r in data["recommendations"] if r["id"] == "input_bound")
    assert expected["text"] in dataloader.inner_text()
    link = dataloader.query_selector("a")
    assert link.get_attribute("href") == expected["link"]
    assert link.get_attribute("target") == "_blank"
    assert "noopener" in (link.get_attribute("rel") or "")

    # One GPU card per GPU, each number with its explanation.
    cards = frame.query_selector_all("[data-testid=gpu-card]")
    assert len(cards) == len(data["gpus"]) >= 1
    gpu = data["gpus"][0]
    for testid, key, words in [
        ("gpu-utilization", "utilization", "at least one kernel ran"),
        ("gpu-busy", "gpu_busy", "any kernel, memcpy or memset"),
        ("gpu-sm-efficiency", "sm_efficiency", "blocks-per-SM"),
        ("gpu-occupancy", "achieved_occupancy", "weighted by kernel time"),
        ("gpu-tensor-cores", "tensor_core_ratio", "tensor cores"),
    ]:
        metric = cards[0].query_selector(f"[data-testid={testid}]")
        assert_percent(metric.query_selector(".ptp-metric-value").inner_text(), gpu[key])
        assert words in (metric.get_attribute("title") or "")
        assert metric.query_selector(".ptp-info") is not None
    config = frame.inner_text("[data-testid=card-configuration]")
    assert "NVIDIA H200" in config and "compute capability 9.0" in config and "13.0" in config
    assert data["environment"]["cupti_version"] == 130001
    assert "CUPTI\n13.0.1" in config and "130001" not in config  # what the number encodes, not the number


def test_cpu_only_run_has_no_gpu_items(page: Any, tb_samples: TensorBoard) -> None:
    data = api(tb_samples, "overview", CPU)
    assert data["environment"]["device_type"] == "CPU"
    frame = open_view(page, tb_samples, CPU, "Overview")
    wait_charts(frame, "step-chart", "breakdown-pie")
    assert frame.query_selector("[data-testid=gpu-card]") is None
    shown = frame.eval_on_selector_all("[data-testid=execution-row]", "els => els.map(e => e.dataset.category)")
    assert shown == [c for c in data["categories"]
                     if c not in ("Kernel", "Memcpy", "Memset", "Runtime") or data["average"]["breakdown_us"][c] > 0]
    assert "CPU only" in frame.inner_text("[data-testid=card-configuration]")
    assert "tensor" not in frame.inner_text("[data-testid=overview]").lower()
    tabs = frame.eval_on_selector_all("[role=tab]", "els => els.map(e => e.dataset.view)")
    assert tabs[:3] == ["info", "Overview", "Operator"] and "Kernel" not in tabs  # no kernels, no Kernel tab

    frame.click("[data-testid=tab-Operator]")
    wait_charts(frame, "pie-host_self", "pie-host_total")
    assert frame.query_selector("[data-testid=pie-device_self]") is None
    assert frame.query_selector("[data-testid=host-only-note]") is not None
    cols = header_keys(frame, "operator-table")
    assert cols == ["name", "calls", "host_self", "host_total"]
    rows = table_rows(frame, "operator-table")
    api_rows = api(tb_samples, "operators", CPU)["rows"]
    # host self, descending; the first page holds what fits the frame (at least 15 rows)
    assert len(rows) >= min(15, len(api_rows)) and [r["name"] for r in rows] == [r["name"] for r in api_rows[:len(rows)]]


def test_overview_notes_and_missing_values(page: Any, tb_samples: TensorBoard) -> None:
    """A scripted /overview: notes as info lines, null metrics as "—", missing versions hidden, text never markup."""
    cats = ["Kernel", "Memcpy", "Memset", "Communication", "Runtime", "DataLoader", "CPU Exec", "Other"]
    zero = dict.fromkeys(cats, 0.0)
    step = {"name": "7", "start_us": 0.0, "duration_us": 1500.0, "breakdown_us": {**zero, "Kernel": 1000.0, "Other": 500.0}}
    body = {
        "steps": [step],
        "average": {"duration_us": 1500.0, "breakdown_us": step["breakdown_us"],
                    "share": {**zero, "Kernel": 2 / 3, "Other": 1 / 3}},
        "categories": cats,
        "gpus": [{"id": 3, "name": "<b>GPU</b>", "memory_bytes": None, "compute_capability": None, "utilization": 0.5,
                  "compute_utilization": 0.2, "sm_efficiency": None, "achieved_occupancy": None, "tensor_core_ratio": None, "kernel_time_us": 1000.0}],
        "environment": {"device_type": "GPU", "workers": 2, "devices": [], "pytorch_version": "2.11.0",
                        "cuda_runtime_version": 12040, "cuda_driver_version": None, "cupti_version": None,
                        "framework": None},
        "recommendations": [{"id": "x", "text": "Do <i>this</i>.", "link": "javascript:alert(1)"}],
        "notes": ["Step 8 was left out: its GPU work was not captured."],
    }
    page.route(f"**/data/plugin/{PLUGIN}/overview?*", lambda route: route.fulfill(
        status=200, content_type="application/json", body=json.dumps(body)))
    frame = open_view(page, tb_samples, TRANSFORMER, "Overview")
    wait_charts(frame, "step-chart")
    assert frame.inner_text("[data-testid=overview-note]").strip().endswith("Step 8 was left out: its GPU work was not captured.")
    assert frame.inner_text("[data-testid=avg-step-time]") == "1.50 ms"
    card = frame.query_selector("[data-testid=gpu-card]")
    assert "GPU 3 · <b>GPU</b>" in card.inner_text()
    assert card.query_selector("[data-testid=gpu-utilization] .ptp-metric-value").inner_text() == "50.0%"
    # with communication kernels, both utilizations, the headline named as such
    assert "headline" in card.query_selector("[data-testid=gpu-utilization] .ptp-metric-label").inner_text()
    assert card.query_selector("[data-testid=gpu-compute-utilization] .ptp-metric-value").inner_text() == "20.0%"
    assert card.query_selector("[data-testid=gpu-tensor-cores] .ptp-metric-value").inner_text() == "—"
    # estimates the trace could not make (occupancy, SM efficiency) are "n/a", never a number
    for testid in ("gpu-occupancy", "gpu-sm-efficiency"):
        assert card.query_selector(f"[data-testid={testid}] .ptp-metric-value").inner_text() == "n/a"
    facts = frame.eval_on_selector_all("[data-testid=configuration] dd", "els => els.map(e => e.dataset.fact)")
    assert facts == ["Device type", "Workers", "PyTorch", "CUDA runtime"]  # missing ones hidden
    assert "12.4" in frame.inner_text("[data-testid=configuration]")
    rec = frame.query_selector("[data-testid=recommendation]")
    assert rec.inner_text().strip() == "Do <i>this</i>."  # text, and no link for a javascript: URL
    assert rec.query_selector("a") is None and frame.query_selector("b, i") is None


LONG_NAME = "sgemm_" + "x" * 19_990 + "_tail"  # 20,001 characters: shown cut at 8,192 everywhere but the details


@pytest.fixture(scope="module")
def tb_odd(tb_factory: Any, tmp_path_factory: pytest.TempPathFactory) -> TensorBoard:
    """Real traces (no scripted answers) the plugin must correct or cut: three ProfilerStep#1 one after another,
    step 2 recorded twice over the same time and a negative duration (run ``odd``); a 20,001-character name
    (run ``long``)."""
    from tests.conftest import cpu_op, write_trace

    def step(n: int, ts: float, dur: float, tid: int = 1) -> dict[str, Any]:
        return {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}", "pid": 100, "tid": tid, "ts": ts,
                "dur": dur}

    events = [step(1, 0, 100), cpu_op("aten::mm", 10, 50), step(1, 100, 200), cpu_op("aten::mm", 110, 150),
              step(1, 300, 100), cpu_op("aten::add", 310, 20), step(2, 400, 50), step(2, 405, 40, tid=2),
              cpu_op("aten::add", 410, -20)]
    logdir = tmp_path_factory.mktemp("logdir_odd")
    write_trace(logdir / "odd" / "w.1.pt.trace.json", events)
    write_trace(logdir / "long" / "w.1.pt.trace.json", [step(1, 0, 100), cpu_op(LONG_NAME, 10, 50)])
    tb = tb_factory(logdir)
    tb.wait_settled(timeout=120)
    return tb


def test_trace_details_show_a_long_name_whole(page: Any, tb_odd: TensorBoard) -> None:
    """The search hit is the cut name; its details give the whole name (``full_name``), folded until clicked."""
    frame = open_view(page, tb_odd, ("long", "w"), "Trace")
    frame.fill("[data-testid=trace-search]", "sgemm_")
    frame.press("[data-testid=trace-search]", "Enter")
    frame.wait_for_function("() => window.__ptpTrace.selected()?.details")
    title = frame.wait_for_selector("[data-testid=trace-details-name]")
    assert title.evaluate("e => e.textContent") == LONG_NAME
    window = api(tb_odd, "trace/window", ("long", "w"))
    assert max(len(n) for n in window["names"]) < 8_300 and LONG_NAME not in json.dumps(window)


def test_overview_says_what_it_merged_and_clamped(page: Any, tb_odd: TensorBoard) -> None:
    """The Overview shows four steps and says each correction in a note."""
    frame = open_view(page, tb_odd, ("odd", "w"), "Overview")
    wait_charts(frame, "step-chart")
    notes = [n.strip() for n in frame.eval_on_selector_all("[data-testid=overview-note]",
                                                           "els => els.map(e => e.lastElementChild.innerText)")]
    assert notes == [
        "Several steps have the same number, one after another: ProfilerStep#1 3 times (shown as 1, 1 (2), 1 (3)). "
        "Each is a step of its own here (was the profiler started twice, or its schedule restarted?).",
        "Steps recorded more than once over the same time (on other threads): ProfilerStep#2 2 times. Each is "
        "counted once, as the one recorded first.",
        "1 event of the trace had a negative duration (down to -20.000 µs, on aten::add): each counts as 0 µs."]
    steps = frame.evaluate("() => document.querySelector('[data-testid=step-chart]').data[0].x")
    assert list(steps) == ["1", "1 (2)", "1 (3)", "2"]


# --------------------------------------------------------------------------------------------- Operator


def test_operator_pies_search_sort_and_shapes(page: Any, tb_samples: TensorBoard) -> None:
    data = api(tb_samples, "operators", TRANSFORMER)
    frame = open_view(page, tb_samples, TRANSFORMER, "Operator")
    wait_charts(frame, "pie-device_self", "pie-device_total", "pie-host_self", "pie-host_total")

    # Top 10 + "Other": the slices add up to the whole, so every share is true.
    pie = frame.evaluate("() => { const d = document.querySelector('[data-testid=pie-device_self]').data[0];"
                         " return {labels: d.labels, values: d.values}; }")
    assert len(pie["values"]) == 11 and pie["labels"][-1].startswith("Other (")
    assert sum(pie["values"]) == pytest.approx(sum(r["device_self_us"] for r in data["rows"]), rel=1e-9)
    frame.fill("[data-testid=top-n]", "5")
    frame.press("[data-testid=top-n]", "Tab")
    frame.wait_for_function("() => document.querySelector('[data-testid=pie-host_total]').data[0].values.length === 6")

    # The table: server order (device self, descending, arrow shown), 10 a page, numbers as in the API.
    frame.wait_for_selector("[data-testid=operator-table] tbody tr[data-testid=row]")
    assert frame.get_attribute("[data-testid=operator-table] th[data-col=device_self]", "aria-sort") == "descending"
    assert "▼" in frame.inner_text("[data-testid=operator-table] th[data-col=device_self]")
    rows = table_rows(frame, "operator-table")
    assert len(rows) >= min(15, len(data["rows"]))  # a page that fits the frame
    assert [r["name"] for r in rows] == [r["name"] for r in data["rows"][:len(rows)]]
    first = data["rows"][0]
    assert rows[0]["calls"] == f"{first['calls']:,}"
    assert_duration(rows[0]["device_self"], first["device_self_us"])
    assert_duration(rows[0]["host_total"], first["host_total_us"])
    assert frame.inner_text("[data-testid=table-count]") == f"{len(data['rows'])} rows"
    title = frame.get_attribute("[data-testid=operator-table] td[data-col=device_self]", "title") or ""
    assert "sum of the durations" in title.lower()

    # Device time note; "Device wall" only when some operator's GPU work overlapped itself.
    note = frame.inner_text("[data-testid=device-time-note]")
    assert "Device time is the sum of the durations of the GPU work each operator launched." in note
    totals = data["totals"]
    differ = abs(totals["device_sum_us"] - totals["device_busy_us"]) > 0.01 * totals["device_sum_us"]
    assert (frame.query_selector("[data-testid=device-time-overlap]") is not None) == differ
    wall = any(abs(r["device_total_wall_us"] - r["device_total_us"]) > 1e-6 * max(1, r["device_total_us"])
               for r in data["rows"])
    assert ("device_wall" in header_keys(frame, "operator-table")) == wall

    # Search: substring, case-insensitive, over the name.
    set_search(frame, "search-name", "MM")
    expected = [r["name"] for r in data["rows"] if "mm" in r["name"].lower()]
    frame.wait_for_function("n => document.querySelector('[data-testid=table-count]').innerText.startsWith(n + ' of')",
                            arg=str(len(expected)))
    shown = [r["name"] for r in table_rows(frame, "operator-table")]
    assert shown == expected[:len(shown)] and len(shown) >= min(15, len(expected))

    # Sort by calls: descending first, then ascending.
    set_search(frame, "search-name", "")
    frame.click("[data-testid=sort-calls]")
    calls = [int(r["_value:calls"]) for r in table_rows(frame, "operator-table")]
    assert calls == sorted(calls, reverse=True) and calls[0] == max(r["calls"] for r in data["rows"])
    frame.click("[data-testid=sort-calls]")
    assert frame.get_attribute("[data-testid=operator-table] th[data-col=calls]", "aria-sort") == "ascending"
    calls = [int(r["_value:calls"]) for r in table_rows(frame, "operator-table")]
    assert calls == sorted(calls) and calls[0] == min(r["calls"] for r in data["rows"])

    # Paging: the first page holds what fits the frame.
    per_page = len(table_rows(frame, "operator-table"))
    assert per_page >= 15
    frame.click("[data-testid=table-next]")
    assert frame.inner_text("[data-testid=table-range]").startswith(f"{per_page + 1}–{2 * per_page} of")
    frame.select_option("[data-testid=table-page-size]", "50")
    assert len(table_rows(frame, "operator-table")) == 50

    # Group by name + input shape: the shapes column, as the API has it.
    shapes = api(tb_samples, "operators", TRANSFORMER, group_by="name_shape")
    assert shapes["has_input_shapes"] is True
    frame.select_option("[data-testid=operator-group-by]", "name_shape")
    frame.wait_for_selector("[data-testid=operator-table] th[data-col=input_shape]")
    shown = table_rows(frame, "operator-table")
    api_shapes = {(r["name"], r["input_shape"]) for r in shapes["rows"]}
    assert shown and all((r["name"], r["input_shape"]) in api_shapes for r in shown)
    assert any(r["input_shape"].startswith("[[") for r in shown)


def test_operator_call_stacks_and_copied_frame(page: Any, tb_samples: TensorBoard) -> None:
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=tb_samples.url)
    stacks = api(tb_samples, "operators", TRANSFORMER, group_by="name_stack", name="aten::mm")["rows"]
    assert stacks
    frame = open_view(page, tb_samples, TRANSFORMER, "Operator")
    set_search(frame, "search-name", "aten::mm")
    row_named(frame, "operator-table", "aten::mm").locator("[data-testid=row-expand]").click()
    frame.wait_for_selector("[data-testid=call-stack]")
    entries = frame.query_selector_all("[data-testid=call-stack]")
    assert len(entries) == len(stacks)
    frames = entries[0].query_selector_all("[data-testid=frame]")
    assert len(frames) >= 2
    # The user's own frame first (the innermost frame outside torch and the standard library): the function
    # name prominently, path:line beside it.
    innermost = next(f for f in stacks[0]["call_stack"].split(";") if f.startswith("transformer_bf16.py("))
    m = re.fullmatch(r"(.*)\((\d+)\): (.*)", innermost)
    assert m
    first = frames[0]
    assert first.query_selector(".ptp-frame-func").inner_text() == m.group(3)
    assert first.query_selector(".ptp-frame-loc").inner_text() == f"{m.group(1)}:{m.group(2)}"

    # Outside VS Code a click copies path:line and says so.
    first.click()
    toast = frame.wait_for_selector("[data-testid=toast].ptp-toast-shown")
    assert toast.inner_text() == f"Copied {m.group(1)}:{m.group(2)}"
    assert frame.evaluate("() => navigator.clipboard.readText()") == f"{m.group(1)}:{m.group(2)}"

    # Grouped by call stack: each row shows its frames.
    frame.select_option("[data-testid=operator-group-by]", "name_stack")
    frame.wait_for_selector("[data-testid=operator-table] td[data-col=call_stack] [data-testid=frame]")
    assert frame.query_selector("[data-testid=operator-table] [data-testid=row-expand]") is None


# --------------------------------------------------------------------------------------------- CSV export




def test_csv_download_is_the_shown_rows(page: Any, tb_samples: TensorBoard, tmp_path: Path) -> None:
    frame = open_view(page, tb_samples, TRANSFORMER, "Operator")
    frame.wait_for_selector("[data-testid=operator-table] tr[data-testid=row]")
    set_search(frame, "search-name", "backward")
    frame.click("[data-testid=sort-host_total]")  # descending host total
    frame.select_option("[data-testid=table-page-size]", "100")
    shown = table_rows(frame, "operator-table")
    assert 10 < len(shown) < 100
    with page.expect_download() as info:
        frame.click("[data-testid=csv-download]")
    download = info.value
    assert download.suggested_filename == "operators_transformer_bf16_vm_699_span1_name.csv"
    target = tmp_path / download.suggested_filename
    download.save_as(str(target))
    rows = read_csv(target.read_text(encoding="utf-8"))
    assert [r["Name"] for r in rows] == [r["name"] for r in shown]
    assert list(rows[0])[:4] == ["Name", "Calls", "Device self (us)", "Device total (us)"]
    for csv_row, row in zip(rows, shown, strict=True):
        assert csv_row["Calls"] == row["_value:calls"]
        assert_duration(row["host_total"], float(csv_row["Host total (us)"]))
        assert_duration(row["device_self"], float(csv_row["Device self (us)"]))
    totals = [float(r["Host total (us)"]) for r in rows]
    assert totals == sorted(totals, reverse=True)
    assert no_overlay(frame)


def no_overlay(frame: Any) -> bool:
    return frame.query_selector("[data-testid=csv-overlay]") is None


@pytest.mark.fresh_page  # an init script stays with a page: not on the shell page the next test gets
def test_csv_fallbacks_when_download_and_clipboard_fail(page: Any, tb_samples: TensorBoard) -> None:
    # The download cannot start (as in a sandboxed frame that forbids Blob URLs): the CSV appears in the page.
    page.add_init_script("URL.createObjectURL = () => { throw new Error('blocked by the test'); };")
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=tb_samples.url)
    frame = open_view(page, tb_samples, TRANSFORMER, "Kernel")
    frame.wait_for_selector("[data-testid=kernel-table] tr[data-testid=row]")
    set_search(frame, "search-name", "nvjet")
    shown = table_rows(frame, "kernel-table")
    frame.click("[data-testid=csv-download]")
    overlay = frame.wait_for_selector("[data-testid=csv-overlay]")
    assert "blocked by the test" in overlay.inner_text()
    text = frame.eval_on_selector("[data-testid=csv-overlay] [data-testid=overlay-text]", "t => t.value")
    rows = read_csv(text)
    assert [r["Name"] for r in rows] == [r["name"] for r in shown]
    assert all("nvjet" in r["Name"] for r in rows)
    frame.click("[data-testid=overlay-close]")
    assert no_overlay(frame)

    # Copy CSV works: a toast, and the clipboard holds the same text.
    frame.click("[data-testid=csv-copy]")
    toast = frame.wait_for_selector("[data-testid=toast].ptp-toast-shown")
    assert toast.inner_text() == f"Copied {len(rows)} rows as CSV"
    copied = frame.evaluate("() => navigator.clipboard.readText()")
    assert copied.endswith("\r\n") and copied.replace("\r\n", "\n") == text  # a textarea shows CRLF as LF

    # Copying is blocked too: the overlay again, never silence.
    frame.evaluate("""() => {
        navigator.clipboard.writeText = () => Promise.reject(new Error('denied'));
        document.execCommand = () => false;
    }""")
    frame.click("[data-testid=csv-copy]")
    overlay = frame.wait_for_selector("[data-testid=csv-overlay]")
    assert "blocked" in overlay.inner_text()
    assert frame.eval_on_selector("[data-testid=overlay-text]", "t => t.value") == text


# --------------------------------------------------------------------------------------------- Kernel


def test_kernel_page(page: Any, tb_samples: TensorBoard, console: ConsoleLog) -> None:
    data = api(tb_samples, "kernels", TRANSFORMER)
    assert data["tensor_core_ratio"] and data["tensor_core_ratio"] > 0
    frame = open_view(page, tb_samples, TRANSFORMER, "Kernel")
    wait_charts(frame, "pie-kernels", "pie-tensor-cores")
    assert_percent(frame.inner_text("[data-testid=tensor-core-ratio]"), data["tensor_core_ratio"])
    tc = frame.evaluate("() => document.querySelector('[data-testid=pie-tensor-cores]').data[0].values")
    assert tc[0] / (tc[0] + tc[1]) == pytest.approx(data["tensor_core_ratio"], rel=1e-9)

    # Kernel names are shown literally (plotly parses HTML-ish markup; "<…>" must survive), short in the legend:
    # "void at::native::reduce_kernel<128, 4, …>(…)" → "reduce_kernel<…>" (the full name in the hover and table).
    legend = legend_texts(frame, "pie-kernels")
    top = data["rows"][0]["name"]
    assert top.startswith("void at::native::reduce_kernel<") and legend[0] == "reduce_kernel<…>", legend
    assert frame.query_selector("[data-testid=pie-kernels] img, [data-testid=pie-kernels] a") is None
    pie = frame.evaluate("() => document.querySelector('[data-testid=pie-kernels]').data[0].values")
    assert sum(pie) == pytest.approx(sum(r["total_us"] for r in data["rows"]), rel=1e-9)

    rows = table_rows(frame, "kernel-table")
    assert [r["name"] for r in rows] == [r["name"] for r in data["rows"][:10]]
    assert_duration(rows[0]["total"], data["rows"][0]["total_us"])
    assert_duration(rows[0]["mean"], data["rows"][0]["mean_us"])
    assert rows[0]["tensor_cores"] == ("yes" if data["rows"][0]["tensor_cores"] else "no")
    bps = frame.get_attribute("[data-testid=kernel-table] th[data-col=blocks_per_sm]", "title") or ""
    assert "grid size / SMs" in bps and "duration-weighted" in bps
    assert "occupancy" in (frame.get_attribute("[data-testid=kernel-table] th[data-col=achieved_occupancy]", "title") or "")
    assert frame.query_selector("[data-testid=search-operator]") is None

    # By name + operator + launch configuration: grid/block and the other launch columns, an operator search.
    by_op = api(tb_samples, "kernels", TRANSFORMER, group_by="name_op")
    frame.select_option("[data-testid=kernel-group-by]", "name_op")
    frame.wait_for_selector("[data-testid=kernel-table] th[data-col=grid]")
    cols = header_keys(frame, "kernel-table")
    for key in ("operator", "grid", "block", "registers_per_thread", "shared_memory", "op_tc_eligible"):
        assert key in cols
    rows = table_rows(frame, "kernel-table")
    assert rows[0]["grid"] == by_op["rows"][0]["grid"] and rows[0]["block"] == by_op["rows"][0]["block"]
    assert re.fullmatch(r"\[\d+, \d+, \d+\]", rows[0]["grid"])
    set_search(frame, "search-operator", "aten::mm")
    expected = [r for r in by_op["rows"] if "aten::mm" in r["operator"].lower()]
    frame.wait_for_function("n => document.querySelector('[data-testid=kernel-table] [data-testid=table-count]')"
                            ".innerText.startsWith(n + ' of')", arg=str(len(expected)))
    shown = table_rows(frame, "kernel-table")
    assert shown and all(r["operator"] == "aten::mm" for r in shown)
    set_search(frame, "search-name", "nvjet")
    assert all("nvjet" in r["name"] for r in table_rows(frame, "kernel-table"))


def test_trace_strings_in_tables_are_text(page: Any, tb_samples: TensorBoard) -> None:
    """Operator and kernel names from a trace never become markup, in tables or in plotly."""
    evil = '<img src=x onerror="window.__pwned=1">'
    rows = [{"name": evil, "calls": 1, "total_us": 5.0, "mean_us": 5.0, "min_us": 5.0, "max_us": 5.0,
             "tensor_cores": False, "blocks_per_sm": None, "achieved_occupancy": None, "streams": [7]}]
    body = json.dumps({"group_by": "name", "tensor_core_ratio": 0.0, "rows": rows})
    page.route(f"**/data/plugin/{PLUGIN}/kernels?*",
               lambda route: route.fulfill(status=200, content_type="application/json", body=body))
    frame = open_view(page, tb_samples, TRANSFORMER, "Kernel")
    wait_charts(frame, "pie-kernels")
    assert frame.inner_text("[data-testid=kernel-table] td[data-col=name]") == evil
    assert legend_texts(frame, "pie-kernels") == [evil]
    assert frame.query_selector("img") is None
    assert frame.evaluate("() => window.__pwned === undefined")


@pytest.mark.fresh_page  # an emulated colour scheme stays with a page: not on the shell page the next test gets
def test_charts_follow_theme_and_hidden_tab(page: Any, tb_samples: TensorBoard) -> None:
    page.emulate_media(color_scheme="light")
    frame = open_view(page, tb_samples, RESNET, "Overview")
    wait_charts(frame, "step-chart", "breakdown-pie")
    font = "() => document.querySelector('[data-testid=step-chart]')._fullLayout.font.color"
    light = frame.evaluate(font)
    page.evaluate("() => document.body.classList.add('dark-mode')")  # TensorBoard's theme toggle
    frame.wait_for_function(f"() => ({font})() !== {json.dumps(light)}")
    assert frame.evaluate(font) != light

    # TensorBoard hides inactive tabs by shrinking the iframe to 0 px: the charts come back full width.
    width = "() => document.querySelector('[data-testid=step-chart] .main-svg').getBoundingClientRect().width"
    before = frame.evaluate(width)
    page.eval_on_selector(PLUGIN_IFRAME, "f => { f.style.width = '900px'; }")  # narrower: the charts follow
    frame.wait_for_function(f"() => ({width})() < {before} - 200")
    page.eval_on_selector(PLUGIN_IFRAME, "f => Object.assign(f.style, {maxHeight: '0px', visibility: 'hidden'})")
    frame.wait_for_function("() => window.innerHeight === 0")
    page.eval_on_selector(PLUGIN_IFRAME, "f => Object.assign(f.style, {maxHeight: '', visibility: '', width: ''})")
    frame.wait_for_function(f"() => Math.abs(({width})() - {before}) < 2")


# --------------------------------------------------------------------------------------------- screenshots


def test_operator_and_kernel_rows_link_to_their_occurrences_in_the_trace(page: Any, tb_samples: TensorBoard) -> None:
    frame = open_view(page, tb_samples, TRANSFORMER, "Operator")
    row_named(frame, "operator-table", "aten::mm").locator("[data-testid=find-in-trace]").click()
    frame.wait_for_selector("[data-testid=tab-Trace][aria-selected=true]")
    frame.wait_for_function("() => document.querySelector('[data-testid=trace-search]')?.value === '\"aten::mm\"'")
    expected = api(tb_samples, "trace/search", TRANSFORMER, q="aten::mm", match="exact", limit="1")["total"]
    frame.wait_for_function(
        f"() => (document.querySelector('[data-testid=trace-search-count]')?.textContent || '').includes('{expected}')")
    frame = open_view(page, tb_samples, TRANSFORMER, "Kernel")
    name = api(tb_samples, "kernels", TRANSFORMER)["rows"][0]["name"]
    frame.locator("[data-testid=find-in-trace]").first.click()
    frame.wait_for_selector("[data-testid=tab-Trace][aria-selected=true]")
    frame.wait_for_function("name => document.querySelector('[data-testid=trace-search]')?.value === name", arg=f'"{name}"')
