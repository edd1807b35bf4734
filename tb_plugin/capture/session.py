"""One capture on one rank: the profiler started after the planned optimizer step, stepped at each step boundary
and stopped after the requested number of steps, all on the training thread (where ``torch.profiler`` must run);
the export and the file writes happen later, on the agent's thread.

``torch`` is imported here, in the job, only when a capture starts.
"""

from __future__ import annotations

import contextlib
import gzip
import os
import shutil
from typing import Any

from .protocol import Plan, Request

GZIP_LEVEL = 6  # zlib's default: a third of level 9's time (what torch's exporter uses) for a few % more bytes
NEVER = 1 << 62  # the trigger step while nothing is armed: the hook's one integer compare never passes

_ACTIVITY_NAMES = {"cpu": "CPU", "cuda": "CUDA", "xpu": "XPU", "mtia": "MTIA", "hpu": "HPU"}


class Missed(Exception):
    """The rank reached the plan's start step before it could arm it (it read the plan too late)."""


class Session:
    """The capture of ``plan`` on this rank. ``advance(step)`` is called by the step hook each time the step
    reaches the trigger it returned last; it never touches a file."""

    def __init__(self, request: Request, plan: Plan) -> None:
        self.request = request
        self.plan = plan
        self.profiler: Any = None
        self.captured = 0  # steps recorded so far
        self.notes: list[str] = []  # what the trace lacks that was asked for (an activity this host does not have)
        self.finished = False

    @property
    def start_step(self) -> int:
        return self.plan.start_step

    @property
    def capturing(self) -> bool:
        return self.profiler is not None and not self.finished

    def advance(self, step: int) -> int:
        """Start, step or stop the profiler at optimizer step ``step``; the next step to be called at (``NEVER``
        once stopped). Raises :class:`Missed` when the start step went by unarmed."""
        if self.profiler is None:
            if step != self.plan.start_step:
                raise Missed(f"missed the start step {self.plan.start_step:,}: this rank was at step {step:,} "
                             "when it could start (it read the plan too late)")
            self._start(step)
            return step + 1
        self.captured = step - self.plan.start_step
        if self.captured < self.plan.steps:
            self.profiler.step()
            return step + 1
        self.stop()
        return NEVER

    def _start(self, step: int) -> None:
        import torch.profiler as tp

        wanted = self.request.options.activities
        supported = tp.supported_activities()  # type: ignore[no-untyped-call]
        activities = [a for name in wanted if (a := getattr(tp.ProfilerActivity, _ACTIVITY_NAMES[name], None))
                      is not None and a in supported]
        missing = [name for name in wanted if name not in {_name_of(a) for a in activities}]
        if missing:
            self.notes.append(f"{', '.join(missing)} not available on this host")
        if not activities:
            raise RuntimeError(f"none of the requested activities ({', '.join(wanted)}) is available on this host")
        options = self.request.options
        profiler = tp.profile(activities=activities, record_shapes=options.record_shapes,
                              profile_memory=options.profile_memory, with_stack=options.with_stack,
                              schedule=_always_record, on_trace_ready=None)
        # ProfilerStep#<n> names the optimizer step each recorded step ends with, as the job counts them
        profiler.step_num = step + 1
        profiler.start()
        self.profiler = profiler

    def stop(self) -> None:
        """Stop recording (also when the job ends mid-capture): the trace holds the steps recorded so far."""
        if self.profiler is not None and not self.finished:
            self.finished = True
            self.profiler.stop()

    def abandon(self) -> None:
        """Stop a profiler that failed mid-way, quietly: the training loop must go on whatever happens."""
        self.finished = True
        if self.profiler is not None:
            with contextlib.suppress(Exception):  # it may not have started at all
                self.profiler.stop()

    def export(self, path: str) -> None:
        """Write the recorded trace (Chrome JSON, gzipped for a ``.gz`` path); slow on big traces: the agent's
        thread calls it, never the training loop. Gzipped here in 1 MiB blocks (zlib lets go of the GIL while it
        compresses each), not line by line as ``export_chrome_trace`` would: the training thread keeps running."""
        if not path.endswith(".gz"):
            self.profiler.export_chrome_trace(path)
            return
        raw = path[:-3]
        try:
            self.profiler.export_chrome_trace(raw)
            with open(raw, "rb") as src, gzip.open(path, "wb", compresslevel=GZIP_LEVEL) as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(raw)


def _always_record(step: int) -> Any:
    """The schedule of a capture: record from start to stop (start and stop are called at the planned steps);
    a schedule is given so that ``torch.profiler`` marks each step as ``ProfilerStep#<n>``."""
    from torch.profiler import ProfilerAction

    return ProfilerAction.RECORD


def _name_of(activity: Any) -> str:
    return str(getattr(activity, "name", activity)).lower()
