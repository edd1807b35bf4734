"""The Python API (``tb_plugin.open`` / ``tb_plugin.diff``): its DataFrames hold the HTTP API's numbers, on real
traces and on a hand-checked synthetic one, and paths it cannot open fail with a reason."""

from __future__ import annotations

import math
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import tb_plugin
from tb_plugin.sdk import EXIT_BAD_TRACE, ProfilerError
from tests.conftest import API, REAL_TRACES, REPO, cpu_op, wait_until_settled, write_trace
from tests.unit.test_views_synthetic import PROPS, kernel, launch, step

V100 = "kineto_v100/resnet50_num_workers_0"
TRANSFORMER = "h200/transformer_bf16"
DDP = "h200/ddp_resnet50"


def records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows as the JSON carries them: NaN (pandas' missing value) back to None."""
    return [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()}
            for row in frame.to_dict("records")]


def get(client: Any, route: str) -> Any:
    r = client.get(f"{API}/{route}")
    assert r.status_code == 200, r.get_data(as_text=True)
    return r.get_json()


def assert_rows(frame: pd.DataFrame, rows: list[dict[str, Any]]) -> None:
    assert list(frame.columns) == list(rows[0]) if rows else frame.empty
    for a, h in zip(records(frame), rows, strict=True):
        numeric = {k for k, v in h.items() if isinstance(v, float)}
        assert {k: a[k] for k in numeric} == pytest.approx({k: h[k] for k in numeric}, rel=1e-12)
        assert {k: a[k] for k in h if k not in numeric} == {k: h[k] for k in h if k not in numeric}


@pytest.fixture
def copied(real_traces: Path, tmp_path: Path) -> Any:
    def copy(run: str) -> Path:
        target = tmp_path / "logdir" / run.split("/")[-1]
        shutil.copytree(real_traces / run, target)
        return target
    return copy


def test_views_equal_the_http_api_on_real_traces(copied: Any, tmp_path: Path, tensorboard_app: Any) -> None:
    for run in (V100, TRANSFORMER):
        copied(run)
    client = tensorboard_app(tmp_path / "logdir")
    wait_until_settled(client, expect_spans=3)
    for run, worker in (("resnet50_num_workers_0", "worker0"), ("transformer_bf16", "vm_562")):
        q = f"run={run}&worker={worker}&span=1"
        t = tb_plugin.open(tmp_path / "logdir" / run, cache_dir=str(tmp_path / "cache"))
        assert (t.run, t.worker, t.span) == (run, worker, "1")

        http = get(client, f"overview?{q}")
        o = t.overview()
        assert o.raw == http  # the whole Overview, environment (workers) included
        assert o.step_time_us == http["average"]["duration_us"]
        assert list(o.steps["duration_us"]) == [s["duration_us"] for s in http["steps"]]
        assert list(o.steps["dataloader_us"]) == [s["breakdown_us"]["DataLoader"] for s in http["steps"]]
        assert o.breakdown["share"].to_dict() == http["average"]["share"]
        assert records(o.findings) == http["recommendations"]
        assert_rows(o.gpus, http["gpus"])

        for group_by in ("name", "name_shape", "name_stack"):
            assert_rows(t.operators(group_by), get(client, f"operators?{q}&group_by={group_by}")["rows"])
        for group_by in ("name", "name_op"):
            assert_rows(t.kernels(group_by), get(client, f"kernels?{q}&group_by={group_by}")["rows"])
        assert_rows(t.memory_events(), get(client, f"memory/events?{q}")["rows"])
        assert_rows(t.memory_stats(), get(client, f"memory/stats?{q}")["rows"])
        curve = get(client, f"memory/curve?{q}")["devices"]
        assert len(t.memory_curve()) == sum(len(d["points"]) for d in curve.values())

        idle = get(client, f"idle?{q}")["streams"]
        assert_rows(t.idle(), [{k: st[k] for k in t.idle().columns} for st in idle])
        assert len(t.idle()) == len(idle) > 0
        launches = get(client, f"launch_stats?{q}")
        assert_rows(t.launch_stats(), launches["by_name"])
        assert t.launch_stats().attrs["summary"] == launches["summary"]

        folded = client.get(f"/data/plugin/pytorch_profiler/flamegraph?{q}&format=folded&metric=self_device_us")
        assert t.folded_stacks("self_device_us") == folded.get_data(as_text=True)
        tree = get(client, f"flamegraph?{q}&min_share=0")
        stacks = t.stacks()
        assert list(stacks["value"]) == tree["frames"]["value"] and stacks["self"].sum() == pytest.approx(tree["total"])
        assert set(stacks["kind"]) <= {"user", "library", "builtin", "module", "operator", "annotation", "runtime",
                                       "device", "other"}

        for group_by in ("kernel", "operator"):
            roof = get(client, f"roofline?{q}&group_by={group_by}&limit=100000")
            points = t.roofline(group_by)
            assert_rows(points, roof["points"])
            assert {k: points.attrs[k] for k in ("device", "roofs", "totals", "unestimated")} == {
                k: roof[k] for k in ("device", "roofs", "totals", "unestimated")}
        assert o.mfu.raw == http["mfu"] and o.mfu.ratio == http["mfu"]["ratio"]
        assert list(o.mfu.steps["model_flops"]) == [s["model_flops"] for s in http["mfu"]["steps"]]
        insights_equal_the_http_api(client, q, t)

        modules = get(client, f"modules?{q}")["modules"]
        flat = t.modules()
        assert list(flat.loc[flat["depth"] == 0, "name"]) == [m["name"] for m in modules]
        if modules:
            assert flat.iloc[0]["host_total_us"] == modules[0]["host_total_us"]

    # the 2021 sample's published figure (the old plugin's): 177.6 ms per step
    t = tb_plugin.open(tmp_path / "logdir" / "resnet50_num_workers_0", cache_dir=str(tmp_path / "cache"))
    assert t.overview().step_time_us == pytest.approx(177_592, rel=0.005)
    assert t.overview().breakdown.loc["DataLoader", "share"] == pytest.approx(0.334, abs=0.001)


def insights_equal_the_http_api(client: Any, q: str, t: Any) -> None:
    """Every other analysis the HTTP API serves is in the Python API, with the same numbers."""
    queues = get(client, f"queue_length?{q}")
    assert_rows(t.queue_length(), [{"device": s["device"], "stream": s["stream"], **s["summary"]}
                                   for s in queues["streams"]])
    assert list(t.queue_length(series=True)["max"]) == [v for s in queues["streams"] for v in s["series"]["max"]]
    bandwidth = get(client, f"memory_bandwidth?{q}")["rows"]
    assert_rows(t.memory_bandwidth(), [{k: r[k] for k in t.memory_bandwidth().columns} for r in bandwidth])
    sequences = get(client, f"kernel_sequences?{q}")["sequences"]
    frame = t.kernel_sequences()
    assert [list(k) for k in frame["kernels"]] == [s["kernels"] for s in sequences] and len(sequences) > 0
    assert list(frame["total_us"]) == [s["total_us"] for s in sequences]
    path = get(client, f"critical_path?{q}")
    cp = t.critical_path()
    assert list(cp["start_us"]) == [s["start_us"] for s in path["segments"]]
    assert [r["name"] for r in records(cp)] == [s["name"] for s in path["segments"]]
    assert cp.attrs["shares"] == {s["category"]: {"us": s["us"], "share": s["share"]} for s in path["shares"]}
    assert_rows(t.annotations(), [{**r, "path": " › ".join(r["path"])} for r in get(client, f"annotations?{q}")["rows"]])
    assert_rows(t.sources(), get(client, f"sources?{q}")["files"])
    assert_rows(t.module_timeline(), get(client, f"modules/timeline?{q}")["occurrences"])
    counters = get(client, f"cupti_counters?{q}")
    assert t.cupti_counters().empty and counters["rows"] == []
    assert t.search_stacks("aten::mm") == get(client, f"flamegraph/search?{q}&q=aten::mm")


def test_distributed_and_diff_equal_the_http_api(copied: Any, tmp_path: Path, tensorboard_app: Any) -> None:
    ddp = copied(DDP)
    v100 = copied(V100)
    client = tensorboard_app(tmp_path / "logdir")
    wait_until_settled(client, expect_spans=4)
    t = tb_plugin.open(ddp / "rank0.1795654468795164103.pt.trace.json.gz", cache_dir=str(tmp_path / "cache"))
    http = get(client, "distributed?run=ddp_resnet50&span=1")
    assert t.distributed_view() == http
    found = get(client, "distributed?run=ddp_resnet50&span=1&q=RANK1&sort=step_us&order=desc")
    assert t.distributed_view(sort="step_us", order="desc", q="RANK1") == found and found["page"]["total"] == 1
    ranks = t.distributed()
    assert list(ranks["worker"]) == ["rank0", "rank1"]
    assert list(ranks["step_us"]) == [r["step_us"] for r in http["ranks"]]
    assert ranks.attrs["straggler"]["rank"] == 1  # rank 1 sleeps 5 ms a step
    # the Overview of a rank knows the job picture, as the page's does
    assert t.overview().raw == get(client, "overview?run=ddp_resnet50&worker=rank0&span=1")
    assert t.overview().verdict["kind"] == "gpu_bound"  # rank 1's sleep stalls rank 0 only 0.75 ms of 37 ms
    assert "straggler_wait" in [r["kind"] for r in t.overview().raw["recommendations"]]
    assert len(t.collectives()) == sum(len(r["collectives"]) for r in http["ranks"])
    # MFU per rank and for the job; the user's peaks replace the table's
    mfu = t.overview().mfu
    assert list(mfu.ranks["worker"]) == ["rank0", "rank1"] and mfu.job is not None
    assert mfu.job["achieved_flops_per_s"] == pytest.approx(
        mfu.ranks["model_flops_per_step"].sum() / (mfu.ranks["step_us"].max() * 1e-6))
    capped = tb_plugin.open(ddp, cache_dir=str(tmp_path / "cache"), peaks=f"{mfu.dtype}=100").overview().mfu
    assert capped.peak_flops_per_s == 100e12 and capped.ratio == pytest.approx(mfu.ratio * mfu.peak_flops_per_s / 100e12)
    with pytest.raises(ValueError, match="not a number"):
        tb_plugin.open(ddp, peaks="bf16=fast")

    d = tb_plugin.diff(v100, tb_plugin.open(v100, span="2", cache_dir=str(tmp_path / "cache")),
                       cache_dir=str(tmp_path / "cache"))
    http = get(client, "diff?run=resnet50_num_workers_0&worker=worker0&span=1"
                       "&exp_run=resnet50_num_workers_0&exp_worker=worker0&exp_span=2")
    assert d.raw == http
    b = http["breakdown"]
    assert d.metric("step_time") == (b["step_baseline_us"], b["step_experiment_us"])
    assert d.metric("kernel_time") == (b["baseline"]["Kernel"], b["experiment"]["Kernel"])
    assert d.breakdown.loc["CPU Exec", "delta_us"] == pytest.approx(b["delta"]["CPU Exec"])
    assert_rows(d.operators, http["operators"])
    assert_rows(d.kernels, http["kernels"])
    # a ratio is a fraction and says so in its name, in the DataFrames as in the HTTP API (0.05 is +5 %)
    assert "delta_pct" not in d.breakdown.columns
    step = d.breakdown.loc["step"]
    assert step["delta_ratio"] == pytest.approx(b["step_delta_ratio"]) == pytest.approx(
        step["delta_us"] / step["baseline_us"])
    assert any(c.startswith("delta_ratio_") for c in d.operators.columns)


def test_a_single_process_run_is_rank_0_and_has_an_empty_collective_table(tmp_path: Path) -> None:
    """The worker name vm_562 is tensorboard_trace_handler's {hostname}_{pid}: process 562, not rank 562."""
    t = tb_plugin.open(REAL_TRACES / "h200" / "transformer_bf16", cache_dir=str(tmp_path / "cache"))
    ranks = t.distributed()
    assert list(ranks["worker"]) == ["vm_562"] and list(ranks["rank"]) == [0]
    col = t.collectives()
    assert col.empty and list(col.columns) == ["rank", "worker", "name", "calls", "prelaunched", "bytes",
                                               "total_us", "avg_us", "transfer_us", "bandwidth_gbps"]
    ddp = tb_plugin.open(REAL_TRACES / "h200" / "ddp_resnet50", cache_dir=str(tmp_path / "cache")).collectives()
    assert list(ddp.columns) == list(col.columns) and len(ddp) > 0


def test_hand_checked_synthetic_trace(tmp_path: Path, tensorboard_app: Any) -> None:
    events = [
        step(1, 0, 100), cpu_op("aten::mm", 0, 60), launch(5, 7, corr=1), kernel("gemm", 10, 20, corr=1),
        step(2, 100, 50), cpu_op("aten::mm", 100, 10), cpu_op("aten::add", 120, 20), launch(122, 7, corr=2),
        kernel("add_kernel", 125, 10, corr=2),
    ]
    write_trace(tmp_path / "run" / "w.1.pt.trace.json", events, deviceProperties=PROPS)
    client = tensorboard_app(tmp_path / "run")
    wait_until_settled(client, expect_spans=1)
    t = tb_plugin.open(tmp_path / "run", cache_dir=str(tmp_path / "cache"))
    o = t.overview()
    assert list(o.steps.index) == ["1", "2"]
    assert list(o.steps["duration_us"]) == [100, 50]
    assert list(o.steps["kernel_us"]) == [20, 10]
    assert o.step_time_us == 75
    ops = t.operators().set_index("name")
    assert ops.loc["aten::mm", "calls"] == 2 and ops.loc["aten::mm", "host_total_us"] == 70
    assert ops.loc["aten::mm", "device_total_us"] == 20 and ops.loc["aten::add", "device_total_us"] == 10
    assert ops.loc["aten::add", "host_self_us"] == 13  # 20 less its 7 µs launch
    assert_rows(t.operators(), get(client, "operators?run=run&worker=w&span=1")["rows"])
    k = t.kernels()
    assert list(k["name"]) == ["gemm", "add_kernel"] and list(k["total_us"]) == [20, 10]
    assert o.raw == get(client, "overview?run=run&worker=w&span=1")


def test_paths_it_cannot_open_say_why(tmp_path: Path) -> None:
    with pytest.raises(ProfilerError, match="no such file or directory"):
        tb_plugin.open(tmp_path / "nowhere")
    write_trace(tmp_path / "run" / "config.json", raw=b'{"lr": 0.1}')
    with pytest.raises(ProfilerError, match=r"config.json: not a trace: a JSON object without 'traceEvents'"):
        tb_plugin.open(tmp_path / "run" / "config.json")
    with pytest.raises(ProfilerError, match=r"no trace files under .*\n  config.json: a JSON object without"):
        tb_plugin.open(tmp_path / "run")
    write_trace(tmp_path / "run" / "w.1.pt.trace.json", [cpu_op("x", 0, 1)])
    with pytest.raises(ProfilerError, match=r"run 'run' has no worker 'w9'; it has 'w'"):
        tb_plugin.open(tmp_path / "run", worker="w9")
    write_trace(tmp_path / "bad" / "w.1.pt.trace.json", raw=b'{"traceEvents": [1, 2')
    with pytest.raises(ProfilerError, match="cut short") as err:
        tb_plugin.open(tmp_path / "bad", cache_dir=str(tmp_path / "cache"))
    assert err.value.exit_code == EXIT_BAD_TRACE
    with pytest.raises(ValueError, match="group_by must be one of name, name_shape, name_stack"):
        tb_plugin.open(tmp_path / "run", cache_dir=str(tmp_path / "cache")).operators("shape")


def test_importing_the_plugin_does_not_import_pandas() -> None:
    code = "import sys, tb_plugin, tb_plugin.plugin; print('pandas' in sys.modules, 'plotly' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
