"""The Distributed view of a job too large to send whole: 257 synthetic ranks (``benchmarks/make_ranks.py`` from
the real 8-rank gloo_8proc_cpu sample, the cheapest to parse), one more than the server answers whole
(``distributed_page.WHOLE_MAX``), arrive in server pages of 100 rows: three pages. The rank table pages through them
on the server (its own pager, header sort and count), the server sorts them, the CSV export writes every rank, the
heat-map shows every rank, and a row of page 2 opens that rank's own Trace view."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from benchmarks import make_ranks
from tb_plugin.analysis.distributed_page import WHOLE_MAX
from tests.browser.conftest import PLUGIN, TensorBoard, open_plugin, read_csv, table_rows, top_hash
from tests.browser.test_distributed_diff import plot_data
from tests.browser.test_views import wait_charts
from tests.conftest import SAMPLES

pytestmark = pytest.mark.browser
P = f"p.{PLUGIN}"
TABLE = "[data-testid=rank-table]"
FIRST_CELL = f"document.querySelector('{TABLE} tbody tr td').innerText"
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


def _pager(frame: Any) -> tuple[str, str, str]:
    """The rank table's range ("1–100 of 257"), page ("Page 1 of 3") and count ("257 rows")."""
    return (frame.inner_text(f"{TABLE} [data-testid=table-range]"),
            frame.inner_text(f"{TABLE} [data-testid=table-pager] span:nth-of-type(2)"),
            frame.inner_text(f"{TABLE} [data-testid=table-count]"))


def _open(page: Any, tb: TensorBoard) -> Any:
    frame = open_plugin(page, tb, f"&{P}.run=job&{P}.worker=rank0&{P}.span=1&{P}.view=Distributed")
    frame.wait_for_selector(f"{TABLE} [data-testid=table-range]", timeout=300_000)
    return frame


def test_pages_sort_and_open_a_ranks_trace_from_page_two(page: Any, tb_job: TensorBoard) -> None:
    page.set_viewport_size({"width": 1600, "height": 1000})
    first = tb_job.get_json("distributed?run=job&span=1")
    assert (first["page"]["total"], first["page"]["limit"]) == (RANKS, 100) == (257, 100)
    assert [r["rank"] for r in first["ranks"]] == list(range(100))
    frame = _open(page, tb_job)
    assert _pager(frame) == ("1–100 of 257", "Page 1 of 3", "257 rows")
    assert frame.input_value(f"{TABLE} [data-testid=table-page-size]") == "100"
    assert _ranks_shown(frame) == list(range(100))
    assert frame.inner_text("[data-testid=dist-ranks]").endswith("257")
    # the heat-map has a row per rank of the job, not of the page
    wait_charts(frame, "comm-heatmap")
    heat = plot_data(frame, "comm-heatmap")[0]
    assert len(heat["y"]) == RANKS and heat["y"][150] == "rank 150"

    frame.click(f"{TABLE} [data-testid=table-next]")
    frame.wait_for_function(f"() => {FIRST_CELL} == '100'")
    assert _pager(frame) == ("101–200 of 257", "Page 2 of 3", "257 rows")
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
    frame = _open(page, tb_job)
    assert frame.get_attribute(f"{TABLE} th[data-col=rank]", "aria-sort") == "ascending"
    # Host, Process and GPU the server cannot sort by: no sort button
    assert frame.locator(f"{TABLE} [data-testid=sort-host]").count() == 0
    frame.click(f"{TABLE} [data-testid=sort-rank]")  # rank order, descending: the last rank first
    frame.wait_for_function(f"() => {FIRST_CELL} == '256'")
    assert _ranks_shown(frame) == list(range(256, 156, -1))
    assert frame.get_attribute(f"{TABLE} th[data-col=rank]", "aria-sort") == "descending"
    frame.click(f"{TABLE} [data-testid=sort-step_us]")  # a number: largest first
    want = [r["rank"] for r in expected["ranks"]]
    frame.wait_for_function(f"first => {FIRST_CELL} == String(first)", arg=want[0])
    assert _ranks_shown(frame) == want
    assert frame.get_attribute(f"{TABLE} th[data-col=step_us]", "aria-sort") == "descending"
    assert _pager(frame) == ("1–100 of 257", "Page 1 of 3", "257 rows")
    steps = [r["step_us"] for r in expected["ranks"]]
    assert steps == sorted(steps, reverse=True) and want != list(range(100))
    # the next page of that sort, then fewer rows per page (back to the first page, same sort)
    following = tb_job.get_json("distributed?run=job&span=1&offset=100&limit=100&sort=step_us&order=desc")["ranks"]
    frame.click(f"{TABLE} [data-testid=table-next]")
    frame.wait_for_function(f"first => {FIRST_CELL} == String(first)", arg=following[0]["rank"])
    assert _ranks_shown(frame) == [r["rank"] for r in following]
    assert _pager(frame) == ("101–200 of 257", "Page 2 of 3", "257 rows")
    frame.select_option(f"{TABLE} [data-testid=table-page-size]", "50")
    frame.wait_for_function(f"() => document.querySelectorAll('{TABLE} tbody tr[data-testid=row]').length == 50")
    assert _ranks_shown(frame) == want[:50]
    assert _pager(frame) == ("1–50 of 257", "Page 1 of 6", "257 rows")

    # The CSV export writes every rank of the job in the shown sort, not the page's.
    with page.expect_download() as info:
        frame.click(f"{TABLE} [data-testid=csv-download]")
    assert info.value.suggested_filename.endswith("ranks.csv")
    rows = read_csv(Path(info.value.path()).read_text(encoding="utf-8"))
    every = tb_job.get_json("distributed?run=job&span=1&limit=1024&sort=step_us&order=desc")["ranks"]
    assert [int(r["Rank"]) for r in rows] == [r["rank"] for r in every] and len(rows) == RANKS


def test_the_search_finds_ranks_on_every_page(page: Any, tb_job: TensorBoard) -> None:
    """The search box of a paged job asks the server (``q``): the ranks of every page whose worker, host or rank
    holds the text, in the table's sort; the count says of how many ranks; the CSV writes the matches only."""
    expected = tb_job.get_json("distributed?run=job&span=1&q=rank15&sort=step_us&order=desc")
    want = [r["rank"] for r in expected["ranks"]]
    assert sorted(want) == [15, *range(150, 160)] and expected["page"]["total"] == 11  # pages 1 and 2 of 3
    frame = _open(page, tb_job)
    frame.click(f"{TABLE} [data-testid=sort-step_us]")
    frame.wait_for_function(f"() => {FIRST_CELL} != '0'")
    frame.fill(f"{TABLE} [data-testid=search-worker]", "RANK15")
    frame.wait_for_function(f"() => document.querySelectorAll('{TABLE} tbody tr[data-testid=row]').length == 11")
    assert _ranks_shown(frame) == want
    assert _pager(frame) == ("1–11 of 11", "Page 1 of 1", "11 of 257 rows match")
    assert frame.inner_text("[data-testid=dist-ranks]").endswith("257")  # the job's figures: every rank
    with page.expect_download() as info:
        frame.click(f"{TABLE} [data-testid=csv-download]")
    rows = read_csv(Path(info.value.path()).read_text(encoding="utf-8"))
    assert [int(r["Rank"]) for r in rows] == want
    frame.fill(f"{TABLE} [data-testid=search-worker]", "")
    frame.wait_for_function(f"() => document.querySelectorAll('{TABLE} tbody tr[data-testid=row]').length == 100")
    assert _pager(frame)[2] == "257 rows"
