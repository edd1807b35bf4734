"""Step against step: the Diff analysis and routes over two steps of one trace (the outlier-steps evidence)."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from tb_plugin.analysis import diff
from tb_plugin.analysis.diff import diff_node, diff_summary
from tb_plugin.analysis.operators import operator_table
from tb_plugin.analysis.steps import breakdown
from tb_plugin.loader import load_trace
from tb_plugin.model.errors import UnknownStep
from tests.conftest import API, REPO, real_trace_files, wait_until_settled
from tests.unit.test_views_synthetic import PROPS, kernel, launch, model_of, op, step

ITEM_SYNC = REPO / "samples" / "item_sync"


def _three_steps() -> list[dict[str, Any]]:
    """Step 1 (1000 µs): aten::mm (100 µs) launching a 300 µs gemm. Steps 2 (2000 µs) and 3 (1000 µs): the same,
    plus aten::cat (800 µs) launching two 50 µs cat kernels (a last step with fewer kernels than the one before
    would be left out as not fully captured)."""
    events: list[dict[str, Any]] = []
    t = 0
    for n, dur in ((1, 1_000), (2, 2_000), (3, 1_000)):
        c = 10 * n
        events += [step(n, t, dur), op("aten::mm", t + 10, 100), launch(t + 20, 10, corr=c),
                   kernel("gemm", t + 40, 300, corr=c)]
        if n >= 2:
            events += [op("aten::cat", t + 200, 800), launch(t + 210, 10, corr=c + 1),
                       kernel("cat_kernel", t + 400, 50, corr=c + 1), launch(t + 500, 10, corr=c + 2),
                       kernel("cat_kernel", t + 600, 50, corr=c + 2)]
        t += dur
    return events


def test_two_steps_of_one_synthetic_trace(tmp_path: Path) -> None:
    model = model_of(tmp_path, _three_steps(), deviceProperties=PROPS)
    d = diff_summary(model, model, "1", "2")
    b = d["breakdown"]
    assert d["steps"] == {"baseline": "1", "experiment": "2"}
    assert (b["step_baseline_us"], b["step_experiment_us"], b["step_delta_us"]) == (1_000, 2_000, 1_000)
    assert b["step_delta_ratio"] == pytest.approx(1.0)
    assert (b["baseline"]["Kernel"], b["experiment"]["Kernel"]) == (300, 400)  # the gemm; + two 50 µs cat kernels
    ops = {r["name"]: r for r in d["operators"]}
    assert ops["aten::cat"]["status"] == "new" and ops["aten::cat"]["experiment_host_total_us"] == 800
    assert ops["aten::cat"]["experiment_device_total_us"] == 100
    assert ops["aten::mm"]["status"] == "both" and ops["aten::mm"]["delta_calls"] == 0
    assert d["operators"][0]["name"] == "aten::cat"  # the largest device-time change first
    kernels = {r["name"]: r for r in d["kernels"]}
    assert kernels["cat_kernel"]["experiment_calls"] == 2 and kernels["cat_kernel"]["experiment_mean_us"] == 50
    assert kernels["gemm"]["delta_total_us"] == 0
    # the same trace, all steps: means per step and sums over the span, as before
    whole = diff_summary(model, model)
    assert whole["steps"] == {"baseline": None, "experiment": None}
    assert whole["breakdown"]["step_baseline_us"] == pytest.approx(4_000 / 3)
    node = diff_node(model, model, "0", "1", "2")
    assert node["name"] == "Step 1 ⇄ step 2"
    assert node["baseline"]["host_us"] == 100 and node["experiment"]["host_us"] == 900
    assert [c["name"] for c in node["children"]] == ["aten::mm", "aten::cat"]
    with pytest.raises(UnknownStep, match=r"no step '9' in this trace \(its steps: 1, 2, 3\)"):
        diff_summary(model, model, "1", "9")


def test_steps_of_the_item_sync_sample_add_up_to_the_trace() -> None:
    """Step 2 is the sample's slowest (30384.0 µs, its ProfilerStep#2 span in the raw JSON) and step 3 its fastest
    (28158.5 µs): per-step rows are the same numbers the trace-wide tables and the Overview's breakdown hold."""
    model = load_trace(str(next(ITEM_SYNC.glob("*.gz"))))
    d = diff_summary(model, model, "3", "2")
    per_step = breakdown(model).per_step
    assert d["breakdown"]["step_baseline_us"] == pytest.approx(28_158.5, abs=0.1)
    assert d["breakdown"]["step_experiment_us"] == pytest.approx(30_384.0, abs=0.1)
    for c, values in per_step.items():
        assert d["breakdown"]["baseline"][c] == pytest.approx(float(values[1]))
        assert d["breakdown"]["experiment"][c] == pytest.approx(float(values[0]))
    # 257 GPU .item() syncs (loss + 256 samples) plus AdamW's 68 reads of its CPU step counters: 325 aten::item in
    # each ProfilerStep span of the raw JSON, on both sides
    item = next(r for r in d["operators"] if r["name"] == "aten::item")
    assert (item["baseline_calls"], item["experiment_calls"]) == (325, 325)
    calls = {n: 0 for n in ("aten::addmm", "aten::item")}
    for s in ("2", "3", "4"):
        rows = {r["name"]: r for r in diff_summary(model, model, s, s)["operators"]}
        for n in calls:
            calls[n] += int(rows[n]["baseline_calls"])
    table = {r["name"]: r["calls"] for r in operator_table(model)}
    assert calls == {n: table[n] for n in calls}


@pytest.fixture
def item_sync_client(tmp_path: Path, tensorboard_app: Any) -> Any:
    logdir = tmp_path / "logdir"
    shutil.copytree(ITEM_SYNC, logdir / "item_sync")
    client = tensorboard_app(logdir)
    wait_until_settled(client, expect_spans=1)
    return client


def test_step_diff_routes_validate_and_answer(item_sync_client: Any) -> None:
    worker = next(ITEM_SYNC.glob("*.gz")).name.split(".")[0]
    q = f"run=item_sync&worker={worker}&span=1&exp_run=item_sync&exp_worker={worker}&exp_span=1"
    r = item_sync_client.get(f"{API}/diff?{q}&step=3&exp_step=2")
    assert r.status_code == 200
    body = r.get_json()
    assert body["steps"] == {"baseline": "3", "experiment": "2"}
    assert body["breakdown"]["step_delta_us"] == pytest.approx(30_384.0 - 28_158.5, abs=0.2)
    node = item_sync_client.get(f"{API}/diff/node?{q}&step=3&exp_step=2&path=0").get_json()
    assert node["name"] == "Step 3 ⇄ step 2" and node["children"]
    # either alone names the same step on both sides
    alone = item_sync_client.get(f"{API}/diff?{q}&exp_step=3").get_json()
    assert alone["steps"] == {"baseline": "3", "experiment": "3"} and alone["breakdown"]["step_delta_us"] == 0
    for bad in (f"{q}&step=7&exp_step=2", f"{q}&step=x"):
        r = item_sync_client.get(f"{API}/diff?{bad}")
        assert r.status_code == 404 and "(its steps: 2, 3, 4)" in r.get_json()["error"], r.get_json()
        assert item_sync_client.get(f"{API}/diff/node?{bad}").status_code == 404


def _phases_node_by_node(side: Any, nodes: list[int]) -> list[tuple[str, list[int]]]:
    """The drill-down's phases as their rule says, one node at a time (the reference for ``diff._phases``)."""
    out: list[tuple[str, list[int]]] = []
    for node in nodes:
        name = side.model.strings[int(side.name_code[node])]
        key = diff._key_of(name)
        if key == "DataLoader" or key.startswith("Optimizer.") or bool(side.annotation[node]):
            out.append((key, [node]))
            continue
        run = "Backward" if name.startswith(diff._BACKWARD) else "Operators"
        if out and out[-1][0] == run:
            out[-1][1].append(node)
        else:
            out.append((run, [node]))
    return out


def _label_node_by_node(side: Any, nodes: list[int]) -> str:
    if not nodes:
        return ""
    names = [side.model.strings[int(side.name_code[n])] for n in nodes]
    if len(set(names)) == 1:
        return names[0] if len(names) == 1 else f"{names[0]} ×{len(names)}"
    if all(n.startswith(diff._BACKWARD) for n in names):
        return f"Backward ({len(names)} operations)"
    return f"{len(names)} operations ({names[0]} … {names[-1]})"


@pytest.mark.parametrize("trace", [f for f in real_trace_files() if "calibration" not in str(f)][:12],
                         ids=lambda f: f.parent.name)
def test_the_drill_downs_phases_and_labels_follow_their_rule_node_by_node(trace: Path) -> None:
    """``diff._phases`` and ``_label`` work on the name codes of whole node arrays (a 10 GB trace's tree has 15 M
    nodes: no Python object per node); each level of the drill-down splits and names as the rule does node by node."""
    model = load_trace(str(trace))
    side = diff._side(model)
    nodes, phases = diff._root(model)
    assert phases == _phases_node_by_node(side, nodes)
    levels = [nodes] + [side.children(n) for n in nodes[:50]] + [g for _, g in phases]
    for level in levels:
        assert diff._phases(side, level) == _phases_node_by_node(side, level)
        for part in (level, level[:2], level[-40:]):  # mixed groups too: what the alignment joins between matches
            assert diff._label(side, part) == _label_node_by_node(side, part)
        for _, group in diff._phases(side, level):
            assert diff._label(side, group) == _label_node_by_node(side, group)
    assert any(len(g) > 1 for _, g in phases) or len(nodes) < 3


@pytest.mark.parametrize("trace", [f for f in real_trace_files() if "calibration" not in str(f)][:6],
                         ids=lambda f: f.parent.name)
def test_the_drill_downs_top_level_gathers_and_orders_as_the_rule_node_by_node(trace: Path) -> None:
    """The top level's arrays (a 10 GB trace's steps have a million children: no Python list per node) give what
    the rule gives node by node: each node's children in turn, then every node by start, ties in the order given."""
    model = load_trace(str(trace))
    side = diff._side(model)
    rng = np.random.default_rng(0)
    parents = np.flatnonzero(np.diff(side.child_start) > 0)
    for nodes in (parents, rng.permutation(parents)[:40], parents[:0]):
        assert side.children_of(nodes).tolist() == [c for n in nodes.tolist() for c in side.children(n)]
    start = side.tree.start
    given = rng.permutation(side.tree.size)[:5000]
    assert diff._by_start(side.tree, given) == sorted(given.tolist(), key=lambda n: float(start[n]))
    # a real tree's nodes seldom share a start; nodes that do keep the order given
    ticks = SimpleNamespace(start=np.floor(start / 1000.0))
    assert diff._by_start(ticks, given) == sorted(given.tolist(), key=lambda n: float(ticks.start[n]))  # type: ignore[arg-type]
