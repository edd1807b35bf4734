"""The page's Capture dialog against a real job: 4 CPU ranks (gloo, DDP) train with ``tb_plugin.capture.enable``
while the real ``tensorboard --profiler_capture`` serves their (still empty) logdir. The dialog offers the job's
folder, a click captures 3 steps on every rank, the progress reads rank by rank, and the new traces open in the
page without a restart; a second capture adds a second span. Without ``--profiler_capture`` the dialog says
capture is off and offers no button to press."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.browser.conftest import PLUGIN, TensorBoard, open_plugin, stop_tensorboard, top_hash
from tests.capture_helpers import Job, check_traces, start_job, stop_job, wait_listening

WRITTEN = re.compile(r"4 of 4 ranks written: steps ([\d,]+)–([\d,]+)")


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Job]:
    """The job, started; a test that needs it listening waits for that once its own TensorBoard and page are up,
    so that the job's start (torch imported by 5 processes, seconds of CPU) overlaps theirs."""
    running = start_job(tmp_path_factory.mktemp("capture_page"), 4)
    yield running
    stop_job(running)


def capture_from_the_page(page: Any, frame: Any) -> tuple[str, list[str]]:
    """Open the dialog, capture 3 steps of the job, follow the progress; (final summary, summaries seen)."""
    frame.click('[data-testid="capture-open"]')
    frame.wait_for_function(
        """() => [...document.querySelectorAll('[data-testid=capture-run] option')]
                   .some(o => o.value === 'job' && o.textContent === 'job · 4 ranks listening')""")
    assert frame.input_value('[data-testid="capture-run"]') == "job"
    frame.wait_for_selector('[data-testid="capture-job"]:has-text("Job listening: 4 ranks, step")')
    frame.fill('[data-testid="capture-steps"]', "3")
    # the summaries seen, and the rank rows shown with the final one (read as it is drawn: the dialog closes as soon
    # as the rescan lists the new span, which may be at once)
    frame.evaluate("""() => {
        window.__summaries = [];
        window.__writtenRows = null;
        new MutationObserver(() => {
            const s = document.querySelector('[data-testid=capture-summary]');
            if (s && window.__summaries[window.__summaries.length - 1] !== s.textContent) window.__summaries.push(s.textContent);
            const rows = [...document.querySelectorAll('[data-testid=capture-rank]')]
                .map(tr => [...tr.querySelectorAll('td')].map(td => td.textContent));
            if (s && s.textContent.startsWith('4 of 4 ranks written') && rows.length) window.__writtenRows = rows;
        }).observe(document.querySelector('[data-testid=capture-progress]'), {subtree: true, childList: true, characterData: true});
    }""")
    frame.click('[data-testid="capture-start"]')
    frame.wait_for_function("() => (window.__summaries || []).some(s => s.startsWith('4 of 4 ranks written'))",
                            timeout=120_000)
    seen: list[str] = frame.evaluate("() => window.__summaries")
    rows = frame.evaluate("() => window.__writtenRows")
    assert [r[:2] for r in rows] == [[f"rank{i}", "written"] for i in range(4)]
    assert all(r[3].startswith(f"rank{i}.") and r[3].endswith(".pt.trace.json.gz · cuda not available on this host")
               for i, r in enumerate(rows)), rows
    return seen[-1], seen


def test_the_capture_dialog_captures_every_rank_and_opens_the_traces(
        tb_factory: Callable[..., TensorBoard], job: Job, page: Any) -> None:
    tb = tb_factory(job.logdir, "--profiler_capture", "--profiler_rescan_interval", "0.5")
    try:
        frame = open_plugin(page, tb)
        wait_listening(job, 4)
        capture_twice(page, frame, job)
    finally:
        stop_tensorboard(tb)  # now, not at the session's end: its rescans would go on while other files run


def capture_twice(page: Any, frame: Any, job: Job) -> None:
    """Two captures from the dialog: each writes a span of 4 ranks that the page lists and opens on rank 0."""
    frame.wait_for_selector('[data-testid="empty-state"]')  # no trace yet: the page says how to capture one
    assert "pytorch-tb-profiler capture ./log/my_run --steps 3" in frame.inner_text('[data-testid="empty-capture-hint"]')
    spans = []
    for round_ in (1, 2):
        summary, seen = capture_from_the_page(page, frame)
        m = WRITTEN.fullmatch(summary)
        assert m, seen
        # the progress went through the ranks' states before every rank wrote (pending/waiting/capturing lines)
        assert seen[0].startswith("waiting up to 60 s for the job") or "of 4 ranks" in seen[0], seen
        # the dialog closes and the page opens the new span on rank 0, once the rescan listed it
        frame.wait_for_selector('[data-testid="capture-dialog"]', state="detached", timeout=60_000)
        # the page moves to the new span after the dialog closed (its next ./runs): until then the URL and the
        # pickers still show the span opened before
        page.wait_for_function(f"""seen => {{
            const m = location.hash.match(/p\\.{PLUGIN}\\.span=([^&]+)/);
            return m !== null && !seen.includes(m[1]);
        }}""", arg=spans)
        frame.wait_for_function("() => document.querySelector('[data-testid=worker-select]').value === 'rank0'")
        state = {k.rsplit(".", 1)[-1]: v for k, v in top_hash(page).items() if k.startswith(f"p.{PLUGIN}.")}
        assert (state["run"], state["worker"], state["view"]) == ("job", "rank0", "Overview")
        spans.append(state["span"])
        files = sorted(p.name for p in job.folder.glob(f"rank*.{state['span']}.pt.trace.json.gz"))
        assert files == [f"rank{i}.{state['span']}.pt.trace.json.gz" for i in range(4)]
        steps = check_traces(job.folder, files, 3)
        assert steps == list(range(int(m.group(1).replace(",", "")), int(m.group(2).replace(",", "")) + 1))
        workers = frame.evaluate("() => [...document.querySelectorAll('[data-testid=worker-select] option')].map(o => o.value)")
        assert workers == ["rank0", "rank1", "rank2", "rank3"]
        frame.wait_for_selector('[data-testid="span-select"]')
        assert len(frame.evaluate("() => [...document.querySelectorAll('[data-testid=span-select] option')]")) == round_
        frame.wait_for_selector('.ptp-pane[data-view="Overview"] [data-testid="card-configuration"]', timeout=60_000)
        assert not frame.query_selector('[data-testid="view-error"]')
    assert len(set(spans)) == 2


def test_the_dialog_says_when_capture_is_off(tb_factory: Callable[..., TensorBoard], job: Job, page: Any) -> None:
    tb = tb_factory(job.logdir)
    try:
        requests_before = sorted(job.folder.glob(".capture/request-*.json"))
        frame = open_plugin(page, tb)
        frame.click('[data-testid="capture-open"]')
        off = frame.wait_for_selector('[data-testid="capture-off"]')
        assert "start it with --profiler_capture" in off.inner_text()
        assert frame.is_disabled('[data-testid="capture-start"]')
        frame.click('[data-testid="capture-close"]')
        frame.wait_for_selector('[data-testid="capture-dialog"]', state="detached")
        assert sorted(job.folder.glob(".capture/request-*.json")) == requests_before  # this server asked nothing
    finally:
        stop_tensorboard(tb)
