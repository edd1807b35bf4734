"""Stable span keys: a saved link names a span by its file's stamp, which stays when files are added."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from tb_plugin.catalog.names import span_keys, span_order
from tests.conftest import API, wait_until_settled, write_trace


def _trace(path: Path, name: str) -> None:
    events = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
              {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": 10, "dur": 50}]
    write_trace(path, events)
    old = time.time() - 60  # settled: not a file still being written
    os.utime(path, (old, old))


def test_spans_sort_by_number_then_by_name() -> None:
    spans = ["10", "x", "2", "²", "1"]  # "²".isdigit() is true but int() refuses it: a name like "x"
    assert sorted(spans, key=span_order) == ["1", "2", "10", "x", "²"]


def test_keys_are_stamps_unless_a_stamp_reads_as_another_label() -> None:
    assert span_keys([("1", 1623143089861), ("2", 1623143566756)]) == ["1623143089861", "1623143566756"]
    assert span_keys([("default", None)]) == ["default"]
    # stamps 2, 50, 100 are labelled 1, 2, 3: "2" is the stamp-50 file's label, so the stamp-2 file keeps "1"
    assert span_keys([("1", 2), ("2", 50), ("3", 100)]) == ["1", "50", "100"]
    assert span_keys([("1", 1), ("2", 7)]) == ["1", "7"]  # stamp 1 is its own label


def _names(client: Any, span: str) -> int:
    r = client.get(f"{API}/trace/search?run=run&worker=w&span={span}&q=from_")
    assert r.status_code == 200, r.get_json()
    return r.get_json()["items"][0]["name"]


def test_a_stamp_link_survives_an_older_file(tensorboard_app: Any, tmp_path: Path) -> None:
    logdir = tmp_path / "logdir"
    _trace(logdir / "run" / "w.100.pt.trace.json", "from_100")
    client = tensorboard_app(logdir)
    spans = wait_until_settled(client)["runs"][0]["workers"][0]["spans"]
    assert [(s["span"], s["key"]) for s in spans] == [("1", "100")]
    assert isinstance(spans[0]["mtime"], float) and spans[0]["mtime"] < time.time() - 30
    assert _names(client, "1") == _names(client, "100") == "from_100"

    _trace(logdir / "run" / "w.50.pt.trace.json", "from_50")  # older: the numbers shift
    spans = wait_until_settled(client, expect_spans=2)["runs"][0]["workers"][0]["spans"]
    assert [(s["span"], s["key"]) for s in spans] == [("1", "50"), ("2", "100")]
    assert _names(client, "100") == "from_100"  # the saved stable link still opens its file
    assert _names(client, "2") == "from_100"
    assert (_names(client, "1"), _names(client, "50")) == ("from_50", "from_50")
    missing = client.get(f"{API}/trace/search?run=run&worker=w&span=77&q=x")
    assert missing.status_code == 404 and "no span '77'" in missing.get_json()["error"]
    by_key = client.get(f"{API}/distributed?run=run&span=100")
    assert by_key.status_code == 200
    assert by_key.get_json() == client.get(f"{API}/distributed?run=run&span=2").get_json()
