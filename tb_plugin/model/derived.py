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
from collections.abc import Callable
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
        try:
            return model.memo[key]  # type: ignore[no-any-return]
        except KeyError:
            pass
        with _LOCK:
            if key in model.memo:
                return model.memo[key]  # type: ignore[no-any-return]
            running: Future[R] | None = model.computing.get(key)
            if running is None:
                mine: Future[R] = Future()
                model.computing[key] = mine
        if running is not None:
            return running.result()  # raises the computing caller's exception, if any
        return _compute(model, key, mine, lambda: fn(model, *args))

    return wrapper


def _compute(model: TraceModel, key: Any, future: Future[R], compute: Callable[[], R]) -> R:
    """Run the one computation of ``key``, publish its value (or exception) to the callers waiting on ``future``."""
    try:
        value = compute()
    except BaseException as err:
        with _LOCK:
            del model.computing[key]
        future.set_exception(err)
        raise
    with _LOCK:
        model.memo[key] = value
        del model.computing[key]
    future.set_result(value)
    return value
