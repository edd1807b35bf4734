"""Remote logdirs: which fsspec filesystem serves a URL, with which credentials, and what to say when it fails.

This module resolves URLs to filesystems; the rest lives beside it and is re-exported here, so callers import one
module: the URL's shape (``urls.py``), credentials captured from the environment (``access.py``), the resolved
``Location`` and its errors (``location.py``), error explanations (``explain.py``) and secret scrubbing
(``scrub.py``).

``resolve(url, access)`` is the only place that builds a filesystem for a logdir or a trace file, so the listing
(in the server) and the reading (in a loader process) authenticate the same way. ``Access`` is the part of the
environment that decides credentials and endpoints, captured once when the logdir is opened and handed to every
loader process, which may have been forked before the variables were set.

URL forms:

- a local path (``~`` and ``$VARS`` expanded) or ``file://``
- ``https://<account>.blob.core.windows.net/<container>/<path>`` (also other Azure clouds' ``.blob.core.<suffix>``
  hosts; a SAS token in the query string is used as the credential), ``az://<container>/<path>``,
  ``abfs[s]://<container>[@<account>.dfs.core.windows.net]/<path>``: adlfs. Credentials, first found wins: the
  URL's SAS, ``AZURE_STORAGE_CONNECTION_STRING`` (which also gives the endpoint: emulators, sovereign clouds),
  ``AZURE_STORAGE_ACCOUNT_KEY``, ``AZURE_STORAGE_SAS_TOKEN``, else anonymous (public containers). Never
  azure-identity's ``DefaultAzureCredential`` probing.
- ``s3://<bucket>/<path>``: s3fs. ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``/``AWS_SESSION_TOKEN``, or an AWS
  profile/config file; endpoint from ``AWS_ENDPOINT_URL_S3``, ``AWS_ENDPOINT_URL`` or the old plugin's
  ``S3_ENDPOINT`` (MinIO); no credentials at all means an unsigned (public bucket) request.
- ``gs://<bucket>/<path>``: gcsfs. ``GOOGLE_APPLICATION_CREDENTIALS``, gcloud's application default credentials,
  ``GCSFS_TOKEN``, else anonymous; ``STORAGE_EMULATOR_HOST`` for an emulator.
- ``hdfs://`` and any other protocol fsspec knows: fsspec as it is.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit

from .access import (
    ENV_PREFIXES,
    Access,
    aws_configured,
    connection_string_endpoint,
    gcs_token,
    parse_connection_string,
    s3_endpoint,
    sas_of,
)
from .explain import DENIED, MISSING, UNREACHABLE, azure_missing_message, classify, explain
from .location import CONNECT_TIMEOUT, EXTRAS, READ_TIMEOUT, Location, MissingBackend, RemoteError, first_line
from .scrub import scrub, scrub_url
from .urls import AZURE_HOST, is_remote, is_url, strip_query

__all__ = ["AZURE_HOST", "CONNECT_TIMEOUT", "DENIED", "ENV_PREFIXES", "EXTRAS", "MISSING", "READ_TIMEOUT",
           "UNREACHABLE", "Access", "Location", "MissingBackend", "RemoteError", "azure_container_exists",
           "azure_missing_message", "classify", "explain", "is_remote", "is_url", "parse_connection_string",
           "resolve", "scrub", "scrub_url", "strip_query"]


def resolve(url: str, access: Access | None = None) -> Location:
    """The filesystem and path for a logdir or file URL. Raises :class:`RemoteError` with a message for the user."""
    if not is_remote(url):
        return _local(url)
    base, query = strip_query(url)
    scheme = base.split("://", 1)[0].lower()
    sas = sas_of(query)
    access = access if access is not None else Access.from_environ(sas)
    if sas and access.url_sas != sas:
        access = Access(access.env, sas)
    if scheme in ("http", "https"):
        parts = urlsplit(base)
        match = AZURE_HOST.match(parts.hostname or "")
        if match is None:
            raise RemoteError("only Azure Blob https URLs (https://<account>.blob.core.windows.net/"
                              "<container>/<path>) can be logdirs; use az://, s3://, gs:// or hdfs:// for others")
        container, _, prefix = parts.path.strip("/").partition("/")
        return _azure(base, match.group("account"), container, prefix, access)
    if scheme in ("az", "abfs", "abfss"):
        netloc, _, rest = base.split("://", 1)[1].partition("/")
        container, _, host = netloc.partition("@")
        account = host.split(".", 1)[0] if host else ""
        return _azure(base, account, container, rest.strip("/"), access)
    if scheme in ("s3", "s3a"):
        return _s3(base, access)
    if scheme in ("gs", "gcs"):
        return _gcs(base, access)
    return _generic(base, scheme, access)



# ---- how often a request is tried -----------------------------------------------------------------------------

# A request to S3 or Azure Blob is tried at most this many times (the first try and 3 retries, with backoff; Azure
# tries a refused connection twice), unless the environment says otherwise: AWS_MAX_ATTEMPTS (botocore's own
# variable) for S3, AZURE_STORAGE_MAX_ATTEMPTS (this plugin's: the Azure SDK reads none) for Azure Blob. 1 makes
# an unreachable store an error at once, without waiting out the backoff.
DEFAULT_ATTEMPTS = 4
AWS_ATTEMPTS = "AWS_MAX_ATTEMPTS"
AZURE_ATTEMPTS = "AZURE_STORAGE_MAX_ATTEMPTS"


def max_attempts(access: Access, name: str) -> int | None:
    """The tries per request that variable ``name`` asks for (None where unset: the store's default); a value that
    is not a whole number of at least 1 is refused with a message naming the variable."""
    value = access.get(name)
    if value is None:
        return None
    try:
        attempts = int(value.strip())
    except ValueError:
        attempts = 0
    if attempts < 1:
        raise RemoteError(f"{name} must be a whole number of tries, 1 or more (it is {value!r})")
    return attempts



# ---- local ------------------------------------------------------------------------------------------------------


def _local(url: str) -> Location:
    from fsspec.implementations.local import LocalFileSystem

    if url.lower().startswith("file://"):
        url = url[len("file://"):]
    path = os.path.abspath(os.path.expanduser(os.path.expandvars(url)))
    return Location(fs=LocalFileSystem(), path=path, url=path, store="local")



# ---- Azure Blob -------------------------------------------------------------------------------------------------


@dataclass(frozen=True, repr=False)
class _AzureAuth:
    endpoint: str
    account: str
    connection_string: str | None = None
    account_key: str | None = None
    sas: str | None = None
    attempts: int | None = None  # AZURE_STORAGE_MAX_ATTEMPTS; None: the bounded default (``_blob_service_client``)

    def __repr__(self) -> str:  # fsspec caches filesystems by the repr of their arguments: differ, but hide values
        digest = hashlib.sha256(f"{self.connection_string}\0{self.account_key}\0{self.sas}".encode()).hexdigest()
        return f"_AzureAuth({self.endpoint}, {self.account}, #{digest[:16]}, attempts={self.attempts})"


def _azure(url: str, account: str, container: str, prefix: str, access: Access) -> Location:
    fs_class = _azure_class()
    if not container:
        raise RemoteError("the URL names no container; use https://<account>.blob.core.windows.net/"
                          "<container>/<path> or az://<container>/<path>")
    conn = access.get("AZURE_STORAGE_CONNECTION_STRING")
    account = account or access.get("AZURE_STORAGE_ACCOUNT_NAME") or ""
    key = access.get("AZURE_STORAGE_ACCOUNT_KEY")
    env_sas = access.get("AZURE_STORAGE_SAS_TOKEN")
    if not account and conn:
        account = connection_string_endpoint(conn)[0]
    default_endpoint = f"https://{account}.blob.core.windows.net" if account else ""
    if access.url_sas:
        auth, how = _AzureAuth(default_endpoint, account, sas=access.url_sas), "the SAS token in the URL"
    elif conn:  # it also names the endpoint (emulators, other clouds), so it wins even over the URL's host
        conn_account, endpoint = connection_string_endpoint(conn)
        account = conn_account or account
        fields = parse_connection_string(conn)
        signed = any(fields.get(k) for k in ("accountkey", "sharedaccesssignature", "usedevelopmentstorage"))
        auth = _AzureAuth(endpoint, account, connection_string=conn)
        how = "AZURE_STORAGE_CONNECTION_STRING" if signed else "anonymous"
    elif key and account:
        auth, how = _AzureAuth(default_endpoint, account, account_key=key), "AZURE_STORAGE_ACCOUNT_KEY"
    elif env_sas and account:
        auth, how = _AzureAuth(default_endpoint, account, sas=env_sas), "AZURE_STORAGE_SAS_TOKEN"
    else:
        auth, how = _AzureAuth(default_endpoint, account), "anonymous"
    if not auth.endpoint:
        raise RemoteError("which storage account? Set AZURE_STORAGE_ACCOUNT_NAME (and a credential) or "
                          "AZURE_STORAGE_CONNECTION_STRING, or use https://<account>.blob.core.windows.net/<container>/"
                          "<path>")
    auth = replace(auth, attempts=max_attempts(access, AZURE_ATTEMPTS))
    fs = fs_class(ptp_auth=auth, account_name=account or None, anon=True)
    path = f"{container}/{prefix}".rstrip("/")
    return Location(fs=fs, path=path, url=url.rstrip("/"), store="azure", access=access,
                    container=container, account=account, endpoint=auth.endpoint, auth=how)


_AZURE_CLASS: Any = None


def _azure_class() -> Any:
    """adlfs's filesystem with our own client construction: bounded retries and never DefaultAzureCredential."""
    global _AZURE_CLASS
    if _AZURE_CLASS is not None:
        return _AZURE_CLASS
    try:
        from adlfs import AzureBlobFileSystem
    except ImportError:
        raise MissingBackend("Azure Blob", "azure") from None

    class BlobFileSystem(AzureBlobFileSystem):  # type: ignore[misc]
        """Authenticates exactly as ``ptp_auth`` says; adlfs's own environment lookups cannot change that."""

        def __init__(self, *args: Any, ptp_auth: _AzureAuth, **kwargs: Any) -> None:
            self._ptp_auth = ptp_auth
            super().__init__(*args, **kwargs)

        def _get_default_azure_credential(self, **kwargs: Any) -> tuple[None, None]:
            return None, None  # no managed-identity or CLI probing, ever

        def _get_credential_from_service_principal(self) -> tuple[None, None]:
            return None, None

        def do_connect(self) -> None:
            self.service_client = _blob_service_client(self._ptp_auth)

    _AZURE_CLASS = BlobFileSystem
    return BlobFileSystem


def _blob_service_client(auth: _AzureAuth) -> Any:
    from azure.storage.blob.aio import BlobServiceClient, ExponentialRetry

    # by default a refused or unresolvable endpoint is tried twice, a throttled or failed request up to 4 times;
    # AZURE_STORAGE_MAX_ATTEMPTS=N: every request at most N times
    retries = (DEFAULT_ATTEMPTS - 1, 1) if auth.attempts is None else (auth.attempts - 1, auth.attempts - 1)
    options: dict[str, Any] = {
        "retry_policy": ExponentialRetry(initial_backoff=1, increment_base=2, retry_total=retries[0],
                                         retry_connect=retries[1], random_jitter_range=1),
        "connection_timeout": CONNECT_TIMEOUT,
        "read_timeout": READ_TIMEOUT,
    }
    if auth.connection_string:
        return BlobServiceClient.from_connection_string(auth.connection_string, **options)
    if auth.sas:
        return BlobServiceClient(account_url=f"{auth.endpoint}?{auth.sas.lstrip('?')}", **options)
    if auth.account_key:
        credential = {"account_name": auth.account, "account_key": auth.account_key}
        return BlobServiceClient(account_url=auth.endpoint, credential=credential, **options)
    return BlobServiceClient(account_url=auth.endpoint, **options)



def azure_container_exists(location: Location) -> bool:
    """Whether the container exists (raises when access is refused); adlfs's listing hides a missing container."""
    from fsspec.asyn import sync

    client = location.fs.service_client.get_container_client(location.container)
    return bool(sync(location.fs.loop, client.exists))



# ---- S3 ---------------------------------------------------------------------------------------------------------


def _s3(url: str, access: Access) -> Location:
    try:
        import s3fs
    except ImportError:
        raise MissingBackend("S3", "s3") from None
    endpoint = s3_endpoint(access)
    attempts = max_attempts(access, AWS_ATTEMPTS)  # botocore's own variable, which an explicit config would hide
    kwargs: dict[str, Any] = {
        "config_kwargs": {"connect_timeout": CONNECT_TIMEOUT, "read_timeout": READ_TIMEOUT,
                          "retries": {"total_max_attempts": attempts or DEFAULT_ATTEMPTS, "mode": "standard"}},
        "client_kwargs": {},
    }
    if endpoint:
        kwargs["endpoint_url"] = endpoint
    region = access.get("AWS_REGION") or access.get("AWS_DEFAULT_REGION")
    if region:
        kwargs["client_kwargs"]["region_name"] = region
    if access.flag("S3_VERIFY_SSL") is False:
        kwargs["client_kwargs"]["verify"] = False
    key, secret = access.get("AWS_ACCESS_KEY_ID"), access.get("AWS_SECRET_ACCESS_KEY")
    if access.flag("AWS_NO_SIGN_REQUEST"):
        kwargs["anon"], how = True, "anonymous (AWS_NO_SIGN_REQUEST)"
    elif key and secret:
        kwargs.update(key=key, secret=secret, token=access.get("AWS_SESSION_TOKEN"), anon=False)
        how = "AWS_ACCESS_KEY_ID"
    elif aws_configured(access):
        kwargs["anon"], how = False, "the AWS profile/configuration"
    else:
        kwargs["anon"], how = True, "anonymous"
    return _bucket_location(s3fs.S3FileSystem(**kwargs), url, "s3", access, endpoint or "AWS S3", how)


def _bucket_location(fs: Any, url: str, store: str, access: Access, endpoint: str, auth: str) -> Location:
    """Where a bucket store's URL (``s3://``, ``gs://``) points: its bucket and path; one naming no bucket is
    refused with the form to use."""
    path = fs._strip_protocol(url).rstrip("/")
    bucket = path.split("/", 1)[0]
    if not bucket:
        raise RemoteError(f"the URL names no bucket; use {'gs' if store == 'gcs' else store}://<bucket>/<path>")
    return Location(fs=fs, path=path, url=url.rstrip("/"), store=store, access=access, container=bucket,
                    endpoint=endpoint, auth=auth)



# ---- GCS --------------------------------------------------------------------------------------------------------


def _gcs(url: str, access: Access) -> Location:
    # gcsfs reads this at import: without it each bucket waits up to 60 s on a gRPC bucket-type probe.
    os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")
    try:
        import gcsfs
    except ImportError:
        raise MissingBackend("Google Cloud Storage", "gcs") from None
    token, how = gcs_token(access)
    kwargs: dict[str, Any] = {"token": token, "requests_timeout": READ_TIMEOUT}
    emulator = access.get("STORAGE_EMULATOR_HOST")
    if emulator:
        kwargs["endpoint_url"] = emulator if "://" in emulator else f"http://{emulator}"
    project = access.get("GOOGLE_CLOUD_PROJECT")
    if project:
        kwargs["project"] = project
    return _bucket_location(gcsfs.GCSFileSystem(**kwargs), url, "gcs", access,
                            kwargs.get("endpoint_url", "Google Cloud Storage"), how)


# ---- anything else fsspec knows (hdfs://, webhdfs://, memory://, ...) --------------------------------------------


def _generic(url: str, scheme: str, access: Access) -> Location:
    from fsspec.core import url_to_fs

    try:
        fs, path = url_to_fs(url)
    except ImportError as err:
        if scheme in ("hdfs", "viewfs"):
            raise MissingBackend("HDFS", "hdfs") from None
        raise RemoteError(f"fsspec needs another package for {scheme}:// ({first_line(err)})") from None
    except ValueError as err:
        raise RemoteError(f"unknown storage protocol {scheme}:// ({first_line(err)})") from None
    except OSError as err:
        if scheme in ("hdfs", "viewfs"):
            raise RemoteError(f"cannot connect to HDFS ({first_line(err)}); HDFS needs Java and Hadoop's "
                              "libhdfs: set JAVA_HOME, HADOOP_HOME and, if needed, ARROW_LIBHDFS_DIR and CLASSPATH "
                              '(`hadoop classpath --glob`); pyarrow comes with pip install "pytorch-tb-profiler[hdfs]"'
                              ) from None
        raise
    return Location(fs=fs, path=str(path).rstrip("/") or str(path), url=url.rstrip("/"), store=scheme,
                    access=access, endpoint=url)

