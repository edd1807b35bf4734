"""Memoisation of results derived from one model (trees, correlations, per-view tables).

A model never changes after loading, so anything computed from it is computed once and kept on it; the cache
goes away with the model when its file is removed or replaced.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from .tables import TraceModel

P = ParamSpec("P")
R = TypeVar("R")
_LOCK = threading.Lock()


def memoized(fn: Callable[..., R]) -> Callable[..., R]:
    """Cache ``fn(model, *args)`` on the model; ``args`` must be hashable."""

    @functools.wraps(fn)
    def wrapper(model: TraceModel, *args: Any) -> R:
        key = (fn.__module__, fn.__qualname__, args)
        try:
            return model.memo[key]  # type: ignore[no-any-return]
        except KeyError:
            pass
        value = fn(model, *args)
        with _LOCK:
            model.memo.setdefault(key, value)
        return model.memo[key]  # type: ignore[no-any-return]

    return wrapper
