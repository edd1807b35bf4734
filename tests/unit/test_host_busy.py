"""The host's busy time (``diagnosis.evidence.host_busy``) is the union of every operator, annotation and Python frame
(steps aside) although it unites only those not inside their parent: equal to the union of them all, bit for bit, on
synthetic threads built to hit the nesting's edges (equal starts, instants, ends a fraction of the nesting's tolerance
past their parent, partial overlaps, steps around and between them) and on every sample and test trace."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tb_plugin.analysis.diagnosis.evidence import host_busy
from tb_plugin.analysis.diagnosis.gpu_time import spans
from tb_plugin.loader import load_bytes, load_trace
from tb_plugin.model import intervals as iv
from tb_plugin.model.kinds import Kind
from tb_plugin.model.names import name_mask
from tb_plugin.model.tables import TraceModel

ROOT = Path(__file__).resolve().parents[2]
TRACES = sorted({str(p) for d in ("samples", "tests/data") for p in (ROOT / d).rglob("*.pt.trace.json*")})
HOST = ("cpu_op", "user_annotation", "python_function", "cuda_runtime")


def every_interval(model: TraceModel) -> iv.Intervals:
    """The rule: the union of all the host's operators, annotations and Python frames but the steps."""
    ev = model["events"]
    host = np.isin(ev["kind"], (Kind.CPU_OP, Kind.USER_ANNOTATION, Kind.PYTHON_FUNCTION))
    host &= ~name_mask(model, ev["name"], lambda s: s.startswith("ProfilerStep#"))
    return spans(model, host)


def assert_same(a: iv.Intervals, b: iv.Intervals) -> None:
    assert a[0].tobytes() == b[0].tobytes() and a[1].tobytes() == b[1].tobytes()


def forest(rng: np.random.Generator, lo: float, hi: float, depth: int, jitter: float) -> list[tuple[float, float]]:
    """Intervals nested in [lo, hi): children apart, some starting or ending with their parent or instants, each
    end moved by up to ``jitter`` µs (past the nesting's 1 ns tolerance: partial overlaps)."""
    out: list[tuple[float, float]] = []
    if depth == 0 or hi - lo < 0.01:
        return out
    cuts = np.round(np.sort(rng.uniform(lo, hi, 2 * int(rng.integers(0, 4)))), 4).tolist()
    for a, b in zip(cuts[0::2], cuts[1::2]):
        pick = rng.random()
        a, b = (lo, b) if pick < 0.15 else (a, hi) if pick < 0.3 else (a, a) if pick < 0.35 else (a, b)
        out.append((a, max(a, round(b + jitter * rng.uniform(-1, 1), 4))))
        out += forest(rng, a, b, depth - 1, jitter)
    return out


def synthetic(seed: int, jitter: float) -> bytes:
    """Two threads of steps with gaps between them, nested intervals of every host kind inside and outside them."""
    rng = np.random.default_rng(seed)
    events: list[dict[str, Any]] = []
    for tid in (1, 2):
        for k in range(4):
            lo = 1000.0 * k
            step = [(lo + 100.0, lo + 900.0)] if rng.random() < 0.8 else []
            for s, e in step + forest(rng, lo, lo + 1000.0, 5, jitter):
                cat = HOST[int(rng.integers(len(HOST)))]
                is_step = (s, e) in step
                events.append({"ph": "X", "cat": "user_annotation" if is_step and k % 2 else cat,
                               "name": f"ProfilerStep#{k}" if is_step else f"{cat}_{rng.integers(5)}",
                               "pid": 7, "tid": tid, "ts": s, "dur": round(e - s, 4)})
    order = rng.permutation(len(events))  # events come in any order
    return json.dumps({"traceEvents": [events[i] for i in order]}).encode()


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("jitter", [0.0, 0.0004, 0.05])
def test_synthetic_threads(seed: int, jitter: float) -> None:
    model = load_bytes(synthetic(seed, jitter), f"synthetic_{seed}.pt.trace.json")
    rule = every_interval(model)
    assert len(rule[0])  # the union is not empty: the test compares something
    assert_same(host_busy(model), rule)


def test_real_traces() -> None:
    assert len(TRACES) >= 80
    for path in TRACES:
        model = load_trace(path)
        assert_same(host_busy(model), every_interval(model))
