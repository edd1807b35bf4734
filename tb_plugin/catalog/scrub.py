"""Secrets never reach a message: every text shown (a card, a log line, an error) passes :func:`scrub`, which
replaces known secret values (from the captured :class:`Access` and the current environment), connection-string
keys, SAS signatures, authorization headers and AWS keys with ``***``; :func:`scrub_url` drops a URL's query."""

from __future__ import annotations

import re

from .access import Access
from .urls import is_url, strip_query

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
