"""A pickle reader that runs no code: for allocator snapshots, which are pickles from anywhere.

``pickle.load`` imports and calls whatever a file names (``os.system`` through ``__reduce__`` is three opcodes), so
a logdir shared by others, or fetched from a bucket, must never be read with it. A snapshot is plain data: torch
builds it from dicts, lists, tuples, strings, ints, floats, bools and None (``torch/csrc/cuda/Module.cpp``'s
``memorySnapshot`` and ``memory_snapshot.cpp``'s pickler), all of which pickle as their own opcodes and need no
import. So this reader admits no global at all except the two builtin containers that older pickle protocols
spell as a call (``set``, ``frozenset``, harmless constructors); anything else (a class, a function, a persistent
id, an out-of-band buffer) stops the read with :class:`Refused`, naming what the file asked for.
"""

from __future__ import annotations

import contextlib
import gc
import io
import pickle
import threading
from collections.abc import Iterator
from typing import Any

_CONTAINERS = frozenset({("builtins", "set"), ("builtins", "frozenset"), ("__builtin__", "set"),
                         ("__builtin__", "frozenset")})


class Refused(pickle.UnpicklingError):
    """The pickle asked for something a snapshot never holds; ``str(err)`` says what."""


class _DataOnly(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _CONTAINERS:
            return super().find_class(module, name)
        raise Refused(f"it asks to import {module}.{name}, which would run code (a PyTorch allocator snapshot "
                      "holds only dicts, lists, strings and numbers); it was not loaded")

    def persistent_load(self, pid: Any) -> Any:
        raise Refused("it refers to persistent objects outside the file (a PyTorch allocator snapshot has none); "
                      "it was not loaded")


def load_data(data: bytes) -> Any:
    """The plain data pickled in ``data``; :class:`Refused` for a pickle that would import or call anything,
    ``pickle.UnpicklingError``, ``EOFError`` or ``ValueError`` for one that is damaged."""
    with no_gc():
        return _DataOnly(io.BytesIO(data)).load()


_GC_LOCK = threading.Lock()
_GC_HOLDERS = 0
_GC_WAS_ENABLED = True


@contextlib.contextmanager
def no_gc() -> Iterator[None]:
    """The cyclic garbage collector paused meanwhile: building a million dicts and lists (a 100,000-entry history)
    otherwise triggers it hundreds of times over objects that are all alive, which doubles the time. Nested and
    concurrent holders keep it paused until the last one leaves; it is never enabled if it was off before."""
    global _GC_HOLDERS, _GC_WAS_ENABLED
    with _GC_LOCK:
        if _GC_HOLDERS == 0:
            _GC_WAS_ENABLED = gc.isenabled()
            gc.disable()
        _GC_HOLDERS += 1
    try:
        yield
    finally:
        with _GC_LOCK:
            _GC_HOLDERS -= 1
            if _GC_HOLDERS == 0 and _GC_WAS_ENABLED:
                gc.enable()
