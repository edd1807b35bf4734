"""The Memory and Module pages inside the real TensorBoard, checked against the plugin's JSON routes."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from tests.browser.conftest import (
    PLUGIN,
    TensorBoard,
    open_plugin,
    read_csv,
    table_rows,
)

pytestmark = pytest.mark.browser

TRANSFORMER = ("transformer_bf16", "vm_699")
LIGHTNING = ("lightning_mlp", "vm_1144")
V100 = ("v100_resnet50", "worker0")
VIEW = "[data-testid=memory-view]"
EVENTS = "memory-events-table"
STATS = "memory-stats-table"


# --------------------------------------------------------------------------------------------- helpers


def api(tb: TensorBoard, route: str, run: tuple[str, str], **params: Any) -> Any:
    query = urlencode({"run": run[0], "worker": run[1], "span": "1", **params})
    return tb.get_json(f"{route}?{query}")


def open_view(page: Any, tb: TensorBoard, run: tuple[str, str], view: str) -> Any:
    p = f"p.{PLUGIN}"
    frame = open_plugin(page, tb, f"&{p}.run={run[0]}&{p}.worker={run[1]}&{p}.span=1&{p}.view={view}")
    frame.wait_for_selector(f"[data-testid=tab-{view}][aria-selected=true]")
    return frame


def js_round(value: float, digits: int) -> str:
    """toFixed / Intl rounding (half away from zero on the exact binary value)."""
    return str(Decimal(value).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP))


def fmt_bytes(n: int) -> str:
    """The frontend's formatBytes."""
    if n < 1024:
        return f"{n} B"
    units = ["KiB", "MiB", "GiB", "TiB", "PiB"]
    value, unit = n / 1024, 0
    while value >= 1024 and unit < len(units) - 1:
        value /= 1024
        unit += 1
    digits = 0 if value >= 100 else 1 if value >= 10 else 2
    return f"{js_round(value, digits)} {units[unit]}"


def fmt_ms(rel_us: float) -> str:
    text = js_round(rel_us / 1000, 2)
    whole, frac = text.split(".")
    return f"{int(whole):,}.{frac} ms"


def curve_origin(curve: dict[str, Any]) -> float:
    """Time zero of the page: the trace start when the API gives it, else the first memory sample."""
    if curve.get("start_us") is not None:
        return float(curve["start_us"])
    return float(min(d["points"][0][0] for d in curve["devices"].values() if d["points"]))


def wait_memory_settled(frame: Any) -> dict[str, str]:
    """The page's state once no range and no page of events is loading (the events table asks the server)."""
    frame.wait_for_function(f"() => document.querySelector('{VIEW}')?.dataset.loading === 'false'")
    wait_events(frame)
    state: dict[str, str] = frame.eval_on_selector(VIEW, "el => ({...el.dataset})")
    return state


def wait_events(frame: Any) -> None:
    """Until the events table shows the page it asked for (a page with no events card has none to wait for)."""
    frame.wait_for_function(f"() => (t => !t || t.dataset.loading === 'false')(document.querySelector('[data-testid={EVENTS}]'))")


def table_count(frame: Any, testid: str) -> str:
    return str(frame.inner_text(f"[data-testid={testid}] [data-testid=table-count]"))




def relayout(frame: Any, update: dict[str, Any]) -> None:
    """Plotly.relayout on the memory chart, with the page's own plotly instance."""
    frame.evaluate(
        """async update => {
            const m = await import('./index.js');
            const Plotly = await m.loadPlotly();
            await Plotly.relayout(document.querySelector('[data-testid=memory-curve]'), update);
        }""",
        update,
    )


# --------------------------------------------------------------------------------------------- Memory


def test_memory_curve_peak_and_range_selection(page: Any, tb_memory_module: TensorBoard) -> None:
    tb = tb_memory_module
    curve = api(tb, "memory/curve", TRANSFORMER)
    full = api(tb, "memory/events", TRANSFORMER)["rows"]
    full_stats = api(tb, "memory/stats", TRANSFORMER)["rows"]
    assert curve["reason"] is None and set(curve["devices"]) == {"CPU", "GPU0"}
    gpu = curve["devices"]["GPU0"]
    origin = curve_origin(curve)

    frame = open_view(page, tb, TRANSFORMER, "Memory")
    frame.wait_for_selector("[data-testid=memory-curve] .main-svg")
    state = wait_memory_settled(frame)
    assert frame.input_value("[data-testid=memory-device]") == "GPU0"  # the GPU is shown first
    assert frame.eval_on_selector_all("[data-testid=memory-device] option", "os => os.map(o => o.value)") == ["CPU", "GPU0"]

    # The peak, labelled on the page and on the chart, is the API's peak.
    label = f"Peak {fmt_bytes(gpu['peak_allocated_bytes'])} at {fmt_ms(gpu['peak_time_us'] - origin)}"
    assert frame.inner_text("[data-testid=memory-peak]") == label
    assert frame.get_attribute("[data-testid=memory-peak]", "data-bytes") == str(gpu["peak_allocated_bytes"])
    annotations = frame.eval_on_selector_all("[data-testid=memory-curve] .annotation-text", "els => els.map(e => e.textContent)")
    assert label in annotations
    # A step plot of allocated and reserved memory, x in ms from the start, y in MiB.
    layout = frame.evaluate("""() => {
        const gd = document.querySelector('[data-testid=memory-curve]');
        return {shapes: gd.data.map(t => t.line && t.line.shape), names: gd.data.map(t => t.name),
                x: gd.layout.xaxis.title.text, y: gd.layout.yaxis.title.text, x0: gd.data[0].x[0], n: gd.data[0].x.length};
    }""")
    assert layout["names"][:2] == ["Allocated", "Reserved"] and layout["shapes"][:2] == ["hv", "hv"]
    assert layout["x"] == "Time (ms)" and layout["y"] == "Memory (MiB)"
    assert layout["n"] == len(gpu["points"])
    assert layout["x0"] == pytest.approx((gpu["points"][0][0] - origin) / 1000)

    # The events table lists the GPU's pairs of the whole trace; the statistics the GPU's rows.
    gpu_events = [r for r in full if r["device"] == "GPU0"]
    assert state["events"] == str(len(gpu_events)) and state["startUs"] == ""
    assert table_count(frame, EVENTS) == f"{len(gpu_events):,} rows"
    assert state["stats"] == str(sum(r["device"] == "GPU0" for r in full_stats))
    assert frame.is_disabled("[data-testid=memory-reset]")

    # Select 10-20 ms on the chart (what a drag does): both tables are re-queried for that range.
    relayout(frame, {"xaxis.range": [10, 20]})
    frame.wait_for_function(f"() => document.querySelector('{VIEW}').dataset.startUs !== ''")
    state = wait_memory_settled(frame)
    start, end = float(state["startUs"]), float(state["endUs"])
    assert start == pytest.approx(origin + 10_000, abs=1e-3) and end == pytest.approx(origin + 20_000, abs=1e-3)
    ranged = api(tb, "memory/events", TRANSFORMER, start_us=state["startUs"], end_us=state["endUs"])["rows"]
    ranged_gpu = [r for r in ranged if r["device"] == "GPU0"]
    assert 0 < len(ranged_gpu) < len(gpu_events)
    assert state["events"] == str(len(ranged_gpu))
    assert table_count(frame, EVENTS) == f"{len(ranged_gpu):,} rows"
    ranged_stats = api(tb, "memory/stats", TRANSFORMER, start_us=state["startUs"], end_us=state["endUs"])["rows"]
    assert state["stats"] == str(sum(r["device"] == "GPU0" for r in ranged_stats))
    assert frame.inner_text("[data-testid=memory-range]") == "Range 10.00 ms – 20.00 ms"
    assert frame.inner_text("[data-testid=memory-events-range]") == "Range: 10.00 ms – 20.00 ms"
    # every listed pair touches the range
    for r in ranged_gpu:
        assert (r["alloc_us"] is None or r["alloc_us"] < end) and (r["free_us"] is None or r["free_us"] >= start)

    # Reset: the whole trace again, in the tables and on the chart.
    frame.click("[data-testid=memory-reset]")
    state = wait_memory_settled(frame)
    assert state["startUs"] == "" and state["events"] == str(len(gpu_events))
    assert table_count(frame, EVENTS) == f"{len(gpu_events):,} rows"
    assert frame.evaluate("() => document.querySelector('[data-testid=memory-curve]').layout.xaxis.autorange") is True

    # A real mouse drag across the plot selects a range too; a double-click goes back.
    box = frame.query_selector("[data-testid=memory-curve] .nsewdrag").bounding_box()
    y = box["y"] + box["height"] / 2
    page.mouse.move(box["x"] + box["width"] * 0.3, y)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.45, y, steps=8)
    page.mouse.move(box["x"] + box["width"] * 0.6, y, steps=8)
    page.mouse.up()
    frame.wait_for_function(f"() => document.querySelector('{VIEW}').dataset.startUs !== ''")
    state = wait_memory_settled(frame)
    ranged = api(tb, "memory/events", TRANSFORMER, start_us=state["startUs"], end_us=state["endUs"])["rows"]
    assert state["events"] == str(sum(r["device"] == "GPU0" for r in ranged))
    assert float(state["startUs"]) > origin
    page.mouse.dblclick(box["x"] + box["width"] * 0.5, y)
    frame.wait_for_function(f"() => document.querySelector('{VIEW}').dataset.startUs === ''")
    state = wait_memory_settled(frame)
    assert state["events"] == str(len(gpu_events))

    # The CPU's curve and rows when the device changes.
    frame.select_option("[data-testid=memory-device]", "CPU")
    cpu = curve["devices"]["CPU"]
    frame.wait_for_function(
        "b => document.querySelector('[data-testid=memory-peak]').dataset.bytes === b", arg=str(cpu["peak_allocated_bytes"])
    )
    state = wait_memory_settled(frame)
    assert state["events"] == str(sum(r["device"] == "CPU" for r in full))
    assert frame.evaluate("() => document.querySelector('[data-testid=memory-curve]').data.map(t => t.name)") == [
        "Allocated",
        "Peak",
    ]  # the CPU allocator reserves nothing: no reserved line


def test_memory_event_row_marks_the_curve(page: Any, tb_memory_module: TensorBoard) -> None:
    tb = tb_memory_module
    curve = api(tb, "memory/curve", TRANSFORMER)
    origin = curve_origin(curve)
    frame = open_view(page, tb, TRANSFORMER, "Memory")
    frame.wait_for_selector("[data-testid=memory-curve] .main-svg")
    wait_memory_settled(frame)
    rows = table_rows(frame, EVENTS)
    first = rows[0]
    assert first["alloc"] == fmt_ms(float(first["_value:alloc"]))

    frame.click(f"[data-testid={EVENTS}] tbody tr[data-testid=row] >> nth=0")
    frame.wait_for_selector(f"[data-testid={EVENTS}] [data-testid=memory-marked]")
    marks = frame.evaluate("""() => {
        const gd = document.querySelector('[data-testid=memory-curve]');
        return {lines: gd.layout.shapes.filter(s => s.type === 'line').map(s => s.x0),
                texts: gd.layout.annotations.map(a => a.text)};
    }""")
    alloc_ms = float(first["_value:alloc"]) / 1000
    free_ms = float(first["_value:free"]) / 1000
    assert marks["lines"] == [pytest.approx(alloc_ms), pytest.approx(free_ms)]
    label = next(t for t in marks["texts"] if "→" in t)
    assert f"alloc {first['alloc']} → free {first['free']}" in label and first["size"] in label
    assert frame.locator("[data-testid=memory-curve] .shapelayer path").count() >= 3  # band + two edges
    assert origin > 0

    # A click on the marked row clears the mark.
    frame.click(f"[data-testid={EVENTS}] tbody tr[data-testid=row] >> nth=0")
    frame.wait_for_function("() => !document.querySelector('[data-testid=memory-marked]')")
    assert frame.evaluate("() => document.querySelector('[data-testid=memory-curve]').layout.shapes.length") == 0


def test_memory_search_sort_and_size_filter(page: Any, tb_memory_module: TensorBoard) -> None:
    tb = tb_memory_module
    gpu = [r for r in api(tb, "memory/events", TRANSFORMER)["rows"] if r["device"] == "GPU0"]
    frame = open_view(page, tb, TRANSFORMER, "Memory")
    frame.wait_for_selector(f"[data-testid={EVENTS}] tr[data-testid=row]")
    wait_memory_settled(frame)
    table = f"[data-testid={EVENTS}]"

    # Default: by allocation time.
    allocs = [float(r["_value:alloc"]) for r in table_rows(frame, EVENTS)]
    assert allocs == sorted(allocs)

    # Search by operator name (on the server, once the typing pauses).
    frame.fill(f"{table} [data-testid=search-name]", "RESIZE_")
    matching = [r for r in gpu if "resize_" in r["name"].lower()]
    assert matching
    count = f"{len(matching):,} of {len(gpu):,} rows match"
    frame.wait_for_function(f"c => document.querySelector('{table} [data-testid=table-count]').textContent === c", arg=count)
    wait_events(frame)
    shown = table_rows(frame, EVENTS)
    assert len(shown) == min(20, len(matching)) and all("resize_" in r["name"].lower() for r in shown)
    frame.fill(f"{table} [data-testid=search-name]", "")
    frame.wait_for_function(f"c => document.querySelector('{table} [data-testid=table-count]').textContent === c",
                            arg=f"{len(gpu):,} rows")
    wait_events(frame)

    # Sort by size (the server sorts every row, not the page): largest first, then smallest first.
    by_size = sorted(gpu, key=lambda r: -r["size_bytes"])  # ties in allocation order, as the server keeps them
    frame.click(f"{table} [data-testid=sort-size]")
    wait_events(frame)
    sizes = [int(r["_value:size"]) for r in table_rows(frame, EVENTS)]
    assert sizes == [r["size_bytes"] for r in by_size[:20]] and sizes[0] == max(r["size_bytes"] for r in gpu)
    assert table_rows(frame, EVENTS)[0]["size"] == fmt_bytes(sizes[0])
    frame.click(f"{table} [data-testid=table-next]")  # the next page: the next 20 of every row, none repeated
    wait_events(frame)
    assert frame.inner_text(f"{table} [data-testid=table-range]") == f"21–40 of {len(gpu):,}"
    assert [int(r["_value:size"]) for r in table_rows(frame, EVENTS)] == [r["size_bytes"] for r in by_size[20:40]]
    frame.click(f"{table} [data-testid=sort-size]")
    wait_events(frame)
    assert frame.inner_text(f"{table} [data-testid=table-range]") == f"1–20 of {len(gpu):,}"  # a sort starts over
    sizes = [int(r["_value:size"]) for r in table_rows(frame, EVENTS)]
    assert sizes[0] == min(r["size_bytes"] for r in gpu) and sizes == sorted(sizes)

    # Minimum size: 1 MiB.
    frame.select_option("[data-testid=memory-min-size-unit]", label="MiB")
    frame.fill("[data-testid=memory-min-size]", "1")
    big = [r for r in gpu if r["size_bytes"] >= 1024 * 1024]
    frame.wait_for_function(f"n => document.querySelector('{VIEW}').dataset.events === String(n)", arg=len(big))
    wait_events(frame)
    assert table_count(frame, EVENTS) == f"{len(big):,} of {len(gpu):,} rows match"  # the server's count
    assert min(int(r["_value:size"]) for r in table_rows(frame, EVENTS)) >= 1024 * 1024
    frame.fill("[data-testid=memory-min-size]", "0")
    frame.wait_for_function(f"n => document.querySelector('{VIEW}').dataset.events === String(n)", arg=len(gpu))

    wait_events(frame)

    # Paging: the next page holds other rows.
    first_page = table_rows(frame, EVENTS)
    assert len(first_page) == 20
    frame.click(f"{table} [data-testid=table-next]")
    wait_events(frame)
    assert frame.inner_text(f"{table} [data-testid=table-range]") == f"21–40 of {len(gpu):,}"
    second_page = table_rows(frame, EVENTS)
    assert len(second_page) == 20 and not {r["_value:alloc"] for r in first_page} & {r["_value:alloc"] for r in second_page}

    # Statistics: search, sort, and the explanations on the headers.
    stats = f"[data-testid={STATS}]"
    gpu_stats = [r for r in api(tb, "memory/stats", TRANSFORMER)["rows"] if r["device"] == "GPU0"]
    first = table_rows(frame, STATS)[0]
    top = max(gpu_stats, key=lambda r: r["allocation_size_bytes"])
    assert int(first["_value:allocation_size"]) == top["allocation_size_bytes"]
    frame.click(f"{stats} [data-testid=sort-self_size_increase]")
    values = [int(r["_value:self_size_increase"]) for r in table_rows(frame, STATS)]
    assert values == sorted(values, reverse=True) and values[0] == max(r["self_size_increase_bytes"] for r in gpu_stats)
    negative = [r for r in gpu_stats if r["size_increase_bytes"] < 0]
    if negative:
        frame.fill(f"{stats} [data-testid=search-name]", negative[0]["name"])
        row = next(r for r in table_rows(frame, STATS) if r["name"] == negative[0]["name"])
        assert row["size_increase"] == "−" + fmt_bytes(-negative[0]["size_increase_bytes"])
    helps = frame.eval_on_selector_all(f"{stats} thead th[data-col]", "ths => Object.fromEntries(ths.map(t => [t.dataset.col, t.title]))")
    assert "not in the operators it calls" in helps["self_size_increase"]
    assert "minus bytes released" in helps["size_increase"]
    assert "self" in helps["self_allocation_count"].lower()
    assert all(helps[k] for k in ("calls", "allocation_count", "allocation_size", "self_allocation_size"))


def test_memory_csv_export_and_fallback(page: Any, tb_memory_module: TensorBoard, tmp_path: Path) -> None:
    tb = tb_memory_module
    gpu = [r for r in api(tb, "memory/events", TRANSFORMER)["rows"] if r["device"] == "GPU0"]
    asked: list[str] = []  # the page never asks for every event: each request names a page
    page.on("request", lambda r: asked.append(r.url) if "/memory/events" in r.url else None)
    frame = open_view(page, tb, TRANSFORMER, "Memory")
    frame.wait_for_selector(f"[data-testid={EVENTS}] tr[data-testid=row]")
    wait_memory_settled(frame)
    table = f"[data-testid={EVENTS}]"
    frame.select_option("[data-testid=memory-min-size-unit]", label="MiB")
    frame.fill("[data-testid=memory-min-size]", "4")
    big = sorted((r for r in gpu if r["size_bytes"] >= 4 * 1024 * 1024), key=lambda r: r["alloc_us"])
    frame.wait_for_function(f"n => document.querySelector('{VIEW}').dataset.events === String(n)", arg=len(big))
    wait_events(frame)
    assert len(big) > 20  # more than one page: the export has every matching row

    with page.expect_download() as info:
        frame.click(f"{table} [data-testid=csv-download]")
    download = info.value
    assert download.suggested_filename == "memory_events_transformer_bf16_vm_699_span1_GPU0.csv"
    target = tmp_path / download.suggested_filename
    download.save_as(str(target))
    text = target.read_text(encoding="utf-8")
    rows = read_csv(text)
    assert list(rows[0]) == [
        "Operator",
        "Size (bytes)",
        "Allocation time (us from trace start)",
        "Release time (us from trace start)",
        "Lifetime (us)",
    ]
    assert len(rows) == len(big)
    assert asked and all("limit=" in url for url in asked)
    assert any("limit=10000" in url and "min_bytes=4194304" in url for url in asked)  # the export's pages
    assert [int(r["Size (bytes)"]) for r in rows] == [r["size_bytes"] for r in big]
    assert [r["Operator"] for r in rows] == [r["name"] for r in big]
    shown = table_rows(frame, EVENTS)
    assert [r["name"] for r in shown] == [r["Operator"] for r in rows[: len(shown)]]
    for csv_row, row in zip(rows, shown, strict=False):
        assert float(csv_row["Allocation time (us from trace start)"]) == pytest.approx(float(row["_value:alloc"]))

    # Downloads blocked (VS Code's sandboxed webview): the CSV appears in the page instead.
    frame.evaluate("""() => {
        window.__createObjectURL = URL.createObjectURL;
        URL.createObjectURL = () => { throw new Error('blocked by the test'); };
    }""")
    frame.click(f"{table} [data-testid=csv-download]")
    overlay = frame.wait_for_selector("[data-testid=csv-overlay]")
    assert "blocked by the test" in overlay.inner_text()
    shown_text = frame.eval_on_selector("[data-testid=csv-overlay] [data-testid=overlay-text]", "t => t.value")
    assert shown_text.replace("\r\n", "\n") == text.replace("\r\n", "\n")
    frame.click("[data-testid=overlay-close]")
    assert frame.query_selector("[data-testid=csv-overlay]") is None
    frame.evaluate("() => { URL.createObjectURL = window.__createObjectURL; }")

    # The statistics table exports too.
    with page.expect_download() as info:
        frame.click(f"[data-testid={STATS}] [data-testid=csv-download]")
    stats_rows = read_csv(Path(info.value.path()).read_text(encoding="utf-8"))
    gpu_stats = [r for r in api(tb, "memory/stats", TRANSFORMER)["rows"] if r["device"] == "GPU0"]
    assert len(stats_rows) == len(gpu_stats)
    assert list(stats_rows[0])[:3] == ["Operator", "Calls", "Size increase (bytes)"]
    by_name = {r["name"]: r for r in gpu_stats}
    for r in stats_rows:
        assert int(r["Self allocation size (bytes)"]) == by_name[r["Operator"]]["self_allocation_size_bytes"]


def test_memory_old_trace_shows_the_reason_and_statistics(page: Any, tb_memory_module: TensorBoard) -> None:
    tb = tb_memory_module
    curve = api(tb, "memory/curve", V100)
    assert curve["devices"] == {} and curve["reason"]
    stats = api(tb, "memory/stats", V100)["rows"]
    frame = open_view(page, tb, V100, "Memory")
    reason = frame.wait_for_selector("[data-testid=memory-reason]")
    assert reason.inner_text() == curve["reason"]
    assert frame.query_selector("[data-testid=memory-curve] .main-svg") is None
    assert not frame.is_visible("[data-testid=memory-curve]")
    assert frame.query_selector("[data-testid=card-memory-events]") is None  # no addresses, no pairs
    state = wait_memory_settled(frame)
    assert frame.input_value("[data-testid=memory-device]") == "GPU0"
    gpu_stats = [r for r in stats if r["device"] == "GPU0"]
    assert gpu_stats and state["stats"] == str(len(gpu_stats))
    assert table_count(frame, STATS) == f"{len(gpu_stats):,} rows"
    frame.select_option("[data-testid=memory-device]", "CPU")
    frame.wait_for_function(
        f"n => document.querySelector('{VIEW}').dataset.stats === String(n)", arg=sum(r["device"] == "CPU" for r in stats)
    )
    assert frame.inner_text("[data-testid=memory-reason]") == curve["reason"]


# --------------------------------------------------------------------------------------------- Module


def tree_rows(frame: Any, testid: str = "module-tree") -> list[dict[str, str]]:
    rows: list[dict[str, str]] = frame.evaluate(
        """id => [...document.querySelectorAll(`[data-testid=${id}] tr[data-testid=tree-row]`)].map(tr => {
            const out = {name: tr.dataset.name, depth: tr.dataset.depth, key: tr.dataset.key,
                         expanded: tr.getAttribute('aria-expanded')};
            for (const td of tr.querySelectorAll('td[data-col]'))
                if (td.dataset.value !== undefined) out[td.dataset.col] = td.dataset.value;
            return out;
        })""",
        testid,
    )
    return rows


def count_nodes(nodes: list[dict[str, Any]]) -> int:
    return sum(1 + count_nodes(n["children"]) for n in nodes)


def find_node(nodes: list[dict[str, Any]], name: str) -> dict[str, Any]:
    for n in nodes:
        if n["name"] == name:
            return n
        try:
            return find_node(n["children"], name)
        except KeyError:
            pass
    raise KeyError(name)


def test_module_tree_icicle_and_timeline(page: Any, tb_memory_module: TensorBoard) -> None:
    tb = tb_memory_module
    data = api(tb, "modules", TRANSFORMER)
    timeline = api(tb, "modules/timeline", TRANSFORMER)["occurrences"]
    roots = data["modules"]
    encoder = find_node(roots, "TransformerEncoder_0")
    assert [c["name"] for c in encoder["children"]] == [f"TransformerEncoderLayer_{i}" for i in range(4)]

    frame = open_view(page, tb, TRANSFORMER, "Module")
    frame.wait_for_selector("[data-testid=module-tree] tr[data-testid=tree-row]")
    assert frame.inner_text("[data-testid=module-title]") == "Modules"
    total = count_nodes(roots)
    assert frame.inner_text("[data-testid=module-tree] [data-testid=tree-count]") == f"{total} modules"

    # Roots open: the roots and their children, in recorded order, with the API's numbers.
    rows = tree_rows(frame)
    expected = [(r["name"], "0") for r in roots[:1]] + [(c["name"], "1") for c in roots[0]["children"]]
    expected += [(r["name"], "0") for r in roots[1:]]
    assert [(r["name"], r["depth"]) for r in rows] == expected
    top = rows[0]
    assert float(top["device_total"]) == pytest.approx(roots[0]["device_total_us"])
    assert float(top["host_self"]) == pytest.approx(roots[0]["host_self_us"])
    assert int(top["occurrences"]) == roots[0]["occurrences"]

    # Expand TransformerEncoder_0: its four layers appear under it.
    frame.click("[data-testid=module-tree] tr[data-name=TransformerEncoder_0] [data-testid=tree-toggle]")
    rows = tree_rows(frame)
    i = next(k for k, r in enumerate(rows) if r["name"] == "TransformerEncoder_0")
    assert rows[i]["expanded"] == "true"
    assert [(r["name"], r["depth"]) for r in rows[i + 1 : i + 5]] == [(f"TransformerEncoderLayer_{k}", "2") for k in range(4)]
    layer = next(r for r in rows if r["name"] == "TransformerEncoderLayer_2")
    assert float(layer["device_total"]) == pytest.approx(encoder["children"][2]["device_total_us"])

    # Expand all / collapse all.
    frame.click("[data-testid=module-tree] [data-testid=tree-expand-all]")
    assert len(tree_rows(frame)) == total
    frame.click("[data-testid=module-tree] [data-testid=tree-collapse-all]")
    assert [r["name"] for r in tree_rows(frame)] == [r["name"] for r in roots]

    # Sort by device total within siblings (largest first, then smallest, then recorded order).
    frame.click("[data-testid=module-tree] [data-testid=tree-expand-all]")
    frame.click("[data-testid=module-tree] [data-testid=tree-sort-device_total]")
    rows = tree_rows(frame)
    kids = [r for r in rows if r["key"].count("/") == 1 and r["key"].startswith("0/")]
    values = [float(r["device_total"]) for r in kids]
    assert values == sorted(values, reverse=True) and len(kids) == len(roots[0]["children"])
    frame.click("[data-testid=module-tree] [data-testid=tree-sort-device_total]")
    kids = [r for r in tree_rows(frame) if r["key"].count("/") == 1 and r["key"].startswith("0/")]
    assert [float(r["device_total"]) for r in kids] == sorted(values)
    frame.click("[data-testid=module-tree] [data-testid=tree-sort-device_total]")
    kids = [r for r in tree_rows(frame) if r["key"].count("/") == 1 and r["key"].startswith("0/")]
    assert [r["name"] for r in kids] == [c["name"] for c in roots[0]["children"]]

    # Filter by name: matches with their ancestors.
    frame.fill("[data-testid=module-tree] [data-testid=tree-search]", "multiheadattention_1")
    names = [r["name"] for r in tree_rows(frame)]
    assert names == ["TinyEncoderClassifier_0", "TransformerEncoder_0", "TransformerEncoderLayer_1", "MultiheadAttention_1"]
    frame.fill("[data-testid=module-tree] [data-testid=tree-search]", "")

    # Icicle: every module, sized by device time; a click zooms into a module.
    frame.wait_for_selector("[data-testid=module-icicle] .main-svg")
    icicle = frame.evaluate("""() => {
        const t = document.querySelector('[data-testid=module-icicle]').data[0];
        return {type: t.type, n: t.ids.length, labels: t.labels};
    }""")
    assert icicle["type"] == "icicle" and icicle["n"] == total + 1  # + "All modules" (two top-level modules)
    assert "TransformerEncoderLayer_3" in icicle["labels"]
    assert frame.locator("[data-testid=module-icicle] g.slice").count() > 10
    assert frame.get_attribute("[data-testid=module-view]", "data-metric") == "device"
    frame.locator("[data-testid=module-icicle] g.slice", has_text="TransformerEncoder_0").first.click()
    frame.wait_for_function("() => !!document.querySelector('[data-testid=module-icicle]').data[0].level")
    frame.select_option("[data-testid=module-metric]", "host")
    frame.wait_for_function("() => document.querySelector('[data-testid=module-view]').dataset.metric === 'host'")
    frame.wait_for_selector("[data-testid=module-icicle] .main-svg")

    # Timeline: one bar per module call, rows by depth.
    frame.wait_for_selector("[data-testid=module-timeline] .main-svg")
    bars = frame.evaluate("() => document.querySelector('[data-testid=module-timeline]').data[0].x.length")
    assert bars == len(timeline)
    assert frame.locator("[data-testid=module-timeline] g.point").count() == len(timeline)
    assert frame.inner_text("[data-testid=module-timeline-note]").startswith(f"{len(timeline)} calls")


def test_lightning_run(page: Any, tb_memory_module: TensorBoard) -> None:
    tb = tb_memory_module
    data = api(tb, "modules", LIGHTNING)
    assert data["framework"] == "pytorch-lightning" and data["hooks"]
    frame = open_view(page, tb, LIGHTNING, "Module")
    frame.wait_for_selector("[data-testid=lightning-hooks-table] tr[data-testid=row]")
    assert frame.inner_text("[data-testid=module-title]") == "Lightning"
    hooks = sorted(data["hooks"], key=lambda h: -h["host_total_us"])
    assert table_count(frame, "lightning-hooks-table") == f"{len(hooks)} rows"
    shown = table_rows(frame, "lightning-hooks-table")
    assert [r["name"] for r in shown] == [h["name"] for h in hooks[: len(shown)]]
    assert int(shown[0]["_value:calls"]) == hooks[0]["calls"]
    assert float(shown[0]["_value:total"]) == pytest.approx(hooks[0]["host_total_us"])
    # Lightning's own module annotations as a tree.
    assert data["lightning_modules"]
    pl = tree_rows(frame, "lightning-module-tree")
    assert pl[0]["name"] == data["lightning_modules"][0]["name"]
    assert [r["name"] for r in pl[1:]] == [c["name"] for c in data["lightning_modules"][0]["children"]]
    # The nn.Module tree and charts are there as well.
    assert tree_rows(frame)[0]["name"] == data["modules"][0]["name"]
    frame.wait_for_selector("[data-testid=module-icicle] .main-svg")
    frame.wait_for_selector("[data-testid=module-timeline] .main-svg")


def test_module_empty_state(page: Any, tb_memory_module: TensorBoard) -> None:
    page.route(
        f"**/data/plugin/{PLUGIN}/modules?*",
        lambda route: route.fulfill(
            status=200,
            content_type="application/json",
            body='{"framework": null, "modules": [], "lightning_modules": [], "hooks": []}',
        ),
    )
    frame = open_view(page, tb_memory_module, TRANSFORMER, "Module")
    empty = frame.wait_for_selector("[data-testid=module-empty]")
    text = empty.inner_text()
    assert "with_stack=True" in text and "with_modules=True" in text
    assert frame.query_selector("[data-testid=module-icicle]") is None
