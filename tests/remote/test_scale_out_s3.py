"""Scale-out against real services on 127.0.0.1: a Dask ``LocalCluster`` of 2 worker processes preprocesses 64
synthetic ranks (``benchmarks/make_ranks.py`` from the real 8-rank gloo_8proc_cpu sample, the cheapest to parse)
from moto's S3 into a cache on the same S3. Its summaries equal the local pool's; a TensorBoard on that cache shows
the Distributed view with nothing parsed and no model opened; a worker killed mid-run loses nothing, and a rerun
does only what is missing.

64 ranks: more than the 8 a job's notes name one by one and the 8 threads that read summaries, and a shared cache
of 1,024 files (16 an entry), so that listing it takes two pages of S3's 1,000 keys; twice as many would parse twice
as long and check nothing more."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from benchmarks import make_ranks
from tb_plugin.analysis.distributed import job_distributed
from tb_plugin.analysis.distributed_page import page_of
from tb_plugin.analysis.rank_summary import RankSummary
from tb_plugin.jobs.cache import SUMMARY_MARKER
from tb_plugin.jobs.shared import SharedCache
from tb_plugin.scaleout.executors import DaskExecutor, LocalPool
from tb_plugin.scaleout.preprocess import Plan, Report, plan, run
from tb_plugin.scaleout.summaries import read_summary
from tb_plugin.scaleout.task import preprocess_file
from tests.conftest import API, SAMPLES, wait_until_settled
from tests.remote.conftest import Moto

RANKS = 64
BUCKET = "scale"
JOB = f"job{RANKS}"
SMALL = 24  # ranks of the crash test's run: it needs a run, not RANKS parses


@pytest.fixture(scope="module")
def ranks_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ranks") / JOB
    assert make_ranks.main([str(SAMPLES / "gloo_8proc_cpu"), "--ranks", str(RANKS), "--out", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def s3_job(moto: Moto, ranks_dir: Path) -> str:
    """The ranks uploaded to s3://scale/job64/, and the first 24 of them to s3://scale/job24/ for the crash test
    (:func:`s3_small_job`), settled (older than the catalog's settle time) by one wait for both."""
    s3 = moto.client()
    s3.create_bucket(Bucket=BUCKET)
    files = sorted(ranks_dir.iterdir())
    for f in files:
        s3.put_object(Bucket=BUCKET, Key=f"{JOB}/{f.name}", Body=f.read_bytes())
    for f in files[:SMALL]:
        s3.put_object(Bucket=BUCKET, Key=f"job{SMALL}/{f.name}", Body=f.read_bytes())
    time.sleep(2.1)
    return f"s3://{BUCKET}/{JOB}"


def _summaries(cache: SharedCache, names: dict[str, str], into: Path) -> dict[str, RankSummary]:
    """worker -> its summary as stored in ``cache`` (copied here first when the cache is remote)."""
    if not cache.is_local:
        cache.fetch(list(names.values()), into, summary_only=True)
    root = Path(cache.root) if cache.is_local else into
    return {worker: read_summary(root / name) for worker, name in names.items()}


def _same(a: RankSummary, b: RankSummary) -> bool:
    tables = all(np.array_equal(a.steps[c], b.steps[c], equal_nan=True) for c in a.steps)
    tables &= all(np.array_equal(a.collectives[c], b.collectives[c]) for c in a.collectives)
    return tables and a.scalars() == b.scalars()


@pytest.fixture(scope="module")
def dask_cluster(moto: Moto) -> Iterator[DaskExecutor]:
    """One LocalCluster of 2 worker processes for the module (started with the S3 variables of ``s3_env``, which its
    workers keep): ``preprocess`` runs on it, and the crash test kills one of its workers and reruns on it, as a
    rerun against a long-lived cluster (``--dask-scheduler``) would."""
    with pytest.MonkeyPatch.context() as env:
        _s3_env(env, moto)
        dask = DaskExecutor(local_workers=2)
    try:
        yield dask
    finally:
        dask.close()


@pytest.fixture(scope="module")
def s3_preprocessed(moto: Moto, s3_job: str, dask_cluster: DaskExecutor) -> tuple[Plan, Report]:
    """``preprocess`` of the ranks on a 2-process LocalCluster into s3://scale/cache (once per module)."""
    with pytest.MonkeyPatch.context() as env:
        _s3_env(env, moto)
        shared = SharedCache(f"s3://{BUCKET}/cache")
        cluster_plan = plan(s3_job, shared)
        assert len(cluster_plan.todo) == RANKS and not cluster_plan.done
        assert dask_cluster.workers == 2
        return cluster_plan, run(cluster_plan, shared, dask_cluster)


def _s3_env(env: pytest.MonkeyPatch, moto: Moto) -> None:
    """What the ``s3_env`` fixture sets, for the module-scoped fixture (function fixtures cannot serve it)."""
    env.setenv("AWS_ACCESS_KEY_ID", "testing")
    env.setenv("AWS_SECRET_ACCESS_KEY", "testing-secret-value")
    env.setenv("AWS_DEFAULT_REGION", "us-east-1")
    env.setenv("AWS_ENDPOINT_URL", moto.endpoint)
    env.setenv("AWS_EC2_METADATA_DISABLED", "true")


@pytest.mark.timeout(900)
def test_dask_preprocess_into_s3_equals_the_local_pool(s3_env: Any, s3_job: str, ranks_dir: Path, tmp_path: Path,
                                                       s3_preprocessed: tuple[Plan, Report]) -> None:
    local_cache = SharedCache(str(tmp_path / "local-cache"))
    local_plan = plan(str(ranks_dir), local_cache)
    pool = LocalPool(2)
    try:
        local = run(local_plan, local_cache, pool)
    finally:
        pool.close()
    assert (local.parsed, local.failed) == (RANKS, [])

    shared = SharedCache(f"s3://{BUCKET}/cache")
    cluster_plan, report = s3_preprocessed
    assert (report.parsed, report.failed, report.bytes) == (RANKS, [], sum(f.stat().st_size for f in
                                                                            ranks_dir.iterdir()))
    assert len(report.worker_peak_rss) >= 2 and all(v > 50 << 20 for v in report.worker_peak_rss.values())
    assert shared.done() == {s.name for s in cluster_plan.todo}
    assert len(shared.fs.find(shared.root)) > 1000  # done() read a listing of more than one page
    assert plan(s3_job, shared).todo == []  # resumable: everything is done now

    ours = _summaries(local_cache, {s.worker: s.name for s in local_plan.todo}, tmp_path / "a")
    theirs = _summaries(shared, {s.worker: s.name for s in cluster_plan.todo}, tmp_path / "b")
    assert sorted(ours) == sorted(theirs) and len(ours) == RANKS
    assert all(_same(ours[w], theirs[w]) for w in ours)
    job = job_distributed(list(theirs.values()))
    assert json.dumps(job, sort_keys=True) == json.dumps(job_distributed(list(ours.values())), sort_keys=True)
    assert job["world_size"] == RANKS and job["backend"] == "gloo"
    (group,) = job["groups"]  # one Gloo group over every rank, its collectives matched across all of them
    assert group["ranks"] == RANKS and group["matched"] == 20


def _plugin(client: Any) -> Any:
    return next(p for p in client.wsgi_app._plugins if hasattr(p, "workspace"))


@pytest.mark.timeout(900)
def test_tensorboard_on_the_shared_cache_parses_nothing(tensorboard_app: Any, s3_env: Any, s3_job: str,
                                                         tmp_path: Path,
                                                         s3_preprocessed: tuple[Plan, Report]) -> None:
    shared = SharedCache(f"s3://{BUCKET}/cache")
    assert s3_preprocessed[1].failed == []
    todo = plan(s3_job, shared)
    client = tensorboard_app(s3_job, profiler_cache_dir=f"s3://{BUCKET}/cache")
    body = wait_until_settled(client, timeout=120, expect_spans=RANKS)
    assert body["errors"] == []
    scheduler = _plugin(client).workspace.scheduler
    assert scheduler.counts() == {"parsed_here": 0, "parsed_remote": 0, "preprocessed": RANKS, "models_open": 0}
    views = client.get(f"{API}/views?run={JOB}")
    assert views.status_code == 200 and "Distributed" in views.get_json()["views"]
    answer = client.get(f"{API}/distributed?run={JOB}&span=1")
    assert answer.status_code == 200
    job = answer.get_json()
    assert len(job["ranks"]) == RANKS and job["world_size"] == RANKS
    expected = page_of(job_distributed(list(_summaries(shared, {s.worker: s.name for s in todo.done},
                                                        tmp_path / "s").values())))
    assert json.dumps(job, sort_keys=True) == json.dumps(expected, sort_keys=True)
    # /views read the views each trace offers from its summary; neither it nor the Distributed view opened a model
    assert scheduler.counts()["models_open"] == 0
    # opening a rank copies its model from the shared cache (409 meanwhile), then serves it
    deadline = time.time() + 60
    while (r := client.get(f"{API}/overview?run={JOB}&worker=rank41&span=1")).status_code == 409:
        assert time.time() < deadline, r.get_json()
        time.sleep(0.2)
    assert r.status_code == 200 and r.get_json()["environment"]["workers"] == RANKS
    assert scheduler.counts() == {"parsed_here": 0, "parsed_remote": 0, "preprocessed": RANKS, "models_open": 1}


def _worker_pids(dask: DaskExecutor) -> list[int]:
    return sorted(dask.client.run(os.getpid).values())


@pytest.fixture(scope="module")
def s3_small_job(s3_job: str) -> str:
    """24 of the ranks under s3://scale/job24/ (uploaded with the others, by :func:`s3_job`)."""
    return f"s3://{BUCKET}/job{SMALL}"


@pytest.mark.timeout(900)
def test_a_killed_worker_loses_nothing_and_a_rerun_does_only_what_is_missing(s3_env: Any, s3_small_job: str,
                                                                              dask_cluster: DaskExecutor) -> None:
    shared = SharedCache(f"s3://{BUCKET}/kill-cache")
    first = plan(s3_small_job, shared)
    assert len(first.todo) == 24
    dask = dask_cluster
    outcomes = []
    killed = 0
    for spec, outcome in dask.run(preprocess_file, first.todo[:16], shared.url):
        outcomes.append((spec, outcome))
        if len(outcomes) == 4:  # mid-run: both workers busy; kill one (its nanny starts a new one)
            killed = _worker_pids(dask)[0]
            os.kill(killed, signal.SIGKILL)
    assert len(outcomes) == 16 and all(o["status"] == "ok" for _, o in outcomes), outcomes
    # the killed worker's task ran again elsewhere (the other worker, or the nanny's new process)
    assert killed and all(o["pid"] != killed for _, o in outcomes[6:])
    assert shared.done() == {s.name for s in first.todo[:16]}
    # the run stopped there (8 files never started); one of them was cut short mid-upload (model files, no
    # marker): not done, so the rerun does it again
    cut = first.todo[20]
    shared.fs.pipe(shared.path(cut.name, "meta.json"), b"{}")
    second = plan(s3_small_job, shared)
    assert len(second.done) == 16 and {s.name for s in second.todo} == {s.name for s in first.todo[16:]}
    report = run(second, shared, dask)  # the same cluster, its killed worker replaced by its nanny
    assert (report.parsed, report.skipped, report.failed) == (8, 16, [])
    assert shared.done() == {s.name for s in first.todo}
    assert shared.fs.exists(shared.path(cut.name, SUMMARY_MARKER))


@pytest.fixture(autouse=True)
def _quiet_dask() -> Iterator[None]:
    import logging

    level = logging.getLogger("distributed").level
    logging.getLogger("distributed").setLevel(logging.ERROR)
    yield
    logging.getLogger("distributed").setLevel(level)
