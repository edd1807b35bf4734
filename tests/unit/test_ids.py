"""Process and thread ids as traces in the wild write them: negative (Kineto writes ``tid: -549452224`` on
``cuda_runtime`` and flow events), 64-bit, float-valued and textual, never colliding, in every view."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from tb_plugin.loader import load_trace
from tb_plugin.model import ids
from tests.conftest import every_span_route, wait_until_settled, write_trace

NEG = -549452224
U64 = 18446744073709551615  # a 64-bit thread handle, beyond int64


def odd_ids_trace() -> list[dict[str, Any]]:
    launch = {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 100, "tid": NEG, "ts": 20,
              "dur": 5, "args": {"correlation": 5, "External id": 9}}
    kernel = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 30, "dur": 40,
              "args": {"device": 0, "stream": 7, "correlation": 5, "External id": 9}}
    return [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 100, "tid": NEG, "ts": 10,
         "dur": 100, "args": {}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 100, "tid": NEG, "ts": 15, "dur": 20,
         "args": {"External id": 9}},
        launch, kernel,
        {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 5, "pid": 100, "tid": NEG, "ts": 20, "bp": "e"},
        {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 5, "pid": 0, "tid": 7, "ts": 30, "bp": "e"},
        {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 100, "tid": U64, "ts": 40, "dur": 3, "args": {}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mul", "pid": 100, "tid": 7.0, "ts": 50, "dur": 3, "args": {}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::sub", "pid": 100, "tid": "7", "ts": 60, "dur": 3, "args": {}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::div", "pid": 100, "tid": "7 loader", "ts": 70, "dur": 3,
         "args": {}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::neg", "pid": 100, "tid": 2.5, "ts": 80, "dur": 3, "args": {}},
        # "²".isdigit() is true, but int("²") raises: it is a textual id (it once failed the whole load)
        {"ph": "X", "cat": "cpu_op", "name": "aten::abs", "pid": 100, "tid": "-²", "ts": 90, "dur": 3, "args": {}},
        {"ph": "M", "name": "thread_name", "pid": 100, "tid": NEG, "args": {"name": "runtime thread"}},
        {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler", "pid": "Spans", "tid": "PyTorch Profiler",
         "ts": 0, "dur": 200, "args": {}},
    ]


def test_ids_keep_their_value_and_never_collide(tmp_path: Path) -> None:
    model = load_trace(str(write_trace(tmp_path / "ids.pt.trace.json", odd_ids_trace())))
    ev = model["events"]
    tid = {model.strings[n]: int(t) for n, t in zip(ev["name"], ev["tid"])}
    assert tid["cudaLaunchKernel"] == NEG and tid["aten::mm"] == NEG  # a negative number is a number
    assert tid["aten::mul"] == 7 and tid["aten::sub"] == 7  # 7.0 and "7" are thread 7
    texts = {name: ids.display(model.strings, tid[name]) for name in ("aten::add", "aten::div", "aten::neg",
                                                                      "aten::abs")}
    assert texts == {"aten::add": str(U64), "aten::div": "7 loader", "aten::neg": "2.5", "aten::abs": "-²"}
    assert all(ids.is_text(np.array([tid[n]]))[0] for n in texts)
    assert len({tid[n] for n in ("aten::add", "aten::div", "aten::neg", "aten::mul", "aten::mm")}) == 5
    flows = model["flows"]
    assert sorted(flows["tid"].tolist()) == [NEG, 7]


def test_every_route_answers_on_odd_ids(tensorboard_app: Any, tmp_path: Path) -> None:
    write_trace(tmp_path / "ld" / "odd" / "w.1.pt.trace.json", odd_ids_trace())
    client = tensorboard_app(tmp_path / "ld")
    body = wait_until_settled(client, expect_spans=1)
    assert body["runs"][0]["workers"][0]["spans"][0]["state"] == "ready"
    statuses = every_span_route(client, body)
    assert {url: s for url, s in statuses.items() if s != 200} == {}
    q = "run=odd&worker=w&span=1"
    window = client.get(f"/data/plugin/pytorch_profiler/trace/window?{q}&width_px=2000").get_json()
    labels = {t["label"] for t in window["tracks"]}
    assert {"runtime thread", f"thread {U64}", "thread 7", "thread 7 loader", "thread 2.5"} <= labels, labels
    runtime = next(t for t in window["tracks"] if t["label"] == "runtime thread")
    assert runtime["tid"] == NEG
    assert next(t for t in window["tracks"] if t["label"] == f"thread {U64}")["tid"] == str(U64)
    assert window["flows"], "the launch on the negative thread is joined to its kernel"
    hits = client.get(f"/data/plugin/pytorch_profiler/trace/search?{q}&q=cudaLaunchKernel").get_json()
    assert hits["total"] == 1
    event = client.get(f"/data/plugin/pytorch_profiler/trace/event?{q}&id={hits['items'][0]['id']}").get_json()
    assert event["tid"] == NEG and event["pid"] == 100
    assert [k["name"] for k in event["launched"]] == ["k"]
