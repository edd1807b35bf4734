#!/usr/bin/env python3
"""Where the server's time goes, with py-spy: the whole TensorBoard process tree sampled from its start through a
cold load and every view's first answer (the GIL-bound part cProfile cannot see across threads).

    python benchmarks/spy_server.py TRACE --py-spy PATH [--python PY] [--out DIR] [--rate 250]

Starts ``PY -m tensorboard.main`` on a fresh logdir and parse cache (``bench_device.Server``), runs
``py-spy record --subprocesses --threads --format raw`` on it, waits for ``ready``, asks every view route once in turn
as a page would (a 409 "computing" is asked again), stops, and prints: seconds to ready and per route, then the
functions of this project (``tb_plugin/``) by samples, as self time (the innermost project frame of each sample)
and as total time (anywhere on the stack), per thread group (loader processes, the server's request threads,
its background threads). Samples are 1/rate s of one thread running on a CPU (waiting threads, also those
waiting for the GIL, are not sampled), so a group's samples over the rate are its CPU seconds.
"""

from __future__ import annotations

import argparse
import collections
import json
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_crowd import get, get_answer, view_routes
from bench_device import Server, _json, _logdir, _span


def project_frames(stack: str) -> list[str]:
    """The tb_plugin frames of one collapsed stack ("thread;outer;...;inner"), outermost first, as
    ``module.function``."""
    out = []
    for frame in stack.split(";"):
        if "tb_plugin/" not in frame:
            continue
        name, _, where = frame.partition(" (")
        path = where.split(":")[0]
        module = path[path.index("tb_plugin/"):].removesuffix(".py").replace("/", ".")
        out.append(f"{module}.{name.strip()}")
    return out


def group_of(stack: str) -> str:
    """Which part of the server a sample is from: a loader process (a child's frames follow its parent's
    "process PID:…" root), a request thread, or a background thread ("thread (TID): NAME"). A process's command
    line may hold ";" (the fork server's does), so the root is not split on it."""
    if ";process " in stack:
        return "loader processes"
    thread = stack[stack.find(";thread (") + 1:].split(";", 1)[0] if ";thread (" in stack else ""
    name = thread.split("): ", 1)[1] if "): " in thread else ""
    if "process_request_thread" in name:
        return "request threads"
    if name.startswith("pytorch-profiler"):  # names are per thread id, which the OS reuses: one group for all
        return "background threads (warm-up, answers computed in the background, their pools)"
    return "main thread and others"


def tables(raw: Path, top: int) -> dict[str, Any]:
    """Samples per project function, self and total, per thread group, from py-spy's raw (collapsed) output."""
    self_time: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    total: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    samples: collections.Counter[str] = collections.Counter()
    for line in raw.read_text(errors="replace").splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not count_text.isdigit():
            continue
        frames = project_frames(stack)
        if not frames:
            continue
        group, count = group_of(stack), int(count_text)
        samples[group] += count
        self_time[group][frames[-1]] += count
        for name in set(frames):
            total[group][name] += count
    return {group: {"samples": samples[group], "self": self_time[group].most_common(top),
                    "total": total[group].most_common(top)} for group in samples}


def run(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="spy_server_", dir=args.out))
    server = Server(args.python, _logdir(Path(args.trace), work), work / "cache", work / "tensorboard.log")
    raw = work / "py-spy.txt"
    spy = subprocess.Popen([args.py_spy, "record", "--pid", str(server.process.pid), "--subprocesses", "--threads",
                            "--rate", str(args.rate), "--format", "raw", "--output", str(raw)],
                           stdout=subprocess.DEVNULL, stderr=open(work / "py-spy.log", "w"))  # noqa: SIM115
    out: dict[str, Any] = {}
    try:
        doc = server.wait_ready(args.timeout)
        out["ready"] = {k: v for k, v in doc.items() if k != "runs_doc"}
        span = _span(doc["runs_doc"])
        views = _json(get(f"{server.base}/views?run={span['run']}")[1])["views"]
        routes: dict[str, list[Any]] = {}  # route: [seconds, status, "computing" answers before it]
        for route in view_routes(span, views):
            t = time.perf_counter()
            status, _, waits = get_answer(f"{server.base}/{route}")
            name = route.split("?")[0] + ("?" + route.split("group_by=")[1] if "group_by=" in route else "")
            routes[name] = [round(time.perf_counter() - t, 3), status, waits]
        out["routes_s"] = routes
        out["span"] = urlencode(span)
    finally:
        spy.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
        spy.wait(60)
        server.stop()
    out["profile"] = tables(raw, args.top) if raw.exists() else {"error": (work / "py-spy.log").read_text()[-2000:]}
    out["raw"] = str(raw)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trace", nargs="?")
    parser.add_argument("--tables", type=Path, help="only summarise a py-spy raw file written before")
    parser.add_argument("--py-spy", default="py-spy")
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--out", default=None)
    parser.add_argument("--rate", type=int, default=250)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    out = {"profile": tables(args.tables, args.top)} if args.tables else run(args)
    print(json.dumps({k: v for k, v in out.items() if k != "profile"}, indent=1))
    for group, t in out["profile"].items():
        if not isinstance(t, dict):
            print(group, t)
            continue
        print(f"\n== {group}: {t['samples']} samples with a project frame")
        for kind in ("self", "total"):
            print(f"  -- {kind}")
            for name, count in t[kind]:
                print(f"  {count / args.rate:8.2f} s  {name}")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
