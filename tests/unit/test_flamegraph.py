"""Flame graph: stacks from python_function nesting and from Call stack args, weights, filters, pruning, the folded
export, and agreement with torch.profiler's own ``export_stacks`` files for the same run."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tb_plugin.analysis.flamegraph import flame_search, flame_tree, folded_stacks, leaves, self_weights
from tb_plugin.analysis.operators import operator_table
from tb_plugin.analysis.stacks import FrameKind, frame_tree, function_name, python_frame_kind
from tb_plugin.loader import load_trace
from tb_plugin.model import TraceModel
from tb_plugin.model.errors import UnknownStep
from tests.conftest import API, REPO, parsed_trace, wait_until_settled, write_trace

EXPORTS = REPO / "samples" / "exports" / "transformer_bf16_exports"
EXPORTS_TRACE = REPO / "samples" / "transformer_bf16_exports" / "vm_1726.1795685563239202016.pt.trace.json.gz"
H200_TRANSFORMER = REPO / "tests" / "data" / "h200" / "transformer_bf16" / "vm_562.1795654446295758078.pt.trace.json.gz"
V100 = REPO / "tests" / "data" / "kineto_v100" / "resnet50_num_workers_0" / "worker0.1623143089861.pt.trace.json.gz"
# torch.autograd.profiler_util._filter_stack_entry: frames export_stacks leaves out
TORCH_DROPS = (("autograd/__init__", "_make_grads"), ("autograd/__init__", "backward"), ("torch/tensor", "backward"),
               ("_internal/common_utils", "prof_callable"), ("_internal/common_utils", "prof_func_call"),
               ("_internal/common_utils", "prof_meth_call"))


def ev(cat: str, name: str, ts: float, dur: float, tid: int = 1, **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": 100, "tid": tid, "ts": ts, "dur": dur, "args": args}


def py(name: str, ts: float, dur: float, pid_: int, parent: int | None) -> dict[str, Any]:
    return ev("python_function", name, ts, dur, **{"Python id": pid_, "Python parent id": parent})


def kernel(name: str, ts: float, dur: float, corr: int) -> dict[str, Any]:
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur,
            "args": {"device": 0, "stream": 7, "correlation": corr}}


def model_of(tmp_path: Path, events: list[dict[str, Any]]) -> TraceModel:
    return load_trace(str(write_trace(tmp_path / "w.1.pt.trace.json", events)))


def folded(text: str) -> dict[str, int]:
    out: Counter[str] = Counter()
    for line in text.splitlines():
        stack, weight = line.rsplit(" ", 1)
        out[stack] += int(weight)
    return dict(out)


# --------------------------------------------------------------------------------------------- synthetic, by hand

def python_trace() -> list[dict[str, Any]]:
    """train.py main → model.forward → <built-in linear> → aten::linear → aten::addmm → cudaLaunchKernel → gemm,
    plus a second call of the linear through another line, and a step annotation around it all."""
    return [
        ev("user_annotation", "ProfilerStep#1", 0, 200),
        py("train.py(10): main", 0, 200, 1, None),
        py("site-packages/mylib/model.py(5): forward", 10, 100, 2, 1),
        py("<built-in function linear>", 20, 50, 3, 2),
        ev("cpu_op", "aten::linear", 21, 48),  # self 48 - 40 = 8
        ev("cpu_op", "aten::addmm", 25, 40),  # self 40 - 10 = 30
        ev("cuda_runtime", "cudaLaunchKernel", 30, 10, correlation=5),
        kernel("gemm_kernel", 50, 70, 5),
        py("<built-in function linear>", 120, 20, 4, 1),
        ev("cpu_op", "aten::linear", 121, 15),  # self 15
        ev("cpu_op", "aten::relu", 150, 5, tid=2),  # another thread, no Python frame: a top frame
    ]


def test_python_nesting_stacks_weights_and_folded_text(tmp_path: Path) -> None:
    model = model_of(tmp_path, python_trace())
    host = folded(folded_stacks(model, "self_host_us"))
    base = "train.py(10): main;site-packages/mylib/model.py(5): forward;<built-in function linear>"
    assert host == {
        f"{base};aten::linear": 8,
        f"{base};aten::linear;aten::addmm": 30,
        f"{base};aten::linear;aten::addmm;cudaLaunchKernel": 10,
        "train.py(10): main;<built-in function linear>;aten::linear": 15,
        # the step starts inside main; its self time is what its operators leave
        "train.py(10): main;ProfilerStep#1": 200 - 48 - 15,
        "aten::relu": 5,
    }
    assert folded(folded_stacks(model, "self_device_us")) == {f"{base};aten::linear;aten::addmm;gemm_kernel": 70}
    assert folded(folded_stacks(model, "calls")) == {f"{base};aten::linear": 1, f"{base};aten::linear;aten::addmm": 1,
                                                      "train.py(10): main;<built-in function linear>;aten::linear": 1,
                                                      "aten::relu": 1, "train.py(10): main;ProfilerStep#1": 1}
    tree = frame_tree(model)
    kinds = {tree.names[int(tree.name[f])]: FrameKind(int(tree.name_kind[tree.name[f]])) for f in range(tree.size)}
    assert kinds["train.py(10): main"] == FrameKind.USER
    assert kinds["site-packages/mylib/model.py(5): forward"] == FrameKind.LIBRARY
    assert kinds["<built-in function linear>"] == FrameKind.BUILTIN
    assert kinds["aten::addmm"] == FrameKind.OPERATOR and kinds["gemm_kernel"] == FrameKind.DEVICE
    assert kinds["cudaLaunchKernel"] == FrameKind.RUNTIME and kinds["ProfilerStep#1"] == FrameKind.ANNOTATION
    assert tree.python_stacks


def test_the_tree_payload_adds_up_and_prunes(tmp_path: Path) -> None:
    model = model_of(tmp_path, python_trace())
    tree = flame_tree(model, "self_host_us", min_share=0)
    names = [tree["strings"][i] for i in tree["frames"]["name"]]
    value = dict(zip(names, tree["frames"]["value"]))  # names here are unique except the two linears
    assert tree["total"] == pytest.approx(8 + 30 + 10 + 15 + 5 + 137)
    assert value["aten::addmm"] == pytest.approx(40) and value["site-packages/mylib/model.py(5): forward"] == 48
    assert value["train.py(10): main"] == pytest.approx(48 + 15 + 137)
    parents = tree["frames"]["parent"]
    assert all(p < i for i, p in enumerate(parents))  # parents first
    for i in range(len(parents)):  # a value is its self plus its children's
        kids = sum(v for j, v in enumerate(tree["frames"]["value"]) if parents[j] == i)
        assert tree["frames"]["value"][i] == pytest.approx(tree["frames"]["self"][i] + kids)
    pruned = flame_tree(model, "self_host_us", min_share=0.1)  # 10 %: the 8 µs and 5 µs frames go
    kept = {pruned["strings"][i] for i in pruned["frames"]["name"]}
    assert "aten::relu" not in kept and "aten::addmm" in kept
    assert pruned["frames_total"] == tree["frames_total"] and pruned["total"] == tree["total"]
    assert pruned["kinds"][pruned["strings"].index("train.py(10): main")] == "user"


def test_operator_and_step_filters(tmp_path: Path) -> None:
    events = python_trace() + [ev("user_annotation", "ProfilerStep#2", 300, 100), ev("cpu_op", "aten::addmm", 310, 20),
                              ev("cuda_runtime", "cudaLaunchKernel", 312, 4, correlation=6), kernel("k2", 320, 5, 6)]
    model = model_of(tmp_path, events)
    only = folded(folded_stacks(model, "self_host_us", operator="aten::addmm"))
    base = "train.py(10): main;site-packages/mylib/model.py(5): forward;<built-in function linear>;aten::linear"
    # the second aten::addmm has no Python frame: it continues its step's chain
    assert only == {f"{base};aten::addmm": 30, f"{base};aten::addmm;cudaLaunchKernel": 10, "ProfilerStep#2;aten::addmm": 16,
                    "ProfilerStep#2;aten::addmm;cudaLaunchKernel": 4}
    step2 = self_weights(model, "self_host_us", step="2")
    assert step2.sum() == pytest.approx(100)  # ProfilerStep#2 (80 self) + aten::addmm (16) + its launch (4)
    with pytest.raises(UnknownStep, match="no step '9'"):
        self_weights(model, "self_host_us", step="9")
    assert self_weights(model, "self_host_us", operator="no such op").sum() == 0


def test_call_stack_args_of_old_traces(tmp_path: Path) -> None:
    """PyTorch 1.x: no python_function events, a ``Call stack`` arg per operator, innermost frame first."""
    stack = "torch/nn/functional.py(1847): linear;train.py(30): step;train.py(40): <module>"
    events = [
        ev("Operator", "aten::linear", 0, 50, **{"Call stack": stack}),
        ev("Operator", "aten::addmm", 5, 40, **{"Call stack": stack}),
        ev("Operator", "aten::relu", 60, 10, **{"Call stack": "train.py(31): step;train.py(40): <module>"}),
        ev("Operator", "aten::zero_", 80, 4),
    ]
    model = model_of(tmp_path, events)
    outer = "train.py(40): <module>;train.py(30): step;torch/nn/functional.py(1847): linear"
    assert folded(folded_stacks(model, "self_host_us")) == {
        f"{outer};aten::linear": 10, f"{outer};aten::linear;aten::addmm": 40,
        "train.py(40): <module>;train.py(31): step;aten::relu": 10, "aten::zero_": 4}
    merged = folded(folded_stacks(model, "self_host_us", merge=True))
    assert "train.py: <module>;train.py: step;aten::relu" in merged
    assert "train.py: <module>;train.py: step;torch/nn/functional.py: linear;aten::linear" in merged


def test_frame_names_and_kinds() -> None:
    assert function_name("<built-in method to of Tensor object at 0x7fd59cada210>") == "<built-in method to>"
    assert function_name("torch/nn/modules/module.py(1783): _call_impl") == "torch/nn/modules/module.py: _call_impl"
    assert python_frame_kind("torch/nn/modules/module.py(1783): _call_impl") == FrameKind.LIBRARY
    assert python_frame_kind("/usr/lib/python3.12/threading.py(1012): run") == FrameKind.LIBRARY
    assert python_frame_kind("/home/me/venv/lib/python3.12/site-packages/timm/x.py(3): f") == FrameKind.LIBRARY
    assert python_frame_kind("my_project/train.py(3): main") == FrameKind.USER
    assert python_frame_kind("nn.Module: Linear_0") == FrameKind.MODULE
    assert python_frame_kind("<built-in method run_backward of torch._C._EngineBase object at 0x1>") == FrameKind.BUILTIN


def test_a_frame_name_with_a_semicolon_stays_one_frame(tmp_path: Path) -> None:
    model = model_of(tmp_path, [ev("cpu_op", "weird;name\nhere", 0, 5)])
    assert folded_stacks(model, "self_host_us") == "weird_name_here 5\n"


# --------------------------------------------------------------------------------------------- real traces

def test_h200_with_stack_trace_adds_up_to_the_json() -> None:
    model = parsed_trace(H200_TRANSFORMER)
    with gzip.open(H200_TRANSFORMER) as fh:
        events = json.load(fh)["traceEvents"]
    device_sum = sum(e["dur"] for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"))
    device = flame_tree(model, "self_device_us")
    assert device["total"] == pytest.approx(device_sum, rel=1e-9)
    assert frame_tree(model).python_stacks
    host = flame_tree(model, "self_host_us")
    names = set(host["strings"])
    assert "gen_traces.py(88): transformer_run" in names and "user" in host["kinds"] and "library" in host["kinds"]
    # the operator filter's host total is that operator's host total (aten::mm never nests in aten::mm)
    (mm,) = [r for r in operator_table(model) if r["name"] == "aten::mm"]
    assert flame_tree(model, "self_host_us", operator="aten::mm")["total"] == pytest.approx(mm["host_total_us"], rel=1e-6)
    assert flame_tree(model, "self_device_us", operator="aten::mm")["total"] == pytest.approx(mm["device_total_us"],
                                                                                             rel=1e-6)
    steps = host["steps"]
    assert steps and sum(self_weights(model, "self_host_us", step=s).sum() for s in steps) <= host["total"] + 1e-6
    calls = flame_tree(model, "calls")
    n_ops = sum(1 for e in events if e.get("cat") in ("cpu_op", "user_annotation"))
    assert calls["total"] <= n_ops and calls["total"] >= 0.98 * n_ops  # folded duplicates count once
    assert len(json.dumps(host)) < 200_000


def test_v100_call_stack_trace_has_stacks() -> None:
    model = parsed_trace(V100)
    tree = flame_tree(model, "self_host_us")
    assert frame_tree(model).python_stacks
    assert "user" in tree["kinds"] or "library" in tree["kinds"]
    alloc = flame_tree(model, "alloc_bytes")
    assert alloc["total"] > 0


def _torch_stacks(name: str) -> Counter[str]:
    out: Counter[str] = Counter()
    with gzip.open(EXPORTS / name, "rt") as fh:
        for line in fh:
            stack, weight = line.rstrip("\n").rsplit(" ", 1)
            out[stack] += int(weight)
    return out


def _as_torch(model: TraceModel, weights: np.ndarray) -> Counter[str]:
    """Our stacks written the way export_stacks writes them: Python frames only (torch's stack has no operator or
    kernel frames), its dropped frames left out, spaces as underscores."""
    tree = frame_tree(model)
    out: Counter[str] = Counter()
    python = {FrameKind.USER, FrameKind.LIBRARY, FrameKind.BUILTIN, FrameKind.MODULE, FrameKind.OTHER}
    for f in np.flatnonzero(weights > 0).tolist():
        names, k = [], f
        while k >= 0:
            text = tree.names[int(tree.name[k])]
            if FrameKind(int(tree.name_kind[tree.name[k]])) in python and \
                    not any(a in text and b in text for a, b in TORCH_DROPS):
                names.append(text.replace(" ", "_"))
            k = int(tree.parent[k])
        if names:
            out[";".join(reversed(names))] += float(weights[f])
    return out


def test_folded_host_stacks_agree_with_torch_export_stacks() -> None:
    """The same run's ``export_stacks(metric="self_cpu_time_total")``. torch writes each event's self time cut to
    whole µs (sub-µs events vanish): done the same way per event, the totals agree within 1 %; ours exact lies
    between torch's total and torch's plus 1 µs per event. The heaviest stack is the same, within 0.1 %."""
    model = parsed_trace(EXPORTS_TRACE)
    torch_stacks = _torch_stacks("stacks.self_cpu_time_total.txt.gz")
    torch_total = sum(torch_stacks.values())
    lv = leaves(model, "self_host_us", False)
    exact = _as_torch(model, np.bincount(lv.frame, weights=lv.weight, minlength=frame_tree(model).size))
    ours_total = sum(exact.values())
    assert torch_total <= ours_total <= torch_total + len(lv.weight)
    truncated = _as_torch(model, np.bincount(lv.frame, weights=np.floor(lv.weight), minlength=frame_tree(model).size))
    assert sum(truncated.values()) == pytest.approx(torch_total, rel=0.01)  # 78,916 against 78,555 µs
    (top, weight), = torch_stacks.most_common(1)
    assert exact.most_common(1)[0][0] == top and exact[top] == pytest.approx(weight, rel=0.001)
    # every heavy stack of torch's is one of ours
    for stack, _ in torch_stacks.most_common(15):
        assert stack in exact
    # the folded text's own total is the flame graph's
    text_total = sum(folded(folded_stacks(model, "self_host_us")).values())
    assert text_total == pytest.approx(flame_tree(model, "self_host_us")["total"], rel=0.002)


def test_folded_device_stacks_against_torch_export_stacks() -> None:
    """torch's ``self_cuda_time_total`` also counts the GPU-side copies of annotations (``gpu_user_annotation``:
    ProfilerStep#N, forward, optimizer) as device time of whichever operator shares their correlation id; we count
    kernels, memcpy and memset only. Those spans explain torch's three heaviest stacks."""
    model = parsed_trace(EXPORTS_TRACE)
    with gzip.open(EXPORTS_TRACE) as fh:
        events = json.load(fh)["traceEvents"]
    annotations = [e["dur"] for e in events if e.get("cat") == "gpu_user_annotation"]
    device_sum = sum(e["dur"] for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"))
    torch_stacks = _torch_stacks("stacks.self_cuda_time_total.txt.gz")
    ours = _as_torch(model, self_weights(model, "self_device_us"))
    assert sum(ours.values()) == pytest.approx(device_sum, rel=1e-9)
    assert sum(torch_stacks.values()) > sum(annotations)  # torch's total includes the annotation spans
    step_spans = sum(e["dur"] for e in events if e.get("cat") == "gpu_user_annotation"
                     and e["name"].startswith("ProfilerStep#"))
    (top, weight), = torch_stacks.most_common(1)
    assert weight - ours[top] == pytest.approx(step_spans, rel=0.01)  # torch's heaviest: the ProfilerStep spans
    shared = sum(v for k, v in ours.items() if k in torch_stacks)
    assert shared >= 0.99 * sum(ours.values())  # torch has the stacks of (nearly) all our device time


# --------------------------------------------------------------------------------------------- the route

@pytest.mark.parametrize(("path", "metric", "drawn", "key"), [(H200_TRANSFORMER, "self_host_us", 7, "host_total_us"),
                                                            (V100, "self_device_us", 0, "device_total_us")])
def test_search_counts_frames_too_thin_to_draw(path: Path, metric: str, drawn: int, key: str) -> None:
    """Searching "aten::mm" finds every frame, drawn or not: its weight is the Operator view's total and the folded
    export's (on the V100 trace its one device frame is too thin to draw: the drawn tree alone says 0)."""
    model = parsed_trace(path)
    found = flame_search(model, metric, False, None, None, "ATEN::MM")
    (mm,) = [r for r in operator_table(model) if r["name"] == "aten::mm"]
    assert found["value"] == pytest.approx(mm[key], abs=1e-6)
    folded = sum(int(line.rsplit(" ", 1)[1]) for line in folded_stacks(model, metric).splitlines()
                 if "aten::mm" in line.rsplit(" ", 1)[0].split(";"))
    assert found["value"] == pytest.approx(folded, abs=found["count"])  # folded weights are whole µs
    assert found["drawn"] == drawn < found["count"]
    tree = flame_tree(model, metric)
    shown = [tree["strings"][n] for n in tree["frames"]["name"]].count("aten::mm")
    assert shown == drawn
    assert flame_search(model, metric, False, None, None, "no such frame")["count"] == 0


def test_flamegraph_route_json_folded_and_errors(tensorboard_app: Any, tmp_path: Path) -> None:
    write_trace(tmp_path / "logs" / "run" / "w.1.pt.trace.json", python_trace())
    client = tensorboard_app(tmp_path / "logs")
    wait_until_settled(client, expect_spans=1)
    base = f"{API}/flamegraph?run=run&worker=w&span=1"
    r = client.get(f"{base}&metric=self_device_us")
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("application/json")
    body = r.get_json()
    assert body["total"] == 70 and body["unit"] == "us" and body["python_stacks"] is True
    r = client.get(f"{base}&metric=self_device_us&format=folded")
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/plain")
    assert r.get_data(as_text=True) == ("train.py(10): main;site-packages/mylib/model.py(5): forward;"
                                         "<built-in function linear>;aten::linear;aten::addmm;gemm_kernel 70\n")
    r = client.get(f"{base}&merge=function&format=folded&operator=aten::relu")
    assert r.get_data(as_text=True) == "aten::relu 5\n"
    for query, status, words in (("&metric=wall", 400, "must be one of"), ("&format=svg", 400, "must be one of"),
                                 ("&step=7", 404, "no step"), ("&min_share=2", 400, "at most")):
        r = client.get(base + query)
        assert r.status_code == status and words in r.get_json()["error"], query
    assert "Flame" in client.get(f"{API}/views?run=run").get_json()["views"]
    found = client.get(f"{API}/flamegraph/search?run=run&worker=w&span=1&metric=self_device_us&q=GEMM").get_json()
    assert (found["count"], found["drawn"], found["value"], found["total"]) == (1, 1, 70, 70)  # gemm_kernel
    assert client.get(f"{API}/flamegraph/search?run=run&worker=w&span=1").status_code == 400
    assert client.get(f"{API}/flamegraph/search?run=run&worker=w&span=1&q=x&step=7").status_code == 404


@pytest.mark.parametrize("path", [H200_TRANSFORMER, REPO / "tests" / "data" / "h200" / "mlp_compiled" /
                                  "vm_814.1795654526231503865.pt.trace.json.gz"])
def test_innermost_python_frame_is_the_sweeps_answer(path: Path) -> None:
    """The vectorised lookup (searchsorted, then up the parent chain) against the model's time sweep."""
    from tb_plugin.analysis.stacks import innermost_python
    from tb_plugin.model.optree import host_tree, innermost_containing

    model = parsed_trace(path)
    ev, tree = model["events"], host_tree(model)
    rows = model["python"]["row"]
    start = ev["ts"][rows]
    end = start + np.nan_to_num(ev["dur"][rows], nan=0.0)
    pid, tid = ev["pid"][tree.rows], ev["tid"][tree.rows]
    swept = innermost_containing(ev["pid"][rows], ev["tid"][rows], start, end, pid, tid, tree.start)
    ours = innermost_python(model, pid, tid, tree.start)
    assert (swept >= 0).sum() > 1000
    assert np.array_equal(ours, swept)


def test_an_operator_without_its_own_call_stack_takes_the_python_frames_around_it(tmp_path: Path) -> None:
    """A 2.x trace may write a ``Call stack`` arg on some operators only; the others still get their stack from the
    ``python_function`` frames, and both spell the same frames, so they meet in one tree."""
    events = [
        py("train.py(10): main", 0, 100, 1, None),
        py("<built-in function linear>", 10, 30, 2, 1),
        ev("cpu_op", "aten::linear", 11, 20, **{"Call stack": "<built-in function linear>;train.py(10): main"}),
        py("<built-in function relu>", 50, 30, 3, 1),
        ev("cpu_op", "aten::relu", 51, 20),
    ]
    model = model_of(tmp_path, events)
    assert folded(folded_stacks(model, "self_host_us")) == {
        "train.py(10): main;<built-in function linear>;aten::linear": 20,
        "train.py(10): main;<built-in function relu>;aten::relu": 20}
    assert flame_tree(model, "self_host_us")["frames"]["parent"][:1] == [-1]
    assert sum(1 for p in flame_tree(model, "self_host_us")["frames"]["parent"] if p == -1) == 1  # one main
