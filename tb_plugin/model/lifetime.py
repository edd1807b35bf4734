"""A helper's life tied to what it helps: a forked process to the process that forked it, a thread to a block.

The loader process forks helpers (the parse's parts, the writer of its parse, the handover's copier, the stored
views' parts); each must end with it (a load stopped at its time limit, or killed for memory), never left working
for nobody, nor holding the pipes it inherited: the server waits for the loader's answer pipe to close to learn that
it died. In the lowest layer, since both the loader and the API's stored views fork such helpers. A part's
process runs threads beside its work (one trimming its heap, one handing its results on) that end with that work.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator


def die_with_parent(parent: int) -> None:
    """In a process just forked by the process ``parent``: be killed when that process ends (Linux; elsewhere
    nothing), and end now if it already has (before this was set, nothing would come)."""
    with contextlib.suppress(Exception):
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:
        os._exit(1)


@contextlib.contextmanager
def beside(target: Callable[[], None], name: str, stop: Callable[[], None] = lambda: None) -> Iterator[None]:
    """``target`` on a thread of its own while the block runs; at the block's end (whatever its outcome) ``stop``
    tells it to end, and the block waits for it."""
    thread = threading.Thread(target=target, name=name, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop()
        thread.join()
