"""Distributed view: ranks of one job, their computation/communication overlap, data transfer versus waiting, and
collectives matched across ranks by process group and sequence.

A collective instance is one NCCL (or other) kernel, joined through its launch to the host operator that issued
it (``record_param_comms`` in PyTorch 2.x carries the collective's name, sizes, dtype and process group); a host
collective without a GPU kernel (Gloo, CPU) is its host span. Instances are matched across ranks by
(process group, sequence number within that group), never by list position, so a rank with a missing or extra
collective gets a note instead of a blank view.

Transfer versus synchronisation (the old plugin's heuristic): for each matched instance, the fastest rank's
duration is the pure transfer time; on every rank the last ``min_dur`` of its instance is transfer and the rest is
waiting for the others (sync).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..model import intervals as iv
from ..model.derived import memoized
from ..model.kinds import Kind
from ..model.names import is_collective_kernel, name_mask
from ..model.optree import host_tree
from ..model.tables import TraceModel
from ..timeline.details import side_row
from .steps import find_steps, role_intervals

_DTYPE_BYTES = {
    "float": 4, "float32": 4, "int": 4, "int32": 4, "long": 8, "long int": 8, "int64": 8, "double": 8,
    "float64": 8, "half": 2, "c10::half": 2, "bfloat16": 2, "c10::bfloat16": 2, "short": 2, "byte": 1,
    "unsigned char": 1, "char": 1, "bool": 1, "uint8": 1, "int8": 1,
}
_KERNEL_COLLECTIVE = re.compile(r"(?:nccl(?:DevKernel|Kernel)_|hccl::)([A-Za-z]+)", re.IGNORECASE)
_NOT_COLLECTIVES = {"wait", "barrier_wait", ""}


def dtype_size(dtype: str | None) -> int:
    if not dtype:
        return 0
    key = dtype.lower()
    if key.startswith("float8"):
        return 1
    return _DTYPE_BYTES.get(key, 0)


def normalize_collective(name: str) -> str:
    """``_allgather_base``, ``all_gather_into_tensor``, ``AllGather`` → ``allgather`` (one name per kind)."""
    key = name.lower().lstrip("_").replace("_", "")
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


@memoized
def collectives(model: TraceModel) -> Collectives:
    ev = model["events"]
    dev = model["device_events"]
    comms = model["comms"]
    tree = host_tree(model)
    comm_row = side_row(model, "comms")
    names: list[str] = []
    groups: list[str] = []
    start: list[float] = []
    end: list[float] = []
    issued: list[float] = []
    nbytes: list[int] = []

    def describe(event_row: int, fallback: str) -> tuple[str, str, int]:
        k = int(comm_row[event_row]) if event_row >= 0 else -1
        if k < 0:
            return normalize_collective(fallback), "default", 0
        name = model.text(int(comms["collective_name"][k])) or fallback
        group = model.text(int(comms["pg_name"][k])) or model.text(int(comms["pg_desc"][k])) or "default"
        size = dtype_size(model.text(int(comms["dtype"][k])))
        count = max(int(comms["in_nelems"][k]), int(comms["out_nelems"][k]), 0)
        return normalize_collective(name), group, count * size

    kernel = (ev["kind"][dev["row"]] == Kind.KERNEL) & name_mask(model, ev["name"][dev["row"]], is_collective_kernel)
    used_ops: set[int] = set()
    for i in np.flatnonzero(kernel).tolist():
        row = int(dev["row"][i])
        kname = model.strings[int(ev["name"][row])]
        m = _KERNEL_COLLECTIVE.search(kname)
        fallback = m.group(1) if m else kname
        op = int(tree.device_op[i])
        # The op carrying the collective's args may be the launching op or one of its ancestors.
        desc_row = -1
        node = op
        while node >= 0:
            r = int(tree.rows[node])
            if comm_row[r] >= 0:
                desc_row = r
                break
            parent = int(tree.parent[node])
            node = int(tree.op_of[parent]) if parent >= 0 else -1
        if desc_row < 0 and int(comm_row[row]) >= 0:
            desc_row = row  # the kernel itself carries the args (some PyTorch versions)
        name, group, size = describe(desc_row, fallback)
        if desc_row >= 0:
            used_ops.add(desc_row)
        s = float(ev["ts"][row])
        names.append(name)
        groups.append(group)
        start.append(s)
        end.append(s + float(np.nan_to_num(ev["dur"][row])))
        launch = int(tree.device_launch[i])
        issued.append(float(tree.start[launch]) if launch >= 0 else s)
        nbytes.append(size)
    # Host collectives that launched no GPU kernel (Gloo, CPU-only jobs).
    for k, row in enumerate(comms["row"].tolist()):
        if row in used_ops or ev["kind"][row] not in (Kind.CPU_OP, Kind.USER_ANNOTATION):
            continue
        raw_name = model.text(int(comms["collective_name"][k])) or ""
        if raw_name.lower() in _NOT_COLLECTIVES:
            continue
        if model.strings[int(ev["name"][row])] == "record_param_comms" and _launched_kernel(model, row):
            continue
        name, group, size = describe(row, raw_name)
        s = float(ev["ts"][row])
        names.append(name)
        groups.append(group)
        start.append(s)
        end.append(s + float(np.nan_to_num(ev["dur"][row])))
        issued.append(s)
        nbytes.append(size)
    order = np.argsort(np.asarray(issued), kind="stable")
    seq = np.zeros(len(order), dtype=np.int64)
    counters: dict[str, int] = {}
    for pos, k in enumerate(order.tolist()):
        seq[pos] = counters.get(groups[k], 0)
        counters[groups[k]] = seq[pos] + 1
    take = order.tolist()
    return Collectives(name=[names[k] for k in take], group=[groups[k] for k in take], seq=seq,
                       start=np.asarray(start)[order], end=np.asarray(end)[order],
                       issued=np.asarray(issued)[order], nbytes=np.asarray(nbytes, dtype=np.int64)[order])


def _launched_kernel(model: TraceModel, row: int) -> bool:
    """Did this host operator launch a GPU kernel itself (then the kernel is the collective instance)?"""
    from ..timeline.details import tree_node_of_row

    node = int(tree_node_of_row(model)[row])
    return bool(node >= 0 and (host_tree(model).device_op == node).any())


def _rank_of(model: TraceModel, worker: str, fallback: int) -> int:
    info = model.meta.get("distributedInfo")
    if isinstance(info, dict) and isinstance(info.get("rank"), int):
        return int(info["rank"])
    m = re.search(r"(\d+)$", worker)
    return int(m.group(1)) if m else fallback


def distributed(traces: list[tuple[str, TraceModel]]) -> dict[str, Any]:
    """``traces``: (worker name, model) of one span for every worker of a run."""
    ranks = sorted(((_rank_of(m, w, i), w, m) for i, (w, m) in enumerate(sorted(traces))), key=lambda t: t[0])
    notes: list[str] = []
    seen = Counter(rank for rank, _, _ in ranks)
    repeated = sorted(r for r, n in seen.items() if n > 1)
    if repeated:
        notes.append(f"Several workers report the same rank ({', '.join(map(str, repeated))}): copied traces, or "
                     "traces of different jobs in one run? Ranks are shown per worker.")
    per_rank = [collectives(m) for _, _, m in ranks]
    # Match instances across ranks by (group, seq): the fastest rank's duration is the transfer time.
    durations: dict[tuple[str, int], list[float]] = {}
    for col in per_rank:
        for g, s, a, b in zip(col.group, col.seq.tolist(), col.start.tolist(), col.end.tolist()):
            durations.setdefault((g, s), []).append(b - a)
    n = len(ranks)
    complete = {key for key, ds in durations.items() if len(ds) == n}
    min_dur = {key: min(ds) for key, ds in durations.items()}
    counts = [{g: int(np.sum(np.asarray(c.group) == g)) for g in set(c.group)} for c in per_rank]
    for g in sorted({g for c in counts for g in c}):
        per = [c.get(g, 0) for c in counts]
        if len(set(per)) > 1:
            detail = ", ".join(f"rank {r}: {k}" for (r, _, _), k in zip(ranks, per))
            notes.append(f"Process group {g} has different numbers of collectives per rank ({detail}); the unmatched "
                         "ones count as transfer time on the ranks that have them.")
    rows = []
    steps_matrix = []
    for (rank, worker, model), col in zip(ranks, per_rank):
        steps = find_steps(model)
        roles = role_intervals(model)
        comm = iv.union(col.start, col.end)
        real_start = np.array([max(a, b - min_dur.get((g, s), b - a)) if (g, s) in complete else a
                               for g, s, a, b in zip(col.group, col.seq.tolist(), col.start.tolist(),
                                                     col.end.tolist())])
        transfer = iv.union(real_start, col.end) if len(col.start) else iv.EMPTY
        compute = roles["Kernel"] if len(roles["Kernel"][0]) else roles["CPU Exec"]
        compute = iv.subtract(compute, comm)
        lo, hi = steps.start, steps.end
        c_comp = iv.lengths_within(compute, lo, hi)
        c_comm = iv.lengths_within(comm, lo, hi)
        c_overlap = iv.lengths_within(iv.intersect(iv.union(*_kernels(model)), comm), lo, hi)
        c_transfer = iv.lengths_within(transfer, lo, hi)
        total = steps.duration
        busy = iv.lengths_within(iv.union(np.concatenate([compute[0], comm[0]]),
                                          np.concatenate([compute[1], comm[1]])), lo, hi)
        steps_matrix.append(c_comm.tolist())
        host_wait, host_idle = _host_waits(model)
        table = _collective_table(col, transfer)
        rows.append({
            "worker": worker, "rank": rank,
            "steps": steps.count,
            "computation_us": float(c_comp.mean()) if steps.count else 0.0,
            "communication_us": float(c_comm.mean()) if steps.count else 0.0,
            "overlap_us": float(c_overlap.mean()) if steps.count else 0.0,
            "other_us": float((total - busy).mean()) if steps.count else 0.0,
            "transfer_us": float(c_transfer.mean()) if steps.count else 0.0,
            "sync_us": float((c_comm - c_transfer).clip(min=0).mean()) if steps.count else 0.0,
            "step_us": float(total.mean()) if steps.count else 0.0,
            "host_wait_us": host_wait,
            "host_idle_us": host_idle,
            # the same per step (for a step selector); step i of every rank is the i-th ProfilerStep it recorded
            "per_step": {
                "computation_us": c_comp.tolist(), "communication_us": c_comm.tolist(),
                "overlap_us": c_overlap.tolist(), "other_us": (total - busy).clip(min=0).tolist(),
                "transfer_us": c_transfer.tolist(), "sync_us": (c_comm - c_transfer).clip(min=0).tolist(),
                "step_us": total.tolist(),
            },
            "collectives": table,
            "devices": _devices(model),
            "host": worker.rsplit("_", 1)[0] if re.search(r"_\d+$", worker) else worker,
            "process": _process_id(model),
        })
    straggler = _straggler(rows)
    return {
        "world_size": _world_size(ranks),
        "backend": _backend(ranks),
        "ranks": rows,
        "steps": [str(s) for s in find_steps(ranks[0][2]).names] if ranks else [],
        "communication_by_step": steps_matrix,
        "straggler": straggler,
        "notes": notes,
    }


def _process_id(model: TraceModel) -> int | None:
    """The host process of the trace: the pid of most host operators."""
    ev = model["events"]
    pids = ev["pid"][np.isin(ev["kind"], (Kind.CPU_OP, Kind.USER_ANNOTATION)) & (ev["pid"] >= 0)]
    if not len(pids):
        return None
    values, counts = np.unique(pids, return_counts=True)
    return int(values[np.argmax(counts)])


def _kernels(model: TraceModel) -> tuple[np.ndarray, np.ndarray]:
    roles = role_intervals(model)
    return roles["Kernel"]


def _collective_table(col: Collectives, transfer: iv.Intervals) -> list[dict[str, Any]]:
    out = []
    names = np.asarray(col.name, dtype=object)
    for name in sorted(set(col.name)):
        on = names == name
        span = iv.union(col.start[on], col.end[on])
        total = iv.total(span)
        moved = iv.total(iv.intersect(span, transfer))
        calls = int(on.sum())
        nbytes = int(col.nbytes[on].sum())
        out.append({
            "name": name, "calls": calls, "bytes": nbytes, "total_us": total, "avg_us": total / calls,
            "transfer_us": moved, "bandwidth_gbps": (nbytes / moved / 1e3) if moved > 0 and nbytes else None,
        })
    return sorted(out, key=lambda r: -r["total_us"])


def _devices(model: TraceModel) -> list[dict[str, Any]]:
    from .summary import devices

    used = set(np.unique(model["device_events"]["device"]).tolist())
    return [d for d in devices(model) if d["id"] in used]


def _world_size(ranks: list[tuple[int, str, TraceModel]]) -> int:
    for _, _, m in ranks:
        info = m.meta.get("distributedInfo")
        if isinstance(info, dict) and isinstance(info.get("world_size"), int):
            return int(info["world_size"])
    return len(ranks)


def _backend(ranks: list[tuple[int, str, TraceModel]]) -> str | None:
    for _, _, m in ranks:
        info = m.meta.get("distributedInfo")
        if isinstance(info, dict) and info.get("backend"):
            return str(info["backend"])
    return None


# Calls that block the host until the GPU catches up (cudaStreamWaitEvent does not: it makes a stream wait).
_SYNC_CALL = re.compile(r"^(?:cudaDeviceSynchronize|cudaStreamSynchronize|cudaEventSynchronize"
                        r"|aten::_local_scalar_dense)$")


def _host_waits(model: TraceModel) -> tuple[float, float]:
    """Per step (mean): host time blocked in synchronisation calls, and host time with no recorded activity."""
    ev = model["events"]
    steps = find_steps(model)
    if not steps.count:
        return 0.0, 0.0
    sync = name_mask(model, ev["name"], lambda s: _SYNC_CALL.match(s) is not None)
    sync &= np.isin(ev["kind"], (Kind.RUNTIME, Kind.DRIVER, Kind.CPU_OP))
    ts = ev["ts"]
    dur = np.nan_to_num(ev["dur"], nan=0.0).clip(min=0.0)
    waits = iv.union(ts[sync], ts[sync] + dur[sync])
    host = np.isin(ev["kind"], (Kind.CPU_OP, Kind.USER_ANNOTATION, Kind.PYTHON_FUNCTION, Kind.RUNTIME, Kind.DRIVER))
    host &= ~name_mask(model, ev["name"], lambda s: s.startswith("ProfilerStep#"))
    busy = iv.union(ts[host], ts[host] + dur[host])
    wait = iv.lengths_within(waits, steps.start, steps.end)
    idle = steps.duration - iv.lengths_within(busy, steps.start, steps.end)
    return float(wait.mean()), float(idle.clip(min=0).mean())


def _straggler(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The rank the others wait for: it waits least (in collectives and in host synchronisation) while the others
    wait clearly more (over 1 ms and 5 % of the step more)."""
    if len(rows) < 2:
        return None
    waits = np.array([r["sync_us"] + r["host_wait_us"] for r in rows])
    k = int(np.argmin(waits))
    others = float(np.delete(waits, k).mean())
    margin = max(1000.0, 0.05 * float(np.mean([r["step_us"] for r in rows])))
    if others - waits[k] < margin:
        return None
    rank = rows[k]
    idle_others = float(np.mean([r["host_idle_us"] for i, r in enumerate(rows) if i != k]))
    text = (f"Rank {rank['rank']} is the straggler: the other ranks wait {others / 1000:.2f} ms per step (in "
            f"collectives and host synchronisation) against {waits[k] / 1000:.2f} ms on rank {rank['rank']}.")
    extra_idle = rank["host_idle_us"] - idle_others
    if extra_idle > 500:
        text += (f" Rank {rank['rank']}'s host has {extra_idle / 1000:.2f} ms more time per step with no recorded "
                 "activity (sleep, I/O or unprofiled work) than the others.")
    return {"rank": rank["rank"], "worker": rank["worker"], "others_wait_us": others, "own_wait_us": float(waits[k]),
            "text": text}
