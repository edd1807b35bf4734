"""Training steps and the step-time breakdown (Kernel > Memcpy > Memset > Communication > Runtime > DataLoader >
CPU Exec > Other), following the old plugin's semantics with its step bugs fixed.

Steps come from host ``ProfilerStep#N`` events only; the GPU-side copies (``gpu_user_annotation``) never create
steps. A step's span then grows to cover the GPU work it launched (device-aware boundaries), and trailing steps
whose GPU work was not captured are dropped. Each step's categories add up exactly to its wall time.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..model import intervals as iv
from ..model.arrays import isin_ints, take
from ..model.derived import memoized
from ..model.errors import UnknownCategory
from ..model.kinds import DEVICE_KINDS, Kind
from ..model.names import is_dataloader, name_mask, step_mask, step_number
from ..model.optree import launch_rows
from ..model.tables import TraceModel
from .communication import collective_kernel_mask, collectives, communication_intervals

CATEGORIES = ("Kernel", "Memcpy", "Memset", "Communication", "Runtime", "DataLoader", "CPU Exec", "Other")
HOST_KINDS = (Kind.CPU_OP, Kind.USER_ANNOTATION)
NO_STEPS_NOTE = ("The trace has no ProfilerStep#N events, so the whole trace is shown as one step "
                 "(call prof.step() once per iteration to see steps).")


@dataclass(frozen=True)
class Steps:
    names: list[str]
    host_start: np.ndarray
    host_end: np.ndarray
    start: np.ndarray  # device-aware
    end: np.ndarray
    device_events: np.ndarray  # matched GPU events per step
    notes: list[str] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.names)

    @property
    def duration(self) -> np.ndarray:
        spans: np.ndarray = self.end - self.start
        return spans


NAMED = 5  # a note names this many steps, and counts the rest: notes stay short on any trace


def _host_steps(model: TraceModel) -> tuple[list[str], np.ndarray, np.ndarray, list[str]]:
    """The steps' names, host start and end, and notes on what was merged or told apart.

    A ``ProfilerStep#N`` over the same time as the step N kept last (it starts before that one ends) is the same
    step recorded on another thread: counted once. One that starts later is another step that happens to have
    the same number (a profiler started twice, a restarted schedule): it is a step of its own, named ``N (2)``,
    ``N (3)``… so that no step's time is lost and each can be picked by name.
    """
    ev = model["events"]
    host = isin_ints(ev["kind"], HOST_KINDS) & name_mask(model, ev["name"], lambda s: step_number(s) is not None)
    rows = np.flatnonzero(host & np.isfinite(ev["ts"]) & np.isfinite(ev["dur"]))
    rows = rows[np.argsort(ev["ts"][rows], kind="stable")]
    names: list[str] = []
    starts: list[float] = []
    ends: list[float] = []
    last: dict[str, tuple[float, float]] = {}  # per step number: (start, end) of the step kept last
    kept: dict[str, list[str]] = {}  # per step number: the names of its steps
    merged: dict[str, int] = {}  # per step number: occurrences counted once
    for r in rows.tolist():
        number = str(step_number(model.strings[int(ev["name"][r])]))
        start, end = float(ev["ts"][r]), float(ev["ts"][r] + ev["dur"][r])
        before = last.get(number)
        if before is not None and (start < before[1] or start == before[0]):
            merged[number] = merged.get(number, 1) + 1
            continue
        alike = kept.setdefault(number, [])
        alike.append(number if not alike else f"{number} ({len(alike) + 1})")
        names.append(alike[-1])
        starts.append(start)
        ends.append(end)
        last[number] = (start, end)
    notes = _alike_notes(kept, merged) + _negative_note(model)
    return names, np.asarray(starts, dtype=np.float64), np.asarray(ends, dtype=np.float64), notes


def _listed(items: list[str]) -> str:
    shown = ", ".join(items[:NAMED])
    return shown + (f" and {len(items) - NAMED:,} more" if len(items) > NAMED else "")


def _alike_notes(kept: dict[str, list[str]], merged: dict[str, int]) -> list[str]:
    notes = []
    repeated = [number for number, alike in kept.items() if len(alike) > 1]
    if repeated:
        told = _listed([f"ProfilerStep#{n} {len(kept[n])} times (shown as {', '.join(kept[n][:NAMED])}"
                        f"{', …' if len(kept[n]) > NAMED else ''})" for n in repeated])
        notes.append(f"Several steps have the same number, one after another: {told}. Each is a step of its own "
                     "here (was the profiler started twice, or its schedule restarted?).")
    if merged:
        told = _listed([f"ProfilerStep#{n} {count} times" for n, count in merged.items()])
        notes.append(f"Steps recorded more than once over the same time (on other threads): {told}. Each is counted "
                     "once, as the one recorded first.")
    return notes


def _negative_note(model: TraceModel) -> list[str]:
    """What the loader clamped (``loader.columns.clamp_negative_durations``)."""
    clamped = model.meta.get("negative_durations")
    if not isinstance(clamped, dict) or not clamped.get("count"):
        return []
    example = str(clamped.get("example") or "an event")
    example = example if len(example) <= 80 else example[:79] + "…"
    count = int(clamped["count"])
    return [f"{count:,} event{'s' if count != 1 else ''} of the trace had a negative duration (down to "
            f"{float(clamped.get('min_us', 0.0)):,.3f} µs, on {example}): each counts as 0 µs."]


def _event_bounds(model: TraceModel, kinds: tuple[int, ...]) -> tuple[float, float] | None:
    ev = model["events"]
    mask = isin_ints(ev["kind"], kinds) & np.isfinite(ev["ts"])
    if not mask.any():
        return None
    ts = ev["ts"][mask]
    end = ts + np.nan_to_num(ev["dur"][mask], nan=0.0, posinf=0.0).clip(min=0.0)
    return float(ts.min()), float(end.max())


@memoized
def find_steps(model: TraceModel) -> Steps:
    names, host_start, host_end, notes = _host_steps(model)
    if not names:
        bounds = _event_bounds(model, (Kind.CPU_OP, Kind.USER_ANNOTATION, Kind.PYTHON_FUNCTION, Kind.RUNTIME,
                                       Kind.DRIVER))
        if bounds is None:
            bounds = _event_bounds(model, tuple(DEVICE_KINDS)) or (0.0, 0.0)
        names, host_start, host_end = ["0"], np.array([bounds[0]]), np.array([bounds[1]])
        notes.append(NO_STEPS_NOTE)
    return _device_aware(model, names, host_start, host_end, notes)


def _device_aware(model: TraceModel, names: list[str], host_start: np.ndarray, host_end: np.ndarray,
                  notes: list[str]) -> Steps:
    ev = model["events"]
    dev = model["device_events"]
    n = len(names)
    dev_start = ev["ts"][dev["row"]]
    dev_end = dev_start + np.nan_to_num(ev["dur"][dev["row"]], nan=0.0).clip(min=0.0)

    # Step of each launch: the step whose host span fully holds it. The launches come from the correlation join
    # alone (no host tree: the Trace view's first window shows the steps and must not wait for the tree).
    launch = launch_rows(model)
    has_launch = launch >= 0
    l_start = take(ev["ts"], launch, np.nan)
    l_end = l_start + np.nan_to_num(take(ev["dur"], launch, 0.0), nan=0.0, posinf=0.0, neginf=0.0).clip(min=0.0)
    k = np.searchsorted(host_start, l_start, side="right") - 1
    inside = has_launch & (k >= 0)
    inside[inside] &= (l_start[inside] >= host_start[k[inside]]) & (l_end[inside] <= host_end[k[inside]])
    step_of = np.where(inside, k, -1)

    matched = np.bincount(step_of[inside], minlength=n) if n else np.zeros(0, np.int64)
    d_min = np.full(n, np.inf)
    d_max = np.full(n, -np.inf)
    np.minimum.at(d_min, step_of[inside], dev_start[inside])
    np.maximum.at(d_max, step_of[inside], dev_end[inside])

    start, end = host_start.copy(), host_end.copy()
    if inside.any():
        prev_end = float(host_start[0])
        if np.isfinite(d_min[0]):
            earlier = ~inside & (dev_end < d_min[0])
            if earlier.any():
                prev_end = max(prev_end, float(dev_end[earlier].max()))
        for i in range(n):
            s = max(prev_end, float(host_start[i]))
            e = float(host_end[i])
            e = max(e, s) if not np.isfinite(d_max[i]) else max(e, float(d_max[i]), s)
            start[i], end[i] = s, e
            prev_end = e
        # Trailing steps whose GPU work was not captured.
        last = n - 1
        while last >= 0 and matched[last] == 0:
            last -= 1
        keep = max(last + 1, 1)
        if keep > 1 and matched[keep - 1] < 0.8 * matched[keep - 2]:
            keep -= 1
        if keep < n:
            dropped = ", ".join(names[keep:])
            notes.append(f"Step(s) {dropped} left out: their GPU work was not (fully) captured by the profiler.")
            names, host_start, host_end = names[:keep], host_start[:keep], host_end[:keep]
            start, end, matched = start[:keep], end[:keep], matched[:keep]
    return Steps(names=list(names), host_start=host_start, host_end=host_end, start=start, end=end,
                 device_events=np.asarray(matched), notes=notes)


@dataclass(frozen=True)
class Breakdown:
    steps: Steps
    per_step: dict[str, np.ndarray]  # category -> µs per step


def _kind_union(model: TraceModel, mask: np.ndarray) -> iv.Intervals:
    ev = model["events"]
    ts = ev["ts"][mask]
    return iv.union(ts, ts + np.nan_to_num(ev["dur"][mask], nan=0.0).clip(min=0.0))


def _category_events(model: TraceModel, category: str) -> np.ndarray:
    """Per event row: is it one the breakdown counts in ``category`` (any but "Other", which is time no event
    covers)?

    The breakdown's time ranges are these events' spans (``role_intervals``), so the Trace view, asked to
    highlight a category, shows exactly the events the Overview counted. Communication is the collective instances
    (``collectives``: collective kernels, and host collective spans only where no collective kernel did the work)
    and Kineto's ``collective_comm`` events; a host collective span that launched a kernel is CPU work (the host
    issuing it), as any other operator.
    """
    ev = model["events"]
    kind, names = ev["kind"], ev["name"]
    if category == "Kernel":
        mask: np.ndarray = (kind == Kind.KERNEL) & ~collective_kernel_mask(model)
    elif category in ("Memcpy", "Memset"):
        mask = kind == (Kind.MEMCPY if category == "Memcpy" else Kind.MEMSET)
    elif category == "Communication":
        mask = kind == Kind.COMMUNICATION
        mask[collectives(model).row] = True
    elif category == "Runtime":
        mask = (kind == Kind.RUNTIME) | (kind == Kind.DRIVER)
    else:
        host = isin_ints(kind, HOST_KINDS)
        loader = host & name_mask(model, names, is_dataloader)
        if category == "DataLoader":
            mask = loader
        elif category == "CPU Exec":
            steps = host & step_mask(model, names)
            mask = host & ~loader & ~steps
        else:
            raise UnknownCategory(category)
    return mask


@memoized(closed=True)
def category_events(model: TraceModel, category: str) -> np.ndarray:
    """``_category_events``, kept for the categories the Trace view highlights (a byte per event each: only those
    asked for are kept, not all seven); "Other" marks none."""
    if category == "Other":
        return np.zeros(model.n_events, dtype=bool)
    return _category_events(model, category)


@memoized
def role_intervals(model: TraceModel) -> dict[str, iv.Intervals]:
    """The raw time ranges of each category before priorities are applied: the spans of its events
    (``category_events``).

    Communication is ``communication_intervals``, the definition the Distributed view uses too (the spans of the
    same events).
    """
    roles = {c: _kind_union(model, _category_events(model, c)) for c in CATEGORIES[:-1] if c != "Communication"}
    roles["Communication"] = communication_intervals(model)
    return roles


@memoized
def breakdown(model: TraceModel) -> Breakdown:
    steps = find_steps(model)
    roles = role_intervals(model)
    slots = iv.union(steps.start, steps.end)
    per_step: dict[str, np.ndarray] = {}
    for category in CATEGORIES[:-1]:
        cost = iv.intersect(roles[category], slots)
        slots = iv.subtract(slots, cost)
        per_step[category] = iv.lengths_within(cost, steps.start, steps.end)
    other = steps.duration - sum(per_step.values())
    per_step["Other"] = np.clip(other, 0.0, None)
    return Breakdown(steps=steps, per_step=per_step)
