"""What reloading the plugin's frame costs the browser: Chromium's CPU and the wall time per load.

Starts the real TensorBoard CLI on one run (default ``samples/transformer_bf16``), opens the plugin in headless
Chromium (Playwright), then reloads only the plugin's frame ``--loads`` times, as a user switching runs or the
browser tests' shared page does, each time until the Overview shows its average step. It prints, per load, the
wall seconds, Chromium's CPU seconds (every Chromium process) and TensorBoard's, and how many of the bundle's chunks
(plotly.js's 4.8 MB among them) came from the HTTP cache, where V8 also keeps their compiled code::

    python benchmarks/bench_frame_reload.py --loads 8
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import psutil

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run"]


def chromium_cpu() -> float:
    total = 0.0
    for proc in psutil.process_iter():
        try:
            if "chrom" in proc.name():
                t = proc.cpu_times()
                total += t.user + t.system
        except psutil.Error:
            pass
    return total


def start(logdir: Path, port: int) -> subprocess.Popen[bytes]:
    tb = Path(sys.executable).with_name("tensorboard")
    proc = subprocess.Popen([str(tb), "--logdir", str(logdir), "--port", str(port), "--host", "127.0.0.1",
                             "--profiler_cache_dir", tempfile.mkdtemp()], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/data/plugin/pytorch_profiler/runs").read()
            return proc
        except OSError:
            time.sleep(0.2)
    raise RuntimeError("TensorBoard did not answer in 120 s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--logdir", type=Path, default=Path("samples/transformer_bf16"))
    parser.add_argument("--loads", type=int, default=8)
    parser.add_argument("--port", type=int, default=6160)
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    tb = start(args.logdir, args.port)
    server = psutil.Process(tb.pid)
    asked: set[str] = set()  # the bundle's chunks the load asked for (CDP request ids)
    cached: set[str] = set()  # the requests served from the memory or disk cache
    overview = "[data-testid=overview] [data-testid=avg-step-time]"
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=args.chromium, args=ARGS, headless=True)
            context = browser.new_context(viewport={"width": 1400, "height": 900})
            page = context.new_page()
            cdp = context.new_cdp_session(page)
            cdp.send("Network.enable")
            cdp.on("Network.requestWillBeSent", lambda e: asked.add(e["requestId"])
                   if "/chunk-" in e["request"]["url"] else None)
            cdp.on("Network.requestServedFromCache", lambda e: cached.add(e["requestId"]))
            cdp.on("Network.responseReceived", lambda e: cached.add(e["requestId"])
                   if e["response"].get("fromDiskCache") else None)
            page.goto(f"http://127.0.0.1:{args.port}/#pytorch_profiler")
            page.wait_for_selector("iframe").content_frame().wait_for_selector(overview, timeout=120_000)
            for i in range(args.loads):
                c0, s0, t0 = chromium_cpu(), sum(server.cpu_times()[:2]), time.monotonic()
                asked.clear()
                page.evaluate("() => { const f = document.querySelector('iframe'); f.src = f.src; }")
                time.sleep(0.3)
                page.wait_for_selector("iframe").content_frame().wait_for_selector(overview, timeout=60_000)
                wall = time.monotonic() - t0 - 0.3
                time.sleep(1.0)  # what the load left running (charts settling) is counted too
                print(f"load {i + 1}: wall {wall:.2f} s, Chromium CPU {chromium_cpu() - c0:.2f} s, TensorBoard CPU "
                      f"{sum(server.cpu_times()[:2]) - s0:.2f} s, chunks {len(asked & cached)} of {len(asked)} "
                      "from the cache")
            browser.close()
    finally:
        os.killpg(tb.pid, signal.SIGTERM)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
