"""The Overview's diagnosis in the browser: the first screen, with context, verdict and ranked findings above the
fold at 1600×1000 and 1280×800, and
every kind of evidence link lands where it says (Trace range and search, Operator and Kernel filters, Distributed
rank, Memory device and range, another rank's Overview, a Diff of two steps, a GPU-insights card)."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

import pytest

from tests.browser.conftest import PLUGIN, SAMPLES, TensorBoard, link_or_copy, open_plugin, table_rows, top_hash

pytestmark = pytest.mark.browser

RESNET = ("resnet_slow_dataloader", "vm_618")
TRANSFORMER = ("transformer_bf16", "vm_699")


def open_overview(page: Any, tb: TensorBoard, run: str, worker: str) -> Any:
    p = f"p.{PLUGIN}"
    frame = open_plugin(page, tb, f"&{p}.run={run}&{p}.worker={worker}&{p}.span=1&{p}.view=Overview")
    frame.wait_for_selector("[data-testid=verdict]")
    return frame


def overview(tb: TensorBoard, run: str, worker: str) -> Any:
    return tb.get_json("overview?" + urlencode({"run": run, "worker": worker, "span": "1"}))


def click_evidence(frame: Any, kind: str, view: str) -> None:
    frame.click(f"[data-testid=recommendation][data-kind={kind}] [data-testid=evidence-link][data-view={view}]")
    frame.wait_for_selector(f"[data-testid=tab-{view}][aria-selected=true]")


@pytest.mark.parametrize("size", [(1600, 1000), (1280, 800)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_overview_is_the_first_screen_with_its_diagnosis_above_the_fold(page: Any, tb_samples: TensorBoard,
                                                                        size: tuple[int, int]) -> None:
    """A link without a view opens the Overview; its context, verdict and first finding need no scrolling."""
    page.set_viewport_size({"width": size[0], "height": size[1]})
    p = f"p.{PLUGIN}"
    frame = open_plugin(page, tb_samples, f"&{p}.run={RESNET[0]}&{p}.worker={RESNET[1]}&{p}.span=1")
    frame.wait_for_selector("[data-testid=tab-Overview][aria-selected=true]")
    frame.wait_for_selector("[data-testid=verdict]")
    assert top_hash(page)[f"{p}.view"] == "Overview"
    iframe_top = page.eval_on_selector("iframe", "e => e.getBoundingClientRect().top")
    for testid in ("run-context", "verdict", "recommendation"):
        box = frame.eval_on_selector(f"[data-testid={testid}]", "e => { const r = e.getBoundingClientRect(); return {bottom: r.bottom, right: r.right}; }")
        assert iframe_top + box["bottom"] <= size[1], testid
        assert box["right"] <= size[0], testid


def test_diagnosis_above_the_fold_with_trace_and_operator_links(page: Any, tb_samples: TensorBoard) -> None:
    page.set_viewport_size({"width": 1600, "height": 1000})
    data = overview(tb_samples, *RESNET)
    frame = open_overview(page, tb_samples, *RESNET)
    assert frame.inner_text("[data-testid=verdict]") == data["verdict"]["text"]
    # the verdict says where the wait comes from: the Dataset's transform the DataLoader runs
    assert data["verdict"]["text"].startswith("Input-bound at resnet_slow_dataloader.py:28 (bilinear_resize)")
    assert "DataLoader waits" in data["verdict"]["text"]
    assert frame.inner_text("[data-testid=run-context-label]") == "DataLoader without workers"
    items = frame.query_selector_all("[data-testid=recommendation]")
    assert [i.get_attribute("data-kind") for i in items] == [r["kind"] for r in data["recommendations"]]
    assert items[0].query_selector("[data-testid=finding-saving]").inner_text().startswith("est. −11")

    # Trace: the step with the longest DataLoader wait, searching for it
    link = next(e for e in data["recommendations"][0]["evidence"] if e["view"] == "Trace")
    click_evidence(frame, "input_bound", "Trace")
    frame.wait_for_function("() => window.__ptpTrace && window.__ptpTrace.visibleRange() !== null")
    shown = frame.evaluate("() => window.__ptpTrace.visibleRange()")
    assert shown["start"] == pytest.approx(link["params"]["start_us"], abs=0.01)
    assert shown["end"] == pytest.approx(link["params"]["end_us"], abs=0.01)
    assert frame.input_value("[data-testid=trace-search]") == "enumerate(DataLoader)"

    # Operator: the hot operator of the CPU-bound transformer, as the table's search
    data = overview(tb_samples, *TRANSFORMER)
    op = next(e for r in data["recommendations"] for e in r["evidence"] if e["view"] == "Operator")
    kind = next(r["kind"] for r in data["recommendations"] if op in r["evidence"])
    frame = open_overview(page, tb_samples, *TRANSFORMER)
    frame.click(f"[data-testid=recommendation][data-kind={kind}] [data-testid=evidence-link][data-view=Operator]")
    frame.wait_for_selector("[data-testid=tab-Operator][aria-selected=true]")
    frame.wait_for_selector("[data-testid=operator-table] tbody tr[data-testid=row]")
    names = [r["name"] for r in table_rows(frame, "operator-table")]
    assert names and all(op["params"]["q"] in n for n in names)


def test_memory_link_opens_the_device_and_range(page: Any, tb_samples: TensorBoard) -> None:
    """A scripted finding with a Memory link (no sample reaches 90 % of an H200): the Memory view opens on that
    device with that range selected."""
    data = overview(tb_samples, *TRANSFORMER)
    curve = tb_samples.get_json("memory/curve?" + urlencode({"run": TRANSFORMER[0], "worker": TRANSFORMER[1],
                                                              "span": "1"}))
    device = next(d for d in curve["devices"] if d != "CPU")
    t = curve["devices"][device]["peak_time_us"]
    finding = {"id": "memory_pressure", "kind": "memory_pressure", "title": "Memory pressure", "text": "Peak.",
               "saving_us": 0, "evidence": [{"view": "Memory", "label": "peak",
                                             "params": {"device": device, "start_us": t - 500, "end_us": t + 500}}],
               "link": "https://pytorch.org", "cause": False}
    body = {**data, "recommendations": [finding]}
    page.route(f"**/data/plugin/{PLUGIN}/overview?*", lambda route: route.fulfill(
        status=200, content_type="application/json", body=json.dumps(body)))
    frame = open_overview(page, tb_samples, *TRANSFORMER)
    click_evidence(frame, "memory_pressure", "Memory")
    frame.wait_for_selector("[data-testid=memory-range]")
    assert frame.input_value("[data-testid=memory-device]") == device
    frame.wait_for_function("() => !document.querySelector('[data-testid=memory-range]').innerText.includes('whole')")
    assert "whole trace" not in frame.inner_text("[data-testid=memory-range]")


def test_distributed_kernel_and_rank_links(page: Any, tb_dist_diff: TensorBoard) -> None:
    page.set_viewport_size({"width": 1600, "height": 1000})
    data = overview(tb_dist_diff, "ddp", "rank0")
    assert data["verdict"]["kind"] == "gpu_bound" and "rank 1 straggles" in data["context"]["label"]
    assert "straggler_wait" in [r["kind"] for r in data["recommendations"]]
    frame = open_overview(page, tb_dist_diff, "ddp", "rank0")
    assert "rank 0 of 2 · rank 1 straggles" in frame.inner_text("[data-testid=run-context-label]")

    click_evidence(frame, "straggler_wait", "Distributed")
    frame.wait_for_selector("[data-testid=collectives-rank]")
    ranks = tb_dist_diff.get_json("distributed?" + urlencode({"run": "ddp", "span": "1"}))["ranks"]
    index = frame.input_value("[data-testid=collectives-rank]")
    assert ranks[int(index)]["rank"] == 1
    assert "p.pytorch_profiler.rank" not in top_hash(page)  # consumed

    frame = open_overview(page, tb_dist_diff, "ddp", "rank0")
    click_evidence(frame, "straggler_wait", "Overview")
    frame.wait_for_selector("[data-testid=recommendation][data-kind=straggler]")
    assert top_hash(page)[f"p.{PLUGIN}.worker"] == "rank1"

    # Kernel: the V100 run's low tensor-core use opens the Kernel view
    frame = open_overview(page, tb_dist_diff, "resnet50_num_workers_4", "worker0")
    click_evidence(frame, "low_tensor_cores", "Kernel")
    frame.wait_for_selector("[data-testid=kernel-table] tbody tr[data-testid=row]")


@pytest.fixture(scope="module")
def tb_corpus(tb_factory: Any, tmp_path_factory: pytest.TempPathFactory) -> TensorBoard:
    """``cpu_only`` (steps vary: ProfilerStep#4 26.7 ms against 14.4 ms for #3), ``item_sync`` (sync-bound),
    ``pageable_h2d`` (GPU-idle gaps) and ``tiny_kernels`` (launch-bound)."""
    root = tmp_path_factory.mktemp("logdir_corpus")
    for run in ("cpu_only", "item_sync", "pageable_h2d", "tiny_kernels"):
        for f in sorted((SAMPLES / run).glob("*.pt.trace.json.gz")):
            link_or_copy(f, root / run / f.name)
    tb: TensorBoard = tb_factory(root)
    tb.wait_settled(timeout=180)
    return tb


def _worker(run: str) -> str:
    return next((SAMPLES / run).glob("*.pt.trace.json.gz")).name.split(".")[0]


def test_sync_bound_verdict_above_the_fold_and_its_trace_link(page: Any, tb_corpus: TensorBoard) -> None:
    """The planted .item() syncs are the verdict, above the fold; the finding's Trace link opens the step where
    they cost most, searching for the .item() calls."""
    page.set_viewport_size({"width": 1600, "height": 1000})
    worker = _worker("item_sync")
    data = overview(tb_corpus, "item_sync", worker)
    assert data["verdict"]["text"].startswith("Sync-bound at bottleneck.py:216 (step) → Tensor.item: The host waits "
                                              "for the GPU 257 times per step")
    frame = open_overview(page, tb_corpus, "item_sync", worker)
    assert frame.inner_text("[data-testid=verdict]") == data["verdict"]["text"]
    # where the cause lives: the user's frame as a source button, then the call it makes
    where = frame.locator("[data-testid=recommendation][data-kind=sync_bound] [data-testid=finding-where]")
    assert where.inner_text().startswith("Where: ")
    button = where.locator("[data-testid=frame]")
    assert (button.get_attribute("data-path"), button.get_attribute("data-line")) == ("bottleneck.py", "216")
    assert "→ Tensor.item" in where.inner_text()
    iframe_top = page.eval_on_selector("iframe", "e => e.getBoundingClientRect().top")
    for testid in ("run-context", "verdict", "recommendation"):
        bottom = frame.eval_on_selector(f"[data-testid={testid}]", "e => e.getBoundingClientRect().bottom")
        assert iframe_top + bottom <= 1000, testid
    link = next(e for e in data["recommendations"][0]["evidence"] if e["view"] == "Trace")
    click_evidence(frame, "sync_bound", "Trace")
    frame.wait_for_function("() => window.__ptpTrace && window.__ptpTrace.visibleRange() !== null")
    shown = frame.evaluate("() => window.__ptpTrace.visibleRange()")
    assert shown["start"] == pytest.approx(link["params"]["start_us"], abs=0.01)
    assert shown["end"] == pytest.approx(link["params"]["end_us"], abs=0.01)
    assert frame.input_value("[data-testid=trace-search]") == "aten::_local_scalar_dense"


def test_outlier_steps_open_a_diff_of_the_slowest_and_fastest_step(page: Any, tb_corpus: TensorBoard) -> None:
    page.set_viewport_size({"width": 1600, "height": 1000})
    worker = _worker("cpu_only")
    data = overview(tb_corpus, "cpu_only", worker)
    link = next(e for r in data["recommendations"] if r["kind"] == "outlier_steps" for e in r["evidence"]
                if e["view"] == "Diff")
    assert link["params"] == {"step": "3", "exp_step": "4"}
    q = {"run": "cpu_only", "worker": worker, "span": "1", "exp_run": "cpu_only", "exp_worker": worker,
         "exp_span": "1"}
    steps = tb_corpus.get_json("diff?" + urlencode({**q, "step": "3", "exp_step": "4"}))["breakdown"]
    assert (steps["step_baseline_us"], steps["step_experiment_us"]) == (pytest.approx(14_432.5, abs=0.1),
                                                                        pytest.approx(26_714.9, abs=0.1))
    frame = open_overview(page, tb_corpus, "cpu_only", worker)
    click_evidence(frame, "outlier_steps", "Diff")
    frame.wait_for_selector("[data-testid=diff-steps-label]")
    assert frame.inner_text("[data-testid=diff-steps-label]").startswith("step 3 (baseline) ⇄ step 4 (experiment)")
    frame.wait_for_selector("[data-testid=step-baseline]")
    shown = float(frame.get_attribute("[data-testid=step-baseline]", "data-value"))
    assert shown == pytest.approx(steps["step_baseline_us"])
    assert float(frame.get_attribute("[data-testid=step-experiment]", "data-value")) == pytest.approx(
        steps["step_experiment_us"])
    assert "· step 4" in frame.inner_text("[data-testid=step-experiment]")
    assert "Step (3 ⇄ 4)" in frame.inner_text("[data-testid=diff-breakdown-table] tfoot")
    frame.wait_for_function("() => document.querySelector('[data-testid=drill-breadcrumb]')?.innerText"
                            ".includes('Step 3 ⇄ step 4')")
    assert top_hash(page).get(f"p.{PLUGIN}.exp_step") == "4"

    # one trace, two steps: no "all steps" (it would compare the trace with itself); another step is picked
    assert frame.query_selector("[data-testid=diff-all-steps]") is None
    frame.wait_for_function("() => document.querySelectorAll('[data-testid=diff-step-baseline] option').length === 3")
    frame.select_option("[data-testid=diff-step-baseline]", "2")
    two = tb_corpus.get_json("diff?" + urlencode({**q, "step": "2", "exp_step": "4"}))["breakdown"]
    frame.wait_for_function(f"() => Math.abs(Number(document.querySelector('[data-testid=step-baseline]')"
                            f"?.dataset.value) - {two['step_baseline_us']}) < 0.01")
    assert "Step (2 ⇄ 4)" in frame.inner_text("[data-testid=diff-breakdown-table] tfoot")
    assert top_hash(page).get(f"p.{PLUGIN}.step") == "2"


@pytest.mark.parametrize(("run", "kind", "card"), [("pageable_h2d", "gpu_idle_gaps", "idle"),
                                                    ("tiny_kernels", "launch_bound", "launch")])
def test_gpu_insight_links_open_their_card(page: Any, tb_corpus: TensorBoard, run: str, kind: str,
                                           card: str) -> None:
    page.set_viewport_size({"width": 1600, "height": 1000})
    frame = open_overview(page, tb_corpus, run, _worker(run))
    click_evidence(frame, kind, "GPU")
    frame.wait_for_selector(f"[data-testid=card-{card}][data-focused=true]")
    assert frame.eval_on_selector_all("[data-focused=true]", "els => els.map(e => e.dataset.testid)") == [f"card-{card}"]
    iframe_top = page.eval_on_selector("iframe", "e => e.getBoundingClientRect().top")
    top = frame.eval_on_selector(f"[data-testid=card-{card}]", "e => e.getBoundingClientRect().top")
    assert 0 <= iframe_top + top < 1000  # scrolled into view
    assert f"p.{PLUGIN}.card" not in top_hash(page)  # consumed
    if card == "launch":  # the numbers the finding quotes are the card's
        s = tb_corpus.get_json("launch_stats?" + urlencode({"run": run, "worker": _worker(run), "span": "1"}))
        assert f"{s['summary']['launch_delay_p50_us']:.1f} µs" in overview(tb_corpus, run, _worker(run))[
            "recommendations"][0]["text"]
