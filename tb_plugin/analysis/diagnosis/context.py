"""What the run already does, read from the trace, so that no advice suggests it again.

Every flag comes from events or metadata the profiler wrote, never from a guess:

- DataLoader: the iterator class in ``enumerate(DataLoader)#<Iter>.__next__`` (``_MultiProcessingDataLoaderIter``
  means worker processes; their number is not in the main process's trace, so it is given only where the trace
  has the workers' own processes: ``pt_data_worker`` threads or a ``worker_loop`` frame on another pid);
- pinned memory: host-to-device copies from pinned memory (``Memcpy HtoD (Pinned -> Device)``) or
  ``aten::pin_memory`` / ``aten::_pin_memory`` operators;
- ``torch.compile``: ``Torch-Compiled Region``, ``CompiledFxGraph`` or ``CompiledFunction`` annotations, or Triton
  (Inductor) kernels;
- CUDA graphs: ``cudaGraphLaunch`` / ``cuGraphLaunch`` / ``hipGraphLaunch`` calls;
- precision: the input dtypes of operators (``BFloat16``, ``Half``, ``Float8``); tensor-core kernels' share;
- parallelism: DDP (``DistributedDataParallel``), FSDP (``FullyShardedDataParallel``, ``FSDP::`` annotations, or
  a collective mix of all-gather + reduce-scatter without all-reduce), ``DataParallel``; world size from
  ``distributedInfo``;
- CPU only: no device work and no runtime calls;
- activation checkpointing: ``CheckpointFunctionBackward`` nodes, ``torch/utils/checkpoint.py`` frames, or forward
  operators re-run inside backward (``causes.recompute``);
- expandable segments (``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True``): the allocator maps memory with the
  driver's virtual-memory calls (``cuMemCreate``/``cuMemMap``).

``in_use`` lists the techniques as tags (the same tags a finding's ``suggests`` uses), so "never suggest what is in
use" is one set intersection, checked where findings are made.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import numpy as np

from ...model.arrays import isin_ints
from ...model.derived import memoized
from ...model.kinds import DEVICE_KINDS, Kind
from ...model.names import name_mask
from ...model.tables import TraceModel
from ..communication import collectives
from ..kernels import tensor_core_share
from ..summary import devices
from .causes import recompute

_ITERATOR = re.compile(r"^enumerate\(DataLoader\)#(_\w+DataLoaderIter)\.__next__$")
_COMPILED = re.compile(r"^(?:Torch-Compiled Region|## Call CompiledFxGraph|CompiledFunction|"
                       r"autograd::engine::evaluate_function: CompiledFunctionBackward)")
_GRAPH_LAUNCH = re.compile(r"^(?:cudaGraphLaunch|cuGraphLaunch|hipGraphLaunch)")
_FSDP = re.compile(r"(?:FullyShardedDataParallel|^FSDP::|torch/distributed/fsdp/|fully_shard)")
_DDP = re.compile(r"DistributedDataParallel")
_DP = re.compile(r"^DataParallel\.forward$")
_VMM = re.compile(r"^(?:cuMemCreate|cuMemMap|cuMemSetAccess)$")
_LOW_PRECISION = {"c10::BFloat16": "bf16", "BFloat16": "bf16", "c10::Half": "fp16", "Half": "fp16"}


def _has(model: TraceModel, pattern: re.Pattern[str], kinds: tuple[int, ...] | None = None) -> int:
    """How many events have a name matching ``pattern`` (optionally of these kinds)."""
    ev = model["events"]
    mask = name_mask(model, ev["name"], lambda s: pattern.search(s) is not None)
    if kinds is not None:
        mask &= isin_ints(ev["kind"], kinds)
    return int(mask.sum())


def _dataloader(model: TraceModel) -> dict[str, Any]:
    """Iterator class and, where the trace shows them, the number of worker processes."""
    ev = model["events"]
    classes: Counter[str] = Counter()
    for code in np.unique(ev["name"][isin_ints(ev["kind"], (Kind.CPU_OP, Kind.USER_ANNOTATION))]).tolist():
        m = _ITERATOR.match(model.strings[int(code)])
        if m:
            classes[m.group(1)] += 1
    iterator = classes.most_common(1)[0][0] if classes else None
    meta = model["metadata_events"]
    worker_pids = {int(p) for p, v in zip(meta["pid"].tolist(), meta["value"].tolist())
                   if v >= 0 and "pt_data_worker" in model.strings[int(v)]}
    return {"iterator": iterator, "multiprocessing": bool(iterator and "MultiProcessing" in iterator),
            "workers": len(worker_pids) or None}


def _precision(model: TraceModel) -> str | None:
    """The low precision most operator inputs use (bf16, fp16, fp8), if any does."""
    ops = model["ops"]
    codes, counts = np.unique(ops["input_type"][ops["input_type"] >= 0], return_counts=True)
    seen: Counter[str] = Counter()
    for code, n in zip(codes.tolist(), counts.tolist()):
        text = model.strings[int(code)]
        for spelled, short in _LOW_PRECISION.items():
            if f'"{spelled}"' in text:
                seen[short] += n
        if "Float8" in text:
            seen["fp8"] += n
    return seen.most_common(1)[0][0] if seen else None


def _parallelism(model: TraceModel) -> str | None:
    if _has(model, _FSDP):
        return "FSDP"
    if _has(model, _DDP):
        return "DDP"
    if _has(model, _DP):
        return "DataParallel"
    names = set(collectives(model).name)
    if names & {"allgather"} and names & {"reducescatter"} and "allreduce" not in names:
        return "FSDP"
    return "distributed" if names else None


def _world_size(model: TraceModel) -> int | None:
    info = model.meta.get("distributedInfo")
    size = info.get("world_size") if isinstance(info, dict) else None
    return size if isinstance(size, int) and size > 0 else None


@memoized
def run_context(model: TraceModel) -> dict[str, Any]:
    """The detected context (see the module doc), with ``in_use`` tags and a one-line ``label``."""
    ev = model["events"]
    cpu_only = not bool(isin_ints(ev["kind"], (*DEVICE_KINDS, Kind.RUNTIME, Kind.DRIVER)).any())
    loader = _dataloader(model)
    pinned = bool(_has(model, re.compile(r"^Memcpy HtoD \(Pinned"), DEVICE_KINDS)
                  or _has(model, re.compile(r"^aten::_?pin_memory$"), (Kind.CPU_OP,)))
    triton = _has(model, re.compile(r"^triton_"), (Kind.KERNEL,))
    compiled = bool(_has(model, _COMPILED, (Kind.CPU_OP, Kind.USER_ANNOTATION)) or triton)
    graphs = _has(model, _GRAPH_LAUNCH, (Kind.RUNTIME, Kind.DRIVER))
    precision = _precision(model)
    parallelism = _parallelism(model)
    checkpointing = bool(len(recompute(model).rows)) or recompute(model).explicit
    expandable = bool(_has(model, _VMM, (Kind.RUNTIME, Kind.DRIVER)))
    props = devices(model)
    tc = None if cpu_only else tensor_core_share(model)
    in_use = sorted(tag for tag, on in (
        ("dataloader_workers", loader["multiprocessing"]), ("pin_memory", pinned), ("torch_compile", compiled),
        ("cuda_graphs", graphs > 0), ("autocast", precision is not None), ("ddp", parallelism == "DDP"),
        ("fsdp", parallelism == "FSDP"), ("cpu_only", cpu_only), ("activation_checkpointing", checkpointing),
        ("expandable_segments", expandable)) if on)
    return {
        "cpu_only": cpu_only,
        "device": None if cpu_only or not props else props[0].get("name"),
        "compute_capability": None if cpu_only or not props else props[0].get("compute_capability"),
        "dataloader": loader,
        "pinned_memory": pinned,
        "compiled": compiled,
        "triton_kernels": triton,
        "cuda_graph_launches": graphs,
        "precision": precision,
        "tensor_core_share": tc,
        "parallelism": parallelism,
        "world_size": _world_size(model),
        "in_use": in_use,
        "label": _label(loader, pinned, compiled, graphs, precision, parallelism, _world_size(model), cpu_only),
    }


def _label(loader: dict[str, Any], pinned: bool, compiled: bool, graphs: int, precision: str | None,
           parallelism: str | None, world: int | None, cpu_only: bool) -> str:
    """"4 DataLoader workers · torch.compile · bf16 · FSDP, 2 ranks": what a reader checks first."""
    parts = []
    if loader["iterator"]:
        if loader["multiprocessing"]:
            n = loader["workers"]
            parts.append(f"{n} DataLoader workers" if n else "DataLoader with worker processes")
        else:
            parts.append("DataLoader without workers")
    if pinned:
        parts.append("pinned memory")
    if compiled:
        parts.append("torch.compile")
    if graphs:
        parts.append("CUDA graphs")
    if precision:
        parts.append(precision)
    if parallelism:
        parts.append(f"{parallelism}, {world} ranks" if world and world > 1 else parallelism)
    if cpu_only:
        parts.append("CPU only")
    return " · ".join(parts)
