"""What went wrong, for people: a storage exception of any backend classified (denied, missing, unreachable)
and said in one line with the variable to set; secret-free (:func:`.scrub.scrub`)."""

from __future__ import annotations

from .location import Location, RemoteError, first_line
from .scrub import scrub

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
            return UNREACHABLE, first_line(e)
        if name in ("ClientAuthenticationError", "NoCredentialsError", "PartialCredentialsError"):
            return DENIED, str(code or name)
        if code in _AZURE_DENIED_CODES or code in _S3_DENIED_CODES:
            return DENIED, str(code)
        if code in ("ContainerNotFound", "NoSuchBucket", "ResourceNotFound", "ContainerBeingDeleted"):
            return MISSING, str(code)
        if isinstance(status, int) and status in (401, 403):
            return DENIED, str(code or f"HTTP {status}")
        if isinstance(e, PermissionError):
            return DENIED, first_line(e)
    for e in chain:
        if isinstance(e, ConnectionError) or (isinstance(e, OSError) and "connect" in str(e).lower()):
            return UNREACHABLE, first_line(e)
    return None, first_line(err)


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


def azure_missing_message(location: Location) -> str:
    where = f"Azure container '{location.container}' of storage account '{location.account}'"
    if location.auth == "anonymous":  # Azure answers "not found" to anonymous requests for a private container
        return (f"{where} does not exist or is not public: check the logdir URL; if it is private, set "
                "AZURE_STORAGE_CONNECTION_STRING or AZURE_STORAGE_SAS_TOKEN (or AZURE_STORAGE_ACCOUNT_KEY)")
    return f"{where} does not exist at {location.endpoint}; check the logdir URL"
