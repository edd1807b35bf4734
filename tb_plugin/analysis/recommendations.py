"""Performance recommendations: each rule looks at measured numbers and, when it fires, says them.

The old plugin's rules (DataLoader > 5 %, communication > 10 %, GPU utilization < 50 %, AMP when tensor cores go
unused on eligible operators, device memory > 90 % against that device, DP → DDP, DDP backend) plus: launch-bound
steps, pageable host-to-device copies, host-device synchronisations inside steps, and CPU-bound GPU idle time.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from ..model import intervals as iv
from ..model.arrays import take
from ..model.kinds import Kind
from ..model.names import name_mask
from ..model.optree import host_tree
from ..model.tables import TraceModel
from .gpu import gpu_summary
from .kernels import tensor_core_share
from .operators import operator_nodes
from .steps import breakdown
from .summary import devices as device_properties

Recommendation = dict[str, str]

DOCS = {
    "dataloader": "https://pytorch.org/docs/stable/data.html#multi-process-data-loading",
    "ddp": "https://pytorch.org/docs/stable/notes/cuda.html#use-nn-parallel-distributeddataparallel-instead-of-"
           "multiprocessing-or-nn-dataparallel",
    "nccl": "https://pytorch.org/docs/stable/distributed.html#which-backend-to-use",
    "communication": "https://pytorch.org/docs/stable/ddp_comm_hooks.html",
    "batch": "https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html",
    "amp": "https://pytorch.org/docs/stable/amp.html",
    "memory": "https://pytorch.org/docs/stable/checkpoint.html",
    "launch": "https://pytorch.org/docs/stable/notes/cuda.html#cuda-graphs",
    "pin_memory": "https://pytorch.org/docs/stable/data.html#memory-pinning",
    "sync": "https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html#avoid-unnecessary-cpu-gpu-synchronization",
    "cpu_bound": "https://pytorch.org/docs/stable/torch.compiler.html",
}

_SYNC_CALLS = re.compile(r"^(?:cudaDeviceSynchronize|cudaStreamSynchronize|cudaEventSynchronize|hipDeviceSynchronize"
                         r"|hipStreamSynchronize|aten::_local_scalar_dense)$")


def _pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def _ms(us: float) -> str:
    return f"{us / 1000:.2f} ms" if us >= 1000 else f"{us:.1f} µs"


def _step_share(model: TraceModel, category: str) -> tuple[float, float]:
    b = breakdown(model)
    total = float(b.steps.duration.mean()) if b.steps.count else 0.0
    value = float(b.per_step[category].mean()) if b.steps.count else 0.0
    return (value / total if total > 0 else 0.0), value


def _share_of_steps(time_us: float, b: Any) -> float:
    """``time_us`` as a share of the summed step time (0 when the steps take no time, as zero-length ones do)."""
    total = float(b.steps.duration.sum())
    return time_us / total if total > 0 else 0.0


def _rule_dataloader(model: TraceModel) -> Recommendation | None:
    share, value = _step_share(model, "DataLoader")
    if share <= 0.05:
        return None
    return {"id": "dataloader", "link": DOCS["dataloader"],
            "text": f"Data loading takes {_pct(share)} of the step time ({_ms(value)} per step). Load batches in "
                    "background processes: set DataLoader(num_workers=N) (e.g. the number of CPU cores per GPU) "
                    "and pin_memory=True."}


def _rule_communication(model: TraceModel) -> Recommendation | None:
    share, value = _step_share(model, "Communication")
    if share <= 0.10:
        return None
    return {"id": "communication", "link": DOCS["communication"],
            "text": f"Communication not hidden by computation takes {_pct(share)} of the step time ({_ms(value)} "
                    "per step). Try gradient compression (DDP communication hooks), gradient accumulation or a "
                    "larger batch to communicate less often."}


def _rule_low_utilization(model: TraceModel) -> Recommendation | None:
    low = [g for g in gpu_summary(model) if g["utilization"] is not None and g["utilization"] < 0.5]
    if not low:
        return None
    which = ", ".join(f"GPU {g['id']} ({_pct(g['utilization'])})" for g in low)
    verb = "has" if len(low) == 1 else "have"
    return {"id": "gpu_utilization", "link": DOCS["batch"],
            "text": f"{which} {verb} low utilization: the GPU is idle for most of the step. Look at the step "
                    "breakdown for what the GPU waits on; if it is not data loading or the host, a larger batch "
                    "size raises utilization."}


def _rule_amp(model: TraceModel) -> Recommendation | None:
    props = device_properties(model)
    if not props:
        return None
    share = tensor_core_share(model)
    if share is None or share > 0:
        return None
    gpus = {g["id"] for g in gpu_summary(model)}
    capable = [d for d in props if d["id"] in gpus and d["compute_capability"]
               and float(d["compute_capability"]) >= 7.0]
    if not capable:
        return None
    ops = operator_nodes(model)
    tree = host_tree(model)
    # Bottom-most eligible operators: eligible, with no eligible operator below them.
    eligible_nodes = set(ops.node[ops.eligible].tolist())
    has_eligible_child = {int(tree.parent[n]) for n in eligible_nodes if tree.parent[n] in eligible_nodes}
    bottom = np.fromiter((n not in has_eligible_child for n in ops.node.tolist()), dtype=bool,
                         count=len(ops.node)) & ops.eligible
    total = float(ops.device_self.sum())
    ratio = float(ops.device_self[bottom].sum() / total) if total > 0 else 0.0
    if ratio <= 0:
        return None
    return {"id": "amp", "link": DOCS["amp"],
            "text": f"{_pct(ratio)} of the kernel time is in operators that can use tensor cores (matmuls, "
                    f"convolutions, attention), but no kernel used them on {capable[0]['name']} (compute "
                    f"capability {capable[0]['compute_capability']}). Enable mixed precision with "
                    "torch.autocast(device_type='cuda', dtype=torch.bfloat16) or allow TF32 "
                    "(torch.backends.cuda.matmul.allow_tf32 = True)."}


def _rule_memory(model: TraceModel) -> Recommendation | None:
    mem = model["memory"]
    cuda = (mem["device_type"] == 1) & (mem["total_allocated"] >= 0)
    if not cuda.any():
        return None
    capacity = {d["id"]: d for d in device_properties(model) if d.get("memory_bytes")}
    for dev_id in np.unique(mem["device_id"][cuda]).tolist():
        peak = int(mem["total_allocated"][cuda & (mem["device_id"] == dev_id)].max())
        info = capacity.get(dev_id)
        if info is None:
            continue
        share = peak / float(info["memory_bytes"])
        if share > 0.9:
            return {"id": "memory", "link": DOCS["memory"],
                    "text": f"Memory on GPU {dev_id} peaks at {peak / 2**30:.1f} GiB, {_pct(share)} of its "
                            f"{info['memory_bytes'] / 2**30:.1f} GiB: close to out-of-memory. Activation checkpointing "
                            "or mixed precision lowers it."}
    return None


def _rule_data_parallel(model: TraceModel) -> Recommendation | None:
    ev = model["events"]
    if model.code("DataParallel.forward") < 0 or not (ev["name"] == model.code("DataParallel.forward")).any():
        return None
    gpus = np.unique(model["device_events"]["device"])
    if len(gpus[gpus >= 0]) <= 1:
        return None
    return {"id": "ddp", "link": DOCS["ddp"],
            "text": f"DataParallel drives {len(gpus[gpus >= 0])} GPUs from one process. "
                    "DistributedDataParallel (one process per GPU) is faster."}


def _rule_ddp_backend(model: TraceModel) -> Recommendation | None:
    dist = model.meta.get("distributedInfo")
    backend = str(dist.get("backend", "")).lower() if isinstance(dist, dict) else ""
    gpus = gpu_summary(model)
    if not gpus or not backend or "nccl" in backend:
        return None
    return {"id": "ddp_backend", "link": DOCS["nccl"],
            "text": f"The process group uses the '{backend}' backend on GPUs; NCCL is much faster for GPU "
                    "collectives: init_process_group(backend='nccl')."}


def _in_steps(model: TraceModel, rows: np.ndarray) -> np.ndarray:
    steps = breakdown(model).steps
    ts = model["events"]["ts"][rows]
    k = np.searchsorted(steps.start, ts, side="right") - 1
    inside: np.ndarray = ts < take(steps.end, k, -np.inf)  # before the first step: -inf, so outside
    return inside


def _rule_launch_bound(model: TraceModel) -> Recommendation | None:
    tree = host_tree(model)
    ev = model["events"]
    dev = model["device_events"]
    kernels = np.flatnonzero((ev["kind"][dev["row"]] == Kind.KERNEL) & (tree.device_launch >= 0))
    kernels = kernels[_in_steps(model, dev["row"][kernels])]
    if len(kernels) < 100:
        return None
    k_dur = np.nan_to_num(ev["dur"][dev["row"][kernels]], nan=0.0)
    launch = tree.device_launch[kernels]
    l_dur = tree.end[launch] - tree.start[launch]
    short = k_dur < l_dur
    share = float(short.mean())
    util = [g["utilization"] for g in gpu_summary(model) if g["utilization"] is not None]
    if share < 0.5 or (util and min(util) > 0.8):
        return None
    return {"id": "launch_bound", "link": DOCS["launch"],
            "text": f"{int(short.sum())} of {len(kernels)} kernels in the steps ({_pct(share)}) ran shorter than "
                    f"the CPU call that launched them (median kernel {np.median(k_dur):.1f} µs, median launch "
                    f"{np.median(l_dur):.1f} µs): the GPU waits for launches. Fuse small operations "
                    "(torch.compile) or replay the step as a CUDA graph (torch.compile(mode='reduce-overhead'))."}


def _rule_pageable_copies(model: TraceModel) -> Recommendation | None:
    ev = model["events"]
    dev = model["device_events"]
    copies = ev["kind"][dev["row"]] == Kind.MEMCPY
    pageable = copies & name_mask(model, ev["name"][dev["row"]], lambda s: "HtoD" in s and "Pageable" in s)
    if not pageable.any():
        return None
    n = int(pageable.sum())
    nbytes = int(dev["nbytes"][pageable].clip(min=0).sum())
    time_us = float(np.nan_to_num(ev["dur"][dev["row"][pageable]], nan=0.0).sum())
    steps = breakdown(model).steps
    if steps.count and time_us < 0.005 * float(steps.duration.sum()):
        return None  # a few tiny copies are not worth a change
    size = f", {nbytes / 2**20:.1f} MiB" if nbytes else ""
    return {"id": "pin_memory", "link": DOCS["pin_memory"],
            "text": f"{n} host-to-device copies come from pageable memory ({_ms(time_us)} of copies{size}); such "
                    "copies cannot overlap with compute. Use DataLoader(pin_memory=True) and "
                    "tensor.to(device, non_blocking=True)."}


def _rule_synchronization(model: TraceModel) -> Recommendation | None:
    ev = model["events"]
    sync = name_mask(model, ev["name"], lambda s: _SYNC_CALLS.match(s) is not None)
    sync &= np.isin(ev["kind"], (Kind.RUNTIME, Kind.DRIVER, Kind.CPU_OP))
    rows = np.flatnonzero(sync)
    rows = rows[_in_steps(model, rows)]
    b = breakdown(model)
    if len(rows) == 0 or b.steps.count == 0:
        return None
    time_us = float(np.nan_to_num(ev["dur"][rows], nan=0.0).sum())
    share = _share_of_steps(time_us, b)
    if share < 0.01:
        return None
    kinds = sorted({model.strings[c] for c in ev["name"][rows].tolist()})
    item = " (aten::_local_scalar_dense comes from .item(), .tolist() or printing a GPU tensor)" \
        if "aten::_local_scalar_dense" in kinds else ""
    return {"id": "synchronization", "link": DOCS["sync"],
            "text": f"The host waits for the GPU {len(rows) / b.steps.count:.1f} times per step "
                    f"({', '.join(kinds)}){item}, {_ms(time_us / b.steps.count)} per step ({_pct(share)}). "
                    "Each wait stalls the launch queue; keep values on the GPU or read them once every few steps."}


def _rule_cpu_bound(model: TraceModel) -> Recommendation | None:
    ev = model["events"]
    b = breakdown(model)
    if b.steps.count == 0 or not len(model["device_events"]["row"]):
        return None
    steps = iv.union(b.steps.start, b.steps.end)
    dev_rows = model["device_events"]["row"]
    d_start = ev["ts"][dev_rows]
    gpu_busy = iv.union(d_start, d_start + np.nan_to_num(ev["dur"][dev_rows], nan=0.0))
    idle = iv.subtract(steps, gpu_busy)
    host = np.isin(ev["kind"], (Kind.CPU_OP, Kind.USER_ANNOTATION, Kind.PYTHON_FUNCTION))
    host &= ~name_mask(model, ev["name"], lambda s: s.startswith(("ProfilerStep#", "enumerate(DataLoader)",
                                                                     "enumerate(DataPipe)")))
    h_start = ev["ts"][host]
    host_busy = iv.union(h_start, h_start + np.nan_to_num(ev["dur"][host], nan=0.0))
    loader = b.per_step["DataLoader"].sum()
    waste = iv.total(iv.intersect(idle, host_busy)) - float(loader)
    share = _share_of_steps(waste, b)
    if share < 0.2:
        return None
    return {"id": "cpu_bound", "link": DOCS["cpu_bound"],
            "text": f"The GPU is idle for {_pct(share)} of the step time while the host runs Python and "
                    f"operators ({_ms(waste / b.steps.count)} per step, data loading not counted): the step is "
                    "CPU-bound. Reduce Python overhead per step, use larger operations, or torch.compile."}


RULES = (_rule_dataloader, _rule_data_parallel, _rule_ddp_backend, _rule_communication, _rule_low_utilization,
         _rule_amp, _rule_memory, _rule_launch_bound, _rule_pageable_copies, _rule_synchronization,
         _rule_cpu_bound)


def recommendations(model: TraceModel) -> list[dict[str, Any]]:
    return [r for rule in RULES if (r := rule(model)) is not None]
