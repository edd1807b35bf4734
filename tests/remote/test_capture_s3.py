"""Capture through an S3 logdir (moto's real S3 server, s3fs): the page's route writes the request object, a rank's
agent lists and reads it there, plans, answers and uploads its trace in one PUT, and the server reads the progress
and lists the new trace. The profiler is a stand-in that writes a real trace file (no torch in the test process)."""

from __future__ import annotations

import gzip
import json
import time
from pathlib import Path
from typing import Any

from tb_plugin.capture import protocol as p
from tb_plugin.capture.agent import Agent
from tb_plugin.capture.folder import CaptureFolder
from tb_plugin.capture.requests import read_progress
from tests.conftest import API, cpu_op, wait_until_settled
from tests.remote.conftest import Moto


class TraceWriter:
    """Stands for torch.profiler: records nothing, exports a small real trace with the three steps."""

    def __init__(self, first_step: int) -> None:
        self.first_step = first_step
        self.steps = 0

    def step(self) -> None:
        self.steps += 1

    def stop(self) -> None:
        pass

    def export_chrome_trace(self, path: str) -> None:
        events = [{**cpu_op(f"ProfilerStep#{self.first_step + i}", 100.0 * i, 90.0), "cat": "user_annotation"}
                  for i in range(3)] + [cpu_op("aten::mm", 100.0 * i + 5, 50.0) for i in range(3)]
        Path(path).write_bytes(gzip.compress(json.dumps({"traceEvents": events}).encode()))


def test_a_capture_through_s3(tensorboard_app: Any, s3_env: Any, moto: Moto) -> None:
    # a bucket of its own: the session's ``profiles`` bucket is counted key by key by the other S3 tests
    moto.client().create_bucket(Bucket="captures")
    client = tensorboard_app("s3://captures/capture/", profiler_capture=True)
    agent = Agent(CaptureFolder("s3://captures/capture/job"), poll_s=0.5, rank=0, world_size=1)
    assert agent._resolve_rank() and not agent.folder.is_local
    agent.step = 100
    agent._heartbeat("listening")  # the job announces itself: the server lists its folder as a target
    deadline = time.monotonic() + 60
    while [(t["run"], t["listening"]) for t in client.get(f"{API}/capture").get_json()["targets"]] != [("job", 1)]:
        assert time.monotonic() < deadline, client.get(f"{API}/capture").get_json()
        time.sleep(0.3)
    made = client.post(f"{API}/capture?run=job", json={"steps": 3, "activities": ["cpu"]},
                       headers={"X-PTP-Capture": "1"})
    assert made.status_code == 202, made.get_json()
    request_id = made.get_json()["id"]
    now = time.monotonic()
    agent._samples.extend([(now - 3, 40), (now, 100)])  # 20 steps a second
    agent._poll()  # picks the request up from S3, plans (rank 0), arms
    session = agent.session
    assert session is not None and agent.trigger == session.start_step
    assert session.start_step == 100 + 20 * agent.lead_s
    session.profiler = TraceWriter(session.start_step + 1)
    for step in range(session.start_step, session.start_step + 4):  # the training loop's steps
        agent.step = step
        if step >= agent.trigger:
            agent._at_trigger()
    agent._drain()  # status writes, and the export on a thread of its own, as the agent's thread does them
    for writer in agent._writers:
        writer.join(30)
    name = p.trace_name(0, session.plan.stamp)
    status = client.get(f"{API}/capture/status?run=job&id={request_id}").get_json()
    assert (status["state"], status["files"], status["span"]) == ("written", [name], str(session.plan.stamp))
    assert status["summary"] == f"1 of 1 ranks written: steps {session.start_step + 1:,}–{session.start_step + 3:,}"
    assert read_progress(agent.folder, request_id).ok
    body = wait_until_settled(client, timeout=60, expect_spans=1)
    assert [(r["name"], r["workers"][0]["name"], r["workers"][0]["spans"][0]["key"]) for r in body["runs"]] == [
        ("job", "rank0", str(session.plan.stamp))]
