"""``TraceModel.codes_where`` keeps its answer per question: the same function, or a lambda of the same code over
the same values, is answered from what it kept (read-only); other values, a string in the closure (a search's
text), and answers beyond the bound are computed every time, and every answer is the one a scan gives."""

from __future__ import annotations

import re

import numpy as np
import pytest

from tb_plugin.model import tables
from tb_plugin.model.names import is_host_sync
from tb_plugin.model.tables import TraceModel, empty_table

STRINGS = ["ProfilerStep#1", "aten::mm", "cudaStreamSynchronize", "ProfilerStep#2", "nccl:all_reduce", "aten::add"]


def model() -> TraceModel:
    return TraceModel(strings=list(STRINGS), tables={"events": empty_table("events")})


def steps() -> object:
    return lambda s: s.startswith("ProfilerStep#")  # made anew at each call, of one code object (an analysis's call)


def prefix_of(limit: int) -> object:
    return lambda s: s.startswith("ProfilerStep#") and int(s.split("#")[1]) <= limit  # closure over an int


def test_the_same_question_is_answered_once_and_read_only() -> None:
    m = model()
    first, again = m.codes_where(steps()), m.codes_where(steps())
    assert first.tolist() == [0, 3] and again is first and not first.flags.writeable
    with pytest.raises(ValueError):
        first[0] = 5
    assert m.codes_where(is_host_sync).tolist() == [2] and m.codes_where(is_host_sync) is m.codes_where(is_host_sync)
    pattern = re.compile(r"^aten::")
    assert m.codes_where(pattern.match).tolist() == [1, 5]


def test_other_values_get_their_own_answer_and_strings_are_not_kept() -> None:
    m = model()
    assert m.codes_where(prefix_of(1)).tolist() == [0] and m.codes_where(prefix_of(2)).tolist() == [0, 3]
    for needle in ("aten", "nccl"):
        got = m.codes_where(lambda s: needle in s)  # noqa: B023 - the closure over a string is the point
        assert got.tolist() == [i for i, s in enumerate(STRINGS) if needle in s]
    assert not any(isinstance(v, str) for key in m._codes for v in key[-1])  # type: ignore[index]


def test_the_kept_answers_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tables, "CODES_KEPT", 3)
    m = model()
    for limit in range(10):
        want = [i for i, s in enumerate(STRINGS) if s.startswith("ProfilerStep#") and int(s[13:]) <= limit]
        assert m.codes_where(prefix_of(limit)).tolist() == want
    assert len(m._codes) == 3
    monkeypatch.setattr(tables, "CODES_BYTES", 4)  # room for one code: a two-code answer is not kept
    m = model()
    assert m.codes_where(lambda s: s.startswith("aten::")).tolist() == [1, 5] and not m._codes
    assert np.array_equal(m.codes_where(is_host_sync), [2]) and len(m._codes) == 1


def test_threads_asking_at_once_get_every_answer() -> None:
    """The analyses a part's process computes ahead run on threads: one keeps an answer while another sums the kept
    ones' bytes (a dict changing size under an iteration failed the Overview part once)."""
    import sys
    from concurrent.futures import ThreadPoolExecutor

    m = TraceModel(strings=[f"ProfilerStep#{i}" for i in range(2000)], tables={"events": empty_table("events")})
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as the interpreter can
    try:
        with ThreadPoolExecutor(8) as pool:
            got = list(pool.map(lambda limit: len(m.codes_where(prefix_of(limit))), range(256)))
    finally:
        sys.setswitchinterval(interval)
    assert got == [limit + 1 for limit in range(256)]
