"""What-if replay (issue 25): a finding's saving is the step time replayed without its cause.

``changes.py`` holds the change models, ``constants.py`` their constants with sources, ``graph.py`` the trace's
dependency graph (built once per model), ``replay.py`` the replay and ``what_if.py`` the combination of the
findings' changes that the Overview's panel, the ``/what_if`` route, the Python API and the CLI share.
"""

from __future__ import annotations

from .changes import (
    CaptureGraph,
    Change,
    Combined,
    DropDevice,
    DropHost,
    FasterPeer,
    OverlapComm,
    ReplaceDevice,
    ScaleDevice,
    SideStream,
    flatten,
)

__all__ = ["CaptureGraph", "Change", "Combined", "DropDevice", "DropHost", "FasterPeer", "OverlapComm",
           "ReplaceDevice", "ScaleDevice", "SideStream", "flatten"]
