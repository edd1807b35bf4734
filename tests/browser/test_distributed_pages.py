"""The Distributed view of a job too large to send whole: 257 synthetic ranks (``benchmarks/make_ranks.py`` from
the real 8-rank gloo_8proc_cpu sample, the cheapest to parse), one more than the server answers whole
(``distributed_page.WHOLE_MAX``), arrive in server pages of 100 rows: three pages. The page control pages through
them, the server sorts them, the heat-map shows every rank, and a row of page 2 opens that rank's own Trace view."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from benchmarks import make_ranks
from tb_plugin.analysis.distributed_page import WHOLE_MAX
from tests.browser.conftest import PLUGIN, TensorBoard, open_plugin, table_rows, top_hash
from tests.browser.test_distributed_diff import plot_data
from tests.browser.test_views import wait_charts
from tests.conftest import SAMPLES

pytestmark = pytest.mark.browser
P = f"p.{PLUGIN}"
RANKS = WHOLE_MAX + 1  # the smallest job the server pages by default: 257 ranks, three pages of 100


@pytest.fixture(scope="module")
def tb_job(tb_factory: Callable[..., TensorBoard], tmp_path_factory: pytest.TempPathFactory) -> TensorBoard:
    root = tmp_path_factory.mktemp("logdir_pages")
    assert make_ranks.main([str(SAMPLES / "gloo_8proc_cpu"), "--ranks", str(RANKS), "--jobs", "2",
                            "--out", str(root / "job")]) == 0
    tb = tb_factory(root)
    tb.wait_settled(timeout=900)
    return tb


def _ranks_shown(frame: Any) -> list[int]:
    return [int(r["rank"]) for r in table_rows(frame, "rank-table")]


def test_pages_sort_and_open_a_ranks_trace_from_page_two(page: Any, tb_job: TensorBoard) -> None:
    page.set_viewport_size({"width": 1600, "height": 1000})
    first = tb_job.get_json("distributed?run=job&span=1")
    assert (first["page"]["total"], first["page"]["limit"]) == (RANKS, 100) == (257, 100)
    assert [r["rank"] for r in first["ranks"]] == list(range(100))
    frame = open_plugin(page, tb_job, f"&{P}.run=job&{P}.worker=rank0&{P}.span=1&{P}.view=Distributed")
    frame.wait_for_selector("[data-testid=dist-page-text]", timeout=300_000)
    assert frame.inner_text("[data-testid=dist-page-text]") == "Ranks 1–100 of 257 · page 1 of 3"
    assert _ranks_shown(frame) == list(range(100))
    assert frame.inner_text("[data-testid=dist-ranks]").endswith("257")
    # the heat-map has a row per rank of the job, not of the page
    wait_charts(frame, "comm-heatmap")
    heat = plot_data(frame, "comm-heatmap")[0]
    assert len(heat["y"]) == RANKS and heat["y"][150] == "rank 150"

    frame.click("[data-testid=dist-page-next]")
    frame.wait_for_function(
        "() => document.querySelector('[data-testid=dist-page-text]').textContent.endsWith('page 2 of 3')")
    assert frame.inner_text("[data-testid=dist-page-text]") == "Ranks 101–200 of 257 · page 2 of 3"
    frame.wait_for_function("() => document.querySelector('[data-testid=rank-table] tbody tr td').innerText == '100'")
    assert _ranks_shown(frame) == list(range(100, 200))
    options = frame.eval_on_selector_all("[data-testid=collectives-rank] option", "os => os.map(o => o.textContent)")
    assert len(options) == 100 and options[50] == "rank 150 (rank150)"

    rank150 = tb_job.get_json("distributed?run=job&span=1&offset=150&limit=1")["ranks"][0]
    assert rank150["rank"] == 150
    windows = rank150["step_windows_us"]
    frame.locator("[data-testid=rank-table] tr[data-testid=row]").filter(has_text="rank150").locator(
        "[data-testid=rank-trace]").click()
    frame.wait_for_selector("[data-testid=tab-Trace][aria-selected=true]")
    hash_ = top_hash(page)
    assert hash_[f"{P}.worker"] == "rank150"
    a, b = windows[0][0], windows[-1][1]
    margin = max((b - a) * 0.02, 1)
    assert (float(hash_[f"{P}.start"]), float(hash_[f"{P}.end"])) == (
        pytest.approx(a - margin, abs=1e-3), pytest.approx(b + margin, abs=1e-3))


def test_the_server_sorts_every_rank(page: Any, tb_job: TensorBoard) -> None:
    expected = tb_job.get_json("distributed?run=job&span=1&limit=100&sort=step_us&order=desc")
    frame = open_plugin(page, tb_job, f"&{P}.run=job&{P}.worker=rank0&{P}.span=1&{P}.view=Distributed")
    frame.wait_for_selector("[data-testid=dist-page-text]", timeout=300_000)
    frame.select_option("[data-testid=dist-order]", "desc")  # rank order, descending: the last rank first
    frame.wait_for_function("() => document.querySelector('[data-testid=rank-table] tbody tr td').innerText == '256'")
    assert _ranks_shown(frame) == list(range(256, 156, -1))
    frame.select_option("[data-testid=dist-sort]", "step_us")
    want = [r["rank"] for r in expected["ranks"]]
    frame.wait_for_function("first => document.querySelector('[data-testid=rank-table] tbody tr td').innerText"
                            " == String(first)", arg=want[0])
    assert _ranks_shown(frame) == want
    steps = [r["step_us"] for r in expected["ranks"]]
    assert steps == sorted(steps, reverse=True) and want != list(range(100))
