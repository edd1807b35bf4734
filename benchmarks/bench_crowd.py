#!/usr/bin/env python3
"""A crowd of clients right after a large trace turns ready: request latency and the server's peak memory.

    python benchmarks/bench_crowd.py [TRACE] [--clients 50] [--json-out FILE]

Starts the real ``tensorboard`` CLI (127.0.0.1, a free port, a fresh ``--profiler_cache_dir``) with this checkout's
plugin on a logdir holding only TRACE (default: the "164 MB" trace of ``make_big_trace.py``, made if missing),
waits until its span is ``ready``, then at once lets N clients (threads, each its own connection) request every view
route of that span once, in its own shuffled order, as N freshly opened browser tabs would. Reports p50, p95 and
max latency, errors (any answer but 200) and the peak RSS of the TensorBoard process tree (psutil, summed, every
50 ms) while the clients ran and over the whole run. The same is measured first with one client on a fresh
TensorBoard (its own cache directory, so both parse the trace once), and the crowd is compared with it.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

from bench_load import (  # noqa: E402
    BENCH_DIR,
    TreeSampler,
    _busy_cpu_s,
    _runs_state,
    _stop_tree,
    free_port,
    machine_info,
)

SOURCE = (Path(__file__).resolve().parent.parent / "tests" / "data" / "h200" / "transformer_bf16"
          / "vm_562.1795654446295758078.pt.trace.json.gz")
DEFAULT_TRACE = BENCH_DIR / "runs" / "transformer_bf16_x22" / SOURCE.name
API = "/data/plugin/pytorch_profiler"


def ensure_trace(path: Path) -> Path:
    """The trace to serve; the default one is made from the real transformer trace when missing (~5 s)."""
    if path.exists() or path != DEFAULT_TRACE:
        return path
    from make_big_trace import make_big_trace

    make_big_trace(SOURCE, path.parent, target_mb=164)
    return path


def view_routes(span: dict[str, str], views: list[str]) -> list[str]:
    """Every JSON route a page of the span's views asks for (docs/api/openapi.yaml), with typical parameters."""
    q = urlencode(span)
    diff = urlencode({**span, "exp_run": span["run"], "exp_worker": span["worker"], "exp_span": span["span"]})
    routes = [
        "runs", f"views?run={span['run']}", f"summary?{q}", f"overview?{q}",
        f"operators?{q}&group_by=name", f"operators?{q}&group_by=name_shape", f"operators?{q}&group_by=name_stack",
        f"kernels?{q}&group_by=name", f"kernels?{q}&group_by=name_op",
        # the Memory page's events: a one-row page (which devices have events), then the table's page sorted by
        # size (every pair of the trace sorted), as the page asks since the table pages on the server
        f"memory/curve?{q}", f"memory/events?{q}&limit=1", f"memory/events?{q}&limit=100&sort=size&order=desc",
        f"memory/stats?{q}", f"modules?{q}", f"modules/timeline?{q}",
        f"trace/window?{q}&width_px=2000", f"trace/search?{q}&q=aten::mm&limit=100", f"trace/event?{q}&id=0",
        f"diff?{diff}", f"diff/node?{diff}&path=0",
    ]
    if "Distributed" in views:
        routes.append(f"distributed?run={span['run']}&span={span['span']}")
    return routes


def get(url: str, timeout: float = 300.0) -> tuple[int, bytes]:
    request = urllib.request.Request(url, headers={"Accept-Encoding": "gzip"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def get_answer(url: str, timeout: float = 300.0) -> tuple[int, bytes, int]:
    """GET as the page does: a 409 "computing" (an analysis of a big trace computed in the background) is asked
    again after its ``retry_after_ms`` until the answer comes. (status, body, how many "computing" answers came)."""
    deadline = time.monotonic() + timeout
    computing = 0
    while True:
        status, body = get(url, timeout)
        if status != 409 or time.monotonic() > deadline:
            return status, body, computing
        try:
            doc = json.loads(gzip.decompress(body) if body[:2] == b"\x1f\x8b" else body)
        except ValueError:
            return status, body, computing
        if not isinstance(doc, dict) or doc.get("state") != "computing":
            return status, body, computing
        computing += 1
        time.sleep(float(doc.get("retry_after_ms") or 500) / 1000)


class Server:
    """The ``tensorboard`` CLI on a fresh logdir and cache directory, with this checkout's plugin."""

    def __init__(self, trace: Path, tb_bin: str) -> None:
        self.home = Path(tempfile.mkdtemp(prefix="crowd_", dir=str(BENCH_DIR)))
        run = self.home / "logdir" / "run"
        run.mkdir(parents=True)
        os.link(trace, run / trace.name) if trace.stat().st_dev == run.stat().st_dev else shutil.copy(trace, run)
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}{API}"
        cmd = [tb_bin, "--logdir", str(self.home / "logdir"), "--host", "127.0.0.1", "--port", str(self.port),
               "--load_fast=false", "--profiler_cache_dir", str(self.home / "cache")]
        env = {**os.environ, "PYTHONPATH": str(REPO)}  # the plugin of this checkout, not of the venv's install
        self.log = open(self.home / "tensorboard.log", "w")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, env=env, cwd=str(REPO))
        self.sampler = TreeSampler(self.process.pid)
        self.sampler.start()

    def wait_ready(self, timeout: float) -> dict[str, Any]:
        deadline = time.perf_counter() + timeout
        while time.perf_counter() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"tensorboard exited: {(self.home / 'tensorboard.log').read_text()[-2000:]}")
            try:
                status, body = get(f"{self.base}/runs", timeout=5)
                doc = json.loads(body)
                if status == 200 and _runs_state(doc) == "ready":
                    return doc  # type: ignore[no-any-return]
                if _runs_state(doc) == "failed":
                    raise RuntimeError(f"the trace failed to load: {json.dumps(doc)[:1000]}")
            except (urllib.error.URLError, ConnectionError, OSError, ValueError):
                pass
            time.sleep(0.05)
        raise RuntimeError(f"not ready after {timeout} s")

    def stop(self) -> None:
        self.sampler.stop()
        _stop_tree(self.process)
        self.log.close()
        shutil.rmtree(self.home, ignore_errors=True)


def crowd(base: str, routes: list[str], clients: int) -> dict[str, Any]:
    """``clients`` threads request every route once each, in their own order, all starting together."""
    start = threading.Barrier(clients)
    latencies: list[float] = []
    errors: list[str] = []
    per_route: dict[str, list[float]] = {}
    lock = threading.Lock()

    def client(seed: int) -> None:
        order = list(routes)
        random.Random(seed).shuffle(order)
        start.wait()
        for route in order:
            t = time.perf_counter()
            try:
                status, body, _ = get_answer(f"{base}/{route}")
            except Exception as err:  # noqa: BLE001 - a failed request is counted, never fatal
                status, body = -1, repr(err).encode()
            took = time.perf_counter() - t
            with lock:
                latencies.append(took)
                per_route.setdefault(route.split("?")[0] + _group(route), []).append(took)
                if status != 200:
                    errors.append(f"{route}: {status} {body[:200]!r}")

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    t0 = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    wall = time.perf_counter() - t0
    return {"requests": len(latencies), "wall_s": wall, "errors": len(errors), "error_samples": errors[:5],
            **_stats(latencies),
            "slowest_routes": sorted(((r, max(v)) for r, v in per_route.items()), key=lambda x: -x[1])[:6]}


def _cpu_s(pid: int) -> float:
    """CPU seconds used so far by this benchmark (its client threads) and the TensorBoard tree: the machine's busy
    time minus these is other sessions' load."""
    import psutil

    total = sum(os.times()[:2])
    try:
        procs = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    except psutil.Error:
        return total
    for proc in procs:
        try:
            t = proc.cpu_times()
            total += t.user + t.system
        except psutil.Error:
            pass
    return total


def _group(route: str) -> str:
    return f"[{route.split('group_by=')[1].split('&')[0]}]" if "group_by=" in route else ""


def _stats(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
    return {"p50_s": statistics.median(ordered), "p95_s": p95, "max_s": ordered[-1]}


def measure(trace: Path, tb_bin: str, clients: int, timeout: float) -> dict[str, Any]:
    server = Server(trace, tb_bin)
    try:
        t0 = time.perf_counter()
        runs = server.wait_ready(timeout)
        ready_s = time.perf_counter() - t0
        load_peak = server.sampler.peak
        server.sampler.peak = 0  # from here on: the peak while the clients run
        run = runs["runs"][0]
        span = {"run": run["name"], "worker": run["workers"][0]["name"], "span": run["workers"][0]["spans"][0]["span"]}
        views = json.loads(get(f"{server.base}/views?run={span['run']}")[1])["views"]
        busy0, ours0 = _busy_cpu_s(), _cpu_s(server.process.pid)
        result = crowd(server.base, view_routes(span, views), clients)
        other = (_busy_cpu_s() - busy0) - (_cpu_s(server.process.pid) - ours0)
        crowd_peak = server.sampler.peak
        return {"clients": clients, "ready_s": ready_s, **result, "peak_rss_mb_clients": crowd_peak / 2**20,
                "peak_rss_mb_run": max(load_peak, crowd_peak) / 2**20,
                "other_cores": max(0.0, other) / result["wall_s"]}
    finally:
        server.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", nargs="?", type=Path, default=DEFAULT_TRACE)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--tensorboard", default=str(Path(sys.executable).with_name("tensorboard")))
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for the span to be ready")
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args(argv)
    trace = ensure_trace(args.trace)
    which = subprocess.run([sys.executable, "-c", "import tb_plugin; print(tb_plugin.__file__)"],
                           env={**os.environ, "PYTHONPATH": str(REPO)}, cwd="/", capture_output=True, text=True)
    info = {"machine": machine_info(), "trace": str(trace), "trace_mb": trace.stat().st_size / 1e6,
            "plugin": which.stdout.strip()}
    print(json.dumps(info, indent=1))
    results = {}
    for label, clients in (("single", 1), ("crowd", args.clients)):
        results[label] = res = measure(trace, args.tensorboard, clients, args.timeout)
        res["loadavg_after"] = os.getloadavg()
        print(f"{label:>6}: {res['clients']} clients x {res['requests'] // res['clients']} routes, "
              f"ready in {res['ready_s']:.1f} s; p50 {res['p50_s']:.3f} s, p95 {res['p95_s']:.3f} s, "
              f"max {res['max_s']:.3f} s, errors {res['errors']}, all done in {res['wall_s']:.1f} s; peak RSS "
              f"{res['peak_rss_mb_clients']:.0f} MB while the clients ran ({res['peak_rss_mb_run']:.0f} MB whole run); "
              f"other load {res['other_cores']:.2f} cores")
        print("        slowest:", ", ".join(f"{r} {t:.2f} s" for r, t in res["slowest_routes"]))
        for sample in res["error_samples"]:
            print("        error:", sample)
    ratio = results["crowd"]["peak_rss_mb_clients"] / results["single"]["peak_rss_mb_clients"]
    print(f"crowd / single peak RSS while serving: {ratio:.2f} (target <= 1.5); crowd p95 "
          f"{results['crowd']['p95_s']:.2f} s (target <= 2)")
    if args.json_out:
        args.json_out.write_text(json.dumps({**info, **results, "rss_ratio": ratio}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
