"""A combination of the findings' fixes, replayed as one: what the Overview's what-if panel, the ``/what_if``
route, the Python API (``Trace.what_if``) and the CLI summary show.

``what_if(model, ids)`` replays the changes of the findings ``ids`` (as ``/overview`` lists them) **together**,
never as a sum of their savings: fixes that remove the same idle time, or whose gains the next bottleneck caps,
save less together than apart. The answer holds the baseline (the replay without a change, i.e. the measured
cadence), the prediction, and both step breakdowns (``breakdown.py``: the Overview's categories over the steady-
state step, so each adds up to its step time). On a multi-rank run a straggler's own fix is replayed against the
other ranks (``peers.py``); mixed with fixes every rank would make, the combination is replayed against them too.
"""

from __future__ import annotations

from typing import Any

from ...model.derived import memoized
from ...model.errors import NotFound
from ...model.tables import TraceModel
from ..diagnosis import findings as diagnose_findings
from ..diagnosis.findings import Finding
from ..diagnosis.replayed import model_name, needs_peers
from ..rank_summary import RankSummary
from .breakdown import baseline_breakdown, replayed_breakdown
from .peers import peers_of
from .replay import baseline, replay


class UnknownFinding(NotFound, ValueError):
    """An id that is not one of the trace's findings with a fix to replay; the message names the valid ones."""


def what_if(model: TraceModel, ids: list[str] | tuple[str, ...], job: dict[str, Any] | None = None,
            worker: str | None = None, summaries: list[RankSummary] | None = None) -> dict[str, Any]:
    """The replay of the findings ``ids`` together (module doc); raises ``UnknownFinding`` for an id the trace's
    diagnosis does not have (or whose finding names no change)."""
    replayable = _single_rank(model) if job is None and not summaries else \
        _replayable(diagnose_findings(model, job, worker, summaries)[1])
    wanted = list(dict.fromkeys(ids))
    unknown = [i for i in wanted if i not in replayable]
    if unknown:
        valid = ", ".join(sorted(replayable)) or "none"
        raise UnknownFinding(f"unknown finding {', '.join(map(repr, unknown))}: this trace's findings with a "
                             f"replayable fix are {valid}")
    changes = tuple(c for i in wanted if (c := replayable[i].change) is not None)
    peers = None
    if summaries and worker is not None and any(needs_peers(c) for c in changes):
        peers = peers_of(model, summaries, worker)
    base = baseline(model)
    predicted = replay(model, changes, peers) if changes else base
    return {
        "ids": wanted,
        "baseline_step_us": base.step_us,
        "predicted_step_us": predicted.step_us,
        "saving_us": max(base.step_us - predicted.step_us, 0.0),
        "steps": predicted.count,
        "baseline_breakdown_us": dict(baseline_breakdown(model)),
        "predicted_breakdown_us": dict(baseline_breakdown(model)) if predicted is base
        else replayed_breakdown(model, predicted),
        "changes": [{"id": i, "label": c.label, "model": model_name(c)} for i, c in zip(wanted, changes)],
        "available": [{"id": k, "label": str(f.what_if["label"]) if f.what_if else k, "saving_us": float(f.saving_us)}
                      for k, f in replayable.items()],
    }


def _replayable(found: list[Finding]) -> dict[str, Finding]:
    """The findings whose fix is replayed, by id, in their rank's order."""
    return {f.kind: f for f in found if f.change is not None and f.what_if is not None}


@memoized
def _single_rank(model: TraceModel) -> dict[str, Finding]:
    """:func:`_replayable` of a trace on its own (no job: the worker plays no part in its findings), the same for
    every combination the panel asks (memoised: the diagnosis took 0.5 of each answer's 1.9-2.3 s on the 2 GB
    trace). Never modify it."""
    return _replayable(diagnose_findings(model)[1])
