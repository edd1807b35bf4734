"""Findings' savings from what-if replays: each finding that names its fix as a change (``fixes.py``) saves the
replayed step time without it, ``baseline − replay(change)``, where both are the cadence of ``whatif.replay``
(never below 0). A finding without a change keeps its rule's estimate (``estimated: "rule of thumb"``)."""

from __future__ import annotations

import math
from typing import Any

from ...model.tables import TraceModel
from ..rank_summary import RankSummary
from ..whatif.changes import Change, FasterPeer, flatten
from ..whatif.peers import Peers, peers_of
from ..whatif.replay import measured_step_us, replay
from .findings import Finding


def model_name(change: Change) -> str:
    """The change models a change replays, e.g. ``DropHost + ScaleDevice``."""
    names: list[str] = []
    for leaf in flatten((change,)):
        if type(leaf).__name__ not in names:
            names.append(type(leaf).__name__)
    return " + ".join(names)


def what_if_of(model: TraceModel, change: Change, predicted: float) -> dict[str, Any]:
    base = measured_step_us(model)  # the replay without a change, exactly (tests/unit/test_whatif.py)
    return {"id": change.id, "saving_us": max(base - predicted, 0.0), "predicted_step_us": predicted,
            "baseline_step_us": base, "model": model_name(change), "label": change.label}


def needs_peers(change: Change) -> bool:
    """Whether a change is replayed against the job's other ranks: one only this rank makes, or a peer's."""
    return any(leaf.own_rank or isinstance(leaf, FasterPeer) for leaf in flatten((change,)))


def replay_savings(model: TraceModel, found: list[Finding], summaries: list[RankSummary] | None = None,
                   worker: str | None = None) -> None:
    """Replace each finding's saving by its replayed one (in place). A change only this rank makes (the
    straggler's own cause) or a peer's is replayed against the job's other ranks (``summaries``); without them,
    or where they cannot be modelled, the finding keeps its rule's estimate."""
    peers: Peers | None = None
    if summaries and worker is not None and any(f.change is not None and needs_peers(f.change) for f in found):
        peers = peers_of(model, summaries, worker)
    for f in found:
        if f.change is None:
            continue
        job = peers if needs_peers(f.change) else None
        if needs_peers(f.change) and job is None:
            continue
        predicted = replay(model, (f.change,), job).step_us
        if not (math.isfinite(predicted) and math.isfinite(measured_step_us(model))):
            continue  # times the replay cannot order (NaN, ±1e308 in the trace): the rule's estimate stands
        f.what_if = what_if_of(model, f.change, predicted)
        f.what_if["id"] = f.kind
        f.saving_us = float(f.what_if["saving_us"])
