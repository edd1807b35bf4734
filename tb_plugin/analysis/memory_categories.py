"""Memory by category, inferred from the trace: what each allocation was for, by training phase and lifetime.

``prof.export_memory_timeline`` labels memory by following tensors through the autograd graph; a Kineto trace
holds only the allocator's ``[memory]`` records (time, address, size, total allocated) and the operators around
them. This module infers torch's categories from that alone (``docs/guide/memory.md`` states the rules and how
they compare with torch's own export on the recorded sample):

1. created and freed inside one operator (the outermost ``aten::`` call around the allocation) → temporary;
2. created in backward (:mod:`.memory_phases`) → gradient when it outlives the step's backward (freed by the
   optimizer's ``zero_grad``, later, or never), else autograd detail (gradients of activations);
3. created in an optimizer ``step``/``zero_grad`` → optimizer state when it outlives that call, else temporary;
4. created in the rest of a step (forward) → input when its operator copied it from the host (it launched a
   host-to-device memcpy), else activation;
5. created outside every step → parameter when never freed, else unknown;
6. allocated before profiling and freed during it → by where it is freed: in the optimizer (``zero_grad``) a
   gradient, in backward an activation, else unknown;
7. allocated before profiling and never freed (the allocator's total before the first record, less rule 6):
   parameters up to the bytes of one step's gradients (a parameter's gradient has its size), optimizer state
   up to the optimizer's state per parameter byte (2 for Adam-like, 1 for SGD with momentum, RMSprop, Adagrad),
   the rest unknown.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..model.arrays import isin_ints, take
from ..model.derived import memoized
from ..model.kinds import Kind
from ..model.memory_categories import CATEGORIES
from ..model.optree import host_tree
from ..model.tables import TraceModel
from .memory import memory_owners, memory_records
from .memory_phases import BACKWARD_PREFIX, Phase, Phases, training_phases

C = {name: i for i, name in enumerate(CATEGORIES)}
# optimizer state bytes per parameter byte, by the class in ``Optimizer.step#<Class>.step``
STATE_PER_PARAMETER = {"Adam": 2, "AdamW": 2, "NAdam": 2, "RAdam": 2, "Adamax": 2, "Adadelta": 2, "Rprop": 2,
                       "SGD": 1, "RMSprop": 1, "Adagrad": 1, "ASGD": 2}
DEFAULT_STATE_PER_PARAMETER = 2


@dataclass(frozen=True)
class Allocations:
    """Every allocation of the trace (paired with its free), labelled; arrays indexed by allocation.

    ``alloc_us`` is ``-inf`` for memory allocated before profiling (its free is in the trace), ``free_us``
    ``+inf`` for memory never freed in the trace. ``baseline[d]`` is what device ``d`` held before its first
    record and never freed, split into categories by rule 7; ``first_us[d]`` is that first record's time.
    """

    devices: list[str]
    device: np.ndarray
    alloc_us: np.ndarray
    free_us: np.ndarray
    nbytes: np.ndarray
    category: np.ndarray
    owner: np.ndarray  # host-tree node of the allocating operator, -1 if none
    record: np.ndarray  # row in memory_records of the allocation, -1 before profiling
    baseline: np.ndarray  # (len(devices), len(CATEGORIES)) int64
    first_us: np.ndarray


def _pairs(model: TraceModel) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(device labels, device index, allocation record, free record (-1: none), bytes) of every allocation,
    allocations and frees paired by (device, address) in time order; frees of earlier memory have record -1."""
    rec = memory_records(model)
    devices, dev = rec.labels, rec.device.astype(np.int64)
    use = np.flatnonzero((rec.addr >= 0) & (rec.nbytes != 0))
    order = use[np.lexsort((use, rec.addr[use], dev[use]))]  # by device, address, then time
    same = (dev[order][1:] == dev[order][:-1]) & (rec.addr[order][1:] == rec.addr[order][:-1])
    is_alloc = rec.nbytes[order] > 0
    paired = same & is_alloc[:-1] & ~is_alloc[1:]
    freed_by = np.full(len(order), -1, dtype=np.int64)
    freed_by[:-1][paired] = order[1:][paired]
    orphan_free = ~is_alloc & ~np.concatenate([[False], paired])
    alloc_rec = np.concatenate([order[is_alloc], np.full(int(orphan_free.sum()), -1)])
    free_rec = np.concatenate([freed_by[is_alloc], order[orphan_free]])
    any_rec = np.where(alloc_rec >= 0, alloc_rec, free_rec)
    return (list(devices), dev[any_rec], alloc_rec, free_rec,
            np.abs(rec.nbytes[any_rec]).astype(np.int64))


def _top_operator(model: TraceModel) -> np.ndarray:
    """Per host-tree node: the outermost operator above it that is not a whole backward node (-1 if none)."""
    tree = host_tree(model)
    names = model["events"]["name"][tree.rows]
    whole = isin_ints(names, model.codes_where(lambda s: s.startswith(BACKWARD_PREFIX)))
    plain = (tree.kind == Kind.CPU_OP) & ~whole
    top = np.full(tree.size, -1, dtype=np.int64)
    by_depth = np.argsort(tree.depth, kind="stable")
    bounds = np.searchsorted(tree.depth[by_depth], np.arange(int(tree.depth.max(initial=-1)) + 2))
    for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist()):  # parents before children, a level at a time
        level = by_depth[lo:hi]
        parent = tree.parent[level]
        inherit = (parent >= 0) & plain[np.clip(parent, 0, None)]
        top[level] = np.where(plain[level], np.where(inherit, top[np.clip(parent, 0, None)], level), -1)
    return top


def _host_to_device_copiers(model: TraceModel, top: np.ndarray) -> np.ndarray:
    """Top operator nodes that launched a host-to-device memcpy (``.to(device)`` of a batch)."""
    tree = host_tree(model)
    ev, dev = model["events"], model["device_events"]
    rows = dev["row"]
    htod = (ev["kind"][rows] == Kind.MEMCPY) & np.isin(
        ev["name"][rows], model.codes_where(lambda s: "HtoD" in s))
    ops = tree.device_op[htod]
    ops = ops[ops >= 0]
    return np.unique(top[ops]) if len(ops) else np.empty(0, dtype=np.int64)


@memoized
def allocations(model: TraceModel) -> Allocations:
    """Every allocation of the trace with its inferred category (rules 1–7 of the module docstring)."""
    rec = memory_records(model)
    devices, dev, alloc_rec, free_rec, nbytes = _pairs(model)
    alloc_us = take(rec.ts, alloc_rec, -np.inf)
    free_us = take(rec.ts, free_rec, np.inf)
    owner = take(memory_owners(model), alloc_rec, -1)
    phases = training_phases(model)
    top = _top_operator(model)
    top_of = take(top, owner, -1)
    top_end = take(host_tree(model).end, top_of, -np.inf)
    category = _label(phases, alloc_us, free_us, free_us <= top_end,
                      np.isin(top_of, _host_to_device_copiers(model, top)) & (top_of >= 0))
    first_us, baseline = _baselines(model, phases, len(devices), dev, alloc_us, nbytes, category)
    return Allocations(devices, dev, alloc_us, free_us, nbytes, category, owner, alloc_rec, baseline, first_us)


def _label(phases: Phases, alloc_us: np.ndarray, free_us: np.ndarray, temporary: np.ndarray,
           input_copy: np.ndarray) -> np.ndarray:
    """Rules 1–6: one category per allocation, from its phases and lifetime."""
    made, gone = phases.phase_of(alloc_us), phases.phase_of(free_us)
    step = np.clip(phases.step_of(alloc_us), 0, None)
    backward_end = phases.backward_end[step] if len(phases.backward_end) else np.full(len(alloc_us), np.inf)
    opt_end = phases.optimizer_end(alloc_us)
    before = ~np.isfinite(alloc_us)
    rules = [
        (before & (gone == Phase.OPTIMIZER), C["gradient"]),
        (before & (gone == Phase.BACKWARD), C["activation"]),
        (before, C["unknown"]),
        (temporary, C["temporary"]),
        ((made == Phase.BACKWARD) & (free_us > backward_end), C["gradient"]),
        (made == Phase.BACKWARD, C["autograd_detail"]),
        ((made == Phase.OPTIMIZER) & ~(free_us <= opt_end), C["optimizer_state"]),
        (made == Phase.OPTIMIZER, C["temporary"]),
        ((made == Phase.FORWARD) & input_copy, C["input"]),
        (made == Phase.FORWARD, C["activation"]),
        (~np.isfinite(free_us), C["parameter"]),
    ]
    return np.select([r[0] for r in rules], [r[1] for r in rules], C["unknown"]).astype(np.int8)


def _baselines(model: TraceModel, phases: Phases, n_devices: int, dev: np.ndarray, alloc_us: np.ndarray,
               nbytes: np.ndarray, category: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per device: the first record's time and rule 7's split of what was allocated before it and never freed."""
    rec = memory_records(model)
    first_us = np.full(n_devices, np.nan)
    baseline = np.zeros((n_devices, len(CATEGORIES)), dtype=np.int64)
    state = STATE_PER_PARAMETER.get(phases.optimizer_class or "", DEFAULT_STATE_PER_PARAMETER)
    for d in range(len(rec.labels)):
        on = np.flatnonzero((rec.device == d) & (rec.allocated >= 0))
        if not len(on):
            continue
        first = on[0]
        first_us[d] = rec.ts[first]
        mine = dev == d
        earlier = int(nbytes[mine & ~np.isfinite(alloc_us)].sum())
        rest = max(0, int(rec.allocated[first]) - int(rec.nbytes[first]) - earlier)
        grads = mine & (category == C["gradient"]) & np.isfinite(alloc_us)
        per_step = np.bincount(phases.step_of(alloc_us[grads]) + 1, weights=nbytes[grads].astype(np.float64))
        params = min(rest, int(per_step[1:].max(initial=0.0))) if phases.optimizer_class or grads.any() else rest
        optimizer = min(rest - params, state * params) if phases.optimizer_class else 0
        baseline[d, C["parameter"]], baseline[d, C["optimizer_state"]] = params, optimizer
        baseline[d, C["unknown"]] = rest - params - optimizer
    return first_us, baseline
