"""The Memory view's snapshot mode in the real TensorBoard: the recorded out-of-memory snapshot opens on its
out-of-memory moment, a hovered band tells the user frame that made it, a click pins it with its neighbours, zoom
asks for a finer window; a refused pickle is an error card naming the file, and a trace's Memory view links to
the snapshots of its run. Numbers are checked against the plugin's JSON routes."""

from __future__ import annotations

import json
import os
import pickle
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from tests.browser.conftest import PLUGIN, SAMPLES, TensorBoard, link_or_copy, open_plugin
from tests.conftest import write_trace
from tests.snapshots import write
from tests.unit.test_snapshot import RunsCode, fragmenting

pytestmark = pytest.mark.browser

(OOM_FILE,) = sorted((SAMPLES / "memory_snapshot" / "oom").glob("memory_snapshot_oom_*.pickle.gz"))
VIEW = "[data-testid=snapshot-view]"


@pytest.fixture(scope="module")
def tb_snap(tmp_path_factory: pytest.TempPathFactory, tb_factory: Callable[..., TensorBoard]) -> TensorBoard:
    root = tmp_path_factory.mktemp("logdir_snapshots")
    link_or_copy(OOM_FILE, root / "oom" / OOM_FILE.name)
    write(fragmenting().dump(), root / "mixed" / "fragmented.pickle")
    write({"segments": [], "device_traces": [[{"action": "alloc", "frames": [RunsCode(root / "pwned")]}]]},
          root / "mixed" / "evil.pickle")
    write_trace(root / "mixed" / "w.1.pt.trace.json", [
        {"ph": "X", "cat": "cpu_op", "name": "aten::empty", "pid": 1, "tid": 1, "ts": 0, "dur": 5},
        {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": 1, "s": "t",
         "args": {"Device Type": 1, "Device Id": 0, "Addr": 4096, "Bytes": 512, "Total Allocated": 512,
                  "Total Reserved": 2097152}}])
    old = time.time() - 60
    for path in root.rglob("*.pickle"):
        os.utime(path, (old, old))
    tb = tb_factory(root)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        runs = tb.get_json("runs")["runs"]
        files = [s for r in runs for s in r["snapshots"]] + [s for r in runs for w in r["workers"] for s in w["spans"]]
        if len(files) == 4 and all(f["state"] in ("ready", "failed") for f in files):
            return tb
        time.sleep(0.3)
    raise AssertionError(json.dumps(tb.get_json("runs"))[:2000])


def open_snapshot(page: Any, tb: TensorBoard, run: str, name: str) -> Any:
    p = f"p.{PLUGIN}"
    frame = open_plugin(page, tb, f"&{p}.run={run}&{p}.worker={name}&{p}.span=snapshot&{p}.view=Memory")
    frame.wait_for_selector("[data-testid=tab-Memory][aria-selected=true]")
    return frame


def summary_of(tb: TensorBoard, run: str, name: str) -> Any:
    return tb.get_json(f"snapshot/summary?{urlencode({'run': run, 'snapshot': name})}")


def wait_bands(frame: Any) -> list[dict[str, Any]]:
    frame.wait_for_function("() => (window.__ptpSnapshot?.bandsOnScreen() ?? []).length > 0 && "
                            "document.querySelector('[data-testid=snapshot-chart]').dataset.loading === 'false'")
    bands: list[dict[str, Any]] = frame.evaluate("() => window.__ptpSnapshot.bandsOnScreen()")
    return bands


def test_the_oom_snapshot_opens_on_its_oom_and_a_hovered_band_tells_its_user_frame(page: Any, tb_snap: TensorBoard) -> None:
    summary = summary_of(tb_snap, "oom", OOM_FILE.name)
    oom = summary["oom"]
    frame = open_snapshot(page, tb_snap, "oom", OOM_FILE.name)
    frame.wait_for_selector(VIEW)
    assert frame.eval_on_selector(VIEW, "el => el.dataset.position") == str(oom["position"])
    banner = frame.inner_text("[data-testid=snapshot-oom]")
    assert "Out of memory" in banner and "asked for 512 MiB" in banner and "Live data" in banner
    assert "set_per_process_memory_fraction" in banner
    frame.wait_for_function(f"() => document.querySelector('[data-testid=card-snapshot-live]')?.dataset.position === '{oom['position']}'")
    assert frame.eval_on_selector("[data-testid=card-snapshot-live]", "el => el.dataset.bytes") == str(oom["live_bytes"])
    assert "(the out-of-memory)" in frame.inner_text("[data-testid=snapshot-live-head]")

    bands = wait_bands(frame)
    biggest = max(bands, key=lambda b: b["w"] * b["h"])
    frame.eval_on_selector("[data-testid=snapshot-canvas]", "el => el.scrollIntoView({block: 'center'})")
    box = frame.query_selector("[data-testid=snapshot-canvas]").bounding_box()
    page.mouse.move(box["x"] + biggest["x"] + biggest["w"] / 2, box["y"] + biggest["y"] + biggest["h"] / 2)
    tip = frame.wait_for_selector("[data-testid=snapshot-tooltip] [data-testid=snapshot-tip-frame]")
    assert tip.inner_text().strip() == biggest["frame"] == "memory_snapshot.py:57 forward"
    # the stack comes a moment later: the user's frames first, library frames dimmed
    frame.wait_for_selector("[data-testid=snapshot-tooltip] [data-testid=frame][data-kind=user]")
    kinds = frame.eval_on_selector_all("[data-testid=snapshot-tooltip] [data-testid=frame]", "els => els.map(e => e.dataset.kind)")
    assert kinds[0] == "user"

    page.mouse.click(box["x"] + biggest["x"] + biggest["w"] / 2, box["y"] + biggest["y"] + biggest["h"] / 2)
    pinned = frame.wait_for_selector("[data-testid=snapshot-pinned-summary]")
    assert pinned.get_attribute("data-id") == str(biggest["id"])
    frame.wait_for_selector("[data-testid=card-snapshot-allocation] [data-testid=snapshot-neighbour]")
    assert frame.eval_on_selector("[data-testid=snapshot-view]", "el => el.dataset.pinned") == str(biggest["id"])


def test_zoom_asks_for_a_finer_window_and_the_whole_history_comes_back(page: Any, tb_snap: TensorBoard) -> None:
    frame = open_snapshot(page, tb_snap, "oom", OOM_FILE.name)
    wait_bands(frame)
    chart = "[data-testid=snapshot-chart]"
    frame.eval_on_selector("[data-testid=snapshot-canvas]", "el => el.scrollIntoView({block: 'center'})")
    assert frame.eval_on_selector(chart, "el => el.dataset.start") == "0"
    box = frame.query_selector("[data-testid=snapshot-canvas]").bounding_box()
    page.mouse.move(box["x"] + box["width"] * 0.6, box["y"] + 150)
    page.mouse.wheel(0, -300)
    frame.wait_for_function(f"() => document.querySelector('{chart}').dataset.start !== '0' && "
                            f"document.querySelector('{chart}').dataset.loading === 'false'")
    start, end = (int(frame.eval_on_selector(chart, f"el => el.dataset.{k}")) for k in ("start", "end"))
    positions = summary_of(tb_snap, "oom", OOM_FILE.name)["positions"]
    assert 0 < start < end < positions - 1 and end - start < positions * 0.7
    frame.click("[data-testid=snapshot-reset]")
    frame.wait_for_function(f"() => document.querySelector('{chart}').dataset.start === '0' && "
                            f"document.querySelector('{chart}').dataset.end === '{positions - 1}'")


def test_snapshots_are_picked_like_workers_and_a_refused_one_says_why(page: Any, tb_snap: TensorBoard) -> None:
    frame = open_snapshot(page, tb_snap, "mixed", "evil.pickle")
    card = frame.wait_for_selector("[data-testid=error-card]")
    assert "evil.pickle: refused: it asks to import posix.system" in card.inner_text()
    options = frame.eval_on_selector_all("[data-testid=snapshot-options] option", "els => els.map(e => e.value)")
    assert options == ["evil.pickle", "fragmented.pickle"]
    assert frame.eval_on_selector_all("[data-testid=tabs] [role=tab]", "els => els.map(e => e.dataset.view)") == ["Memory"]
    frame.select_option("[data-testid=worker-select]", "fragmented.pickle")
    frame.wait_for_selector(VIEW)
    assert frame.eval_on_selector("[data-testid=snapshot-oom]", "el => el.dataset.reason") == "fragmentation"
    assert "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" in frame.inner_text("[data-testid=snapshot-findings]")
    frame.wait_for_selector("[data-testid=snapshot-segment]")
    head = frame.eval_on_selector("[data-testid=snapshot-segments-head]", "el => ({...el.dataset})")
    assert head == {"testid": "snapshot-segments-head", "free": str(52 << 20), "largest": str(4 << 20)}
    # the trace of the same run: its Memory view links to the run's snapshots
    frame.select_option("[data-testid=worker-select]", "w")
    frame.click("[data-testid=tab-Memory]")
    link = frame.wait_for_selector("[data-testid=memory-snapshot-link] >> text=fragmented.pickle")
    link.click()
    frame.wait_for_selector(VIEW)
    assert frame.eval_on_selector(VIEW, "el => el.dataset.file") == "fragmented.pickle"
    assert not (Path(tb_snap.logdir) / "pwned").exists()
    assert pickle is not None  # the refused file was written with pickle; it never ran
