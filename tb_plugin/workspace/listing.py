"""``/runs`` as the workspace answers it, from the files listed, their load states and the runs' snapshots: runs →
workers → spans sorted for people (spans numerically, with their stable keys), and a page of it for logdirs of
thousands of runs (the runs matching a search, the run shown and the one to open first, counts over every run,
the spans loading or failed anywhere). Pure functions: the workspace hands them what it holds."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from ..catalog.catalog import TraceFile
from ..catalog.names import span_keys, span_order
from ..jobs.scheduler import FAILED, LOADING, QUEUED, READY

Grouped = dict[str, dict[str, list[TraceFile]]]
Snapshots = dict[str, list[dict[str, Any]]]

_SCORES = {READY: 2, LOADING: 1, QUEUED: 1, FAILED: 0}  # how a run is chosen to open first (as the client does)
_URGENCY = {LOADING: 0, QUEUED: 1, FAILED: 2}  # the order spans that are not ready are told of
ATTENTION_SPANS = 50  # loading and failed spans (of each) a page of /runs tells of; its counts cover every span


def grouped(files: Iterable[TraceFile]) -> Grouped:
    """The files by run and worker."""
    runs: Grouped = defaultdict(lambda: defaultdict(list))
    for f in files:
        runs[f.run][f.worker].append(f)
    return runs


def span_entries(files: list[TraceFile], statuses: dict[Any, Any]) -> list[dict[str, Any]]:
    """A worker's spans, sorted for people (numerically), with their stable keys and load state."""
    files = sorted(files, key=lambda f: span_order(f.span))
    out = []
    for f, key in zip(files, span_keys([(f.span, f.stamp) for f in files])):
        status = statuses.get(f.key)
        out.append({
            "span": f.span,
            "key": key,
            "mtime": f.mtime,
            "state": status.state if status else "queued",
            "progress": status.progress if status else 0.0,
            "error": status.error if status else None,
            "file": f.filename,
            "size_bytes": f.size,
            "updating": bool(status and status.updating),
        })
    return out


def run_entry(run: str, workers: dict[str, list[TraceFile]], statuses: dict[Any, Any],
              snapshots: Snapshots) -> dict[str, Any]:
    return {"name": run, "workers": [{"name": worker, "spans": span_entries(workers[worker], statuses)}
                                     for worker in sorted(workers)], "snapshots": snapshots.get(run, [])}


def runs_page(runs: Grouped, statuses: dict[Any, Any], snapshots: Snapshots, limit: int, offset: int = 0,
              query: str = "", run: str | None = None) -> dict[str, Any]:
    """A page of the listing: the ``limit`` runs from ``offset`` (by name) whose name holds ``query`` (any case),
    the run named ``run`` and the run to open first (``newest``: the best loaded, newest; what a client picks with
    no selection) whatever the page, span counts by state over every run, and up to :data:`ATTENTION_SPANS` spans
    loading and as many failed anywhere (what the page's progress and error cards show)."""
    names = sorted(set(runs) | set(snapshots))
    needle = query.casefold()
    matched = [n for n in names if needle in n.casefold()] if needle else names
    states = dict.fromkeys((QUEUED, LOADING, READY, FAILED, "updating"), 0)
    busy: list[tuple[int, str, TraceFile]] = []
    best: tuple[int, float, str] | None = None
    for name in names:
        score, mtime = -1, 0.0
        for shot in snapshots.get(name, []):  # a run's snapshots count as the client counts them
            score, mtime = max(score, _SCORES.get(shot["state"], 1)), max(mtime, shot["mtime"])
        for f in (f for files in runs.get(name, {}).values() for f in files):
            status = statuses.get(f.key)
            state = status.state if status is not None else QUEUED
            states[state] += 1
            states["updating"] += status is not None and status.updating
            score, mtime = max(score, _SCORES[state]), max(mtime, f.mtime)
            if state != READY:
                busy.append((_URGENCY[state], name, f))
        if best is None or (score, mtime) > best[:2]:  # ties: the first by name, as the client picks
            best = (score, mtime, name)
    shown: set[str] = set(matched[offset:offset + limit]) | ({run} & set(names) if run else set())
    if best is not None:
        shown.add(best[2])
    return {
        "runs": [run_entry(n, runs.get(n, {}), statuses, snapshots) for n in sorted(shown)],
        "total_runs": len(names), "matched": len(matched), "offset": offset, "limit": limit,
        "newest": best[2] if best else None, "states": states,
        "attention": _attention(_first_of_each(busy), runs, statuses),
    }


def _attention(busy: list[tuple[int, str, TraceFile]], runs: Grouped, statuses: dict[Any, Any]) -> list[dict[str, Any]]:
    """The listing's entries of these loading or failed spans, each with its run and worker."""
    out = []
    for _, run, f in busy:
        span = next(s for s in span_entries(runs[run][f.worker], statuses) if s["file"] == f.filename)
        out.append({"run": run, "worker": f.worker, **span})
    return out


def _first_of_each(busy: list[tuple[int, str, TraceFile]]) -> list[tuple[int, str, TraceFile]]:
    """Loading (then queued) spans and failed ones, each by run name, at most :data:`ATTENTION_SPANS` of each."""
    ordered = sorted(busy, key=lambda b: (b[0], b[1]))
    return [b for b in ordered if b[0] < 2][:ATTENTION_SPANS] + [b for b in ordered if b[0] == 2][:ATTENTION_SPANS]
