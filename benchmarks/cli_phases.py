#!/usr/bin/env python3
"""TensorBoard's CLI on a logdir, cold: when it answers, when the loader's fork server and each loader process
start and end, and when every span is ready.

    python benchmarks/cli_phases.py LOGDIR [--python PY] [--runs N]

Starts ``PY -m tensorboard.main --logdir LOGDIR`` with a fresh ``--profiler_cache_dir`` (in /tmp, so the fork
server imports the installed plugin, not a checkout in the current folder), polls ``/runs`` every 20 ms until every
span is ready or failed, and samples the server's process tree every 20 ms (psutil): the fork server (the child
whose command line runs ``multiprocessing.forkserver``) and the loader processes it forks. Prints, per run, seconds
since the start: TensorBoard's first answer, ready (and ready after the first answer: issue 29's measure), when
the fork server was first seen, the first and last loader start, the loaders' CPU, and how many loader processes
were alive in each 0.1 s (idle cores between waves of loaders show as dips).

``bench_device.py`` measures the same "answers → ready" for the goals' report; this script says where it goes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from typing import Any

import psutil


class Tree(threading.Thread):
    """Every process below ``pid``: first and last seen (seconds since ``t0``), CPU seconds, parent, fork server."""

    def __init__(self, pid: int, t0: float) -> None:
        super().__init__(daemon=True)
        self.root, self.t0, self.stop = psutil.Process(pid), t0, threading.Event()
        self.seen: dict[int, dict[str, Any]] = {}

    def run(self) -> None:
        while not self.stop.is_set():
            now = time.monotonic() - self.t0
            try:
                kids = self.root.children(recursive=True)
            except psutil.Error:
                kids = []
            for c in kids:
                try:
                    row = self.seen.setdefault(c.pid, {"first": now, "ppid": c.ppid(),
                                                       "fork_server": "forkserver" in " ".join(c.cmdline())})
                    cpu = c.cpu_times()
                    row.update(last=now, cpu=cpu.user + cpu.system)
                except psutil.Error:
                    pass
            time.sleep(0.02)

    def loaders(self) -> tuple[float | None, list[dict[str, Any]]]:
        servers = [(pid, row) for pid, row in self.seen.items() if row["fork_server"]]
        if not servers:
            return None, []
        pid, row = servers[0]
        return row["first"], sorted((r for r in self.seen.values() if r["ppid"] == pid), key=lambda r: r["first"])


def runs_state(port: int) -> tuple[bool, int]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/data/plugin/pytorch_profiler/runs", timeout=5) as r:
        body = json.loads(r.read())
    spans = [s for run in body["runs"] for w in run["workers"] for s in w["spans"]]
    done = bool(spans) and all(s["state"] in ("ready", "failed") for s in spans) and not body.get("loading")
    return done, len(spans)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def one(python: str, logdir: str, timeout: float) -> dict[str, Any]:
    cache, port = tempfile.mkdtemp(prefix="cli_phases_"), free_port()
    t0 = time.monotonic()
    python = os.path.abspath(python) if os.sep in python else python  # it runs in /tmp
    proc = subprocess.Popen([python, "-m", "tensorboard.main", "--logdir", os.path.abspath(logdir), "--port",
                             str(port), "--host", "127.0.0.1", "--profiler_cache_dir", cache, "--load_fast=false"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, cwd="/tmp")
    tree = Tree(proc.pid, t0)
    tree.start()
    answers = ready = None
    spans = 0
    try:
        while time.monotonic() - t0 < timeout:
            try:
                done, spans = runs_state(port)
                answers = answers if answers is not None else time.monotonic() - t0
                if done:
                    ready = time.monotonic() - t0
                    break
            except (OSError, ValueError):
                pass
            time.sleep(0.02)
    finally:
        tree.stop.set()
        tree.join()
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(10)
        shutil.rmtree(cache, ignore_errors=True)
    server, loaders = tree.loaders()
    out: dict[str, Any] = {"answers_s": answers, "ready_s": ready, "spans": spans, "fork_server_seen_s": server,
                           "loaders": len(loaders)}
    if ready is not None and answers is not None:
        out["ready_after_answers_s"] = ready - answers
    if loaders:
        end = max(r["last"] for r in loaders)
        out.update(first_loader_s=loaders[0]["first"], last_loader_start_s=loaders[-1]["first"],
                   loaders_cpu_s=sum(r.get("cpu", 0.0) for r in loaders),
                   alive_per_100ms=[sum(1 for r in loaders if r["first"] <= t / 10 < r["last"])
                                    for t in range(int(loaders[0]["first"] * 10), int(end * 10) + 1)])
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("logdir")
    parser.add_argument("--python", default=sys.executable, help="the interpreter whose TensorBoard and plugin run")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args(argv)
    print(f"{os.cpu_count()} cores, {args.python}, {args.logdir}")
    for i in range(args.runs):
        r = one(args.python, args.logdir, args.timeout)
        fmt = {k: (round(v, 2) if isinstance(v, float) else v) for k, v in r.items() if k != "alive_per_100ms"}
        print(f"run {i + 1}: {fmt}")
        if "alive_per_100ms" in r:
            print("  loaders alive per 0.1 s:", " ".join(map(str, r["alive_per_100ms"])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
