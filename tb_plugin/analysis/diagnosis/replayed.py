"""Findings' savings from what-if replays: each finding that names its fix as a change (``fixes.py``) saves the
replayed step time without it, ``baseline − replay(change)``, where both are the cadence of ``whatif.replay``
(never below 0). A finding without a change keeps its rule's estimate (``estimated: "rule of thumb"``)."""

from __future__ import annotations

from typing import Any

from ...model.tables import TraceModel
from ..whatif.changes import Change, flatten
from ..whatif.replay import baseline, replay
from .findings import Finding


def model_name(change: Change) -> str:
    """The change models a change replays, e.g. ``DropHost + ScaleDevice``."""
    names: list[str] = []
    for leaf in flatten((change,)):
        if type(leaf).__name__ not in names:
            names.append(type(leaf).__name__)
    return " + ".join(names)


def what_if_of(model: TraceModel, change: Change, predicted: float) -> dict[str, Any]:
    base = baseline(model).step_us
    return {"id": change.id, "saving_us": max(base - predicted, 0.0), "predicted_step_us": predicted,
            "baseline_step_us": base, "model": model_name(change), "label": change.label}


def replay_savings(model: TraceModel, found: list[Finding]) -> None:
    """Replace each finding's saving by its replayed one (in place); findings whose change only this rank makes
    (a straggler's own cause) keep their estimate until the other ranks' pace is replayed with them."""
    for f in found:
        if f.change is None or f.change.own_rank:
            continue
        predicted = replay(model, (f.change,)).step_us
        f.what_if = what_if_of(model, f.change, predicted)
        f.what_if["id"] = f.kind
        f.saving_us = float(f.what_if["saving_us"])
