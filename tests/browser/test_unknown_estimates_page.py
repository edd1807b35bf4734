"""Estimates CUPTI could not make read "n/a" on the page: the Kernel view's occupancy of cuBLAS nvjet kernels
(CUPTI writes 0 for them), kept out of the means."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.conftest import TensorBoard, table_rows
from tests.browser.test_views import TRANSFORMER, api, open_view, wait_charts

pytestmark = pytest.mark.browser


def test_kernel_view_shows_unknown_occupancy_as_na(page: Any, tb_samples: TensorBoard) -> None:
    data = api(tb_samples, "kernels", TRANSFORMER)
    nvjet = [r for r in data["rows"] if r["name"].startswith("nvjet_")]
    known = [r for r in data["rows"] if r["achieved_occupancy"] is not None]
    assert nvjet and all(r["achieved_occupancy"] is None for r in nvjet) and known
    frame = open_view(page, tb_samples, TRANSFORMER, "Kernel")
    wait_charts(frame, "pie-kernels")
    frame.fill("[data-testid=kernel-table] [data-testid=search-name]", "nvjet_")
    frame.wait_for_function("() => [...document.querySelectorAll('[data-testid=kernel-table] tbody tr[data-testid=row]"
                            " td[data-col=name]')].every(td => td.innerText.startsWith('nvjet_'))")
    rows = table_rows(frame, "kernel-table")
    assert rows and all(r["achieved_occupancy"] == "n/a" for r in rows)
    # the GPU card's mean leaves them out: weighted over the kernels with a known occupancy only
    overview = api(tb_samples, "overview", TRANSFORMER)
    occ = overview["gpus"][0]["achieved_occupancy"]
    weights = sum(r["total_us"] for r in known)
    assert 0 < occ <= max(r["achieved_occupancy"] for r in known)
    assert occ == pytest.approx(sum(r["achieved_occupancy"] * r["total_us"] for r in known) / weights, rel=0.05)
