"""``pytorch-tb-profiler preprocess``: every trace under a logdir parsed into a shared cache (models and rank
summaries), on a Dask cluster or a local pool, so that TensorBoard serves them without parsing.

Resumable by construction: a file whose cache entry (keyed as the server keys it: URL, etag or size and mtime,
model version) is complete is skipped, and an entry only becomes complete when its last file is written. A failure
is reported per file with its reason; the others go on.
"""

from __future__ import annotations

import math
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Any, TextIO

from ..catalog import remote
from ..catalog.catalog import Catalog, Root
from ..catalog.storage import Storage
from ..jobs.shared import SharedCache
from .executors import Executor, Outcome
from .task import FileSpec, preprocess_file


class PreprocessError(Exception):
    """The logdir or the cache cannot be used at all (shown as one message): ``unreachable`` when a store a URL
    names cannot be reached or read (exit code 6), else a path that does not exist or holds no trace (2)."""

    def __init__(self, message: str, unreachable: bool = False) -> None:
        super().__init__(message)
        self.unreachable = unreachable


@dataclass
class Plan:
    todo: list[FileSpec]
    done: list[FileSpec]  # already complete in the cache: skipped
    problems: list[tuple[str, str]]  # (file, why) known from the listing: not regular files


@dataclass
class Report:
    """What a run did: counts, bytes and time, each failure with its reason, and per worker its peak memory."""

    files: int = 0
    skipped: int = 0
    parsed: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list)
    bytes: int = 0
    seconds: float = 0.0
    worker_peak_rss: dict[int, int] = field(default_factory=dict)  # worker pid -> peak resident bytes

    def add(self, spec: FileSpec, outcome: Outcome) -> None:
        if outcome.get("status") == "ok":
            self.parsed += 1
            self.bytes += spec.size
        else:
            self.failed.append((spec.url, str(outcome.get("reason") or "unknown error")))
        pid = outcome.get("pid")
        if isinstance(pid, int) and isinstance(outcome.get("peak_rss"), int):
            self.worker_peak_rss[pid] = max(self.worker_peak_rss.get(pid, 0), outcome["peak_rss"])

    def as_dict(self) -> dict[str, Any]:
        return {
            "files": self.files, "skipped": self.skipped, "parsed": self.parsed, "failed": len(self.failed),
            "failures": [{"file": f, "reason": r} for f, r in self.failed],
            "bytes": self.bytes, "seconds": round(self.seconds, 3),
            "mb_per_s": round(self.bytes / 1e6 / self.seconds, 2) if self.seconds > 0 else None,
            "worker_peak_rss_mb": sorted(round(v / 2**20, 1) for v in self.worker_peak_rss.values()),
        }


def plan(logdir: str, cache: SharedCache, any_json: bool = False) -> Plan:
    """List the logdir (every file, settled or not: profiling is over) and split it against the cache. A logdir
    that does not exist or holds no trace file is an error (a cron job given a wrong path must not succeed)."""
    if not remote.is_url(logdir) and not os.path.isdir(logdir):
        raise PreprocessError(f"{logdir}: no such directory" if not os.path.exists(logdir) else
                              f"{logdir}: not a directory (preprocess takes a logdir)")
    try:
        catalog = Catalog([Root(None, Storage(logdir))], any_json=any_json)
        files = catalog.scan(now=math.inf)
    except Exception as err:  # noqa: BLE001 - a URL of no known form, a missing backend package
        raise PreprocessError(remote.scrub(f"cannot open logdir {remote.scrub_url(logdir)}: {err}")) from None
    if catalog.errors:
        raise PreprocessError("; ".join(catalog.errors.values()), unreachable=remote.is_url(logdir))
    if not files:
        raise PreprocessError(f"no trace files under {remote.scrub_url(logdir)} (looked for *.pt.trace.json[.gz]"
                              f"{' and *.json[.gz] traces' if any_json else ''})")
    try:
        complete = cache.done()
    except Exception as err:  # noqa: BLE001 - a cache store that refuses or cannot be reached
        raise PreprocessError(f"cannot list the cache {cache.url}: {err}", unreachable=not cache.is_local) from None
    out = Plan([], [], [(f.url, f.problem) for f in files if f.problem is not None])
    for f in files:
        if f.problem is None:
            spec = FileSpec.of(f)
            (out.done if spec.name in complete else out.todo).append(spec)
    return out


def run(the_plan: Plan, cache: SharedCache, executor: Executor, progress: TextIO | None = None) -> Report:
    """Run the plan's files on ``executor``, showing progress on ``progress`` (stderr by default)."""
    report = Report(files=len(the_plan.todo) + len(the_plan.done) + len(the_plan.problems),
                    skipped=len(the_plan.done), failed=[(f, p) for f, p in the_plan.problems])
    bar = _Progress(progress or sys.stderr, len(the_plan.todo), sum(s.size for s in the_plan.todo))
    started = time.monotonic()
    for spec, outcome in executor.run(preprocess_file, the_plan.todo, cache.url):
        report.add(spec, outcome)
        bar.update(spec, outcome)
    report.seconds = time.monotonic() - started
    bar.close()
    return report


class _Progress:
    """A bar rewritten in place on a terminal; on a log (CI, a SLURM job's output), a line every 10 %."""

    def __init__(self, stream: TextIO, total: int, total_bytes: int) -> None:
        self.stream, self.total, self.total_bytes = stream, total, total_bytes
        self.done = self.failed = self.bytes = 0
        self.started = time.monotonic()
        self.tty = stream.isatty()
        self._next_line = 0.1

    def update(self, spec: FileSpec, outcome: Outcome) -> None:
        self.done += 1
        self.bytes += spec.size
        if outcome.get("status") != "ok":
            self.failed += 1
            self.stream.write(("\r" if self.tty else "") + f"failed: {outcome.get('reason')}\n")
        fraction = self.done / max(1, self.total)
        if self.tty or fraction >= self._next_line or self.done == self.total:
            self._next_line = math.floor(fraction * 10 + 1) / 10
            self.stream.write(("\r" if self.tty else "") + self._line(fraction) + ("" if self.tty else "\n"))
        self.stream.flush()

    def _line(self, fraction: float) -> str:
        elapsed = max(1e-9, time.monotonic() - self.started)
        filled = int(fraction * 30)
        return (f"[{'#' * filled}{'.' * (30 - filled)}] {self.done}/{self.total} files, "
                f"{self.bytes / 1e6:.1f}/{self.total_bytes / 1e6:.1f} MB, {self.bytes / 1e6 / elapsed:.1f} MB/s"
                + (f", {self.failed} failed" if self.failed else ""))

    def close(self) -> None:
        if self.tty and self.total:
            self.stream.write("\n")
            self.stream.flush()
