"""Fail any test that reads from beside the checkout (a folder of traces next to the repository, say).

A fresh clone has nothing beside it, so a test that reads a sibling folder of the repository passes on a
developer's machine and in a CI that has the folder, and fails for everyone else. This guard makes such a read
fail everywhere: an audit hook (PEP 578) refuses opens, listings and symlinks whose target lies in a folder that
sat beside the repository when the session started. ``.ci/run`` proves the rest by running the suite from a
clone in an empty directory, where subprocesses (TensorBoard, Chromium) cannot find such folders either.

The guard is off when the repository's parent is a shared place (``/``, the home or the temp directory), where
its siblings are unrelated folders that tests legitimately use.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
_EVENTS = frozenset({"open", "os.listdir", "os.scandir", "glob.glob", "os.symlink", "shutil.copyfile",
                     "shutil.copytree"})
_forbidden: tuple[str, ...] = ()


class OutsideRead(RuntimeError):
    """A test touched a path beside the checkout (not an OSError, so no caller mistakes it for a missing file)."""


def _siblings() -> tuple[str, ...]:
    parent = REPO.parent
    shared_places = {Path("/"), Path.home().resolve(), Path(tempfile.gettempdir()).resolve()}
    if parent in shared_places:
        return ()
    try:
        names = os.listdir(parent)
    except OSError:
        return ()
    return tuple(str(parent / n) for n in sorted(names) if parent / n != REPO)


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder + os.sep)


# The interpreter's own environment (a virtual environment shared by several worktrees may sit in a sibling
# checkout) is where the test tools come from, not data a test reads.
_ENVIRONMENT = tuple(sorted({os.path.realpath(p) for p in (sys.prefix, sys.exec_prefix, sys.base_prefix)}))


def check(path: Any) -> None:
    """Raise :class:`OutsideRead` when ``path`` lies in a folder that sits beside the repository."""
    if not _forbidden or not isinstance(path, (str, bytes, os.PathLike)):
        return
    text = os.fsdecode(path)
    full = os.path.realpath(text) if os.path.isabs(text) or os.sep in text else os.path.abspath(text)
    if any(_inside(full, env) for env in _ENVIRONMENT):
        return
    for folder in _forbidden:
        if _inside(full, folder) or _inside(os.path.abspath(text), folder):
            raise OutsideRead(f"tests must not read outside the repository: {text} is beside the checkout "
                              f"({folder}); copy what the test needs into tests/data/ with its origin")


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if event in _EVENTS and args:
        check(args[0])


def install() -> None:
    """Start guarding (once per process)."""
    global _forbidden
    if _forbidden or getattr(sys, "_ptp_outside_guard", False):
        return
    _forbidden = _siblings()
    sys._ptp_outside_guard = True  # type: ignore[attr-defined]
    sys.addaudithook(_hook)


def describe() -> str:
    if not _forbidden:
        return "outside-the-repository guard: off (nothing beside the checkout)"
    return f"outside-the-repository guard: on ({len(_forbidden)} folders beside the checkout are off limits)"
