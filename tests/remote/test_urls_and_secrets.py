"""Without emulators: how logdir URLs map to stores, which credentials each form picks up, missing optional
packages, and the scrubber that keeps every secret out of messages, logs and the UI."""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from tb_plugin.catalog import remote
from tb_plugin.catalog.access import gcs_token
from tb_plugin.catalog.catalog import TraceFile
from tb_plugin.catalog.remote import Access, RemoteError, resolve, scrub
from tb_plugin.catalog.storage import Storage
from tb_plugin.workspace import Workspace
from tests.conftest import cpu_op, write_trace
from tests.remote.conftest import ACCOUNT_KEY

SAS = "sv=2024-08-04&ss=b&srt=co&sp=rl&se=2030-01-01T00:00:00Z&spr=https&sig=AbCdEf0123456789%2BSecretSig%3D"


# --------------------------------------------------------------------------------------------- the scrubber


def test_scrubber_removes_every_kind_of_secret(clean_env: Any) -> None:
    conn = f"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={ACCOUNT_KEY};EndpointSuffix=core.windows.net"
    clean_env.setenv("AZURE_STORAGE_CONNECTION_STRING", conn)
    clean_env.setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
    clean_env.setenv("AZURE_STORAGE_SAS_TOKEN", "?" + SAS)
    text = "\n".join([
        f"failed with connection string {conn}",
        f"AccountKey={ACCOUNT_KEY} in a message of its own",  # the key alone
        f"GET https://acct.blob.core.windows.net/c/x?{SAS}",  # a SAS in a URL
        "SharedAccessSignature=sv=2020&sig=zzzzzzzzzzzzzzzzzzz;BlobEndpoint=https://x",
        "Authorization: SharedKey acct:c2VjcmV0c2lnbmF0dXJl",
        "headers {'Authorization': 'Bearer eyJhbGciOi.secret.token'}",
        "AKIAIOSFODNN7EXAMPLE with wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "https://bucket.s3.amazonaws.com/k?X-Amz-Credential=AKIA%2F&X-Amz-Signature=deadbeefcafe&X-Amz-Date=1",
        '{"type": "service_account", "private_key": "-----BEGIN PRIVATE KEY-----\\nMIIE"}',
    ])
    out = scrub(text)
    for secret in (ACCOUNT_KEY, "AbCdEf0123456789", "zzzzzzzzzzzzzzzzzzz", "c2VjcmV0c2lnbmF0dXJl",
                   "eyJhbGciOi", "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI", "deadbeefcafe", "BEGIN PRIVATE KEY"):
        assert secret not in out, (secret, out)
    # what is needed to understand the message stays
    for kept in ("AccountName=acct", "https://acct.blob.core.windows.net/c/x", "X-Amz-Date=1",
                 "BlobEndpoint=https://x", "service_account"):
        assert kept in out, (kept, out)


def test_scrubber_uses_the_captured_access_not_only_the_environment(clean_env: Any) -> None:
    access = Access((("AZURE_STORAGE_ACCOUNT_KEY", "a-key-that-is-no-longer-in-the-environment"),), "sig=urlsecret1")
    out = scrub("key a-key-that-is-no-longer-in-the-environment and sas sig=urlsecret1", access)
    assert "a-key-that" not in out and "urlsecret1" not in out


def test_reprs_never_show_credentials(clean_env: Any) -> None:
    clean_env.setenv("AZURE_STORAGE_ACCOUNT_KEY", ACCOUNT_KEY)
    access = Access.from_environ("sig=abcdefghij")
    assert ACCOUNT_KEY not in repr(access) and "abcdefghij" not in repr(access)
    f = TraceFile("r", "w", "1", "az://c/r/w.1.pt.trace.json", 1, 0.0, "etag", access)
    assert ACCOUNT_KEY not in repr(f) and "abcdefghij" not in repr(f)
    storage = Storage("https://acct.blob.core.windows.net/c/runs")
    assert ACCOUNT_KEY not in repr(storage.fs._ptp_auth)


# --------------------------------------------------------------------------------------------- URL forms


def test_azure_https_form_maps_account_container_and_prefix(clean_env: Any) -> None:
    loc = resolve("https://myacct.blob.core.windows.net/profiles/team/runs/")
    assert (loc.store, loc.account, loc.container, loc.path) == ("azure", "myacct", "profiles", "profiles/team/runs")
    assert loc.url == "https://myacct.blob.core.windows.net/profiles/team/runs"
    assert loc.to_url("profiles/team/runs/r1/w.1.pt.trace.json") == f"{loc.url}/r1/w.1.pt.trace.json"
    top = resolve("https://myacct.blob.core.windows.net/profiles")
    assert (top.container, top.path) == ("profiles", "profiles")
    china = resolve("https://acct2.blob.core.chinacloudapi.cn/c/p")
    assert (china.account, china.container) == ("acct2", "c")


def test_azure_abfs_form_with_account_in_the_url(clean_env: Any) -> None:
    loc = resolve("abfss://profiles@myacct.dfs.core.windows.net/runs")
    assert (loc.account, loc.container, loc.path) == ("myacct", "profiles", "profiles/runs")
    assert loc.to_url("profiles/runs/r/w.1.pt.trace.json") == \
        "abfss://profiles@myacct.dfs.core.windows.net/runs/r/w.1.pt.trace.json"


def test_az_form_needs_an_account(clean_env: Any) -> None:
    with pytest.raises(RemoteError, match="AZURE_STORAGE_ACCOUNT_NAME"):
        resolve("az://profiles/runs")
    clean_env.setenv("AZURE_STORAGE_ACCOUNT_NAME", "fromenv")
    clean_env.setenv("AZURE_STORAGE_ACCOUNT_KEY", ACCOUNT_KEY)
    loc = resolve("az://profiles/runs")
    assert (loc.account, loc.auth) == ("fromenv", "AZURE_STORAGE_ACCOUNT_KEY")
    assert loc.fs.service_client.credential.account_name == "fromenv"


def test_azure_credentials_in_order(clean_env: Any) -> None:
    url = "https://acct.blob.core.windows.net/c/p"
    clean_env.setenv("AZURE_STORAGE_SAS_TOKEN", SAS)
    assert resolve(url).auth == "AZURE_STORAGE_SAS_TOKEN"
    clean_env.setenv("AZURE_STORAGE_ACCOUNT_KEY", ACCOUNT_KEY)
    assert resolve(url).auth == "AZURE_STORAGE_ACCOUNT_KEY"
    # a connection string also gives the endpoint: it wins even over the URL's host (emulators, other clouds)
    clean_env.setenv("AZURE_STORAGE_CONNECTION_STRING",
                     f"AccountName=devstoreaccount1;AccountKey={ACCOUNT_KEY};BlobEndpoint=http://127.0.0.1:1/dev;")
    loc = resolve(url)
    assert (loc.auth, loc.endpoint, loc.account) == ("AZURE_STORAGE_CONNECTION_STRING", "http://127.0.0.1:1/dev",
                                                     "devstoreaccount1")
    # a SAS in the URL itself wins over everything, and never shows
    loc = resolve(f"{url}?{SAS}")
    assert loc.auth == "the SAS token in the URL" and loc.access.url_sas == SAS and loc.url == url
    assert "sig=" in loc.fs.service_client.url


def test_a_sas_in_the_logdir_url_is_never_shown(clean_env: Any, tmp_path: Path) -> None:
    ws = Workspace([(None, f"https://acct.blob.core.windows.net/c/p?{SAS}")], cache_dir=str(tmp_path),
                   rescan_seconds=0)
    try:
        assert ws.logdir_display == "https://acct.blob.core.windows.net/c/p?***"
        assert Storage(f"https://acct.blob.core.windows.net/c/p?{SAS}").url == ws.logdir_display
    finally:
        ws.close()


def test_urls_of_no_known_store_say_what_works(clean_env: Any, tmp_path: Path) -> None:
    write_trace(tmp_path / "good" / "w.1.pt.trace.json", [cpu_op("x", 0, 1)])
    roots = [(None, "https://example.com/some/folder"), (None, "nosuchproto://x/y"), (None, "s3://"),
             (None, "https://acct.blob.core.windows.net/"), (None, str(tmp_path / "good"))]
    ws = Workspace(roots, cache_dir=str(tmp_path / "cache"), rescan_seconds=0)
    try:
        ws.scan_once()
        errors = ws.errors()
        assert len(errors) == 4, errors
        assert "only Azure Blob https URLs" in errors[0] and "az://, s3://, gs:// or hdfs://" in errors[0]
        assert "unknown storage protocol nosuchproto://" in errors[1]
        assert "names no bucket" in errors[2] and "names no container" in errors[3]
        assert [f.run for f in ws._files.values()] == ["good"]
    finally:
        ws.close()


def test_s3_credentials(clean_env: Any) -> None:
    loc = resolve("s3://bucket/runs")
    assert loc.auth == "anonymous" and loc.fs.anon is True
    clean_env.setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLEEXAMPLE12")
    clean_env.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    loc = resolve("s3://bucket/runs")
    assert loc.auth == "AWS_ACCESS_KEY_ID" and loc.fs.anon is False and loc.fs.key == "AKIAEXAMPLEEXAMPLE12"
    clean_env.setenv("AWS_NO_SIGN_REQUEST", "true")
    assert resolve("s3://bucket/runs").fs.anon is True
    clean_env.delenv("AWS_ACCESS_KEY_ID")
    clean_env.delenv("AWS_NO_SIGN_REQUEST")
    clean_env.setenv("AWS_PROFILE", "research")  # botocore's own chain (profiles, SSO) then has something to find
    assert resolve("s3://bucket/runs").auth == "the AWS profile/configuration"


def test_gcs_token_choice_and_the_probe_switch(clean_env: Any, monkeypatch: Any, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))  # no gcloud login on this machine's home
    assert gcs_token(Access.from_environ()) == ("anon", "anonymous")
    clean_env.setenv("GOOGLE_APPLICATION_CREDENTIALS", "/keys/sa.json")
    assert gcs_token(Access.from_environ()) == ("/keys/sa.json", "GOOGLE_APPLICATION_CREDENTIALS")
    clean_env.delenv("GOOGLE_APPLICATION_CREDENTIALS")
    adc = tmp_path / ".config" / "gcloud" / "application_default_credentials.json"
    adc.parent.mkdir(parents=True)
    adc.write_text("{}")
    assert gcs_token(Access.from_environ())[0] == "google_default"
    clean_env.setenv("STORAGE_EMULATOR_HOST", "127.0.0.1:9023")
    assert gcs_token(Access.from_environ())[0] == "anon"
    clean_env.delenv("STORAGE_EMULATOR_HOST")
    monkeypatch.delenv("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "nobody"))
    loc = resolve("gs://bucket/runs")
    assert (loc.store, loc.container, loc.path, loc.auth) == ("gcs", "bucket", "bucket/runs", "anonymous")
    assert os.environ["GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT"] == "false"  # no 60 s bucket-type probe


def test_hdfs_without_hadoop_says_what_to_install(clean_env: Any, monkeypatch: Any, tmp_path: Path) -> None:
    # No usable Java or libhdfs (whatever this machine has): pyarrow cannot open HDFS, and the user reads why.
    for name in ("JAVA_HOME", "HADOOP_HOME", "ARROW_LIBHDFS_DIR"):
        monkeypatch.setenv(name, str(tmp_path / "missing" / name))
    ws = Workspace([(None, "hdfs://127.0.0.1:1/user/me/runs")], cache_dir=str(tmp_path), rescan_seconds=0)
    try:
        ws.scan_once()
        (error,) = ws.errors()
        assert "cannot connect to HDFS" in error and "JAVA_HOME" in error and "[hdfs]" in error
        assert len(error.splitlines()) == 1
    finally:
        ws.close()


# --------------------------------------------------------------------------------------------- missing packages


@pytest.mark.parametrize(("url", "module", "extra"), [
    ("https://acct.blob.core.windows.net/c/p", "adlfs", "azure"),
    ("az://c/p", "adlfs", "azure"),
    ("s3://bucket/p", "s3fs", "s3"),
    ("gs://bucket/p", "gcsfs", "gcs"),
])
def test_a_missing_package_names_the_extra_to_install(clean_env: Any, monkeypatch: Any, tmp_path: Path,
                                                      url: str, module: str, extra: str) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # import fails as if it were not installed
    monkeypatch.setattr(remote, "_AZURE_CLASS", None)
    write_trace(tmp_path / "good" / "w.1.pt.trace.json", [cpu_op("x", 0, 1)])
    ws = Workspace([(None, url), (None, "https://example.com/x"), (None, str(tmp_path / "good"))],
                   cache_dir=str(tmp_path / "cache"), rescan_seconds=0)
    try:
        for _ in range(2):  # the unusable URL is tried again at each scan; both messages stay
            ws.scan_once()
            error, other = ws.errors()
            assert error.startswith(f"cannot open logdir {url}:")
            assert f'pip install "pytorch-tb-profiler[{extra}]"' in error and module in error
            assert other.startswith("cannot open logdir https://example.com/x: only Azure Blob https URLs")
            assert [f.run for f in ws._files.values()] == ["good"]
    finally:
        ws.close()


def test_scan_failures_are_logged_without_secrets(clean_env: Any, monkeypatch: Any, tmp_path: Path,
                                                  caplog: Any) -> None:
    clean_env.setenv("AZURE_STORAGE_ACCOUNT_KEY", ACCOUNT_KEY)
    ws = Workspace([(None, str(tmp_path))], cache_dir=str(tmp_path / "cache"), rescan_seconds=0)

    def boom() -> None:
        raise RuntimeError(f"AccountKey={ACCOUNT_KEY} leaked")

    monkeypatch.setattr(ws, "scan_once", boom)
    with caplog.at_level(logging.ERROR, logger="tb_plugin.workspace"):
        ws.start()
        assert ws.wait_scanned(5)
        ws._thread.join(5)
    ws.close()
    assert "scanning the logdir failed" in caplog.text and ACCOUNT_KEY not in caplog.text
    assert ACCOUNT_KEY not in json.dumps(ws.errors())
