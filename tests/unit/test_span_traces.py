"""One place answers "which ranks of a span, or why not": ``Workspace.span_ranks`` (404 / 409 / 422), and the
workspace's refusals reach the user as JSON through ``http.json_route`` alone."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from werkzeug.test import Client

from tb_plugin.api.http import json_route
from tb_plugin.workspace import LookupFailed, Workspace
from tests.conftest import API, cpu_op, wait_until_settled, write_trace


def _workspace(logdir: Path, tmp_path: Path) -> Workspace:
    return Workspace([(None, str(logdir))], cache_dir=str(tmp_path / "cache"), rescan_seconds=0)


def _settle(ws: Workspace, timeout: float = 60.0) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        states = [s["state"] for r in ws.listing() for w in r["workers"] for s in w["spans"]]
        if states and all(s in ("ready", "failed") for s in states):
            return
        time.sleep(0.05)
    raise AssertionError(f"spans did not settle: {ws.listing()}")


def _ranks(logdir: Path) -> None:
    """Run ``ddp``, span 1: workers r0 and r1 load, ``broken`` (an empty file) fails; run ``dead``: only failures."""
    write_trace(logdir / "ddp" / "r1.1.pt.trace.json", [cpu_op("aten::mm", 0, 30), cpu_op("aten::add", 40, 5)])
    write_trace(logdir / "ddp" / "r0.1.pt.trace.json", [cpu_op("aten::mm", 0, 20)])
    write_trace(logdir / "ddp" / "broken.1.pt.trace.json", raw=b"", gz=False)
    write_trace(logdir / "dead" / "a.1.pt.trace.json", raw=b"{", gz=False)
    write_trace(logdir / "dead" / "b.1.pt.trace.json", raw=b"", gz=False)


def test_span_ranks_are_the_loaded_workers_and_name_the_failed(tmp_path: Path) -> None:
    _ranks(tmp_path / "ld")
    ws = _workspace(tmp_path / "ld", tmp_path)
    try:
        ws.scan_once()
        _settle(ws)
        spanned = ws.span_ranks("ddp", "1")
        assert [f.worker for f, _ in spanned.ranks] == ["r0", "r1"]  # sorted by worker, whatever the scan order
        assert [(s.worker, s.rank) for _, s in spanned.ranks] == [("r0", 0), ("r1", 1)]
        assert spanned.failed == ["broken"]
        cases = {("nope", "1"): (404, "unknown run 'nope'"), ("ddp", "7"): (404, "run 'ddp' has no span '7'"),
                 ("dead", "1"): (422, "no worker of span 1 could be loaded")}
        for (run, span), (status, message) in cases.items():
            with pytest.raises(LookupFailed) as err:
                ws.span_ranks(run, span)
            assert (err.value.status, str(err.value)) == (status, message)
    finally:
        ws.close()


def test_span_ranks_wait_while_any_worker_loads(tmp_path: Path) -> None:
    _ranks(tmp_path / "ld")
    ws = _workspace(tmp_path / "ld", tmp_path)
    try:
        ws.scan_once()  # listed and queued: the loader has not been given time to finish
        with pytest.raises(LookupFailed) as err:
            ws.span_ranks("ddp", "1")
        assert err.value.status == 409 and str(err.value).endswith("of the 3 workers of span 1 are still loading")
    finally:
        ws.close()


def test_distributed_route_answers_with_the_span_rules(tensorboard_app: Any, tmp_path: Path) -> None:
    _ranks(tmp_path / "ld")
    client = tensorboard_app(tmp_path / "ld")
    wait_until_settled(client, expect_spans=5)
    body = client.get(f"{API}/distributed?run=ddp&span=1").get_json()
    assert [r["worker"] for r in body["ranks"]] == ["r0", "r1"]
    assert "Left out because their traces failed to load: broken." in body["notes"]
    for query, status, message in (("run=dead&span=1", 422, "no worker of span 1 could be loaded"),
                                   ("run=ddp&span=2", 404, "run 'ddp' has no span '2'"),
                                   ("run=nope&span=1", 404, "unknown run 'nope'")):
        r = client.get(f"{API}/distributed?{query}")
        assert (r.status_code, r.get_json()) == (status, {"error": message})
    # the experiment side of a diff says which side it is about
    r = client.get(f"{API}/diff?run=ddp&worker=r0&span=1&exp_run=ddp&exp_worker=broken&exp_span=1")
    assert r.status_code == 422 and r.get_json()["error"].startswith("experiment: ")
    r = client.get(f"{API}/diff?run=ddp&worker=r0&span=1&exp_run=nope&exp_worker=r0&exp_span=1")
    assert (r.status_code, r.get_json()) == (404, {"error": "experiment: unknown run 'nope'"})


def test_json_route_answers_a_lookup_failure_with_its_status() -> None:
    def handler(request: Any) -> Any:
        raise LookupFailed(409, "w.pt.trace.json is still loading")

    r = Client(json_route(handler)).get("/anything")
    assert r.status_code == 409 and r.get_json() == {"error": "w.pt.trace.json is still loading"}
    assert r.headers["X-Content-Type-Options"] == "nosniff"
