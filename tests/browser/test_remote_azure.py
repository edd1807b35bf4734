"""A remote logdir in the real ``tensorboard`` CLI and Chromium: runs listed from Azurite, Overview rendered."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.browser.conftest import PLUGIN, open_plugin, start_tensorboard, stop_tensorboard

# The emulator fixtures live with the remote tests; imported here so this browser test shares the browser
# suite's single playwright session (two sync playwright sessions in one process cannot coexist).
from tests.remote.conftest import azure_env, azurite, clean_env, sample_runs  # noqa: F401


def test_runs_from_azure_blob_appear_and_overview_renders(page: Any, azure_env: Any, frontend_built: Path,  # noqa: F811
                                                          tmp_path: Path) -> None:
    # The CLI gets the connection string from its environment, as a user's shell would give it.
    tb = start_tensorboard("az://profiles/shared", tmp_path, "--profiler_rescan_interval", "2")  # type: ignore[arg-type]
    try:
        body = tb.wait_settled(timeout=120)
        assert body["errors"] == [] and {r["name"] for r in body["runs"]} == set(sample_runs())
        assert all(s["state"] == "ready" for r in body["runs"] for w in r["workers"] for s in w["spans"])
        p = f"p.{PLUGIN}"
        worker = next(r for r in body["runs"] if r["name"] == "ddp_resnet")["workers"][0]["name"]
        frame = open_plugin(page, tb, f"&{p}.run=ddp_resnet&{p}.worker={worker}&{p}.span=1&{p}.view=Overview")
        frame.wait_for_function(
            "n => document.querySelectorAll('[data-testid=run-select] option').length === n", arg=len(sample_runs()))
        runs = frame.eval_on_selector_all("[data-testid=run-select] option", "els => els.map(e => e.value)")
        assert sorted(runs) == sorted(sample_runs())
        frame.wait_for_selector("[data-testid=tab-Overview][aria-selected=true]")
        step = frame.wait_for_selector("[data-testid=overview] [data-testid=avg-step-time]", timeout=30_000)
        overview = tb.get_json(f"overview?run=ddp_resnet&worker={worker}&span=1")
        assert float(step.get_attribute("data-value")) == overview["average"]["duration_us"]
    finally:
        stop_tensorboard(tb)
