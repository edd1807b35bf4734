"""Browser Back and Forward inside the plugin, at 1600×1000 and 1280×800: tabs, pickers and links between views push
history entries, so Back walks back through the pages (and Forward again) instead of leaving the plugin; an entry a
link opened keeps what the link asked for (the Kernel page filtered by the operator) when Forward returns to it."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.conftest import PLUGIN, PLUGIN_IFRAME, TensorBoard, table_rows, top_hash
from tests.browser.test_click_through import SIZES
from tests.browser.test_views import TRANSFORMER, open_view, row_named, set_search, wait_charts

pytestmark = pytest.mark.browser
P = f"p.{PLUGIN}"


@pytest.fixture(params=SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def sized(page: Any, request: pytest.FixtureRequest) -> Any:
    page.set_viewport_size({"width": request.param[0], "height": request.param[1]})
    return page


def shown_view(page: Any) -> str:
    """The tab the plugin shows, from the iframe TensorBoard holds now (it is the same one throughout)."""
    frame = page.wait_for_selector(PLUGIN_IFRAME, state="attached").content_frame()
    frame.wait_for_selector("[role=tab][aria-selected=true]")
    view: str = frame.eval_on_selector("[role=tab][aria-selected=true]", "el => el.dataset.view")
    return view


def wait_view(page: Any, view: str) -> Any:
    frame = page.wait_for_selector(PLUGIN_IFRAME, state="attached").content_frame()
    frame.wait_for_selector(f"[data-testid=tab-{view}][aria-selected=true]")
    return frame


def kernel_filter(frame: Any) -> str:
    """The Kernel page's operator filter, once the page shows its by-operator table (the group-by says name_op and
    the filter's box is there: after Forward the group-by can be set a moment before the box is drawn)."""
    frame.wait_for_function("() => document.querySelector('[data-testid=kernel-group-by]')?.value === 'name_op'"
                            " && document.querySelector('[data-testid=search-operator]') !== null")
    value: str = frame.eval_on_selector("[data-testid=search-operator]", "el => el.value")
    return value


def test_back_and_forward_walk_overview_operator_kernel(sized: Any, tb_samples: TensorBoard) -> None:
    frame = open_view(sized, tb_samples, TRANSFORMER, "Overview")
    wait_charts(frame, "step-chart")
    entries = sized.evaluate("() => history.length")
    frame.click("[data-testid=tab-Operator]")
    frame = wait_view(sized, "Operator")
    assert top_hash(sized)[f"{P}.view"] == "Operator"
    set_search(frame, "search-name", "aten::mm")
    row_named(frame, "operator-table", "aten::mm").locator("[data-testid=operator-kernels]").click()
    frame = wait_view(sized, "Kernel")
    assert kernel_filter(frame) == '"aten::mm"'
    assert {r["operator"] for r in table_rows(frame, "kernel-table")} == {"aten::mm"}
    # what was asked for leads, above the fold: the filtered table's rows, not the pie of every kernel
    height = sized.viewport_size["height"]
    row = frame.locator("[data-testid=kernel-table] tr[data-testid=row]").first.bounding_box()
    assert row is not None and row["y"] + row["height"] <= height, (row, height)
    pies = frame.locator("[data-testid=card-kernel-pies]").bounding_box()
    assert pies is None or pies["y"] > row["y"]
    assert sized.evaluate("() => history.length") == entries + 2  # one entry per page, none for the filter

    sized.go_back()
    frame = wait_view(sized, "Operator")
    assert top_hash(sized)[f"{P}.view"] == "Operator" and f"{P}.op" not in top_hash(sized)
    sized.go_back()
    frame = wait_view(sized, "Overview")
    wait_charts(frame, "step-chart")
    assert top_hash(sized)[f"{P}.view"] == "Overview" and top_hash(sized)["__tab__"] == PLUGIN
    assert (top_hash(sized)[f"{P}.run"], top_hash(sized)[f"{P}.worker"]) == TRANSFORMER

    sized.go_forward()
    wait_view(sized, "Operator")
    sized.go_forward()
    frame = wait_view(sized, "Kernel")
    assert kernel_filter(frame) == '"aten::mm"'  # the entry the link opened: filtered again


def test_back_undoes_a_run_change(sized: Any, tb_samples: TensorBoard) -> None:
    frame = open_view(sized, tb_samples, TRANSFORMER, "Operator")
    frame.select_option("[data-testid=run-select]", "resnet_slow_dataloader")
    frame.wait_for_function("() => document.querySelector('[data-testid=run-select]').value === 'resnet_slow_dataloader'")
    assert top_hash(sized)[f"{P}.run"] == "resnet_slow_dataloader"
    sized.go_back()
    frame = wait_view(sized, "Operator")
    frame.wait_for_function("r => document.querySelector('[data-testid=run-select]').value === r", arg=TRANSFORMER[0])
    assert top_hash(sized)[f"{P}.run"] == TRANSFORMER[0] and shown_view(sized) == "Operator"


def test_a_diff_link_without_exp_span_says_what_it_compares(page: Any, tb_samples: TensorBoard) -> None:
    """exp_run alone (the resnet run's own second span is the only other one of its worker): the page compares
    with span 2 and says so; a run that is not there is said, not silently replaced."""
    from tests.browser.conftest import open_plugin
    from tests.browser.test_views import RESNET

    base = f"&{P}.run={RESNET[0]}&{P}.worker={RESNET[1]}&{P}.span=1&{P}.view=Diff"
    frame = open_plugin(page, tb_samples, base + f"&{P}.exp_run={RESNET[0]}")
    note = frame.wait_for_selector("[data-testid=diff-link-note]").inner_text()
    assert note == (f"The link does not name the experiment's worker or span: comparing with {RESNET[0]} · "
                    f"{RESNET[1]} · span 2, span 2 of the 2 this worker has.")
    assert frame.eval_on_selector("[data-testid=exp-span]", "el => el.value") == "2"
    assert top_hash(page)[f"{P}.exp_span"] == "2"  # the URL now says exactly what is compared
    frame = open_plugin(page, tb_samples, base + f"&{P}.exp_run=no_such_run&{P}.exp_span=1")
    note = frame.wait_for_selector("[data-testid=diff-link-note]").inner_text()
    assert note.startswith('The link\'s experiment run "no_such_run" is not in the log directory: comparing with ')


def test_back_and_forward_walk_the_diff_drill_down(page: Any, tb_samples: TensorBoard) -> None:
    from tests.browser.conftest import open_plugin
    from tests.browser.test_views import RESNET

    frame = open_plugin(page, tb_samples, f"&{P}.run={RESNET[0]}&{P}.worker={RESNET[1]}&{P}.span=1&{P}.view=Diff"
                                          f"&{P}.exp_run={RESNET[0]}&{P}.exp_worker={RESNET[1]}&{P}.exp_span=2")
    settled = "p => { const d = document.querySelector('[data-testid=drill]'); return d && d.dataset.loading === 'false' && d.dataset.path === p; }"
    frame.wait_for_function(settled, arg="0")
    link = frame.locator("[data-testid=drill-into]").first
    target = link.get_attribute("data-path")
    link.click()
    frame.wait_for_function(settled, arg=target)
    assert top_hash(page)[f"{P}.drill"] == target
    page.go_back()
    frame.wait_for_function(settled, arg="0")
    assert f"{P}.drill" not in top_hash(page) and shown_view(page) == "Diff"
    page.go_forward()
    frame.wait_for_function(settled, arg=target)
    crumbs = frame.locator("[data-testid=crumb]").all_inner_texts()
    assert len(crumbs) == 2 and crumbs[0] == "All steps"
