"""The job side of capture: a daemon thread per rank that polls the run folder's ``.capture/`` for requests, and a
step hook that costs one integer compare while nothing is asked.

Steps are the calls of ``optimizer.step()`` (``torch.optim``'s global post hook; of the first optimizer that
steps, so a GAN's two optimizers count one step per iteration) or of ``tb_plugin.capture.step()``, which takes
over from the hook once called. Every rank counts from ``enable()``, so the ranks of a data-parallel job agree on
the numbers.

A request is agreed through the files (:mod:`.protocol`): rank 0 picks it up and writes a plan naming an optimizer
step in the future, far enough ahead (its measured step rate times the time every rank needs to read the plan)
that all ranks read it first; each rank arms its trigger at that step, records the next N steps and writes its
trace with the plan's stamp, so all ranks' files form one span. Anything that goes wrong is logged, written to the
rank's status file and dropped: the training loop never sees an exception from here.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import math
import os
import queue
import socket
import sys
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from . import protocol as p
from .folder import CaptureFolder, FolderError
from .session import NEVER, Missed, Session

log = logging.getLogger("tb_plugin.capture")

LOCAL_TIMING = (1.0, 0.25, 10.0)  # seconds: poll, poll while waiting for a plan, heartbeat
REMOTE_TIMING = (5.0, 1.0, 30.0)
MIN_LEAD_STEPS = 2
RATE_WINDOW_S = 30.0
RECENT_RATE_S = 3.0
RATE_KNOWN_S = 2.0  # rank 0 plans once it has watched the steps this long (a rate from one sample is none)
PLAN_GRACE_S = 10.0  # a rank waits this long past a request's deadline for rank 0's plan before giving up
EXIT_JOIN_S = 60.0  # at exit, how long to wait for a trace being written


class Agent:
    """Capture for one rank of a job, into ``folder`` (see :func:`tb_plugin.capture.enable`)."""

    def __init__(self, folder: CaptureFolder, *, poll_s: float | None = None, heartbeat_s: float | None = None,
                 rank: int | None = None, world_size: int | None = None) -> None:
        poll, fast, beat = LOCAL_TIMING if folder.is_local else REMOTE_TIMING
        self.folder = folder
        self.poll_s = poll if poll_s is None else max(0.01, poll_s)
        self.fast_poll_s = min(fast, self.poll_s)
        self.heartbeat_s = beat if heartbeat_s is None else max(self.poll_s, heartbeat_s)
        # the training thread's side: read by the hook, written by both threads with single assignments
        self.step = 0
        self.trigger = NEVER
        self.session: Session | None = None
        self._ref_optimizer = 0  # id() of the optimizer whose steps count
        self._hook: Any = None
        # the agent thread's side
        self._explicit = (rank, world_size)
        self.rank: int | None = None
        self.world_size = 1
        self.started = time.time()
        self._pid = os.getpid()
        self._host = socket.gethostname()
        self._inbox: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._stop = threading.Event()
        self._seen: set[str] = set()
        self._pending: dict[str, p.Request] = {}  # picked up, no plan armed yet
        self._plans: list[tuple[p.Request, p.Plan]] = []  # read, waiting for the current capture to end
        self._samples: collections.deque[tuple[float, int]] = collections.deque()
        self._next_poll = self._next_beat = 0.0
        self._last_error = ""
        self._writers: list[threading.Thread] = []  # traces being exported
        self._thread = threading.Thread(target=self._loop, name="tb-plugin-capture", daemon=True)

    @property
    def lead_s(self) -> float:
        """How far ahead rank 0 plans, in seconds: every rank polls within ``poll_s`` (it may have just polled when
        the request came), reads the plan within two fast polls, and a second or two of scheduling on a busy host;
        twice that, since a rank's thread may wait for the training thread's GIL."""
        return 2 * (self.poll_s + 2 * self.fast_poll_s) + 2.0

    # ---- the training thread ------------------------------------------------------------------------------------
    def start(self) -> Agent:
        from torch.optim.optimizer import register_optimizer_step_post_hook

        self._hook = register_optimizer_step_post_hook(self._optimizer_hook)
        self._thread.start()
        return self

    def _optimizer_hook(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if id(optimizer) != self._ref_optimizer and not self._adopt(optimizer):
            return
        self.step += 1
        if self.step >= self.trigger:
            self._at_trigger()

    def manual_step(self) -> None:
        """``tb_plugin.capture.step()``: the user's step boundary; from the first call on, optimizer steps no
        longer count."""
        if self._hook is not None:
            self._hook.remove()
            self._hook = None
        self.step += 1
        if self.step >= self.trigger:
            self._at_trigger()

    def _adopt(self, optimizer: Any) -> bool:
        """Count the steps of the first optimizer that steps (and of the next one, if that one is collected)."""
        if self._ref_optimizer:
            return False
        self._ref_optimizer = id(optimizer)
        with contextlib.suppress(TypeError):  # an optimizer class with __slots__ and no __weakref__: kept for good
            weakref.finalize(optimizer, self._forget, id(optimizer))
        return True

    def _forget(self, optimizer_id: int) -> None:
        if self._ref_optimizer == optimizer_id:
            self._ref_optimizer = 0

    def _at_trigger(self) -> None:
        """The step reached the trigger: start, step or stop the armed capture. Never raises."""
        session = self.session
        if session is None:
            self.trigger = NEVER
            return
        try:
            nxt = session.advance(self.step)
        except Exception as err:  # noqa: BLE001 - a capture must never break the training loop
            session.abandon()
            self._finish(session)
            why = str(err) if isinstance(err, Missed) else f"could not profile: {type(err).__name__}: {err}"
            self._post(lambda: self._status(session.request, p.FAILED, plan=session.plan, reason=why))
            return
        if session.captured == 0 and nxt != NEVER:
            self._post(lambda: self._status(session.request, p.CAPTURING, plan=session.plan))
        if nxt == NEVER:
            self._finish(session)
            self._post(lambda: self._export_aside(session))
        else:
            self.trigger = nxt

    def _finish(self, session: Session) -> None:
        self.trigger = NEVER
        if self.session is session:
            self.session = None

    def _post(self, task: Callable[[], None]) -> None:
        self._inbox.put(task)

    # ---- the agent's thread ------------------------------------------------------------------------------------
    def _loop(self) -> None:
        while not self._stop.is_set():
            wait = max(0.0, min(self._next_poll, self._next_beat) - time.monotonic()) if self.rank is not None \
                else self.poll_s
            try:
                task = self._inbox.get(timeout=wait)
            except queue.Empty:
                task = None
            try:
                if task is not None:
                    task()
                else:
                    self._tick()
            except Exception as err:  # noqa: BLE001 - the thread outlives any error; the job never sees it
                self._warn(f"{type(err).__name__}: {err}")

    def _tick(self) -> None:
        if self.rank is None and not self._resolve_rank():
            return
        now = time.monotonic()
        self._sample(now)
        if now >= self._next_beat:
            self._next_beat = now + self.heartbeat_s
            self._heartbeat("listening")
        if now >= self._next_poll:
            waiting_for_plan = self._poll()
            self._next_poll = time.monotonic() + (self.fast_poll_s if waiting_for_plan else self.poll_s)

    def _resolve_rank(self) -> bool:
        """Who this process is in the job: the ``rank``/``world_size`` given, else torchrun's ``RANK`` and
        ``WORLD_SIZE``, else the initialised process group's; a job that stepped with neither is one process."""
        rank, world = self._explicit
        if rank is None and "RANK" in os.environ and "WORLD_SIZE" in os.environ:
            rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        if rank is None:
            dist = sys.modules.get("torch.distributed")
            if dist is not None and dist.is_available() and dist.is_initialized():
                rank, world = dist.get_rank(), dist.get_world_size()
            elif self.step >= 1:
                rank, world = 0, 1
        if rank is None:
            return False
        self.rank, self.world_size = rank, max(1, world or 1)
        return True

    def _sample(self, now: float) -> None:
        self._samples.append((now, self.step))
        while self._samples and now - self._samples[0][0] > RATE_WINDOW_S:
            self._samples.popleft()

    def _rate_known(self) -> bool:
        return len(self._samples) >= 2 and self._samples[-1][0] - self._samples[0][0] >= RATE_KNOWN_S

    def steps_per_s(self) -> float:
        """The step rate, the higher of the last few seconds' and the window's: a job that sped up (warm-up over,
        a capture's own slow steps behind it) must not get a plan too close to be read in time."""
        if len(self._samples) < 2:
            return 0.0
        t1, s1 = self._samples[-1]
        recent = next(((t, s) for t, s in self._samples if t1 - t <= RECENT_RATE_S), self._samples[0])
        rates = [(s1 - s0) / (t1 - t0) for t0, s0 in (self._samples[0], recent) if t1 - t0 >= 0.5]
        return max(rates, default=0.0)

    def _heartbeat(self, state: str) -> None:
        assert self.rank is not None
        listener = p.Listener(rank=self.rank, world_size=self.world_size, step=self.step,
                              steps_per_s=round(self.steps_per_s(), 3), heartbeat_s=self.heartbeat_s,
                              updated=time.time(), host=self._host, pid=self._pid, state=state)
        self._write(p.listener_name(self.rank), listener)

    def _write(self, name: str, item: Any) -> bool:
        try:
            self.folder.write(name, p.encode(item))
        except FolderError as err:
            self._warn(str(err))
            return False
        self._last_error = ""
        return True

    def _warn(self, message: str) -> None:
        """Log a failure once (not every poll), so a read-only logdir does not flood the job's log."""
        if message != self._last_error:
            log.warning("tb_plugin.capture: %s", message)
            self._last_error = message

    # ---- requests and plans -------------------------------------------------------------------------------------
    def _poll(self) -> bool:
        """Read ``.capture/``: pick new requests up, plan (rank 0) or read plans, arm the next capture. Whether a
        plan is still awaited (then the next poll comes sooner)."""
        try:
            names = set(self.folder.names())
        except FolderError as err:
            self._warn(str(err))
            return False
        for request_id in sorted(filter(None, map(p.request_id_of, names))):
            if request_id not in self._seen:
                self._pick_up(request_id, names)
        if self.rank == 0:
            self._plan_next(names)
        self._read_plans(names)
        self._arm_next()
        return any(p.plan_name(i) not in names for i in self._pending)

    def _pick_up(self, request_id: str, names: set[str]) -> None:
        request = p.decode(self.folder.read(p.request_name(request_id)), p.Request)
        self._seen.add(request_id)
        if request is None or request.id != request_id or not _valid(request):
            return
        if time.time() > request.deadline and p.plan_name(request_id) not in names:
            return  # stale: nobody picked it up in time, a job started later must not act on it
        if p.plan_name(request_id) in names:
            plan = p.decode(self.folder.read(p.plan_name(request_id)), p.Plan)
            if plan is None or plan.planned < self.started:
                return  # planned for a job that ran before this one
        self._pending[request_id] = request
        self._status(request, p.WAITING)

    def _plan_next(self, names: set[str]) -> None:
        """Rank 0: plan the oldest pending request once no capture is armed or running (one at a time)."""
        if self.session is not None or self._plans or not self._rate_known():
            return
        todo = [r for r in self._pending.values() if p.plan_name(r.id) not in names]
        if not todo:
            return
        request = min(todo, key=lambda r: (r.created, r.id))
        start = self.step + max(MIN_LEAD_STEPS, math.ceil(self.steps_per_s() * self.lead_s))
        plan = p.Plan(id=request.id, start_step=start, steps=request.steps, stamp=time.time_ns(),
                      world_size=self.world_size, planned=time.time())
        if self._write(p.plan_name(request.id), plan):
            names.add(p.plan_name(request.id))
        else:
            del self._pending[request.id]
            self._status(request, p.FAILED, reason=f"could not write the plan: {self._last_error}")

    def _read_plans(self, names: set[str]) -> None:
        for request_id, request in list(self._pending.items()):
            if p.plan_name(request_id) not in names:
                if time.time() > request.deadline + PLAN_GRACE_S + 3 * self.poll_s:
                    del self._pending[request_id]
                    self._status(request, p.FAILED, reason="rank 0 never planned the capture (is rank 0 "
                                                           "running with capture enabled on this folder?)")
                continue
            plan = p.decode(self.folder.read(p.plan_name(request_id)), p.Plan)
            if plan is None or plan.id != request_id:
                continue
            del self._pending[request_id]
            self._plans.append((request, plan))

    def _arm_next(self) -> None:
        """Arm the earliest plan read, once the capture before it (if any) has ended."""
        if self.session is not None or not self._plans:
            return
        self._plans.sort(key=lambda rp: rp[1].start_step)
        request, plan = self._plans.pop(0)
        if self.step >= plan.start_step:
            self._status(request, p.FAILED, plan=plan, reason=f"missed the start step {plan.start_step:,}: this rank "
                         f"was at step {self.step:,} when it read the plan")
            return
        session = Session(request, plan)
        self.session = session
        self.trigger = plan.start_step
        self._status(request, p.WAITING, plan=plan)

    # ---- status and traces --------------------------------------------------------------------------------------
    def _status(self, request: p.Request, state: str, *, plan: p.Plan | None = None, file: str | None = None,
                reason: str | None = None, captured: int | None = None) -> None:
        assert self.rank is not None
        status = p.Status(id=request.id, rank=self.rank, world_size=self.world_size, state=state, step=self.step,
                          updated=time.time(), start_step=plan.start_step if plan else None, file=file,
                          reason=reason, steps_captured=captured, host=self._host)
        self._write(p.status_name(request.id, self.rank), status)

    def _export_aside(self, session: Session) -> None:
        """Write the trace on a thread of its own: a big trace takes seconds to export, and the agent's thread must
        go on beating meanwhile, or the requester would take the rank for lost. At exit, here and now."""
        if self._stop.is_set():
            self._write_trace(session)
            return
        writer = threading.Thread(target=self._write_trace, args=(session,), name="tb-plugin-capture-export",
                                  daemon=True)
        self._writers = [w for w in self._writers if w.is_alive()] + [writer]
        writer.start()

    def _write_trace(self, session: Session, ended_early: bool = False) -> None:
        """Export the stopped capture and move it into the run folder under the plan's stamp; then say so."""
        assert self.rank is not None
        name = p.trace_name(self.rank, session.plan.stamp)
        notes = list(session.notes)
        if ended_early:
            notes.insert(0, f"incomplete: the job ended after {session.captured} of {session.plan.steps} steps")
        staged = self.folder.staging_path(name)
        try:
            session.export(staged)
            self.folder.publish(staged, name)
        except Exception as err:  # noqa: BLE001 - a full disk, a store refusing the upload: said, not raised
            _remove_quietly(staged)
            reason = str(err) if isinstance(err, FolderError) else f"cannot write {name}: {_reason(err)}"
            self._status(session.request, p.FAILED, plan=session.plan, reason=reason, captured=session.captured)
            return
        self._status(session.request, p.WRITTEN, plan=session.plan, file=name, reason="; ".join(notes) or None,
                     captured=session.captured)

    # ---- exit ---------------------------------------------------------------------------------------------------
    def close(self) -> None:
        """At exit (``atexit``) or ``tb_plugin.capture.disable()``: finish what is in flight. A capture still
        recording is stopped and written as incomplete; one armed for a step never reached says why; the
        heartbeat says the job ended."""
        if os.getpid() != self._pid or self._stop.is_set():
            return  # a forked child (a DataLoader worker) has no agent of its own
        if self._hook is not None:
            self._hook.remove()
            self._hook = None
        self._stop.set()
        self._post(lambda: None)  # wakes the thread at once if it sleeps between polls
        if self._thread.is_alive():
            self._thread.join(EXIT_JOIN_S)
        session, self.session, self.trigger = self.session, None, NEVER
        try:
            self._drain()  # what the thread had not done yet (an export among them runs here, not aside)
            for writer in self._writers:
                writer.join(EXIT_JOIN_S)
            if self.rank is None:
                return
            self._close_session(session)
            for request in list(self._pending.values()) + [r for r, _ in self._plans]:
                self._status(request, p.FAILED, reason=f"the job ended at step {self.step:,} before the capture")
            self._heartbeat("ended")
        except Exception as err:  # noqa: BLE001 - the interpreter is exiting: say it, never raise
            log.warning("tb_plugin.capture: at exit: %s: %s", type(err).__name__, err)

    def _drain(self) -> None:
        while True:
            try:
                task = self._inbox.get_nowait()
            except queue.Empty:
                return
            task()

    def _close_session(self, session: Session | None) -> None:
        if session is None:
            return
        if session.capturing:
            session.stop()
            self._write_trace(session, ended_early=True)
        elif session.profiler is None:
            self._status(session.request, p.FAILED, plan=session.plan,
                         reason=f"the job ended at step {self.step:,}, before the capture's start step "
                                f"{session.start_step:,}")


def _valid(request: p.Request) -> bool:
    try:
        p.check_options(request.steps, list(request.options.activities),
                        {"record_shapes": request.options.record_shapes,
                         "profile_memory": request.options.profile_memory,
                         "with_stack": request.options.with_stack}, p.DEFAULT_DEADLINE_S)
    except p.OptionsError as err:
        log.warning("tb_plugin.capture: ignored request %s: %s", request.id, err)
        return False
    return True


def _reason(err: BaseException) -> str:
    if isinstance(err, OSError) and err.strerror:
        return err.strerror
    return f"{type(err).__name__}: {err}"


def _remove_quietly(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)
