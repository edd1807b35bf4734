"""Which views a run can show: a view is listed when its analysis exists and the run's traces hold its data."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..model.arrays import isin_ints
from ..model.derived import memoized
from ..model.kinds import HOST_OP_KINDS, Kind
from ..model.names import is_collective_host, name_mask
from ..model.tables import TraceModel
from .modules import has_modules


def _has_events(model: TraceModel) -> bool:
    return model.n_events > 0


def _has_operators(model: TraceModel) -> bool:
    return bool((model["events"]["kind"] == Kind.CPU_OP).any())


def _has_kernels(model: TraceModel) -> bool:
    return bool(isin_ints(model["events"]["kind"], (Kind.KERNEL,)).any())


def _has_device_work(model: TraceModel) -> bool:
    """The GPU view: idle time, launches, queues, bandwidth and sequences need device events."""
    return len(model["device_events"]["row"]) > 0


def _has_memory(model: TraceModel) -> bool:
    return len(model["memory"]["row"]) > 0


def _has_trace(model: TraceModel) -> bool:
    return model.n_events > 0


def _is_distributed(model: TraceModel) -> bool:
    """A multi-rank job, or any collective: CPU-only Gloo runs may record only ``gloo:…`` spans, without args."""
    info = model.meta.get("distributedInfo")
    if isinstance(info, dict) and isinstance(info.get("world_size"), int) and info["world_size"] > 1:
        return True
    if len(model["comms"]["row"]) > 0:
        return True
    ev = model["events"]
    return bool((isin_ints(ev["kind"], HOST_OP_KINDS) & name_mask(model, ev["name"], is_collective_host)).any())


# View name -> predicate over one loaded trace. Views register here as their analyses land.
VIEW_PREDICATES: dict[str, Callable[[TraceModel], bool]] = {
    "Overview": _has_events,
    "Operator": _has_operators,
    "Flame": _has_operators,  # without call stacks it shows operator nesting and says how to record stacks
    "Kernel": _has_kernels,
    "GPU": _has_device_work,
    "Trace": _has_trace,
    "Memory": _has_memory,
    "Module": has_modules,
    "Distributed": _is_distributed,
}

VIEW_ORDER = ("Overview", "Operator", "Flame", "Kernel", "GPU", "Trace", "Memory", "Module", "Distributed")


def available_views(models: Sequence[TraceModel]) -> list[str]:
    offered = {name for m in models for name in _views_of(m)}
    return [name for name in VIEW_ORDER if name in offered]


@memoized
def _views_of(model: TraceModel) -> tuple[str, ...]:
    """The views one trace offers, kept: every page asks ``/views`` of its run, 50 open pages 50 times over, and
    the predicates scan the events (a few ms each time on a 164 MB trace)."""
    return tuple(name for name in VIEW_ORDER if name in VIEW_PREDICATES and VIEW_PREDICATES[name](model))


def merge_views(lists: Sequence[Sequence[str]]) -> list[str]:
    """The views of a run from its traces' own lists (stored in preprocessed summaries): the same union, in order."""
    offered = {name for views in lists for name in views}
    return [name for name in VIEW_ORDER if name in offered]
