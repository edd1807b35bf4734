"""Rank summaries, what the job-level views read: a preprocessed span's summary read once from its cache entry
(the scheduler reads each as it turns ready; a request reads the rest on threads), else computed from its loaded
model; and the job's Distributed answer over a span's ranks, computed once per set of rank files, as soon as the
span's last rank turns ready, so that the first Overview of any rank reads it instead of computing it."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ..analysis.distributed import job_distributed
from ..analysis.rank_summary import RankSummary, rank_summary
from ..catalog.catalog import TraceFile
from ..jobs.scheduler import FAILED, READY, LoadScheduler
from ..model.derived import compute_once
from ..model.memo import RESULTS, BoundedMemo
from .base import LookupFailed, SpanSummaries

SUMMARY_READERS = 8  # threads reading preprocessed rank summaries for a job-level answer

# Job-level results (the Distributed view's answer as data) per set of rank identities: every rank's Overview reads it
# for its job picture, so at 1,024 ranks it is computed once, not once per rank opened; built as soon as a span's last
# rank turns ready (``RankSummaries.after_ready``). Kept within the results' byte budget.
_JOB_RESULTS = BoundedMemo(RESULTS)
_JOB_COMPUTING: dict[Any, Future[Any]] = {}


def job_result(key: Hashable, compute: Callable[[], Any]) -> Any:
    """``compute()`` for ``key`` (the identities of every rank it reads), computed once; callers must not change
    the result."""
    return compute_once(_JOB_RESULTS, _JOB_COMPUTING, key, compute)


def job_of(ranks: list[tuple[TraceFile, RankSummary]]) -> dict[str, Any]:
    """The job-level Distributed answer over these (file, summary) ranks: the per-job summary every rank's
    Overview reads (its job picture, the straggler, the job's MFU), computed once per set of rank files."""
    key = ("job", tuple(sorted((f.key, f.identity) for f, _ in ranks)))
    result: dict[str, Any] = job_result(key, lambda: job_distributed([s for _, s in ranks]))
    return result


class RankSummaries:
    """The summaries of the workspace's spans; ``run_files`` gives a run's listed files (a copy)."""

    def __init__(self, scheduler: LoadScheduler, run_files: Callable[[str], list[TraceFile]]) -> None:
        self._scheduler = scheduler
        self._run_files = run_files
        self.read_ones: dict[Any, RankSummary] = {}  # preprocessed summaries read, by (entry, worker)
        self._computing: dict[Any, Any] = {}

    def forget_all_but(self, live: Iterable[Path]) -> None:
        """Drop the summaries of entries no longer listed (the memo is keyed by cache entry)."""
        keep = set(live)
        self.read_ones = {k: v for k, v in list(self.read_ones.items()) if k[0] in keep}

    def read(self, key: Any, entry: Path) -> RankSummary:
        """The summary in ``entry`` of the span ``key`` (read once, from a verified copy of its files; the
        scheduler calls this as it turns ready)."""
        from ..jobs.shared import SUMMARY_FILES
        from ..scaleout.summaries import read_summary

        worker = key[1]

        def read() -> RankSummary:
            return read_summary(self._scheduler.cache.open(entry, SUMMARY_FILES).files, worker)

        return compute_once(self.read_ones, self._computing, (entry, worker), read)

    def preprocessed(self, f: TraceFile) -> RankSummary | None:
        """The summary stored with a preprocessed span (read once), or None (also when its entry turns out damaged:
        the file is then parsed here, and its summary computed from the model)."""
        entry = self._scheduler.preprocessed(f.key)
        if entry is None:
            return None
        try:
            return self.read(f.key, entry)
        except Exception as err:  # noqa: BLE001 - a damaged entry is a miss, never a 500
            self._scheduler.reparse(f.key, f"its rank summary cannot be read ({err})")
            return None

    def read_all(self, files: list[TraceFile]) -> None:
        """Read the preprocessed summaries of ``files`` not read yet (the scheduler's one background thread may still
        be at it) on threads: a request sent as 1,024 ranks turn ready reads most of them itself, 1.8 s one after the
        other; threads help only where Parquet's C++ reader runs without the GIL (benchmarks/README.md)."""
        s = self._scheduler
        ready = [f for f in files if (st := s.status(f.key)) is not None and st.state == READY
                 and (e := s.preprocessed(f.key)) is not None and (e, f.key[1]) not in self.read_ones]
        if len(ready) > 1:
            with ThreadPoolExecutor(SUMMARY_READERS) as pool:
                list(pool.map(self.preprocessed, ready))

    def summary(self, f: TraceFile, open_lazy: bool) -> RankSummary | None:
        """The rank summary of a ready file: the preprocessed one (read once), else computed from its loaded model
        (a preprocessed model is opened for it only with ``open_lazy``); None while neither is at hand."""
        summary = self.preprocessed(f)
        if summary is not None:
            return summary
        model = self._scheduler.model(f.key, open_lazy=open_lazy)
        return rank_summary(model, f.worker) if model is not None else None

    def of_span(self, run: str, span: str) -> list[tuple[TraceFile, RankSummary]]:
        """The rank summary of every ready worker of one span (no model is opened for them)."""
        files = [f for f in self._run_files(run) if f.span == span]
        return [(f, summary) for f in files if (summary := self.summary(f, open_lazy=False)) is not None]

    def ranks(self, files: list[TraceFile], span: str) -> SpanSummaries:
        """Every worker's summary of one span's ``files``: 409 while any worker still loads (the answer would
        change), 422 when none loaded; the failed workers are named."""
        self.read_all(files)
        ranks: list[tuple[TraceFile, RankSummary]] = []
        failed: list[str] = []
        loading = 0
        for f in files:
            status = self._scheduler.status(f.key)
            if status is not None and status.state == FAILED:
                failed.append(f.worker)
                continue
            summary = self.summary(f, open_lazy=True) if status is not None and status.state == READY else None
            if summary is None:
                loading += 1
            else:
                ranks.append((f, summary))
        if loading:
            raise LookupFailed(409, f"{loading} of the {len(files)} workers of span {span} are still loading")
        if not ranks:
            raise LookupFailed(422, f"no worker of span {span} could be loaded")
        return SpanSummaries(ranks, failed)

    def after_ready(self, f: TraceFile) -> None:
        """A trace turned ready (on the scheduler's background thread): when it was the last rank of its span to
        load, build the job's summary now, so that the first Overview of any rank reads it instead of computing it
        (and every rank's summary: stored by the loader, or computed here once)."""
        files = [g for g in self._run_files(f.run) if g.span == f.span]
        if len(files) < 2:
            return
        statuses = [self._scheduler.status(g.key) for g in files]
        if any(s is None or s.state not in (READY, FAILED) for s in statuses):
            return
        ranks = self.of_span(f.run, f.span)
        if len(ranks) > 1:
            job_of(ranks)
