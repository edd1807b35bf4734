"""Opening a listed file (a trace or a memory timeline export) and saying, in one line, why it could not be.

The loader, the export decoder and the download route all open through here, so a file that cannot be read is
explained the same way everywhere: the system's reason for a local file, the store's failure (refused,
unreachable, which credential to set) for a remote one, never with a secret.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, BinaryIO

from ..catalog.names import file_name
from ..catalog.remote import RemoteError, explain, is_remote, resolve, scrub
from ..catalog.storage import open_url
from .errors import TraceLoadError
from .limits import JSON_STARTS, Limits
from .read import GZIP_MAGIC, first_byte, read_bytes, require_json_start, require_text_fits


class Unreadable(RemoteError):
    """A file that exists but could not be opened; the message is why (:func:`read_failure`)."""


def read_failure(err: BaseException, url: str, access: Any) -> str:
    """Why the file at ``url`` could not be opened or read, in one line for the user and never with a secret: the
    system's reason for a local file (or a remote one that is gone), else the store's failure explained."""
    if isinstance(err, RemoteError):
        return scrub(str(err), access)
    if isinstance(err, (OSError, ValueError)) and (not is_remote(url) or isinstance(err, FileNotFoundError)):
        return err.strerror if isinstance(err, OSError) and err.strerror else str(err)
    try:
        location = resolve(url, access)
    except Exception:  # noqa: BLE001 - the explanation must not fail
        location = None
    # the captured credentials too: a location that cannot be resolved would scrub only the environment's
    return scrub(explain(err, location, what="read"), access)


def open_source(url: str, access: Any) -> tuple[BinaryIO, int | None]:
    """``url`` opened with the listing's credentials (``access``), and its size when known. A missing file raises
    ``FileNotFoundError``; any other failure :class:`Unreadable` with why."""
    try:
        return open_url(url, access)
    except FileNotFoundError:
        raise
    except Exception as err:  # noqa: BLE001 - a storage SDK's own errors (refused, unreachable) too: say why
        raise Unreadable(read_failure(err, url, access)) from None


def read_source(url: str, access: Any, progress: Callable[[float], None] | None = None,
                limits: Limits | None = None) -> bytes:
    """All of ``url``'s bytes (``progress`` gets the fraction read); any failure to open or read it raises
    :class:`TraceLoadError` ``"<file>: cannot read the file (<why>)"``.

    With ``limits``, a file that is neither gzip nor JSON fails on its first chunk, and plain JSON larger than the
    memory left for it on its size, before the rest is read (a gigabyte of zeros used to be read, then decoded
    twice, for two minutes)."""
    name = file_name(url)
    try:
        stream, size = open_source(url, access)
        with stream:
            return read_bytes(stream, size, progress,
                              first=None if limits is None else lambda chunk: _check_first(chunk, name, size, limits))
    except (TraceLoadError, MemoryError):
        raise
    except Exception as err:  # noqa: BLE001 - a read that fails half way (a connection reset) too: say why
        raise TraceLoadError(f"{name}: cannot read the file ({read_failure(err, url, access)})",
                             lasting=False) from None


def _check_first(chunk: bytes, name: str, size: int | None, limits: Limits) -> None:
    if chunk[:2] == GZIP_MAGIC:
        return  # its inflated size is bounded while it is inflated
    if name.endswith(".gz") and first_byte(chunk) and first_byte(chunk) not in JSON_STARTS:
        raise TraceLoadError(f"{name}: not gzip data (the name ends in .gz) and not JSON either")
    require_json_start(chunk, name)
    if size is not None:
        require_text_fits(size, name, limits)
