"""The heap given back while a big stored-views part computes (``model.heap.trimming``, ``api/warm.py``
``trim_period``): trims run on a thread while the body runs and stop with it; only a part expected to add at least
``TRIM_FROM_BYTES`` trims; and a part computed while trimming stores the same bytes as one computed without."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tb_plugin.api import warm
from tb_plugin.model import heap
from tests.conftest import REAL_TRACES, REPO
from tests.unit.test_warm_inline import _stored


def test_trims_run_while_the_body_runs_and_stop_with_it(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[float] = []
    monkeypatch.setattr(heap, "trim_heap", lambda: calls.append(time.monotonic()))
    before = threading.active_count()
    with heap.trimming(0.01):
        assert any(t.name == "trim-heap" for t in threading.enumerate())
        time.sleep(0.3)
    ended = len(calls)
    assert 2 <= ended <= 31  # every 10 ms at most, many of them late on a busy machine
    time.sleep(0.05)
    assert len(calls) == ended and threading.active_count() == before
    with heap.trimming(None):
        assert threading.active_count() == before  # never: no thread
        time.sleep(0.03)
    assert len(calls) == ended


def test_a_part_trims_beside_others_or_from_gigabytes_alone() -> None:
    # beside other parts, from 256 MB expected: the 2 GB trace's (5.3 M events) and a ~1 M-event trace's Overview;
    # not the 164 MB trace's parts (430,000 events: 36-90 MB) nor the GPU insights of 2 M events (170 MB)
    assert warm.trim_period(["overview"], 5_300_000) == warm.TRIM_PERIOD_S == 0.05
    assert warm.trim_period(["overview"], 1_300_000) == 0.05
    assert all(warm.trim_period([part], 430_000) is None for part in warm.PARTS)
    assert warm.trim_period(["gpu"], 2_000_000) is None
    assert warm.trim_period(["tables", "gpu"], 1_100_000) == 0.05  # a process computing two parts adds both
    # alone, from 2 GiB expected: the 10 GB trace's parts (33 M events), not the 2 GB trace's
    assert all(warm.trim_period([part], 33_000_000, alone=True) == 0.05 for part in warm.PARTS)
    assert all(warm.trim_period([part], 5_300_000, alone=True) is None for part in warm.PARTS)
    assert warm.trim_period(["overview"], 10_300_000, alone=True) == 0.05
    assert warm.trim_period(["overview"], 10_000_000, alone=True) is None


# In a process of its own (forking is tried only with one thread running): the Overview part of a real trace in a
# forked process trimming every millisecond (the bound lowered to 0 bytes), and the same part computed in this
# process without trims; each trim in the child is counted in a file.
SCRIPT = """
import os, sys
from pathlib import Path
from tb_plugin.api import warm
from tb_plugin.loader import load_trace
from tb_plugin.model import heap
from tb_plugin.model.tables import save

source, root = Path(sys.argv[1]), Path(sys.argv[2])
counts = root / "trims"
real_trim = heap.trim_heap

def counted() -> None:
    real_trim()
    with open(counts, "a") as fh:
        fh.write(f"{os.getpid()}\\n")

heap.trim_heap = counted
period = 0.001
model = load_trace(str(source))
ctx = warm.context(None, warm.NO_OVERRIDE)
for name in ("trimmed", "plain"):
    save(model, root / name)
pid = warm._fork_parts(model, ctx, root / "trimmed", ["overview"], period)
assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
warm.compute_part(model, ctx, "overview", root / "plain")
print(pid)
"""


def test_a_part_computed_while_trimming_stores_the_same_bytes(tmp_path: Path) -> None:
    source = sorted((REAL_TRACES / "h200" / "transformer_bf16").glob("*.pt.trace.json.gz"))[0]
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(source), str(tmp_path)], cwd=REPO, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    child = done.stdout.strip().splitlines()[-1]
    trims = (tmp_path / "trims").read_text().split()
    assert trims and set(trims) == {child}  # the part's process trimmed, and no other
    trimmed, plain = _stored(tmp_path / "trimmed"), _stored(tmp_path / "plain")
    assert "warm.overview.json" in trimmed
    assert trimmed == plain
    assert json.loads((tmp_path / "trimmed" / "warm.overview.json").read_text())["answers"]
