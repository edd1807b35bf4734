"""Progressive answers in the real page: while the server computes an analysis in the background (409
"computing"), the shell's line above the Operator page and the Trace view's indicator show its progress, never an
error card, and the view follows as soon as it is computed.

The TensorBoard under test loads a ``sitecustomize`` (first on its PYTHONPATH) that makes every trace "big"
(``answers.PROGRESSIVE_EVENTS = 0``), holds the operator table and the timeline index until the test has seen the
page say it is computing them (it then releases the hold: a file the held computation waits for), and leaves the
index and the first views out of the precomputation at ready and out of the parse cache (the loader
process stores them beside the parse; here it does not, as for an older cache or a preprocessed rank), so the page
is the first to ask for them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser.conftest import (
    PLUGIN,
    ConsoleLog,
    TensorBoard,
    link_or_copy,
    open_plugin,
    start_tensorboard,
    stop_tensorboard,
)
from tests.browser.test_trace import wait_drawn
from tests.conftest import REPO

pytestmark = pytest.mark.browser

RUN, WORKER = "cpu_only", "vm_9609"
# a hold the test never released ends by itself after this long (a failed test must not leave the server held)
HOLD_MAX_S = 60.0
TABLE, INDEX = "operator_table", "timeline_index"  # the holds' names: the files that release them

SITECUSTOMIZE = '''
import pathlib
import time

import tb_plugin.timeline.index as index
import tb_plugin.timeline.stored as stored
import tb_plugin.workspace as workspace
from tb_plugin.api import answers, routes, warm

answers.PROGRESSIVE_EVENTS = 0
warm.WarmViews.save = lambda self, *args, **kwargs: None  # no first views stored with the parse: computed on demand
workspace._build_index = lambda model: None
stored.StoredIndex.save = lambda self, model, directory: None
_table, _nest = routes.operators.operator_table, index.nest


def _hold(name):
    """Until the test creates the release file ``name`` (it has seen the page say this is being computed)."""
    release, end = pathlib.Path(RELEASE) / name, time.monotonic() + HOLD_MAX_S
    while not release.exists() and time.monotonic() < end:
        time.sleep(0.02)


def _slow_table(model, group_by="name"):
    _hold(TABLE)
    return _table(model, group_by)


def _slow_nest(*args):
    _hold(INDEX)
    return _nest(*args)


routes.operators.operator_table = _slow_table
index.nest = _slow_nest
'''


@pytest.fixture(scope="module")
def tb_slow(tmp_path_factory: pytest.TempPathFactory, frontend_built: Path) -> Iterator[TensorBoard]:
    root = tmp_path_factory.mktemp("progressive")
    for f in sorted((REPO / "samples" / RUN).glob("*.pt.trace.json.gz")):
        link_or_copy(f, root / "logdir" / RUN / f.name)
    (root / "site").mkdir()
    (root / "release").mkdir()
    holds = f"RELEASE, HOLD_MAX_S = {str(root / 'release')!r}, {HOLD_MAX_S!r}\nTABLE, INDEX = {TABLE!r}, {INDEX!r}\n"
    (root / "site" / "sitecustomize.py").write_text(holds + SITECUSTOMIZE)
    before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join([str(root / "site"), *([before] if before else [])])
    try:
        tb = start_tensorboard(root / "logdir", root)
    finally:
        if before is None:
            os.environ.pop("PYTHONPATH")
        else:
            os.environ["PYTHONPATH"] = before
    tb.extra["release"] = root / "release"
    try:
        tb.wait_settled()
        yield tb
    finally:
        stop_tensorboard(tb)


def open_view(page: Any, tb: TensorBoard, view: str) -> Any:
    p = f"p.{PLUGIN}"
    return open_plugin(page, tb, f"&{p}.run={RUN}&{p}.worker={WORKER}&{p}.span=1&{p}.view={view}")


# the browser logs every 409 it receives as a failed resource; the page itself logs nothing
ASKED_AGAIN = "the server responded with a status of 409"


def test_the_operator_page_shows_progress_then_the_table(page: Any, console: ConsoleLog, tb_slow: TensorBoard
                                                         ) -> None:
    console.allowed.append(ASKED_AGAIN)
    frame = open_view(page, tb_slow, "Operator")
    line = frame.wait_for_selector("[data-testid=computing] div:has-text('Computing operators…')", timeout=15_000)
    assert re.fullmatch(r"Computing operators… \d{1,2} %", line.inner_text().strip())
    (tb_slow.extra["release"] / TABLE).touch()  # seen while computing: the table may be computed now
    frame.wait_for_selector("[data-testid=operator-table] tbody tr[data-testid=row]", timeout=30_000)
    assert frame.query_selector("[data-testid=error-card]") is None
    frame.wait_for_selector("[data-testid=computing]", state="hidden")  # all answered: the line goes
    rows = tb_slow.get_json(f"operators?run={RUN}&worker={WORKER}&span=1&group_by=name")["rows"]  # the page's answer
    first = frame.inner_text("[data-testid=operator-table] tbody tr[data-testid=row] >> nth=0")
    assert rows[0]["name"] in first


def test_the_trace_view_shows_the_index_progress_then_draws(page: Any, console: ConsoleLog, tb_slow: TensorBoard
                                                            ) -> None:
    console.allowed.append(ASKED_AGAIN)
    frame = open_view(page, tb_slow, "Trace")
    text = frame.wait_for_selector("[data-testid=trace-loading-text]:has-text('Computing the timeline index…')",
                                   timeout=15_000)
    assert re.fullmatch(r"Computing the timeline index… \d{1,2} %", text.inner_text().strip())
    (tb_slow.extra["release"] / INDEX).touch()  # seen while computing: the index may be built now
    wait_drawn(frame)
    assert frame.query_selector("[data-testid=error-card]") is None
    assert frame.inner_text("[data-testid=trace-loading-text]") == "Loading…"
