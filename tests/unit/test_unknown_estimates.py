"""Estimates the trace cannot make are unknown (None, shown "n/a"), never 0: SM efficiency without blocks per SM."""

from __future__ import annotations

from pathlib import Path

import pytest

from tb_plugin.analysis.gpu import gpu_summary
from tests.unit.test_views_synthetic import PROPS, kernel, launch, model_of, op, step


def test_sm_efficiency_without_blocks_per_sm_is_unknown(tmp_path: Path) -> None:
    events = [step(1, 0, 100), op("aten::mm", 0, 50), launch(1, 1, corr=1), kernel("k", 10, 40, corr=1)]
    (gpu,) = gpu_summary(model_of(tmp_path / "a", events, deviceProperties=PROPS))
    assert gpu["sm_efficiency"] is None and gpu["utilization"] == pytest.approx(0.4)
    events[-1] = kernel("k", 10, 40, corr=1, **{"blocks per SM": 0.5})
    (gpu,) = gpu_summary(model_of(tmp_path / "b", events, deviceProperties=PROPS))
    assert gpu["sm_efficiency"] == pytest.approx(0.5 * 40 / 100)
