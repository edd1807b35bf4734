"""Manual performance check of the Trace view on big traces (not collected by ``make pytest``: the file name
does not match ``test_*.py``). Run it explicitly:

    .venv/bin/python -m pytest -q -s -p no:cacheprovider tests/browser/perf_trace.py
    PTP_PERF_LOGDIR=.bench/runs/transformer_bf16_x271 .venv/bin/python -m pytest -q -s tests/browser/perf_trace.py

It starts TensorBoard on ``PTP_PERF_LOGDIR`` (default ``.bench/runs/transformer_bf16_x22``, 164 MB of JSON) with
``--profiler_cache_dir`` (``PTP_PERF_CACHE``, default /tmp/ptp-cache) so a second run skips the parse, opens the
Trace tab and measures:

- time to first paint: from the click on the Trace tab to the first frame drawn from data, cold (the first window
  of a freshly started server builds its timeline index) and warm (the tab opened again);
- frames per second during a scripted 3 s of ctrl+wheel zooming and panning (one synthetic wheel event per animation
  frame, frame intervals measured with requestAnimationFrame), with the draw time of our frames.

Targets: first paint <= 2 s (warm), >= 30 fps. Results go to test-artifacts/perf_trace.json.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser.conftest import PLUGIN, REPO, TensorBoard, open_plugin, start_tensorboard, stop_tensorboard

LOGDIR = Path(os.environ.get("PTP_PERF_LOGDIR", REPO / ".bench" / "runs" / "transformer_bf16_x22"))
CACHE = os.environ.get("PTP_PERF_CACHE", "/tmp/ptp-cache")
RESULTS = REPO / "test-artifacts" / "perf_trace.json"

SCRIPTED_NAVIGATION = """async (seconds) => {
  const scroller = document.querySelector('[data-testid=trace-scroller]');
  const canvas = document.querySelector('[data-testid=trace-canvas]');
  const rect = canvas.getBoundingClientRect();
  const hook = window.__ptpTrace;
  const before = hook.stats();
  const stamps = [];
  const longTasks = [];
  let observer = null;
  try {
    observer = new PerformanceObserver((list) => { for (const e of list.getEntries()) longTasks.push(e.duration); });
    observer.observe({ type: 'longtask', buffered: false });
  } catch { /* no long task API */ }
  const t0 = performance.now();
  await new Promise((resolve) => {
    const tick = (now) => {
      stamps.push(now);
      const p = (now - t0) / (seconds * 1000);
      if (p >= 1) { resolve(); return; }
      // zoom in around a moving point, pan, then zoom out
      const phase = p < 0.4 ? 'in' : p < 0.7 ? 'pan' : 'out';
      const x = rect.left + hook.stats().labelW + (rect.width - hook.stats().labelW) * (0.3 + 0.4 * p);
      const y = rect.top + rect.height / 2;
      const init = { bubbles: true, cancelable: true, clientX: x, clientY: y, deltaMode: 0 };
      // ctrl + wheel zooms (a plain wheel scrolls the tracks)
      const ev = phase === 'in' ? new WheelEvent('wheel', { ...init, deltaY: -30, ctrlKey: true })
               : phase === 'pan' ? new WheelEvent('wheel', { ...init, deltaY: 80, shiftKey: true })
               : new WheelEvent('wheel', { ...init, deltaY: 38, ctrlKey: true });
      scroller.dispatchEvent(ev);
      requestAnimationFrame(tick);
    };
    requestAnimationFrame(tick);
  });
  observer?.disconnect();
  const after = hook.stats();
  const gaps = stamps.slice(1).map((t, i) => t - stamps[i]).sort((a, b) => a - b);
  const q = (f) => gaps[Math.min(gaps.length - 1, Math.floor(f * gaps.length))];
  const elapsed = (stamps[stamps.length - 1] - stamps[0]) / 1000;
  const frames = after.frames - before.frames;
  return {
    seconds: elapsed,
    animation_frames: stamps.length - 1,
    fps: (stamps.length - 1) / elapsed,
    frame_interval_ms: { median: q(0.5), p95: q(0.95), max: gaps[gaps.length - 1] },
    frames_drawn: frames,
    draw_ms_mean: frames ? (after.drawMsTotal - before.drawMsTotal) / frames : null,
    windows_fetched: after.windows - before.windows,
    long_tasks: { count: longTasks.length, total_ms: longTasks.reduce((a, b) => a + b, 0), max_ms: Math.max(0, ...longTasks) },
    last_draw: after.lastDraw,
    last_window: after.lastWindow,
  };
}"""


@pytest.fixture(scope="module")
def tb_big(tmp_path_factory: pytest.TempPathFactory, frontend_built: Path) -> Iterator[TensorBoard]:
    if not LOGDIR.is_dir():
        pytest.fail(f"{LOGDIR} is missing: make the big traces with benchmarks/ first")
    tb = start_tensorboard(LOGDIR, tmp_path_factory.mktemp("perf"), "--profiler_cache_dir", CACHE)
    try:
        t0 = time.monotonic()
        tb.wait_settled(timeout=900)
        tb.extra["load_s"] = time.monotonic() - t0
        yield tb
    finally:
        stop_tensorboard(tb)



def first_paint(page: Any, frame: Any) -> dict[str, float]:
    """Click the Trace tab and time it until the first frame drawn from data."""
    frame.wait_for_selector("[data-testid=tab-Trace]")
    t0 = time.monotonic()
    frame.click("[data-testid=tab-Trace]")
    frame.wait_for_function("() => window.__ptpTrace && window.__ptpTrace.stats().firstPaintAt > 0", timeout=300_000, polling=10)
    wall = time.monotonic() - t0
    stats = frame.evaluate("() => window.__ptpTrace.stats()")
    return {"wall_s": wall, "mount_to_paint_s": stats["firstPaintMs"] / 1000, "window_fetch_ms": stats["lastFetchMs"],
            "events_drawn": stats["lastDraw"]["events"], "boxes_drawn": stats["lastDraw"]["boxes"]}


def test_trace_view_performance(page: Any, tb_big: TensorBoard, console: Any) -> None:
    frame = open_plugin(page, tb_big, f"&p.{PLUGIN}.view=info")
    cold = first_paint(page, frame)
    frame.click("[data-testid=tab-info]")
    frame.wait_for_selector("[data-testid=trace-info]")
    warm = first_paint(page, frame)
    page.wait_for_timeout(500)
    frame.wait_for_function("() => !window.__ptpTrace.stats().loading")
    nav = frame.evaluate(SCRIPTED_NAVIGATION, 3)
    runs = tb_big.get_json("runs")["runs"]
    size = sum(s["size_bytes"] for r in runs for w in r["workers"] for s in w["spans"])
    results = {"logdir": str(LOGDIR), "file_bytes": size, "server_load_s": tb_big.extra.get("load_s"),
               "cpu_count": os.cpu_count(), "load_average": os.getloadavg(),
               "first_paint_cold": cold, "first_paint_warm": warm, "navigation": nav}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2))
    assert warm["wall_s"] <= 2.0, f"first paint took {warm['wall_s']:.2f} s"
    assert nav["fps"] >= 30, f"{nav['fps']:.1f} fps while zooming and panning"
