"""Root-cause rules: what in the step produces a symptom (GPU idle, launch gaps, waiting), from what the trace shows,
with its evidence in numbers, where it lives (``location.py``) and the API to change. docs/guide/overview.md lists
each rule's condition, evidence, saving and advice; keep the two in step.

Each finding names its fix as a what-if change (``cause_fixes.py``) and its saving is the replayed step time without
it (``diagnosis.replayed``); the rule's own estimate (the GPU-idle time the cause claims, ``causes.claims``, or the
device time it adds) decides whether the rule holds and stands where no replay is made.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ...model import intervals as iv
from ...model.arrays import isin_ints
from ..communication import collectives
from ..memory import memory_curve
from ..python_frames import api_name, short_frame
from ..steps import find_steps, role_intervals
from ..summary import devices
from . import cause_fixes as F
from . import causes as C
from .findings import Facts, Finding, ms, operator_link, pct, step_label, trace_link, worst
from .location import Where, locate, locate_rows

DOCS = {
    "memory": "https://pytorch.org/docs/stable/notes/cuda.html#memory-management",
    "recompile": "https://pytorch.org/docs/stable/torch.compiler_troubleshooting.html#recompilations",
    "checkpoint": "https://pytorch.org/docs/stable/checkpoint.html",
    "optimizer": "https://pytorch.org/docs/stable/optim.html#algorithms",
    "dataloader": "https://pytorch.org/docs/stable/data.html#multi-process-data-loading",
    "cudnn": "https://pytorch.org/docs/stable/backends.html#torch.backends.cudnn.benchmark",
    "pipeline": "https://pytorch.org/docs/stable/distributed.pipelining.html",
    "ddp": "https://pytorch.org/docs/stable/generated/torch.nn.parallel.DistributedDataParallel.html",
}

TITLES = {
    "allocator_churn": "Caching-allocator churn", "recompilation": "Recompilation in the loop",
    "checkpoint_recompute": "Activation-checkpointing recompute", "unfused_optimizer": "Unfused optimizer",
    "host_compute": "Host compute in the step", "cudnn_autotune": "cuDNN autotuning in the loop",
    "cudnn_benchmark": "cuDNN benchmark possibly off", "pipeline_bubble": "Pipeline bubble",
    "grad_accum_allreduce": "All-reduce in every accumulation micro-batch",
}


def _at(where: Where) -> str:
    """" at train.py:42 (step)" where the user's frame is known."""
    return f" at {short_frame(where.frame)}" if where.frame else ""


def _claim(f: Facts, kind: str) -> np.ndarray | None:
    """The per-step GPU-idle time a holding cause claims (None where it does not hold)."""
    found = C.claims(f.model).get(kind)
    return None if found is None else C.per_step(f.model, found)


# ------------------------------------------------------------------------------------------------ allocator

def _allocator_cause(f: Facts, a: C.Allocator, where: Where) -> tuple[str, str, list[str], str]:
    """Why the allocator churns, the advice, its tags and how sure: empty_cache() (named by the frame, or frees
    outside any operator), shapes that change, or a memory limit the cache keeps hitting."""
    api = where.api() or ""
    expandable = "" if f.uses("expandable_segments") else (
        " If it is there against fragmentation, set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True instead.")
    tags = [] if f.uses("expandable_segments") else ["expandable_segments"]
    frees = len(a.releases)
    if api.endswith("empty_cache") or (frees and a.outside_ops >= 0.5 * frees):
        sure = "high" if api.endswith("empty_cache") else "medium"
        why = ("torch.cuda.empty_cache() in the loop" if sure == "high" else
               f"{a.outside_ops} of the {frees} frees happen outside any operator, as torch.cuda.empty_cache() does")
        return (why, f"Remove torch.cuda.empty_cache(){_at(where)} from the loop: it hands every cached block back "
                "to the driver, so the next step allocates them again with cudaMalloc, and each cudaFree waits for "
                "the GPU like a sync." + expandable, ["no_empty_cache", *tags], sure)
    op, shapes, calls = C.allocator_shapes(f.model, a.rows)
    if op and shapes >= 2 and calls >= max(a.steps_with, 2):
        return (f"{op} allocates with {shapes} different input shapes", "Shapes that change every step need new "
                "blocks every step: pad inputs to a few fixed sizes (bucketing)" + (
                    ", or set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True so segments grow in place."
                    if tags else "."), ["fixed_shapes", *tags], "medium")
    limit = _memory_limit(f)
    return (f"the cache is freed inside operators to make room{limit}", "The allocator frees cached blocks to "
            "satisfy new allocations: memory is at a limit. Raise or drop torch.cuda.set_per_process_memory_fraction, "
            "lower the batch size or peak memory" + (", or set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
                                                      "(less fragmentation)." if tags else "."),
            ["memory_limit", *tags], "medium")


def _memory_limit(f: Facts) -> str:
    """" (reserved peaks at 9.8 of 80.0 GiB: a memory fraction below the device's?)" from the memory curve."""
    cap = {f"GPU{d['id']}": d.get("memory_bytes") for d in devices(f.model) if d.get("memory_bytes")}
    for label, dev in memory_curve(f.model)["devices"].items():
        total, reserved = cap.get(label), dev["peak_reserved_bytes"]
        if total and reserved:
            gib = 2**30
            hint = ": a memory fraction below the device's?" if reserved < 0.9 * total else ": the device is full"
            return f" (reserved memory peaks at {reserved / gib:.1f} of {total / gib:.1f} GiB{hint})"
    return ""


def allocator_churn(f: Facts) -> Finding | None:
    """cudaMalloc/cudaFree (driver, virtual-memory and HIP forms) inside the steps whose GPU-idle time (during the
    calls, and after a free that drained the queue) is ≥ 5 % of the step; saving: that idle time."""
    per = _claim(f, "allocator_churn")
    if per is None or not f.gpu:
        return None
    a = C.allocator_calls(f.model)
    mean = float(per.mean())
    n = max(len(per), 1)
    where = locate_rows(f.model, a.releases if len(a.releases) else a.rows)
    why, advice, tags, sure = _allocator_cause(f, a, where)
    k = worst(per)
    return Finding("allocator_churn", f"The caching allocator calls cudaMalloc/cudaFree {len(a.rows) / n:.0f} times "
                   f"per step ({len(a.rows) - len(a.releases)} allocations, {len(a.releases)} frees in "
                   f"{a.steps_with} steps), {ms(float(a.time.mean()))} of host time per step: {why}; the GPU idles "
                   f"{ms(mean)} per step ({pct(f.share(mean))}) during and after them", advice, mean, tags,
                   DOCS["memory"], [trace_link(f, k, f"allocator calls in {step_label(f, k)}", "cudaFree"),
                                    {"view": "Memory", "params": {}, "label": "memory curve"}],
                   where=where, confidence=sure,
                   change=F.allocator(f.model))


# ------------------------------------------------------------------------------------------------ compilation

def recompilation(f: Facts) -> Finding | None:
    """TorchDynamo/Inductor compile events (``… (dynamo_timed)``) inside the steps whose GPU-idle time is ≥ 5 % of
    the step; saving: that time (the compile happens once when the guards hold)."""
    per = _claim(f, "recompilation")
    if per is None:
        return None
    c = C.compile_events(f.model)
    mean = float(per.mean())
    n = max(len(per), 1)
    where = locate_rows(f.model, c.rows)
    graphs = (f"{c.new_regions} new graphs compiled after the first step, {c.regions} compiled graphs run"
              if c.regions else f"{len(c.rows)} compilations")
    breaks = c.frames > 1 or c.resumes
    broken = (f"; {c.frames} compiled frames run per step" + (" (Dynamo's resume functions: graph breaks)"
                                                                if c.resumes else "")) if breaks else ""
    advice = (f"The compiled code{_at(where)} is compiled again inside the loop: a guard fails, usually on a shape or "
              "a Python value that changes. TORCH_LOGS=recompiles names the guard; mark a changing dimension "
              "dynamic (torch._dynamo.mark_dynamic(x, 0), or torch.compile(..., dynamic=True)), or pad inputs to a "
              "few fixed sizes. After torch._dynamo.config.recompile_limit (8) recompiles the frame runs eager.")
    if breaks:
        advice += (" Graph breaks split the model into several graphs: list them with TORCH_LOGS=graph_breaks or "
                   "torch._dynamo.explain(model)(x); fullgraph=True turns them into errors.")
    k = worst(per)
    return Finding("recompilation", f"torch.compile compiles {ms(float(c.time.mean()))} of {ms(f.step_us)} per step "
                   f"in {c.steps_with} of {n} steps ({graphs}){broken}; the GPU idles {ms(mean)} per step "
                   f"({pct(f.share(mean))}) meanwhile", advice, mean, ["dynamic_shapes"], DOCS["recompile"],
                   [trace_link(f, k, f"compilation in {step_label(f, k)}", "dynamo_timed"),
                    operator_link("Torch-Compiled Region", "compiled regions in Operators")],
                   where=where, confidence="high",
                   change=F.recompile(f.model))


# ------------------------------------------------------------------------------------------------ recompute

def checkpoint_recompute(f: Facts) -> Finding | None:
    """Forward operators run again inside backward (activation checkpointing) whose kernels take ≥ 5 % of the
    step; saving: their device time (what checkpointing fewer layers gives back, at the cost of memory)."""
    if not f.gpu:
        return None
    r = C.recompute(f.model)
    mean = float(r.time.mean()) if len(r.time) else 0.0
    if f.share(mean) < C.CLAIM_SHARE:
        return None
    n = max(len(r.time), 1)
    where = locate_rows(f.model, r.rows)
    how = ("torch.utils.checkpoint is in the trace" if r.explicit else
           "no checkpoint call is in the trace (recorded without with_stack?), but backward re-runs forward "
           "operators")
    return Finding("checkpoint_recompute", f"Activation checkpointing recomputes the forward pass in backward: "
                   f"{len(r.rows) / n:.0f} forward operators per step ({', '.join(r.names[:3])}) run again inside "
                   f"backward, {ms(mean)} of kernels per step ({pct(f.share(mean))}); {how}",
                   "Checkpoint fewer blocks (only as many as memory requires), or recompute only the cheap "
                   "operations with selective activation checkpointing (torch.utils.checkpoint.checkpoint(..., "
                   "use_reentrant=False, context_fn=partial(create_selective_checkpoint_contexts, policy)) keeps "
                   "the matmul outputs); the memory it frees is the trade.", mean, ["less_checkpointing"],
                   DOCS["checkpoint"], [operator_link(r.names[0]) if r.names else operator_link("aten::linear"),
                                        trace_link(f, worst(r.time), f"backward in {step_label(f, worst(r.time))}")],
                   where=where, confidence="high" if r.explicit else "medium",
                   change=F.recompute(f.model))


# ------------------------------------------------------------------------------------------------ optimizer

_FUSED = {"Adam", "AdamW", "SGD", "Adagrad"}  # optimizers with fused=True (CUDA)


def unfused_optimizer(f: Facts) -> Finding | None:
    """``Optimizer.step`` launching a kernel per parameter (or foreach kernels) whose launch gaps (GPU idle inside
    its device span) are ≥ 5 % of the step; saving: those gaps."""
    per = _claim(f, "unfused_optimizer")
    if per is None:
        return None
    o = C.optimizer_work(f.model)
    name = o.name or "the optimizer"
    mean = float(per.mean())
    where = locate_rows(f.model, o.rows)
    how = "one kernel per parameter and operation" if o.implementation == "per-parameter" else "foreach kernels"
    if o.name in _FUSED:
        advice = (f"Use the fused implementation: torch.optim.{o.name}(..., fused=True){_at(where)}: one kernel "
                  "updates every parameter.")
        tags = ["fused_optimizer"]
    else:
        advice = (f"Use foreach=True in torch.optim.{name}(...), or compile the optimizer step "
                  "(torch.compile(optimizer.step)).") if o.implementation == "per-parameter" else (
            "Compile the optimizer step (torch.compile(optimizer.step)) to fuse its foreach kernels.")
        tags = ["foreach_optimizer"] if o.implementation == "per-parameter" else ["compiled_optimizer"]
    if o.implementation == "per-parameter" and o.name in _FUSED:
        advice += " foreach=True (fewer, larger kernels) is the next best."
    k = worst(per)
    return Finding("unfused_optimizer", f"{name}.step launches {o.kernels:.0f} kernels per step ({how}), "
                   f"{ms(float(o.kernel_time.mean()))} of kernels; the GPU idles {ms(mean)} per step "
                   f"({pct(f.share(mean))}) between them", advice, mean, tags, DOCS["optimizer"],
                   [trace_link(f, k, f"optimizer in {step_label(f, k)}", "Optimizer.step")],
                   where=where, confidence="high",
                   change=F.fused_optimizer(f.model))


# ------------------------------------------------------------------------------------------------ host compute

def _top_work(f: Facts, h: C.HostCompute) -> str:
    """The host work that takes the most time: operators by name, library frames as their API."""
    ev = f.model["events"]
    names = ev["name"][h.rows]
    dur = np.nan_to_num(ev["dur"][h.rows], nan=0.0)
    codes, group = np.unique(names, return_inverse=True)
    totals = np.bincount(group.reshape(-1), weights=dur, minlength=len(codes))
    n = max(find_steps(f.model).count, 1)
    top = [(f.model.strings[int(codes[i])], float(totals[i]) / n) for i in np.argsort(-totals)[:3].tolist()]
    return ", ".join(f"{api_name(t) if not t.startswith('aten::') else t} ({ms(us)})" for t, us in top)


def host_compute(f: Facts) -> Finding | None:
    """Host operators that compute on the CPU (no device call in their subtree; tensor creation and the
    DataLoader aside) and Python frames of image/array libraries, on the threads that run the steps, while the
    GPU idles ≥ 5 % of the step; saving: that idle time."""
    per = _claim(f, "host_compute")
    if per is None or not f.gpu:
        return None
    h = C.host_compute(f.model)
    mean = float(per.mean())
    where = locate(f.model, h.claimed)
    workers = f.uses("dataloader_workers")
    if h.libraries:
        advice = ("These transforms run in the training loop on the main thread: move them into the Dataset's "
                  "__getitem__ (or a collate_fn) so that " + ("the DataLoader's workers run them" if workers else
                                                                  "DataLoader(num_workers=N) workers run them") +
                  ", or apply them on the GPU after the copy (torchvision.transforms.v2 on CUDA tensors).")
    else:
        advice = ("Move this CPU work off the step's critical path: run it on the GPU (move the tensors first), in "
                  + ("the DataLoader's workers" if workers else "DataLoader(num_workers=N) workers") +
                  ", or once before the loop.")
    tags = ["move_to_workers", "gpu_transforms"] + ([] if workers else ["dataloader_workers"])
    k = worst(per)
    return Finding("host_compute", f"The main thread computes on the CPU while the GPU idles {ms(mean)} of "
                   f"{ms(f.step_us)} per step ({pct(f.share(mean))}): {_top_work(f, h)}", advice, mean, tags,
                   DOCS["dataloader"], [trace_link(f, k, f"host work in {step_label(f, k)}")], where=where,
                   confidence="high",
                   change=F.host_compute(f.model))


# ------------------------------------------------------------------------------------------------ cuDNN

def cudnn_autotune(f: Facts) -> Finding | None:
    """Convolution calls that try algorithms (``cudnn.benchmark`` autotuning: a sync inside the convolution, or
    ≥ 10 distinct compute kernels in one call) inside ≥ 2 steps, their extra kernels ≥ 2 % of the step; saving:
    the candidates' device time."""
    if not f.gpu:
        return None
    c = C.convolutions(f.model)
    mean = float(c.tuning_extra.mean()) if len(c.tuning_extra) else 0.0
    if c.tuning_steps < 2 or f.share(mean) < 0.02:
        return None
    where = locate_rows(f.model, c.tuning_rows)
    return Finding("cudnn_autotune", f"cuDNN autotunes inside the steps: {len(c.tuning_rows)} convolution calls in "
                   f"{c.tuning_steps} steps time candidate algorithms ({c.shapes} distinct input shapes over "
                   f"{c.calls} convolution calls), {ms(mean)} of extra kernels per step ({pct(f.share(mean))})",
                   "torch.backends.cudnn.benchmark = True tunes every new input shape: with shapes that change "
                   "every step it never stops. Pad inputs to a few fixed sizes, or set "
                   "torch.backends.cudnn.benchmark = False.", mean, ["fixed_shapes"], DOCS["cudnn"],
                   [trace_link(f, worst(c.tuning_extra), f"convolutions in {step_label(f, worst(c.tuning_extra))}",
                               "convolution")], where=where, confidence="high",
                   change=F.cudnn_autotune(f.model))


def cudnn_benchmark(f: Facts) -> Finding | None:
    """Convolution kernels ≥ 30 % of the step with fixed input shapes and no autotuning anywhere in the trace:
    ``cudnn.benchmark`` may be off. Low confidence (tuning may have ended before the profiled steps; the trace
    does not record the flag), so no saving and never the verdict."""
    if not f.gpu:
        return None
    c = C.convolutions(f.model)
    mean = float(c.time.mean()) if len(c.time) else 0.0
    n = max(len(c.time), 1)
    if c.tuned or f.share(mean) < 0.3 or c.shapes > max(c.calls / n, 1):
        return None
    return Finding("cudnn_benchmark", f"Convolutions take {ms(mean)} of {ms(f.step_us)} per step "
                   f"({pct(f.share(mean))}) with fixed input shapes, and no cuDNN autotuning shows in the trace",
                   "If torch.backends.cudnn.benchmark is False, set it to True before the first step: cuDNN then "
                   "times the algorithms for each shape once and keeps the fastest. (The trace cannot show the "
                   "flag: tuning that finished before the profiled steps leaves no trace either.)", 0.0,
                   ["cudnn_benchmark"], DOCS["cudnn"], [operator_link("aten::cudnn_convolution")], cause=False,
                   confidence="low", estimated="rule of thumb")


# ------------------------------------------------------------------------------------------------ pipeline

_P2P = ("send", "recv", "sendrecv")


def _bubble_saving(bubble: float, micro: int, stages: int) -> tuple[float, str]:
    """What more micro-batches give: a GPipe/1F1B step of ``micro`` micro-batches over ``stages`` stages idles
    (stages − 1) micro-batch times per stage, the bubble, (stages − 1) / (micro + stages − 1) of the step; with the
    same global batch in ``k`` times as many micro-batches the bubble shrinks to a k-th. The usual target is 4 ×
    stages micro-batches (the GPipe paper: the bubble is then negligible), else twice as many."""
    target = max(4 * stages, 2 * micro)
    return bubble * (1.0 - micro / target), f"{target} micro-batches"


def pipeline_bubble(f: Facts) -> Finding | None:
    """Point-to-point sends and receives (a pipeline schedule) whose time not hidden by computation (the bubble) is
    ≥ 10 % of the step: the stage waits for its neighbours. Saving: the replay with 4 × stages micro-batches
    (``cause_fixes.more_microbatches``: each step's fill/drain wait shrinks by the factor), the micro-batches counted
    by this rank's receives per step, the stages by the job's world size (2 without a job); the rule's own
    estimate (``_bubble_saving``) decides whether it holds."""
    col = collectives(f.model)
    names = np.asarray(col.name, dtype=object)
    p2p = isin_ints(names, _P2P)
    if not p2p.any():
        return None
    comm = iv.union(col.start[p2p], col.end[p2p])
    exposed = C.per_step(f.model, iv.subtract(comm, role_intervals(f.model)["Kernel"]))
    mean = float(exposed.mean()) if len(exposed) else 0.0
    if f.share(mean) < 0.1:
        return None
    n = max(len(exposed), 1)
    counts = {k: int((names == k).sum()) for k in _P2P if (names == k).any()}
    mix = ", ".join(f"{v / n:.0f} {k}" for k, v in counts.items())
    micro = max(1, round((counts.get("recv", 0) + counts.get("sendrecv", 0)) / n))
    stages = max(2, int((f.job or {}).get("world_size") or f.context.get("world_size") or 2))
    saving, target = _bubble_saving(mean, micro, stages)
    factor = max(4 * stages, 2 * micro) / micro
    where = locate_rows(f.model, C.host_rows(f.model, col.row[p2p & (col.row >= 0)]))
    k = worst(exposed)
    return Finding("pipeline_bubble", f"This pipeline stage waits in point-to-point transfers ({mix} per step) "
                   f"{ms(mean)} of {ms(f.step_us)} per step ({pct(f.share(mean))}) with no computation to overlap",
                   f"Shrink the pipeline's bubble: it is (stages − 1) / (micro-batches + stages − 1) of a GPipe or "
                   f"1F1B step; this stage receives {micro} micro-batch{'es' if micro > 1 else ''} per step over "
                   f"{stages} stages: split the same batch into {target} (the estimate), use an interleaved schedule "
                   "(torch.distributed.pipelining.ScheduleInterleaved1F1B, several stages per rank), and balance "
                   "the stages (the Distributed view shows the slower one).", saving,
                   ["more_microbatches", "interleaved_schedule"], DOCS["pipeline"],
                   [trace_link(f, k, f"send/recv in {step_label(f, k)}", "nccl"),
                    {"view": "Distributed", "params": {}, "label": "Distributed view"}],
                   where=where, confidence="medium", change=F.more_microbatches(f.model, factor))


# ------------------------------------------------------------------------------------------- gradient accumulation

def grad_accum_allreduce(f: Facts) -> Finding | None:
    """DistributedDataParallel with several micro-batches per step whose backward passes all-reduce more than once
    (``causes.accumulation_syncs``), the all-reduces of all but the last ≥ 5 % of the step in device time; saving:
    the replay without them (``cause_fixes.no_sync``)."""
    a = C.accumulation_syncs(f.model)
    if not len(a.passes) or float(a.syncing.mean()) < 2 or f.share(float(a.time.mean())) < 0.05:
        return None
    passes, syncing = float(a.passes.mean()), float(a.syncing.mean())
    return Finding("grad_accum_allreduce", f"DistributedDataParallel all-reduces the gradients after {syncing:.0f} "
                   f"of the {passes:.0f} micro-batches' backward passes per step: {syncing - 1:.0f} extra rounds, "
                   f"{a.nbytes / 1e9:.2f} GB and {ms(float(a.time.mean()))} of all-reduce per step "
                   f"({pct(f.share(float(a.time.mean())))}) that gradient accumulation does not need",
                   "Run every micro-batch but the last under ddp.no_sync() (a context manager of the "
                   "DistributedDataParallel module): the gradients accumulate locally and one all-reduce, in the "
                   "last micro-batch's backward, reduces them all. (FSDP: model.set_requires_gradient_sync(False).)",
                   float(a.time.mean()), ["no_sync"], DOCS["ddp"],
                   [trace_link(f, worst(a.time), f"all-reduces in {step_label(f, worst(a.time))}", "nccl")],
                   where=locate_rows(f.model, C.host_rows(f.model, a.rows)), confidence="high",
                   change=F.no_sync(f.model))


RULES: tuple[Callable[[Facts], Finding | None], ...] = (
    allocator_churn, recompilation, checkpoint_recompute, unfused_optimizer, host_compute, cudnn_autotune,
    cudnn_benchmark, pipeline_bubble, grad_accum_allreduce)

__all__ = ["DOCS", "RULES", "TITLES"]
