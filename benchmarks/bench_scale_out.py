#!/usr/bin/env python3
"""Scale-out: N synthetic ranks preprocessed on a Dask LocalCluster, then the Distributed view served from the cache.

    python benchmarks/bench_scale_out.py --ranks 64 256 1024 --workers 16 [--source samples/ddp_resnet]

For each rank count: makes the run with ``make_ranks.py`` from a real 2-rank trace (default ``samples/ddp_resnet``),
runs ``preprocess`` on a ``LocalCluster`` of ``--workers`` single-threaded processes into a fresh cache (time,
throughput in MB/s of trace files, peak RSS of each worker), then starts the real ``tensorboard`` CLI on the logdir
with ``--profiler_cache_dir`` on that cache and measures: seconds until every span is ready, the first and a second
default ``/distributed`` answer (seconds, bytes: whole up to 256 ranks, else the first page of 100 rows), the
whole answer (``limit=1024``), page 2 sorted by step time, and the server's PSS (psutil, the TensorBoard process
and its children) after the answers. ``server_child_processes`` must be 0: a parse would have started the
loader's processes, so the server parsed nothing.
Prints one JSON summary; writes it to ``.bench/results/scale_out.json`` too.
Everything generated goes under ``.bench/scale_out/`` (removed afterwards unless ``--keep``).
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

from benchmarks import make_ranks  # noqa: E402
from tb_plugin.jobs.shared import SharedCache  # noqa: E402
from tb_plugin.scaleout.executors import DaskExecutor  # noqa: E402
from tb_plugin.scaleout.preprocess import plan, run  # noqa: E402

API = "/data/plugin/pytorch_profiler"
BENCH = REPO / ".bench"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get(url: str, timeout: float = 120.0) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return int(r.status), r.read()
    except urllib.error.HTTPError as err:
        return int(err.code), err.read()


def tree_pss(pid: int) -> int:
    """PSS of a process and its descendants (shared pages counted once across them, as the kernel splits them)."""
    import psutil

    root = psutil.Process(pid)
    total = 0
    for p in [root, *root.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):
            total += p.memory_full_info().pss
    return total


def preprocess(logdir: Path, cache: Path, workers: int) -> dict[str, Any]:
    shared = SharedCache(str(cache))
    todo = plan(str(logdir), shared)
    started = time.perf_counter()
    executor = DaskExecutor(local_workers=workers)
    cluster_up = time.perf_counter() - started
    try:
        report = run(todo, shared, executor, progress=sys.stderr)
    finally:
        executor.close()
    out = report.as_dict()
    peaks = out.pop("worker_peak_rss_mb")
    out.pop("failures")
    return {**out, "cluster_start_s": round(cluster_up, 2), "worker_peak_rss_mb_max": max(peaks, default=None),
            "worker_peak_rss_mb_median": peaks[len(peaks) // 2] if peaks else None, "workers_seen": len(peaks)}


def serve(logdir: Path, cache: Path, run_name: str, ranks: int, home: Path, settle: float = 0.0) -> dict[str, Any]:
    """The server's figures; ``settle``: seconds to wait after every span is ready before the first request (the
    server reads the summaries in the background as spans turn ready: a request at once reads the rest itself)."""
    port = free_port()
    tb = [sys.executable, "-m", "tensorboard.main", "--logdir", str(logdir), "--host", "127.0.0.1", "--port",
          str(port), "--load_fast=false", "--profiler_cache_dir", str(cache), "--profiler_cache_max_mb", "1000000",
          "--verbosity", "0"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    log_path = home / "tensorboard.log"
    with open(log_path, "w") as log:
        process = subprocess.Popen(tb, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=str(REPO))
    base = f"http://127.0.0.1:{port}{API}"
    try:
        started = time.perf_counter()
        ready_s = _wait_ready(base, ranks, process, log_path)
        time.sleep(settle)
        url = f"{base}/distributed?run={run_name}&span=1"
        first_s, body = _timed(url)  # the default answer: whole up to 256 ranks, else the first page
        second_s, _ = _timed(url)
        whole_s, whole = _timed(f"{url}&offset=0&limit=1024")
        sorted_s, _ = _timed(f"{url}&offset=100&limit=100&sort=step_us&order=desc")
        job = json.loads(body)
        pss = tree_pss(process.pid)
        import psutil

        # a parse would have started the loader's fork server and its processes: the server has no child at all
        children = len(psutil.Process(process.pid).children(recursive=True))
        groups = {g["group"]: g["most_waited_for"]["rank"] for g in job.get("groups", [])}
        return {"server_ready_s": round(ready_s, 2), "startup_to_answer_s": round(time.perf_counter() - started, 2),
                "first_answer_s": round(first_s, 3), "second_answer_s": round(second_s, 3),
                "answer_bytes": len(body), "ranks_in_answer": len(job["ranks"]), "page": job.get("page", {}).get(
                    "total"), "whole_answer_s": round(whole_s, 3), "whole_answer_bytes": len(whole),
                "sorted_page_2_s": round(sorted_s, 3), "heatmap_rows": len(job.get("heatmap", {}).get("mean", [])),
                "straggler": (job.get("straggler") or {}).get("rank"), "most_waited_for_by_group": groups,
                "server_pss_mb": round(pss / 2**20, 1), "server_child_processes": children}
    finally:
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()


def _timed(url: str) -> tuple[float, bytes]:
    """Seconds to a 200 answer of ``url``, and its body (an error otherwise)."""
    t = time.perf_counter()
    status, body = get(url)
    if status != 200:
        raise RuntimeError(f"{url} answered {status}: {body[:500]!r}")
    return time.perf_counter() - t, body


def _wait_ready(base: str, ranks: int, process: subprocess.Popen[bytes], log: Path, timeout: float = 180) -> float:
    started = time.perf_counter()
    body = b""
    while time.perf_counter() - started < timeout:
        if process.poll() is not None:
            raise RuntimeError(f"tensorboard exited: {log.read_text()[-2000:]}")
        with contextlib.suppress(OSError, ValueError, TypeError, KeyError):
            status, body = get(f"{base}/runs", timeout=10)
            if status != 200:  # TensorBoard still starting (its answer is then no listing)
                raise ValueError(status)
            listing = json.loads(gzip.decompress(body) if body[:2] == b"\x1f\x8b" else body)
            spans = [s for r in listing["runs"] for w in r["workers"] for s in w["spans"]]
            if len(spans) == ranks and all(s["state"] == "ready" for s in spans):
                return time.perf_counter() - started
            if any(s["state"] == "failed" for s in spans):
                raise RuntimeError(f"a span failed: {[s for s in spans if s['state'] == 'failed'][:3]}")
        time.sleep(0.1)
    raise RuntimeError(f"not every span was ready after {timeout} s; /runs said {body[:600]!r}; "
                       f"tensorboard's log ends {log.read_text()[-3000:]}")


def one(n: int, args: argparse.Namespace, home: Path) -> dict[str, Any]:
    logdir = home / f"runs_{n}"
    run_name = f"job{n}"
    t = time.perf_counter()
    make_ranks.main([str(args.source), "--ranks", str(n), "--out", str(logdir / run_name)])
    made_s = time.perf_counter() - t
    traces = sum(f.stat().st_size for f in (logdir / run_name).iterdir())
    cache = home / f"cache_{n}"
    result: dict[str, Any] = {"ranks": n, "workers": args.workers, "make_ranks_s": round(made_s, 2),
                              "trace_mb_gz": round(traces / 1e6, 1)}
    result["preprocess"] = preprocess(logdir, cache, args.workers)
    result["cache_mb"] = round(sum(f.stat().st_size for f in cache.rglob("*") if f.is_file()) / 1e6, 1)
    result["server"] = serve(logdir, cache, run_name, n, home)
    if args.settle > 0:
        result["server_settled"] = serve(logdir, cache, run_name, n, home, args.settle)
    print(json.dumps(result), file=sys.stderr)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[64, 256, 1024])
    parser.add_argument("--workers", type=int, default=16, help="LocalCluster worker processes (default 16)")
    parser.add_argument("--source", type=Path, default=REPO / "samples" / "ddp_resnet",
                        help="a real 2-rank run (default samples/ddp_resnet)")
    parser.add_argument("--keep", action="store_true", help="keep the generated runs and caches")
    parser.add_argument("--settle", type=float, default=0.0,
                        help="also start a second server and wait this many seconds after ready before asking")
    args = parser.parse_args(argv)
    home = BENCH / "scale_out"
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    try:
        results = [one(n, args, home) for n in args.ranks]
    finally:
        if not args.keep:
            shutil.rmtree(home, ignore_errors=True)
    summary = {"machine": {"cores": os.cpu_count(), "python": sys.version.split()[0]}, "runs": results}
    (BENCH / "results").mkdir(parents=True, exist_ok=True)
    (BENCH / "results" / "scale_out.json").write_text(json.dumps(summary, indent=2))
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
