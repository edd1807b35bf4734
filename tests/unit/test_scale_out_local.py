"""Scale-out on one machine: ``pytorch-tb-profiler preprocess`` into a local cache (its report, resume, failures and
errors), a TensorBoard on that cache that parses nothing and opens only the ranks asked for, and a TensorBoard
that sends its parses to a Dask cluster (``--profiler_dask_scheduler``, a real 1-worker LocalCluster)."""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tensorboard.plugins import base_plugin

from tb_plugin.analysis.distributed import distributed
from tb_plugin.analysis.distributed_page import page_of
from tb_plugin.cli import main
from tb_plugin.loader import load_trace
from tb_plugin.plugin import ProfilerLoader
from tb_plugin.scaleout.executors import LocalPool
from tests.conftest import API, SAMPLES, wait_until_settled, write_trace


@pytest.fixture
def ddp_logdir(tmp_path: Path) -> Path:
    run = tmp_path / "logdir" / "ddp"
    run.mkdir(parents=True)
    for f in (SAMPLES / "ddp_resnet").glob("*.pt.trace.json.gz"):
        shutil.copy(f, run / f.name)
    return run.parent


def _expected(logdir: Path) -> dict[str, Any]:
    files = sorted((logdir / "ddp").glob("*.gz"))
    return page_of(distributed([(f.name.split(".")[0], load_trace(str(f))) for f in files]))


def _preprocess(logdir: Path, cache: Path, capsys: Any, *more: str) -> tuple[int, dict[str, Any]]:
    code = main(["preprocess", str(logdir), "--cache", str(cache), "--workers", "1", "--json", *more])
    return code, json.loads(capsys.readouterr().out)


def _plugin(client: Any) -> Any:
    return next(p for p in client.wsgi_app._plugins if hasattr(p, "workspace"))


def test_preprocess_reports_resumes_and_names_failures(ddp_logdir: Path, tmp_path: Path, capsys: Any) -> None:
    write_trace(ddp_logdir / "ddp" / "rank9.1.pt.trace.json", raw=b'{"traceEvents": [{"ph": "X"', gz=False)
    code, report = _preprocess(ddp_logdir, tmp_path / "cache", capsys)
    assert code == 1 and (report["files"], report["parsed"], report["skipped"], report["failed"]) == (3, 2, 0, 1)
    (failure,) = report["failures"]
    assert failure["file"].endswith("rank9.1.pt.trace.json") and "rank9.1.pt.trace.json" in failure["reason"]
    assert report["bytes"] == sum(f.stat().st_size for f in (SAMPLES / "ddp_resnet").glob("*.gz"))
    assert len(report["worker_peak_rss_mb"]) == 1 and report["worker_peak_rss_mb"][0] > 50
    (ddp_logdir / "ddp" / "rank9.1.pt.trace.json").unlink()
    code, again = _preprocess(ddp_logdir, tmp_path / "cache", capsys)
    assert code == 0 and (again["parsed"], again["skipped"], again["failed"]) == (0, 2, 0)


def test_preprocess_text_report_shows_each_workers_peak_memory(ddp_logdir: Path, tmp_path: Path,
                                                                capsys: Any) -> None:
    """The text report (not only --json) gives each worker's peak memory, as docs/guide/scale-out.md says."""
    assert main(["preprocess", str(ddp_logdir), "--cache", str(tmp_path / "cache"), "--workers", "1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("2 parsed, 0 already done, 0 failed (")
    m = re.search(r"^peak memory per worker: ([\d,]+\.\d) MB$", out, re.MULTILINE)
    assert m and float(m.group(1).replace(",", "")) > 50


def test_preprocess_says_why_it_cannot_start(tmp_path: Path, capsys: Any) -> None:
    assert main(["preprocess", "nosuch://bucket/x", "--cache", str(tmp_path / "c")]) == 2
    assert "cannot open logdir nosuch://bucket/x" in capsys.readouterr().err
    assert main(["preprocess", str(tmp_path), "--dask-local", "0"]) == 2
    assert "at least 1" in capsys.readouterr().err
    write_trace(tmp_path / "run" / "w.1.pt.trace.json", [])
    assert main(["preprocess", str(tmp_path), "--cache", str(tmp_path / "c"), "--dask", "tcp://127.0.0.1:9"]) == 6
    assert "tcp://127.0.0.1:9" in capsys.readouterr().err


def _killed_by(item: str) -> dict[str, Any]:
    """A task whose process is killed (as the kernel's OOM killer would) by the file named "poison"."""
    if item == "poison":
        os.kill(os.getpid(), signal.SIGKILL)
    return {"status": "ok", "pid": os.getpid()}


def test_local_pool_fails_only_the_file_that_kills_its_process() -> None:
    pool = LocalPool(2)
    try:
        out = dict(pool.run(_killed_by, ["a", "b", "poison", "c", "d"]))
        assert dict(pool.run(_killed_by, ["e"]))["e"]["status"] == "ok"  # the pool works again afterwards
    finally:
        pool.close()
    assert out["poison"]["status"] == "error" and "died" in out["poison"]["reason"]
    assert sorted(k for k, v in out.items() if v["status"] == "ok") == ["a", "b", "c", "d"]


def test_dask_scheduler_flag_needs_a_shared_cache() -> None:
    with pytest.raises(base_plugin.FlagsError, match="--profiler_cache_dir"):
        ProfilerLoader().fix_flags(argparse.Namespace(profiler_dask_scheduler="tcp://s:8786",
                                                      profiler_cache_dir=None))


def test_tensorboard_on_a_preprocessed_cache_opens_only_the_ranks_asked_for(
        tensorboard_app: Any, ddp_logdir: Path, capsys: Any) -> None:
    code, _ = _preprocess(ddp_logdir, tensorboard_app.cache_dir, capsys)
    assert code == 0
    client = tensorboard_app(ddp_logdir)
    wait_until_settled(client, expect_spans=2)
    scheduler = _plugin(client).workspace.scheduler
    assert scheduler.counts() == {"parsed_here": 0, "parsed_remote": 0, "preprocessed": 2, "models_open": 0}
    # 'ready' means the rank's summary is in memory: the first job-level answer reads no file (1,024 ranks would
    # otherwise read theirs inside that request)
    assert sorted(worker for _, worker in _plugin(client).workspace._summaries) == ["rank0", "rank1"]
    assert "Distributed" in client.get(f"{API}/views?run=ddp").get_json()["views"]
    answer = client.get(f"{API}/distributed?run=ddp&span=1")
    assert answer.status_code == 200
    assert json.dumps(answer.get_json(), sort_keys=True) == json.dumps(_expected(ddp_logdir), sort_keys=True)
    assert scheduler.counts()["models_open"] == 0
    overview = client.get(f"{API}/overview?run=ddp&worker=rank0&span=1")
    assert overview.status_code == 200  # the straggler (rank 1) is known to rank 0's diagnosis from summaries
    assert overview.get_json()["environment"]["workers"] == 2
    assert scheduler.counts()["models_open"] == 1
    bad = client.get(f"{API}/distributed?run=ddp&span=7")
    assert bad.status_code == 404 and "no span" in bad.get_json()["error"]


@pytest.fixture
def dask_cluster() -> Iterator[str]:
    from distributed import LocalCluster

    cluster = LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None)
    try:
        yield str(cluster.scheduler_address)
    finally:
        cluster.close()


def test_tensorboard_sends_its_parses_to_a_dask_cluster(tensorboard_app: Any, ddp_logdir: Path,
                                                         dask_cluster: str) -> None:
    client = tensorboard_app(ddp_logdir, profiler_dask_scheduler=dask_cluster)
    body = wait_until_settled(client, timeout=120, expect_spans=2)
    assert body["errors"] == []
    scheduler = _plugin(client).workspace.scheduler
    assert scheduler.counts() == {"parsed_here": 0, "parsed_remote": 2, "preprocessed": 2, "models_open": 0}
    answer = client.get(f"{API}/distributed?run=ddp&span=1").get_json()
    assert json.dumps(answer, sort_keys=True) == json.dumps(_expected(ddp_logdir), sort_keys=True)
    assert client.get(f"{API}/summary?run=ddp&worker=rank1&span=1").status_code == 200


def test_an_unreachable_dask_scheduler_is_said_and_parsing_stays_local(tensorboard_app: Any, ddp_logdir: Path) -> None:
    started = time.monotonic()
    client = tensorboard_app(ddp_logdir, profiler_dask_scheduler="tcp://127.0.0.1:9")
    body = wait_until_settled(client, timeout=120, expect_spans=2)
    assert time.monotonic() - started < 60
    assert any("cannot use the Dask scheduler tcp://127.0.0.1:9" in e for e in body["errors"]), body["errors"]
    assert _plugin(client).workspace.scheduler.counts()["parsed_here"] == 2
