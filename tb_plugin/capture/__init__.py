"""What a training script imports: capture a profile from a running job on request (``enable``, ``step``), and
record the CUDA allocator's history with a snapshot on out-of-memory (``record_memory_history``, :mod:`.memory`;
also ``tb_plugin.record_memory_history``).

Capture, in the training script (one line, on every rank)::

    import tb_plugin.capture
    tb_plugin.capture.enable("./log/my_run")      # a local folder or a URL: s3://, az://, gs://, ...

or, leaving the script unchanged, ``python -m tb_plugin.capture --logdir ./log/my_run train.py ARGS`` (also under
``torchrun -m tb_plugin.capture ...``). Each rank then polls ``./log/my_run/.capture/`` on a daemon thread; a
request written there (by the page's Capture dialog, or ``pytorch-tb-profiler capture ./log/my_run --steps 3``)
makes every rank profile the same N optimizer steps and write ``rank<r>.<stamp>.pt.trace.json.gz`` beside it.

While nothing is asked, the cost is one integer compare per optimizer step. Nothing here imports ``torch``
before ``enable()`` is called, and TensorBoard never imports this package's job side (:mod:`.agent`).
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
from typing import TYPE_CHECKING, Any

from .memory import MemoryHistory, record_memory_history

if TYPE_CHECKING:
    from .agent import Agent

__all__ = ["MemoryHistory", "disable", "enable", "record_memory_history", "step"]

log = logging.getLogger("tb_plugin.capture")
_AGENT: Agent | None = None
_LOCK = threading.Lock()


def enable(logdir: str | os.PathLike[str], *, run: str | None = None, poll_seconds: float | None = None,
           heartbeat_seconds: float | None = None, rank: int | None = None, world_size: int | None = None) -> None:
    """Listen for capture requests in ``logdir`` (or ``logdir/run``): the folder the traces are written to, as
    ``tensorboard_trace_handler(dir)`` would, local or an fsspec URL. Call it on every rank, before training.

    ``poll_seconds`` (default 1 locally, 5 on an object store) is how often the folder is listed;
    ``heartbeat_seconds`` (10 / 30) how often the rank says it is alive. ``rank`` and ``world_size`` default to
    torchrun's ``RANK``/``WORLD_SIZE`` or the initialised process group. Never raises on a logdir problem: the
    job runs on and the reason is logged (``tb_plugin.capture`` logger).
    """
    global _AGENT
    from .agent import Agent
    from .folder import CaptureFolder

    folder_url = os.fspath(logdir)
    if run:
        folder_url = folder_url.rstrip("/") + "/" + run.strip("/")
    with _LOCK:
        if _AGENT is not None:
            if _AGENT.folder.url != folder_url.rstrip("/"):
                log.warning("tb_plugin.capture: already enabled on %s; ignoring %s", _AGENT.folder.shown, folder_url)
            return
        try:
            folder = CaptureFolder(folder_url)
        except Exception as err:  # noqa: BLE001 - an unknown URL form, a missing fsspec backend: logged, not raised
            log.warning("tb_plugin.capture: cannot capture into %s: %s", folder_url, err)
            return
        _AGENT = Agent(folder, poll_s=poll_seconds, heartbeat_s=heartbeat_seconds, rank=rank,
                       world_size=world_size).start()
        atexit.register(disable)


def step() -> None:
    """Mark the end of a training step, for loops without ``torch.optim`` (or to count steps your own way: once
    called, optimizer steps are no longer counted). Costs an integer compare while no capture is due."""
    agent = _AGENT
    if agent is not None:
        agent.manual_step()


def disable() -> None:
    """Stop listening; a capture in progress is written with the steps recorded so far (also done at exit)."""
    global _AGENT
    with _LOCK:
        agent, _AGENT = _AGENT, None
    if agent is not None:
        agent.close()


def current() -> Any:
    """The running agent, or None (tests and tools look at its step and state)."""
    return _AGENT
