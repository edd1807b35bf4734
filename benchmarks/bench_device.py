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
- **heavy crowd** (``--heavy N``, the traces named by ``--heavy-trace``): a fresh server, and N clients asking only
  the heavy routes (Overview, Operator and Kernel tables, a Trace view window) the moment the span is ready: the
  issue's crowd row, which the 19-route crowd hides behind its cheap routes.
- **memory ratio** (``--ratio-clients M``, the traces of ``--heavy-trace``): the heavy routes by one client, then by
  M clients, each on a fresh server: the peak PSS of the tree while they are served (after ``ready``), and M's over
  one's.
- **ranks** (``--ranks NAME=DIR``): a run of many rank files (``make_ranks.py``): time to every rank ``ready``, then
  rank 0's ``/overview`` at once and rank 1's after it (the job-level context read by every rank's Overview).

Every step runs under a time limit and logs to stderr as it goes; results go to ``DIR/bench_device.json`` and a
table to stdout, and ``DIR/report.md``: each goal of issue 29 with its figure, whether it is met, the host and the
commit (``--commit``). ``--report A.json B.json ...`` writes that report from the results of several calls (the
big traces run in a call of their own). ``benchmarks/bench_device.sh`` builds the environments and the traces on a
bare machine.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import random
import shutil
import signal
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

from bench_crowd import _stats, crowd, get, get_answer, view_routes  # noqa: E402
from bench_load import TreeSampler, _rollup, _runs_state, free_port, machine_info  # noqa: E402

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

    def pss_mb(self) -> float:
        """The server process's own PSS now (its loader and parts' processes aside), MB."""
        return round(_rollup(self.process.pid)[0] / 1e6, 1)

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
    # [seconds to the answer, status, bytes, "computing" answers before it (asked again as the page does), the
    # server process's own PSS in MB after it (what the views it computes itself keep)]
    t = time.perf_counter()
    status, body, waits = get_answer(f"{server.base}/trace/window?{urlencode(span)}&width_px=2000")
    cold["trace/window (first paint)"] = [round(time.perf_counter() - t, 4), status, len(body), waits, server.pss_mb()]
    whole = _json(body) if status == 200 else {}
    for route in [*heavy_routes(span)[:-1], *gpu_routes(span)]:  # the first pages, each view's first answer
        t = time.perf_counter()
        status, body, waits = get_answer(f"{server.base}/{route}")
        cold["first " + route.split("?")[0] + _group(route)] = [round(time.perf_counter() - t, 4), status, len(body),
                                                                 waits, server.pss_mb()]
    out = {"cold_views": cold, "windows": windows(server, span, whole)}  # before the rest: a big trace's call may end
    PARTIAL.update(out)
    for route in view_routes(span, views):
        t = time.perf_counter()
        status, body, waits = get_answer(f"{server.base}/{route}")
        cold[route.split("?")[0] + _group(route)] = [round(time.perf_counter() - t, 4), status, len(body), waits,
                                                     server.pss_mb()]
    return out


# What the cold run of the trace being measured has so far (saved by ``main`` should the call's time run out).
PARTIAL: dict[str, Any] = {}


def _group(route: str) -> str:
    """What tells two asks of one route apart in the report: its grouping, or the page it asks for."""
    for name in ("group_by", "limit"):
        if f"{name}=" in route:
            value = route.split(f"{name}=")[1].split("&")[0]
            return f"[{value}]" if name == "group_by" else f"[{name}={value}]"
    return ""


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
                PARTIAL.clear()
                PARTIAL.update(res)
                server.sampler.reset()
                res.update(first_views(server, res["runs_doc"]))
                res["peak_pss_mb_views"] = server.sampler.peak_pss / 1e6
                res["peak_pss_mb_views_by_generation"] = server.sampler.peak_by_generation()
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


def heavy_routes(span: dict[str, str]) -> list[str]:
    """What a user opens first and what costs the server most: the Overview, the Operator and Kernel tables, a
    Trace view window (the whole trace, 2000 px)."""
    q = urlencode(span)
    return [f"overview?{q}", f"operators?{q}&group_by=name", f"kernels?{q}&group_by=name",
            f"trace/window?{q}&width_px=2000"]


def gpu_routes(span: dict[str, str]) -> list[str]:
    q = urlencode(span)
    return [f"{r}?{q}" for r in ("idle", "launch_stats", "queue_length", "memory_bandwidth", "kernel_sequences",
                                 "cupti_counters", "roofline")]


def heavy_crowd(python: str, name: str, trace: Path, work: Path, clients: int, timeout: float,
                label: str = "heavy") -> dict[str, Any]:
    """A fresh server; ``clients`` clients ask the heavy routes at once the moment the span is ready; the peak PSS
    while they are served."""
    logdir, cache = _logdir(trace, work / f"{label}{clients}_{name}"), work / f"{label}{clients}_{name}" / "cache"
    log(f"ours {name} heavy routes, {clients} clients")
    server = Server(python, logdir, cache, work / f"{label}_{name}.log")
    try:
        res = server.wait_ready(timeout)
        if res["state"] == "ready":
            server.sampler.reset()
            res["crowd"] = crowd(server.base, heavy_routes(_span(res["runs_doc"])), clients)
            rss, pss = server.sampler.sample()  # a crowd may be done before the sampler's next poll
            res["serving_peak_pss_mb"] = max(server.sampler.peak_pss, pss) / 1e6
            res["serving_peak_rss_mb"] = max(server.sampler.peak, rss) / 1e6
    finally:
        res.update(server.stop())
    res.pop("runs_doc", None)
    log(f"  -> {_brief(res)} p95 {res.get('crowd', {}).get('p95_s')} serving PSS {res.get('serving_peak_pss_mb')}")
    return res


def memory_ratio(python: str, name: str, trace: Path, work: Path, clients: int, timeout: float) -> dict[str, Any]:
    one = heavy_crowd(python, name, trace, work, 1, timeout, "ratio")
    many = heavy_crowd(python, name, trace, work, clients, timeout, "ratio")
    a, b = one.get("serving_peak_pss_mb"), many.get("serving_peak_pss_mb")
    return {"one": one, "many": many, "clients": clients, "pss_ratio": b / a if a and b else None}


def ranks(python: str, name: str, folder: Path, work: Path, timeout: float) -> dict[str, Any]:
    """A run of many ranks: time to every span ready, then rank 0's Overview at once, then rank 1's."""
    logdir, cache = _logdir(folder, work / f"ranks_{name}"), work / f"ranks_{name}" / "cache"
    log(f"ours {name} ranks")
    server = Server(python, logdir, cache, work / f"ranks_{name}.log")
    try:
        res = server.wait_ready(timeout)
        if res["state"] == "ready":
            run = res["runs_doc"]["runs"][0]
            workers = sorted((w["name"] for w in run["workers"]), key=lambda w: int("".join(c for c in w if
                                                                                           c.isdigit()) or 0))
            for worker in workers[:2]:
                q = urlencode({"run": run["name"], "worker": worker, "span": run["workers"][0]["spans"][0]["span"]})
                t = time.perf_counter()
                status, body, waits = get_answer(f"{server.base}/overview?{q}")
                res[f"overview {worker}"] = [round(time.perf_counter() - t, 4), status, len(body), waits]
            res["ranks"] = len(workers)
    finally:
        res.update(server.stop())
    res.pop("runs_doc", None)
    log(f"  -> {_brief(res)} overview {res.get('overview rank0')}")
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
    """A logdir holding one run: the trace, or every trace of a folder (the ranks of a job), hard-linked."""
    run = home / "logdir" / "run"
    run.mkdir(parents=True, exist_ok=True)
    for f in sorted(trace.glob("*.pt.trace.json*")) if trace.is_dir() else [trace]:
        target = run / f.name
        if not target.exists():
            try:
                os.link(f, target)
            except OSError:
                shutil.copy(f, target)
    return home / "logdir"


def _brief(res: dict[str, Any]) -> str:
    keys = ("state", "first_http_s", "ready_s", "ready_after_first_http_s", "peak_pss_mb", "peak_rss_mb")
    return ", ".join(f"{k} {res[k]:.2f}" if isinstance(res.get(k), float) else f"{k} {res.get(k)}" for k in keys)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ours", help="Python with TensorBoard and this plugin")
    parser.add_argument("--old", help="Python with TensorBoard and torch-tb-profiler 0.4.3")
    parser.add_argument("--label", default="ours", help="what --ours is (ours, or base: the main branch)")
    parser.add_argument("--commit", default="unknown", help="the commit measured (for the report)")
    parser.add_argument("--trace", action="append", default=[], metavar="NAME=PATH")
    parser.add_argument("--ranks", action="append", default=[], metavar="NAME=DIR")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds until ours must be ready")
    parser.add_argument("--old-timeout", type=float, default=90.0, help="seconds the old plugin is given")
    parser.add_argument("--crowd", type=int, default=50)
    parser.add_argument("--crowd-trace", action="append", default=[], metavar="NAME")
    parser.add_argument("--heavy", type=int, default=50, help="clients of the heavy-route crowd")
    parser.add_argument("--heavy-trace", action="append", default=[], metavar="NAME")
    parser.add_argument("--ratio-clients", type=int, default=0, help="clients of the memory ratio (0: not run)")
    parser.add_argument("--skip-old", action="append", default=[], metavar="NAME")
    parser.add_argument("--report", nargs="+", type=Path, metavar="JSON", help="only write the report of these")
    args = parser.parse_args(argv)
    if args.report:
        print(report([json.loads(p.read_text()) for p in args.report]))
        return 0
    assert args.out is not None, "--out is required"
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="bench_device_"))
    results: dict[str, Any] = {"machine": machine_info(), "label": args.label, "commit": args.commit,
                               "host": os.uname().nodename, "traces": {}}
    signal.signal(signal.SIGTERM, lambda *_: (_save_partial(args, results), sys.exit(1)))  # ``timeout`` ends us
    for spec in args.trace:
        name, path = spec.split("=", 1)
        results["current"] = {"name": name, "file": path}
        results["traces"][name] = one_trace(args, name, Path(path), work)
        results.pop("current")
        (args.out / f"bench_device_{args.label}.json").write_text(json.dumps(results, indent=1))
    for spec in args.ranks:
        name, path = spec.split("=", 1)
        entry: dict[str, Any] = {"file": path, "ranks": True}
        if args.ours:
            entry["ours"] = {"cold": ranks(args.ours, name, Path(path), work, args.timeout)}
        if args.old and name not in args.skip_old:
            entry["old"] = old(args.old, name, Path(path), work, args.old_timeout)
        results["traces"][name] = entry
        (args.out / f"bench_device_{args.label}.json").write_text(json.dumps(results, indent=1))
    for f in work.glob("*.log"):
        with contextlib.suppress(OSError):
            shutil.copy(f, args.out / f.name)  # TensorBoard's own logs, beside the results
    shutil.rmtree(work, ignore_errors=True)
    print_table(results)
    (args.out / f"report_{args.label}.md").write_text(report([results]))
    return 0


def _save_partial(args: argparse.Namespace, results: dict[str, Any]) -> None:
    """The call's time ran out: keep the cold run of the trace being measured, as far as it got."""
    current = results.pop("current", None)
    if current and PARTIAL:
        cold = {k: v for k, v in PARTIAL.items() if k != "runs_doc"}
        results["traces"][current["name"]] = {"file": current["file"], "partial": True, "ours": {"cold": cold}}
    (args.out / f"bench_device_{args.label}.json").write_text(json.dumps(results, indent=1))


def one_trace(args: argparse.Namespace, name: str, trace: Path, work: Path) -> dict[str, Any]:
    entry: dict[str, Any] = {"file": str(trace), "file_mb": trace.stat().st_size / 1e6}
    if args.ours:
        entry["ours"] = ours(args.ours, name, trace, work, args.timeout)
        if name in args.crowd_trace:
            entry["ours"]["crowd"] = crowd_run(args.ours, name, trace, work, args.crowd, args.timeout)
        if name in args.heavy_trace:
            entry["ours"]["heavy"] = heavy_crowd(args.ours, name, trace, work, args.heavy, args.timeout)
            if args.ratio_clients:
                entry["ours"]["ratio"] = memory_ratio(args.ours, name, trace, work, args.ratio_clients, args.timeout)
    if args.old and name not in args.skip_old:
        entry["old"] = old(args.old, name, trace, work, args.old_timeout)
    return entry


# ---- the report: issue 29's goals, each with its figure ------------------------------------------------------------

def _get(res: dict[str, Any] | None, *path: str) -> Any:
    for key in path:
        if not isinstance(res, dict):
            return None
        res = res.get(key)
    return res


def _first_answer(cold: dict[str, Any] | None, route: str) -> float | None:
    """The route's first answer after ready: its "first ..." probe where the run has one (a later probe of the same
    route may be answered from the memo), else its one probe."""
    views = cold or {}
    first = [v[0] for k, v in views.items() if k.split(" (")[0] == f"first {route}"]
    found = first or [v[0] for k, v in views.items() if k.split(" (")[0] == route]
    return min(found) if found else None


def goals(runs: list[dict[str, Any]], label: str = "ours") -> list[tuple[str, str, float | None, float, str]]:
    """(trace, measure, figure, goal, unit) per goal of issue 29 from the results of the runs labelled ``label``
    (``ours``, or ``base``: main measured by the same steps)."""
    ours = {name: entry for r in runs if r.get("label", "ours") == label for name, entry in r["traces"].items()}
    t164, t2g, rk = ours.get("164", {}).get("ours"), ours.get("2000", {}).get("ours"), ours.get("ranks64", {})
    rows = [
        ("164 MB", "TensorBoard answers -> ready", _get(t164, "cold", "ready_after_first_http_s"), 0.6, "s"),
        ("164 MB", "first Overview after ready (cold)", _first_answer(_get(t164, "cold", "cold_views"), "overview"),
         0.3, "s"),
        ("164 MB", "50 clients, heavy routes at ready, p95", _get(t164, "heavy", "crowd", "p95_s"), 0.3, "s"),
        ("64 ranks", "TensorBoard answers -> ready", _get(rk, "ours", "cold", "ready_after_first_http_s"), 1.5, "s"),
        ("64 ranks", "rank 0 /overview right after ready", (_get(rk, "ours", "cold", "overview rank0") or [None])[0],
         0.2, "s"),
        ("2 GB", "TensorBoard answers -> ready", _get(t2g, "cold", "ready_after_first_http_s"), 5.0, "s"),
        ("2 GB", "first Overview after ready (cold)", _first_answer(_get(t2g, "cold", "cold_views"), "overview"),
         1.0, "s"),
        ("2 GB", "first window after ready", (_get(t2g, "cold", "cold_views", "trace/window (first paint)")
                                             or [None])[0], 0.3, "s"),
        ("2 GB", "50 clients, heavy routes at ready, p95", _get(t2g, "heavy", "crowd", "p95_s"), 1.0, "s"),
        ("2 GB", "peak PSS", max(_get(t2g, "cold", "peak_pss_mb") or 0, _get(t2g, "cold", "peak_pss_mb_to_ready")
                                 or 0) or None, 2500.0, "MB"),
    ]
    for name in ("164", "2000"):
        ratio = _get(ours.get(name, {}).get("ours"), "ratio")
        if ratio and ratio.get("pss_ratio") is not None:
            rows.append((f"{name} MB", f"{ratio['clients']} clients / 1 client, serving peak PSS", ratio["pss_ratio"],
                         1.5, "x"))
    for name in ("10000", "5000"):
        big = ours.get(name, {}).get("ours")
        if big:
            rows += _big_rows(f"{int(name) // 1000} GB", big)
    return rows


def _big_rows(label: str, big: dict[str, Any]) -> list[tuple[str, str, float | None, float, str]]:
    windows = _get(big, "cold", "windows") or {}
    worst = max((w.get("p95_s") or 0 for w in windows.values() if isinstance(w, dict)), default=None)
    cold = _get(big, "cold", "cold_views") or {}
    first = [_first_answer(cold, r) for r in ("overview", "operators[name]", "kernels[name]", "idle", "roofline")]
    slowest = max((f for f in first if f is not None), default=None)
    return [
        (label, "TensorBoard answers -> ready", _get(big, "cold", "ready_after_first_http_s"), 45.0, "s"),
        (label, "peak PSS", max(_get(big, "cold", "peak_pss_mb") or 0, _get(big, "cold", "peak_pss_mb_to_ready")
                                or 0) or None, 8000.0, "MB"),
        (label, "window p95, worst zoom", worst, 0.05, "s"),
        (label, "each view's first answer, slowest", slowest, 3.0, "s"),
    ]


def report(runs: list[dict[str, Any]]) -> str:
    """Markdown: each goal with its figure and whether it is met, the old plugin and main beside it where measured,
    the scaling curve of the big traces, and the host and commit of each run."""
    lines = ["# Issue 29: goals and figures", "", "| trace | measure | old 0.4.3 | main | ours | goal | met |",
             "|---|---|---:|---:|---:|---:|---|"]
    base = {(trace, measure): figure for trace, measure, figure, _, _ in goals(runs, "base")}
    old_runs = {n: e["old"] for r in runs for n, e in r["traces"].items() if e.get("old")}
    names = {"164 MB": "164", "2 GB": "2000", "64 ranks": "ranks64", "5 GB": "5000", "10 GB": "10000"}
    old_measures = {"TensorBoard answers -> ready": "ready_after_first_http_s", "peak PSS": "peak_pss_mb"}
    for trace, measure, figure, goal, unit in goals(runs):
        key = names.get(trace, trace.split()[0])
        old_key = old_measures.get(measure)
        old_fig = _get(old_runs.get(key), old_key) if old_key else None
        old_state = _get(old_runs.get(key), "state")
        base_fig = base.get((trace, measure))
        met = "–" if figure is None else ("yes" if figure <= goal else "**no**")
        old_cell = (_fmt(old_fig, unit) if old_fig is not None and old_state != "timeout"
                    else ("not ready" if old_key and old_state == "timeout" else "–"))
        lines.append(f"| {trace} | {measure} | {old_cell} | {_fmt(base_fig, unit)} | {_fmt(figure, unit)} | "
                     f"≤ {_fmt(goal, unit)} | {met} |")
    lines += ["", "Scaling (ours):", "",
              "| trace | file MB | ready after answers (s) | peak PSS (MB) | first window (s) |",
              "|---|---:|---:|---:|---:|"]
    for r in runs:
        if r.get("label", "ours") != "ours":
            continue
        for name, entry in r["traces"].items():
            cold = _get(entry, "ours", "cold")
            if cold and not entry.get("ranks"):
                window = (_get(cold, "cold_views", "trace/window (first paint)") or [None])[0]
                lines.append(f"| {name} | {entry.get('file_mb', 0):,.0f} | "
                             f"{_fmt(cold.get('ready_after_first_http_s'), 's')} | "
                             f"{_fmt(cold.get('peak_pss_mb'), 'MB')} | {_fmt(window, 's')} |")
    lines += ["", "Runs:", ""]
    for r in runs:
        m = r.get("machine", {})
        lines.append(f"- {r.get('label', 'ours')}: commit {r.get('commit', 'unknown')}, host {r.get('host', '?')} "
                     f"({m.get('cpu')}, {m.get('usable_cores')} cores, {m.get('ram_gb')} GB), "
                     f"traces {', '.join(r['traces'])}")
    return "\n".join(lines) + "\n"


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "–"
    if unit == "MB":
        return f"{value:,.0f} MB"
    if unit == "x":
        return f"{value:.2f}×"
    return f"{value:.3f} s" if value < 1 else f"{value:.2f} s"


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
