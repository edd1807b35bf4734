"""Encoded answers, kept per trace: the same request on the same trace is computed, encoded and gzipped once.

A model never changes, so an answer is a pure function of (model, route, query). When a trace turns ready, every
open tab asks the same questions at the same moment; without this, each of N requests would build its table,
encode it and gzip it, N times the work for the one GIL. The first request computes; the others wait for it
(:func:`~tb_plugin.model.derived.compute_once`). Kept within one byte budget for every trace
(:data:`~tb_plugin.model.memo.ANSWERS`), least recently used first out: the Trace view's windows, the searches
and the values of a ``limit`` are endless. An error is never kept: the next request tries again.

On a trace of ``PROGRESSIVE_EVENTS`` events or more an answer not computed yet is computed on a thread of its own
(:func:`~tb_plugin.model.derived.compute_in_background`): the request waits ``PATIENCE_S`` for it, then answers
409 "computing" with the estimated progress, and the page asks again soon (each request waits for the answer in
turn: a long poll, so an answer is picked up within the client's short pause of it being ready). A view whose
answer the loader is computing after ready (``api/warm.py``) is waited for the same way, as it lands. So the Overview
and the Trace view of a big trace are usable while other views' tables are computed, and no request waits for
another page's computation.
Smaller traces compute in the request (a few hundred milliseconds at most).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..model import heap
from ..model.derived import compute_in_background, compute_once, memoized
from ..model.memo import ANSWERS, BoundedMemo
from ..model.snapshot import AllocatorSnapshot, snapshot_memo
from ..model.tables import TraceModel
from .encoding import Encoded, encode
from .warm import awaited, has_answer, stored_answer

R = TypeVar("R")
PROGRESSIVE_EVENTS = 1_000_000  # from this many events on, answers not ready yet are 409 "computing" (a ~400 MB trace)
PATIENCE_S = 1.0  # how long such a request waits for its answer before saying "computing" (a long poll)


def _encoded_bytes(value: Any) -> int:
    return int(value.nbytes)


@dataclass
class _Answers:
    recent: BoundedMemo = field(default_factory=lambda: BoundedMemo(ANSWERS, _encoded_bytes))
    computing: dict[Any, Future[Any]] = field(default_factory=dict)


@memoized
def _answers(model: TraceModel) -> _Answers:
    return _Answers()


def answer(model: TraceModel, key: Hashable, compute: Callable[[], Any], analysis: str = "the answer",
           stored: str | None = None) -> Encoded:
    """The encoded payload ``compute()`` returns for ``key`` (route and query) on ``model``, computed once; on a
    big trace it raises :class:`~tb_plugin.model.derived.Computing` while ``analysis`` is computed. ``stored``: the
    answer's :func:`~tb_plugin.api.warm.key`, under which the loader process may have stored it (then it is read,
    not computed: ``api/warm.py``; while the loader is still computing it after ready, 409 "computing")."""
    cache = _answers(model)
    if stored is not None and not has_answer(model, stored):
        busy = awaited(model, stored, analysis, PATIENCE_S)  # the loader computing it (after ready): waited for
        if busy is not None:  # ... and never computed a second time here
            raise busy
    if stored is not None and has_answer(model, stored):
        return compute_once(cache.recent, cache.computing, key, lambda: stored_answer(model, stored))
    events = _events(model)
    if events >= PROGRESSIVE_EVENTS:
        return compute_in_background(cache.recent, cache.computing, key, lambda: _trimmed(lambda: encode(compute())),
                                     analysis=analysis, events=events, patience=PATIENCE_S)
    return compute_once(cache.recent, cache.computing, key, lambda: encode(compute()))


def _trimmed(compute: Callable[[], R]) -> R:
    """``compute()``, then the heap's freed pages given back (``model.heap``): a big trace's answer builds and drops
    temporaries of hundreds of MB, whose pages glibc would keep for good. The 2 GB trace's server after its by-shape
    table, memory curve and modules: 790 MB of heap kept without, 444 MB with; a trim took 1-9 ms."""
    try:
        return compute()
    finally:
        heap.trim_heap()


@snapshot_memo
def _snapshot_answers(snap: AllocatorSnapshot) -> _Answers:
    """A snapshot's encoded answers, within the answers' byte budget that every trace's share (model/memo.py)."""
    return _Answers()


def snapshot_answer(snap: AllocatorSnapshot, key: Hashable, compute: Callable[[], Any]) -> Encoded:
    """The encoded payload ``compute()`` returns for ``key`` on an allocator snapshot, computed once (a snapshot's
    answers take well under a second: computed in the request)."""
    cache = _snapshot_answers(snap)
    return compute_once(cache.recent, cache.computing, key, lambda: encode(compute()))


def derived(model: TraceModel, analysis: str, fn: Callable[[TraceModel], R]) -> R:
    """``fn(model)`` for a :func:`~tb_plugin.model.derived.memoized` ``fn`` that a route needs before its answer (the
    Trace view's index): computed in the background on a big trace, like :func:`answer`, into the same memo."""
    inner: Callable[[TraceModel], R] = fn.__wrapped__  # type: ignore[attr-defined]  # set by memoized
    key = (inner.__module__, inner.__qualname__, ())
    busy = awaited(model, key, analysis, PATIENCE_S)
    if busy is not None:  # the loader is computing it (after ready, api/warm.py)
        raise busy
    events = _events(model)
    if events < PROGRESSIVE_EVENTS:
        return fn(model)
    # the memoized wrapper would wait on the future this puts under its key: the thread runs the function itself
    return compute_in_background(model.memo, model.computing, key, lambda: _trimmed(lambda: inner(model)),
                                 analysis=analysis,
                                 events=events, patience=PATIENCE_S)


def _events(model: TraceModel) -> int:
    """How big the trace is (0 for a model without an events table, as tests build)."""
    return model.n_events if "events" in model.tables else 0


_JOB_ANSWERS = _Answers()


def job_answer(key: Hashable, compute: Callable[[], Any]) -> Encoded:
    """The same for an answer over several traces (the Distributed view of a span): ``key`` names every trace it
    reads (their identities), so a changed rank makes a new key. One budget for all such answers."""
    return compute_once(_JOB_ANSWERS.recent, _JOB_ANSWERS.computing, key, lambda: encode(compute()))
