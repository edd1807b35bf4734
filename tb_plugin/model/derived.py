"""Memoisation of results derived from one model (trees, correlations, per-view tables).

A model never changes after loading, so anything computed from it is computed once and kept on it; the cache
goes away with the model when its file is removed or replaced.

Once per key, also under concurrency: when a trace turns ready, dozens of requests may ask for the same table at
the same moment (every open browser tab polls). Without an in-flight marker each of them would compute it — the
same seconds of work and the same memory N times over. The first caller computes; the others wait on its future.
An exception reaches every caller waiting on that computation and is not cached: the next request tries again
(a ``MemoryError`` under load is not a property of the trace).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, MutableMapping
from concurrent.futures import Future
from typing import Any, ParamSpec, TypeVar

from .tables import TraceModel

P = ParamSpec("P")
R = TypeVar("R")
_LOCK = threading.Lock()


def memoized(fn: Callable[..., R]) -> Callable[..., R]:
    """Cache ``fn(model, *args)`` on the model, computing each key once; ``args`` must be hashable."""

    @functools.wraps(fn)
    def wrapper(model: TraceModel, *args: Any) -> R:
        key = (fn.__module__, fn.__qualname__, args)
        return compute_once(model.memo, model.computing, key, lambda: fn(model, *args))

    return wrapper


def compute_once(memo: MutableMapping[Any, Any], computing: dict[Any, Future[Any]], key: Any,
                 compute: Callable[[], R]) -> R:
    """``memo[key]``, computed by ``compute()`` only once however many threads ask for it at the same moment.

    ``computing`` holds the futures of the keys being computed; the first caller computes, the others wait on
    its future. ``memo`` may be any mapping, also one that forgets (the API's bounded cache of answers).
    """
    try:
        return memo[key]  # type: ignore[no-any-return]
    except KeyError:
        pass
    with _LOCK:
        if key in memo:
            return memo[key]  # type: ignore[no-any-return]
        running: Future[R] | None = computing.get(key)
        if running is None:
            mine: Future[R] = Future()
            computing[key] = mine
    if running is not None:
        return running.result()  # raises the computing caller's exception, if any
    try:
        value = compute()
    except BaseException as err:
        with _LOCK:
            del computing[key]
        mine.set_exception(err)
        raise
    with _LOCK:
        memo[key] = value
        del computing[key]
    mine.set_result(value)
    return value
