"""Any Chrome/Kineto trace, whatever its name: ``*.json[.gz]`` files are sniffed by content (CLI, Python API, and
TensorBoard behind ``--profiler_any_json``), and JSON that is not a trace is left out with a reason."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from tb_plugin.catalog.catalog import Catalog, Root
from tb_plugin.catalog.sniff import classify_file, sniff
from tb_plugin.catalog.storage import Storage
from tests.conftest import API, cpu_op, wait_until_settled, write_trace

V100 = "kineto_v100/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz"


def export_chrome_trace(real_traces: Path, target: Path) -> Path:
    """What ``prof.export_chrome_trace("trace.json")`` writes: Kineto's own JSON, uncompressed, under any name
    (the same writer as ``tensorboard_trace_handler``, which adds only the file name and gzip)."""
    return write_trace(target, raw=gzip.decompress((real_traces / V100).read_bytes()), gz=False)


def test_export_chrome_trace_output_is_a_trace(real_traces: Path, tmp_path: Path) -> None:
    path = export_chrome_trace(real_traces, tmp_path / "trace.json")
    assert classify_file(str(path)) == (None, None)


def test_hta_style_gzip_and_bare_event_arrays_are_traces(tmp_path: Path) -> None:
    hta = write_trace(tmp_path / "rank-0.json.gz", [cpu_op("aten::mm", 0, 5)])
    assert classify_file(str(hta)) == (None, None)
    # the legacy autograd profiler's export_chrome_trace: a bare array of events
    assert sniff(json.dumps([cpu_op("aten::mm", 0, 5)]).encode()) is None


def test_non_trace_json_is_rejected_with_a_reason(tmp_path: Path) -> None:
    assert sniff(b'{"lr": 0.1, "epochs": 3}', complete=True) == \
        "a JSON object without 'traceEvents', so not a Chrome/Kineto trace"
    assert "in its first" in (sniff(b'{"lr": 0.1' + b" " * 10, complete=False) or "")
    assert "execution trace" in (sniff(b'{"schema": "1.0.1", "nodes": []}') or "")
    assert sniff(b"[1, 2, 3]") == "a JSON array whose first entry is not a trace event (an object with 'ph', " \
                                  "'ts', 'name')"
    assert sniff(b"  \n") == "the file is empty"
    assert sniff(b"name,value\n") == "not JSON (it starts with b'name,value\\n')"
    assert (sniff(gzip.compress(b"{}")[:10] + b"\xff\xff\xff") or "").startswith("corrupt gzip data")
    assert sniff(gzip.compress(b"{}")[:8]) == "gzip data that inflates to nothing (cut short?)"
    assert (classify_file(str(tmp_path / "missing.json"))[1] or "").startswith("cannot read missing.json")


def test_catalog_lists_sniffed_traces_only_when_asked(real_traces: Path, tmp_path: Path) -> None:
    export_chrome_trace(real_traces, tmp_path / "run" / "trace.json")
    write_trace(tmp_path / "run" / "rank-1.json.gz", [cpu_op("aten::mm", 0, 5)])
    write_trace(tmp_path / "run" / "config.json", raw=b"{\"lr\": 0.1}")
    write_trace(tmp_path / "run" / "w.1.pt.trace.json", [cpu_op("x", 0, 1)])

    plain = Catalog([Root(None, Storage(str(tmp_path / "run")))]).scan()
    assert {f.key for f in plain} == {("run", "w", "1")}

    catalog = Catalog([Root(None, Storage(str(tmp_path / "run")))], any_json=True)
    files = catalog.scan()
    assert {f.key for f in files} == {("run", "w", "1"), ("run", "trace", "default"), ("run", "rank-1", "default")}
    assert catalog.rejected == {str(tmp_path / "run" / "config.json"):
                                "a JSON object without 'traceEvents', so not a Chrome/Kineto trace"}


def test_tensorboard_shows_any_json_traces_behind_the_flag(real_traces: Path, tmp_path: Path,
                                                           tensorboard_app) -> None:
    export_chrome_trace(real_traces, tmp_path / "logdir" / "trace.json")
    write_trace(tmp_path / "logdir" / "metrics.json", raw=b"{\"loss\": [1, 0.5]}")
    without = tensorboard_app(tmp_path / "logdir", profiler_rescan_interval=0)
    assert without.get(f"{API}/runs").get_json()["runs"] == []
    client = tensorboard_app(tmp_path / "logdir", profiler_any_json=True)
    body = wait_until_settled(client, expect_spans=1)
    span = body["runs"][0]["workers"][0]
    assert (body["runs"][0]["name"], span["name"], span["spans"][0]["state"]) == ("logdir", "trace", "ready")
    steps = client.get(f"{API}/overview?run=logdir&worker=trace&span=default").get_json()["steps"]
    assert len(steps) == 6  # the 2021 sample's six ProfilerSteps, read from a file of any name
