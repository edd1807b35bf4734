"""Diagnosis: the run's context, ranked findings with evidence, and a one-line verdict (docs/guide/overview.md).

``diagnose(model)`` for one trace; on multi-rank runs the API passes the Distributed view's result for the span
(``job``) and this trace's worker, so every rank's Overview knows the job-level picture (the straggler, how much
of this rank's communication is waiting). Pure: no files, no HTTP.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...model.arrays import take
from ...model.kinds import Kind
from ...model.tables import TraceModel
from ..launches import device_work
from ..rank_summary import RankSummary
from ..steps import find_steps
from ..whatif.apply import apply
from . import rules_causes
from .context import run_context
from .findings import RULES as SYMPTOM_RULES
from .findings import TITLES as SYMPTOM_TITLES
from .findings import Facts, Finding, ms
from .replayed import replay_savings

RULES = rules_causes.RULES + SYMPTOM_RULES
TITLES = {**SYMPTOM_TITLES, **rules_causes.TITLES}

_PACE = {"copy_bound"}
# The root cause each finding kind names, in the calibration corpus's terms (tests/data/calibration/*/MANIFEST.json:
# ``root_cause``; samples/README.md "Calibration pairs"). Symptom kinds map to the cause the corpus plants for them.
ROOT_CAUSE_OF = {
    "input_bound": "dataloader_wait", "cpu_tensor_creation": "cpu_tensor_creation", "cpu_bound": "cpu_bound",
    "gpu_idle_gaps": "cpu_bound", "launch_bound": "launch_bound", "sync_bound": "host_device_sync",
    "pageable_copies": "copy_bound", "copy_bound": "copy_bound", "low_tensor_cores": "tf32_disabled",
    "communication_bound": "communication_bound", "straggler_wait": "straggler_host", "straggler": "straggler_host",
    "allocator_churn": "allocator_churn", "recompilation": "recompilation",
    "checkpoint_recompute": "activation_checkpointing", "unfused_optimizer": "unfused_optimizer",
    "host_compute": "host_augmentation", "cudnn_autotune": "cudnn_autotune_churn",
    "cudnn_benchmark": "cudnn_benchmark_off", "pipeline_bubble": "pipeline_bubble",
    "grad_accum_allreduce": "grad_accum_allreduce", "gpu_bound": "none", "cpu_compute": "none", "none": "none",
}
VERDICT_SHARE = 0.10  # a cause becomes the verdict when it saves at least this share of the step
# Symptom classes: what the evidence says (the host or the launches set the pace, the collectives wait, this rank is
# slow), not what produces it. Where a finding that names what produces it saves ≥ VERDICT_SHARE too, it is the
# verdict (the symptom's larger replayed saving is a different fix: compiling the whole step, say).
SYMPTOMS = frozenset({"cpu_bound", "gpu_idle_gaps", "launch_bound", "communication_bound", "straggler"})


def job_picture(job: dict[str, Any] | None, worker: str | None) -> dict[str, Any] | None:
    """This rank's view of the job, from the Distributed view's result: rank, world size, the straggler, and how
    long this rank waits in collectives per step."""
    if not job or worker is None:
        return None
    rows = job.get("ranks") or []
    me = next((r for r in rows if r["worker"] == worker), None)
    if me is None or len(rows) < 2:
        return None
    s = job.get("straggler") or {}
    others = [r for r in rows if r["worker"] != s.get("worker")]
    idle_others = sum(r["host_idle_us"] for r in others) / len(others) if others else 0.0
    strag = next((r for r in rows if r["worker"] == s.get("worker")), None)
    return {
        "rank": me["rank"], "world_size": job.get("world_size") or len(rows),
        "wait_us": me["sync_us"], "host_wait_us": me["host_wait_us"], "communication_us": me["communication_us"],
        # collectives' waiting and host syncs, each stall counted once (the Distributed view's ``wait_us``)
        "stall_wait_us": me.get("wait_us", max(me["sync_us"], me["host_wait_us"])),
        "own_cause": s.get("own_cause"),
        "stalled_us": me.get("stalled_us", 0.0), "exposed_transfer_us": me.get("exposed_transfer_us", 0.0),
        "straggler_rank": s.get("rank"), "straggler_worker": s.get("worker"),
        "others_wait_us": s.get("others_wait_us"), "others_stalled_us": s.get("others_stalled_us"),
        "text": s.get("text"),
        "extra_idle_us": (strag["host_idle_us"] - idle_others) if strag else None,
    }


def _blocks_the_rest(f: Finding, facts: Facts) -> bool:
    """A rank stalled by a straggler (≥ 10 % of its step) gains nothing from its own fixes until the straggler
    keeps up: in a synchronous job the step is the slowest rank's, so the straggler comes first there."""
    return f.kind == "straggler_wait" and f.saving_us >= VERDICT_SHARE * facts.step_us


def _lead(found: list[Finding], facts: Facts) -> Finding | None:
    """The finding the verdict names: a rank stalled by a straggler waits for it first; else the cause that saves
    most of those that save ≥ VERDICT_SHARE, one that names what produces a symptom before the symptom class
    (``SYMPTOMS``); where none does, what sets the pace: the kernels (GPU-bound), the host (CPU compute-bound), or
    the copies (Copy-bound, when overlapping them cannot help: they are the step's critical path)."""
    causes = [f for f in found if f.cause and not f.fallback and f.saving_us >= VERDICT_SHARE * facts.step_us]
    launch_bound = any(f.kind == "launch_bound" for f in causes)
    ranked = ([f for f in causes if _blocks_the_rest(f, facts)]
              or [f for f in causes if f.kind not in SYMPTOMS and (not launch_bound or _launches_most(f, facts))]
              or causes)
    return ranked[0] if ranked else next((f for f in found if f.fallback or f.kind in _PACE), None)


def _launches_most(f: Finding, facts: Facts) -> bool:
    """Whether a cause's fix removes the host time of most of the kernel launches of the steps, of which a
    launch-bound step has too many: only then does the cause produce that symptom (an unfused optimizer launching
    two thirds of the step's kernels does; one launching a third of them, among tiny kernels everywhere, does not).
    CPU-bound, by
    contrast, says only that the host sets the pace: any host cause saving ≥ VERDICT_SHARE comes before it."""
    if f.change is None:
        return False
    work = device_work(facts.model)
    steps = find_steps(facts.model)
    ts = work.launch_start[np.isfinite(work.launch_start) & (work.kind == Kind.KERNEL)]
    k = np.searchsorted(steps.host_start, ts, side="right") - 1
    ts = ts[(k >= 0) & (ts < take(steps.host_end, k, -np.inf))]  # the kernels the steps launch
    if not len(ts):
        return True
    lo, hi = apply(facts.model, (f.change,)).dropped
    k = np.searchsorted(lo, ts, side="right") - 1
    inside = (k >= 0) & (ts < take(hi, k, -np.inf))
    return bool(inside.mean() >= 0.5)


def _verdict(found: list[Finding], facts: Facts) -> dict[str, Any]:
    pick = _lead(found, facts)
    if pick is None:
        return {"kind": "none", "id": None, "saving_us": 0.0, "where": None, "root_cause": "none",
                "text": "No dominant bottleneck: no cause would save 10 % of the step."}
    # the symptom's title with where its cause lives: "Launch-bound at train.py:74 (train_step) → loss.backward: …"
    at = pick.where.text() if pick.where else ""
    text = f"{TITLES[pick.kind]}{f' at {at}' if at else ''}: {pick.headline}"
    if pick.saving_us > 0:
        text += f"; est. −{ms(pick.saving_us)}/step"
    job = facts.job or {}
    if job.get("straggler_rank") is not None and job["straggler_rank"] == job.get("rank") and pick.kind != "straggler":
        text += f". This rank is the job's straggler: the others wait {ms(float(job['others_wait_us']))}/step for it"
        cause = job.get("own_cause")
        if cause:
            text += f"; it spends {ms(float(cause['us']))}/step in {cause['text']}, the others {ms(cause['others_us'])}"
    return {"kind": pick.kind, "id": pick.kind, "saving_us": float(pick.saving_us), "text": text,
            "where": pick.where.as_dict() if at and pick.where else None,
            "root_cause": ROOT_CAUSE_OF.get(pick.kind, pick.kind)}


def diagnose(model: TraceModel, job: dict[str, Any] | None = None, worker: str | None = None,
             summaries: list[RankSummary] | None = None) -> dict[str, Any]:
    """``{context, verdict, findings}``: findings sorted by estimated saving per step, largest first; ``summaries``
    (the job's rank summaries, with ``job``) let a straggler's own fix be replayed against the other ranks."""
    facts, found = findings(model, job, worker, summaries)
    return {"context": facts.context, "verdict": _verdict(found, facts), "findings": [f.as_dict(facts) for f in found]}


def findings(model: TraceModel, job: dict[str, Any] | None = None, worker: str | None = None,
             summaries: list[RankSummary] | None = None) -> tuple[Facts, list[Finding]]:
    """The facts every rule reads and the findings, ranked, with their replayed savings (``diagnose``'s parts)."""
    steps = find_steps(model)
    context = dict(run_context(model))
    picture = job_picture(job, worker)
    if picture:
        context["job"] = picture
        extra = f"rank {picture['rank']} of {picture['world_size']}"
        if picture["straggler_rank"] is not None:
            extra += f" · rank {picture['straggler_rank']} straggles"
        context["label"] = " · ".join(p for p in (context["label"], extra) if p)
    facts = Facts(model=model, context=context, step_us=float(steps.duration.mean()) if steps.count else 0.0,
                  job=picture)
    found = [f for rule in RULES if (f := rule(facts)) is not None]
    # never suggest what the run already does: the rules word around it, and a rule that slips is left out
    # (tests/unit/test_diagnosis.py checks every corpus run's advice, tags and words, against its context)
    found = [f for f in found if not set(f.suggests) & set(context["in_use"])]
    replay_savings(model, found, summaries, worker)
    found.sort(key=lambda f: (not _blocks_the_rest(f, facts), -f.saving_us, not f.cause))
    return facts, found
