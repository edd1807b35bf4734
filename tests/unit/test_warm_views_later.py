"""The first views computed by the loader after "ready" (api/warm.py ``ReadyRule``, ``Later``): when they would
delay "ready" much (a big trace), the trace turns ready with its parse and the loader adds each part to the entry as
a sealed folder of its own. Meanwhile a request for a part's views answers 409 "computing" (nothing is computed in
the server), then the stored bytes, byte for byte what a server computing them itself answers; a part that fails,
or a loader that dies, leaves them to the server; a warm restart reads every part; a damaged part is caught.

The after-ready work waits on a FIFO the test opens (``gated_views.py``), so "in progress" is deterministic; the
rule is injected (always after ready) instead of a trace big enough to need it."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tb_plugin.api import answers, warm
from tb_plugin.jobs import entries, handover
from tb_plugin.loader import load_trace
from tb_plugin.model.derived import _key
from tb_plugin.model.tables import save
from tb_plugin.timeline.index import timeline_index
from tests.conftest import API, real_trace_files, wait_until_settled
from tests.unit.gated_views import GatedViews
from tests.unit.test_warm_views import FIRST, _models, _plugin, single_runs, spans, without_stored_views

WINDOWS = ("trace/window?width_px=400", "trace/window?width_px=2000")


def _trace() -> Path:
    return next(f for f in real_trace_files() if "transformer_bf16" in str(f))


def _url(route: str, q: str) -> str:
    return f"{API}/{route}{'&' if '?' in route else '?'}{q}"


def _gated(tensorboard_app: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, fail: tuple[str, ...] = (),
           inline_events: int | None = None, **flags: Any) -> tuple[Any, dict[str, Any], Path]:
    """A server whose loader leaves every view for after ready and starts them only when the gate opens
    (``inline_events``: ``WarmViews``'; 0 forks a process per part however small the trace)."""
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    monkeypatch.setattr(answers, "PATIENCE_S", 0.05)  # while the gate is shut, a request waits this long, then 409
    monkeypatch.setattr(warm, "WarmViews", lambda peaks: GatedViews(peaks, str(gate), fail, inline_events))
    client = tensorboard_app(single_runs(tmp_path / "logdir", [_trace()]), profiler_cache_dir=str(tmp_path / "cache"),
                             **flags)
    return client, wait_until_settled(client, expect_spans=1), gate


def _open_gate(gate: Path) -> None:
    """Let the loader's after-ready work start (it reads the FIFO until this closes it)."""
    deadline = time.monotonic() + 60
    while True:
        try:
            fd = os.open(gate, os.O_WRONLY | os.O_NONBLOCK)  # ENXIO until the loader opened it for reading
            break
        except OSError:
            assert time.monotonic() < deadline, "the loader never waited at the gate"
            time.sleep(0.01)
    os.close(fd)


def _until(done: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 120
    while not done():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def _answers(client: Any, q: str, routes: tuple[str, ...]) -> dict[str, tuple[int, bytes]]:
    return {route: (r.status_code, r.data) for route in routes for r in [client.get(_url(route, q))]}


def _cold(tensorboard_app: Any, tmp_path: Path, q: str, routes: tuple[str, ...]) -> dict[str, tuple[int, bytes]]:
    """The answers of a server that computes every view itself (the same parse, no stored views)."""
    cache = without_stored_views(tmp_path / "cache", tmp_path / f"older{len(list(tmp_path.glob('older*')))}")
    client = tensorboard_app(tmp_path / "logdir", profiler_cache_dir=str(cache))
    (model,) = _models(client, wait_until_settled(client, expect_spans=1))
    assert not warm._stored(model) and not warm.awaiting_any(model)
    return _answers(client, q, routes)


def test_the_rule_puts_big_traces_views_after_ready() -> None:
    rule = warm.READY_RULE
    small = warm.schedule(430_000, 5)  # the 164 MB trace, five parts side by side: the Overview's 0.53 s
    assert small["overview"] == pytest.approx(0.53) and max(small.values()) == pytest.approx(0.53)
    # four processes: the Module page's part waits for the first to end (the index)
    assert warm.schedule(430_000, 4)["modules"] == pytest.approx(0.2 + 0.42)
    assert rule.before_ready(max(small.values()), parse_seconds=0.9)
    big = warm.schedule(5_300_000, 1)  # the 2 GB trace, one part at a time, after an 11 s parse
    # the tables and the GPU insights start after the Overview ended: they read what it handed off
    assert big["tables"] - big["overview"] == pytest.approx(0.16 * 5_300_000 / 430_000)
    assert max(big.values()) == pytest.approx((0.53 + 0.16 + 0.064 + 0.2 + 0.083) * 5_300_000 / 430_000)
    # below the handoff's size, or side by side with the Overview, they build it all themselves
    assert warm.schedule(900_000, 1)["tables"] == pytest.approx((0.53 + 0.32) * 900_000 / 430_000)
    assert list(big) == ["overview", "tables", "gpu", "timeline", "modules"]
    assert big["overview"] < big["tables"] < big["gpu"]
    assert not rule.before_ready(max(big.values()), parse_seconds=11.0)
    assert rule.before_ready(max(warm.schedule(14_000, 4).values()), parse_seconds=0.05)  # a rank of 64
    two = warm.schedule(1_000_000, 2)  # two side by side: overview then timeline, tables then gpu
    assert two["gpu"] == pytest.approx((0.32 + 0.35) * 1_000_000 / 430_000)
    assert two["timeline"] == pytest.approx((0.53 + 0.2) * 1_000_000 / 430_000)
    # the 164 MB trace: every part but the Module page's before ready (rule.after); inline, every part
    assert warm.plan(rule, 430_000, 4, 0.9) == (("overview", "tables", "gpu", "timeline"), ("modules",))
    assert warm.plan(rule, 430_000, 4, 0.9, inline=True) == (warm.PARTS, ())
    assert warm.plan(warm.ReadyRule(after=()), 430_000, 5, 0.9) == (warm.PARTS, ())
    # 2 GB: the Trace view's index (2.5 s, cheapest) fits 25 % of the parse, as it was before ready before issue 29
    assert warm.plan(rule, 5_300_000, 1, 11.0) == (("timeline",), ("overview", "tables", "gpu", "modules"))
    # a fast parse: the index still before ready (the rule's ``always``), whatever its estimate
    assert warm.plan(rule, 5_300_000, 1, 5.0) == (("timeline",), ("overview", "tables", "gpu", "modules"))
    assert warm.plan(warm.ReadyRule(always=()), 5_300_000, 1, 5.0) == ((), warm.PARTS)
    assert warm.plan(rule, 5_300_000, 1, None) == (warm.PARTS, ())  # no parse time (a benchmark): all now
    assert warm.ReadyRule(seconds=0.0, share=0.5).before_ready(5.0, parse_seconds=10.0)
    assert not warm.ReadyRule(seconds=0.0, share=0.5).before_ready(5.1, parse_seconds=10.0)


def test_save_computes_now_or_leaves_them_for_later(tmp_path: Path) -> None:
    entry = tmp_path / "entry"
    entry.mkdir()
    save(load_trace(str(_trace())), entry)
    later = warm.WarmViews(rule=warm.ReadyRule(seconds=0.0, share=0.0, always=())).save(str(entry), None, 1, parse_seconds=9.0)
    assert later is not None and list(later.parts) == list(warm.PARTS)
    assert not list(entry.glob("warm.*")) and not list(entry.glob("timeline.*"))  # nothing computed yet
    assert warm.WarmViews().save(str(entry), None, 1, parse_seconds=None) is None  # no parse time: now, as before
    assert json.loads((entry / warm.MARKER).read_text())["parts"] == list(warm.PARTS)
    assert warm.WarmViews().save(str(entry), None, 1, parse_seconds=0.5) is None  # the default rule, a small trace
    (entry / warm.MARKER).unlink()
    # only the cheapest fits (timeline: 0.2 s of 0.53 at 430k events; 20k events here): it is computed now
    events = load_trace(str(_trace())).n_events
    split = warm.ReadyRule(seconds=0.2 * events / warm.COSTS_EVENTS * 1.01, share=0.0, always=())
    later = warm.WarmViews(rule=split).save(str(entry), None, 1, parse_seconds=9.0)
    assert later is not None and list(later.parts) == ["overview", "tables", "gpu", "modules"]
    assert json.loads((entry / warm.MARKER).read_text())["parts"] == ["timeline"]


_HEAD_START = """
import json, sys, tempfile
from pathlib import Path
from tb_plugin.api import warm
cache, entry = Path(sys.argv[1]), Path(sys.argv[2])
later = warm.WarmViews(rule=warm.ReadyRule(seconds=0.0, share=0.0), inline_events=0).save(  # forked, as a big trace's
    str(entry), None, 5, parse_seconds=9.0)
started = sorted({p for p, _ in later.forks.running.values()} | set(later.forks.ended))
private = sorted(str(f.parent) for _, f in later.forks.running.values())
staged, placed, reported = [], {}, []
def stage():
    staged.append(Path(tempfile.mkdtemp(dir=cache)))
    return staged[-1]
def place(folder, part):
    placed[part] = [str(folder in staged), *sorted(p.name for p in folder.iterdir())]
    return True
later.run(stage, place, lambda part, ok: reported.append([part, ok]))
left = sorted(p.name for p in cache.iterdir() if p.name.startswith(".tmp-") and p not in staged)
print(json.dumps({"later": sorted(later.parts), "started": started, "private": private, "placed": placed,
                  "reported": sorted(reported), "left": left}))
"""


def test_the_parts_after_ready_start_beside_those_before_it(tmp_path: Path) -> None:
    """A head start: where processes and memory allow, the parts for after ready start with the index (before
    ready), in private folders of the cache; ``Later.run`` moves each into a folder it stages, with its marker, and
    places it. In a fresh process: forking needs a single thread."""
    import subprocess
    import sys

    cache = tmp_path / "cache"
    entry = cache / "entry"
    entry.mkdir(parents=True)
    save(load_trace(str(_trace())), entry)
    out = subprocess.run([sys.executable, "-c", _HEAD_START, str(cache), str(entry)], capture_output=True, text=True,
                         check=True, timeout=300)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["later"] == ["gpu", "modules", "overview", "tables"]
    assert got["started"] == ["gpu", "modules", "overview", "tables", "timeline"]  # all at once: five processes
    assert json.loads((entry / warm.MARKER).read_text())["parts"] == ["timeline"]  # before ready: the index only
    assert all(folder == str(cache) for folder in got["private"])  # the early parts' folders are the cache's
    assert got["reported"] == [["gpu", True], ["modules", True], ["overview", True], ["tables", True]]
    assert got["placed"]["overview"] == ["True", "warm.json", "warm.overview.bin", "warm.overview.json"]
    assert got["left"] == []  # the private folders were moved into the staged ones


@pytest.mark.parametrize("handed", [False, True], ids=["entry", "handed-over"])
def test_a_request_while_its_part_is_computed_answers_409_then_the_stored_bytes(
        tensorboard_app: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, handed: bool) -> None:
    """``handed``: the parse handed to the server (jobs/handover.py), the parts computed after ready on it, each in
    a process of its own (``Later.rebase``)."""
    if handed:
        monkeypatch.setattr(handover, "MIN_FILE_BYTES", 1)
    opened: list[str] = []
    real = entries.open_entry
    monkeypatch.setattr(entries, "open_entry", lambda entry, *a, **k: opened.append(entry.name) or real(entry, *a, **k))
    client, body, gate = _gated(tensorboard_app, monkeypatch, tmp_path, inline_events=0 if handed else None)
    assert bool(opened) != handed  # the server copied the entry, or mapped what was handed over
    (model,) = _models(client, body)
    (q,) = spans(body)
    assert warm.awaiting_any(model) and not warm._stored(model)  # ready with the parse, every part to come
    computed: list[str] = []
    monkeypatch.setattr(answers, "encode", lambda payload: computed.append("x") or warm.encode(payload))
    for route in (*FIRST, *WINDOWS):
        r = client.get(_url(route, q))
        assert r.status_code == 409 and r.get_json()["state"] == "computing", route
    assert not computed and _key(timeline_index, ()) not in model.memo  # nothing computed a second time here

    _open_gate(gate)
    _until(lambda: not warm.awaiting_any(model), "the parts landed")
    (entry,) = [p for p in (tmp_path / "cache").iterdir() if p.name.startswith("v")]
    assert entries.part_names(entry) == sorted(warm.PARTS)
    assert all(entries.verify(entry / f"part-{p}") is None for p in warm.PARTS)  # each sealed on its own
    assert entries.verify(entry) is None  # the entry's own manifest is untouched
    got = _answers(client, q, (*FIRST, *WINDOWS))
    assert computed.count("x") == len(WINDOWS)  # the first answers read, the windows computed
    assert _cold(tensorboard_app, tmp_path, q, (*FIRST, *WINDOWS)) == got
    assert all(status == 200 for status, _ in got.values())

    scheduler = _plugin(client).workspace.scheduler
    _plugin(client).workspace.scan_once()  # a rescan: a part added to the entry reloads nothing
    assert scheduler.counts()["parsed_here"] == 1 and _models(client, body)[0] is model

    again = tensorboard_app(tmp_path / "logdir", profiler_cache_dir=str(tmp_path / "cache"))
    (warm_model,) = _models(again, wait_until_settled(again, expect_spans=1))  # a warm restart reads every part
    assert not warm.awaiting_any(warm_model) and _key(timeline_index, ()) in warm_model.memo
    ctx = warm.context(_plugin(again).workspace.trace(*_span(body)).file, warm.NO_OVERRIDE)
    assert all(warm.has_answer(warm_model, k) for part in warm.PARTS for k, _ in warm.answers(ctx)[part])
    assert _answers(again, q, (*FIRST, *WINDOWS)) == got


def test_a_request_waits_for_its_part_to_land(tensorboard_app: Any, monkeypatch: pytest.MonkeyPatch,
                                              tmp_path: Path) -> None:
    """A request for a view whose part is still computed waits for it up to ``answers.PATIENCE_S`` (a long poll):
    the part landing meanwhile answers it at once with the stored bytes, not a 409 and the page's next ask."""
    client, body, gate = _gated(tensorboard_app, monkeypatch, tmp_path)
    (model,) = _models(client, body)
    (q,) = spans(body)
    monkeypatch.setattr(answers, "PATIENCE_S", 60.0)
    computed: list[str] = []
    monkeypatch.setattr(answers, "encode", lambda payload: computed.append("x") or warm.encode(payload))
    got: dict[str, tuple[int, bytes, float]] = {}

    def ask(route: str) -> None:
        r = client.get(_url(route, q))
        got[route] = (r.status_code, r.data, time.monotonic())

    askers = [threading.Thread(target=ask, args=(route,)) for route in ("overview", "kernels?group_by=name")]
    for thread in askers:
        thread.start()
    time.sleep(0.3)
    assert not got and all(t.is_alive() for t in askers) and warm.awaiting_any(model)  # waiting: no 409
    opened = time.monotonic()
    _open_gate(gate)
    for thread in askers:
        thread.join(120)
    assert set(got) == {"overview", "kernels?group_by=name"}
    assert all(status == 200 and at > opened for status, _, at in got.values())
    assert not computed and warm.has_answer(model, warm.key("kernels", group_by="name"))  # read from the part
    assert all(data == client.get(_url(route, q)).data for route, (_, data, _) in got.items())


def test_a_damaged_part_is_caught_and_computed_again(tensorboard_app: Any, monkeypatch: pytest.MonkeyPatch,
                                                     tmp_path: Path) -> None:
    client, body, gate = _gated(tensorboard_app, monkeypatch, tmp_path)
    (model,) = _models(client, body)
    _open_gate(gate)
    _until(lambda: not warm.awaiting_any(model), "the parts landed")
    (entry,) = [p for p in (tmp_path / "cache").iterdir() if p.name.startswith("v")]
    blob = entry / "part-tables" / "warm.tables.bin"
    data = bytearray(blob.read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size, other bytes: only the CRC-32 tells
    blob.write_bytes(bytes(data))
    again = tensorboard_app(tmp_path / "logdir", profiler_cache_dir=str(tmp_path / "cache"))
    (model2,) = _models(again, wait_until_settled(again, expect_spans=1))
    ctx = warm.context(_plugin(again).workspace.trace(*_span(body)).file, warm.NO_OVERRIDE)
    assert not any(warm.has_answer(model2, k) for k, _ in warm.answers(ctx)["tables"])
    assert all(warm.has_answer(model2, k) for k, _ in warm.answers(ctx)["overview"])
    assert entries.part_names(entry) == ["gpu", "modules", "overview", "timeline"]  # the damaged part was removed
    (q,) = spans(body)
    routes = ("operators?group_by=name", "kernels?group_by=name", "overview")
    assert _answers(again, q, routes) == _cold(tensorboard_app, tmp_path, q, routes)


def test_a_part_that_fails_is_computed_by_the_server(tensorboard_app: Any, monkeypatch: pytest.MonkeyPatch,
                                                     tmp_path: Path) -> None:
    client, body, gate = _gated(tensorboard_app, monkeypatch, tmp_path, fail=("tables",))
    (model,) = _models(client, body)
    (q,) = spans(body)
    _open_gate(gate)
    _until(lambda: not warm.awaiting_any(model), "the parts landed or failed")
    assert warm.has_answer(model, warm.key("kernels", group_by="name")) is False
    assert warm.has_answer(model, warm.key("sources")) is False
    r = client.get(_url("operators?group_by=name", q))
    assert r.status_code == 200 and r.get_json()["rows"]
    assert client.get(_url("overview", q)).status_code == 200


def test_an_entry_beyond_the_cache_bound_keeps_its_parts_until_they_land(
        tensorboard_app: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A trace whose entry alone is larger than ``--profiler_cache_max_mb`` (a 10 GB trace's 4.4 GB against the
    default 4 GB): the bound is kept once its parts landed, never by evicting the entry they land in meanwhile
    (each part then failed to land and the server computed its views: the 10 GB trace's Operator table 37 s
    after its Overview, 14 s with its part stored)."""
    client, body, gate = _gated(tensorboard_app, monkeypatch, tmp_path, inline_events=0, profiler_cache_max_mb=1)
    (model,) = _models(client, body)
    (q,) = spans(body)
    (entry,) = [p for p in (tmp_path / "cache").iterdir() if p.name.startswith("v")]
    assert entries.entry_bytes(entry) > 1 << 20
    computed: list[str] = []
    monkeypatch.setattr(answers, "encode", lambda payload: computed.append("x") or warm.encode(payload))
    _open_gate(gate)
    _until(lambda: not warm.awaiting_any(model), "the parts landed")
    ctx = warm.context(_plugin(client).workspace.trace(*_span(body)).file, warm.NO_OVERRIDE)
    assert all(warm.has_answer(model, k) for part in warm.PARTS for k, _ in warm.answers(ctx)[part])
    assert all(client.get(_url(route, q)).status_code == 200 for route in FIRST) and not computed
    _until(lambda: not entry.exists(), "the bound kept once the parts landed")
    assert f"the parse of {_trace().name} (" in caplog.text and "not kept for a restart" in caplog.text


def test_a_loader_that_dies_leaves_the_views_to_the_server(tensorboard_app: Any, monkeypatch: pytest.MonkeyPatch,
                                                           tmp_path: Path) -> None:
    client, body, _ = _gated(tensorboard_app, monkeypatch, tmp_path)
    (model,) = _models(client, body)
    (q,) = spans(body)
    assert client.get(_url("overview", q)).status_code == 409
    scheduler = _plugin(client).workspace.scheduler
    (job,) = [j for j in scheduler._jobs.values() if j.after is not None]
    os.kill(job.after.process.pid, signal.SIGKILL)  # the loader process dies before any part landed
    _until(lambda: not warm.awaiting_any(model), "the server stopped waiting for the dead loader")
    assert job.after is None
    for route in ("overview", "operators?group_by=name", WINDOWS[0]):
        assert client.get(_url(route, q)).status_code == 200, route


def _span(body: dict[str, Any]) -> tuple[str, str, str]:
    run = body["runs"][0]
    return run["name"], run["workers"][0]["name"], run["workers"][0]["spans"][0]["span"]



_EARLY = """
import json, sys, time
from pathlib import Path
from tb_plugin.api import warm
from tb_plugin.loader import load_trace
from tb_plugin.model.tables import save
trace, folder = sys.argv[1], Path(sys.argv[2])
model = load_trace(trace)
calls = []
def saved():
    # the Trace view's part runs on the parse in memory: its index lands before the model's files exist
    deadline = time.monotonic() + 60
    while not list(folder.glob("timeline.*")) and time.monotonic() < deadline:
        time.sleep(0.01)
    calls.append(sorted(p.name for p in folder.iterdir()))
    save(model, folder)
later = warm.WarmViews(inline_events=0).save(str(folder), None, 2, parse_seconds=None, built=model, saved=saved)
print(json.dumps({"later": later is None, "calls": calls, "marker": json.loads((folder / warm.MARKER).read_text())["parts"]}))
"""


def test_the_trace_views_part_starts_on_the_parse_in_memory(tmp_path: Path) -> None:
    """Given the parse as the loader built it while its files are written (``built``, ``saved``), the Trace view's
    part (tables only) starts on it at once; the other parts wait for the files; ``saved`` is called once; the index
    is the one the parse's files give. In a fresh process: forking needs a single thread."""
    import subprocess
    import sys

    from tb_plugin.timeline.stored import read_index
    from tests.unit.test_stored_index import assert_same_index

    folder = tmp_path / "entry"
    folder.mkdir()
    out = subprocess.run([sys.executable, "-c", _EARLY, str(_trace()), str(folder)], capture_output=True, text=True,
                         check=True, timeout=300)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["later"] and got["marker"] == list(warm.PARTS)
    (before,) = got["calls"]  # once, and what was there then: the index, not yet the model
    assert any(name.startswith("timeline.") for name in before) and "meta.json" not in before
    index = read_index(folder)
    assert index is not None
    assert_same_index(index, timeline_index(load_trace(str(_trace()))))
