"""Hostile and odd files and clients (issue 10): each costs one span or one answer, with a one-line reason; never a
hang, a 500, a stack trace or a file from outside the catalog."""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from werkzeug.http import parse_options_header

from tests.conftest import API, cpu_op, spans_by_file, wait_until_settled, write_trace


def _old(path: Path) -> Path:
    """Make a path look finished to the catalog (older than its settle time); works on FIFOs and links too."""
    old = time.time() - 60
    os.utime(path, (old, old), follow_symlinks=False)
    return path


def _query(run: str, worker: str, span: str = "1") -> str:
    return urlencode({"run": run, "worker": worker, "span": span})


def _plugin(client: Any) -> Any:
    return next(p for p in client.application._plugins if getattr(p, "plugin_name", "") == "pytorch_profiler")


# ---- 1. non-regular files and stuck loads -------------------------------------------------------------------------

def test_fifos_fail_at_once_and_leave_the_loader_free(tensorboard_app: Any, tmp_path: Path) -> None:
    """Two FIFOs named like traces and one loader process: the good run still loads (they never take the slot)."""
    logdir = tmp_path / "ld"
    write_trace(logdir / "good" / "w.1.pt.trace.json", [cpu_op("aten::add", 0, 5)])
    (logdir / "pipes").mkdir()
    for name in ("a.1.pt.trace.json", "b.1.pt.trace.json.gz"):
        os.mkfifo(logdir / "pipes" / name)
        _old(logdir / "pipes" / name)
    client = tensorboard_app(logdir, profiler_workers=1)
    spans = spans_by_file(wait_until_settled(client, expect_spans=3, timeout=30))
    assert spans["w.1.pt.trace.json"]["state"] == "ready", spans["w.1.pt.trace.json"]
    for name in ("a.1.pt.trace.json", "b.1.pt.trace.json.gz"):
        span = spans[name]
        assert span["state"] == "failed" and span["progress"] == 0.0
        assert span["error"] == f"{name}: not a regular file but a FIFO (named pipe); it is not loaded"
    started = time.monotonic()
    r = client.get(f"{API}/trace/file?{_query('pipes', 'a')}")
    assert r.status_code == 422 and "not a regular file" in r.get_json()["error"]
    assert time.monotonic() - started < 5


def test_the_loader_refuses_a_fifo_without_blocking(tmp_path: Path) -> None:
    """Should a FIFO replace a file after the listing, opening it neither blocks nor reads it."""
    from tb_plugin.loader import TraceLoadError, load_trace

    os.mkfifo(tmp_path / "p.1.pt.trace.json")
    with pytest.raises(TraceLoadError, match=r"^p\.1\.pt\.trace\.json: cannot read the file \(not a regular file"):
        load_trace(str(tmp_path / "p.1.pt.trace.json"))


def test_a_load_past_the_time_limit_fails_and_frees_its_slot(tensorboard_app: Any, tmp_path: Path) -> None:
    logdir = tmp_path / "ld"
    write_trace(logdir / "big" / "w.1.pt.trace.json", [cpu_op(f"op{i % 50}", i, 1) for i in range(200_000)])
    client = tensorboard_app(logdir, profiler_workers=1, profiler_load_timeout=0.2)
    span = spans_by_file(wait_until_settled(client, expect_spans=1, timeout=30))["w.1.pt.trace.json"]
    assert span["state"] == "failed"
    assert span["error"].startswith("w.1.pt.trace.json: loading took longer than 0.2 s and was stopped")
    assert "--profiler_load_timeout" in span["error"]
    scheduler = _plugin(client).workspace.scheduler
    job = next(iter(scheduler._jobs.values()))
    assert job.process is None  # killed: the one loader slot is free again
    assert scheduler.cache.failure(job.entry) is None  # a stalled load may go through later: not remembered
    scheduler.load_timeout = None
    write_trace(logdir / "small" / "w.1.pt.trace.json", [cpu_op("aten::add", 0, 5)])
    spans = spans_by_file(wait_until_settled(client, expect_spans=2, timeout=30))
    assert [s["state"] for s in spans.values()].count("ready") == 1


def test_a_negative_load_timeout_is_refused() -> None:
    import argparse

    from tensorboard.plugins import base_plugin

    from tb_plugin.plugin import ProfilerLoader

    with pytest.raises(base_plugin.FlagsError, match="--profiler_load_timeout"):
        ProfilerLoader().fix_flags(argparse.Namespace(profiler_load_timeout=-1))


# ---- 2. /trace/file serves only what loaded as a trace ------------------------------------------------------------

SECRET = b"root:x:0:0:root:/root:/bin/bash\n"


def test_a_link_to_a_non_trace_is_never_served(tensorboard_app: Any, tmp_path: Path) -> None:
    secret = tmp_path / "outside" / "passwd"
    secret.parent.mkdir()
    secret.write_bytes(SECRET)
    logdir = tmp_path / "ld"
    (logdir / "run").mkdir(parents=True)
    os.symlink(secret, logdir / "run" / "x.1.pt.trace.json")
    _old(secret)
    client = tensorboard_app(logdir)
    span = spans_by_file(wait_until_settled(client, expect_spans=1))["x.1.pt.trace.json"]
    assert span["state"] == "failed" and "not valid JSON" in span["error"]
    r = client.get(f"{API}/trace/file?{_query('run', 'x')}")
    assert r.status_code == 422 and SECRET not in r.data and r.get_json()["error"].startswith("x.1.pt.trace.json")


def test_an_error_about_a_linked_outside_json_shows_none_of_its_keys(tensorboard_app: Any, tmp_path: Path) -> None:
    """A link to a JSON file outside the logdir fails, and its card says so without the file's key names (they are
    its content: ``aws_secret_access_key`` says what the file holds)."""
    outside = tmp_path / "outside" / "credentials.json"
    outside.parent.mkdir()
    outside.write_text(json.dumps({"aws_secret_access_key": "x", "db_password_prod": "y"}))
    logdir = tmp_path / "ld"
    (logdir / "run").mkdir(parents=True)
    os.symlink(outside, logdir / "run" / "x.1.pt.trace.json")
    _old(outside)
    client = tensorboard_app(logdir)
    span = spans_by_file(wait_until_settled(client, expect_spans=1))["x.1.pt.trace.json"]
    assert span["state"] == "failed"
    assert span["error"] == "x.1.pt.trace.json: not a Kineto trace: a JSON object without 'traceEvents'"
    body = client.get(f"{API}/runs").get_data(as_text=True) + client.get(f"{API}/summary?{_query('run', 'x')}").get_data(
        as_text=True)
    assert "aws_secret" not in body and "db_password" not in body


def test_a_link_retargeted_after_loading_is_not_served(tensorboard_app: Any, tmp_path: Path) -> None:
    secret = tmp_path / "outside" / "passwd"
    secret.parent.mkdir()
    secret.write_bytes(SECRET)
    good = write_trace(tmp_path / "outside" / "good.json", [cpu_op("aten::add", 0, 5)])
    logdir = tmp_path / "ld"
    (logdir / "run").mkdir(parents=True)
    link = logdir / "run" / "x.1.pt.trace.json"
    os.symlink(good, link)
    client = tensorboard_app(logdir, profiler_rescan_interval=0)  # scan once: the listing keeps the old version
    wait_until_settled(client, expect_spans=1)
    assert client.get(f"{API}/trace/file?{_query('run', 'x')}").data == good.read_bytes()
    for target in (secret, tmp_path / "outside" / "fifo"):
        if target.name == "fifo":
            os.mkfifo(target)
        os.unlink(link)
        os.symlink(target, link)
        r = client.get(f"{API}/trace/file?{_query('run', 'x')}")
        assert r.status_code == 409 and SECRET not in r.data
        assert r.get_json()["error"].startswith("x.1.pt.trace.json changed since it was loaded")


def test_trace_file_answers_409_while_loading_and_404_for_unknown(tensorboard_app: Any, tmp_path: Path) -> None:
    from tb_plugin.workspace import LookupFailed, Workspace

    write_trace(tmp_path / "run" / "w.1.pt.trace.json", [cpu_op("x", 0, 1)])
    ws = Workspace([(None, str(tmp_path))], cache_dir=str(tmp_path / "cache"), rescan_seconds=0)
    try:
        ws.scan_once()
        with pytest.raises(LookupFailed) as err:
            ws.trace("run", "w", "1")
        assert err.value.status == 409
    finally:
        ws.close()
    client = tensorboard_app(tmp_path)
    assert client.get(f"{API}/trace/file?{_query('nope', 'w')}").status_code == 404


# ---- 3. download names: RFC 6266 -------------------------------------------------------------------------------

@pytest.mark.parametrize(("worker", "saved_as"), [
    ("工作者", "工作者.1.pt.trace.json.gz"),
    ('say "hi"; x=1', 'say "hi"; x=1.1.pt.trace.json.gz'),
    ("new\nline", "new_line.1.pt.trace.json.gz"),
    ("back\\slash", "back\\slash.1.pt.trace.json.gz"),
])
def test_download_names_survive_any_characters(tensorboard_app: Any, tmp_path: Path, worker: str,
                                               saved_as: str) -> None:
    """A name the header cannot hold as it is gets ``filename*=UTF-8''...`` and an ASCII fallback; a newline (which
    no header may hold) is listed like any name and saved as ``_``."""
    path = write_trace(tmp_path / "ld" / "run" / f"{worker}.1.pt.trace.json.gz", [cpu_op("aten::add", 0, 5)])
    client = tensorboard_app(tmp_path / "ld")
    span = spans_by_file(wait_until_settled(client, expect_spans=1))[path.name]
    assert span["state"] == "ready" and span["worker"] == worker
    r = client.get(f"{API}/trace/file?{_query('run', worker)}")
    assert r.status_code == 200 and r.data == path.read_bytes()
    assert r.headers["Content-Type"] == "application/gzip" and r.headers["Content-Length"] == str(len(r.data))
    header = r.headers["Content-Disposition"]
    header.encode("ascii")  # any server can send it
    disposition, options = parse_options_header(header)
    assert disposition == "attachment" and options["filename"] == saved_as
    assert json.dumps(header).count("\\n") == 0


# ---- 5. empty traces, odd device ids --------------------------------------------------------------------------

VIEW_ROUTES = ("summary", "overview", "operators", "kernels", "memory/curve", "memory/events", "memory/stats",
               "modules", "modules/timeline", "trace/window", "trace/search?q=a", "trace/range?start_us=0&end_us=9",
               "trace/file")


@pytest.mark.parametrize("events", [[], [{"ph": "i", "name": "x", "ts": 5, "pid": 1, "tid": 1, "s": "t"}]],
                         ids=["no_events", "one_instant"])
def test_an_empty_trace_answers_every_route(tensorboard_app: Any, tmp_path: Path, events: list[Any]) -> None:
    write_trace(tmp_path / "ld" / "run" / "w.1.pt.trace.json", events)
    client = tensorboard_app(tmp_path / "ld")
    assert spans_by_file(wait_until_settled(client, expect_spans=1))["w.1.pt.trace.json"]["state"] == "ready"
    for route in VIEW_ROUTES:
        sep = "&" if "?" in route else "?"
        r = client.get(f"{API}/{route}{sep}{_query('run', 'w')}")
        assert r.status_code == 200, (route, r.data[:300])
    window = client.get(f"{API}/trace/window?{_query('run', 'w')}").get_json()
    assert window["t1"] > window["t0"] and not any(lane for t in window["tracks"] for lane in t["lanes"])


def test_a_non_numeric_device_is_an_unknown_device_not_gpu_minus_1(tensorboard_app: Any, tmp_path: Path) -> None:
    import yaml

    from tests.unit.test_openapi import SPEC_PATH, check

    events = [
        cpu_op("aten::mm", 0, 50, **{"External id": 1}),
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 100, "tid": 1, "ts": 1, "dur": 2,
         "args": {"correlation": 7, "External id": 1}},
        # no numeric device and no pid to take it from (a device event's pid is its device): unknown
        {"ph": "X", "cat": "kernel", "name": "gemm", "pid": "?", "tid": 7, "ts": 10, "dur": 20,
         "args": {"device": "x", "stream": 7, "correlation": 7, "External id": 1}},
        {"ph": "X", "cat": "kernel", "name": "gemm2", "tid": 7, "ts": 40, "dur": 20, "args": {"device": 0}},
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 100, "tid": 1, "ts": 0, "dur": 100},
        {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 100, "tid": 1, "ts": 3, "s": "t",
         "args": {"Device Type": 1, "Device Id": "x", "Addr": 1, "Bytes": 1 << 20, "Total Allocated": 1 << 20,
                  "Total Reserved": 2 << 20}},  # (a counter under 1 KiB is empty: not drawn)
    ]
    write_trace(tmp_path / "ld" / "run" / "w.1.pt.trace.json", events)
    client = tensorboard_app(tmp_path / "ld")
    wait_until_settled(client, expect_spans=1)
    q = _query("run", "w")
    overview = client.get(f"{API}/overview?{q}").get_json()
    check(yaml.safe_load(SPEC_PATH.read_text()), "/overview", 200, overview)
    assert sorted(g["id"] is None for g in overview["gpus"]) == [False, True]
    counters = [c["name"] for c in client.get(f"{API}/trace/window?{q}").get_json()["counters"]]
    assert "GPU (unknown device) utilization" in counters and "GPU (unknown device) memory allocated" in counters
    assert list(client.get(f"{API}/memory/curve?{q}").get_json()["devices"]) == ["GPU (unknown device)"]
    for route in VIEW_ROUTES[:-1]:
        sep = "&" if "?" in route else "?"
        body = client.get(f"{API}/{route}{sep}{q}").get_data(as_text=True)
        assert "GPU -1" not in body and "GPU-1" not in body and "process -1" not in body, route


# ---- 6. injection in exports: the offline report ---------------------------------------------------------------

LINK = '<a href="https://evil.example/">click</a>'


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in _strings(v)]
    return []


def test_report_charts_show_html_in_names_as_text(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """plotly draws labels, legends and hover text as HTML: an operator, kernel or worker named with a link must
    reach the charts escaped (shown as the text it is), never as a live ``<a href>``."""
    import plotly.io as pio

    import tb_plugin
    from tb_plugin.cli import report
    from tests.unit.test_views_synthetic import kernel, launch, step

    events = [step(1, 0, 100), cpu_op(LINK, 1, 60), launch(2, 5, 1), kernel(f"<img src=x onerror=alert(1)>{LINK}", 10,
                                                                                50, 1)]
    for worker in ("<b>w", "<i>v"):  # two ranks: the Distributed chart names them
        write_trace(tmp_path / "ld" / "a" / f"{worker}.1.pt.trace.json", events)
    figures: list[Any] = []
    real = pio.to_html

    def keep(figure: Any, *args: Any, **kwargs: Any) -> str:
        figures.append(figure)
        return real(figure, *args, **kwargs)

    monkeypatch.setattr(report.pio, "to_html", keep)
    report.render(tb_plugin.open(tmp_path / "ld" / "a", cache_dir=str(tmp_path / "cache")))
    labels = [s for figure in figures for trace in figure.to_plotly_json()["data"] for s in _strings(trace)]
    assert len(figures) == 6  # steps, categories, operators, kernels, GPU idle time per stream, ranks
    assert any("&lt;a href=&quot;https://evil.example/&quot;&gt;click" in s for s in labels)
    assert "&lt;b&gt;w" in labels and "&lt;img src=x onerror=alert(1)&gt;&lt;a href=&quot;https://evil.example/&quot;…" in labels
    assert not [s for s in labels if "<a " in s or "<img" in s or "<b>" in s]


# ---- 7. a client sweeping parameter values: memory stays bounded -------------------------------------------------

def test_a_thousand_distinct_parameter_values_grow_the_server_less_than_100_mb(tensorboard_app: Any,
                                                                             real_traces: Path) -> None:
    """Each distinct ``limit`` of /launch_stats (``max_points`` of /memory_bandwidth, /queue_length, …) used to
    keep its whole answer on the model for good: 1.8 GB after 1,000 such requests on this 8,772-kernel trace, and
    an OOM-killed server on a bigger one. The analyses now memoise their parameter-free tables and cut them per
    request; only encoded answers are kept, within one byte budget (``model.memo.ANSWERS``)."""
    import gc
    import shutil

    import psutil

    logdir = Path(tensorboard_app.cache_dir).parent / "ld"
    shutil.copytree(real_traces / "kineto_v100" / "resnet50_num_workers_0", logdir / "v100")
    client = tensorboard_app(logdir)
    wait_until_settled(client, expect_spans=2)
    q = _query("v100", "worker0")

    def rss() -> float:
        gc.collect()
        return float(psutil.Process().memory_info().rss) / 1e6

    routes = ("launch_stats?limit={}", "memory_bandwidth?max_points={}", "queue_length?max_points={}",
              "idle?kernel_wait_us={}", "kernel_sequences?length={}&top={}", "memory/curve?max_points={}")
    for route in routes:  # the parameter-free tables every value shares
        assert client.get(f"{API}/{route.split('?')[0]}?{q}").status_code == 200
    before = rss()
    for i in range(1000):
        route = routes[i % len(routes)]
        values = ((2 + i % 15, 1 + i % 200) if "top=" in route else
                  (i / 7,) if "kernel_wait" in route else (10_000 - i,))
        r = client.get(f"{API}/{route.format(*values)}&{q}")
        assert r.status_code == 200, (route, r.data[:200])
    grown = rss() - before
    assert grown < 100, f"the server grew {grown:.0f} MB over 1,000 requests with distinct parameter values"
    stats = client.get(f"{API}/launch_stats?limit=3&{q}").get_json()
    assert len(stats["rows"]) == 3 and stats["total_rows"] == 8772  # still the whole table behind every cut


# ---- 8. unbounded inputs: bombs fail fast, once --------------------------------------------------------------------

_BLOCK = 1 << 20


def _gzip_bomb(path: Path, head: bytes, fill: bytes, blocks: int, tail: bytes) -> Path:
    """A valid gzip file of ``head``, ``blocks`` MiB of ``fill`` and ``tail``, written as it is made: each MiB is
    deflated once after a full flush (which makes every later one the same bytes), so a 10 GiB bomb takes a
    second and 10 MB of disk, and its inflated bytes are never held."""
    try:
        from isal.isal_zlib import crc32
    except ImportError:  # pragma: no cover - where ISA-L is not installed: zlib's, slower
        from zlib import crc32
    import zlib

    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = fill * (_BLOCK // len(fill))
    first = deflate.compress(head) + deflate.flush(zlib.Z_FULL_FLUSH)
    deflate.compress(block)
    repeated = deflate.flush(zlib.Z_FULL_FLUSH)
    crc = crc32(head)
    with path.open("wb") as out:
        out.write(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff" + first)
        for _ in range(blocks):
            out.write(repeated)
            crc = crc32(block, crc)
        out.write(deflate.compress(tail) + deflate.flush(zlib.Z_FINISH))
        size = len(head) + blocks * len(block) + len(tail)
        out.write((crc & 0xFFFFFFFF).to_bytes(4, "little") + (size & 0xFFFFFFFF).to_bytes(4, "little"))
    return _old(path)


def _tree_cpu() -> float:
    """CPU seconds of this process and of its descendants, those still running and those they waited for (the
    loader processes, through the fork server that starts them)."""
    import psutil

    def spent(process: psutil.Process) -> float:
        t = process.cpu_times()
        return float(t.user + t.system + t.children_user + t.children_system)

    total = spent(psutil.Process())
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):  # ended meanwhile: counted by its parent, which waited for it
            total += spent(child)
    return total


def test_a_bomb_under_the_spill_size_is_refused_in_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bomb's first megabyte promises more text than ``read.SPILL_BYTES``, which would be inflated into a scratch
    file; but its limit (100 times its size) is below that size: it is refused in memory, where the limit stops it,
    without writing the limit's worth of text to a file first (1 GiB written took the loader 3 s, more on a busy
    disk)."""
    from tb_plugin.loader import TraceLoadError, read
    from tb_plugin.loader.limits import Limits

    monkeypatch.setattr(read, "SPILL_BYTES", 64 << 20)
    monkeypatch.setattr(read, "_PROBE_BYTES", 64 << 10)  # the ratio of the first 64 KiB (of a 256 KiB file)
    spilled: list[str] = []
    real = read._spill
    monkeypatch.setattr(read, "_spill", lambda *args: spilled.append("spill") or real(*args))
    bomb = _gzip_bomb(tmp_path / "blank.1.pt.trace.json.gz", b'{"traceEvents": [', b" ", 256, b"]}")  # 256 MiB
    assert read.projected_size(bomb.read_bytes()) > read.SPILL_BYTES
    with pytest.raises(TraceLoadError, match="this looks like a decompression bomb"):
        read.decompress(bomb.read_bytes(), bomb.name, Limits(scratch_dir=str(tmp_path)))
    assert spilled == [] and list(tmp_path.iterdir()) == [bomb]
    big = Limits(always_inflate_bytes=128 << 20, scratch_dir=str(tmp_path))  # a limit above the spill size: spilled
    with pytest.raises(TraceLoadError, match="this looks like a decompression bomb"):
        read.decompress(bomb.read_bytes(), bomb.name, big)
    assert spilled == ["spill"]


def test_bombs_fail_fast_once_and_never_hold_up_a_good_trace(tensorboard_app: Any, tmp_path: Path) -> None:
    """A 1 MB gzip whose one event has a 1 GiB name, 10 MB of gzip that inflate to 10 GiB of zeros, a 10 MB
    gzip of ``{"traceEvents": [`` and 10 GiB of spaces, and 1 GiB of zeros named like a trace: each used to cost
    a loader gigabytes and minutes (and the name, once "ready", 12 GB of server for the Overview), with a good
    trace waiting behind them. Now each fails in well under a second, with its reason on its card, on one loader
    process, while the good trace loads; and a restart remembers the failures instead of loading them again."""
    logdir = tmp_path / "ld"
    write_trace(logdir / "good" / "w.1.pt.trace.json", [cpu_op("aten::add", 0, 5), cpu_op("aten::mm", 9, 5)])
    bombs = logdir / "bombs"
    bombs.mkdir(parents=True)
    _gzip_bomb(bombs / "name.1.pt.trace.json.gz", b'{"traceEvents": [{"ph": "X", "name": "', b"a", 1024,
               b'", "pid": 1, "tid": 1, "ts": 0, "dur": 1}]}')
    _gzip_bomb(bombs / "zeros.1.pt.trace.json.gz", b"", b"\0", 10 * 1024, b"")
    _gzip_bomb(bombs / "blank.1.pt.trace.json.gz", b'{"traceEvents": [', b" ", 10 * 1024, b"]}")
    with (bombs / "raw.1.pt.trace.json").open("wb") as out:
        out.truncate(1 << 30)  # 1 GiB of zeros (sparse: it costs the disk nothing)
    _old(bombs / "raw.1.pt.trace.json")
    assert (bombs / "name.1.pt.trace.json.gz").stat().st_size < 1.2e6
    assert (bombs / "zeros.1.pt.trace.json.gz").stat().st_size < 11e6

    client = tensorboard_app(logdir, profiler_workers=1)
    started, cpu = time.monotonic(), _tree_cpu()
    spans = spans_by_file(wait_until_settled(client, expect_spans=5, timeout=60))
    took, cpu = time.monotonic() - started, _tree_cpu() - cpu
    assert spans["w.1.pt.trace.json"]["state"] == "ready"
    errors = {name: spans[name]["error"] for name in spans if name != "w.1.pt.trace.json"}
    assert all(spans[name]["state"] == "failed" for name in errors)

    def bomb(name: str) -> str:
        size = (bombs / name).stat().st_size
        return (f"{name}: refused: its {size / 2**20:,.0f} MiB of gzip data inflate to more than "
                f"{100 * size / 2**20:,.0f} MiB, over 100 times their size (traces compress 5 to 30 times; this looks "
                "like a decompression bomb)")

    assert errors == {
        "name.1.pt.trace.json.gz": bomb("name.1.pt.trace.json.gz"),
        "blank.1.pt.trace.json.gz": bomb("blank.1.pt.trace.json.gz"),
        "zeros.1.pt.trace.json.gz": "zeros.1.pt.trace.json.gz: not valid JSON: its gzip data holds neither an "
                                    "object nor an array (its first byte opens no JSON value)",
        "raw.1.pt.trace.json": "raw.1.pt.trace.json: not valid JSON: the file is neither an object nor an array "
                               "(its first byte opens no JSON value)",
    }
    # on the shared 2-core machine the wall time follows the others' load; the CPU the loader spent does not
    assert cpu < 10, f"five spans took {cpu:.1f} s of CPU to settle"
    assert took < 15, f"five spans settled in {took:.1f} s"

    restarted = tensorboard_app(logdir, profiler_workers=1)  # the same parse cache
    again = spans_by_file(wait_until_settled(restarted, expect_spans=5, timeout=30))
    assert {name: again[name]["error"] for name in errors} == errors and again["w.1.pt.trace.json"]["state"] == "ready"
    assert _plugin(restarted).workspace.scheduler.counts()["parsed_here"] == 0  # nothing loaded again


def test_long_names_are_shown_shortened_and_given_whole_on_demand(tensorboard_app: Any, tmp_path: Path) -> None:
    """A name of 300,000 characters (two of them, alike but for their end) is shown cut at 8,192 characters, with
    its length and a checksum, in every answer (the Overview used to repeat a name five times, whole); the two stay
    two operators; the event's details give the whole name, also after a restart (read from the parse cache)."""
    long_a, long_b = "x" * 299_999 + "a", "x" * 299_999 + "b"
    stack = ";".join(f"frame_{i}.py({i}): f{i}" for i in range(2_000))  # a call stack of 40 k characters
    events = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0,
               "dur": 100}, cpu_op(long_a, 1, 10, **{"Call stack": stack}), cpu_op(long_b, 20, 30)]
    write_trace(tmp_path / "ld" / "run" / "w.1.pt.trace.json", events)
    for attempt in range(2):  # the second server opens the cached parse
        client = tensorboard_app(tmp_path / "ld")
        wait_until_settled(client, expect_spans=1)
        q = _query("run", "w")
        for route in ("overview", "operators", "trace/window", "trace/search?q=xxx", "summary"):
            body = client.get(f"{API}/{route}{'&' if '?' in route else '?'}{q}").get_data(as_text=True)
            assert len(body) < 120_000 and long_a not in body and long_b not in body, route
        rows = client.get(f"{API}/operators?{q}").get_json()["rows"]
        shown = sorted(r["name"] for r in rows if r["name"].startswith("xxx"))
        assert len(shown) == 2 and shown[0] != shown[1]
        assert all(s.startswith("x" * 8192 + "… [300,000 characters, #") and len(s) < 8250 for s in shown)
        hits = client.get(f"{API}/trace/search?{q}&q=xxx").get_json()["items"]
        details = {d["full_name"]: d for d in (client.get(f"{API}/trace/event?{q}&id={h['id']}").get_json()
                                              for h in hits)}
        assert sorted(details) == [long_a, long_b], attempt
        assert details[long_a]["name"] in shown and "\n".join(details[long_a]["call_stack"]) == stack.replace(";", "\n")
        assert "full_name" not in client.get(f"{API}/trace/event?{q}&id=0").get_json()  # a short name is whole
