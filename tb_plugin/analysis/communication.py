"""Collective communication: the one definition of communication time that the Overview and the Distributed view
both use, so the two pages always agree.

A collective *instance* is where its communication happens:

- on the device, a collective kernel (NCCL/RCCL ``nccl…`` kernels, MTIA ``hccl::`` events, or any kernel that
  carries ``Collective name``): its host side only launched it;
- on the host, for a collective that launched no collective kernel (Gloo, CPU-only jobs, or an ``nccl:``
  annotation whose kernel the profiler did not record): the outermost host collective span (``gloo:``/``nccl:``
  annotations, ``c10d::`` ops, ``record_param_comms``…); collective spans nested inside it are the same instance.

Communication time is the union of the instances' spans and of Kineto's ``collective_comm`` events. Host spans
that launched a collective kernel are not communication (they are the host issuing it: CPU time).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ..model import intervals as iv
from ..model.arrays import isin_ints
from ..model.derived import memoized
from ..model.kinds import Kind
from ..model.lookups import row_lookup
from ..model.names import is_collective_host, is_collective_kernel, name_mask
from ..model.nesting import nest
from ..model.optree import host_tree, innermost_containing
from ..model.tables import TraceModel

_DTYPE_BYTES = {
    "float": 4, "float32": 4, "int": 4, "int32": 4, "long": 8, "long int": 8, "int64": 8, "double": 8,
    "float64": 8, "half": 2, "c10::half": 2, "bfloat16": 2, "c10::bfloat16": 2, "short": 2, "byte": 1,
    "unsigned char": 1, "char": 1, "bool": 1, "uint8": 1, "int8": 1,
}
_NOT_COLLECTIVES = {"wait", "barrierwait", ""}
HOST_KINDS = (Kind.CPU_OP, Kind.USER_ANNOTATION)


def dtype_size(dtype: str | None) -> int:
    if not dtype:
        return 0
    key = dtype.lower()
    if key.startswith("float8"):
        return 1
    return _DTYPE_BYTES.get(key, 0)


def normalize_collective(name: str) -> str:
    """``_allgather_base``, ``all_gather_into_tensor``, ``gloo:all_reduce``, ``AllGather`` → one name per kind."""
    key = name.rsplit(":", 1)[-1].lower().lstrip("_").replace("_", "")
    for suffix in ("intotensor", "base", "tensor", "coalesced"):
        if key.endswith(suffix) and key != suffix:
            key = key[: -len(suffix)]
    return key


@dataclass(frozen=True)
class Collectives:
    name: list[str]
    group: list[str]
    seq: np.ndarray
    start: np.ndarray  # the communication itself (kernel, or host span without a kernel)
    end: np.ndarray
    issued: np.ndarray  # host time the rank issued it (orders instances within a group)
    nbytes: np.ndarray
    on_host: np.ndarray  # True where the instance is a host span (no collective kernel)
    # True for a kernel that ran in the window but was launched before it (warm-up, the step before the profiler
    # started): no launch and no args in the trace, so it cannot be matched to its calls on other ranks
    prelaunched: np.ndarray
    # the event row of the instance (its kernel, or its outermost host span): the Trace view highlights these
    row: np.ndarray


@memoized
def collective_kernel_mask(model: TraceModel) -> np.ndarray:
    """Per event row: is it a device collective (by name, or carrying the collective's args itself)?"""
    ev = model["events"]
    mask: np.ndarray = (ev["kind"] == Kind.KERNEL) & name_mask(model, ev["name"], is_collective_kernel)
    rows = model["comms"]["row"]
    mask[rows[ev["kind"][rows] == Kind.KERNEL]] = True
    return mask


@dataclass
class _Found:
    """Instances found so far, in discovery order (sorted by issue time at the end)."""

    name: list[str]
    group: list[str]
    start: list[float]
    end: list[float]
    issued: list[float]
    nbytes: list[int]
    on_host: list[bool]
    prelaunched: list[bool]
    row: list[int]

    def add(self, described: tuple[str, str, int], start: float, end: float, issued: float, on_host: bool,
            row: int, prelaunched: bool = False) -> None:
        name, group, size = described
        self.name.append(name)
        self.group.append(group)
        self.start.append(start)
        self.end.append(end)
        self.issued.append(issued)
        self.nbytes.append(size)
        self.on_host.append(on_host)
        self.prelaunched.append(prelaunched)
        self.row.append(row)


def _describe(model: TraceModel, comm_row: np.ndarray, event_row: int, fallback: str) -> tuple[str, str, int]:
    """(normalised name, process group, bytes) from the ``comms`` args of ``event_row``, if it has any."""
    comms = model["comms"]
    k = int(comm_row[event_row]) if event_row >= 0 else -1
    if k < 0:
        return normalize_collective(fallback), "default", 0
    name = model.text(int(comms["collective_name"][k])) or fallback
    group = model.text(int(comms["pg_name"][k])) or model.text(int(comms["pg_desc"][k])) or "default"
    size = dtype_size(model.text(int(comms["dtype"][k])))
    count = max(int(comms["in_nelems"][k]), int(comms["out_nelems"][k]), 0)
    return normalize_collective(name), group, count * size


_KERNEL_COLLECTIVE_NAME = re.compile(r"(?:nccl(?:DevKernel|Kernel)_|hccl::)([A-Za-z]+)", re.IGNORECASE)


def _device_instances(model: TraceModel, comm_row: np.ndarray, found: _Found) -> np.ndarray:
    """Add every collective kernel; returns the host-tree launch node of each (-1 if unknown)."""
    ev = model["events"]
    dev = model["device_events"]
    tree = host_tree(model)
    kernels = np.flatnonzero(collective_kernel_mask(model)[dev["row"]])
    for i in kernels.tolist():
        row = int(dev["row"][i])
        kname = model.strings[int(ev["name"][row])]
        m = _KERNEL_COLLECTIVE_NAME.search(kname)
        fallback = m.group(1) if m else kname
        # The op carrying the collective's args may be the launching op or one of its ancestors.
        desc_row = -1
        node = int(tree.device_op[i])
        while node >= 0:
            r = int(tree.rows[node])
            if comm_row[r] >= 0:
                desc_row = r
                break
            parent = int(tree.parent[node])
            node = int(tree.op_of[parent]) if parent >= 0 else -1
        if desc_row < 0 and int(comm_row[row]) >= 0:
            desc_row = row  # the kernel itself carries the args (some PyTorch versions)
        s = float(ev["ts"][row])
        launch = int(tree.device_launch[i])
        found.add(_describe(model, comm_row, desc_row, fallback), s, s + float(np.nan_to_num(ev["dur"][row])),
                  float(tree.start[launch]) if launch >= 0 else s, on_host=False, row=row,
                  prelaunched=launch < 0 and desc_row < 0)
    return np.asarray(tree.device_launch[kernels], dtype=np.int64)


def _host_candidates(model: TraceModel, comm_row: np.ndarray) -> np.ndarray:
    """Event rows of host collective spans: a collective's name, or the collective args (waits excluded)."""
    ev = model["events"]
    comms = model["comms"]
    host = isin_ints(ev["kind"], HOST_KINDS) & np.isfinite(ev["ts"])
    by_args = np.zeros(model.n_events, dtype=bool)
    names = [model.text(int(c)) or "" for c in comms["collective_name"].tolist()]
    real = np.fromiter((normalize_collective(n) not in _NOT_COLLECTIVES for n in names), bool, len(names))
    by_args[comms["row"][real]] = True
    by_name = name_mask(model, ev["name"], lambda s: is_collective_host(s)
                        and normalize_collective(s) not in _NOT_COLLECTIVES)
    rows: np.ndarray = np.flatnonzero(host & (by_args | (by_name & (comm_row < 0))))
    return rows


def _host_instances(model: TraceModel, comm_row: np.ndarray, launches: np.ndarray, found: _Found) -> None:
    """Add the outermost host collective spans that launched no collective kernel."""
    ev = model["events"]
    rows = _host_candidates(model, comm_row)
    if not len(rows):
        return
    start = ev["ts"][rows]
    end = start + np.nan_to_num(ev["dur"][rows], nan=0.0, posinf=0.0).clip(min=0.0)
    pid, tid = ev["pid"][rows], ev["tid"][rows]
    order = np.lexsort((start - end, start, tid, pid))
    rows, start, end, pid, tid = rows[order], start[order], end[order], pid[order], tid[order]
    parent, _ = nest(pid, tid, start, end)
    root = np.arange(len(rows))
    while (parent[root] >= 0).any():  # climb to the outermost collective span (a few levels at most)
        up = parent[root] >= 0
        root[up] = parent[root[up]]
    roots = np.flatnonzero(root == np.arange(len(rows)))
    tree = host_tree(model)
    launched = np.zeros(len(rows), dtype=bool)
    known = launches[launches >= 0]
    if len(known):
        at = tree.rows[known]
        inside = innermost_containing(pid[roots], tid[roots], start[roots], end[roots], ev["pid"][at], ev["tid"][at],
                                      ev["ts"][at])
        launched[roots[inside[inside >= 0]]] = True
    carrier = np.full(len(rows), -1, dtype=np.int64)  # per root: the first member carrying the collective's args
    with_args = np.flatnonzero(comm_row[rows] >= 0)
    for k in with_args[::-1].tolist():
        carrier[root[k]] = k
    for r in roots.tolist():
        if launched[r]:
            continue
        desc = int(rows[carrier[r]]) if carrier[r] >= 0 else -1
        fallback = model.strings[int(ev["name"][rows[r]])]
        found.add(_describe(model, comm_row, desc, fallback), float(start[r]), float(end[r]), float(start[r]),
                  on_host=True, row=int(rows[r]))


@memoized
def collectives(model: TraceModel) -> Collectives:
    """Every collective instance of one trace, ordered by issue time and numbered per process group."""
    comm_row = row_lookup(model, "comms")  # not kept: only the collectives read it
    found = _Found([], [], [], [], [], [], [], [], [])
    launches = _device_instances(model, comm_row, found)
    _host_instances(model, comm_row, launches, found)
    order = np.argsort(np.asarray(found.issued, dtype=np.float64), kind="stable")
    seq = np.zeros(len(order), dtype=np.int64)
    counters: dict[str, int] = {}
    for pos, k in enumerate(order.tolist()):
        seq[pos] = counters.get(found.group[k], 0)
        counters[found.group[k]] = seq[pos] + 1
    take = order.tolist()
    return Collectives(name=[found.name[k] for k in take], group=[found.group[k] for k in take], seq=seq,
                       start=np.asarray(found.start, dtype=np.float64)[order],
                       end=np.asarray(found.end, dtype=np.float64)[order],
                       issued=np.asarray(found.issued, dtype=np.float64)[order],
                       nbytes=np.asarray(found.nbytes, dtype=np.int64)[order],
                       on_host=np.asarray(found.on_host, dtype=bool)[order],
                       prelaunched=np.asarray(found.prelaunched, dtype=bool)[order],
                       row=np.asarray(found.row, dtype=np.int64)[order])


@memoized
def communication_intervals(model: TraceModel) -> iv.Intervals:
    """Communication time of one trace: its collective instances and ``collective_comm`` events."""
    col = collectives(model)
    ev = model["events"]
    other = ev["kind"] == Kind.COMMUNICATION
    ts = ev["ts"][other]
    ends = ts + np.nan_to_num(ev["dur"][other], nan=0.0).clip(min=0.0)
    return iv.union(np.concatenate([col.start, ts]), np.concatenate([col.end, ends]))
