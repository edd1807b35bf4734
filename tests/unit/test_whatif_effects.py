"""The replay's second-order effects (issue 25's calibration showed each): launch calls blocked on a full launch queue
(``whatif/queue.py``), kernels slowed by the collectives beside them (``diagnosis/contention.py``), dropped device
work that holds nothing, and the host's slower work after a streaming phase or a blocking wait
(``diagnosis/cold_host.py``). Each on a tiny synthetic trace whose answer is computed by hand in the test's
docstring."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tb_plugin.analysis.diagnosis.cold_host import SLICE_US, SLOWER, WAKE_UP, recovered, wake_up
from tb_plugin.analysis.diagnosis.contention import uncontended
from tb_plugin.analysis.whatif.changes import DropDevice, ScaleDevice
from tb_plugin.analysis.whatif.graph import graph
from tb_plugin.analysis.whatif.replay import replay
from tb_plugin.model import intervals as iv
from tests.unit.test_views_synthetic import PROPS, kernel, launch, model_of, op, step
from tests.unit.test_whatif import rows_named

NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"


def _queue_full() -> list[dict[str, Any]]:
    """One step [0, 5100): 600 launches at t = i (0.5 µs each) of 10 µs kernels K that run back to back from 5 µs
    (K_i: 10 i + 5 → 10 i + 15); at t = 600, 540 launches are pending (60 started). The 601st launch call blocks
    on the full queue from 600 to 5000 (K_498 ended at 4995: its end freed the slot); its kernel K_600 runs
    6005 → 6015 behind the others. The step completes at 6015."""
    events: list[dict[str, Any]] = [step(1, 0, 5100)]
    for i in range(601):
        t = 600.0 if i == 600 else float(i)
        events += [launch(t, 4400.0 if i == 600 else 0.5, corr=i + 1), kernel("K", 10 * i + 5, 10, corr=i + 1)]
    return events


def test_a_launch_blocked_on_a_full_queue_waits_for_the_device(tmp_path: Path) -> None:
    """The blocked call is a wait whose target is K_498 (lag 5 µs). Twice as fast kernels (5 µs): K_498 ends at
    5 + 5 · 499 = 2500, the call returns at 2505 instead of 5000 and K_600 runs right after K_599 (3005 → 3010):
    the step completes at 3010; kept as host work, the call would hold K_600's launch to 5000."""
    model = model_of(tmp_path, _queue_full(), deviceProperties=PROPS)
    g = graph(model)
    blocked = int(np.flatnonzero(g.waits.wait > 1000)[0])
    assert g.waits.size == 1 and g.waits.start[blocked] == pytest.approx(600)
    target = int(g.waits.targets[blocked].max())
    assert g.device.end[target] == pytest.approx(4995) and g.waits.lag[blocked] == pytest.approx(5)
    assert replay(model).step_us == pytest.approx(6015)
    fast = replay(model, [ScaleDevice(id="k", label="", rows=rows_named(model, "K"), factor=2.0)])
    assert fast.step_us == pytest.approx(3010)


def test_a_short_queue_is_no_wait(tmp_path: Path) -> None:
    """The same long call with 100 launches before it (at most 90 pending, below 512): host work, not a wait."""
    events = [e for e in _queue_full() if e["name"] == "ProfilerStep#1" or
              e["args"].get("correlation", 0) <= 100 or e["args"].get("correlation") == 601]
    model = model_of(tmp_path, events, deviceProperties=PROPS)
    assert graph(model).waits.size == 0


def _beside_a_collective() -> list[dict[str, Any]]:
    """Stream 7: G alone four times (100 µs each, at 0, 200, 400, 600), then twice beside an all-reduce on
    stream 8 (1000 → 1150 and 1200 → 1350: 150 µs each; the all-reduce runs 990 → 1400), then once beside another
    all-reduce (2000 → 2150, all-reduce 1990 → 2200). Launches on the host, one step [0, 2500)."""
    events: list[dict[str, Any]] = [step(1, 0, 2500)]
    starts = [(0, 100), (200, 100), (400, 100), (600, 100), (1000, 150), (1200, 150), (2000, 150)]
    for i, (ts, dur) in enumerate(starts):
        events += [launch(ts - 5 if ts else 0, 1, corr=i + 1), kernel("G", ts, dur, corr=i + 1)]
    events += [launch(985, 1, corr=50), kernel(NCCL, 990, 410, corr=50, stream=8),
               launch(1985, 1, corr=51), kernel(NCCL, 1990, 210, corr=51, stream=8)]
    return events


def test_kernels_beside_a_dropped_collective_run_at_their_speed_alone(tmp_path: Path) -> None:
    """Dropping the first all-reduce: the two G beside it (150 µs) run at G's median alone, 100 µs: factor 1.5
    each. The G beside the second, kept all-reduce stays as measured; with fewer than 4 lone instances nothing is
    priced."""
    model = model_of(tmp_path, _beside_a_collective(), deviceProperties=PROPS)
    nccl = rows_named(model, NCCL)
    rows, factor = uncontended(model, nccl[:1])
    g_rows = rows_named(model, "G")
    assert sorted(rows.tolist()) == sorted(g_rows[4:6].tolist())
    assert factor.tolist() == pytest.approx([1.5, 1.5])
    few = model_of(tmp_path / "few", [e for e in _beside_a_collective()
                                      if e["args"].get("correlation") not in (1, 2)], deviceProperties=PROPS)
    assert len(uncontended(few, rows_named(few, NCCL)[:1])[0]) == 0


def test_dropped_device_work_neither_holds_its_stream_nor_releases_another(tmp_path: Path) -> None:
    """Stream 8: X (launched at 10, started late at 1500: held by nothing the trace shows, no work ended within
    1 ms before it, so its start is pinned to its launch) and W queued behind it (launched at 12, ran 1520 → 1530);
    stream 7: Y started 10 µs after W ended (1540 → 1600: a cross-stream wait on W). Dropping X (and its 1 µs launch call: later launches move 1 µs earlier):
    W no longer waits for X's pinned start: launched at 11, it starts after the launch latency, 5 µs (the first
    kernel Z, launched at 0, started at 5), 16 → 26; Y follows W by its measured 10 µs, 36 → 96. The step completes
    at its host end, 1999."""
    events = [step(1, 0, 2000), launch(0, 1, corr=1), kernel("Z", 5, 5, corr=1), launch(10, 1, corr=2),
              kernel("X", 1500, 20, corr=2, stream=8), launch(12, 1, corr=4),
              kernel("W", 1520, 10, corr=4, stream=8), launch(25, 1, corr=3), kernel("Y", 1540, 60, corr=3)]
    model = model_of(tmp_path, events, deviceProperties=PROPS)
    d = graph(model).device
    at = {name: int(np.flatnonzero(d.row == rows_named(model, name)[0])[0]) for name in ("W", "Y")}
    assert d.dep[at["Y"]] == at["W"]
    r = replay(model, [DropDevice(id="x", label="", rows=rows_named(model, "X"))])
    assert (r.device_start[at["W"]], r.device_end[at["W"]]) == pytest.approx((16, 26))
    assert (r.device_start[at["Y"]], r.device_end[at["Y"]]) == pytest.approx((36, 96))
    assert r.step_us == pytest.approx(1999)


def test_the_host_work_after_a_streaming_phase_gets_its_speed_back(tmp_path: Path) -> None:
    """A step [0, 2000): aten::normal_ (CPU creation) [0, 1000), then 1000 µs of host work with no wait. With
    32 MB a step, 1 − 1/1.29 of each 100 µs slice after the phase vanishes: 10 slices × 22.48 µs = 224.8 µs; with
    1 MB a step, nothing."""
    events = [step(1, 0, 2000), op("aten::normal_", 0, 1000), op("aten::add", 1000, 1000)]
    model = model_of(tmp_path, events, deviceProperties=PROPS)
    phase = rows_named(model, "aten::normal_")
    gone = recovered(model, phase, 32 << 20, "cpu_creation")
    share = 1 - 1 / SLOWER["cpu_creation"]
    assert iv.total(gone) == pytest.approx(1000 * share)
    assert len(gone[0]) == 1000 / SLICE_US and gone[1].tolist() == pytest.approx([1100 + 100 * k for k in range(10)])
    assert iv.total(recovered(model, phase, 1 << 20, "cpu_creation")) == 0


def test_the_host_work_after_a_blocking_wait_gets_its_wake_up_back(tmp_path: Path) -> None:
    """Three steps, each a blocking ``aten::to`` from its start, then ``aten::add`` to its end:
    - [0, 30000): a 20 ms wait → 1126 µs lost, over the 4000 µs of work after it (20000 → 24000): 28.15 % of each of
      its 40 slices of 100 µs, the tail of each (the first from 20071.85);
    - [30000, 40000): a 5 ms wait (30000 → 35000) → 117 µs over 35000 → 39000: 2.925 µs of each slice;
    - [40000, 40700): a 0.5 ms wait → nothing (below the table's first point, 1 ms)."""
    events = [step(1, 0, 30_000), op("aten::to", 0, 20_000), op("aten::add", 20_000, 10_000),
              step(2, 30_000, 10_000), op("aten::to", 30_000, 5_000), op("aten::add", 35_000, 5_000),
              step(3, 40_000, 700), op("aten::to", 40_000, 500), op("aten::add", 40_500, 200)]
    model = model_of(tmp_path, events, deviceProperties=PROPS)
    gone = wake_up(model, rows_named(model, "aten::to"))
    assert iv.total(gone) == pytest.approx(1126 + 117)
    assert len(gone[0]) == 80
    assert gone[0][0] == pytest.approx(20_071.85) and gone[1][39] == pytest.approx(24_000)
    assert gone[0][40] == pytest.approx(35_097.075) and gone[1][79] == pytest.approx(39_000)
    one = step(1, 0, 20_300), op("aten::to", 0, 20_000), op("aten::add", 20_000, 300)
    short = model_of(tmp_path / "short", list(one), deviceProperties=PROPS)
    assert iv.total(wake_up(short, rows_named(short, "aten::to"))) == pytest.approx(150)  # capped at half the work


def test_the_wake_up_table_is_the_stored_probe_s_medians() -> None:
    """cold_host.WAKE_UP is what ``after_phase_probe.py --summarize`` makes of the stored measurement."""
    root = Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("after_phase_probe", root / "samples/scripts/after_phase_probe.py")
    assert spec and spec.loader
    probe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(probe)
    table = probe.summarize(json.loads((root / "samples/host_constants/h200_after_wait.json").read_text()))
    assert [(ms * 1000.0, round(us)) for ms, us in table.items()] == [(w, round(u)) for w, u in WAKE_UP]
