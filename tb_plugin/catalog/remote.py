"""Remote logdirs: which fsspec filesystem serves a URL, with which credentials, and what to say when it fails.

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
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

# The environment variables that pick credentials or endpoints, by prefix (captured into ``Access``).
_ENV_PREFIXES = ("AZURE_STORAGE_", "AWS_", "S3_", "GOOGLE_", "GCSFS_", "GCE_", "CLOUDSDK_", "STORAGE_EMULATOR_HOST",
                 "HADOOP_", "ARROW_LIBHDFS_DIR", "JAVA_HOME", "CLASSPATH", "KRB5CCNAME", "LIBHDFS_OPTS")

AZURE_HOST = re.compile(r"^(?P<account>[a-z0-9]{3,24})\.(?:blob|dfs)\.core\.[a-z0-9.-]+$", re.IGNORECASE)

EXTRAS = {"azure": "adlfs", "s3": "s3fs", "gcs": "gcsfs", "hdfs": "pyarrow"}

# Bounded waits: an unreachable endpoint must become a message within seconds, not minutes of retries.
CONNECT_TIMEOUT = 10
READ_TIMEOUT = 120


class RemoteError(Exception):
    """A logdir that cannot be used as given; the message says what to do and never holds a secret."""


class MissingBackend(RemoteError):
    """The optional package for a store is not installed."""

    def __init__(self, store: str, extra: str) -> None:
        super().__init__(f"{store} logdirs need the {EXTRAS[extra]} package, which is not installed: "
                         f'pip install "pytorch-tb-profiler[{extra}]"')


@dataclass(frozen=True, repr=False)
class Access:
    """The credential and endpoint settings of the environment (and a SAS token from the URL), as captured once.

    Picklable, so a loader process rebuilds exactly the filesystem the listing used. Its repr hides the values.
    """

    env: tuple[tuple[str, str], ...] = ()
    url_sas: str | None = None

    @classmethod
    def from_environ(cls, url_sas: str | None = None) -> Access:
        return cls(tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith(_ENV_PREFIXES))), url_sas)

    def get(self, name: str) -> str | None:
        for key, value in self.env:
            if key == name:
                return value or None
        return None

    def flag(self, name: str) -> bool | None:
        value = self.get(name)
        if value is None:
            return None
        return value.strip().lower() not in ("", "0", "false", "no", "off")

    def apply(self) -> None:
        """Make this process's environment match (loader processes only: libraries read some variables there)."""
        wanted = dict(self.env)
        for key in [k for k in os.environ if k.startswith(_ENV_PREFIXES)]:
            if key not in wanted:
                del os.environ[key]
        os.environ.update(wanted)

    def secrets(self) -> list[str]:
        """Every secret value this access holds, for scrubbing messages."""
        out = [self.url_sas] if self.url_sas else []
        for key, value in self.env:
            if not value or not _SECRET_NAME.search(key) or key in _NOT_SECRET or key.endswith("_FILE"):
                continue
            if key == "GCSFS_TOKEN" and value in ("anon", "cloud", "google_default", "browser", "cache"):
                continue
            parts = _connection_string_secrets(value) if "CONNECTION_STRING" in key else []
            out.extend(parts or [value])  # of a connection string only its key or SAS: the endpoint may show
        return out

    def __repr__(self) -> str:
        return f"Access({len(self.env)} variables{', SAS from the URL' if self.url_sas else ''})"


@dataclass
class Location:
    """A logdir or file resolved to a filesystem and a path in it, with what error messages need to know."""

    fs: Any
    path: str
    url: str  # secret-free: what is shown and what a loader process resolves again
    store: str  # "local", "azure", "s3", "gcs", or the fsspec protocol
    access: Access = field(default_factory=Access)
    container: str = ""  # Azure container or bucket
    account: str = ""  # Azure storage account
    endpoint: str = ""  # where requests go, for messages
    auth: str = ""  # how requests authenticate, for messages (a variable name, never a value)

    @property
    def is_object_store(self) -> bool:
        return self.store in ("azure", "s3", "gcs")

    def to_url(self, path: str) -> str:
        """The URL of ``path`` (a path in ``fs`` under this location) in the same form as this location's URL."""
        if self.store == "local":
            return path
        root = self.path.rstrip("/")
        if path.startswith(root + "/"):
            return self.url.rstrip("/") + "/" + path[len(root) + 1:]
        if path.rstrip("/") == root:
            return self.url
        return str(self.fs.unstrip_protocol(path))


def is_url(path: str) -> bool:
    return "://" in path


def is_remote(url: str) -> bool:
    """Whether ``url`` names a file on a store other than this machine's disk (``file://`` is local): the one
    test of "is this remote?" (a remote original is cached beside its parse, a local one is checked as listed)."""
    return is_url(url) and not url.lower().startswith("file://")


def strip_query(url: str) -> tuple[str, str]:
    """``url`` without its query string, and the query string."""
    base, _, query = url.partition("?")
    return base, query


def resolve(url: str, access: Access | None = None) -> Location:
    """The filesystem and path for a logdir or file URL. Raises :class:`RemoteError` with a message for the user."""
    if not is_remote(url):
        return _local(url)
    base, query = strip_query(url)
    scheme = base.split("://", 1)[0].lower()
    sas = _sas_of(query)
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


# ---- local ------------------------------------------------------------------------------------------------------


def _local(url: str) -> Location:
    from fsspec.implementations.local import LocalFileSystem

    if url.lower().startswith("file://"):
        url = url[len("file://"):]
    path = os.path.abspath(os.path.expanduser(os.path.expandvars(url)))
    return Location(fs=LocalFileSystem(), path=path, url=path, store="local")


# ---- Azure Blob -------------------------------------------------------------------------------------------------


def parse_connection_string(conn: str) -> dict[str, str]:
    """``Key=Value;...`` into a dict with lower-case keys (values keep their case; ``=`` inside values is kept)."""
    out: dict[str, str] = {}
    for part in conn.split(";"):
        key, sep, value = part.partition("=")
        if sep:
            out[key.strip().lower()] = value.strip()
    return out


def _connection_string_endpoint(conn: str) -> tuple[str, str]:
    """(account, blob endpoint) a connection string names, as far as it names them."""
    fields = parse_connection_string(conn)
    if fields.get("usedevelopmentstorage", "").lower() == "true":
        return "devstoreaccount1", "http://127.0.0.1:10000/devstoreaccount1"
    account = fields.get("accountname", "")
    endpoint = fields.get("blobendpoint", "")
    if endpoint and not account:  # https://<account>.blob.<suffix>, or path style http://host:port/<account>
        parts = urlsplit(endpoint)
        match = AZURE_HOST.match(parts.hostname or "")
        account = match.group("account") if match else parts.path.strip("/").split("/", 1)[0]
    if not endpoint and account:
        protocol = fields.get("defaultendpointsprotocol", "https")
        endpoint = f"{protocol}://{account}.blob.{fields.get('endpointsuffix', 'core.windows.net')}"
    return account, endpoint.rstrip("/")


@dataclass(frozen=True, repr=False)
class _AzureAuth:
    endpoint: str
    account: str
    connection_string: str | None = None
    account_key: str | None = None
    sas: str | None = None

    def __repr__(self) -> str:  # fsspec caches filesystems by the repr of their arguments: differ, but hide values
        digest = hashlib.sha256(f"{self.connection_string}\0{self.account_key}\0{self.sas}".encode()).hexdigest()
        return f"_AzureAuth({self.endpoint}, {self.account}, #{digest[:16]})"


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
        account = _connection_string_endpoint(conn)[0]
    default_endpoint = f"https://{account}.blob.core.windows.net" if account else ""
    if access.url_sas:
        auth, how = _AzureAuth(default_endpoint, account, sas=access.url_sas), "the SAS token in the URL"
    elif conn:  # it also names the endpoint (emulators, other clouds), so it wins even over the URL's host
        conn_account, endpoint = _connection_string_endpoint(conn)
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

    options: dict[str, Any] = {
        # a refused or unresolvable endpoint is tried twice, a throttled or failed request up to 4 times
        "retry_policy": ExponentialRetry(initial_backoff=1, increment_base=2, retry_total=3, retry_connect=1,
                                         random_jitter_range=1),
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


def _sas_of(query: str) -> str | None:
    return query if query and "sig" in parse_qs(query) else None


def azure_container_exists(location: Location) -> bool:
    """Whether the container exists (raises when access is refused); adlfs's listing hides a missing container."""
    from fsspec.asyn import sync

    client = location.fs.service_client.get_container_client(location.container)
    return bool(sync(location.fs.loop, client.exists))


def azure_missing_message(location: Location) -> str:
    where = f"Azure container '{location.container}' of storage account '{location.account}'"
    if location.auth == "anonymous":  # Azure answers "not found" to anonymous requests for a private container
        return (f"{where} does not exist or is not public: check the logdir URL; if it is private, set "
                "AZURE_STORAGE_CONNECTION_STRING or AZURE_STORAGE_SAS_TOKEN (or AZURE_STORAGE_ACCOUNT_KEY)")
    return f"{where} does not exist at {location.endpoint}; check the logdir URL"


# ---- S3 ---------------------------------------------------------------------------------------------------------


def _s3_endpoint(access: Access) -> str | None:
    endpoint = access.get("AWS_ENDPOINT_URL_S3") or access.get("AWS_ENDPOINT_URL") or access.get("S3_ENDPOINT")
    if endpoint and "://" not in endpoint:  # the old plugin's S3_ENDPOINT may be host:port
        endpoint = ("https://" if access.flag("S3_USE_HTTPS") is not False else "http://") + endpoint
    return endpoint


def _aws_configured(access: Access) -> bool:
    """Whether botocore's own chain has something to find (else it would probe the instance metadata service)."""
    if any(access.get(name) for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_WEB_IDENTITY_TOKEN_FILE",
                                         "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                                         "AWS_CONTAINER_CREDENTIALS_FULL_URI")):
        return True
    if access.flag("AWS_EC2_METADATA_DISABLED") is False:  # an explicit "use the instance role"
        return True
    files = [access.get("AWS_SHARED_CREDENTIALS_FILE") or "~/.aws/credentials",
             access.get("AWS_CONFIG_FILE") or "~/.aws/config"]
    return any(os.path.isfile(os.path.expanduser(f)) for f in files)


def _s3(url: str, access: Access) -> Location:
    try:
        import s3fs
    except ImportError:
        raise MissingBackend("S3", "s3") from None
    endpoint = _s3_endpoint(access)
    kwargs: dict[str, Any] = {
        "config_kwargs": {"connect_timeout": CONNECT_TIMEOUT, "read_timeout": READ_TIMEOUT,
                          "retries": {"max_attempts": 3, "mode": "standard"}},
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
    elif _aws_configured(access):
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


def _gcs_token(access: Access) -> tuple[str, str]:
    token = access.get("GCSFS_TOKEN")
    if token:
        return token, "GCSFS_TOKEN"
    credentials = access.get("GOOGLE_APPLICATION_CREDENTIALS")
    if credentials:
        return credentials, "GOOGLE_APPLICATION_CREDENTIALS"
    if access.get("STORAGE_EMULATOR_HOST"):
        return "anon", "anonymous (emulator)"
    config = access.get("CLOUDSDK_CONFIG") or os.path.join(os.path.expanduser("~"), ".config", "gcloud")
    if os.path.isfile(os.path.join(config, "application_default_credentials.json")):
        return "google_default", "gcloud application default credentials"
    return "anon", "anonymous"


def _gcs(url: str, access: Access) -> Location:
    # gcsfs reads this at import: without it each bucket waits up to 60 s on a gRPC bucket-type probe.
    os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")
    try:
        import gcsfs
    except ImportError:
        raise MissingBackend("Google Cloud Storage", "gcs") from None
    token, how = _gcs_token(access)
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
        raise RemoteError(f"fsspec needs another package for {scheme}:// ({_first_line(err)})") from None
    except ValueError as err:
        raise RemoteError(f"unknown storage protocol {scheme}:// ({_first_line(err)})") from None
    except OSError as err:
        if scheme in ("hdfs", "viewfs"):
            raise RemoteError(f"cannot connect to HDFS ({_first_line(err)}); HDFS needs Java and Hadoop's "
                              "libhdfs: set JAVA_HOME, HADOOP_HOME and, if needed, ARROW_LIBHDFS_DIR and CLASSPATH "
                              '(`hadoop classpath --glob`); pyarrow comes with pip install "pytorch-tb-profiler[hdfs]"'
                              ) from None
        raise
    return Location(fs=fs, path=str(path).rstrip("/") or str(path), url=url.rstrip("/"), store=scheme,
                    access=access, endpoint=url)


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return text[0] if text else type(err).__name__


# ---- what went wrong, for people --------------------------------------------------------------------------------

DENIED, MISSING, UNREACHABLE = "denied", "missing", "unreachable"

_AZURE_DENIED_CODES = {"AuthenticationFailed", "AuthorizationFailure", "AuthorizationPermissionMismatch",
                       "NoAuthenticationInformation", "InsufficientAccountPermissions", "PublicAccessNotPermitted",
                       "AuthorizationResourceTypeMismatch", "AuthorizationSourceIPMismatch",
                       "AuthorizationProtocolMismatch", "AuthorizationServiceMismatch", "InvalidAuthenticationInfo"}
_S3_DENIED_CODES = {"AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken",
                    "InvalidToken", "AllAccessDisabled", "AccountProblem"}


def classify(err: BaseException) -> tuple[str | None, str]:
    """(denied / missing / unreachable / None, a short reason) for a storage exception of any backend."""
    chain = _chain(err)
    for e in chain:
        name = type(e).__name__
        code = getattr(e, "error_code", None) or _boto_code(e)
        code = getattr(code, "value", code)  # azure's StorageErrorCode is an enum of strings
        status = getattr(e, "status_code", None) or getattr(e, "code", None)
        if name in ("ServiceRequestError", "ServiceResponseError", "EndpointConnectionError",
                    "ConnectTimeoutError", "ConnectionClosedError", "ClientConnectorError",
                    "ServerDisconnectedError", "ServerTimeoutError", "ConnectionRefusedError", "TimeoutError",
                    "gaierror", "ConnectError"):
            return UNREACHABLE, _first_line(e)
        if name in ("ClientAuthenticationError", "NoCredentialsError", "PartialCredentialsError"):
            return DENIED, str(code or name)
        if code in _AZURE_DENIED_CODES or code in _S3_DENIED_CODES:
            return DENIED, str(code)
        if code in ("ContainerNotFound", "NoSuchBucket", "ResourceNotFound", "ContainerBeingDeleted"):
            return MISSING, str(code)
        if isinstance(status, int) and status in (401, 403):
            return DENIED, str(code or f"HTTP {status}")
        if isinstance(e, PermissionError):
            return DENIED, _first_line(e)
    for e in chain:
        if isinstance(e, ConnectionError) or (isinstance(e, OSError) and "connect" in str(e).lower()):
            return UNREACHABLE, _first_line(e)
    return None, _first_line(err)


def _chain(err: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    cur: BaseException | None = err
    while cur is not None and cur not in out and len(out) < 8:
        out.append(cur)
        cur = cur.__cause__ or cur.__context__
    return out


def _boto_code(err: BaseException) -> str | None:
    response = getattr(err, "response", None)
    if isinstance(response, dict):
        code = response.get("Error", {}).get("Code")
        return str(code) if code else None
    return None


def explain(err: BaseException, location: Location | None, what: str = "list") -> str:
    """One line for the UI: what failed, why, and which variable to set. Secrets are scrubbed."""
    kind, reason = classify(err)
    loc = location
    if isinstance(err, RemoteError):
        text = str(err)
    elif loc is None:
        text = reason
    elif loc.store == "local":
        text = f"cannot {what} {loc.url}: {reason}"
    elif loc.store == "azure":
        text = _explain_azure(kind, reason, loc, what)
    elif loc.store == "s3":
        text = _explain_s3(kind, reason, loc, what, isinstance(err, FileNotFoundError))
    elif loc.store == "gcs":
        text = _explain_gcs(kind, reason, loc, what, isinstance(err, FileNotFoundError))
    elif kind == UNREACHABLE:
        text = f"cannot reach {loc.url} ({reason}): check the network and the URL"
    else:
        text = f"cannot {what} {loc.url}: {reason}"
    return scrub(text, location.access if location else None)


def _explain_azure(kind: str | None, reason: str, loc: Location, what: str) -> str:
    where = f"container '{loc.container}' of storage account '{loc.account}'"
    if kind == DENIED:
        if loc.auth == "anonymous":
            return (f"Azure refused anonymous access to {where} ({reason}): set AZURE_STORAGE_CONNECTION_STRING or "
                    "AZURE_STORAGE_SAS_TOKEN (or AZURE_STORAGE_ACCOUNT_KEY), or make the container public")
        return (f"Azure refused access to {where} with {loc.auth} ({reason}): set AZURE_STORAGE_CONNECTION_STRING "
                "or AZURE_STORAGE_SAS_TOKEN to a credential that may read it, or make the container public")
    if kind == MISSING:
        return azure_missing_message(loc) + f" ({reason})"
    if kind == UNREACHABLE:
        from_conn = bool(loc.access.get("AZURE_STORAGE_CONNECTION_STRING")) and not loc.access.url_sas
        hint = "the BlobEndpoint in AZURE_STORAGE_CONNECTION_STRING" if from_conn else "the account name in the URL"
        return f"cannot reach the Azure Blob endpoint {loc.endpoint} ({reason}): check the network and {hint}"
    return f"cannot {what} Azure {where}: {reason}"


def _explain_s3(kind: str | None, reason: str, loc: Location, what: str, not_found: bool) -> str:
    where = f"bucket '{loc.container}'"
    if kind == DENIED:
        return (f"S3 refused access to {where} with {loc.auth} ({reason}): set AWS_ACCESS_KEY_ID and "
                "AWS_SECRET_ACCESS_KEY (or AWS_PROFILE) to credentials that may read it")
    if kind == MISSING or (not_found and what == "list"):
        return f"S3 {where} does not exist at {loc.endpoint} ({reason}); check the logdir URL"
    if kind == UNREACHABLE:
        return (f"cannot reach the S3 endpoint {loc.endpoint} ({reason}): check the network, AWS_ENDPOINT_URL or "
                "S3_ENDPOINT")
    return f"cannot {what} S3 {where}: {reason}"


def _explain_gcs(kind: str | None, reason: str, loc: Location, what: str, not_found: bool) -> str:
    where = f"bucket '{loc.container}'"
    if kind == DENIED:
        return (f"Google Cloud Storage refused access to {where} with {loc.auth} ({reason}): set "
                "GOOGLE_APPLICATION_CREDENTIALS to a service account key that may read it, or run "
                "`gcloud auth application-default login`")
    if kind == MISSING or (not_found and what == "list"):
        return f"Google Cloud Storage {where} does not exist ({reason}); check the logdir URL"
    if kind == UNREACHABLE:
        return f"cannot reach Google Cloud Storage at {loc.endpoint} ({reason}): check the network"
    return f"cannot {what} Google Cloud Storage {where}: {reason}"


# ---- secrets never reach a message -------------------------------------------------------------------------------

_SECRET_NAME = re.compile(r"KEY|SECRET|TOKEN|SAS|PASSWORD|CONNECTION_STRING|CREDENTIAL", re.IGNORECASE)
# file paths, not secrets: messages that name them stay readable
_NOT_SECRET = {"GOOGLE_APPLICATION_CREDENTIALS", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_SHARED_CREDENTIALS_FILE"}
_SECRET_PATTERNS = [
    # connection-string fields
    (re.compile(r"(?i)\b(AccountKey|SharedAccessSignature|SharedAccessKey|SharedAccessKeyName|Password)=[^;\s'\"]+"),
     r"\1=***"),
    # SAS and presigned-URL query parameters
    (re.compile(r"(?i)([?&](?:sig|X-Amz-Signature|X-Amz-Credential|X-Amz-Security-Token|Signature|"
                r"AWSAccessKeyId|access_token|token|skoid|sktid)=)[^&\s'\"]+"), r"\1***"),
    # HTTP authorization headers
    (re.compile(r"(?i)\b(Authorization|x-ms-copy-source-authorization)(['\"]?\s*[:=]\s*['\"]?)[^'\"\n,}]+"),
     r"\1\2***"),
    # AWS keys as they appear in botocore/s3fs reprs
    (re.compile(r"(?i)\b(aws_secret_access_key|aws_session_token|secret|token)(['\"]?\s*[:=]\s*['\"])[^'\"]+"),
     r"\1\2***"),
    (re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b"), "***"),
    (re.compile(r"(?i)(\"private_key\"\s*:\s*\")[^\"]+"), r"\1***"),
]


def _connection_string_secrets(value: str) -> list[str]:
    fields = parse_connection_string(value) if "=" in value else {}
    return [v for k, v in fields.items() if k in ("accountkey", "sharedaccesssignature", "sharedaccesskey") and v]


def scrub(text: str, access: Access | None = None) -> str:
    """``text`` with every credential replaced by ``***``: known secret values (from ``access`` and the current
    environment), connection-string keys, SAS signatures, authorization headers and AWS keys."""
    secrets = set(Access.from_environ().secrets())
    if access is not None:
        secrets.update(access.secrets())
    for secret in sorted(secrets, key=len, reverse=True):
        if len(secret) >= 6:
            text = text.replace(secret, "***")
            sas = secret.lstrip("?")
            if sas != secret and len(sas) >= 6:
                text = text.replace(sas, "***")
    for pattern, replacement in _SECRET_PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def scrub_url(url: str) -> str:
    """A logdir URL as it may be shown: no query string (it may hold a SAS token)."""
    if not is_url(url):
        return url
    base, query = strip_query(url)
    return f"{base}?***" if query else base
