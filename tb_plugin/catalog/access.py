"""Credentials: the part of the environment that decides how a store authenticates and where its endpoint is,
captured once as :class:`Access` (picklable: a loader process rebuilds exactly the filesystem the listing used),
and each store's reading of it (Azure connection strings and SAS tokens, S3 endpoints and profiles, GCS tokens).
Which of its values are secrets is said here too (:meth:`Access.secrets`), for :mod:`.scrub`.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

from .urls import AZURE_HOST

# The environment variables that pick credentials or endpoints, by prefix (captured into ``Access``).
ENV_PREFIXES = ("AZURE_STORAGE_", "AWS_", "S3_", "GOOGLE_", "GCSFS_", "GCE_", "CLOUDSDK_", "STORAGE_EMULATOR_HOST",
                 "HADOOP_", "ARROW_LIBHDFS_DIR", "JAVA_HOME", "CLASSPATH", "KRB5CCNAME", "LIBHDFS_OPTS")

SECRET_NAME = re.compile(r"KEY|SECRET|TOKEN|SAS|PASSWORD|CONNECTION_STRING|CREDENTIAL", re.IGNORECASE)
# file paths, not secrets: messages that name them stay readable
NOT_SECRET = {"GOOGLE_APPLICATION_CREDENTIALS", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_SHARED_CREDENTIALS_FILE"}


@dataclass(frozen=True, repr=False)
class Access:
    """The credential and endpoint settings of the environment (and a SAS token from the URL), as captured once.

    Picklable, so a loader process rebuilds exactly the filesystem the listing used. Its repr hides the values.
    """

    env: tuple[tuple[str, str], ...] = ()
    url_sas: str | None = None

    @classmethod
    def from_environ(cls, url_sas: str | None = None) -> Access:
        return cls(tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith(ENV_PREFIXES))), url_sas)

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
        for key in [k for k in os.environ if k.startswith(ENV_PREFIXES)]:
            if key not in wanted:
                del os.environ[key]
        os.environ.update(wanted)

    def secrets(self) -> list[str]:
        """Every secret value this access holds, for scrubbing messages."""
        out = [self.url_sas] if self.url_sas else []
        for key, value in self.env:
            if not value or not SECRET_NAME.search(key) or key in NOT_SECRET or key.endswith("_FILE"):
                continue
            if key == "GCSFS_TOKEN" and value in ("anon", "cloud", "google_default", "browser", "cache"):
                continue
            parts = connection_string_secrets(value) if "CONNECTION_STRING" in key else []
            out.extend(parts or [value])  # of a connection string only its key or SAS: the endpoint may show
        return out

    def __repr__(self) -> str:
        return f"Access({len(self.env)} variables{', SAS from the URL' if self.url_sas else ''})"



def connection_string_secrets(value: str) -> list[str]:
    fields = parse_connection_string(value) if "=" in value else {}
    return [v for k, v in fields.items() if k in ("accountkey", "sharedaccesssignature", "sharedaccesskey") and v]


def parse_connection_string(conn: str) -> dict[str, str]:
    """``Key=Value;...`` into a dict with lower-case keys (values keep their case; ``=`` inside values is kept)."""
    out: dict[str, str] = {}
    for part in conn.split(";"):
        key, sep, value = part.partition("=")
        if sep:
            out[key.strip().lower()] = value.strip()
    return out


def connection_string_endpoint(conn: str) -> tuple[str, str]:
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



def sas_of(query: str) -> str | None:
    return query if query and "sig" in parse_qs(query) else None



def s3_endpoint(access: Access) -> str | None:
    endpoint = access.get("AWS_ENDPOINT_URL_S3") or access.get("AWS_ENDPOINT_URL") or access.get("S3_ENDPOINT")
    if endpoint and "://" not in endpoint:  # the old plugin's S3_ENDPOINT may be host:port
        endpoint = ("https://" if access.flag("S3_USE_HTTPS") is not False else "http://") + endpoint
    return endpoint


def aws_configured(access: Access) -> bool:
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



def gcs_token(access: Access) -> tuple[str, str]:
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

