"""Capture from a real running job: 4 CPU ranks (``torch.multiprocessing``, ``gloo``, DDP) train with
``tb_plugin.capture.enable`` in a subprocess (tests/capture_job.py) while a TensorBoard app watches the logdir.

A request through the CLI, and one through the HTTP route the page posts to, each give 4 traces of the same 3
optimizer steps (every rank's ``ProfilerStep#`` numbers, read from the files themselves), one span, listed by the
running server without a restart; a second request gets later steps. A folder nobody listens in times out with
its message (exit 4); a rank that never answers and a job that ends mid-capture are named. Under ``torchrun -m``
and ``torchrun --no-python``, the runner captures an unmodified script.

The tests' own process never imports torch: the jobs run in subprocesses (``sys.executable`` must have torch).
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tb_plugin.cli import main
from tests.capture_helpers import (
    JOB,
    Job,
    check_traces,
    free_port,
    job_env,
    profiler_steps,
    start_job,
    stop_job,
    wait_listening,
)
from tests.conftest import API

# A real training job: torch ranks in subprocesses (10-25 s a test on 2 cores, and their training takes a core
# meanwhile): make test runs these, make test-fast (the edit-test loop) leaves them out.
TRAINING_JOB = pytest.mark.slow
LINE = re.compile(r"rank (\d+): written (rank\1\.(\d+)\.pt\.trace\.json\.gz) \(steps ([\d,]+)–([\d,]+)\)")
HEADERS = {"X-PTP-Capture": "1"}


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Job]:
    running = start_job(tmp_path_factory.mktemp("capture_job"), 4)
    wait_listening(running, 4)
    yield running
    output = stop_job(running)
    assert sorted(re.findall(r"rank (\d) steps \d+", output)) == ["0", "1", "2", "3"], output


def wait_listed(client: Any, run: str, span_key: str, workers: int, timeout: float = 60.0) -> dict[str, Any]:
    """Until the server lists ``workers`` workers of ``run`` with a ready span of that key (no restart)."""
    deadline = time.monotonic() + timeout
    body: dict[str, Any] = {}
    while time.monotonic() < deadline:
        body = client.get(f"{API}/runs").get_json()
        found = [s for r in body["runs"] if r["name"] == run for w in r["workers"] for s in w["spans"]
                 if s["key"] == span_key and s["state"] == "ready"]
        if len(found) == workers:
            return body
        time.sleep(0.2)
    raise AssertionError(f"span {span_key} of {run} not listed ready on {workers} workers: {json.dumps(body)[:2000]}")


def cli_capture(capsys: Any, folder: Path, *more: str) -> tuple[int, str, str]:
    code = main(["capture", str(folder), "--steps", "3", "--deadline", "60", *more])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_a_request_nobody_listens_to_times_out_with_its_message(tmp_path: Path, capsys: Any) -> None:
    folder = tmp_path / "idle_run"
    folder.mkdir()
    started = time.monotonic()
    code = main(["capture", str(folder), "--steps", "3", "--deadline", "2"])
    out = capsys.readouterr()
    assert code == 4 and time.monotonic() - started < 10
    assert f"No job is listening in {folder}: start the training script with tb_plugin.capture.enable(" in out.err
    assert out.err.rstrip().endswith("no job picked the request up within 2 s")
    assert main(["capture", str(tmp_path / "missing"), "--steps", "3"]) == 2
    assert "no folder " in capsys.readouterr().err


@TRAINING_JOB
def test_a_rank_that_never_answers_and_a_job_ending_mid_capture(tmp_path: Path, capsys: Any) -> None:
    three = start_job(tmp_path, 3, "--enable-ranks", "0,1")
    try:
        wait_listening(three, 2)
        from tb_plugin.capture.folder import CaptureFolder
        from tb_plugin.capture.protocol import Options
        from tb_plugin.capture.requests import read_progress, submit

        folder = CaptureFolder(str(three.folder))
        # rank 0 picks the request up within a poll (0.2 s); rank 2, never, so the answer waits for the deadline
        made = submit(folder, 50, Options(activities=("cpu",)), 5.0, "test")
        deadline = time.monotonic() + 60
        while read_progress(folder, made.id).state != "capturing":
            assert time.monotonic() < deadline, read_progress(folder, made.id)
            time.sleep(0.05)
        time.sleep(0.5)  # a few steps in: at most 10 a second (the job sleeps 100 ms a step), 50 need over 5 s
    finally:
        output = stop_job(three)  # the job ends while ranks 0 and 1 record their 50 steps
    assert three.process.returncode == 0, output
    final = read_progress(folder, made.id)
    while not final.done:  # rank 2 is missing once the 5 s deadline passes
        time.sleep(0.3)
        final = read_progress(folder, made.id)
    assert final.state == "failed" and [r.state for r in final.ranks] == ["written", "written", "missing"]
    captured = [int(m) for m in re.findall(r"after (\d+) of 50 steps", final.message or "")]
    assert final.message is not None and final.message.startswith("rank 2 never answered the request"), final.message
    assert len(captured) == 1 and 0 < captured[0] < 50, final.message  # both ranks stopped at the same step
    for r in final.ranks[:2]:
        steps, _ = profiler_steps(three.folder / str(r.file))
        assert len(steps) == captured[0] or len(steps) == captured[0] + 1  # the step being recorded is kept too


@TRAINING_JOB
@pytest.mark.parametrize("form", ["-m", "--no-python"])
def test_the_runner_under_torchrun(tmp_path: Path, capsys: Any, form: str) -> None:
    torchrun = shutil.which("torchrun", path=str(Path(sys.executable).parent)) or "torchrun"
    runner = ["-m", "tb_plugin.capture"] if form == "-m" else ["--no-python", sys.executable, "-m", "tb_plugin.capture"]
    folder = tmp_path / "logdir" / "job"
    command = [torchrun, "--nproc-per-node", "2", "--master-port", str(free_port()), *runner,
               "--logdir", str(folder), "--poll", "0.2", "--heartbeat", "2", str(JOB), str(folder),
               "--launched", "--stop-file", str(tmp_path / "stop")]
    launched = start_job(tmp_path, 2, command=command)
    try:
        wait_listening(launched, 2)
        code, out, err = cli_capture(capsys, folder)
    finally:
        output = stop_job(launched)
    assert code == 0, out + err + output
    files = sorted(folder.glob("rank*.pt.trace.json.gz"))
    assert [f.name.split(".")[0] for f in files] == ["rank0", "rank1"]
    assert profiler_steps(files[0])[0] == profiler_steps(files[1])[0] and len(profiler_steps(files[0])[0]) == 3


def test_the_runner_runs_a_module_or_a_script_with_their_own_arguments(tmp_path: Path) -> None:
    (tmp_path / "probe_train.py").write_text(
        "import sys, tb_plugin.capture\n"
        "agent = tb_plugin.capture.current()\n"
        "print(repr(__name__), sys.argv, agent is not None and agent.folder.path, agent.poll_s, agent.heartbeat_s)\n")
    env = job_env()
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env["PYTHONPATH"]])
    folder = tmp_path / "log" / "run"
    # the runner's --poll and --heartbeat are enable()'s (default 1 s and 10 s on a local folder)
    for target, own, timing in ((["-m", "probe_train"], [], "1.0 10.0"),
                                ([str(tmp_path / "probe_train.py")], ["--poll", "0.5", "--heartbeat=3"], "0.5 3.0")):
        out = subprocess.run([sys.executable, "-m", "tb_plugin.capture", "--logdir", str(folder), *own, *target,
                              "--logdir", "theirs", "-m", "x", "--heartbeat", "7"], capture_output=True, text=True,
                             env=env, check=True)
        name = out.stdout.strip().rsplit("\n", 1)[-1].split(" ", 1)[0]
        assert out.stdout.strip().endswith(
            f"probe_train.py', '--logdir', 'theirs', '-m', 'x', '--heartbeat', '7'] {folder} {timing}"), out.stdout
        assert name == "'__main__'"
    bad = subprocess.run([sys.executable, "-m", "tb_plugin.capture", "--logdir", str(folder)], capture_output=True,
                         text=True, env=env)
    assert bad.returncode == 2 and "give the script to run (or -m MODULE)" in bad.stderr


# The tests of the module's 4-rank job come last: its ranks train (and use the CPU) from the first test that asks
# for it until the module ends.

@TRAINING_JOB
def test_the_cli_captures_the_same_steps_on_every_rank_twice(job: Job, tensorboard_app: Any, capsys: Any) -> None:
    client = tensorboard_app(job.logdir)  # running before the capture: the traces must appear without a restart
    assert client.get(f"{API}/runs").get_json()["runs"] == []
    firsts = []
    for _ in range(2):
        code, out, err = cli_capture(capsys, job.folder)
        assert code == 0, out + err
        lines = [LINE.fullmatch(line.split("; ")[0]) for line in out.splitlines()]
        assert len(lines) == 4 and all(lines), out
        files = [m.group(2) for m in lines if m]
        stamps = {m.group(3) for m in lines if m}
        assert len(stamps) == 1, out  # one stamp: the files form one span across the ranks
        first, last = ({int(m.group(i).replace(",", "")) for m in lines if m} for i in (4, 5))
        assert len(first) == 1 and len(last) == 1 and max(last) - min(first) == 2
        steps = check_traces(job.folder, files, 3)
        assert steps == [min(first), min(first) + 1, min(first) + 2]  # the CLI's lines say the recorded steps
        assert "4 of 4 ranks written" in err
        body = wait_listed(client, "job", stamps.pop(), 4)
        assert sorted(w["name"] for r in body["runs"] for w in r["workers"]) == ["rank0", "rank1", "rank2", "rank3"]
        firsts.append(steps[0])
    assert firsts[1] > firsts[0] + 2  # the second request recorded later steps


@TRAINING_JOB
def test_a_request_through_the_page_route(job: Job, tensorboard_app: Any) -> None:
    client = tensorboard_app(job.logdir, profiler_capture=True)
    deadline = time.monotonic() + 60
    while "job" not in {t["run"] for t in client.get(f"{API}/capture").get_json()["targets"]}:
        assert time.monotonic() < deadline, "the listening job's folder was never listed as a target"
        time.sleep(0.2)
    info = client.get(f"{API}/capture?run=job").get_json()
    assert info["enabled"] is True and info["job"]["listening"] == 4 and info["job"]["world_size"] == 4
    made = client.post(f"{API}/capture?run=job", json={"steps": 3, "activities": ["cpu"], "record_shapes": True},
                       headers=HEADERS)
    assert made.status_code == 202, made.get_json()
    answer = made.get_json()
    # just made: no rank has answered yet ("pending"), or rank 0, polling every 0.2 s, has already planned it and the
    # ranks wait for its first step ("waiting"); never further along, never failed
    assert answer["state"] in {"pending", "waiting"} and answer["requester"].startswith("TensorBoard page"), answer
    while not answer["done"]:
        assert time.monotonic() < deadline + 60, answer
        time.sleep(0.3)
        answer = client.get(f"{API}/capture/status?run=job&id={made.get_json()['id']}").get_json()
    assert answer["state"] == "written" and answer["summary"].startswith("4 of 4 ranks written: steps ")
    assert answer["message"] is None  # cpu only was asked: nothing is missing
    check_traces(job.folder, answer["files"], 3)
    with gzip.open(job.folder / answer["files"][0], "rt") as fh:
        assert json.load(fh)["record_shapes"] == 1  # the requested option reached the profiler
    body = wait_listed(client, "job", answer["span"], 4)
    assert {w["name"] for r in body["runs"] for w in r["workers"]} == {"rank0", "rank1", "rank2", "rank3"}
