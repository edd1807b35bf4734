"""How often a request to a store is tried: bounded by default (4 tries, Azure a refused connection twice), and set
by ``AWS_MAX_ATTEMPTS`` (botocore's own variable, which the plugin's explicit client configuration used to hide) or
``AZURE_STORAGE_MAX_ATTEMPTS``; a bad value is refused with a message naming the variable. ``1`` makes an
unreachable store an error at once: what the tests of unreachable endpoints set, so that they never wait out a
backoff (tests/remote/test_azure.py, test_s3.py, tests/unit/test_cli.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tb_plugin.catalog import remote
from tb_plugin.catalog.storage import Storage
from tb_plugin.workspace import Workspace
from tests.remote.conftest import ACCOUNT, ACCOUNT_KEY, closed_port


def s3_retries(storage: Storage) -> dict[str, Any]:
    """The retry settings of the botocore client s3fs builds (connecting makes no request)."""
    storage.fs.connect()
    retries: dict[str, Any] = storage.fs.s3.meta.config.retries
    return retries


def azure_retry(storage: Storage) -> Any:
    return storage.fs.service_client._config.retry_policy


def test_the_default_is_four_tries_and_aws_max_attempts_changes_it(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{closed_port()}")
    assert s3_retries(Storage("s3://bucket/runs")) == {"total_max_attempts": 4, "mode": "standard"}
    clean_env.setenv("AWS_MAX_ATTEMPTS", "1")
    assert s3_retries(Storage("s3://bucket/runs"))["total_max_attempts"] == 1
    clean_env.setenv("AWS_MAX_ATTEMPTS", "7")
    assert s3_retries(Storage("s3://bucket/runs"))["total_max_attempts"] == 7


def test_azure_tries_four_times_a_refused_connection_twice_unless_told(clean_env: pytest.MonkeyPatch) -> None:
    conn = (f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={ACCOUNT_KEY};"
            f"BlobEndpoint=http://127.0.0.1:{closed_port()}/{ACCOUNT};")
    clean_env.setenv("AZURE_STORAGE_CONNECTION_STRING", conn)
    policy = azure_retry(Storage("az://profiles/shared"))
    assert (policy.total_retries, policy.connect_retries, policy.initial_backoff) == (3, 1, 1)
    clean_env.setenv("AZURE_STORAGE_MAX_ATTEMPTS", "1")
    policy = azure_retry(Storage("az://profiles/shared"))  # another setting: another filesystem, not fsspec's cached one
    assert (policy.total_retries, policy.connect_retries) == (0, 0)
    clean_env.setenv("AZURE_STORAGE_MAX_ATTEMPTS", "3")
    policy = azure_retry(Storage("az://profiles/shared"))
    assert (policy.total_retries, policy.connect_retries) == (2, 2)


@pytest.mark.parametrize("value", ["0", "-2", "many", "1.5", " "])
def test_a_bad_value_is_refused_naming_the_variable(clean_env: pytest.MonkeyPatch, value: str) -> None:
    clean_env.setenv("AWS_MAX_ATTEMPTS", value)
    clean_env.setenv("AZURE_STORAGE_MAX_ATTEMPTS", value)
    clean_env.setenv("AZURE_STORAGE_ACCOUNT_NAME", ACCOUNT)
    with pytest.raises(remote.RemoteError, match="AWS_MAX_ATTEMPTS must be a whole number of tries, 1 or more"):
        Storage("s3://bucket/runs")
    with pytest.raises(remote.RemoteError, match="AZURE_STORAGE_MAX_ATTEMPTS must be a whole number of tries"):
        Storage("az://profiles/shared")


def test_a_bad_value_is_an_error_card_of_its_logdir(clean_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    clean_env.setenv("AWS_MAX_ATTEMPTS", "none")
    ws = Workspace([(None, "s3://bucket/runs")], cache_dir=str(tmp_path / "cache"), rescan_seconds=0)
    try:
        ws.scan_once()
        (error,) = ws.errors()
        assert "AWS_MAX_ATTEMPTS must be a whole number of tries, 1 or more (it is 'none')" in error
    finally:
        ws.close()

