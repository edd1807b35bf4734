"""Running a real training job for the capture tests (tests/capture_job.py in a subprocess) and reading the traces
it writes. The test process never imports torch: only the job does."""

from __future__ import annotations

import gzip
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
JOB = REPO / "tests" / "capture_job.py"


@dataclass
class Job:
    logdir: Path
    folder: Path
    stop: Path
    process: subprocess.Popen[bytes]
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def job_env() -> dict[str, str]:
    """The job's environment: this checkout importable, one thread per rank, a free port for the rendezvous."""
    env = dict(os.environ)
    env["MASTER_PORT"] = str(free_port())
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["OMP_NUM_THREADS"] = "1"
    return env


def start_job(root: Path, ranks: int, *extra: str, command: list[str] | None = None) -> Job:
    logdir, stop = root / "logdir", root / "stop"
    folder = logdir / "job"
    folder.mkdir(parents=True)
    log = root / "job.log"
    argv = command or [sys.executable, str(JOB), str(folder), "--ranks", str(ranks), "--stop-file", str(stop), *extra]
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=job_env(), start_new_session=True)
    return Job(logdir, folder, stop, proc, log)


def wait_listening(job: Job, ranks: int, timeout: float = 180.0) -> None:
    """Until ``ranks`` ranks announced themselves and training is under way (rank 0 past step 5)."""
    from tb_plugin.capture import protocol as p

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if job.process.poll() is not None:
            pytest.fail(f"the job exited with {job.process.returncode}:\n{job.output()}")
        names = {f.name for f in (job.folder / ".capture").glob("listener-*.json")}
        first = job.folder / ".capture" / p.listener_name(0)
        if len(names) >= ranks and first.exists():
            listener = p.decode(first.read_bytes(), p.Listener)
            if listener is not None and listener.step > 5:
                return
        time.sleep(0.2)
    pytest.fail(f"the job did not listen within {timeout} s:\n{job.output()}")


def stop_job(job: Job) -> str:
    job.stop.touch()
    try:
        job.process.wait(60)
    except subprocess.TimeoutExpired:
        os.killpg(job.process.pid, signal.SIGKILL)
        job.process.wait(10)
    return job.output()


def profiler_steps(path: Path) -> tuple[list[int], dict[str, Any]]:
    """The ``ProfilerStep#N`` numbers of a trace and its distributedInfo, read from the JSON itself."""
    with gzip.open(path, "rt") as fh:
        data = json.load(fh)
    steps = sorted({int(e["name"].split("#")[1]) for e in data["traceEvents"]
                    if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")})
    return steps, data.get("distributedInfo", {})


def check_traces(folder: Path, files: list[str], steps: int, world: int = 4) -> list[int]:
    """Every file a rank wrote holds the same ``steps`` consecutive steps; its distributedInfo names its rank."""
    seen = []
    for rank, name in enumerate(files):
        got, info = profiler_steps(folder / name)
        assert (info["rank"], info["world_size"], info["backend"]) == (rank, world, "gloo")
        assert len(got) == steps and got == list(range(got[0], got[0] + steps)), (name, got)
        seen.append(got)
    assert all(s == seen[0] for s in seen), seen
    return seen[0]
