"""Where a capture request stands, from its files alone: one pure function the page's route and the CLI share,
so both say the same thing ("3 of 8 ranks capturing, step 40,012") and name the same failures.

A rank is *missing* when the request's deadline passed without a status from it, and *lost* when it answered but
went silent mid-way (no status or heartbeat for three heartbeats: the job ended or hangs).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from . import protocol as p

MISSING, LOST, PENDING = "missing", "lost", "pending"
_TERMINAL = {p.WRITTEN, p.FAILED, MISSING, LOST}
SILENCE_SLACK_S = 5.0
MAX_RANK_ROWS = 1024  # rows of ranks an answer carries (the summary and the message count every rank)


@dataclass(frozen=True)
class RankProgress:
    rank: int
    state: str  # pending, waiting, capturing, written, failed, missing, lost
    step: int | None = None
    file: str | None = None
    reason: str | None = None
    host: str = ""


@dataclass(frozen=True)
class Progress:
    request: p.Request
    state: str  # pending, no_job, waiting, capturing, written, failed
    done: bool
    summary: str
    message: str | None
    world_size: int | None
    start_step: int | None
    stamp: int | None
    ranks: list[RankProgress] = field(default_factory=list)

    @property
    def files(self) -> list[str]:
        return [r.file for r in self.ranks if r.state == p.WRITTEN and r.file]

    @property
    def ok(self) -> bool:
        return self.state == p.WRITTEN

    def as_dict(self, run: str | None = None) -> dict[str, Any]:
        """The JSON the page's ``/capture/status`` answers with and ``capture --json`` prints."""
        r = self.request
        return {
            "id": r.id, "run": run, "state": self.state, "done": self.done, "summary": self.summary,
            "message": self.message, "steps": r.steps, "start_step": self.start_step,
            "world_size": self.world_size,
            # the span the traces form: its stable key (the stamp of every rank's file name)
            "span": str(self.stamp) if self.stamp is not None and self.files else None,
            "created": r.created, "deadline": r.deadline, "requester": r.requester,
            "options": {"activities": list(r.options.activities), "record_shapes": r.options.record_shapes,
                        "profile_memory": r.options.profile_memory, "with_stack": r.options.with_stack},
            "files": self.files,
            "ranks": [{"rank": k.rank, "worker": p.worker_name(k.rank), "state": k.state, "step": k.step,
                       "file": k.file, "reason": k.reason, "host": k.host} for k in self.ranks[:MAX_RANK_ROWS]],
            "ranks_left_out": max(0, len(self.ranks) - MAX_RANK_ROWS),
        }


def progress(request: p.Request, plan: p.Plan | None, statuses: dict[int, p.Status], heard: dict[int, float],
             heartbeat_s: float, now: float, folder: str = "the run folder") -> Progress:
    """``statuses`` by rank, ``heard``: when each rank was last heard of (its listener file's time); ``now`` and
    every time in seconds since the epoch."""
    expired = now > request.deadline
    if not statuses:
        return _unanswered(request, expired, folder)
    world = max([s.world_size for s in statuses.values()] + ([plan.world_size] if plan else []))
    ranks = [_rank(r, statuses.get(r), heard.get(r), heartbeat_s, now, expired) for r in range(world)]
    ranks += [_rank(r, s, heard.get(r), heartbeat_s, now, expired) for r, s in sorted(statuses.items()) if r >= world]
    start = plan.start_step if plan else next((s.start_step for s in statuses.values() if s.start_step), None)
    counts = {state: sum(r.state == state for r in ranks) for state in {r.state for r in ranks}}
    done = all(r.state in _TERMINAL for r in ranks)
    written = counts.get(p.WRITTEN, 0)
    if done:
        state = p.WRITTEN if written == len(ranks) else p.FAILED
        summary = f"{written} of {len(ranks)} ranks written" + _steps(start, request.steps, written)
        message = _explain(ranks)
    elif counts.get(p.CAPTURING):
        state = p.CAPTURING
        step = max((r.step or 0) for r in ranks if r.state == p.CAPTURING)
        summary = f"{counts[p.CAPTURING]} of {len(ranks)} ranks capturing, step {step:,}"
        message = _explain(ranks, notes=False)
    else:
        state = p.WAITING
        busy = counts.get(p.WAITING, 0) + written
        summary = f"{busy} of {len(ranks)} ranks waiting" + (f" for step {start:,}" if start else " for rank 0's plan")
        message = _explain(ranks, notes=False)
    return Progress(request, state, done, summary, message, world, start, plan.stamp if plan else None, ranks)


def _unanswered(request: p.Request, expired: bool, folder: str) -> Progress:
    if not expired:
        wait = round(request.deadline - request.created)
        return Progress(request, PENDING, False, f"waiting up to {wait} s for the job to pick the request up",
                        None, None, None, None)
    waited = round(request.deadline - request.created)
    return Progress(request, "no_job", True, f"no job picked the request up within {waited} s",
                    f"No job is listening in {folder}: start the training script with "
                    f"tb_plugin.capture.enable(\"{folder}\") (or python -m tb_plugin.capture --logdir {folder} "
                    "train.py), and check that it is training and can read and write this folder (a job that cannot "
                    "says so in its log).", None, None, None)


def _rank(rank: int, status: p.Status | None, heard: float | None, heartbeat_s: float, now: float,
          expired: bool) -> RankProgress:
    if status is None:
        if not expired:
            return RankProgress(rank, PENDING)
        return RankProgress(rank, MISSING, reason="never answered the request (is this rank running with capture "
                                                  "enabled, and can it read the folder?)")
    if status.state in (p.WRITTEN, p.FAILED):
        return RankProgress(rank, status.state, status.step, status.file, status.reason, status.host)
    last = max(status.updated, heard or 0.0)
    if now - last > 3 * heartbeat_s + SILENCE_SLACK_S:
        what = "while capturing" if status.state == p.CAPTURING else "before the capture started"
        return RankProgress(rank, LOST, status.step, reason=f"stopped answering {what} (last heard of "
                                                            f"{now - last:,.0f} s ago): the job may have ended or hung",
                            host=status.host)
    return RankProgress(rank, status.state, status.step, host=status.host)


def _steps(start: int | None, steps: int, written: int) -> str:
    if not start or not written:
        return ""
    return f": steps {start + 1:,}–{start + steps:,}" if steps > 1 else f": step {start + 1:,}"


def _explain(ranks: list[RankProgress], notes: bool = True) -> str | None:
    """The failures, one clause per reason naming its ranks (the first few of many), then (with ``notes``) what
    written traces lack (an activity the host does not have, steps missing as the job ended); None if nothing."""
    failed: dict[tuple[str, str], list[int]] = {}
    lacking: dict[str, list[int]] = {}
    for r in ranks:
        if r.state in (p.FAILED, LOST, MISSING):
            failed.setdefault((r.state, r.reason or r.state), []).append(r.rank)
        elif notes and r.state == p.WRITTEN and r.reason:
            lacking.setdefault(r.reason, []).append(r.rank)
    parts = [f"{_ranks(w)} {'failed: ' if state == p.FAILED else ''}{reason}" for (state, reason), w in failed.items()]
    parts += [f"{_ranks(w)}: {reason}" for reason, w in lacking.items()]
    return "; ".join(parts) + "." if parts else None


def _ranks(ranks: list[int]) -> str:
    names = ", ".join(map(str, ranks[:8])) + (f" and {len(ranks) - 8} more" if len(ranks) > 8 else "")
    return f"rank{'s' if len(ranks) > 1 else ''} {names}"
