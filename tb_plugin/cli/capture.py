"""``pytorch-tb-profiler capture LOGDIR/RUN --steps 3``: ask the job listening in a run folder
(``tb_plugin.capture.enable``) for a trace of its next steps, wait, and print a line per rank.

It writes one request file into ``LOGDIR/RUN/.capture/`` and reads the ranks' answers there: it needs no
TensorBoard and no port, only the folder (local or a URL the job can reach too).

Exit codes: 0 every rank wrote its trace; 2 bad arguments; 4 no job picked the request up before its deadline;
5 the capture did not complete on every rank (a rank failed, never answered or stopped answering, or ``--timeout``
passed first); 6 the request could not be written (a read-only or full logdir, a store refusing the write).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from ..capture import protocol as p
from ..capture.folder import CaptureFolder, FolderError
from ..capture.progress import Progress, RankProgress
from ..capture.requests import listeners, read_progress, submit

EXIT_OK, EXIT_USAGE, EXIT_NO_JOB, EXIT_INCOMPLETE, EXIT_UNWRITABLE = 0, 2, 4, 5, 6
PROG = "pytorch-tb-profiler"


def add_parser(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    c = commands.add_parser("capture", help="ask a running job (tb_plugin.capture enabled) for a trace of its "
                            "next steps, on every rank")
    c.add_argument("folder", metavar="LOGDIR/RUN", help="the folder the job was given (enable(...) or --logdir), "
                   "local or a URL (s3://, az://, gs://, ...)")
    c.add_argument("--steps", type=int, default=p.DEFAULT_STEPS, help=f"optimizer steps to record (1 to "
                   f"{p.MAX_STEPS}, default {p.DEFAULT_STEPS})")
    c.add_argument("--activities", default=",".join(p.DEFAULT_ACTIVITIES),
                   help=f"what to trace, comma-separated: {', '.join(p.ACTIVITIES)} (default cpu,cuda; one the "
                        "host lacks is left out and said)")
    c.add_argument("--record-shapes", action="store_true", help="record input shapes (torch.profiler's record_shapes)")
    c.add_argument("--profile-memory", action="store_true", help="record allocations (profile_memory)")
    c.add_argument("--with-stack", action="store_true", help="record Python call stacks (with_stack)")
    c.add_argument("--deadline", type=float, default=p.DEFAULT_DEADLINE_S, metavar="SECONDS",
                   help=f"how long the job has to pick the request up (default {p.DEFAULT_DEADLINE_S:g})")
    c.add_argument("--timeout", type=float, default=600.0, metavar="SECONDS",
                   help="stop waiting after this long (the request stands: the ranks still write; default 600)")
    c.add_argument("--json", action="store_true", help="print the final state as JSON")


def run_capture(args: argparse.Namespace) -> int:
    try:
        steps, options, deadline = p.check_options(
            args.steps, [a.strip() for a in args.activities.split(",") if a.strip()],
            {"record_shapes": args.record_shapes, "profile_memory": args.profile_memory,
             "with_stack": args.with_stack}, args.deadline)
    except p.OptionsError as err:
        return _error(str(err), EXIT_USAGE)
    try:
        folder = CaptureFolder(args.folder)
    except Exception as err:  # noqa: BLE001 - a URL of no known form, a missing backend package
        return _error(f"cannot use {args.folder}: {err}", EXIT_USAGE)
    if folder.is_local and not os.path.isdir(folder.path):
        return _error(f"no folder {folder.path} (a job with capture enabled creates it as it starts)", EXIT_USAGE)
    try:
        listening, _ = listeners(folder)
        if not listening:
            print(f"note: no job has announced itself in {folder.shown} lately; waiting {deadline:g} s for one "
                  "to pick the request up", file=sys.stderr)
        request = submit(folder, steps, options, deadline, _requester())
    except FolderError as err:
        return _error(f"cannot write the capture request: {err}", EXIT_UNWRITABLE)
    print(f"requested {steps} step{'s' if steps > 1 else ''} from {folder.shown} (request {request.id})",
          file=sys.stderr)
    final = _wait(folder, request.id, args.timeout)
    if final is None:
        return EXIT_INCOMPLETE
    _report(final, args.json)
    if final.state == "no_job":
        return EXIT_NO_JOB
    return EXIT_OK if final.ok else EXIT_INCOMPLETE


def _wait(folder: CaptureFolder, request_id: str, timeout: float) -> Progress | None:
    """Poll the request's files until it is done (or ``timeout``), telling each change on stderr."""
    end = time.monotonic() + timeout
    interval = 0.25 if folder.is_local else 2.0
    shown = ""
    current: Progress | None = None
    while True:
        try:
            current = read_progress(folder, request_id)
        except (FolderError, LookupError) as err:
            print(f"{PROG}: {err}", file=sys.stderr)
        if current is not None and current.summary != shown:
            shown = current.summary
            print(f"  {shown}", file=sys.stderr)
        if current is not None and current.done:
            return current
        if time.monotonic() > end:
            print(f"{PROG}: stopped waiting after {timeout:g} s ({shown or 'no answer'}); the request stands, the "
                  "ranks still write their traces when they get there", file=sys.stderr)
            if current is not None:
                _report(current, False)
            return None
        time.sleep(interval)


def _report(progress: Progress, as_json: bool) -> None:
    if as_json:
        print(json.dumps(progress.as_dict(), indent=1))
        return
    for r in progress.ranks:
        print(f"rank {r.rank}: {_rank_line(r, progress)}")
    if progress.message:
        print(progress.message, file=sys.stderr)
    print(progress.summary, file=sys.stderr)


def _rank_line(r: RankProgress, progress: Progress) -> str:
    if r.state == p.WRITTEN:
        start = progress.start_step
        steps = f" (steps {start + 1:,}–{start + progress.request.steps:,})" if start is not None else ""
        return f"written {r.file}{steps}" + (f"; {r.reason}" if r.reason else "")
    if r.reason:
        return f"{r.state}: {r.reason}"
    return r.state + (f" at step {r.step:,}" if r.step is not None else "")


def _requester() -> str:
    import getpass
    import socket

    try:
        user = getpass.getuser()
    except Exception:  # noqa: BLE001 - no user name in a container: the host is enough
        user = "?"
    return f"{user}@{socket.gethostname()} ({PROG} capture)"


def _error(message: str, code: int) -> int:
    print(f"{PROG}: error: {message}", file=sys.stderr)
    return code
