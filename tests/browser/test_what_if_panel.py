"""The Overview's what-if panel in the browser: the findings with a replayable fix as toggles; toggling two shows the
prediction of ONE replay of both (the /what_if answer for that pair; tests/unit/test_whatif.py shows that it is not
the sum of their savings), with the measured and predicted breakdown bars; no console errors."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import pytest

from tests.browser.conftest import PLUGIN, SAMPLES, TensorBoard, link_or_copy, open_plugin

pytestmark = pytest.mark.browser

RUN = "cnn_sgd_memcat"


@pytest.fixture(scope="module")
def tb_whatif(tb_factory: Any, tmp_path_factory: pytest.TempPathFactory) -> TensorBoard:
    root = tmp_path_factory.mktemp("logdir_whatif")
    for f in sorted((SAMPLES / RUN).glob("*.pt.trace.json.gz")):
        link_or_copy(f, root / RUN / f.name)
    tb: TensorBoard = tb_factory(root)
    tb.wait_settled(timeout=180)
    return tb


def _shown(frame: Any, changes: str) -> float:
    frame.wait_for_selector(f"[data-testid=what-if-out][data-state=ready][data-changes='{changes}']")
    return float(frame.get_attribute("[data-testid=what-if-predicted]", "data-value"))


def test_toggling_two_fixes_shows_their_combined_replay(page: Any, tb_whatif: TensorBoard) -> None:
    worker = next((SAMPLES / RUN).glob("*.pt.trace.json.gz")).name.split(".")[0]
    q = {"run": RUN, "worker": worker, "span": "1"}
    data = tb_whatif.get_json("overview?" + urlencode(q))
    replayable = [r for r in data["recommendations"] if r["what_if"]]
    assert len(replayable) >= 2
    # the verdict's fix (a root cause comes before the symptom class it produces: not always the largest saving)
    # and another; the panel lists them by saving and sends the selected ones in that order
    first = data["verdict"]["id"]
    second = next(r["id"] for r in replayable if r["id"] != first)
    ids = [r["id"] for r in replayable]
    pair = ",".join(i for i in ids if i in (first, second))
    verdict = next(r for r in replayable if r["id"] == first)

    page.set_viewport_size({"width": 1600, "height": 1000})
    p = f"p.{PLUGIN}"
    frame = open_plugin(page, tb_whatif, f"&{p}.run={RUN}&{p}.worker={worker}&{p}.span=1&{p}.view=Overview")
    frame.wait_for_selector("[data-testid=card-what-if]")
    toggles = [t.get_attribute("data-id") for t in frame.query_selector_all("[data-testid=what-if-toggle]")]
    assert toggles == [r["id"] for r in replayable]
    # it opens on the verdict's fix alone: the finding's own replayed prediction
    assert _shown(frame, first) == pytest.approx(verdict["what_if"]["predicted_step_us"])

    frame.check(f"[data-testid=what-if-toggle][data-id={second}]")
    both = tb_whatif.get_json("what_if?" + urlencode({**q, "changes": pair}))
    shown = _shown(frame, pair)
    assert shown == pytest.approx(both["predicted_step_us"])
    assert both["ids"] == pair.split(",") and [c["id"] for c in both["changes"]] == pair.split(",")
    assert float(frame.get_attribute("[data-testid=what-if-baseline]", "data-value")) == pytest.approx(
        both["baseline_step_us"])
    bars = {b.get_attribute("data-which"): b for b in frame.query_selector_all("[data-testid=what-if-bar]")}
    assert float(bars["predicted"].get_attribute("data-total")) == pytest.approx(both["predicted_step_us"])
    segments = bars["predicted"].query_selector_all("[data-testid=what-if-segment]")
    assert sum(float(s.get_attribute("data-us")) for s in segments) == pytest.approx(both["predicted_step_us"],
                                                                                     rel=1e-6)
    assert {s.get_attribute("data-category") for s in segments} == {
        c for c, us in both["predicted_breakdown_us"].items() if us > 0}

    frame.uncheck(f"[data-testid=what-if-toggle][data-id={first}]")
    only = tb_whatif.get_json("what_if?" + urlencode({**q, "changes": second}))
    assert _shown(frame, second) == pytest.approx(only["predicted_step_us"])
