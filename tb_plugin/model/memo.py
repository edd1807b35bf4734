"""Byte budgets for what the server keeps of its own computations: one mechanism for every memo.

Two kinds of results are kept (``docs/guide/limits.md``):

- A **parameter-free** result (the host tree, a view's table, the Overview) is kept for the life of its model:
  there is one per analysis, so they are bounded by the code and grow with the model, never with requests.
  So is a result whose arguments come from a fixed set (``memoized(closed=True)``: a grouping of a few choices, a
  table's name, the model's own threads or devices).
- A result that depends on a **value a request chooses** (a step, a sequence length) and every encoded answer
  (one per route and query) is kept in a process-wide :class:`ByteBudget`, least recently used first out. A client
  sweeping ``?limit=1..100000`` then costs the server at most the budget, however many models it reads.

Routes whose parameter only cuts a table (a row limit, a number of points) do not memoise per value at all: the
analysis memoises its parameter-free table and slices it per request (``analysis.launches``, ``queues``,
``bandwidth``, ``idle``, ``sequences``), and only the encoded answer is kept, within the answers' budget.

Sizes are estimates (:func:`approx_nbytes`: numpy buffers exactly, Python containers by a sample), good to a
factor that the budgets allow for; an entry larger than its whole budget is kept alone until the next one comes.
"""

from __future__ import annotations

import dataclasses
import sys
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator, MutableMapping
from typing import Any

import numpy as np

# What the encoded answers of every trace may take together (the Trace view's windows of a 2 GB trace are ~1 MB
# each, raw and gzipped: dozens of them fit).
ANSWER_BYTES = 32 << 20
# What results keyed by a request's choice may take together, over every model (a per-event lookup of a 10 M
# event trace is 80 MB: one fits beside the rest).
RESULT_BYTES = 256 << 20
_SAMPLE = 32  # items of a long list or dict measured; the rest is assumed alike


class ByteBudget:
    """One byte bound over the entries of many :class:`BoundedMemo` (one per model): when a new entry takes the
    total over ``max_bytes``, the least recently used entries, of any memo, are dropped.

    Its lock guards every memo that uses it: a memo's dict and the budget's order change together.
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.lock = threading.RLock()
        self._order: OrderedDict[tuple[int, Hashable], int] = OrderedDict()  # (memo id, key) -> bytes
        self._memos: dict[int, weakref.ref[BoundedMemo]] = {}
        self.nbytes = 0

    def _add(self, memo: BoundedMemo, key: Hashable, nbytes: int) -> None:
        slot = (id(memo), key)
        self.nbytes += nbytes - self._order.pop(slot, 0)
        self._order[slot] = nbytes
        if id(memo) not in self._memos:
            self._memos[id(memo)] = weakref.ref(memo)
            weakref.finalize(memo, self._forget, id(memo))
        while self.nbytes > self.max_bytes and len(self._order) > 1:
            (owner, old), size = self._order.popitem(last=False)
            self.nbytes -= size
            ref = self._memos.get(owner)
            victim = ref() if ref is not None else None
            if victim is not None:
                victim.data.pop(old, None)

    def _used(self, memo: BoundedMemo, key: Hashable) -> None:
        slot = (id(memo), key)
        if slot in self._order:
            self._order.move_to_end(slot)

    def _drop(self, memo: BoundedMemo, key: Hashable) -> None:
        self.nbytes -= self._order.pop((id(memo), key), 0)

    def _forget(self, memo_id: int) -> None:
        """A memo went away with its model: its entries no longer count."""
        with self.lock:
            self._memos.pop(memo_id, None)
            for slot in [s for s in self._order if s[0] == memo_id]:
                self.nbytes -= self._order.pop(slot)


ANSWERS = ByteBudget(ANSWER_BYTES)
RESULTS = ByteBudget(RESULT_BYTES)
# (module, function) of the memoised functions whose arguments come from a fixed set (``memoized(closed=True)``)
CLOSED: set[tuple[str, str]] = set()


class BoundedMemo(MutableMapping[Hashable, Any]):
    """A memo whose entries count against a :class:`ByteBudget` (``sizeof`` measures an entry when it is put)."""

    def __init__(self, budget: ByteBudget, sizeof: Callable[[Any], int] | None = None) -> None:
        self.budget = budget
        self.sizeof = sizeof or approx_nbytes
        self.data: dict[Hashable, Any] = {}

    def __getitem__(self, key: Hashable) -> Any:
        with self.budget.lock:
            value = self.data[key]
            self.budget._used(self, key)
            return value

    def __setitem__(self, key: Hashable, value: Any) -> None:
        nbytes = self.sizeof(value)  # outside the lock: measuring a large result takes a moment
        with self.budget.lock:
            self.data[key] = value
            self.budget._add(self, key, nbytes)

    def __delitem__(self, key: Hashable) -> None:
        with self.budget.lock:
            del self.data[key]
            self.budget._drop(self, key)

    def __contains__(self, key: object) -> bool:
        return key in self.data

    def __iter__(self) -> Iterator[Hashable]:
        with self.budget.lock:
            return iter(list(self.data))

    def __len__(self) -> int:
        return len(self.data)


class Memo(MutableMapping[Hashable, Any]):
    """A model's memo (``TraceModel.memo``): keys ``(module, function, args)`` with no ``args``, or of a function
    whose arguments come from a fixed set (:data:`CLOSED`), are kept for the model's life; the others in the
    process-wide :data:`RESULTS` budget (see the module's docstring)."""

    def __init__(self, budget: ByteBudget | None = None) -> None:
        self.pinned: dict[Hashable, Any] = {}
        self.bounded = BoundedMemo(budget or RESULTS)

    def _part(self, key: Hashable) -> MutableMapping[Hashable, Any]:
        bounded = isinstance(key, tuple) and len(key) == 3 and key[2] and key[:2] not in CLOSED
        return self.bounded if bounded else self.pinned

    def __getitem__(self, key: Hashable) -> Any:
        return self._part(key)[key]

    def __setitem__(self, key: Hashable, value: Any) -> None:
        self._part(key)[key] = value

    def __delitem__(self, key: Hashable) -> None:
        del self._part(key)[key]

    def __contains__(self, key: object) -> bool:
        return key in self.pinned or key in self.bounded

    def __iter__(self) -> Iterator[Hashable]:
        return iter([*self.pinned, *self.bounded])

    def __len__(self) -> int:
        return len(self.pinned) + len(self.bounded)


def approx_nbytes(value: Any, depth: int = 6) -> int:
    """About how many bytes ``value`` holds: numpy buffers and bytes exactly, containers by a sample of their
    items (a table of 100,000 row dicts is measured from 32 of them), objects by their fields."""
    if isinstance(value, np.ndarray):
        return int(value.nbytes) + 112
    if isinstance(value, (bytes, bytearray, memoryview)):
        return len(value) + 33
    if isinstance(value, str):
        return sys.getsizeof(value)
    if value is None or isinstance(value, (bool, int, float, np.generic)) or depth <= 0:
        return sys.getsizeof(value)
    if isinstance(value, dict):
        keys = _first(value)
        return sys.getsizeof(value) + _sampled(keys + [value[k] for k in keys], 2 * len(value), depth)
    if isinstance(value, (list, tuple, set, frozenset)):
        items = value if isinstance(value, (list, tuple)) else list(value)
        return sys.getsizeof(value) + _sampled(items[:_SAMPLE], len(items), depth)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return sys.getsizeof(value) + sum(approx_nbytes(getattr(value, f.name), depth - 1)
                                          for f in dataclasses.fields(value))
    nbytes = getattr(value, "nbytes", None)
    if isinstance(nbytes, int):  # an encoded answer, an Arrow buffer
        return nbytes
    fields = getattr(value, "__dict__", None)
    return sys.getsizeof(value) + (approx_nbytes(fields, depth - 1) if isinstance(fields, dict) else 0)


def _first(mapping: dict[Any, Any]) -> list[Any]:
    out: list[Any] = []
    for key in mapping:
        out.append(key)
        if len(out) == _SAMPLE:
            break
    return out


def _sampled(items: Any, total: int, depth: int) -> int:
    """The bytes of ``total`` items, from the first few of them."""
    if not total:
        return 0
    measured = sum(approx_nbytes(item, depth - 1) for item in items)
    return int(measured * total / max(1, len(items)))
