"""A resolved logdir or file (:class:`Location`: the filesystem, the path in it, and what messages need to know)
and the errors of resolving one."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .access import Access

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



def first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return text[0] if text else type(err).__name__
