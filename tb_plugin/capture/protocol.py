"""The files of a capture, in a run folder's ``.capture/``: the one contract between a requester (the page's
server, the CLI) and a job's ranks (:mod:`.agent`). Nothing travels through ports: a job behind a firewall, on
many nodes, answers as long as it can reach the folder (local, NFS, or an object store through fsspec).

``request-<id>.json``   written by the requester: steps, options, who asked, the deadline for a job to pick it up
``plan-<id>.json``      written by rank 0 when it picks the request up: the optimizer step every rank starts after
                        (a step in the future, far enough ahead for every rank to read the plan first) and the
                        stamp every rank's trace file is named with (one span across the ranks)
``status-<id>-rank<r>.json``  written by each rank: ``waiting``, ``capturing``, ``written`` (the file) or
                        ``failed`` (the reason), with the rank's step
``listener-rank<r>.json``     a heartbeat of each rank of a job with capture enabled (its step and step rate),
                        rewritten every few seconds; ``ended`` once the job exits

Every file is small JSON, written whole (local: a temporary name then an atomic rename; object stores: one PUT)
and decoded strictly: a file that does not decode is treated as absent, never as an error of the training job.
"""

from __future__ import annotations

import re
import secrets
from typing import Any, Literal

import msgspec

from ..catalog.names import CAPTURE_DIR, LISTENER_PREFIX

__all__ = ["ACTIVITIES", "CAPTURE_DIR", "MAX_STEPS", "Listener", "Options", "Plan", "Request", "Status"]

VERSION = 1
ACTIVITIES = ("cpu", "cuda", "xpu", "mtia", "hpu")  # torch.profiler.ProfilerActivity members a request may name
DEFAULT_ACTIVITIES = ("cpu", "cuda")
MAX_STEPS = 50  # a trace of more steps is rarely wanted and may be gigabytes per rank
DEFAULT_STEPS = 3
DEFAULT_DEADLINE_S = 60.0  # how long a job has to pick a request up
MIN_DEADLINE_S, MAX_DEADLINE_S = 2.0, 3600.0
MAX_REQUESTER = 200
MAX_FILE_BYTES = 64 << 10  # a capture file larger than this is not ours: left unread

WAITING, CAPTURING, WRITTEN, FAILED = "waiting", "capturing", "written", "failed"
RankState = Literal["waiting", "capturing", "written", "failed"]

_ID = re.compile(r"[0-9a-f]{16}")
_STATUS = re.compile(r"status-(?P<id>[0-9a-f]{16})-rank(?P<rank>[0-9]{1,7})\.json")
_LISTENER = re.compile(re.escape(LISTENER_PREFIX) + r"rank(?P<rank>[0-9]{1,7})\.json")
_REQUEST = re.compile(r"request-(?P<id>[0-9a-f]{16})\.json")


class Options(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """What to profile: ``torch.profiler.profile``'s options that a request may set, nothing else."""

    activities: tuple[str, ...] = DEFAULT_ACTIVITIES
    record_shapes: bool = False
    profile_memory: bool = False
    with_stack: bool = False


class Request(msgspec.Struct, frozen=True):
    id: str
    steps: int
    options: Options
    requester: str
    created: float  # seconds since the epoch, the requester's clock
    deadline: float  # a job must pick the request up by then (its rank 0 plans it); later it is stale
    version: int = VERSION


class Plan(msgspec.Struct, frozen=True):
    id: str
    start_step: int  # profiling starts right after this optimizer step and covers the next ``steps`` steps
    steps: int
    stamp: int  # the file name's stamp on every rank: ``rank<r>.<stamp>.pt.trace.json.gz``, one span
    world_size: int
    planned: float
    version: int = VERSION


class Status(msgspec.Struct, frozen=True):
    id: str
    rank: int
    world_size: int
    state: str  # waiting, capturing, written, failed
    step: int  # the rank's optimizer step when it wrote this
    updated: float
    start_step: int | None = None
    file: str | None = None  # written: the trace file's name (in the run folder)
    reason: str | None = None  # failed: why; written: what is missing (a job that ended mid-capture)
    steps_captured: int | None = None
    host: str = ""
    version: int = VERSION


class Listener(msgspec.Struct, frozen=True):
    rank: int
    world_size: int
    step: int
    steps_per_s: float
    heartbeat_s: float  # rewritten at least this often while the job runs
    updated: float
    host: str = ""
    pid: int = 0
    state: str = "listening"  # "ended" once the job exited
    version: int = VERSION


def new_id() -> str:
    """A request id nobody can guess or collide with: 64 random bits as 16 hex digits."""
    return secrets.token_hex(8)


def is_id(text: str) -> bool:
    return _ID.fullmatch(text) is not None


def request_name(request_id: str) -> str:
    return f"request-{request_id}.json"


def plan_name(request_id: str) -> str:
    return f"plan-{request_id}.json"


def status_name(request_id: str, rank: int) -> str:
    return f"status-{request_id}-rank{rank}.json"


def listener_name(rank: int) -> str:
    return f"{LISTENER_PREFIX}rank{rank}.json"


def worker_name(rank: int) -> str:
    """The worker a rank's trace is shown as: ``rank<r>``, as DDP samples name theirs."""
    return f"rank{rank}"


def trace_name(rank: int, stamp: int) -> str:
    """``tensorboard_trace_handler``'s file name pattern, with the stamp the plan fixed for every rank."""
    return f"{worker_name(rank)}.{stamp}.pt.trace.json.gz"


def request_id_of(name: str) -> str | None:
    m = _REQUEST.fullmatch(name)
    return m.group("id") if m else None


def status_rank_of(name: str, request_id: str) -> int | None:
    m = _STATUS.fullmatch(name)
    return int(m.group("rank")) if m and m.group("id") == request_id else None


def listener_rank_of(name: str) -> int | None:
    m = _LISTENER.fullmatch(name)
    return int(m.group("rank")) if m else None


def encode(item: msgspec.Struct) -> bytes:
    return msgspec.json.encode(item)


def decode(data: bytes | None, kind: type[Any]) -> Any:
    """A capture file decoded as ``kind``, or None when absent, too big or not one (a half-written or foreign
    file is no reason to stop a training job or fail a page)."""
    if data is None or len(data) > MAX_FILE_BYTES:
        return None
    try:
        return msgspec.json.decode(data, type=kind)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


class OptionsError(ValueError):
    """Capture options a requester may not send; the message names the field."""


def check_options(steps: Any, activities: Any, flags: dict[str, Any], deadline_s: Any) -> tuple[int, Options, float]:
    """Validate what a requester asks for (the page's JSON, the CLI's arguments): steps 1..``MAX_STEPS``,
    activities from :data:`ACTIVITIES`, the three boolean options, a deadline in seconds; raises
    :class:`OptionsError`."""
    if isinstance(steps, bool) or not isinstance(steps, int) or not 1 <= steps <= MAX_STEPS:
        raise OptionsError(f"'steps' must be a whole number from 1 to {MAX_STEPS}")
    if not isinstance(activities, (list, tuple)) or not activities or len(activities) > len(ACTIVITIES):
        raise OptionsError(f"'activities' must be a non-empty list of {', '.join(ACTIVITIES)}")
    for activity in activities:
        if activity not in ACTIVITIES:
            raise OptionsError(f"'activities': unknown activity {str(activity)[:32]!r}; one of {', '.join(ACTIVITIES)}")
    for name, value in flags.items():
        if not isinstance(value, bool):
            raise OptionsError(f"'{name}' must be true or false")
    if isinstance(deadline_s, bool) or not isinstance(deadline_s, (int, float)) or \
            not MIN_DEADLINE_S <= deadline_s <= MAX_DEADLINE_S:
        raise OptionsError(f"'deadline_s' must be a number of seconds from {MIN_DEADLINE_S:g} to {MAX_DEADLINE_S:g}")
    options = Options(activities=tuple(dict.fromkeys(activities)), **flags)
    return steps, options, float(deadline_s)


def clean_requester(text: str) -> str:
    """Who asked, as stored in a request: printable, bounded."""
    return "".join(c if c.isprintable() else "_" for c in text)[:MAX_REQUESTER]
