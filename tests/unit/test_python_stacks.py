"""The numpy call stacks of 2.x traces (``analysis/python_stacks``) against the walks they replace.

Per operator, the innermost enclosing Python frame must be the stack sweep's answer, and per frame, the stack
text the walk up its parent ids gives (source frames only, at most ``MAX_FRAMES`` frames): on every real trace
with ``python_function`` events, and on synthetic ones made to be awkward (frames overlapping partially, equal
starts and ends, operators as long as frames, repeated and missing ids, a cycle, a chain longer than the cut).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tb_plugin.analysis import python_stacks as ps
from tb_plugin.analysis.operators import call_stacks, operator_nodes
from tb_plugin.loader import load_trace
from tb_plugin.model.optree import host_tree
from tb_plugin.model.order import sweep_order
from tb_plugin.model.tables import TraceModel
from tests.conftest import distinct_trace_files, sample_trace_files, write_trace


def _reference_frames(model: TraceModel, op_rows: np.ndarray) -> np.ndarray:
    return ps._innermost_walk(ps._sweep_order(model, op_rows))


def _reference_texts(model: TraceModel, frames: np.ndarray) -> list[str]:
    py = model["python"]
    by_id = {int(p): k for k, p in enumerate(py["python_id"].tolist()) if p >= 0}  # the last frame of an id
    parent = [by_id.get(p, -1) for p in py["parent_id"].tolist()]
    names = model["events"]["name"][py["row"]].tolist()
    return [ps._walk_text(f, parent, names, model.strings) for f in frames.tolist()]


def _check(model: TraceModel, op_rows: np.ndarray) -> int:
    """Compares both steps with the walks; returns how many operators have a frame (so a test can't be empty)."""
    frames = ps.innermost_frames(model, op_rows)
    assert frames.tolist() == _reference_frames(model, op_rows).tolist()
    distinct = np.unique(frames[frames >= 0])
    codes, texts = ps.stack_table(model, distinct)
    got = [texts[c] if c >= 0 else "" for c in codes.tolist()]
    assert got == _reference_texts(model, distinct)
    assert len(set(texts)) == len(texts)  # one code per text, numbered as first met
    assert [c for c in dict.fromkeys(codes.tolist()) if c >= 0] == list(range(len(texts)))
    return int((frames >= 0).sum())


def _with_python(paths: list[Path]) -> list[Path]:
    """The real traces recorded with Python stacks whose stacks this file checks (the calibration pairs and the GEMM
    benchmark are there for the diagnosis and the roofline: 45 more loads would add minutes, not cases)."""
    left_out = {"kineto_v100", "ddp_resnet50", "calibration", "gemm_bench"}
    return [p for p in paths if not left_out & set(p.parts)]


@pytest.mark.parametrize("path", _with_python(distinct_trace_files()) + sample_trace_files()[:6],
                         ids=lambda p: f"{p.parent.name}/{p.name[:12]}")
def test_stacks_equal_the_walks_on_real_traces(path: Path) -> None:
    model = load_trace(str(path))
    if not len(model["python"]["row"]):
        assert not call_stacks(model).texts or (model["ops"]["call_stack"] >= 0).any()
        return
    rows = host_tree(model).rows[operator_nodes(model).node]
    assert _check(model, rows) > 0
    assert _check(model, model["ops"]["row"]) > 0  # every operator row, not only the view's


class _Synthetic:
    """Nested frames with jitter (partial overlaps, equal ends), operators inside and across them, odd ids."""

    def __init__(self, rng: random.Random) -> None:
        self.rng, self.next_id = rng, 1
        self.events: list[dict[str, Any]] = []

    def frames(self, tid: int, lo: float, hi: float, parent: int, depth: int) -> None:
        rng, t = self.rng, lo
        while t < hi and depth < 6:
            end = min(hi, t + rng.choice([0.0, 1.0, rng.uniform(0, hi - t)])) + rng.choice([0.0, 0.0, 0.5, -0.5])
            end = max(end, t)  # sometimes past the parent's end
            own = self.next_id if rng.random() > 0.05 else rng.randint(1, self.next_id)  # a repeated id
            self.next_id += 1
            name = rng.choice(["a.py(1): f", "b.py(22): g", "<built-in method x>", "torch/m.py(9): forward"])
            up = parent if rng.random() > 0.05 else 99999  # now and then a parent id no frame has
            self.events.append({"ph": "X", "cat": "python_function", "name": name, "pid": 7, "tid": tid, "ts": t,
                                "dur": end - t, "args": {"Python id": own, "Python parent id": up}})
            if rng.random() < 0.6:
                self.frames(tid, t, end, own, depth + 1)
            for _ in range(rng.randint(0, 2)):  # operators, some as long as the frame, some past its end
                self.events.append({"ph": "X", "cat": "cpu_op", "name": "aten::op", "pid": 7, "tid": tid,
                                    "ts": rng.choice([t, rng.uniform(t, end), end]),
                                    "dur": rng.choice([0.0, end - t, rng.uniform(0, 3)])})
            t = end + rng.choice([0.0, 0.5, 1.0])


def _synthetic(rng: random.Random, n_threads: int) -> list[dict[str, Any]]:
    trace = _Synthetic(rng)
    for tid in range(1, n_threads + 1):
        trace.frames(tid, 0.0, 100.0, -1, 0)
    return trace.events


@pytest.mark.parametrize("seed", range(8))
def test_stacks_equal_the_walks_on_awkward_synthetic_traces(tmp_path: Path, seed: int) -> None:
    events = _synthetic(random.Random(seed), 3)
    model = load_trace(str(write_trace(tmp_path / "t.pt.trace.json", events)))
    assert _check(model, model["ops"]["row"]) > 0


@pytest.mark.parametrize("seed", range(4))
def test_stacks_equal_the_walks_across_threads_and_ties(tmp_path: Path, seed: int) -> None:
    """Operators on threads with no frames (before, between and after the frames' threads, another process too),
    and operators starting with frames at equal times, longer, shorter and as long (the sweep's order: start, then
    longest first, frames first where both tie), found per thread among the frames sorted once."""
    rng = random.Random(seed)
    events = _synthetic(rng, 3)
    for ev in [e for e in events if e["cat"] == "python_function"]:
        for dur in (0.0, ev["dur"], ev["dur"] / 2, ev["dur"] + 1.0):  # at the frame's start, every length
            events.append({"ph": "X", "cat": "cpu_op", "name": "aten::tie", "pid": 7, "tid": ev["tid"], "ts": ev["ts"],
                           "dur": dur})
    for pid, tid in ((7, 0), (7, 2), (7, 9), (3, 1), (8, 1)):  # tid 2 has frames; the others none
        events += [{"ph": "X", "cat": "cpu_op", "name": "aten::op", "pid": pid, "tid": tid, "ts": rng.uniform(0, 100),
                    "dur": rng.uniform(0, 5)} for _ in range(20)]
    rng.shuffle(events)
    model = load_trace(str(write_trace(tmp_path / "t.pt.trace.json", events)))
    assert _check(model, model["ops"]["row"]) > 0


def _chain(n: int, tid: int, first_id: int, parent_of_first: int, span: float) -> list[dict[str, Any]]:
    return [{"ph": "X", "cat": "python_function", "name": f"deep.py({k}): f", "pid": 7, "tid": tid, "ts": k * 1e-3,
             "dur": span - 2 * k * 1e-3, "args": {"Python id": first_id + k,
                                                  "Python parent id": first_id + k - 1 if k else parent_of_first}}
            for k in range(n)]


def test_a_chain_longer_than_the_cut_and_a_cycle_are_cut_as_the_walk_cuts_them(tmp_path: Path) -> None:
    deep = _chain(ps.MAX_FRAMES + 40, 1, 1, -1, 10.0)
    cycle = _chain(5, 2, 10_000, 10_004, 10.0)  # the first frame's parent is the last: a cycle of parent ids
    ops = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 7, "tid": tid, "ts": 5.0, "dur": 0.1}
           for tid in (1, 2)]
    model = load_trace(str(write_trace(tmp_path / "t.pt.trace.json", deep + cycle + ops)))
    assert _check(model, model["ops"]["row"]) == 2
    frames = ps.innermost_frames(model, model["ops"]["row"])
    _, texts = ps.stack_table(model, np.unique(frames))
    by_length = sorted(texts, key=len)
    cycled = [f"deep.py({k}): f" for k in (4, 3, 2, 1, 0)] * 102 + ["deep.py(4): f", "deep.py(3): f"]
    assert by_length[0].split(";") == cycled
    assert len(by_length[1].split(";")) == ps.MAX_FRAMES  # the innermost 512 of 552 frames
    assert by_length[1].startswith(f"deep.py({ps.MAX_FRAMES + 39}): f;")


@pytest.mark.parametrize(("threads", "seed"), [(1, 0), (3, 1), (3, 2), (40, 3)])
def test_sweep_order_is_lexsorts(threads: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 20_000
    pid = rng.integers(5, 7, n)
    tid = rng.integers(0, threads, n) * 1_000_003
    start = np.sort(rng.integers(0, 3000, n).astype(float))  # nearly sorted, with many equal starts
    start[rng.integers(0, n, 200)] = rng.uniform(0, 3000, 200)
    start[rng.integers(0, n, 20)] = np.nan
    length = rng.choice([0.0, 1.0, 2.5, 7.0], n)
    is_py = rng.random(n) < 0.4
    got = sweep_order(pid, tid, start, (~is_py, -length))
    assert got.tolist() == np.lexsort((~is_py, -length, start, tid, pid)).tolist()
