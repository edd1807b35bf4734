"""Memory and Module views: figures recomputed from the raw JSON of the H200 traces, and synthetic edge cases."""

from __future__ import annotations

import gzip
import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tb_plugin.analysis.memory import live_at, memory_curve, memory_events, memory_statistics
from tb_plugin.analysis.memory import memory_records as records_of
from tb_plugin.analysis.modules import module_timeline, module_view
from tb_plugin.loader import load_trace
from tests.conftest import cpu_op, parsed_trace, write_trace


def raw(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path) as fh:
        events: list[dict[str, Any]] = json.load(fh)["traceEvents"]
    return events


def memory_records(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted((e for e in events if e.get("name") == "[memory]"), key=lambda e: e["ts"])


@pytest.mark.parametrize("run", ["transformer_bf16", "resnet18_workers0", "ddp_resnet50"])
def test_memory_peaks_and_pairs_match_the_json(real_traces: Path, run: str) -> None:
    path = sorted((real_traces / "h200" / run).glob("*.gz"))[0]
    records = memory_records(raw(path))
    model = parsed_trace(path)
    curve = memory_curve(model)
    for device_type, label in ((1, "GPU0"), (0, "CPU")):
        mine = [r["args"] for r in records if r["args"]["Device Type"] == device_type
                and r["args"].get("Device Id", 0) in (0, -1)]
        if not mine:
            continue
        assert curve["devices"][label]["peak_allocated_bytes"] == max(a["Total Allocated"] for a in mine)
    # Pairs: replay allocations and frees by (device, address) here.
    pending: dict[tuple[int, int, int], int] = {}
    paired = unfreed = early_free = 0
    for r in records:
        a = r["args"]
        key = (a["Device Type"], a["Device Id"], a["Addr"])
        if a["Bytes"] > 0:
            if key in pending:
                unfreed += 1
            pending[key] = 1
        elif a["Bytes"] < 0:
            if pending.pop(key, None) is None:
                early_free += 1
            else:
                paired += 1
    unfreed += len(pending)
    rows = memory_events(model)
    assert sum(1 for r in rows if r["alloc_us"] is not None and r["free_us"] is not None) == paired
    assert sum(1 for r in rows if r["free_us"] is None) == unfreed
    assert sum(1 for r in rows if r["alloc_us"] is None) == early_free


def test_memory_statistics_allocation_totals(real_traces: Path) -> None:
    """Self allocation sizes per device add up to every allocation the trace records (owned by an operator)."""
    path = next((real_traces / "h200" / "transformer_bf16").glob("*.gz"))
    records = memory_records(raw(path))
    stats = memory_statistics(parsed_trace(path))
    gpu_alloc = sum(r["args"]["Bytes"] for r in records if r["args"]["Device Type"] == 1 and r["args"]["Bytes"] > 0)
    mine = sum(r["self_allocation_size_bytes"] for r in stats if r["device"] == "GPU0")
    assert 0.95 * gpu_alloc <= mine <= gpu_alloc  # the rest happened outside any operator
    empty = next(r for r in stats if r["name"] == "aten::empty_strided" and r["device"] == "GPU0")
    assert empty["allocation_count"] == empty["self_allocation_count"] > 0


def test_old_traces_get_statistics_but_no_curve(real_traces: Path) -> None:
    path = next((real_traces / "kineto_v100" / "resnet50_num_workers_0").glob("*.gz"))
    model = parsed_trace(path)
    curve = memory_curve(model)
    assert curve["devices"] == {} and "PyTorch < 1.10" in curve["reason"]
    assert memory_statistics(model) and memory_events(model) == []


def test_allocator_primitives_are_named_after_their_caller(tmp_path: Path) -> None:
    def mem(ts: float, nbytes: int, addr: int, total: int, device_type: int = 1, device_id: int = 0,
            tid: int = 1) -> dict[str, Any]:
        return {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 100, "tid": tid, "ts": ts,
                "s": "t", "args": {"Device Type": device_type, "Device Id": device_id, "Addr": addr, "Bytes": nbytes,
                                   "Total Allocated": total, "Total Reserved": 4096}}

    events = [
        cpu_op("aten::ones", 0, 20), cpu_op("aten::empty", 2, 5),
        mem(3, 256, addr=0xA0, total=256),          # owned by aten::empty inside aten::ones
        mem(30, -256, addr=0xA0, total=0),          # freed outside any operator
        mem(1, -64, addr=0xB0, total=0),            # free of an allocation made before the trace
        cpu_op("aten::zeros", 40, 10),
        mem(41, 128, addr=0xA0, total=128),         # the address is reused
        mem(45, 32, addr=0xC0, total=32, device_type=13, device_id=0),  # an MPS device
    ]
    model = load_trace(str(write_trace(tmp_path / "m.1.pt.trace.json", events)))
    rows = memory_events(model)
    by_time = {(r["alloc_us"], r["free_us"]): r for r in rows}
    assert by_time[(3.0, 30.0)]["name"] == "aten::ones (aten::empty)"
    assert by_time[(3.0, 30.0)]["lifetime_us"] == 27 and by_time[(3.0, 30.0)]["size_bytes"] == 256
    assert by_time[(None, 1.0)]["size_bytes"] == 64
    assert by_time[(41.0, None)]["name"] == "aten::zeros"
    assert {r["device"] for r in rows} == {"GPU0", "MPS0"}
    assert set(memory_curve(model)["devices"]) == {"GPU0", "MPS0"}
    # a range keeps what is alive across it, and says which were allocated in it and which only live in it
    assert [(r["alloc_us"], r["in_range"]) for r in memory_events(model, 10, 20)] == [(3.0, "live")]
    assert {(r["alloc_us"], r["in_range"]) for r in memory_events(model, 2, 42)} == {
        (3.0, "allocated"), (41.0, "allocated")}
    # live at an instant: allocated at or before it, not yet freed
    at3 = live_at(model, 3.0, "GPU0")
    assert [(r["alloc_us"], r["size_bytes"]) for r in at3["rows"]] == [(3.0, 256)]
    assert at3["allocated_bytes"] == 256
    assert live_at(model, 30.0, "GPU0") == {"rows": [], "allocated_bytes": 0}  # freed at 30: no longer live
    assert [r["size_bytes"] for r in live_at(model, 0.5, "GPU0")["rows"]] == [64]  # made before the trace
    stats = {(r["name"], r["device"]): r for r in memory_statistics(model)}
    ones = stats[("aten::ones", "GPU0")]
    # the free at t=1 happens inside aten::ones itself (self -64); the 256-byte allocation inside aten::empty
    assert (ones["size_increase_bytes"], ones["self_size_increase_bytes"], ones["allocation_count"]) == (192, -64, 1)
    assert stats[("aten::empty", "GPU0")]["self_allocation_size_bytes"] == 256
    # the range filter restricts the statistics too
    assert ("aten::ones", "GPU0") not in {(r["name"], r["device"]) for r in memory_statistics(model, 35, 60)}


def test_module_totals_on_the_transformer(real_traces: Path) -> None:
    path = next((real_traces / "h200" / "transformer_bf16").glob("*.gz"))
    events = raw(path)
    frames = [e for e in events if e.get("cat") == "python_function" and e["name"].startswith("nn.Module: ")]
    occurrences = Counter(e["name"][len("nn.Module: "):] for e in frames)
    host: defaultdict[str, float] = defaultdict(float)
    for e in frames:
        host[e["name"][len("nn.Module: "):]] += e["dur"]
    view = module_view(parsed_trace(path))

    def walk(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [x for n in nodes for x in [n, *walk(n["children"])]]

    nodes = {n["name"]: n for n in walk(view["modules"])}
    assert set(nodes) == set(occurrences)
    for name, node in nodes.items():
        assert node["occurrences"] == occurrences[name]
        assert node["host_total_us"] == pytest.approx(host[name], rel=1e-9)
        assert node["host_self_us"] <= node["host_total_us"]
        child_device = sum(c["device_total_us"] for c in node["children"])
        assert node["device_total_us"] == pytest.approx(node["device_self_us"] + child_device, rel=1e-9)
    encoder = nodes["TransformerEncoder_0"]
    assert [c["name"] for c in encoder["children"]] == [f"TransformerEncoderLayer_{i}" for i in range(4)]
    assert len(module_timeline(parsed_trace(path))) == len(frames)


def test_lightning_trace_has_hooks_and_modules() -> None:
    sample = next(Path(__file__).resolve().parents[2].glob("samples/lightning_mlp/*.gz"))
    events = raw(sample)
    view = module_view(parsed_trace(sample))
    assert view["framework"] == "pytorch-lightning"
    hooks = {h["name"]: h for h in view["hooks"]}
    expected = Counter(e["name"][len("[pl][profile]"):] for e in events
                       if e.get("cat") == "user_annotation" and e["name"].startswith("[pl][profile]"))
    assert {k: h["calls"] for k, h in hooks.items()} == dict(expected)
    assert view["modules"][0]["name"] == "TinyMLP_0"


def test_lightning_module_names_give_the_hierarchy(tmp_path: Path) -> None:
    events = [cpu_op("[pl][module]torch.nn.Sequential: model", 0, 100, cat="user_annotation"),
              cpu_op("[pl][module]torch.nn.Linear: model.0", 10, 30, cat="user_annotation"),
              cpu_op("[pl][module]torch.nn.Linear: model.2", 50, 30, cat="user_annotation"),
              cpu_op("[pl][module]torch.nn.Linear: model.0", 110, 20, cat="user_annotation")]
    view = module_view(load_trace(str(write_trace(tmp_path / "pl.1.pt.trace.json", events,
                                                  Framework="pytorch-lightning"))))
    (root,) = view["lightning_modules"]
    assert root["name"] == "model" and [c["name"] for c in root["children"]] == ["model.0", "model.2"]
    assert root["children"][0]["occurrences"] == 2 and root["children"][0]["host_total_us"] == 50


def test_module_backward_time_through_fwdbwd_flows(real_traces: Path) -> None:
    """Backward time of a module = its operators' autograd roots, found through fwdbwd flows (recomputed here)."""
    path = next((real_traces / "h200" / "transformer_bf16").glob("*.gz"))
    events = raw(path)
    frames = [e for e in events if e.get("cat") == "python_function" and e["name"] == "nn.Module: Linear_0"]
    cpu_ops = [e for e in events if e.get("cat") == "cpu_op"]
    starts = {(e["pid"], e["tid"], e["ts"]): e["id"] for e in events if e.get("cat") == "fwdbwd" and e["ph"] == "s"}
    finishes = {e["id"]: e for e in events if e.get("cat") == "fwdbwd" and e["ph"] == "f"}

    def inside(e: dict[str, Any], f: dict[str, Any]) -> bool:
        return e["pid"] == f["pid"] and e["tid"] == f["tid"] and f["ts"] <= e["ts"] < f["ts"] + f["dur"]

    roots: set[tuple[float, float]] = set()
    for frame in frames:
        for op in (o for o in cpu_ops if inside(o, frame)):
            flow = starts.get((op["pid"], op["tid"], op["ts"]))
            if flow is None or flow not in finishes:
                continue
            f = finishes[flow]
            enclosing = [o for o in cpu_ops if o["pid"] == f["pid"] and o["tid"] == f["tid"]
                         and o["ts"] <= f["ts"] < o["ts"] + o["dur"]]
            top = min(enclosing, key=lambda o: (o["ts"], -o["dur"]))
            roots.add((top["ts"], top["dur"]))
    expected = sum(d for _, d in roots)
    assert expected > 0

    def walk(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [x for n in nodes for x in [n, *walk(n["children"])]]

    node = next(n for n in walk(module_view(parsed_trace(path))["modules"]) if n["name"] == "Linear_0")
    assert node["backward_host_us"] == pytest.approx(expected, rel=1e-6)
    assert node["backward_device_us"] > 0


def test_device_codes_name_each_distinct_device_once() -> None:
    """Each record's code points at the label naming it would give (unknown ids, other device types); the labels
    are the distinct ones, sorted; no records, no labels."""
    from tb_plugin.analysis.memory import _device_codes, device_name

    rng = np.random.default_rng(3)
    types = rng.choice([0, 1, 6, 12, 99], 5000)
    ids_ = rng.choice([-1, 0, 1, 7], 5000)
    code, labels = _device_codes(types, ids_)
    named = [device_name(t, i) for t, i in zip(types.tolist(), ids_.tolist())]
    assert [labels[c] for c in code.tolist()] == named and labels == sorted(set(named))
    code, labels = _device_codes(np.empty(0, np.int64), np.empty(0, np.int64))
    assert len(code) == 0 and labels == []


def test_live_allocations_at_the_peak_of_a_real_trace_make_up_the_peak() -> None:
    """transformer_bf16: at the GPU peak, the allocations live then plus what was allocated before the trace (and
    not freed by then) add up to the peak exactly; the largest comes with its operator's Python stack."""
    from tests.conftest import SAMPLES

    model = parsed_trace(next((SAMPLES / "transformer_bf16").glob("*.pt.trace.json.gz")))
    gpu = memory_curve(model)["devices"]["GPU0"]
    peak = live_at(model, gpu["peak_time_us"], "GPU0")
    assert peak["allocated_bytes"] == gpu["peak_allocated_bytes"] == 706_943_488
    live = sum(r["size_bytes"] for r in peak["rows"])
    assert len(peak["rows"]) == 101 and live == 437_064_704
    rec = records_of(model)
    on = [i for i, d in enumerate(rec.device.tolist()) if rec.labels[d] == "GPU0" and rec.addr[i] >= 0]
    before_trace = int(rec.allocated[on[0]] - rec.nbytes[on[0]])  # allocated before the first record
    freed_before = sum(r["size_bytes"] for r in memory_events(model, None, None, "GPU0")
                       if r["alloc_us"] is None and r["free_us"] <= gpu["peak_time_us"])
    still_before = sum(r["size_bytes"] for r in peak["rows"] if r["alloc_us"] is None)
    assert live + before_trace - freed_before - still_before == gpu["peak_allocated_bytes"]
    sizes = [r["size_bytes"] for r in peak["rows"]]
    assert sizes == sorted(sizes, reverse=True)
    assert all(r["alloc_us"] is None or r["alloc_us"] <= gpu["peak_time_us"] for r in peak["rows"])
    assert any(r["call_stack"] and "transformer_bf16.py(" in r["call_stack"] for r in peak["rows"])


def test_each_module_names_its_forward_frame() -> None:
    """transformer_bf16 (with_stack + with_modules): a module's source is the ``forward`` frame under its
    ``nn.Module`` frame (PyTorch 2.x puts ``_call_impl`` between them): the user's own model class in the user's
    file, torch's modules in torch."""
    from tb_plugin.analysis.modules import module_view
    from tests.conftest import SAMPLES

    path = next((SAMPLES / "transformer_bf16").glob("*.pt.trace.json.gz"))
    roots = module_view(parsed_trace(path))["modules"]
    by_name = {}
    stack = list(roots)
    while stack:
        node = stack.pop()
        by_name[node["name"]] = node
        stack.extend(node["children"])
    assert by_name["TinyEncoderClassifier_0"]["source"] == "transformer_bf16.py(38): forward"
    assert by_name["Linear_8"]["source"] == "torch/nn/modules/linear.py(130): forward"
    assert by_name["TransformerEncoderLayer_2"]["source"] == "torch/nn/modules/transformer.py(799): forward"
    with gzip.open(path, "rt") as fh:
        names = {e.get("name") for e in json.load(fh)["traceEvents"] if e.get("cat") == "python_function"}
    assert all(n["source"] in names for n in by_name.values() if n["source"])
