"""Stored views that misbehave for chosen files (``test_shared_loaders.py``): a module of its own, free of test
imports, because the loader processes' fork server imports it to unpickle the ``Stored`` it is handed.

A file whose name holds ``crash`` kills its loader process (SIGKILL, as the kernel's out-of-memory killer does);
``crash_once`` does so only while ``marker`` does not exist (it makes it first: a second try loads); ``slow`` sleeps
a minute; ``gate`` waits until the test opens and closes the FIFO ``gate`` (a blocking read: no timing)."""

from __future__ import annotations

import os
import signal
import time
from typing import Any

from tb_plugin.api import warm


class FaultyViews(warm.WarmViews):
    def __init__(self, marker: str, gate: str) -> None:
        super().__init__()
        self.marker, self.gate = marker, gate

    def save(self, directory: str, file: Any = None, processes: int = 1,
             parse_seconds: float | None = None, memory: int | None = None, built: Any = None,
             saved: Any = None) -> Any:
        name = file.filename if file is not None else ""
        if "crash_once" in name:
            if not os.path.exists(self.marker):
                open(self.marker, "w").close()
                os.kill(os.getpid(), signal.SIGKILL)
        elif "crash" in name:
            os.kill(os.getpid(), signal.SIGKILL)
        if "slow" in name:
            time.sleep(60)
        if "gate" in name:
            with open(self.gate, "rb") as fh:
                fh.read()
        return super().save(directory, file, processes, parse_seconds, memory, built, saved)
