"""The HTTP API through the real TensorBoard WSGI app: states, errors, headers, and no 5xx on bad input."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import API, cpu_op, spans_by_file, wait_until_settled, write_trace

BAD_FILES: dict[str, bytes] = {
    "empty.1.pt.trace.json": b"",
    "cut.1.pt.trace.json": b'{"traceEvents": [{"ph": "X", "name": "a"',
    "notgzip.1.pt.trace.json.gz": b"\x00\x01 definitely not gzip",
    "noevents.1.pt.trace.json": b'{"schemaVersion": 1}',
}


@pytest.fixture
def mixed_logdir(tmp_path: Path, real_traces: Path) -> Path:
    logdir = tmp_path / "logdir"
    good = logdir / "good"
    good.mkdir(parents=True)
    for f in (real_traces / "h200" / "resnet18_workers0").glob("*.gz"):
        shutil.copy(f, good / f.name)
    for name, raw in BAD_FILES.items():
        write_trace(logdir / "bad" / name, raw=raw, gz=False)
    truncated = gzip.compress(json.dumps({"traceEvents": [cpu_op("a", i, 1) for i in range(3000)]}).encode())
    write_trace(logdir / "bad" / "trunc.1.pt.trace.json.gz", raw=truncated[:-200], gz=False)
    write_trace(logdir / "synthetic" / "w.1.pt.trace.json", [cpu_op("aten::add", 0, 5)])
    return logdir


def test_good_runs_stay_ready_beside_broken_files(tensorboard_app: Any, mixed_logdir: Path) -> None:
    client = tensorboard_app(mixed_logdir)
    body = wait_until_settled(client, expect_spans=8)
    spans = spans_by_file(body)
    good = [s for s in spans.values() if s["run"] == "good"]
    assert [s["span"] for s in good] == ["1", "2"] and all(s["state"] == "ready" for s in good)
    assert all(s["progress"] == 1.0 and s["error"] is None for s in good)
    reasons = {
        "empty.1.pt.trace.json": "the file is empty",
        "cut.1.pt.trace.json": "JSON is cut short",
        "notgzip.1.pt.trace.json.gz": "not gzip data",
        "noevents.1.pt.trace.json": "without 'traceEvents'",
        "trunc.1.pt.trace.json.gz": "gzip data is cut short",
    }
    for name, reason in reasons.items():
        span = spans[name]
        assert span["state"] == "failed" and name in span["error"] and reason in span["error"], span
    # The failed ones answer 422 with their reason; the good ones answer.
    r = client.get(f"{API}/summary?run=bad&worker=empty&span=1")
    assert r.status_code == 422 and "the file is empty" in r.get_json()["error"]
    r = client.get(f"{API}/summary?run=good&worker=vm_562&span=1")
    assert r.status_code == 200
    assert r.get_json()["devices"][0]["name"] == "NVIDIA H200"


NOT_KINETO: dict[str, tuple[bytes, str]] = {
    "arrays.1.pt.trace.json": (b"[[1, 2, 3], [4]]", "not a Kineto trace: none of its 2 trace entries"),
    "et.1.pt.trace.json": (b'{"schema": "1.1.1-chakra.0.0.4", "nodes": [{"id": 1}]}',
                           "not a Kineto trace: a PyTorch execution trace"),
    "object.1.pt.trace.json": (b'{"version": 3, "data": []}', "not a Kineto trace: a JSON object without"),
    "nots.1.pt.trace.json": (b'{"traceEvents":[{"ph":"X","cat":"kernel","name":5,"ts":"x","dur":null}]}',
                             "no usable event"),
}


def test_json_that_is_not_a_kineto_trace_fails_with_a_reason(tensorboard_app: Any, tmp_path: Path) -> None:
    logdir = tmp_path / "ld"
    for name, (raw, _) in NOT_KINETO.items():
        write_trace(logdir / "odd" / name, raw=raw, gz=False)
    write_trace(logdir / "odd" / "empty.1.pt.trace.json", [])  # valid, just empty
    write_trace(logdir / "odd" / "bare.1.pt.trace.json", raw=json.dumps([cpu_op("aten::add", 0, 5)]).encode())
    client = tensorboard_app(logdir)
    spans = spans_by_file(wait_until_settled(client, expect_spans=len(NOT_KINETO) + 2))
    for name, (_, reason) in NOT_KINETO.items():
        span = spans[name]
        assert span["state"] == "failed" and reason in span["error"], span
        worker = name.split(".")[0]
        r = client.get(f"{API}/overview?run=odd&worker={worker}&span=1")
        assert r.status_code == 422 and reason in r.get_json()["error"]
    assert spans["empty.1.pt.trace.json"]["state"] == "ready" and spans["bare.1.pt.trace.json"]["state"] == "ready"
    assert client.get(f"{API}/overview?run=odd&worker=bare&span=1").status_code == 200


def test_summary_numbers_come_from_the_trace(tensorboard_app: Any, real_traces: Path) -> None:
    path = next((real_traces / "h200" / "transformer_bf16").glob("*.gz"))
    with gzip.open(path) as fh:
        doc = json.load(fh)
    events = doc["traceEvents"]
    timed = [e for e in events if e.get("ph") in ("X", "i") and isinstance(e.get("ts"), (int, float))]
    expected_duration = max(e["ts"] + max(e.get("dur", 0), 0) for e in timed) - min(e["ts"] for e in timed)
    client = tensorboard_app(real_traces / "h200" / "transformer_bf16")
    wait_until_settled(client)
    body = client.get(f"{API}/summary?run=transformer_bf16&worker=vm_562&span=1").get_json()
    assert body["event_counts"]["kernel"] == sum(1 for e in events if e.get("cat") == "kernel")
    assert body["event_counts"]["cpu_op"] == sum(1 for e in events if e.get("cat") == "cpu_op")
    assert body["duration_us"] == pytest.approx(expected_duration, rel=1e-9)
    assert body["metadata"]["cuda_runtime_version"] == doc["cuda_runtime_version"]
    assert body["devices"][0]["num_sms"] == 132 and body["devices"][0]["compute_capability"] == "9.0"


def test_error_statuses(tensorboard_app: Any, mixed_logdir: Path) -> None:
    client = tensorboard_app(mixed_logdir)
    wait_until_settled(client, expect_spans=8)
    cases = {
        f"{API}/summary?run=good&worker=vm_562": 400,
        f"{API}/summary?run=nope&worker=vm_562&span=1": 404,
        f"{API}/summary?run=good&worker=nope&span=1": 404,
        f"{API}/summary?run=good&worker=vm_562&span=7": 404,
        f"{API}/views": 400,
        f"{API}/views?run=nope": 404,
        f"{API}/summary?run=" + "x" * 5000 + "&worker=a&span=1": 400,
        f"{API}/summary?run=a%00b&worker=a&span=1": 400,
        f"{API}/no_such_route.js": 404,
        f"{API}/static/../../plugin.py": 404,
        f"{API}/static/..%2f..%2fplugin.py": 404,
        # paths the system refuses to look up (a name over 255 bytes, 6,000 characters in all): not a 500
        f"{API}/static/" + "a" * 6000: 404,
        f"{API}/" + "ab/" * 2000 + "x.js": 404,
        f"{API}/static/" + "é" * 200 + ".js": 404,
    }
    for url, status in cases.items():
        r = client.get(url)
        assert r.status_code == status, (url[:100], r.status_code, r.data[:200])
        assert len(r.data) < 600, url[:100]  # the error names the path, shortened
        assert r.headers["X-Content-Type-Options"] == "nosniff"
        assert r.headers["Content-Type"].startswith("application/json")
        assert isinstance(r.get_json()["error"], str)


def test_not_ready_is_409(tensorboard_app: Any, tmp_path: Path) -> None:
    from tb_plugin.workspace import LookupFailed, Workspace

    write_trace(tmp_path / "run" / "w.1.pt.trace.json", [cpu_op("x", 0, 1)])
    ws = Workspace([(None, str(tmp_path))], cache_dir=str(tmp_path / "cache"), rescan_seconds=0)
    try:
        ws.scan_once()  # listed and queued; the loader thread has not been given time to finish
        with pytest.raises(LookupFailed) as err:
            ws.trace("run", "w", "1")
        assert err.value.status == 409 and "still loading" in str(err.value)
    finally:
        ws.close()


def test_every_response_is_json_with_security_headers(tensorboard_app: Any, mixed_logdir: Path) -> None:
    client = tensorboard_app(mixed_logdir)
    wait_until_settled(client, expect_spans=8)
    for route in ("runs", "views?run=good", "summary?run=good&worker=vm_562&span=2"):
        r = client.get(f"{API}/{route}")
        assert r.status_code == 200, route
        assert r.headers["Content-Type"] == "application/json" and r.headers["X-Content-Type-Options"] == "nosniff"
    assert client.get(f"{API}/views?run=good").get_json() == {
        "views": ["Overview", "Operator", "Flame", "Kernel", "GPU", "Trace", "Memory", "Module"]}
    # a CPU-only trace has no kernels, so no Kernel view is offered
    assert client.get(f"{API}/views?run=synthetic").get_json() == {"views": ["Overview", "Operator", "Flame", "Trace"]}


def test_large_answers_are_gzipped_when_asked(tensorboard_app: Any, mixed_logdir: Path) -> None:
    client = tensorboard_app(mixed_logdir)
    wait_until_settled(client, expect_spans=8)
    r = client.get(f"{API}/runs", headers={"Accept-Encoding": "gzip"})
    assert r.headers.get("Content-Encoding") == "gzip"
    assert json.loads(gzip.decompress(r.data))["runs"][0]["name"] == "bad"


def test_plugin_is_listed_as_an_es_module(tensorboard_app: Any, mixed_logdir: Path) -> None:
    client = tensorboard_app(mixed_logdir)
    listing = client.get("/data/plugins_listing").get_json()["pytorch_profiler"]
    assert listing["enabled"] is True and listing["tab_name"] == "PyTorch Profiler"
    assert listing["loading_mechanism"] == {"type": "IFRAME", "module_path": "/data/plugin/pytorch_profiler/index.js"}
    r = client.get(f"{API}/index.js")
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/javascript")
    assert b"render" in r.data


def test_the_bundles_chunks_are_kept_by_the_browser(tensorboard_app: Any, mixed_logdir: Path) -> None:
    """The chunks esbuild names by their content (plotly.js's 4.8 MB among them) are kept by the browser without
    asking again, and so is their compiled code; the entry point, whose name stays, is fetched each time."""
    import re

    client = tensorboard_app(mixed_logdir)
    entry = client.get(f"{API}/index.js")
    assert entry.headers["Cache-Control"] == "no-cache"
    chunks = sorted(set(re.findall(rb"chunk-[A-Z0-9]{8}\.js", entry.data)))
    assert chunks, "index.js imports its chunks by their hashed names"
    for name in chunks:
        r = client.get(f"{API}/{name.decode()}")
        assert r.status_code == 200 and r.headers["Cache-Control"] == "public, max-age=31536000, immutable"
        assert r.headers["X-Content-Type-Options"] == "nosniff"  # still the plugin's own headers
    assert client.get(f"{API}/index.js.map").headers.get("Cache-Control", "no-cache") == "no-cache"


def test_path_prefix(tensorboard_app: Any, mixed_logdir: Path) -> None:
    client = tensorboard_app(mixed_logdir, path_prefix="/tb")
    listing = client.get("/tb/data/plugins_listing").get_json()["pytorch_profiler"]
    assert listing["loading_mechanism"]["module_path"] == "/tb/data/plugin/pytorch_profiler/index.js"
    assert client.get("/tb/data/plugin/pytorch_profiler/index.js").status_code == 200
    assert client.get("/tb/data/plugin/pytorch_profiler/runs").status_code == 200


def test_logdir_spec(tensorboard_app: Any, mixed_logdir: Path) -> None:
    client = tensorboard_app(None, logdir_spec=f"A:{mixed_logdir / 'good'},B:{mixed_logdir / 'synthetic'}")
    body = wait_until_settled(client, expect_spans=3)
    assert [r["name"] for r in body["runs"]] == ["A", "B"]


def test_new_and_deleted_files_show_up_without_restart(tensorboard_app: Any, tmp_path: Path) -> None:
    logdir = tmp_path / "ld"
    write_trace(logdir / "r1" / "w.1.pt.trace.json", [cpu_op("x", 0, 1)])
    client = tensorboard_app(logdir, profiler_rescan_interval=0.2)
    wait_until_settled(client, expect_spans=1)
    write_trace(logdir / "r2" / "w.5.pt.trace.json", [cpu_op("x", 0, 1)])
    body = wait_until_settled(client, expect_spans=2, timeout=20)
    assert [r["name"] for r in body["runs"]] == ["r1", "r2"]
    shutil.rmtree(logdir / "r1")
    body = wait_until_settled(client, expect_spans=1, timeout=20)
    assert [r["name"] for r in body["runs"]] == ["r2"]


def test_a_changed_file_is_parsed_again(tensorboard_app: Any, tmp_path: Path) -> None:
    logdir = tmp_path / "ld"
    path = write_trace(logdir / "r" / "w.1.pt.trace.json", [cpu_op("x", 0, 1)])
    client = tensorboard_app(logdir, profiler_rescan_interval=0.2)
    wait_until_settled(client, expect_spans=1)
    q = f"{API}/summary?run=r&worker=w&span=1"
    assert client.get(q).get_json()["event_counts"]["cpu_op"] == 1
    write_trace(path, [cpu_op("x", 0, 1), cpu_op("y", 2, 1)])
    import time

    deadline = time.time() + 20
    while time.time() < deadline:
        r = client.get(q)
        if r.status_code == 200 and r.get_json()["event_counts"]["cpu_op"] == 2:
            break
        time.sleep(0.1)
    assert client.get(q).get_json()["event_counts"]["cpu_op"] == 2


def test_old_plugin_conflict_is_reported(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from tensorboard.plugins import base_plugin

    from tb_plugin import plugin

    monkeypatch.setattr(plugin, "old_plugin_installed", lambda: True)
    assert plugin.ProfilerLoader().load(base_plugin.TBContext(logdir="/nonexistent")) is None
    err = capsys.readouterr().err
    assert "torch-tb-profiler" in err and "pip uninstall torch-tb-profiler" in err


def test_loaded_traces_are_precomputed_in_the_background(tensorboard_app: Any, tmp_path: Path) -> None:
    """The loader stores the Overview and the timeline index beside the parse (api/warm.py); an entry without them
    (an older cache) gets them built in the background as soon as the trace is ready, before any request."""
    import time

    from tb_plugin.api import warm
    from tb_plugin.timeline.index import timeline_index

    write_trace(tmp_path / "ld" / "r" / "w.1.pt.trace.json", [cpu_op("aten::add", 0, 5), cpu_op("aten::mul", 10, 5)])
    client = tensorboard_app(tmp_path / "ld")
    wait_until_settled(client, expect_spans=1)
    plugin = next(p for p in client.application._plugins if getattr(p, "plugin_name", "") == "pytorch_profiler")
    model = plugin.workspace.trace("r", "w", "1").model
    assert any("timeline_index" in str(k) for k in model.memo)
    ctx = warm.context(plugin.workspace.trace("r", "w", "1").file, warm.NO_OVERRIDE)
    assert all(warm.has_answer(model, k) for k, _ in warm.answers(ctx)["overview"])
    assert not any("overview" in str(k) for k in model.memo)  # stored: nothing computed in the server
    cache = tmp_path / "cache"
    for f in [*cache.glob("*/warm.*"), *cache.glob("*/timeline.*")]:
        f.unlink()
    client = tensorboard_app(tmp_path / "ld")
    wait_until_settled(client, expect_spans=1)
    plugin = next(p for p in client.application._plugins if getattr(p, "plugin_name", "") == "pytorch_profiler")
    model = plugin.workspace.trace("r", "w", "1").model
    deadline = time.time() + 20
    while time.time() < deadline and not any("overview" in str(k) for k in model.memo):
        time.sleep(0.05)
    assert any("timeline_index" in str(k) for k in model.memo)
    assert any("overview" in str(k) for k in model.memo)
    assert len(timeline_index(model).start) == 2


