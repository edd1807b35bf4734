"""``analysis.align.Matcher``: difflib's opcodes, exactly, from its array longest match: on random sequences of few
and many distinct elements (the diff's phases, its operators), with repeats, empty sides and sides equal, and on the
real traces' phase keys."""

from __future__ import annotations

import difflib
import random

import pytest

from tb_plugin.analysis.align import Matcher


def _reference(a: list[str], b: list[str]) -> list[tuple[str, int, int, int, int]]:
    return difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes()


@pytest.mark.parametrize("alphabet", [1, 2, 4, 12, 200])
def test_the_opcodes_are_difflibs_on_random_sequences(alphabet: int) -> None:
    rng = random.Random(alphabet)
    for _ in range(300):
        keys = [f"k{n}" for n in range(alphabet)]
        a = [rng.choice(keys) for _ in range(rng.randrange(0, 60))]
        b = [rng.choice(keys) for _ in range(rng.randrange(0, 60))]
        if rng.random() < 0.3:  # a run and an edit of it: long shared blocks, as two runs of one model have
            b = a[:]
            for _ in range(rng.randrange(0, 4)):
                at = rng.randrange(0, len(b) + 1)
                b[at:at + rng.randrange(0, 3)] = [rng.choice(keys) for _ in range(rng.randrange(0, 3))]
        assert Matcher(a, b).get_opcodes() == _reference(a, b), (a, b)


def test_the_opcodes_are_difflibs_on_periodic_phases() -> None:
    """Steps of phases, as the diff's top level holds them: one run's steps against more, fewer, or one changed."""
    step = ["DataLoader", "forward", "backward", "Backward", "Optimizer.step"]
    for n, m in ((40, 40), (40, 55), (55, 40), (0, 10), (10, 0)):
        a, b = step * n, step * m
        if n and m:
            b[len(b) // 2] = "forward"  # one phase differs
        assert Matcher(a, b).get_opcodes() == _reference(a, b)


def test_a_long_repetitive_alignment_is_quick() -> None:
    """3,000 phases of four keys each side (about the 2 GB trace's top level): difflib walks every position of each
    key; the arrays take a row at a time (a bound with a wide margin on a busy 2-core machine)."""
    import time

    step = ["forward", "backward", "Backward", "optimizer"]
    a, b = step * 750, step * 740 + ["forward"] * 10
    started = time.perf_counter()
    got = Matcher(a, b).get_opcodes()
    assert time.perf_counter() - started < 2.0
    assert got == _reference(a, b)


def test_long_sides_take_the_arrays_and_short_ones_difflib() -> None:
    from tb_plugin.analysis.align import ARRAYS_FROM, matcher

    assert type(matcher(["x"] * 1000, ["x"] * (ARRAYS_FROM // 1000))) is Matcher
    assert type(matcher(["x"] * 144, ["x"] * 144)) is difflib.SequenceMatcher


def test_the_diffs_drill_down_is_the_same_with_the_arrays(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every drill-down answer of real traces' diffs (against themselves and each other, three levels deep), with
    the arrays' matcher at every size, is the answer with difflib's."""
    from tb_plugin.analysis import align
    from tb_plugin.analysis.diff import diff_node
    from tb_plugin.loader import load_trace
    from tests.conftest import real_trace_files

    files = [f for f in real_trace_files() if "transformer_bf16" in str(f) or "ddp_resnet50" in str(f)][:3]

    def walk() -> dict[str, object]:
        models = [load_trace(str(f)) for f in files]
        out: dict[str, object] = {}
        for i, j in ((0, 0), (0, 1), (1, 2), (2, 2)):
            queue = ["0"]
            while queue and len(out) < 200 * (i + 1):
                path = queue.pop(0)
                answer = diff_node(models[i], models[j], path)
                out[f"{i}|{j}|{path}"] = answer
                queue += [c["path"] for c in answer["children"] if c["expandable"] and c["path"].count("-") < 3]
        return out

    plain = walk()
    monkeypatch.setattr(align, "ARRAYS_FROM", 0)
    assert walk() == plain and len(plain) > 100
