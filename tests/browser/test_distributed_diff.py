"""The Distributed and Diff pages inside the real TensorBoard, checked against the plugin's JSON routes.

Distributed: the 2-rank DDP ResNet-50 (rank 1 sleeps 5 ms per step: the straggler), and a synthetic run of
``PTP_DIST_SCALE_RANKS`` ranks (default 16) built from links to the two ranks of the smaller DDP ResNet sample
(``samples/ddp_resnet``, the same job shape at 18,000 events a rank instead of 42,000), for the heat-map at scale.
Diff: the old plugin's sample pair, ResNet-50 with 0 versus 4 DataLoader workers (span 1 each).
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from tests.browser.conftest import (
    ARTIFACTS,
    PLUGIN,
    SAMPLES,
    TensorBoard,
    link_or_copy,
    open_plugin,
    table_rows,
    top_hash,
)

pytestmark = pytest.mark.browser

BASE = ("resnet50_num_workers_0", "worker0", "1")
EXP = ("resnet50_num_workers_4", "worker0", "1")
SCALE_RANKS = int(os.environ.get("PTP_DIST_SCALE_RANKS", "16"))

# rank table column -> /distributed field
RANK_FIELDS = {
    "step_us": "step_us",
    "computation_us": "computation_us",
    "communication_us": "communication_us",
    "overlap_us": "overlap_us",
    "other_us": "other_us",
    "transfer_us": "transfer_us",
    "sync_us": "sync_us",
    "host_wait_us": "host_wait_us",
    "wait_us": "wait_us",
    "own_us": "own_us",
    "host_idle_us": "host_idle_us",
}


# --------------------------------------------------------------------------------------------- helpers


def open_view(page: Any, tb: TensorBoard, run: str, view: str, worker: str | None = None, span: str = "1") -> Any:
    p = f"p.{PLUGIN}"
    state = f"&{p}.run={run}&{p}.span={span}&{p}.view={view}" + (f"&{p}.worker={worker}" if worker else "")
    frame = open_plugin(page, tb, state)
    frame.wait_for_selector(f"[data-testid=tab-{view}][aria-selected=true]", timeout=60_000)
    return frame




def plot_data(frame: Any, testid: str) -> list[dict[str, Any]]:
    """The traces plotly drew in a chart (x, y, z, name, type)."""
    return frame.evaluate(
        """id => (document.querySelector(`[data-testid=${id}]`).data || []).map(t => ({
            type: t.type, name: t.name, x: t.x, y: t.y, z: t.z || null }))""",
        testid,
    )




def diff_query(**extra: str) -> str:
    return urlencode({"run": BASE[0], "worker": BASE[1], "span": BASE[2],
                      "exp_run": EXP[0], "exp_worker": EXP[1], "exp_span": EXP[2], **extra})


def no_infinity(frame: Any) -> None:
    text = frame.inner_text("[data-testid=diff]")
    assert "Infinity" not in text and "NaN" not in text


# --------------------------------------------------------------------------------------------- Distributed


def test_distributed_two_ranks_matches_the_api(page: Any, tb_dist_diff: TensorBoard) -> None:
    data = tb_dist_diff.get_json("distributed?" + urlencode({"run": "ddp", "span": "1"}))
    assert [r["rank"] for r in data["ranks"]] == [0, 1]
    assert data["straggler"] and data["straggler"]["rank"] == 1

    assert "Distributed" in tb_dist_diff.get_json("views?run=ddp")["views"]
    frame = open_view(page, tb_dist_diff, "ddp", "Distributed")
    callout = frame.wait_for_selector("[data-testid=straggler]", timeout=60_000)
    assert frame.inner_text("[data-testid=straggler-text]") == data["straggler"]["text"]
    assert "Rank 1 is the straggler" in callout.inner_text()
    assert callout.get_attribute("data-rank") == "1"

    # The rank table: one row per rank with exactly the API's numbers (data-value) and readable text.
    rows = table_rows(frame, "rank-table")
    assert len(rows) == 2
    for row, rank in zip(rows, data["ranks"], strict=True):
        assert row["_value:rank"] == str(rank["rank"])
        assert row["worker"] == rank["worker"]
        assert row["host"] == rank["host"]
        assert row["gpu"] == ", ".join(d["name"] for d in rank["devices"])
        for col, field in RANK_FIELDS.items():
            assert float(row[f"_value:{col}"]) == pytest.approx(rank[field], rel=1e-12), (col, row)
            assert re.fullmatch(r"[\d,]+\.\d{1,2} (ms|µs)|0 µs", row[col]), row[col]
    # Stragglers by process group: the gradient group "0" (21 all-reduces every rank has) and "default" (the one
    # initial broadcast), each row with the API's ranks and waits.
    groups = {g["group"]: g for g in data["groups"]}
    assert {name: g["matched"] for name, g in groups.items()} == {"0": 21, "default": 1}
    shown = {r["group"]: r for r in table_rows(frame, "group-table")}
    assert set(shown) == set(groups)
    for name, g in groups.items():
        row, waited = shown[name], g["most_waited_for"]
        assert row["waited"] == f"rank {waited['rank']} ({waited['worker']})"
        assert row["slowest"] == f"rank {g['slowest']['rank']} ({g['slowest']['worker']})"
        assert row["_value:matched"] == str(g["matched"]) and row["ranks"] == "2"
        assert float(row["_value:others_wait"]) == pytest.approx(waited["others_wait_us"], rel=1e-12)
        assert re.fullmatch(r"[\d,]+\.\d{1,2} (ms|µs)|0 µs", row["others_wait"]), row["others_wait"]
    # Tooltips say what the wait columns mean.
    titles = frame.eval_on_selector_all("[data-testid=rank-table] thead th", "els => els.map(e => e.title)")
    assert any(t.startswith("The fastest rank's duration of each collective") for t in titles)
    assert any(t.startswith("Time waiting in collectives for other ranks") for t in titles)
    assert any("cudaDeviceSynchronize" in t for t in titles)
    assert any(t.startswith("Host time with no recorded activity") for t in titles)

    # Charts: stacked bars per rank, transfer vs sync, the heat-map.
    for testid in ("overlap-chart", "wait-chart", "comm-heatmap"):
        frame.wait_for_selector(f"[data-testid={testid}] .main-svg", timeout=60_000)
    overlap = plot_data(frame, "overlap-chart")
    assert [t["name"] for t in overlap] == ["Computation", "Overlap", "Communication only", "Other"]
    stacked = [sum(t["y"][i] for t in overlap) for i in range(2)]
    for total, rank in zip(stacked, data["ranks"], strict=True):
        assert total * 1000 == pytest.approx(rank["step_us"], rel=1e-6)  # the four parts make the step
    wait = {t["name"]: t["y"] for t in plot_data(frame, "wait-chart")}
    assert wait["Sync (wait)"][1] * 1000 == pytest.approx(data["ranks"][1]["sync_us"])
    heat = plot_data(frame, "comm-heatmap")[0]
    assert heat["type"] == "heatmap" and heat["y"] == ["rank 0", "rank 1"]
    assert heat["x"] == [f"step {s}" for s in data["steps"]]
    assert heat["z"][1][0] * 1000 == pytest.approx(data["communication_by_step"][1][0])

    # Collectives of rank 1.
    frame.select_option("[data-testid=collectives-rank]", "1")
    frame.wait_for_function(
        "n => document.querySelectorAll('[data-testid=collectives-table] tbody tr[data-testid=row]').length === n",
        arg=len(data["ranks"][1]["collectives"]))
    coll = {r["name"]: r for r in table_rows(frame, "collectives-table")}
    for c in data["ranks"][1]["collectives"]:
        shown = coll[c["name"]]
        assert shown["_value:calls"] == str(c["calls"])
        assert float(shown["_value:total_us"]) == pytest.approx(c["total_us"])
        assert shown["bandwidth_gbps"] == f"{c['bandwidth_gbps']:,.1f} GB/s"
        assert shown["bytes"].endswith(("B", "KiB", "MiB", "GiB"))


def ddp_ranks_logdir(root: Path, ranks: int) -> Path:
    """``ranks`` workers ``rank0`` … ``rank<N-1>`` in run ``ddp<N>``: links to the DDP sample's rank0 (even) and
    rank1 (odd, the straggler) traces, named ``rankN.<stamp>.pt.trace.json.gz`` like the originals. The traces' own
    distributedInfo still says rank 0 or 1, so ranks repeat (the page tells them apart by worker)."""
    sources = sorted((SAMPLES / "ddp_resnet").glob("rank*.pt.trace.json.gz"))
    if len(sources) != 2:
        pytest.fail("samples/ddp_resnet should hold rank0 and rank1 traces")
    for n in range(ranks):
        src = sources[n % 2]
        stamp = src.name.split(".")[1]
        link_or_copy(src, root / f"ddp{ranks}" / f"rank{n}.{int(stamp) + n}.pt.trace.json.gz")
    return root


@pytest.fixture(scope="module")
def tb_ranks(tb_factory: Callable[..., TensorBoard], tmp_path_factory: pytest.TempPathFactory) -> TensorBoard:
    root = ddp_ranks_logdir(tmp_path_factory.mktemp(f"logdir_ranks{SCALE_RANKS}"), SCALE_RANKS)
    started = time.monotonic()
    tb = tb_factory(root)
    tb.wait_settled(timeout=120 + 30 * SCALE_RANKS)
    tb.extra["load_s"] = time.monotonic() - started
    return tb


def test_distributed_heatmap_at_scale(page: Any, tb_ranks: TensorBoard) -> None:
    run = f"ddp{SCALE_RANKS}"
    started = time.monotonic()
    with urllib.request.urlopen(
            tb_ranks.plugin_url("distributed?" + urlencode({"run": run, "span": "1"})), timeout=600) as resp:
        data = json.loads(resp.read())
    api_s = time.monotonic() - started
    assert len(data["ranks"]) == SCALE_RANKS
    assert len(data["communication_by_step"]) == SCALE_RANKS

    started = time.monotonic()
    frame = open_view(page, tb_ranks, run, "Distributed")
    frame.wait_for_selector("[data-testid=comm-heatmap] .main-svg", timeout=300_000)
    page_s = time.monotonic() - started
    heat = plot_data(frame, "comm-heatmap")[0]
    assert len(heat["y"]) == SCALE_RANKS == len(set(heat["y"]))  # one labelled row per rank, none merged
    assert all(y.startswith("rank ") for y in heat["y"])
    # Every row is labelled: plotly drew one y tick per rank.
    ticks = frame.eval_on_selector_all("[data-testid=comm-heatmap] .ytick text", "els => els.length")
    assert ticks == SCALE_RANKS
    # Rows stay readable: at least 14 px each; the card scrolls instead of growing past its maximum.
    height = frame.evaluate("() => document.querySelector('[data-testid=comm-heatmap]').getBoundingClientRect().height")
    assert height >= SCALE_RANKS * 14
    box = frame.evaluate("() => document.querySelector('[data-testid=heatmap-scroll]').getBoundingClientRect().height")
    assert box <= 621
    # Hover shows milliseconds.
    frame.hover("[data-testid=comm-heatmap] .nsewdrag", position={"x": 20, "y": 8})
    frame.wait_for_selector("[data-testid=comm-heatmap] .hovertext", timeout=10_000)
    hover = frame.eval_on_selector("[data-testid=comm-heatmap] .hovertext", "e => e.textContent")
    assert re.search(r"communication: [\d,.]+ (ms|µs)", hover), hover
    # The rank table pages through the ranks.
    assert len(table_rows(frame, "rank-table")) == min(16, SCALE_RANKS)
    timing = {"ranks": SCALE_RANKS, "load_all_s": round(tb_ranks.extra.get("load_s", 0.0), 1),
              "distributed_api_s": round(api_s, 2), "page_to_heatmap_s": round(page_s, 2)}
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / f"distributed_{SCALE_RANKS}_ranks.json").write_text(json.dumps(timing, indent=2))
    frame.eval_on_selector("[data-testid=card-heatmap]", "e => e.scrollIntoView()")
    page.wait_for_timeout(300)
    page.screenshot(path=str(ARTIFACTS / f"distributed_{SCALE_RANKS}_ranks.png"))
    print("distributed scale timing:", timing)


# --------------------------------------------------------------------------------------------- Diff


def test_diff_tab_for_every_run(page: Any, tb_dist_diff: TensorBoard) -> None:
    assert "Diff" not in tb_dist_diff.get_json("views?run=ddp")["views"]  # the server does not list it...
    frame = open_view(page, tb_dist_diff, "ddp", "Diff", worker="rank0")  # ...the registry always shows it
    # Default experiment for rank0 of ddp: no other run has a rank0 and rank0 has one span, so another trace.
    frame.wait_for_selector("[data-testid=exp-picker]")
    assert frame.input_value("[data-testid=base-run]") == "ddp"
    assert frame.input_value("[data-testid=base-worker]") == "rank0"


def test_diff_kineto_pair(page: Any, tb_dist_diff: TensorBoard, console: Any) -> None:
    data = tb_dist_diff.get_json("diff?" + diff_query())
    frame = open_view(page, tb_dist_diff, BASE[0], "Diff", worker=BASE[1])
    # The experiment defaults to the other run with the same worker name.
    frame.wait_for_selector("[data-testid=diff-breakdown-table]", timeout=120_000)
    assert [frame.input_value(f"[data-testid=exp-{k}]") for k in ("run", "worker", "span")] == list(EXP)
    assert top_hash(page)[f"p.{PLUGIN}.exp_run"] == EXP[0]

    # Step time and its breakdown: the DataLoader bar drops.
    b = data["breakdown"]
    assert float(frame.get_attribute("[data-testid=step-delta]", "data-value")) == pytest.approx(b["step_delta_us"])
    assert frame.inner_text("[data-testid=step-delta] .ptp-metric-value").startswith("-36.52 ms")
    dl = frame.locator("[data-testid=diff-breakdown-table] tr[data-category=DataLoader]")
    base_dl = float(dl.locator("td[data-col=baseline]").get_attribute("data-value"))
    exp_dl = float(dl.locator("td[data-col=experiment]").get_attribute("data-value"))
    assert base_dl == pytest.approx(b["baseline"]["DataLoader"]) and exp_dl == pytest.approx(b["experiment"]["DataLoader"])
    assert exp_dl < 0.1 * base_dl
    assert dl.locator("td[data-col=delta]").inner_text() == "-58.08 ms"
    frame.wait_for_selector("[data-testid=diff-breakdown-chart] .main-svg", timeout=60_000)
    bars = {t["name"]: dict(zip(t["x"], t["y"], strict=True)) for t in plot_data(frame, "diff-breakdown-chart")}
    assert bars["Experiment"]["DataLoader"] < bars["Baseline"]["DataLoader"]
    assert bars["Baseline"]["DataLoader"] * 1000 == pytest.approx(b["baseline"]["DataLoader"])

    # Operators: deltas, new/gone badges, never Infinity; default order by |Δ device total|.
    rows = table_rows(frame, "diff-operators")
    assert len(rows) == 10
    expected = sorted(data["operators"], key=lambda r: -abs(r["delta_device_total_us"]))[:10]
    shown = [abs(float(r["_value:delta"])) for r in rows]
    assert shown == pytest.approx([abs(r["delta_device_total_us"]) for r in expected])  # ties may order differently
    by_name = {r["name"]: r for r in data["operators"]}
    for r in rows:
        api_row = by_name[r["name"].splitlines()[0]]
        assert float(r["_value:delta"]) == pytest.approx(api_row["delta_device_total_us"])
        assert float(r["_value:baseline"]) == pytest.approx(api_row["baseline_device_total_us"])
        assert float(r["_value:experiment"]) == pytest.approx(api_row["experiment_device_total_us"])
        pct = api_row["delta_ratio_device_total_us"]
        assert r["delta_pct"] == ("—" if pct is None else f"{100 * pct:+.1f}%".replace("+0.0%", "0.0%"))
    no_infinity(frame)
    gone = [r for r in data["operators"] if r["status"] == "gone"]
    assert gone, "the pair has operators that only the baseline runs"
    frame.fill("[data-testid=diff-operators] [data-testid=search-name]", gone[0]["name"])
    row = frame.locator("[data-testid=diff-operators] tbody tr[data-testid=row]").filter(
        has=frame.locator("[data-testid=name]", has_text=re.compile(f"^{re.escape(gone[0]['name'])}$")))
    assert row.first.locator("[data-testid=badge-gone]").inner_text().lower() == "gone"
    assert row.first.locator("td[data-col=delta_pct]").inner_text() == "—"
    assert row.first.locator("[data-testid=open-op-experiment]").count() == 0  # not in the experiment
    frame.fill("[data-testid=diff-operators] [data-testid=search-name]", "")

    # Sort by Δ: largest increase first, then largest decrease first.
    frame.click("[data-testid=diff-operators] [data-testid=sort-delta]")
    values = [float(r["_value:delta"]) for r in table_rows(frame, "diff-operators")]
    assert values == sorted(values, reverse=True)
    assert values[0] == pytest.approx(max(r["delta_device_total_us"] for r in data["operators"]))
    frame.click("[data-testid=diff-operators] [data-testid=sort-delta]")
    values = [float(r["_value:delta"]) for r in table_rows(frame, "diff-operators")]
    assert values == sorted(values)
    assert values[0] == pytest.approx(min(r["delta_device_total_us"] for r in data["operators"]))
    # Another metric: host self.
    frame.select_option("[data-testid=diff-operators-metric]", "host_self_us")
    first = table_rows(frame, "diff-operators")[0]
    top = max(data["operators"], key=lambda r: abs(r["delta_host_self_us"]))
    assert first["name"].splitlines()[0] == top["name"]
    no_infinity(frame)

    # CSV export: every operator, no Infinity.
    with page.expect_download() as info:
        frame.click("[data-testid=diff-operators] [data-testid=csv-download]")
    text = Path(info.value.path()).read_text(encoding="utf-8")
    table = list(csv.reader(io.StringIO(text)))
    assert table[0][:2] == ["Operator", "Status"] and len(table) == 1 + len(data["operators"])
    assert "Infinity" not in text and "NaN" not in text

    # Kernels joined by name.
    krows = table_rows(frame, "diff-kernels")
    assert len(krows) == min(10, len(data["kernels"]))
    new_kernel = next(r for r in data["kernels"] if r["status"] == "new")
    frame.fill("[data-testid=diff-kernels] [data-testid=search-name]", new_kernel["name"])
    krow = frame.locator("[data-testid=diff-kernels] tbody tr[data-testid=row]").first
    assert krow.locator("[data-testid=badge-new]").count() == 1
    assert krow.locator("td[data-col=delta_pct]").inner_text() == "—"
    assert float(krow.locator("td[data-col=delta]").get_attribute("data-value")) == pytest.approx(new_kernel["delta_total_us"])

    # Drill-down: into the first DataLoader entry, then back up through the breadcrumb.
    root = tb_dist_diff.get_json("diff/node?" + diff_query(path="0"))
    frame.wait_for_selector("[data-testid=drill-chart] .main-svg", timeout=60_000)
    assert frame.get_attribute("[data-testid=drill-chart]", "data-children") == str(len(root["children"]))
    assert frame.eval_on_selector_all("[data-testid=drill-breadcrumb] [data-testid=crumb]", "e => e.length") == 1
    before = plot_data(frame, "drill-chart")
    assert [t["name"] for t in before] == ["Baseline", "Experiment", "Cumulative change"]

    # The level opens on the measure whose largest change is largest (a host-only change is not shown as 0),
    # with horizontal, wrapped entry labels (rotated ones were cut).
    def largest(m: str) -> float:
        return max(abs((c["experiment"] or {}).get(f"{m}_us", 0) - (c["baseline"] or {}).get(f"{m}_us", 0))
                   for c in root["children"])

    assert frame.get_attribute("[data-testid=drill]", "data-metric") == ("host" if largest("host") > largest("device") else "device")
    assert frame.evaluate("() => document.querySelector('[data-testid=drill-chart]').layout.xaxis.tickangle") == 0
    loader = next(c for c in root["children"] if c["name"].startswith("enumerate(DataLoader)"))
    frame.click(f"[data-testid=drill-into][data-path='{loader['path']}']")
    frame.wait_for_function(
        "p => document.querySelector('[data-testid=drill-chart]')?.dataset.path === p"
        " && document.querySelectorAll('[data-testid=drill-breadcrumb] [data-testid=crumb]').length === 2", arg=loader["path"])
    node = tb_dist_diff.get_json("diff/node?" + diff_query(path=loader["path"]))
    crumbs = frame.eval_on_selector_all("[data-testid=drill-breadcrumb] [data-testid=crumb]", "els => els.map(e => e.title)")
    assert crumbs[0] == "Back to All steps" and crumbs[1] == node["name"]
    frame.wait_for_function(
        "n => (document.querySelector('[data-testid=drill-chart]').data || [])[0]?.x.length === n", arg=len(node["children"]))
    # No GPU time in data loading: the page compares host time there.
    assert frame.get_attribute("[data-testid=drill]", "data-metric") == "host"
    after = plot_data(frame, "drill-chart")
    assert after[0]["y"][0] * 1000 == pytest.approx(node["children"][0]["baseline"]["host_us"])
    cumulative = after[2]["y"][-1] * 1000
    total = sum((c["experiment"] or {}).get("host_us", 0) - (c["baseline"] or {}).get("host_us", 0) for c in node["children"])
    assert cumulative == pytest.approx(total)
    frame.click("[data-testid=drill-breadcrumb] button[data-testid=crumb]")
    frame.wait_for_function("() => document.querySelector('[data-testid=drill-chart]')?.dataset.path === '0'")

    # "Open in the experiment's Operator view": switches run and tab, with the search in the URL.
    frame.fill("[data-testid=diff-operators] [data-testid=search-name]", "aten::copy_")
    target = frame.locator("[data-testid=diff-operators] tbody tr[data-testid=row]").first
    name = target.locator("td[data-col=name] [data-testid=name]").inner_text()
    target.locator("[data-testid=open-op-experiment]").click()
    frame.wait_for_selector("[data-testid=tab-Operator][aria-selected=true]", timeout=60_000)
    frame.wait_for_function("r => document.querySelector('[data-testid=run-select]').value === r", arg=EXP[0])
    state = top_hash(page)
    assert state[f"p.{PLUGIN}.view"] == "Operator" and state[f"p.{PLUGIN}.run"] == EXP[0]
    # the Operator view takes the search from the link (and then drops the key from the URL)
    frame.wait_for_function("n => document.querySelector('[data-testid=operator-table] [data-testid=search-name]')"
                            "?.value === n", arg=name, timeout=60_000)
    assert f"p.{PLUGIN}.exp_run" not in state  # the Diff page's own keys left with it
    assert not console.unexpected()


def test_distributed_step_selector_shows_one_step(page: Any, tb_dist_diff: TensorBoard) -> None:
    data = tb_dist_diff.get_json("distributed?" + urlencode({"run": "ddp", "span": "1"}))
    frame = open_view(page, tb_dist_diff, "ddp", "Distributed")
    frame.wait_for_selector("[data-testid=overlap-chart] .main-svg", timeout=30_000)
    options = frame.eval_on_selector_all("[data-testid=step-select] option", "os => os.map(o => o.textContent)")
    assert options == ["Mean of all steps"] + [f"Step {s}" for s in data["steps"]]
    frame.select_option("[data-testid=step-select]", "1")
    expected = [r["per_step"]["sync_us"][1] / 1000 for r in data["ranks"]]
    frame.wait_for_function(
        """exp => { const gd = document.querySelector('[data-testid=wait-chart]');
                    const t = gd && gd.data && gd.data.find(d => d.name === 'Sync (wait)');
                    return t && t.y.every((v, i) => Math.abs(v - exp[i]) < 1e-6); }""", arg=expected)
    frame.select_option("[data-testid=step-select]", "")
    means = [r["sync_us"] / 1000 for r in data["ranks"]]
    frame.wait_for_function(
        """exp => { const t = document.querySelector('[data-testid=wait-chart]').data.find(d => d.name === 'Sync (wait)');
                    return t.y.every((v, i) => Math.abs(v - exp[i]) < 1e-6); }""", arg=means)
