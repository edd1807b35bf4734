"""A forked helper process's life tied to the process that forked it.

The loader process forks helpers (the parse's parts, the writer of its parse, the handover's copier, the stored
views' parts); each must end with it (a load stopped at its time limit, or killed for memory), never left working
for nobody, nor holding the pipes it inherited: the server waits for the loader's answer pipe to close to learn that
it died. In the lowest layer, since both the loader and the API's stored views fork such helpers.
"""

from __future__ import annotations

import contextlib
import os


def die_with_parent(parent: int) -> None:
    """In a process just forked by the process ``parent``: be killed when that process ends (Linux; elsewhere
    nothing), and end now if it already has (before this was set, nothing would come)."""
    with contextlib.suppress(Exception):
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:
        os._exit(1)
