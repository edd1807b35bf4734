"""docs/guide/python-api.md runs as written: every ```python block, in order, in one session, from the repository's
root (the guide's paths are the traces in tests/data/ and samples/), with a parse cache of its own."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO

GUIDE = REPO / "docs" / "guide" / "python-api.md"


def blocks() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```$", GUIDE.read_text(), re.DOTALL | re.MULTILINE)


def test_every_code_block_of_the_python_api_guide_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # the API's default cache: not the user's
    code = blocks()
    assert len(code) == 6  # open, the views, notebook questions, diff, GPU insights, allocator snapshots
    namespace: dict[str, Any] = {}
    for i, block in enumerate(code):
        try:
            exec(compile(block, f"{GUIDE.name} block {i + 1}", "exec"), namespace)
        except Exception as err:  # name the block that failed
            raise AssertionError(f"block {i + 1} of {GUIDE.name} fails: {err!r}\n{block}") from err
    # what the blocks promise, checked on what they left behind
    t, d, g = namespace["t"], namespace["d"], namespace["g"]
    assert repr(t) == ("<Trace resnet50_num_workers_0/worker0 span 1: worker0.1623143089861.pt.trace.json.gz, "
                       "57,506 events>")
    assert (t.spans, t.workers) == (["1", "2"], ["worker0"])
    assert round(t.overview().step_time_us, 1) == 177592.2
    assert d.breakdown.loc["DataLoader", "delta_us"] > 50_000 and "delta_ratio" in d.breakdown
    assert namespace["page"].startswith("<!doctype html>") and "Step time breakdown" in namespace["page"]
    cp = namespace["cp"]
    assert cp["duration_us"].sum() == pytest.approx(cp.attrs["duration_us"], rel=1e-9)
    assert g.critical_path(annotation="backward").attrs["scope"]["label"] == "backward #1"
    assert namespace["r"].attrs["device"]["name"] == "NVIDIA H200" and (namespace["r"]["wasted_us"] >= 0).all()
    oom = namespace["s"].summary()["oom"]
    assert oom["requested_bytes"] == 512 << 20 and oom["reason"] == "live_data"
