"""Which views a run can show: a view is listed when its analysis exists and the run's traces hold its data."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..model.tables import TraceModel

# View name -> predicate over one loaded trace. Views register here as their analyses land.
VIEW_PREDICATES: dict[str, Callable[[TraceModel], bool]] = {}

VIEW_ORDER = ("Overview", "Operator", "Kernel", "Trace", "Memory", "Module", "Distributed")


def available_views(models: Sequence[TraceModel]) -> list[str]:
    return [name for name in VIEW_ORDER
            if name in VIEW_PREDICATES and any(VIEW_PREDICATES[name](m) for m in models)]
