"""The ``pytorch-tb-profiler`` command: summary on traces of 2021 and 2026, CPU-only and multi-rank; the diff
regression gate's exit codes; reasons and exit codes for bad paths and bad traces."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import tb_plugin
from tb_plugin.cli import main
from tests.conftest import REPO, SAMPLES, cpu_op, write_trace
from tests.unit.test_sniff import export_chrome_trace
from tests.unit.test_views_synthetic import step

V100 = "kineto_v100/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz"
RESNET18 = "h200/resnet18_workers0"
SPAN1, SPAN2 = "vm_562.1795654441914410211.pt.trace.json.gz", "vm_562.1795654442665628614.pt.trace.json.gz"


def run(capsys: Any, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def summary_json(capsys: Any, path: Path, cache: Path) -> dict[str, Any]:
    code, out, err = run(capsys, "summary", str(path), "--json", "--cache-dir", str(cache))
    assert code == 0, err
    data: dict[str, Any] = json.loads(out)
    return data


def test_summary_of_a_2021_trace(real_traces: Path, tmp_path: Path, capsys: Any) -> None:
    s = summary_json(capsys, real_traces / V100, tmp_path)
    assert (s["worker"], s["span"], s["steps"]) == ("worker0", "1", 6)
    assert s["step_time_us"] == pytest.approx(177_592, rel=0.005)  # the old plugin's published 177.6 ms
    assert s["breakdown"]["DataLoader"]["share"] == pytest.approx(0.334, abs=0.001)
    assert s["verdict"]["kind"] == "input_bound" and s["findings"][0]["id"] == "input_bound"
    assert len(s["operators"]) == 10 and len(s["kernels"]) == 10 and s["ranks"] is None
    code, out, _ = run(capsys, "summary", str(real_traces / V100), "--cache-dir", str(tmp_path))
    assert code == 0
    assert f"Step time: {s['step_time_us'] / 1000:.2f} ms on average over 6 step(s)" in out
    assert "DataLoader" in out and "Top 10 operators:" in out and "Top 10 kernels:" in out


def test_summary_of_a_2026_trace_and_its_verdict(real_traces: Path, tmp_path: Path, capsys: Any) -> None:
    path = real_traces / "h200/transformer_bf16"
    s = summary_json(capsys, path, tmp_path)
    t = tb_plugin.open(path, cache_dir=str(tmp_path))
    assert s["step_time_us"] == t.overview().step_time_us
    assert s["kernels"][0]["total_us"] == t.kernels()["total_us"].max()
    assert s["verdict"] == t.overview().verdict and s["verdict"]["kind"] == "gpu_idle_gaps"
    code, out, _ = run(capsys, "summary", str(path), "--cache-dir", str(tmp_path))
    assert code == 0
    assert f"Verdict: {s['verdict']['text']}" in out
    first = s["findings"][0]
    assert f" 1. {first['title']}: {first['text']}" in out
    # MFU: the ratio against the H200's BF16 peak, and the user's peaks instead of the table's
    mfu = t.overview().mfu
    assert s["mfu"]["ratio"] == mfu.ratio and mfu.dtype == "bf16" and mfu.peak_flops_per_s == 989.5e12
    assert f"MFU: {mfu.ratio:.1%} (" in out and "BF16 peak of the NVIDIA H200 SXM" in out
    code, out, _ = run(capsys, "summary", str(path), "--cache-dir", str(tmp_path), "--peaks", "bf16=100")
    assert code == 0 and f"MFU: {mfu.ratio * 9.895:.1%} (" in out and "of the 100.0 TFLOP/s BF16 peak" in out
    code, _, err = run(capsys, "summary", str(path), "--cache-dir", str(tmp_path), "--peaks", "bf16")
    assert code == 2 and "peaks: 'bf16' is not key=value" in err


def test_summary_of_a_cpu_only_run(tmp_path: Path, capsys: Any) -> None:
    s = summary_json(capsys, SAMPLES / "cpu_only", tmp_path)
    assert s["device_type"] == "CPU" and s["kernels"] == []
    assert s["operators"] and all(r["device_self_us"] == 0 for r in s["operators"])
    hosts = [r["host_self_us"] for r in s["operators"]]
    assert hosts == sorted(hosts, reverse=True) and hosts[0] > 0  # ranked by host time when there is no GPU


def test_summary_of_a_multi_rank_run(real_traces: Path, tmp_path: Path, capsys: Any) -> None:
    s = summary_json(capsys, real_traces / "h200/ddp_resnet50", tmp_path)
    assert [r["worker"] for r in s["ranks"]] == ["rank0", "rank1"]
    code, out, _ = run(capsys, "summary", str(real_traces / "h200/ddp_resnet50"), "--cache-dir", str(tmp_path))
    assert code == 0 and "Ranks (2 workers of span 1; this summary is of rank0):" in out
    assert "Rank 1 is the straggler" in out
    assert "Job MFU: " in out and " over 2 ranks (" in out


def test_summary_shows_utilization_with_and_without_communication(tmp_path: Path, capsys: Any) -> None:
    code, out, _ = run(capsys, "summary", str(SAMPLES / "fsdp_comm"), "--worker", "rank0", "--cache-dir",
                       str(tmp_path))
    assert code == 0
    assert "GPU 0: utilization 96.4% (all kernels: the headline; 20.7% without communication kernels)" in out
    s = summary_json(capsys, SAMPLES / "cpu_only", tmp_path)
    assert s["gpus"] == []


def test_summary_of_export_chrome_trace_output(real_traces: Path, tmp_path: Path, capsys: Any) -> None:
    path = export_chrome_trace(real_traces, tmp_path / "trace.json")
    s = summary_json(capsys, path, tmp_path / "cache")
    assert (s["file"], s["worker"], s["steps"]) == ("trace.json", "trace", 6)


def steps_of(tmp_path: Path, name: str, durations: list[float]) -> Path:
    events, ts = [], 0.0
    for i, dur in enumerate(durations, 1):
        events += [step(i, ts, dur), cpu_op("aten::mm", ts, dur * 0.8)]
        ts += dur
    return write_trace(tmp_path / name / "w.1.pt.trace.json", events)


def test_diff_fails_only_beyond_the_threshold(tmp_path: Path, capsys: Any) -> None:
    # trailing host-only steps are kept (no GPU work to miss): average steps of 100 µs and 110 µs
    base = steps_of(tmp_path, "base", [100, 100])
    new = steps_of(tmp_path, "new", [110, 110])
    cache = ("--cache-dir", str(tmp_path / "cache"))
    code, out, _ = run(capsys, "diff", str(base), str(new), "--fail-if-slower", "5%", *cache)
    assert code == 1
    assert "step_time per step: 0.100 ms → 0.110 ms (+10.0%)" in out
    assert "FAIL: step_time changed +10.0%, more than the allowed +5.0%" in out
    assert "aten::mm" in out  # what got slower: the operator (80 → 88 µs host self a step, 2 steps)
    assert run(capsys, "diff", str(base), str(new), "--fail-if-slower", "15", *cache)[0] == 0
    assert run(capsys, "diff", str(new), str(base), "--fail-if-slower", "0%", *cache)[0] == 0  # faster
    assert run(capsys, "diff", str(base), str(new), *cache)[0] == 0  # no gate: a report only
    code, out, _ = run(capsys, "diff", str(base), str(new), "--fail-if-slower", "5%", "--json", *cache)
    data = json.loads(out)
    assert (code, data["failed"], data["change"]) == (1, True, pytest.approx(0.1))
    assert data["slower"]["operators"][0]["name"] == "aten::mm"
    assert data["slower"]["operators"][0]["delta_us"] == pytest.approx(8)  # per step: 80 → 88 µs host self
    assert data["operator_metric"] == "host_self_us" and data["lead_category"] == "CPU Exec"


def test_diff_leads_with_the_category_that_moved_most_and_ranks_by_contribution(real_traces: Path, tmp_path: Path,
                                                                              capsys: Any) -> None:
    """4 loader workers → none (the 2021 V100 pair): the DataLoader grows 58.1 ms a step, and the operators listed
    are the data loading's host work per step, not the kernels' microsecond noise; per-step figures throughout, no
    NaN for a new operator, and the spans compared are named."""
    base, new = real_traces / "kineto_v100/resnet50_num_workers_4", real_traces / "kineto_v100/resnet50_num_workers_0"
    cache = ("--cache-dir", str(tmp_path))
    code, out, _ = run(capsys, "diff", str(base), str(new), *cache)
    assert code == 0 and "NaN" not in out
    assert "baseline: resnet50_num_workers_4/worker0 span 1 of 2: --span" in out
    assert "Moved most: DataLoader +58.076 ms per step (1.186 → 59.262 ms)" in out
    ops = out.split("Operators that add most to the step (host self time per step, as DataLoader is made of):")[1]
    first = ops.strip().splitlines()[1].split()
    assert first == ["aten::copy_", "both", "0.038", "6.709", "6.671"]  # 40.0 ms more over 6 steps
    assert "aten::_cat    new            —" in ops  # a new operator: no baseline, not NaN
    data = json.loads(run(capsys, "diff", str(base), str(new), "--json", "--span", "2", *cache)[1])
    assert (data["baseline"]["span"], data["new"]["span"]) == ("2", "2")
    assert data["baseline"]["file"] == "worker0.1623213129365.pt.trace.json.gz"
    assert data["categories"][0]["category"] == data["lead_category"] == "DataLoader"
    data = json.loads(run(capsys, "diff", str(base), str(new), "--json", "--new-span", "2", *cache)[1])
    assert (data["baseline"]["span"], data["new"]["span"]) == ("1", "2")
    assert run(capsys, "diff", str(base), str(new), "--span", "7", *cache)[0] == 2


def test_diff_gate_on_real_traces_by_metric(real_traces: Path, tmp_path: Path, capsys: Any) -> None:
    a, b = real_traces / RESNET18 / SPAN1, real_traces / RESNET18 / SPAN2
    cache = ("--cache-dir", str(tmp_path))
    # span 2's step is 5.2 % faster, its memcpy 9.5 % slower (1.592 → 1.744 ms per step)
    assert run(capsys, "diff", str(a), str(b), "--fail-if-slower", "1%", *cache)[0] == 0
    code, out, _ = run(capsys, "diff", str(a), str(b), "--fail-if-slower", "5%", "--metric", "memcpy_time", *cache)
    assert code == 1 and "memcpy_time per step: 1.592 ms → 1.744 ms (+9.5%)" in out
    assert run(capsys, "diff", str(a), str(b), "--fail-if-slower", "10%", "--metric", "memcpy_time", *cache)[0] == 0


def test_bad_paths_and_traces_exit_with_a_reason(tmp_path: Path, capsys: Any) -> None:
    code, _, err = run(capsys, "summary", str(tmp_path / "nowhere"))
    assert (code, err.strip()) == (2, f"pytorch-tb-profiler: error: {tmp_path / 'nowhere'}: no such file or directory")
    write_trace(tmp_path / "metrics.json", raw=b'{"loss": 1}')
    code, _, err = run(capsys, "summary", str(tmp_path / "metrics.json"))
    assert code == 2 and "metrics.json: not a trace: a JSON object without 'traceEvents'" in err
    write_trace(tmp_path / "bad" / "w.1.pt.trace.json", raw=b'{"traceEvents": [1, 2')
    code, _, err = run(capsys, "report", str(tmp_path / "bad"), "--cache-dir", str(tmp_path / "cache"))
    assert code == 3 and "the JSON is cut short" in err
    good = steps_of(tmp_path, "good", [100])
    code, _, err = run(capsys, "diff", str(good), str(good), "--metric", "speed", "--cache-dir", str(tmp_path))
    assert code == 2 and "metric must be one of step_time, kernel_time" in err
    code, _, err = run(capsys, "diff", str(good), str(good), "--fail-if-slower", "fast")
    assert code == 2 and "--fail-if-slower takes a percentage" in err


def _one_line_error(err: str, *expected: str) -> None:
    """A failure is one line on stderr (progress lines aside), never a traceback."""
    lines = [line for line in err.splitlines() if line.startswith("pytorch-tb-profiler: error: ")]
    assert len(lines) == 1 and "Traceback" not in err, err
    for text in expected:
        assert text in lines[0], (text, lines[0])


def test_the_gate_never_passes_what_it_cannot_measure(tmp_path: Path, capsys: Any) -> None:
    """An empty trace, a trace without steps or a metric absent from both runs exits 4 with the reason (an empty
    trace once printed "OK: -100 %" and exited 0); a broken trace exits 3."""
    cache = ("--cache-dir", str(tmp_path / "cache"))
    good = steps_of(tmp_path, "good", [100, 100])
    empty = write_trace(tmp_path / "empty" / "w.1.pt.trace.json", [])
    stepless = write_trace(tmp_path / "stepless" / "w.1.pt.trace.json", [cpu_op("aten::mm", 0, 80)])
    broken = write_trace(tmp_path / "broken" / "w.1.pt.trace.json", raw=b'{"traceEvents": [')
    code, out, err = run(capsys, "diff", str(good), str(empty), "--fail-if-slower", "5%", *cache)
    assert (code, out) == (4, "")
    _one_line_error(err, "nothing to compare: NEW (w.1.pt.trace.json) holds no events")
    assert "warning" not in err  # no doubt added to what cannot be compared
    code, _, err = run(capsys, "diff", str(empty), str(good), "--fail-if-slower", "5%", *cache)
    assert code == 4 and "BASE (w.1.pt.trace.json) holds no events" in err
    code, _, err = run(capsys, "diff", str(good), str(stepless), *cache)  # without a gate too: nothing to show
    assert code == 4
    _one_line_error(err, "NEW (w.1.pt.trace.json) has no ProfilerStep#N events", "call prof.step()")
    code, _, err = run(capsys, "diff", str(good), str(good), "--metric", "kernel_time", "--fail-if-slower", "5%", *cache)
    assert code == 4
    _one_line_error(err, "kernel_time is 0 in both runs")
    code, _, err = run(capsys, "diff", str(good), str(broken), "--fail-if-slower", "5%", *cache)
    assert code == 3
    _one_line_error(err, "w.1.pt.trace.json: the JSON is cut short")
    assert run(capsys, "diff", str(good), str(good), "--fail-if-slower", "5%", *cache)[0] == 0


def test_diffing_two_unrelated_runs_warns(real_traces: Path, tmp_path: Path, capsys: Any) -> None:
    cache = ("--cache-dir", str(tmp_path))
    resnet, transformer = real_traces / RESNET18 / SPAN1, real_traces / "h200" / "transformer_bf16"
    code, out, err = run(capsys, "diff", str(resnet), str(transformer), *cache)
    assert code == 0 and "step_time per step" in out  # compared all the same
    assert ("pytorch-tb-profiler: warning: BASE and NEW look unrelated: only 8% of BASE's operator time and 70% of "
            "NEW's is in operators both have") in err
    # two spans of one run, and the same model with other loader settings: no warning
    assert "warning" not in run(capsys, "diff", str(resnet), str(real_traces / RESNET18 / SPAN2), *cache)[2]
    v100 = real_traces / "kineto_v100"
    assert "warning" not in run(capsys, "diff", str(v100 / "resnet50_num_workers_0"),
                                str(v100 / "resnet50_num_workers_4"), *cache)[2]
    # another model on other hardware: both said
    err = run(capsys, "diff", str(resnet), str(v100 / "resnet50_num_workers_0"), *cache)[2]
    assert "look unrelated" in err
    assert "BASE ran on NVIDIA H200 and NEW on Tesla V100-DGXS-32GB" in err


def test_unwritable_outputs_unreachable_urls_and_missing_logdirs(tmp_path: Path, capsys: Any) -> None:
    """Each fails fast with one line and its own exit code: 5 for an output that cannot be written (checked before
    any trace is loaded), 2 for a path or URL form that names nothing, 6 for a store that cannot be reached."""
    good = steps_of(tmp_path, "good", [100])
    cache = ("--cache-dir", str(tmp_path / "cache"))
    code, _, err = run(capsys, "report", str(good), "-o", str(tmp_path / "nowhere" / "r.html"), *cache)
    assert code == 5
    _one_line_error(err, f"cannot write the report to {tmp_path / 'nowhere' / 'r.html'}: the folder")
    assert not (tmp_path / "cache").exists()  # refused before loading anything
    code, _, err = run(capsys, "report", str(good), "-o", str(tmp_path), *cache)
    assert code == 5
    _one_line_error(err, "it is a directory")
    report = tmp_path / "r.html"
    assert run(capsys, "report", str(good), "-o", str(report), *cache)[0] == 0
    assert report.read_text().startswith("<!DOCTYPE html>") and not list(tmp_path.glob(".r.html.*"))
    code, _, err = run(capsys, "summary", "https://127.0.0.1:9/x.pt.trace.json", *cache)
    assert code == 2
    _one_line_error(err, "cannot open https://127.0.0.1:9/x.pt.trace.json: only Azure Blob https URLs")
    code, _, err = run(capsys, "preprocess", str(tmp_path / "missing"), "--cache", str(tmp_path / "c"))
    assert code == 2
    _one_line_error(err, f"{tmp_path / 'missing'}: no such directory")
    (tmp_path / "no_traces").mkdir()
    code, _, err = run(capsys, "preprocess", str(tmp_path / "no_traces"), "--cache", str(tmp_path / "c"))
    assert code == 2
    _one_line_error(err, "no trace files under")


def test_an_unreachable_store_exits_6(tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # nothing listens there: refused at once
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")  # and not tried again after a backoff (tests/remote/test_store_retries)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    code, _, err = run(capsys, "summary", "s3://bucket/run", "--cache-dir", str(tmp_path))
    assert code == 6
    _one_line_error(err, "cannot reach the S3 endpoint http://127.0.0.1:9")
    code, _, err = run(capsys, "preprocess", "s3://bucket/run", "--cache", str(tmp_path / "c"))
    assert code == 6
    _one_line_error(err, "cannot reach the S3 endpoint http://127.0.0.1:9")


def test_module_entry_point_runs() -> None:
    out = subprocess.run([sys.executable, "-m", "tb_plugin.cli", "--version"], cwd=REPO, capture_output=True,
                         text=True, check=True, timeout=60)
    assert out.stdout.strip() == f"pytorch-tb-profiler {tb_plugin.__version__}"
