"""The code that runs inside a loader process: parse one file, write its model to the cache, report back.

Kept tiny and import-light on purpose: the fork server preloads this module (numpy, msgspec, pyarrow) once, so
starting a worker costs a fork, not an interpreter start.
"""

from __future__ import annotations

import traceback
from multiprocessing.connection import Connection
from typing import Any

from ..loader import TraceLoadError, default_parts, load_trace
from ..model.tables import save


def run_job(url: str, entry: str, progress: Any, conn: Connection) -> None:
    """Entry point of a worker process. Sends ``("ok", stats)`` or ``("error", reason)`` on ``conn``."""

    def report(fraction: float) -> None:
        progress.value = 0.95 * fraction

    try:
        model = load_trace(url, report, parts=default_parts())
        save(model, entry)
        progress.value = 1.0
        conn.send(("ok", {"events": model.n_events, "bytes": model.nbytes()}))
    except TraceLoadError as err:
        conn.send(("error", str(err)))
    except MemoryError:
        conn.send(("error", f"{url.rsplit('/', 1)[-1]}: not enough memory to load this trace"))
    except Exception as err:  # noqa: BLE001 - a bug must still end as a message, never a dead worker
        name = url.rsplit("/", 1)[-1]
        detail = traceback.format_exception_only(type(err), err)[-1].strip()
        conn.send(("error", f"{name}: internal error while loading ({detail}); please report it"))
    finally:
        conn.close()
