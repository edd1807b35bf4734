"""Where the loader processes come from: on Linux a fork server that has imported the loader and the analyses its
stored views need, so a loader process starts with a fork, not an interpreter start and its imports.

Import-light on purpose (the standard library only): TensorBoard's CLI starts the fork server from
``ProfilerLoader.fix_flags`` (``start_early``), before the plugin imports its own modules, so the server's imports
(≈ 0.6-0.9 s on a lent 16-core host) overlap the rest of TensorBoard's start instead of delaying the first load.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import sys
import types
from collections.abc import Iterator, Sequence
from typing import Any

WORKER = "tb_plugin.jobs.worker"  # the module a loader process runs (jobs/worker.py)


@contextlib.contextmanager
def main_module_hidden() -> Iterator[None]:
    """Start processes without re-running the parent's ``__main__`` in them.

    spawn and forkserver re-import the parent's main script in each child; under the ``tensorboard`` CLI that
    imports all of TensorBoard (seconds per worker), and from a notebook or stdin it fails outright. The worker
    needs nothing from ``__main__``, so it is swapped for an empty module while the process starts.
    """
    real = sys.modules["__main__"]
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        sys.modules["__main__"] = real


def process_context(preload: Sequence[str] = ()) -> Any:
    """Processes from a fork server that has imported the worker and the ``preload`` modules (the module of what
    the loader stores beside the parse: the analyses the first views need), so a worker starts without importing
    them. One fork server per process: the first start decides what it preloads."""
    if sys.platform.startswith("linux"):
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload([WORKER, *preload])
        return ctx
    return multiprocessing.get_context("spawn")


def prestart(ctx: Any) -> None:
    """Start the fork server now: it imports the worker and the analyses while TensorBoard starts, instead of on
    the way of the first load. ``ensure_running`` returns once the server is spawned (its imports go on in it); a
    failure here is left to the first load, which starts it again and says why."""
    if getattr(ctx, "get_start_method", lambda: None)() != "forkserver":
        return
    from multiprocessing import forkserver

    try:
        with main_module_hidden():
            forkserver.ensure_running()
    except (OSError, ValueError):
        pass


def start_early(preload: Sequence[str]) -> None:
    """The fork server started before the plugin's own imports (``ProfilerLoader.fix_flags``): on a lent 16-core
    host the first loader process then started ~0.25 s sooner after TensorBoard answered."""
    prestart(process_context(preload))
