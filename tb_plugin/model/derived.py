"""Memoisation of results derived from one model (trees, correlations, per-view tables).

A model never changes after loading, so anything computed from it is computed once and kept on it; the cache
goes away with the model when its file is removed or replaced. What is kept, and within which byte budget, is
:mod:`.memo`'s rule: a parameter-free result for the model's life, a result keyed by arguments (a request's
choice) within the process-wide budget, least recently used out. An analysis whose parameter only cuts a table
(a row limit, a number of points) memoises the whole table, parameter-free, and cuts it per call, unmemoised.

Once per key, also under concurrency: when a trace turns ready, dozens of requests may ask for the same table at
the same moment (every open browser tab polls). Without an in-flight marker each of them would compute it — the
same seconds of work and the same memory N times over. The first caller computes; the others wait on its future.
An exception reaches every caller waiting on that computation and is not cached: the next request tries again
(a ``MemoryError`` under load is not a property of the trace).

On a big trace some results take seconds. ``compute_in_background`` computes such a key once on a thread of its
own and lets a caller wait only a moment for it: past that it raises :class:`Computing` (the API answers 409 with
the estimated progress), and the caller asks again later. A caller never waits for a computation of another key
to finish first: each key starts on its own thread when first asked, whatever else is being computed.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, MutableMapping
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, ParamSpec, TypeVar, overload

from .memo import CLOSED
from .tables import TraceModel

P = ParamSpec("P")
R = TypeVar("R")
_LOCK = threading.Lock()
log = logging.getLogger(__name__)


class Computation(Future[R]):
    """The future of a key being computed, with the moment its computation started (for progress estimates)."""

    def __init__(self) -> None:
        super().__init__()
        self.started = time.monotonic()


@overload
def memoized(fn: Callable[..., R]) -> Callable[..., R]: ...


@overload
def memoized(*, closed: bool) -> Callable[[Callable[..., R]], Callable[..., R]]: ...


def memoized(fn: Callable[..., R] | None = None, *, closed: bool = False) -> Any:
    """Cache ``fn(model, *args)`` on the model, computing each key once; ``args`` must be hashable.

    A result with ``args`` counts against the byte budget of results keyed by a request's choice (:mod:`.memo`),
    unless ``closed``: its arguments come from a fixed set, the code's (a grouping, a table's name) or the
    model's (its threads, its devices), so its results stay with the model as a parameter-free one does. Never
    ``closed`` for a value a request chooses freely: a number, a step.
    """
    def decorate(f: Callable[..., R]) -> Callable[..., R]:
        if closed:
            CLOSED.add((f.__module__, f.__qualname__))

        @functools.wraps(f)
        def wrapper(model: TraceModel, *args: Any) -> R:
            return compute_once(model.memo, model.computing, _key(f, args), lambda: f(model, *args))

        return wrapper

    return decorate(fn) if fn is not None else decorate


def _key(fn: Callable[..., Any], args: tuple[Any, ...]) -> tuple[str, str, tuple[Any, ...]]:
    return (fn.__module__, fn.__qualname__, args)


def seed(model: TraceModel, fn: Callable[..., R], value: R, *args: Any) -> None:
    """Give a :func:`memoized` function's result for ``(model, *args)`` as computed elsewhere (a loader process that
    stored it beside the parse), so the first caller finds it instead of computing it: when the model is opened, or
    when a part computed after ready lands (a caller computing the same result meanwhile stores its own, equal,
    value over it). The value must be exactly what ``fn`` would return."""
    with _LOCK:
        model.memo.setdefault(_key(fn, args), value)


def compute_once(memo: MutableMapping[Any, Any], computing: dict[Any, Future[Any]], key: Any,
                 compute: Callable[[], R]) -> R:
    """``memo[key]``, computed by ``compute()`` only once however many threads ask for it at the same moment.

    ``computing`` holds the futures of the keys being computed; the first caller computes, the others wait on
    its future. ``memo`` may be any mapping, also one that forgets (the API's bounded cache of answers).
    """
    value, running, mine = _claim(memo, computing, key)
    if running is None:
        return value  # type: ignore[no-any-return]
    if not mine:
        return running.result()  # type: ignore[no-any-return]  # raises the computing caller's exception, if any
    try:
        value = compute()
    except BaseException as err:
        with _LOCK:
            del computing[key]
        running.set_exception(err)
        raise
    with _LOCK:
        memo[key] = value
        del computing[key]
    running.set_result(value)
    return value


def _claim(memo: MutableMapping[Any, Any], computing: dict[Any, Future[Any]], key: Any,
           start: Callable[[Future[Any]], None] | None = None) -> tuple[Any, Future[Any] | None, bool]:
    """``(memo[key], None, False)`` when it is known; else ``(None, future, mine)``: the future of the computation
    of ``key`` already running (``mine`` False), or a new one registered for this caller (``mine`` True), which
    ``start`` (if given) sets going under the lock, so no second caller starts another."""
    try:
        return memo[key], None, False
    except KeyError:
        pass
    with _LOCK:
        try:  # a bounded memo may have let it go since (model.memo): then it is computed again
            return memo[key], None, False
        except KeyError:
            pass
        running = _unfinished(computing, key)
        if running is not None:
            return None, running, False
        mine: Future[Any] = Computation()
        computing[key] = mine
        if start is not None:
            start(mine)
        return None, mine, True


def _unfinished(computing: dict[Any, Future[Any]], key: Any) -> Future[Any] | None:
    """The future of ``key`` in ``computing`` (under ``_LOCK``). A finished one is a background computation's
    failure, left for the next caller: it is taken out (the caller after that computes again) and handed over."""
    running = computing.get(key)
    if running is not None and running.done():
        del computing[key]
    return running


# ---- computations that take seconds on big traces -------------------------------------------------------------

DEFAULT_US_PER_EVENT = 1.0  # until one computation of an analysis finished: 2 GB traces take ~1 µs per event
_US_PER_EVENT: dict[str, float] = {}  # what the last computation of each analysis took, per event of its trace


class Computing(Exception):
    """``analysis`` is being computed in the background: ask again in ``retry_after_ms``. ``progress`` (0..1) is
    an estimate from the time it has run and what the last computation of the same analysis took per event."""

    def __init__(self, analysis: str, progress: float | None, retry_after_ms: int) -> None:
        pct = "" if progress is None else f" ({progress:.0%} done)"
        super().__init__(f"computing {analysis}{pct}; ask again in {retry_after_ms / 1000:.1f} s")
        self.analysis = analysis
        self.progress = progress
        self.retry_after_ms = retry_after_ms


def compute_in_background(memo: MutableMapping[Any, Any], computing: dict[Any, Future[Any]], key: Any,
                          compute: Callable[[], R], *, analysis: str, events: int, patience: float) -> R:
    """``memo[key]``, computed once by ``compute()`` on a thread of its own; waits ``patience`` seconds for it,
    then raises :class:`Computing` while it goes on. A failure reaches the callers waiting then, or else the next
    caller, and is not kept (the caller after that computes again)."""
    def start(mine: Future[Any]) -> None:
        threading.Thread(target=_compute, args=(memo, computing, key, compute, mine, analysis, events),
                         name=f"pytorch-profiler-{analysis}", daemon=True).start()

    value, running, _ = _claim(memo, computing, key, start)
    if running is None:
        return value  # type: ignore[no-any-return]
    try:
        return running.result(timeout=patience)  # type: ignore[no-any-return]
    except FutureTimeout:
        raise _computing(running, analysis, events) from None
    except BaseException:
        with _LOCK:  # this caller got the failure: the next one computes again
            if computing.get(key) is running:
                del computing[key]
        raise


def _compute(memo: MutableMapping[Any, Any], computing: dict[Any, Future[Any]], key: Any, compute: Callable[[], R],
             mine: Future[R], analysis: str, events: int) -> None:
    started = time.monotonic()
    try:
        value = compute()
    except BaseException as err:  # noqa: BLE001 - left in ``computing`` for the caller that asks next
        log.debug("computing %s failed: %r", analysis, err)
        mine.set_exception(err)
        return
    _US_PER_EVENT[analysis] = (time.monotonic() - started) * 1e6 / max(events, 1)
    with _LOCK:
        memo[key] = value
        del computing[key]
    mine.set_result(value)


def _computing(running: Future[Any], analysis: str, events: int) -> Computing:
    """What to tell a caller who stops waiting: progress by the time it ran against the time expected, and when to
    ask again: soon (a quarter of the expected rest, between 0.2 and 1 s), since the next request waits for the
    answer itself too (a long poll), so asking often costs little and an answer is picked up as it comes."""
    elapsed = time.monotonic() - getattr(running, "started", time.monotonic())
    expected = _US_PER_EVENT.get(analysis, DEFAULT_US_PER_EVENT) * max(events, 1) / 1e6
    progress = min(0.99, elapsed / expected) if expected > 0 else None
    retry_ms = int(min(1000.0, max(200.0, (expected - elapsed) * 250)))
    return Computing(analysis, progress, retry_ms)
