"""Azure Blob logdirs against a real Azurite: the https and az:// forms, anonymous public containers, SAS, refused
keys, unreachable endpoints, uploads still in progress, one listing per scan and the parse cache across restarts."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from tb_plugin.catalog.catalog import Catalog, Root
from tb_plugin.catalog.storage import Storage
from tb_plugin.jobs.cache import ParseCache
from tb_plugin.workspace import Workspace
from tests.conftest import API, cpu_op, spans_by_file, wait_until_settled
from tests.remote.conftest import (
    ACCOUNT,
    ACCOUNT_KEY,
    WRONG_KEY,
    Azurite,
    closed_port,
    sample_runs,
    sample_span_count,
)

HTTPS = f"https://{ACCOUNT}.blob.core.windows.net"


def runs_of(body: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    return {r["name"]: [s for w in r["workers"] for s in w["spans"]] for r in body["runs"]}


def query(run: str, worker: str, span: str = "1", **more: str) -> str:
    return urlencode({"run": run, "worker": worker, "span": span, **more})


def first_worker(body: dict[str, Any], run: str) -> str:
    return str(next(r for r in body["runs"] if r["name"] == run)["workers"][0]["name"])


@pytest.fixture
def container(azurite: Azurite) -> Iterator[str]:
    """A fresh, empty private container of its own for a test that writes."""
    name = f"t{time.time_ns()}"
    service = azurite.service()
    service.create_container(name)
    yield name
    service.delete_container(name)


def test_https_form_lists_loads_and_serves_every_seeded_run(tensorboard_app: Any, azure_env: Any,
                                                        local_samples: Path) -> None:
    """The production-shaped URL, with the endpoint from AZURE_STORAGE_CONNECTION_STRING: every seeded sample run
    (conftest.REMOTE_RUNS) loads through the loader processes and answers exactly as the same files do from a local
    folder."""
    client = tensorboard_app(None, logdir_spec=f"local:{local_samples},{HTTPS}/profiles/shared")
    body = wait_until_settled(client, timeout=120, expect_spans=2 * sample_span_count())
    assert body["errors"] == []
    runs = runs_of(body)
    remote = {name for name in runs if not name.startswith("local/")}
    assert remote == set(sample_runs())
    assert all(s["state"] == "ready" for spans in runs.values() for s in spans), body
    for run in sorted(sample_runs()):
        worker = first_worker(body, run)
        for route in ("summary", "overview"):
            there = client.get(f"{API}/{route}?{query(run, worker)}")
            here = client.get(f"{API}/{route}?{query('local/' + run, worker)}")
            assert there.status_code == 200 and there.get_json() == here.get_json(), (route, run)
    # The Trace view on a remote run, and the original file streamed back from the store.
    worker = first_worker(body, "ddp_resnet")
    window = client.get(f"{API}/trace/window?{query('ddp_resnet', worker, width_px='800')}")
    assert window.status_code == 200 and window.get_json()["tracks"]
    local_window = client.get(f"{API}/trace/window?{query('local/ddp_resnet', worker, width_px='800')}")
    assert window.get_json() == local_window.get_json()
    original = next(p for p in sample_runs()["ddp_resnet"] if p.name.startswith(worker + ".")).read_bytes()
    download = client.get(f"{API}/trace/file?{query('ddp_resnet', worker)}")
    assert download.status_code == 200 and download.data == original
    assert ACCOUNT_KEY not in json.dumps(body)


def wait_listed(client: Any, spans: int, ready: str, timeout: float = 180.0) -> dict[str, Any]:
    """Poll /runs until ``spans`` spans are listed and run ``ready`` has loaded (the rest may still be parsing).
    The limit only matters on a loaded machine: every sample is listed and parsed through Azurite (about 20 runs)."""
    deadline = time.monotonic() + timeout
    body: dict[str, Any] = {}
    while time.monotonic() < deadline:
        body = client.get(f"{API}/runs").get_json()
        runs = runs_of(body)
        if sum(map(len, runs.values())) == spans and ready in runs and all(s["state"] == "ready" for s in runs[ready]):
            return body
        time.sleep(0.1)
    raise AssertionError(f"not listed in {timeout}s: {json.dumps(body)[:2000]}")


def close(client: Any) -> None:
    """Stop a test client's server (its loader processes) once the test is done with it, so that the parses the
    next server waits for have the cores (the fixture's teardown closes it again, which does nothing)."""
    for plugin in client.wsgi_app._plugins:
        if getattr(plugin, "workspace", None) is not None:
            plugin.workspace.close()


def test_az_and_abfs_forms_and_runs_anywhere_in_the_container(tensorboard_app: Any, azure_env: Any) -> None:
    client = tensorboard_app("az://profiles/shared")
    body = wait_listed(client, sample_span_count(), ready="cpu_only")
    assert set(runs_of(body)) == set(sample_runs()) and body["errors"] == []
    close(client)
    # The whole container: runs are folders at any depth.
    client = tensorboard_app("abfs://profiles")
    body = wait_listed(client, sample_span_count() + 1, ready="team/a/b/deep_run")
    assert set(runs_of(body)) == {f"shared/{r}" for r in sample_runs()} | {"team/a/b/deep_run"}
    overview = client.get(f"{API}/overview?{query('team/a/b/deep_run', first_worker(body, 'team/a/b/deep_run'))}")
    assert overview.status_code == 200


def test_traces_at_the_top_of_a_container_form_a_run_named_after_it(tensorboard_app: Any, azure_env: Any) -> None:
    client = tensorboard_app(f"{HTTPS}/toplevel/")
    body = wait_until_settled(client, expect_spans=1)
    assert list(runs_of(body)) == ["toplevel"] and runs_of(body)["toplevel"][0]["state"] == "ready"


def test_anonymous_public_container(tensorboard_app: Any, clean_env: Any, azurite: Azurite) -> None:
    """No key and no SAS: a public container lists and loads; a private one says what to set."""
    clean_env.setenv("AZURE_STORAGE_CONNECTION_STRING", f"BlobEndpoint={azurite.endpoint};")  # the endpoint only
    client = tensorboard_app(None, logdir_spec=f"{HTTPS}/public/demo,{HTTPS}/profiles/shared")
    body = wait_until_settled(client, expect_spans=1)
    assert list(runs_of(body)) == ["cpu_only"] and runs_of(body)["cpu_only"][0]["state"] == "ready"
    (error,) = body["errors"]
    assert "Azure refused anonymous access to container 'profiles'" in error
    assert "AZURE_STORAGE_CONNECTION_STRING or AZURE_STORAGE_SAS_TOKEN" in error and "public" in error
    r = client.get(f"{API}/overview?{query('cpu_only', first_worker(body, 'cpu_only'))}")
    assert r.status_code == 200


def test_no_credentials_means_anonymous_never_azure_identity(clean_env: Any, monkeypatch: Any) -> None:
    """Without any credential adlfs would try DefaultAzureCredential (managed identity, CLI logins: network
    probes). The plugin builds an anonymous client instead, before any request."""
    import azure.identity
    import azure.identity.aio

    def forbidden(*_a: Any, **_k: Any) -> Any:
        raise AssertionError("DefaultAzureCredential must never be built")

    monkeypatch.setattr(azure.identity, "DefaultAzureCredential", forbidden)
    monkeypatch.setattr(azure.identity.aio, "DefaultAzureCredential", forbidden)
    storage = Storage("https://someaccount.blob.core.windows.net/demo/runs")
    loc = storage.location
    assert (loc.store, loc.account, loc.container, loc.auth) == ("azure", "someaccount", "demo", "anonymous")
    assert loc.endpoint == "https://someaccount.blob.core.windows.net"
    assert storage.fs.service_client.credential is None
    assert storage.display("demo/runs/r/w.1.pt.trace.json") == f"{loc.url}/r/w.1.pt.trace.json"


def test_wrong_key_is_a_clear_error_and_other_logdirs_still_load(tensorboard_app: Any, clean_env: Any,
                                                                  azurite: Azurite, tmp_path: Path) -> None:
    from tests.conftest import write_trace

    clean_env.setenv("AZURE_STORAGE_CONNECTION_STRING", azurite.connection_string(WRONG_KEY))
    write_trace(tmp_path / "good" / "w.1.pt.trace.json", [cpu_op("aten::add", 0, 5)])
    client = tensorboard_app(None, logdir_spec=f"{tmp_path / 'good'},{HTTPS}/profiles/shared")
    body = wait_until_settled(client, expect_spans=1)
    assert list(runs_of(body)) == ["good"] and runs_of(body)["good"][0]["state"] == "ready"
    (error,) = body["errors"]
    assert f"Azure refused access to container 'profiles' of storage account '{ACCOUNT}'" in error
    assert "AZURE_STORAGE_CONNECTION_STRING or AZURE_STORAGE_SAS_TOKEN" in error
    text = json.dumps(body)
    assert WRONG_KEY not in text and ACCOUNT_KEY not in text and "AccountKey" not in text
    # Rescans keep reporting it, and nothing answers 5xx.
    time.sleep(1.0)
    again = client.get(f"{API}/runs")
    assert again.status_code == 200 and again.get_json()["errors"] == [error]
    assert client.get(f"{API}/views?run=shared").status_code == 404


def test_sas_in_the_connection_string(tensorboard_app: Any, clean_env: Any, azurite: Azurite) -> None:
    from datetime import datetime, timedelta, timezone

    from azure.storage.blob import ContainerSasPermissions, generate_container_sas

    sas = generate_container_sas(ACCOUNT, "profiles", account_key=ACCOUNT_KEY,
                                 permission=ContainerSasPermissions(read=True, list=True),
                                 expiry=datetime.now(timezone.utc) + timedelta(hours=1))
    clean_env.setenv("AZURE_STORAGE_CONNECTION_STRING", azurite.connection_string(key=None, sas=sas))
    client = tensorboard_app(f"{HTTPS}/profiles/shared")
    body = wait_listed(client, sample_span_count(), ready="cpu_only")  # listed with the SAS, and read with it
    assert set(runs_of(body)) == set(sample_runs()) and body["errors"] == []
    signature = dict(p.split("=", 1) for p in sas.split("&"))["sig"]
    assert signature not in json.dumps(body)


def test_unreachable_endpoint_and_missing_container(clean_env: Any, azurite: Azurite, tmp_path: Path) -> None:
    port = closed_port()
    dead = azurite.connection_string().replace(f"127.0.0.1:{azurite.port}", f"127.0.0.1:{port}")
    clean_env.setenv("AZURE_STORAGE_CONNECTION_STRING", dead)
    # one try: the default's bounded retries (test_store_retries) would only add their backoff, seconds of waiting
    clean_env.setenv("AZURE_STORAGE_MAX_ATTEMPTS", "1")
    ws = Workspace([(None, f"{HTTPS}/profiles/shared")], cache_dir=str(tmp_path / "cache"), rescan_seconds=0)
    try:
        started = time.monotonic()
        ws.scan_once()
        assert time.monotonic() - started < 10  # bounded retries, not minutes
        (error,) = ws.errors()
        assert f"cannot reach the Azure Blob endpoint http://127.0.0.1:{port}/{ACCOUNT}" in error
        assert "BlobEndpoint in AZURE_STORAGE_CONNECTION_STRING" in error and ACCOUNT_KEY not in error
    finally:
        ws.close()
    clean_env.setenv("AZURE_STORAGE_CONNECTION_STRING", azurite.connection_string())
    ws = Workspace([(None, "az://nosuchcontainer/runs")], cache_dir=str(tmp_path / "cache"), rescan_seconds=0)
    try:
        ws.scan_once()
        (error,) = ws.errors()
        assert "Azure container 'nosuchcontainer'" in error and "does not exist" in error
    finally:
        ws.close()


def test_a_blob_still_being_written_waits_and_a_changed_blob_is_a_new_version(azure_env: Any, azurite: Azurite,
                                                                              container: str) -> None:
    from azure.storage.blob import BlobType

    client = azurite.service().get_container_client(container)
    blob = client.get_blob_client("run/w.1.pt.trace.json")
    blob.upload_blob(b'{"traceEvents": [', blob_type=BlobType.APPENDBLOB)
    catalog = Catalog([Root(None, Storage(f"az://{container}"))])
    assert catalog.scan(time.time()) == [] and catalog.pending == 1  # young: may still grow
    blob.append_block(b'{"ph": "X", "name": "a", "ts": 1, "dur": 2, "pid": 1, "tid": 1}]}')
    assert catalog.scan(time.time()) == [] and catalog.pending == 1  # it grew: still waiting
    (ready,) = catalog.scan(time.time())  # unchanged since the last scan: complete
    assert ready.key == ("run", "w", "1") and ready.etag and ready.url == f"az://{container}/run/w.1.pt.trace.json"
    assert ready.access is not None and "AZURE_STORAGE_CONNECTION_STRING" not in repr(ready)
    # Replaced by a file of the same size: a new etag, so a new cache entry (the parse is not reused).
    blob.upload_blob(b'{"traceEvents": [{"ph": "X", "name": "b", "ts": 1, "dur": 2, "pid": 1, "tid": 1}]}',
                     overwrite=True)
    assert catalog.scan(time.time()) == [ready]  # the new version settles: the last one stays listed meanwhile
    (changed,) = catalog.scan(time.time())
    assert changed.size == ready.size and changed.etag != ready.etag
    cache = ParseCache(None)
    assert cache.entry(changed.identity) != cache.entry(ready.identity)


def test_one_listing_per_scan_not_a_request_per_blob(azure_env: Any, azurite: Azurite, container: str,
                                                     monkeypatch: Any) -> None:
    import aiohttp

    client = azurite.service().get_container_client(container)
    for i in range(60):
        client.upload_blob(f"run{i % 6}/sub/w{i}.{i}.pt.trace.json", b"{}")
    storage = Storage(f"{HTTPS}/{container}")
    storage.list_files()  # connect once (the client's first request may include a handshake of its own)
    requests: list[str] = []
    original = aiohttp.ClientSession._request

    async def counting(self: Any, method: str, url: Any, *args: Any, **kwargs: Any) -> Any:
        requests.append(f"{method} {url}")
        return await original(self, method, url, *args, **kwargs)

    monkeypatch.setattr(aiohttp.ClientSession, "_request", counting)
    files = Catalog([Root(None, storage)]).scan(time.time() + 60)
    assert len(files) == 60
    assert len(requests) <= 3, requests  # one listing (and adlfs's probe of the root), never one per blob


def test_parse_cache_is_reused_across_restarts(azure_env: Any, tmp_path: Path) -> None:
    cache_dir = tmp_path / "cache"

    def load_once() -> tuple[Workspace, Any]:
        ws = Workspace([(None, "az://toplevel")], cache_dir=str(cache_dir), rescan_seconds=0)
        ws.scan_once()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            listing = ws.listing()
            states = [s["state"] for r in listing for w in r["workers"] for s in w["spans"]]
            if states and all(s in ("ready", "failed") for s in states):
                return ws, spans_by_file({"runs": listing})
            time.sleep(0.1)
        raise AssertionError(f"not settled: {ws.listing()}")

    first, spans = load_once()
    try:
        assert [s["state"] for s in spans.values()] == ["ready"]
        (f,) = first._files.values()
        assert f.etag
        entry = first.scheduler.cache.entry(f.identity)
        assert first.scheduler.cache.has(entry)
    finally:
        first.close()
    entries = sorted(p.name for p in cache_dir.iterdir() if not p.name.startswith("."))
    second, spans = load_once()
    try:
        assert [s["state"] for s in spans.values()] == ["ready"]
        assert second.scheduler.counts()["parsed_here"] == 0  # opened from the cache: no loader process ran
        assert sorted(p.name for p in cache_dir.iterdir() if not p.name.startswith(".")) == entries
    finally:
        second.close()


def test_original_file_of_a_remote_span_and_its_failures(tensorboard_app: Any, azure_env: Any, azurite: Azurite,
                                                         container: str) -> None:
    """``/trace/file`` streams the original from the store; a blob deleted since is a 404, a refused credential a
    502 naming what to set (never a 500)."""
    import dataclasses

    from tb_plugin.catalog.storage import Access
    from tb_plugin.workspace import LookupFailed

    cpu = sample_runs()["cpu_only"][0]
    azurite.upload(container, f"run/{cpu.name}", cpu.read_bytes())
    time.sleep(2.1)
    client = tensorboard_app(f"az://{container}", profiler_rescan_interval=60)
    body = wait_until_settled(client, expect_spans=1)
    worker = first_worker(body, "run")
    assert client.get(f"{API}/trace/file?{query('run', worker)}").data == cpu.read_bytes()

    ws = Workspace([(None, f"az://{container}")], rescan_seconds=0)
    try:
        ws.scan_once()
        (f,) = ws._files.values()
        azure_env.setenv("AZURE_STORAGE_CONNECTION_STRING", azurite.connection_string(WRONG_KEY))
        with pytest.raises(LookupFailed) as refused:
            ws.open_file(dataclasses.replace(f, access=Access.from_environ()))
        assert refused.value.status == 502 and "Azure refused access to container" in str(refused.value)
        assert WRONG_KEY not in str(refused.value)
    finally:
        ws.close()

    # The loader kept the original beside its parse: the download needs no new fetch, even once the blob is gone.
    azurite.delete(container, f"run/{cpu.name}")
    r = client.get(f"{API}/trace/file?{query('run', worker)}")
    assert r.status_code == 200 and r.data == cpu.read_bytes()
    # Without that copy (a workspace that never loaded it) a deleted blob is a 404 at the route (FileNotFoundError).
    ws = Workspace([(None, f"az://{container}")], rescan_seconds=0)
    try:
        with pytest.raises(FileNotFoundError):
            ws.open_file(f)
    finally:
        ws.close()
