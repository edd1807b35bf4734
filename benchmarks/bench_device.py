#!/usr/bin/env python3
"""Side by side through the real TensorBoard CLI: this plugin and torch-tb-profiler 0.4.3 on the same traces.

    python benchmarks/bench_device.py --ours PY --old PY --trace NAME=PATH [--trace ...] --out DIR

``PY`` is a Python whose environment has TensorBoard and one of the two plugins (never both: they register the
same name); TensorBoard is started as ``PY -m tensorboard.main``. Per trace, each on a fresh logdir holding only
that file:

- **ours, cold** (a fresh ``--profiler_cache_dir``): seconds from TensorBoard's start to its first HTTP answer and
  to the span's ``ready``; the peak memory of the process tree, as PSS (``/proc/PID/smaps_rollup``, summed; pages
  shared by forked processes counted once) and as RSS summed; the latency of ``/runs`` while it parses (polled every
  50 ms, as the page does); then, right after ``ready``, each view route once in turn (the first, cold answer of
  every view), the Trace view's first window, and window latencies at several zooms.
- **ours, warm restart**: the same logdir and cache directory again: time to ``ready`` from the parse cache.
- **ours, crowd** (``--crowd N``, the traces named by ``--crowd-trace``): a fresh cache, and N clients requesting
  every view route at once the moment the span is ready (``bench_crowd.crowd``).
- **old 0.4.3, cold**: time to its run being listed and loaded (its ``/runs`` says ``loading: false``), peak PSS
  and RSS; stopped after ``--old-timeout`` seconds ("not ready").

Every step runs under a time limit and logs to stderr as it goes; results go to ``DIR/bench_device.json`` and a
table to stdout. ``benchmarks/bench_device.sh`` builds both environments and the traces on a bare machine.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_crowd import _stats, crowd, get, view_routes  # noqa: E402
from bench_load import TreeSampler, _runs_state, free_port, machine_info  # noqa: E402

API = "/data/plugin/pytorch_profiler"


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


class Server:
    """``PY -m tensorboard.main`` on ``logdir`` (and ``cache`` for ours), with its memory sampled."""

    def __init__(self, python: str, logdir: Path, cache: Path | None, log_path: Path) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}{API}"
        cmd = [python, "-m", "tensorboard.main", "--logdir", str(logdir), "--host", "127.0.0.1", "--port",
               str(self.port), "--load_fast=false"]
        if cache is not None:
            cmd += ["--profiler_cache_dir", str(cache)]
        self.log = open(log_path, "a")  # noqa: SIM115 - closed in stop()
        self.t0 = time.perf_counter()
        self.process = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, cwd=str(logdir),
                                        start_new_session=True)
        self.sampler = TreeSampler(self.process.pid, interval=0.1, pss=True)
        self.sampler.start()

    def wait_ready(self, timeout: float) -> dict[str, Any]:
        """Poll ``/runs`` every 50 ms: first answer, ready, and the latency of each answer while loading."""
        first = None
        latencies: list[float] = []
        doc: Any = None
        state = None
        while time.perf_counter() - self.t0 < timeout:
            if self.process.poll() is not None:
                return {"state": f"exited {self.process.returncode}"}
            t = time.perf_counter()
            try:
                status, body = get(f"{self.base}/runs", timeout=10)
                took = time.perf_counter() - t
                if status == 200:
                    first = first if first is not None else time.perf_counter() - self.t0
                    latencies.append(took)
                    doc = _json(body)
                    state = _runs_state(doc)
                    if state:
                        break
            except (urllib.error.URLError, ConnectionError, OSError, ValueError):
                pass
            time.sleep(0.05)
        ready = time.perf_counter() - self.t0
        out: dict[str, Any] = {"state": state or "timeout", "first_http_s": first,
                               "ready_s": ready if state == "ready" else None,
                               "ready_after_first_http_s": ready - first if state == "ready" and first else None,
                               "peak_pss_mb_to_ready": self.sampler.peak_pss / 1e6,
                               "peak_rss_mb_to_ready": self.sampler.peak / 1e6, "runs_doc": doc}
        if latencies:
            out["runs_latency"] = {**_stats(latencies), "n": len(latencies)}
        return out

    def stop(self) -> dict[str, float]:
        time.sleep(0.3)  # one more sample: memory can still grow right after ready
        self.sampler.stop()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, 9)  # the session this benchmark started for it, nothing else
        self.process.wait(10)
        self.log.close()
        return {"peak_pss_mb": self.sampler.peak_pss / 1e6, "peak_rss_mb": self.sampler.peak / 1e6}


def _json(body: bytes) -> Any:
    """A JSON answer, gunzipped when the server sent it gzipped (``get`` asks for gzip, as browsers do)."""
    return json.loads(gzip.decompress(body) if body[:2] == b"\x1f\x8b" else body)


def _span(doc: dict[str, Any]) -> dict[str, str]:
    run = doc["runs"][0]
    return {"run": run["name"], "worker": run["workers"][0]["name"], "span": run["workers"][0]["spans"][0]["span"]}


def first_views(server: Server, doc: dict[str, Any]) -> dict[str, Any]:
    """Right after ready: every view route once, in turn (cold), then Trace view windows at several zooms."""
    span = _span(doc)
    views = _json(get(f"{server.base}/views?run={span['run']}")[1])["views"]
    cold: dict[str, Any] = {}
    t = time.perf_counter()
    status, body = get(f"{server.base}/trace/window?{urlencode(span)}&width_px=2000")
    cold["trace/window (first paint)"] = [round(time.perf_counter() - t, 4), status, len(body)]
    whole = _json(body) if status == 200 else {}
    for route in view_routes(span, views):
        t = time.perf_counter()
        status, body = get(f"{server.base}/{route}")
        cold[route.split("?")[0] + _group(route)] = [round(time.perf_counter() - t, 4), status, len(body)]
    return {"cold_views": cold, "windows": windows(server, span, whole)}


def _group(route: str) -> str:
    return f"[{route.split('group_by=')[1].split('&')[0]}]" if "group_by=" in route else ""


def windows(server: Server, span: dict[str, str], whole: dict[str, Any]) -> dict[str, Any]:
    """p95 latency of random windows of 1/10 .. 1/10000 of the trace (each window a new query: not cached)."""
    bounds = whole.get("bounds")
    if not bounds:
        return {"error": f"no bounds in the window answer: keys {sorted(whole)[:12]}"}
    lo, hi = bounds
    rng = random.Random(0)
    out: dict[str, Any] = {}
    for frac in (1.0, 0.1, 0.01, 0.001, 0.0001):
        took = []
        for _ in range(20):
            width = (hi - lo) * frac
            start = lo + rng.random() * (hi - lo - width)
            t = time.perf_counter()
            status, _ = get(f"{server.base}/trace/window?{urlencode(span)}&start_us={start!r}&end_us="
                            f"{start + width!r}&width_px=2000")
            took.append(time.perf_counter() - t)
        out[f"1/{round(1 / frac)}"] = {**_stats(took), "status": status}
    return out


def ours(python: str, name: str, trace: Path, work: Path, timeout: float) -> dict[str, Any]:
    logdir, cache = _logdir(trace, work / f"ours_{name}"), work / f"ours_{name}" / "cache"
    result: dict[str, Any] = {}
    for label in ("cold", "warm"):
        log(f"ours {name} {label}")
        server = Server(python, logdir, cache, work / f"ours_{name}.log")
        try:
            res = server.wait_ready(timeout)
            if label == "cold" and res["state"] == "ready":
                server.sampler.reset()
                res.update(first_views(server, res["runs_doc"]))
                res["peak_pss_mb_views"] = server.sampler.peak_pss / 1e6
        finally:
            res.update(server.stop())
        res.pop("runs_doc", None)
        result[label] = res
        log(f"  -> {_brief(res)}")
    return result


def crowd_run(python: str, name: str, trace: Path, work: Path, clients: int, timeout: float) -> dict[str, Any]:
    logdir, cache = _logdir(trace, work / f"crowd_{name}"), work / f"crowd_{name}" / "cache"
    log(f"ours {name} crowd of {clients}")
    server = Server(python, logdir, cache, work / f"crowd_{name}.log")
    try:
        res = server.wait_ready(timeout)
        if res["state"] == "ready":
            span = _span(res["runs_doc"])
            views = _json(get(f"{server.base}/views?run={span['run']}")[1])["views"]
            res["crowd"] = crowd(server.base, view_routes(span, views), clients)
    finally:
        res.update(server.stop())
    res.pop("runs_doc", None)
    log(f"  -> {_brief(res)} crowd p95 {res.get('crowd', {}).get('p95_s')}")
    return res


def old(python: str, name: str, trace: Path, work: Path, timeout: float) -> dict[str, Any]:
    logdir = _logdir(trace, work / f"old_{name}")
    log(f"old {name} (limit {timeout:g} s)")
    server = Server(python, logdir, None, work / f"old_{name}.log")
    try:
        res = server.wait_ready(timeout)
    finally:
        res.update(server.stop())
    res.pop("runs_doc", None)
    log(f"  -> {_brief(res)}")
    return res


def _logdir(trace: Path, home: Path) -> Path:
    run = home / "logdir" / "run"
    run.mkdir(parents=True, exist_ok=True)
    target = run / trace.name
    if not target.exists():
        try:
            os.link(trace, target)
        except OSError:
            shutil.copy(trace, target)
    return home / "logdir"


def _brief(res: dict[str, Any]) -> str:
    keys = ("state", "first_http_s", "ready_s", "ready_after_first_http_s", "peak_pss_mb", "peak_rss_mb")
    return ", ".join(f"{k} {res[k]:.2f}" if isinstance(res.get(k), float) else f"{k} {res.get(k)}" for k in keys)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ours", help="Python with TensorBoard and this plugin")
    parser.add_argument("--old", help="Python with TensorBoard and torch-tb-profiler 0.4.3")
    parser.add_argument("--trace", action="append", default=[], metavar="NAME=PATH")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds until ours must be ready")
    parser.add_argument("--old-timeout", type=float, default=90.0, help="seconds the old plugin is given")
    parser.add_argument("--crowd", type=int, default=50)
    parser.add_argument("--crowd-trace", action="append", default=[], metavar="NAME")
    parser.add_argument("--skip-old", action="append", default=[], metavar="NAME")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="bench_device_"))
    results: dict[str, Any] = {"machine": machine_info(), "traces": {}}
    for spec in args.trace:
        name, path = spec.split("=", 1)
        trace = Path(path)
        entry: dict[str, Any] = {"file": str(trace), "file_mb": trace.stat().st_size / 1e6}
        if args.ours:
            entry["ours"] = ours(args.ours, name, trace, work, args.timeout)
            if name in args.crowd_trace:
                entry["ours"]["crowd"] = crowd_run(args.ours, name, trace, work, args.crowd, args.timeout)
        if args.old and name not in args.skip_old:
            entry["old"] = old(args.old, name, trace, work, args.old_timeout)
        results["traces"][name] = entry
        (args.out / "bench_device.json").write_text(json.dumps(results, indent=1))
    for f in work.glob("*.log"):
        with contextlib.suppress(OSError):
            shutil.copy(f, args.out / f.name)  # TensorBoard's own logs, beside the results
    shutil.rmtree(work, ignore_errors=True)
    print_table(results)
    return 0


def print_table(results: dict[str, Any]) -> None:
    print(f"machine: {results['machine'].get('cpu')}, {results['machine'].get('usable_cores')} cores")
    for name, entry in results["traces"].items():
        for who in ("ours", "old"):
            runs = entry.get(who, {})
            for label, res in ([("cold", runs)] if who == "old" else list(runs.items())):
                if not isinstance(res, dict) or "state" not in res:
                    continue
                print(f"{name:>6} {who:>4} {label:>5}: {_brief(res)}")
                if "runs_latency" in res:
                    print(f"{'':>18} /runs while loading: p95 {res['runs_latency']['p95_s'] * 1e3:.0f} ms "
                          f"max {res['runs_latency']['max_s'] * 1e3:.0f} ms (n {res['runs_latency']['n']})")
                if "cold_views" in res:
                    slow = sorted(res["cold_views"].items(), key=lambda kv: -kv[1][0])[:5]
                    print(f"{'':>18} slowest cold views: " + ", ".join(f"{k} {v[0]:.3f}" for k, v in slow))
                if "crowd" in res and isinstance(res["crowd"], dict) and "p95_s" in res["crowd"]:
                    c = res["crowd"]
                    print(f"{'':>18} crowd: p50 {c['p50_s']:.3f} p95 {c['p95_s']:.3f} max {c['max_s']:.3f} "
                          f"errors {c['errors']}")


if __name__ == "__main__":
    raise SystemExit(main())
