"""The Trace view's category highlight and exact search, against the raw JSON of real traces.

A category of the Overview's step breakdown highlights exactly the events the breakdown counts in it
(``steps.category_events``); the window marks them (``hl``) in its events and boxes, also where a lane's window is
answered from its bucket summary. A quoted search is exact: ``Linear_1`` never matches ``Linear_10``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tb_plugin.analysis.communication import communication_intervals
from tb_plugin.analysis.steps import category_events, role_intervals
from tb_plugin.loader import load_trace
from tb_plugin.model import intervals as iv
from tb_plugin.timeline.details import search
from tb_plugin.timeline.index import timeline_index
from tb_plugin.timeline.window import window
from tests.conftest import API, raw_events, wait_until_settled


def _marked(answer: dict[str, Any]) -> int:
    return sum(sum(lane["events"]["hl"]) + sum(lane["boxes"]["hl"]) for tr in answer["tracks"] for lane in tr["lanes"])


def test_kernel_category_is_the_traces_kernels_but_collectives(h200_transformer: tuple[Path, Any]) -> None:
    path, model = h200_transformer
    kernels = [e for e in raw_events(path) if e.get("ph") == "X" and e.get("cat") == "kernel"]
    assert kernels and not any("nccl" in e["name"].lower() for e in kernels)
    assert int(category_events(model, "Kernel").sum()) == len(kernels)
    memcpy = [e for e in raw_events(path) if e.get("ph") == "X" and e.get("cat") == "gpu_memcpy"]
    assert int(category_events(model, "Memcpy").sum()) == len(memcpy) > 0


def test_communication_events_span_the_communication_time(real_traces: Path) -> None:
    """The events marked Communication cover exactly the time the breakdown (and the Distributed view) counts."""
    path = sorted((real_traces / "h200" / "ddp_resnet50").glob("*.gz"))[0]
    model = load_trace(str(path))
    mask = category_events(model, "Communication")
    nccl = [e for e in raw_events(path) if e.get("ph") == "X" and e.get("cat") == "kernel" and "nccl" in e["name"].lower()]
    assert int(mask.sum()) >= len(nccl) > 0
    ev = model["events"]
    ts = ev["ts"][mask]
    spans = iv.union(ts, ts + np.nan_to_num(ev["dur"][mask], nan=0.0).clip(min=0.0))
    expected = communication_intervals(model)
    assert np.array_equal(spans[0], expected[0]) and np.array_equal(spans[1], expected[1])
    assert role_intervals(model)["Communication"] is expected
    assert not (mask & category_events(model, "Kernel")).any()


def test_window_marks_exactly_the_category_events(h200_transformer: tuple[Path, Any]) -> None:
    _, model = h200_transformer
    ix = timeline_index(model)
    plain = window(model, ix.t_min, ix.t_max, 800)
    assert not any("hl" in lane["events"] or "hl" in lane["boxes"] for tr in plain["tracks"] for lane in tr["lanes"])
    for category in ("Kernel", "Runtime", "CPU Exec"):
        answer = window(model, ix.t_min, ix.t_max, 800, category=category)
        expected = int(category_events(model, category)[ix.row].sum())
        assert expected > 0 and _marked(answer) == expected, category
        for tr in answer["tracks"]:
            for lane in tr["lanes"]:
                assert len(lane["events"]["hl"]) == len(lane["events"]["id"])
                assert all(0 <= m <= c for m, c in zip(lane["boxes"]["hl"], lane["boxes"]["count"]))
    # kernels run on the GPU streams only; Other is time no event covers
    kernel = window(model, ix.t_min, ix.t_max, 800, category="Kernel")
    assert all(sum(lane["events"]["hl"]) + sum(lane["boxes"]["hl"]) == 0
               for tr in kernel["tracks"] if tr["kind"] == "cpu" for lane in tr["lanes"])
    assert _marked(window(model, ix.t_min, ix.t_max, 800, category="Other")) == 0


def test_summarised_lanes_mark_the_category_events_too(h200_transformer: tuple[Path, Any],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from tb_plugin.timeline import index as index_module
    from tb_plugin.timeline import window as window_module

    _, model = h200_transformer
    monkeypatch.setattr(index_module, "SUMMARY_MIN_EVENTS", 10)
    monkeypatch.setattr(window_module, "SUMMARY_FACTOR", 0)
    ix = index_module.timeline_index.__wrapped__(model)
    assert ix.summaries
    monkeypatch.setattr(window_module, "timeline_index", lambda _m: ix)
    for category in ("Kernel", "CPU Exec"):
        answer = window_module.window(model, ix.t_min, ix.t_max, 500, category=category)
        assert answer["px_us"] >= ix.bucket_us
        assert _marked(answer) == int(category_events(model, category)[ix.row].sum()) > 0, category


def test_quoted_search_is_exact(h200_transformer: tuple[Path, Any]) -> None:
    path, model = h200_transformer
    names = [e["name"] for e in raw_events(path) if e.get("ph") == "X"]
    # a name that is the start of another one: the substring search finds both, the exact one only itself
    short = next(n for n in sorted(set(names)) if any(m != n and m.startswith(n) for m in set(names)))
    exact = search(model, short, 0, 1000, exact=True)
    assert exact["total"] == names.count(short)
    assert {h["name"] for h in exact["items"]} == {short}
    assert search(model, short, 0, 10, exact=False)["total"] > exact["total"]
    assert search(model, short.upper(), 0, 10, exact=True)["total"] == 0  # exact is case and all


def test_routes_validate_category_and_match(tensorboard_app: Any, real_traces: Path) -> None:
    import yaml

    from tests.unit.test_openapi import SPEC_PATH, check

    spec = yaml.safe_load(SPEC_PATH.read_text())
    client = tensorboard_app(real_traces / "h200" / "transformer_bf16")
    wait_until_settled(client)
    q = "run=transformer_bf16&worker=vm_562&span=1"
    answer = client.get(f"{API}/trace/window?{q}&width_px=300&category=Memcpy").get_json()
    check(spec, "/trace/window", 200, answer)
    assert any(sum(lane["events"]["hl"]) + sum(lane["boxes"]["hl"]) for tr in answer["tracks"] for lane in tr["lanes"])
    bad = client.get(f"{API}/trace/window?{q}&category=Kernels")
    assert bad.status_code == 400 and "category" in bad.get_json()["error"]
    assert client.get(f"{API}/trace/search?{q}&q=aten::mm&match=regex").status_code == 400
    hits = client.get(f"{API}/trace/search?{q}&q=aten::mm&match=exact&limit=5").get_json()
    check(spec, "/trace/search", 200, hits)
    assert hits["total"] > 0 and {h["name"] for h in hits["items"]} == {"aten::mm"}
