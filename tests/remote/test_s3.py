"""S3 logdirs against moto's real S3 server through s3fs: AWS_* variables, custom endpoints (AWS_ENDPOINT_URL and
the old plugin's S3_ENDPOINT), runs at the top of a bucket, and errors for a missing bucket or a dead endpoint."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from tb_plugin.catalog.catalog import Catalog, Root
from tb_plugin.catalog.storage import Storage
from tb_plugin.workspace import Workspace
from tests.conftest import API, wait_until_settled
from tests.remote.conftest import SAMPLES, Moto, closed_port, sample_runs, sample_span_count


def runs_of(body: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    return {r["name"]: [s for w in r["workers"] for s in w["spans"]] for r in body["runs"]}


def query(run: str, worker: str, **more: str) -> str:
    return urlencode({"run": run, "worker": worker, "span": "1", **more})


def test_s3_lists_loads_and_serves_every_seeded_run(tensorboard_app: Any, s3_env: Any, local_samples: Path) -> None:
    """Every seeded sample run (conftest.REMOTE_RUNS) loads and answers as the same files do from a local folder."""
    client = tensorboard_app(None, logdir_spec=f"local:{local_samples},s3://profiles/shared/")
    body = wait_until_settled(client, timeout=120, expect_spans=2 * sample_span_count())
    assert body["errors"] == []
    runs = runs_of(body)
    assert {r for r in runs if not r.startswith("local/")} == set(sample_runs())
    assert all(s["state"] == "ready" for spans in runs.values() for s in spans), body
    for run in sorted(sample_runs()):
        worker = next(r for r in body["runs"] if r["name"] == run)["workers"][0]["name"]
        there = client.get(f"{API}/overview?{query(run, worker)}")
        here = client.get(f"{API}/overview?{query('local/' + run, worker)}")
        assert there.status_code == 200 and there.get_json() == here.get_json(), run
    worker = next(r for r in body["runs"] if r["name"] == "ddp_resnet")["workers"][0]["name"]
    window = client.get(f"{API}/trace/window?{query('ddp_resnet', worker, width_px='600')}")
    assert window.status_code == 200 and window.get_json()["tracks"]
    original = next(p for p in sample_runs()["ddp_resnet"] if p.name.startswith(worker + ".")).read_bytes()
    assert client.get(f"{API}/trace/file?{query('ddp_resnet', worker)}").data == original
    assert "testing-secret-value" not in json.dumps(body)


def test_old_plugin_s3_endpoint_and_runs_at_the_top_of_a_bucket(s3_env: Any, moto: Moto) -> None:
    s3_env.delenv("AWS_ENDPOINT_URL")
    s3_env.setenv("S3_ENDPOINT", f"127.0.0.1:{moto.port}")  # host:port, as the old plugin's README had it
    s3_env.setenv("S3_USE_HTTPS", "0")
    storage = Storage("s3://profiles")
    assert storage.location.endpoint == moto.endpoint
    keys = {f.key for f in Catalog([Root(None, storage)]).scan()}
    cpu = sample_runs()["cpu_only"][0]
    assert ("profiles", cpu.name.split(".")[0], "1") in keys  # the trace at the top of the bucket
    assert ("shared/cpu_only", cpu.name.split(".")[0], "1") in keys
    assert len(keys) == sample_span_count() + 1


def test_s3_endpoint_variables_in_order(s3_env: Any, moto: Moto) -> None:
    s3_env.setenv("S3_ENDPOINT", "http://127.0.0.1:1")
    assert Storage("s3://profiles").location.endpoint == moto.endpoint  # AWS_ENDPOINT_URL wins
    s3_env.setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:2")
    assert Storage("s3://profiles").location.endpoint == "http://127.0.0.1:2"


def test_s3_missing_bucket_and_unreachable_endpoint(s3_env: Any, moto: Moto, tmp_path: Path) -> None:
    ws = Workspace([(None, "s3://no-such-bucket/runs"), (None, "s3://profiles/not-there")],
                   cache_dir=str(tmp_path / "cache"), rescan_seconds=0)
    try:
        ws.scan_once()
        (error,) = ws.errors()  # a missing folder in an existing bucket is an empty logdir, not an error
        assert "S3 bucket 'no-such-bucket' does not exist" in error and moto.endpoint in error
    finally:
        ws.close()
    port = closed_port()
    s3_env.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
    s3_env.setenv("AWS_MAX_ATTEMPTS", "1")  # one try: the default's retries (test_store_retries) only add backoff
    ws = Workspace([(None, "s3://profiles/shared")], cache_dir=str(tmp_path / "cache"), rescan_seconds=0)
    try:
        started = time.monotonic()
        ws.scan_once()
        assert time.monotonic() - started < 10
        (error,) = ws.errors()
        assert f"cannot reach the S3 endpoint http://127.0.0.1:{port}" in error and "AWS_ENDPOINT_URL" in error
        assert "testing-secret-value" not in error
    finally:
        ws.close()


def test_no_aws_credentials_means_unsigned_requests(clean_env: Any, moto: Moto) -> None:
    """Nothing configured: unsigned (public bucket) requests, never botocore's instance-metadata probing."""
    clean_env.setenv("AWS_ENDPOINT_URL", moto.endpoint)
    storage = Storage("s3://profiles/shared")
    assert storage.location.auth == "anonymous"
    assert len(storage.list_files()) == sample_span_count()  # moto serves unsigned requests like a public bucket


def test_s3_refused_key_is_a_clear_error_and_other_logdirs_load(tensorboard_app: Any, s3_env: Any,
                                                                moto_with_auth: Moto, tmp_path: Path) -> None:
    from tests.conftest import cpu_op, write_trace

    s3_env.setenv("AWS_ENDPOINT_URL", moto_with_auth.endpoint)
    write_trace(tmp_path / "good" / "w.1.pt.trace.json", [cpu_op("aten::add", 0, 5)])
    client = tensorboard_app(None, logdir_spec=f"{tmp_path / 'good'},s3://profiles/shared")
    body = wait_until_settled(client, expect_spans=1)
    assert list(runs_of(body)) == ["good"] and runs_of(body)["good"][0]["state"] == "ready"
    (error,) = body["errors"]
    assert "S3 refused access to bucket 'profiles' with AWS_ACCESS_KEY_ID" in error
    assert "AWS_SECRET_ACCESS_KEY" in error and "testing-secret-value" not in json.dumps(body)


def test_s3_allocator_snapshots_are_listed_read_and_refused_like_local_ones(tensorboard_app: Any, s3_env: Any,
                                                                            moto: Moto) -> None:
    """Snapshots in a bucket: recognised by their first bytes (a checkpoint pickle beside them is not listed),
    read through s3fs with the logdir's credentials, a code-running pickle refused with its reason."""
    import pickle

    from tests.snapshots import training
    from tests.unit.test_snapshot import RunsCode

    s3 = moto.client()
    s3.create_bucket(Bucket="snapshots")
    (oom,) = (SAMPLES / "memory_snapshot" / "oom").glob("*.pickle.gz")
    s3.put_object(Bucket="snapshots", Key=f"oom/{oom.name}", Body=oom.read_bytes())
    s3.put_object(Bucket="snapshots", Key="mixed/train.pickle", Body=pickle.dumps(training().dump()))
    s3.put_object(Bucket="snapshots", Key="mixed/evil.pickle",
                  Body=pickle.dumps({"segments": [RunsCode(Path("/tmp/never"))], "device_traces": []}))
    s3.put_object(Bucket="snapshots", Key="mixed/checkpoint.pkl", Body=pickle.dumps({"weights": [1.0]}))
    time.sleep(2.1)
    client = tensorboard_app(None, logdir_spec="s3://snapshots")
    deadline = time.time() + 60
    while time.time() < deadline:
        body = client.get(f"{API}/runs").get_json()
        shots = {s["name"]: s for r in body["runs"] for s in r["snapshots"]}
        if len(shots) == 3 and all(s["state"] in ("ready", "failed") for s in shots.values()):
            break
        time.sleep(0.2)
    assert body["errors"] == [] and set(shots) == {oom.name, "train.pickle", "evil.pickle"}, body
    assert shots["evil.pickle"]["state"] == "failed" and "refused: it asks to import" in shots["evil.pickle"]["error"]
    summary = client.get(f"{API}/snapshot/summary?{urlencode({'run': 'oom', 'snapshot': oom.name})}").get_json()
    local = tb_plugin_summary(oom)
    assert summary["oom"]["requested_bytes"] == 512 << 20 and summary["peak_live_bytes"] == local["peak_live_bytes"]
    assert "testing-secret-value" not in json.dumps(body)


def tb_plugin_summary(path: Path) -> dict[str, Any]:
    import tb_plugin

    summary: dict[str, Any] = tb_plugin.open_snapshot(str(path)).summary()
    return summary
