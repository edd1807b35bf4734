"""Memoised analyses compute each key once, also when many requests ask for it at the same moment."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from tb_plugin.model.derived import memoized
from tb_plugin.model.tables import TraceModel


def _model() -> TraceModel:
    return TraceModel(strings=[], tables={})


def test_concurrent_first_calls_compute_once() -> None:
    calls: list[int] = []
    started = threading.Event()

    @memoized
    def slow(model: TraceModel, n: int) -> list[int]:
        calls.append(n)
        started.set()
        time.sleep(0.3)  # long enough that every other thread arrives while this one computes
        return [n] * 3

    model = _model()
    with ThreadPoolExecutor(max_workers=20) as pool:
        results = list(pool.map(lambda _: slow(model, 7), range(40)))
    assert calls == [7]
    assert all(r is results[0] for r in results)  # one object shared by every caller
    assert slow(model, 8) == [8, 8, 8] and calls == [7, 8]  # another key is another computation
    assert not model.computing


def test_an_exception_reaches_every_waiter_and_is_not_cached() -> None:
    calls = 0
    gate = threading.Event()

    @memoized
    def flaky(model: TraceModel) -> str:
        nonlocal calls
        calls += 1
        if calls == 1:
            gate.wait(5)
            raise MemoryError("first try fails")
        return "ok"

    model = _model()

    def call() -> Any:
        try:
            return flaky(model)
        except MemoryError as err:
            return err

    with ThreadPoolExecutor(max_workers=10) as pool:
        futures = [pool.submit(call) for _ in range(10)]
        time.sleep(0.3)  # all ten are in: one computing, nine waiting on it
        gate.set()
        outcomes = [f.result() for f in futures]
    assert calls == 1
    assert all(isinstance(o, MemoryError) for o in outcomes)
    assert not model.computing and not model.memo
    assert flaky(model) == "ok" and calls == 2  # the failure was not kept: the next request computes again
    assert flaky(model) == "ok" and calls == 2


def test_memoized_on_different_models_is_independent() -> None:
    @memoized
    def ident(model: TraceModel) -> int:
        return id(model)

    a, b = _model(), _model()
    assert ident(a) == id(a) and ident(b) == id(b)


@pytest.mark.parametrize("threads", [2, 8])
def test_nested_memoized_calls_do_not_deadlock(threads: int) -> None:
    @memoized
    def inner(model: TraceModel) -> int:
        time.sleep(0.05)
        return 1

    @memoized
    def outer(model: TraceModel) -> int:
        return inner(model) + 1

    model = _model()
    with ThreadPoolExecutor(max_workers=threads) as pool:
        assert set(pool.map(lambda _: outer(model) + inner(model), range(threads * 2))) == {3}


def test_results_keyed_by_arguments_are_kept_within_a_byte_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """A parameter-free result stays with its model; one per argument value (a request's choice) counts against
    the process-wide budget, least recently used out, whichever model it belongs to."""
    import numpy as np

    from tb_plugin.model import memo

    monkeypatch.setattr(memo.RESULTS, "max_bytes", 10_000)
    calls: list[int] = []

    @memoized
    def table(model: TraceModel) -> np.ndarray:
        return np.zeros(5_000)  # 40 kB, over the whole budget: parameter-free, kept anyway

    @memoized
    def cut(model: TraceModel, n: int) -> np.ndarray:
        calls.append(n)
        return np.zeros(290)  # 2.4 kB: four fit

    @memoized(closed=True)
    def by_grouping(model: TraceModel, group_by: str) -> np.ndarray:
        return np.zeros(5_000)  # one of a few groupings: kept with the model like a parameter-free result

    a, b = _model(), _model()
    assert table(a) is table(a) and by_grouping(a, "name") is by_grouping(a, "name")
    for n in range(10):
        cut(a, n)
    assert len(a.memo.bounded) == 4 and memo.RESULTS.nbytes <= 10_000
    cut(a, 9)
    cut(b, 0)  # another model's result pushes a's least recent (6) out
    assert calls[-1] == 0 and sorted(k[2][0] for k in a.memo.bounded) == [7, 8, 9]
    assert len(a.memo.pinned) == 2 and by_grouping(a, "name") is by_grouping(a, "name")
    cut(a, 6)
    assert calls[-1] == 6  # computed again, once it was let go


def test_approx_nbytes_measures_tables_from_a_sample() -> None:
    import numpy as np

    from tb_plugin.model.memo import approx_nbytes

    rows = [{"name": f"kernel_{i}", "total_us": float(i), "count": i} for i in range(100_000)]
    measured = approx_nbytes(rows)
    assert 25e6 < measured < 60e6  # ~310 bytes a row in CPython (tracemalloc); shared keys counted too
    assert approx_nbytes({"a": np.zeros(1000), "b": [np.zeros(10)] * 3}) > 8000 + 240
