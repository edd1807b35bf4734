"""The what-if replay (analysis/whatif): without a change it is the measured run on every real trace; with one, its
answers on tiny synthetic traces are the ones computed by hand in each test's docstring."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tb_plugin.analysis.diagnosis.sync_cost import sync_cost
from tb_plugin.analysis.whatif.changes import (
    CaptureGraph,
    Combined,
    DropDevice,
    DropHost,
    OverlapComm,
    ReplaceDevice,
    ScaleDevice,
    SideStream,
)
from tb_plugin.analysis.whatif.constants import compute_capability, peak_speedup, roofline_factor
from tb_plugin.analysis.whatif.graph import graph
from tb_plugin.analysis.whatif.replay import measured_step_us, replay
from tb_plugin.loader import load_trace
from tb_plugin.model.tables import TraceModel
from tests.conftest import REPO, write_trace
from tests.unit.test_views_synthetic import PROPS, kernel, launch, model_of, op, step

TRACES = sorted(p for p in [*REPO.glob("samples/*/*.pt.trace.json*"), *REPO.glob("tests/data/*/*/*.pt.trace.json*")])


def rows_named(model: TraceModel, name: str) -> np.ndarray:
    ev = model["events"]
    out: np.ndarray = np.flatnonzero(ev["name"] == model.code(name))
    return out


@pytest.mark.parametrize("path", TRACES, ids=lambda p: f"{p.parent.name}/{p.name[:12]}")
def test_the_replay_without_a_change_is_the_measured_run(path: Path) -> None:
    model = load_trace(str(path))
    r = replay(model)
    measured = measured_step_us(model)
    assert r.step_us == pytest.approx(measured, rel=0.01)
    d = graph(model).device
    assert np.array_equal(r.device_start, d.start) and np.array_equal(r.device_end, d.end)


def _two_streams(n: int = 3) -> list[dict[str, Any]]:
    """Per 700 µs step (b = 700 n): ProfilerStep [b, b + 605); aten::mm [b, b + 25) launches A on stream 7 at
    b + 1 (runs b + 10 → b + 410) and B on stream 8 at b + 20 (b + 30 → b + 230); cudaDeviceSynchronize
    [b + 50, b + 412) drains both (A ends last); aten::add [b + 412, b + 600) launches C on stream 7 at b + 600
    (b + 610 → b + 660). A step completes at C's end (b + 660): the cadence is 700 µs."""
    events: list[dict[str, Any]] = []
    for i in range(n):
        b, c = 700 * i, 10 * i
        events += [step(i + 1, b, 605), op("aten::mm", b, 25), launch(b + 1, 4, corr=c + 1),
                   kernel("A", b + 10, 400, corr=c + 1), launch(b + 20, 4, corr=c + 2),
                   kernel("B", b + 30, 200, corr=c + 2, stream=8),
                   launch(b + 50, 362, corr=-1, name="cudaDeviceSynchronize"),
                   op("aten::add", b + 412, 188), launch(b + 600, 4, corr=c + 3), kernel("C", b + 610, 50, corr=c + 3)]
    return events


def test_a_faster_kernel_moves_the_sync_and_everything_after_it(tmp_path: Path) -> None:
    """A twice as fast (200 µs): the sync drains A and B, and B now ends last (b + 230): the sync returns at 232
    (its 2 µs after the last target), 180 µs earlier, and so does the rest of the step; the next step's launches
    come 180 µs earlier too, and so on: every step saves 180 µs (B bounds it), the cadence is 520 µs."""
    model = model_of(tmp_path, _two_streams(), deviceProperties=PROPS)
    assert replay(model).step_us == pytest.approx(700)
    r = replay(model, [ScaleDevice(id="a", label="", rows=rows_named(model, "A"), factor=2.0)])
    assert r.step_us == pytest.approx(520)
    assert r.completions.tolist() == pytest.approx([480, 1000, 1520])
    # step 2: A launched at 701 − 180 = 521, released 9 µs later (its measured launch → start), 200 µs long
    d = graph(model).device
    a2 = int(np.flatnonzero(d.row == rows_named(model, "A")[1])[0])
    assert (r.device_start[a2], r.device_end[a2]) == pytest.approx((530, 730))


def test_dropping_the_sync_lets_the_host_run_ahead_until_the_gpu_sets_the_pace(tmp_path: Path) -> None:
    """Without the 362 µs sync the host's step is 243 µs of work (605 − 362) and its loop 338 µs (700 − 362); on
    stream 7, A (400) and C (50) are 450 µs a step, so the GPU sets the pace: once the host is ahead, C of step k
    ends at 10 + 400 + 50 + 450 k − (the first step's wait for its launch): 460, 910, 1360, a cadence of 450."""
    model = model_of(tmp_path, _two_streams(), deviceProperties=PROPS)
    r = replay(model, [DropHost(id="sync", label="", rows=rows_named(model, "cudaDeviceSynchronize"))])
    assert r.completions.tolist() == pytest.approx([460, 910, 1360])
    assert r.step_us == pytest.approx(450)


def test_combined_changes_are_one_replay_not_a_sum(tmp_path: Path) -> None:
    """Dropping the sync saves 250 µs (700 → 450); making A twice as fast saves 180 (→ 520). Together the GPU's
    stream 7 holds A (200) and C (50) a step, but the host's loop is 338 µs: it sets the pace, 338 µs, a saving
    of 362, not 250 + 180 = 430."""
    model = model_of(tmp_path, _two_streams(), deviceProperties=PROPS)
    sync = DropHost(id="sync", label="", rows=rows_named(model, "cudaDeviceSynchronize"))
    fast = ScaleDevice(id="a", label="", rows=rows_named(model, "A"), factor=2.0)
    both = replay(model, [sync, fast]).step_us
    assert both == pytest.approx(338)
    assert replay(model, [Combined(id="both", label="", parts=(sync, fast))]).step_us == pytest.approx(338)
    assert 700 - both < (700 - replay(model, [sync]).step_us) + (700 - replay(model, [fast]).step_us)


def _graph_steps() -> list[dict[str, Any]]:
    """Per 1000 µs step: aten::normal_ [b, b + 600) on the CPU, then cudaGraphLaunch [b + 600, b + 680) releases
    five 50 µs kernels back to back (b + 700 → b + 950): one launch, five kernels; the step completes at b + 1000
    (its host end)."""
    events: list[dict[str, Any]] = []
    for i in range(3):
        b = 1000 * i
        events += [step(i + 1, b, 1000), op("aten::normal_", b, 600),
                   launch(b + 600, 80, corr=100 + i, name="cudaGraphLaunch")]
        events += [kernel(f"graph_kernel_{k}", b + 700 + 50 * k, 50, corr=100 + i) for k in range(5)]
    return events


def test_a_graph_launch_releases_all_of_its_kernels(tmp_path: Path) -> None:
    """The five kernels share one launch: the first starts 100 µs after it (idle stream), the others are queued.
    Without aten::normal_ (600 µs a step) the host's loop is 400 µs and the graph launch comes at b' + 0: the
    kernels run b' + 100 → b' + 350, within the step: the cadence is 400."""
    model = model_of(tmp_path, _graph_steps(), deviceProperties=PROPS)
    d = graph(model).device
    assert (d.launch_row >= 0).all() and len(set(d.launch_row[:5].tolist())) == 1
    r = replay(model, [DropHost(id="creation", label="", rows=rows_named(model, "aten::normal_"))])
    assert r.step_us == pytest.approx(400)
    assert r.device_start[:5].tolist() == pytest.approx([100, 150, 200, 250, 300])
    # twice as fast kernels, still one after another from their launch
    fast = replay(model, [ScaleDevice(id="k", label="", rows=d.row[:5], factor=2.0)])
    assert fast.device_start[:5].tolist() == pytest.approx([700, 725, 750, 775, 800])


def _launch_bound_step() -> list[dict[str, Any]]:
    """One 1000 µs step: ten aten::add of 80 µs (from 100 µs apart) each launch a 10 µs kernel 20 µs in."""
    events = [step(1, 0, 1000)]
    for i in range(10):
        t = 100 * i
        events += [op("aten::add", t, 80), launch(t + 20, 10, corr=i + 1), kernel("add", t + 35, 10, corr=i + 1)]
    return events


def test_capture_graph_collapses_the_launching_operators_into_one_launch(tmp_path: Path) -> None:
    """CaptureGraph of the ten kernels: the ten aten::add (800 µs) vanish but a graph launch of 55 + 10 × 1.05 =
    65.5 µs (the first 65.5 µs of the first one); the 20 µs of Python between them stay (180 µs) and the 20 µs
    after the last: the host's step is 1000 − 800 + 65.5 = 265.5 µs. Every kernel is launched at the graph
    launch's start (0): released 15 µs later (its measured launch → start), they run back to back from 15 µs, the
    last ending at 115, before the host's end: the step is 265.5 µs (the old model released kernel i only after
    the graph launch's end plus the Python before its own launch call, 42 + 20 i)."""
    model = model_of(tmp_path, _launch_bound_step(), deviceProperties=PROPS)
    kernels = rows_named(model, "add")
    r = replay(model, [CaptureGraph(id="graph", label="", rows=kernels)])
    assert r.step_us == pytest.approx(265.5)
    assert r.device_start.tolist() == pytest.approx([15 + 10 * i for i in range(10)])
    # a fused kernel instead: one 30 µs kernel at the first's place; nine of the ten launch calls (10 µs) vanish
    fused = replay(model, [ReplaceDevice(id="fuse", label="", rows=kernels, cost_us=30.0, launch_us=10.0)])
    assert fused.step_us == pytest.approx(1000 - 90)
    assert (fused.device_end - fused.device_start).tolist() == pytest.approx([30] + [0] * 9)
    gone = replay(model, [DropDevice(id="none", label="", rows=kernels)])
    assert gone.step_us == pytest.approx(900) and (gone.device_end - gone.device_start).sum() == 0


def _cross_stream() -> list[dict[str, Any]]:
    """Per 1000 µs step: X on stream 7 (launched at b + 1, runs b + 10 → b + 510); Y on stream 8, launched at b + 5
    (its stream idle), starts only at b + 513, 3 µs after X ended: it waits for X (a cudaStreamWaitEvent), 200 µs;
    the host syncs [b + 20, b + 715) on Y; the step's host end is b + 800."""
    events: list[dict[str, Any]] = []
    for i in range(3):
        b = 1000 * i
        events += [step(i + 1, b, 800), op("aten::mm", b, 10), launch(b + 1, 3, corr=10 * i + 1),
                   kernel("X", b + 10, 500, corr=10 * i + 1), launch(b + 5, 3, corr=10 * i + 2),
                   kernel("ncclDevKernel_AllReduce", b + 513, 200, corr=10 * i + 2, stream=8),
                   launch(b + 20, 695, corr=-1, name="cudaStreamSynchronize")]
    return events


def test_a_stream_that_waits_for_another_follows_it(tmp_path: Path) -> None:
    """The edge X → Y is read from the times. X twice as fast (250 µs): Y starts at b + 263, ends b + 463, the sync
    returns 2 µs later, 250 µs earlier: every step saves 250 µs. Overlapping Y instead (OverlapComm: it stops
    waiting for X) starts it at its launch's release, b + 13 (the trace's typical launch → start, 8 µs... the
    median of X's 9 and Y's own), so it ends long before X, and the sync now waits for X alone: a step saves
    the 200 µs + 3 µs Y took after X, i.e. it returns at X's end + 2."""
    model = model_of(tmp_path, _cross_stream(), deviceProperties=PROPS)
    d = graph(model).device
    y = np.flatnonzero(d.row == rows_named(model, "ncclDevKernel_AllReduce")[0])[0]
    x = np.flatnonzero(d.row == rows_named(model, "X")[0])[0]
    assert d.dep[y] == x and d.dep_lag[y] == pytest.approx(3)
    faster = replay(model, [ScaleDevice(id="x", label="", rows=rows_named(model, "X"), factor=2.0)])
    assert faster.step_us == pytest.approx(1000 - 250)
    overlapped = replay(model, [OverlapComm(id="o", label="", rows=rows_named(model, "X"))])
    assert overlapped.step_us == pytest.approx(1000 - 203)
    assert overlapped.device_start[y] == pytest.approx(5 + d.latency)


def test_a_copy_on_a_side_stream_stops_holding_back_the_compute(tmp_path: Path) -> None:
    """Per 1000 µs step (host end b + 300): a 400 µs copy (b + 10 → b + 410) then a 100 µs kernel queued behind
    it on stream 7 (b + 412 → b + 512): the step completes at b + 512. On a side stream the kernel starts at its own
    release (launched b + 5: queued, so its launch plus the trace's latency), and the copy still ends at b + 410:
    the step completes at b + 410, a step of ... the cadence stays 1000 (the host's loop); the completion moves."""
    events: list[dict[str, Any]] = []
    for i in range(3):
        b = 1000 * i
        events += [step(i + 1, b, 300), op("aten::copy_", b, 10), launch(b + 1, 3, corr=10 * i + 1),
                   kernel("Memcpy HtoD (Pinned -> Device)", b + 10, 400, corr=10 * i + 1, cat="gpu_memcpy"),
                   launch(b + 5, 3, corr=10 * i + 2), kernel("k", b + 412, 100, corr=10 * i + 2)]
    model = model_of(tmp_path, events, deviceProperties=PROPS)
    copies = rows_named(model, "Memcpy HtoD (Pinned -> Device)")
    r = replay(model, [SideStream(id="overlap", label="", rows=copies)])
    assert r.completions.tolist() == pytest.approx([410, 1410, 2410])
    d = graph(model).device
    k = np.flatnonzero(d.row == rows_named(model, "k")[0])[0]
    assert r.device_start[k] == pytest.approx(5 + d.latency)


def test_dropping_a_cudafree_drops_its_wait(tmp_path: Path) -> None:
    """cudaFree waits for the device: per 1000 µs step a 600 µs kernel (b + 10 → b + 610) and a cudaFree
    [b + 20, b + 612) that waits for it, then 100 µs of host work and the step's end at b + 712 (host). Without the
    cudaFree (and its cudaMalloc [b + 5, b + 15)) the host's step is 712 − 592 − 10 = 110 µs, but the kernel is
    600 µs a step: the GPU sets the pace, 600."""
    events: list[dict[str, Any]] = []
    for i in range(3):
        b = 712 * i
        events += [step(i + 1, b, 712), op("aten::empty", b, 20), launch(b + 1, 3, corr=10 * i + 1),
                   launch(b + 5, 10, corr=-1, name="cudaMalloc"), kernel("k", b + 10, 600, corr=10 * i + 1),
                   launch(b + 20, 592, corr=-1, name="cudaFree"), op("aten::add", b + 612, 100)]
    model = model_of(tmp_path, events, deviceProperties=PROPS)
    assert graph(model).waits.size == 3
    churn = np.concatenate([rows_named(model, "cudaFree"), rows_named(model, "cudaMalloc")])
    assert replay(model, [DropHost(id="allocator", label="", rows=churn)]).step_us == pytest.approx(600)


def test_peak_ratios_per_generation() -> None:
    assert peak_speedup(compute_capability("9.0"), "tf32") == pytest.approx(494.7 / 67.0)
    assert peak_speedup(compute_capability("8.0"), "bf16") == pytest.approx(16.0)
    assert peak_speedup(compute_capability("7.0"), "tf32") == 1.0  # Volta has no TF32
    assert peak_speedup(compute_capability("12.0"), "tf32") == peak_speedup((10, 0), "tf32")  # newest known
    assert peak_speedup(None, "tf32") == 1.0
    # a kernel moving 3.35 GB in 2000 µs on a 3350 GB/s GPU is at most 2x from more compute
    assert roofline_factor(2000.0, 3.35e9, 7.4, 3350.0) == pytest.approx(2.0)


@pytest.mark.parametrize("run", ["samples/item_sync", "samples/pageable_h2d", "samples/transformer_bf16"])
def test_the_sync_finding_is_never_charged_more_than_the_hosts_blocked_time(run: str) -> None:
    model = load_trace(str(sorted((REPO / run).glob("*.pt.trace.json*"))[0]))
    cost = sync_cost(model)
    r = replay(model, [DropHost(id="sync", label="", spans=(cost.blocked_start, cost.blocked_end))])
    saving = measured_step_us(model) - r.step_us
    # the cadence is measured between the first and the last step's completion: the steps after the first count
    assert -1e-6 <= saving <= float(cost.blocked[1:].mean()) + 1e-6


def _rank_steps(rank: int) -> list[dict[str, Any]]:
    """Three 730 µs steps (b = 730 n) of a 2-rank job on one clock. Each rank computes (aten::mm [b, b + 100),
    a kernel on stream 7) and all-reduces (record_param_comms, the NCCL kernel on stream 9), syncs on it until
    b + 722 and ends its step at b + 730. Rank 0 launches its all-reduce at b + 290 (it starts at b + 300) and
    syncs from b + 300; rank 1 first sleeps 500 µs (no event), launches it at b + 610 (b + 620) and syncs from
    b + 620. The all-reduce ends 100 µs after the last arrival, at b + 720 on both."""
    events: list[dict[str, Any]] = []
    late = 500 * rank
    for i in range(3):
        b, c = 730 * i, 10 * i
        issue = b + (290 if rank == 0 else 110 + late)
        events += [step(i + 1, b, 730), op("aten::mm", b + late, 100), launch(b + late + 1, 3, corr=c + 1),
                   kernel("nvjet_gemm", b + late + 10, 290 - late // 2 if rank else 290, corr=c + 1),
                   op("record_param_comms", issue - 5, 20) | {"args": {"Collective name": "allreduce",
                                                                      "dtype": "Float", "In msg nelems": 1 << 20,
                                                                      "Out msg nelems": 1 << 20}},
                   launch(issue, 3, corr=c + 2),
                   kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", issue + 10, b + 720 - issue - 10, corr=c + 2,
                          stream=9),
                   launch(issue + 10, b + 722 - issue - 10, corr=-1, name="cudaStreamSynchronize")]
    return events


def test_a_straggler_that_evens_out_is_paced_by_its_peer(tmp_path: Path) -> None:
    """Rank 1 drops its 500 µs sleep (a change only it makes). Alone it would run a step in 230 µs (its work before
    the all-reduce, 120 µs, the transfer, 100, the sync's return and the step's end, 10). Against rank 0, which
    arrives 310 µs after the previous all-reduce ended, the all-reduce ends 410 µs after the previous one: the
    job's cadence is 410. Seen from rank 0, the same fix (rank 1 arriving 500 µs sooner) gives 410 too."""
    from tb_plugin.analysis.rank_summary import rank_summary
    from tb_plugin.analysis.whatif.changes import FasterPeer
    from tb_plugin.analysis.whatif.peers import peers_of

    models = []
    for rank in (0, 1):
        path = tmp_path / f"r{rank}"
        models.append((f"rank{rank}", load_trace(str(write_trace(path / f"rank{rank}.1.pt.trace.json",
                                                                 _rank_steps(rank), deviceProperties=PROPS,
                                                                 distributedInfo={"rank": rank, "world_size": 2})))))
    summaries = [rank_summary(m, w) for w, m in models]
    (_, m0), (_, m1) = models
    p0, p1 = peers_of(m0, summaries, "rank0"), peers_of(m1, summaries, "rank1")
    assert p0 is not None and p1 is not None and p1.size == 3
    assert replay(m1, (), p1).step_us == pytest.approx(730) and replay(m0, (), p0).step_us == pytest.approx(730)
    sleep = DropHost(id="straggler", label="", own_rank=True,
                     spans=(np.array([0.0, 730, 1460]), np.array([500.0, 1230, 1960])))
    assert replay(m1, [sleep]).step_us == pytest.approx(230)
    assert replay(m1, [sleep], p1).step_us == pytest.approx(410)
    assert replay(m0, [FasterPeer(id="w", label="", worker="rank1", us_per_step=500)], p0).step_us == \
        pytest.approx(410)


@pytest.mark.parametrize("run", ["samples/ddp_resnet", "samples/pp_two_groups", "samples/fsdp_comm",
                                 "tests/data/h200/ddp_resnet50"])
def test_the_replay_against_the_peers_without_a_change_is_the_measured_run(run: str) -> None:
    from tb_plugin.analysis.rank_summary import rank_summary
    from tb_plugin.analysis.whatif.peers import peers_of

    files = sorted((REPO / run).glob("*.pt.trace.json*"))
    models = [(f.name.split(".")[0], load_trace(str(f))) for f in files]
    summaries = [rank_summary(m, w) for w, m in models]
    for worker, model in models:
        peers = peers_of(model, summaries, worker)
        assert peers is not None and peers.size
        r = replay(model, (), peers)
        assert r.step_us == pytest.approx(measured_step_us(model), rel=1e-9)
        assert np.allclose(r.device_end, graph(model).device.end)


RUNS = sorted({p.parent for p in TRACES})


@pytest.mark.parametrize("run", RUNS, ids=lambda p: p.name)
def test_every_findings_saving_is_its_replay_and_never_negative(run: Path) -> None:
    """On every sample and test run (first worker; multi-rank runs with their job): a finding with a fix saves
    baseline − replayed (never below 0), the baseline being the measured cadence."""
    from tb_plugin.analysis.distributed import distributed
    from tb_plugin.analysis.overview import overview
    from tb_plugin.analysis.rank_summary import rank_summary

    files = sorted(run.glob("*.pt.trace.json*"))
    models = [(f.name.split(".")[0], load_trace(str(f))) for f in files]
    worker, model = models[0]
    multi = len({w for w, _ in models}) > 1
    o = overview(model, distributed(models), worker, len(models), ranks=tuple(rank_summary(m, w) for w, m in models)) \
        if multi else overview(model)
    for r in o["recommendations"]:
        assert r["saving_us"] >= 0
        w = r["what_if"]
        if w is not None:
            assert w["baseline_step_us"] == pytest.approx(measured_step_us(model))
            assert r["saving_us"] == pytest.approx(max(w["baseline_step_us"] - w["predicted_step_us"], 0.0))
            assert r["estimated"] == "replay"


def test_device_work_launched_inside_host_events(tmp_path: Path) -> None:
    """The kernels launched inside aten::mm (A, B, each step) and none of C's (launched in aten::add)."""
    from tb_plugin.analysis.whatif.apply import launched_within

    model = model_of(tmp_path, _two_streams(), deviceProperties=PROPS)
    inside = launched_within(model, rows_named(model, "aten::mm"))
    expected = np.concatenate([rows_named(model, "A"), rows_named(model, "B")])
    assert sorted(inside.tolist()) == sorted(expected.tolist())


def test_a_blocking_call_dropped_but_for_its_replacement_waits_no_more(tmp_path: Path) -> None:
    """A 1490 µs kernel (10 → 1500) and a cudaStreamSynchronize (20 → 1510) that waits for it, then 480 µs of host
    work: the step is 2000 µs. The call dropped but for a 4 µs head (``keep_us``: a non-blocking replacement, as a
    pinned non_blocking copy replaces a pageable one) no longer waits: the host's step is 2000 − 1486 = 514 µs, the
    kernel still ends at 1500, the step completes then. (Before, the 4 µs kept made the call a live wait, and the
    host still waited for the kernel: 2000.)"""
    events = [step(1, 0, 2000), launch(0, 5, corr=1), kernel("k", 10, 1490, corr=1),
              launch(20, 1490, corr=-1, name="cudaStreamSynchronize"), op("aten::add", 1520, 400)]
    model = model_of(tmp_path, events, deviceProperties=PROPS)
    sync = rows_named(model, "cudaStreamSynchronize")
    assert graph(model).waits.size == 1
    assert replay(model, []).step_us == pytest.approx(2000)
    r = replay(model, [DropHost(id="nb", label="", rows=sync, keep_us=4.0)])
    assert r.step_us == pytest.approx(1500)
    assert float(r.host(np.array([2000.0]))[0]) == pytest.approx(514)
