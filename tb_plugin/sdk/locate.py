"""Find the trace a path names and load it, through the same catalog, loader processes and parse cache as the
TensorBoard plugin (no second code path): a file, a run directory or a logdir, local or an fsspec URL.

Unlike the plugin, which rescans forever and never waits, this loads synchronously: a script or a notebook cell
wants the model before it goes on. Files written a moment ago count as finished (``scan(now=inf)``): a CLI run
comes after profiling ended.
"""

from __future__ import annotations

import math
import os
import posixpath
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..catalog import remote
from ..catalog.catalog import Catalog, Root, TraceFile
from ..catalog.names import file_name, span_order
from ..catalog.storage import Storage
from ..jobs.cache import ParseCache
from ..jobs.scheduler import FAILED, READY, LoadScheduler
from ..model.tables import TraceModel

# (file name, fraction loaded): called while a trace loads, for a progress line
Progress = Callable[[str, float], None]

EXIT_NO_TRACE = 2  # the path does not exist or holds no trace, or is a URL of no known form (exit code of the CLI)
EXIT_BAD_TRACE = 3  # the trace is there but cannot be loaded
EXIT_UNREACHABLE = 6  # the store a URL names cannot be reached or read (network, credentials, missing bucket)


class ProfilerError(Exception):
    """A path the API cannot open or a trace it cannot load, with a reason for a person; ``exit_code`` is what
    the CLI exits with."""

    def __init__(self, message: str, exit_code: int = EXIT_NO_TRACE) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass(frozen=True)
class Selection:
    """The chosen span, and every worker's file of that run and span (the ranks of the Distributed view)."""

    file: TraceFile
    peers: tuple[TraceFile, ...]
    workers: int  # workers in the run (the Overview's environment shows it)
    spans: tuple[str, ...] = ()  # the chosen worker's spans in the run, in order (a diff says which it compares)


def _is_file(path: str) -> bool:
    if not remote.is_url(path):
        return os.path.isfile(path)
    try:
        loc = remote.resolve(path)
    except remote.RemoteError as err:  # a URL of no known form, a backend package missing
        raise ProfilerError(remote.scrub(f"cannot open {remote.scrub_url(path)}: {err}")) from None
    try:
        return bool(loc.fs.isfile(loc.path))
    except Exception as err:  # noqa: BLE001 - a store's own errors: a reason for the user
        raise ProfilerError(remote.explain(err, loc, "read"), EXIT_UNREACHABLE) from None


def _parent(path: str) -> str:
    if not remote.is_url(path):
        return os.path.dirname(os.path.abspath(path))
    base, query = remote.strip_query(path)
    return posixpath.dirname(base) + (f"?{query}" if query else "")


def _scan(root: str) -> tuple[Catalog, list[TraceFile]]:
    """Every trace file under ``root`` (sniffing ``*.json[.gz]``), and the catalog that says what it rejected."""
    try:
        catalog = Catalog([Root(None, Storage(root))], any_json=True)
    except remote.RemoteError as err:
        raise ProfilerError(remote.scrub(f"cannot open {remote.scrub_url(root)}: {err}")) from None
    files = catalog.scan(now=math.inf)
    if catalog.errors:
        code = EXIT_UNREACHABLE if remote.is_url(root) else EXIT_NO_TRACE
        raise ProfilerError(next(iter(catalog.errors.values())), code)
    return catalog, files


def _same(a: str, b: str) -> bool:
    return a == b if remote.is_url(a) else os.path.realpath(a) == os.path.realpath(b)


def select(path: str, run: str | None = None, worker: str | None = None, span: str | None = None) -> Selection:
    """The span ``path`` names: a trace file, or in a directory the given (or first) run, worker and span."""
    path = os.fspath(path)
    if not remote.is_url(path) and not os.path.exists(path):
        raise ProfilerError(f"{path}: no such file or directory")
    single = _is_file(path)
    catalog, files = _scan(_parent(path) if single else path)
    if single:
        chosen = next((f for f in files if _same(f.url, path)), None)
        if chosen is None:
            reason = next((r for p, r in catalog.rejected.items() if _same(p, path)), None)
            raise ProfilerError(f"{file_name(path)}: not a trace: "
                                f"{reason or 'the name is neither *.pt.trace.json[.gz] nor *.json[.gz]'}")
        run, worker, span = chosen.key
    if not files:
        rejected = "".join(f"\n  {file_name(p)}: {r}" for p, r in sorted(catalog.rejected.items())[:10])
        raise ProfilerError(f"no trace files under {remote.scrub_url(path)} (looked for *.pt.trace.json[.gz] and "
                            f"*.json[.gz] holding a Chrome/Kineto trace){rejected}")
    run = _pick("run", run, sorted({f.run for f in files}), path)
    in_run = [f for f in files if f.run == run]
    worker = _pick("worker", worker, sorted({f.worker for f in in_run}), f"run {run!r}")
    spans = sorted({f.span for f in in_run if f.worker == worker}, key=span_order)
    span = _pick("span", span, spans, f"worker {worker!r} of run {run!r}")
    chosen = next(f for f in in_run if f.worker == worker and f.span == span)
    peers = tuple(sorted((f for f in in_run if f.span == span), key=lambda f: f.worker))
    return Selection(chosen, peers, len({f.worker for f in in_run}), tuple(spans))


def _pick(what: str, wanted: str | None, available: list[str], where: str) -> str:
    if wanted is None:
        return available[0]
    if wanted not in available:
        raise ProfilerError(f"{where} has no {what} {wanted!r}; it has {', '.join(map(repr, available[:20]))}")
    return wanted


def load(files: list[TraceFile], cache_dir: str | None = None, progress: Progress | None = None) -> list[TraceModel]:
    """Load ``files`` in the plugin's loader processes (parse cache reused: a second open is instant)."""
    scheduler = LoadScheduler(ParseCache(cache_dir))
    try:
        for f in files:
            scheduler.request(f)
        return [_wait(scheduler, f, progress) for f in files]
    finally:
        scheduler.close()


def _wait(scheduler: LoadScheduler, f: TraceFile, progress: Progress | None) -> TraceModel:
    while True:
        status = scheduler.status(f.key)
        model = scheduler.model(f.key)
        if status is not None and status.state == FAILED:
            raise ProfilerError(status.error or f"{f.filename} failed to load", EXIT_BAD_TRACE)
        if status is not None and status.state == READY and model is not None:
            if progress is not None:
                progress(f.filename, 1.0)
            return model
        if progress is not None and status is not None:
            progress(f.filename, status.progress)
        time.sleep(0.05)
