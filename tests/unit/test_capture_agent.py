"""The job side's failure paths, without torch: an error while profiling never reaches the training loop (it is
written as the rank's failure), a full disk while writing the trace leaves no partial file and says so, a rank that
read the plan after its start step says it missed it, rank 0 plans far enough ahead of its step rate, a request
past its deadline is not acted on, and the step hook is an integer compare while nothing is armed."""

from __future__ import annotations

import errno
import gzip
import time
from pathlib import Path
from typing import Any

from tb_plugin.capture import protocol as p
from tb_plugin.capture.agent import MIN_LEAD_STEPS, Agent
from tb_plugin.capture.folder import CaptureFolder
from tb_plugin.capture.requests import read_progress, submit
from tb_plugin.capture.session import NEVER, Session


def agent_in(tmp_path: Path, rank: int = 0, world: int = 1) -> Agent:
    """An agent whose thread is not started: the tests call its steps themselves."""
    agent = Agent(CaptureFolder(str(tmp_path / "run")), poll_s=0.5, heartbeat_s=5.0, rank=rank, world_size=world)
    assert agent._resolve_rank()
    return agent


def status_of(agent: Agent, request_id: str) -> p.Status:
    found = p.decode(agent.folder.read(p.status_name(request_id, agent.rank or 0)), p.Status)
    assert found is not None
    return found  # type: ignore[no-any-return]


def armed(agent: Agent, start: int, steps: int = 3) -> Session:
    request = submit(agent.folder, steps, p.Options(), 60, "test")
    plan = p.Plan(request.id, start, steps, 1234, agent.world_size, time.time())
    session = Session(request, plan)
    agent.session, agent.trigger = session, start
    return session


class Optimizer:
    """Stands for a torch.optim optimizer: the hook sees only its identity."""


class FailingProfiler:
    def __init__(self, error: BaseException) -> None:
        self.error = error

    def step(self) -> None:
        raise self.error

    def stop(self) -> None:
        pass

    def export_chrome_trace(self, path: str) -> None:
        Path(path).write_bytes(b"half a trace")  # what a full disk leaves behind
        raise self.error


def test_an_error_while_profiling_is_the_ranks_failure_not_the_loops(tmp_path: Path) -> None:
    agent = agent_in(tmp_path)
    session = armed(agent, start=10)
    session.profiler = FailingProfiler(RuntimeError("Kineto is busy"))
    agent.step = 10
    agent._at_trigger()  # must not raise
    agent._drain()
    assert agent.session is None and agent.trigger == NEVER
    status = status_of(agent, session.request.id)
    assert (status.state, status.reason) == ("failed", "could not profile: RuntimeError: Kineto is busy")


def test_a_full_disk_leaves_no_partial_trace_and_says_so(tmp_path: Path) -> None:
    agent = agent_in(tmp_path)
    session = armed(agent, start=10)
    session.profiler = FailingProfiler(OSError(errno.ENOSPC, "No space left on device"))
    session.captured = 3
    agent._write_trace(session)
    status = status_of(agent, session.request.id)
    assert (status.state, status.reason) == ("failed", "cannot write rank0.1234.pt.trace.json.gz: No space left on device")
    assert sorted(f.name for f in (tmp_path / "run").iterdir()) == [".capture"]  # no trace, whole or partial
    assert not [f for f in (tmp_path / "run" / ".capture").iterdir() if f.name.startswith(".tmp-")]
    assert read_progress(agent.folder, session.request.id).message == (
        "rank 0 failed: cannot write rank0.1234.pt.trace.json.gz: No space left on device.")


def test_a_plan_read_after_its_start_step_is_missed(tmp_path: Path) -> None:
    agent = agent_in(tmp_path, rank=1, world=2)
    request = submit(agent.folder, 3, p.Options(), 60, "test")
    plan = p.Plan(request.id, 20, 3, 1234, 2, time.time())
    agent.folder.write(p.plan_name(request.id), p.encode(plan))
    agent.step = 25
    agent._poll()
    assert agent.session is None and agent.trigger == NEVER
    status = status_of(agent, request.id)
    assert (status.state, status.start_step) == ("failed", 20)
    assert status.reason == "missed the start step 20: this rank was at step 25 when it read the plan"


def test_rank_0_plans_ahead_of_its_step_rate_and_arms_the_trigger(tmp_path: Path) -> None:
    agent = agent_in(tmp_path, rank=0, world=2)
    now = time.monotonic()
    for i, t in enumerate((now - 3.0, now - 2.0, now - 1.0, now)):  # 100 steps a second for 3 s
        agent._samples.append((t, 1000 + 100 * i))
    agent.step = 1300
    request = submit(agent.folder, 3, p.Options(), 60, "test")
    agent._poll()
    plan = p.decode(agent.folder.read(p.plan_name(request.id)), p.Plan)
    assert plan is not None and plan.world_size == 2 and plan.steps == 3
    # lead: 2 x (poll 0.5 + 2 x fast poll 0.25) + 2 s = 4 s at 100 steps/s
    assert agent.lead_s == 4.0 and plan.start_step == 1300 + 400
    assert agent.trigger == plan.start_step and agent.session is not None
    assert status_of(agent, request.id).state == "waiting"


def test_rank_0_waits_for_a_step_rate_before_planning(tmp_path: Path) -> None:
    agent = agent_in(tmp_path)
    request = submit(agent.folder, 3, p.Options(), 60, "test")
    agent.step = 5
    agent._poll()  # no samples yet: no rate, no plan (a rate of 0 would plan MIN_LEAD_STEPS ahead)
    assert agent.folder.read(p.plan_name(request.id)) is None and agent.trigger == NEVER
    now = time.monotonic()
    agent._samples.extend([(now - 2.5, 5), (now, 5)])  # a paused job: 0 steps a second
    agent._poll()
    assert agent.trigger == 5 + MIN_LEAD_STEPS


def test_a_stale_request_is_not_acted_on(tmp_path: Path) -> None:
    agent = agent_in(tmp_path)
    stale = submit(agent.folder, 3, p.Options(), 2, "test", now=time.time() - 10)
    agent._poll()
    assert stale.id in agent._seen and not agent._pending
    assert agent.folder.read(p.status_name(stale.id, 0)) is None


def test_the_step_hook_only_compares_while_nothing_is_armed(tmp_path: Path) -> None:
    agent = agent_in(tmp_path)
    calls: list[Any] = []
    agent._at_trigger = lambda: calls.append(agent.step)  # type: ignore[method-assign]
    optimizer, other = Optimizer(), Optimizer()
    for _ in range(1000):
        agent._optimizer_hook(optimizer, (), {})
        agent._optimizer_hook(other, (), {})  # a second optimizer's steps do not count
    assert agent.step == 1000 and calls == []
    agent.trigger = 1002
    for _ in range(3):
        agent._optimizer_hook(optimizer, (), {})
    assert calls == [1002, 1003]


def test_a_folder_the_job_cannot_write_is_logged_once_and_training_goes_on(tmp_path: Path,
                                                                            caplog: Any) -> None:
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / ".capture").write_text("a file where the folder should be")
    agent = agent_in(tmp_path)
    with caplog.at_level("WARNING", logger="tb_plugin.capture"):
        for _ in range(3):
            agent._next_beat = agent._next_poll = 0.0
            agent._tick()  # heartbeat and poll: neither raises
    warnings = [r.getMessage() for r in caplog.records]
    assert warnings == [f"tb_plugin.capture: cannot write listener-rank0.json into {tmp_path / 'run'}/.capture: "
                        ".capture is a file, not a folder"]
    agent._optimizer_hook(Optimizer(), (), {})
    assert agent.step == 1


class SlowProfiler(FailingProfiler):
    def export_chrome_trace(self, path: str) -> None:
        time.sleep(1.0)
        Path(path).write_bytes(b'{"traceEvents": []}')


def test_a_long_export_runs_aside_so_the_agent_keeps_beating(tmp_path: Path) -> None:
    agent = agent_in(tmp_path)
    session = armed(agent, start=10, steps=1)
    session.profiler = SlowProfiler(RuntimeError("unused"))
    session.captured = 1
    started = time.monotonic()
    agent._export_aside(session)  # what the agent's thread runs: it must come back at once
    assert time.monotonic() - started < 0.5 and agent._writers[0].is_alive()
    agent._heartbeat("listening")  # the thread is free to beat meanwhile
    agent._writers[0].join(10)
    status = status_of(agent, session.request.id)
    assert (status.state, status.file) == ("written", "rank0.1234.pt.trace.json.gz")
    with gzip.open(tmp_path / "run" / "rank0.1234.pt.trace.json.gz") as fh:
        assert fh.read() == b'{"traceEvents": []}'
