"""One sentence for a trace file that cannot be read (``loader.read_failure``), the same in a failed span's error
and in the download route's 502: the system's reason for a local file, the store's failure explained for a remote
one, and never a secret."""

from __future__ import annotations

from pathlib import Path

from tb_plugin.catalog.remote import Access, RemoteError
from tb_plugin.loader import read_failure


def test_a_local_file_says_what_the_system_said(tmp_path: Path) -> None:
    missing = tmp_path / "gone.pt.trace.json"
    try:
        missing.open("rb")
    except OSError as err:
        assert read_failure(err, str(missing), None) == "No such file or directory"
    assert read_failure(ValueError("not gzip data"), str(missing), None) == "not gzip data"


def test_a_remote_file_that_is_gone_says_so_too() -> None:
    err = FileNotFoundError(2, "No such file or directory")
    assert read_failure(err, "s3://bucket/run/w.1.pt.trace.json", None) == "No such file or directory"


def test_a_store_that_refuses_is_explained_without_its_secret() -> None:
    access = Access(env=(("AZURE_STORAGE_ACCOUNT_KEY", "s3cr3tk3y=="),))
    refused = PermissionError(13, "AuthorizationFailure for key s3cr3tk3y==")
    text = read_failure(refused, "az://container/run/w.1.pt.trace.json", access)
    assert "s3cr3tk3y" not in text and "AuthorizationFailure for key ***" in text
    assert read_failure(RemoteError("bad key s3cr3tk3y=="), "az://c/w.json", access) == "bad key ***"


def test_an_unreachable_store_names_the_failure() -> None:
    text = read_failure(ConnectionRefusedError(111, "Connection refused"), "s3://bucket/w.1.pt.trace.json", None)
    assert "Connection refused" in text
