"""The rules: each reads its evidence (``evidence.py``), the run's context and, on multi-rank runs, the job, and
returns a finding or ``None``. docs/guide/overview.md lists every rule's condition, formula and thresholds; keep
the two in step.

A finding says what the trace shows (numbers), what to change given what the run already does (``suggests``:
technique tags, never one that ``context.in_use`` lists), an estimated saving per step and links that open the
evidence.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...model import intervals as iv
from ...model.arrays import isin_ints
from ...model.kinds import Kind
from ...model.optree import host_tree
from ...model.tables import TraceModel
from ..communication import collectives
from ..kernels import kernel_table
from ..memory import memory_curve
from ..steps import breakdown, find_steps
from ..summary import devices
from ..whatif.changes import Change, DropHost
from . import cause_fixes, causes, fixes
from . import evidence as E
from .causes import readbacks, step_cause
from .location import Where, api_name, locate, locate_rows, short_frame, threads_of
from .roofline_notes import tensor_core_clause, waste_clause

DOCS = {
    "dataloader": "https://pytorch.org/docs/stable/data.html#multi-process-data-loading",
    "pin_memory": "https://pytorch.org/docs/stable/data.html#memory-pinning",
    "compile": "https://pytorch.org/docs/stable/torch.compiler.html",
    "graphs": "https://pytorch.org/docs/stable/notes/cuda.html#cuda-graphs",
    "sync": "https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html#avoid-unnecessary-cpu-gpu-synchronization",
    "amp": "https://pytorch.org/docs/stable/amp.html",
    "ddp": "https://pytorch.org/docs/stable/ddp_comm_hooks.html",
    "fsdp": "https://pytorch.org/docs/stable/fsdp.html",
    "distributed": "https://pytorch.org/docs/stable/distributed.html",
    "tuning": "https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html",
    "memory": "https://pytorch.org/docs/stable/notes/cuda.html#optimizing-memory-usage-with-pytorch-cuda-alloc-conf",
    "creation": "https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html#create-tensors-directly-on-the-target-device",
}

TITLES = {
    "input_bound": "Input-bound", "cpu_tensor_creation": "CPU tensor creation", "cpu_bound": "CPU-bound",
    "gpu_idle_gaps": "GPU idle gaps",
    "launch_bound": "Launch-bound", "sync_bound": "Sync-bound", "pageable_copies": "Pageable copies",
    "copy_bound": "Copy-bound", "low_tensor_cores": "Low tensor-core use", "communication_bound": "Communication-bound",
    "straggler_wait": "Waiting for a straggler", "straggler": "Straggler", "outlier_steps": "Outlier steps",
    "memory_pressure": "Memory pressure", "gpu_bound": "GPU-bound", "cpu_compute": "CPU compute-bound",
}


@dataclass(frozen=True)
class Facts:
    """What every rule reads: the model, its context, the mean step and (multi-rank) this rank's job picture."""

    model: TraceModel
    context: dict[str, Any]
    step_us: float
    job: dict[str, Any] | None = None

    def share(self, us: float) -> float:
        return us / self.step_us if self.step_us > 0 else 0.0

    @property
    def gpu(self) -> bool:
        return not self.context["cpu_only"]

    def uses(self, tag: str) -> bool:
        return tag in self.context["in_use"]


@dataclass
class Finding:
    kind: str
    headline: str  # the numbers, one clause: "DataLoader waits 114 ms of 130 ms per step (88 %)"
    advice: str  # what to change, for this context
    saving_us: float
    suggests: list[str]
    link: str
    evidence: list[dict[str, Any]] = field(default_factory=list)
    cause: bool = True  # False: says where to look (outliers, memory), never becomes the verdict
    fallback: bool = False  # the verdict only when no cause saves ≥ 10 % (GPU-bound, CPU compute-bound)
    where: Where | None = None  # where in the step the evidence lives (``location.py``)
    confidence: str = "high"  # high: the trace shows the cause; medium: inferred from its effects; low: a guess
    change: Change | None = None  # the fix as a what-if change: saving_us is then replayed (diagnosis.replayed)
    what_if: dict[str, Any] | None = None  # the replay's answer (set by diagnosis.replayed)
    # how the saving is found where no replay gives it (None: by the rule below, ``_estimated``)
    estimated: str | None = None

    def as_dict(self, facts: Facts) -> dict[str, Any]:
        from .rules_causes import TITLES as CAUSE_TITLES

        return {"id": self.kind, "kind": self.kind, "title": {**TITLES, **CAUSE_TITLES}[self.kind],
                "text": f"{self.headline}. {self.advice}", "headline": self.headline, "advice": self.advice,
                "saving_us": float(self.saving_us), "share": facts.share(self.saving_us),
                "evidence": self.evidence, "suggests": self.suggests, "link": self.link, "cause": self.cause,
                "what_if": self.what_if, "estimated": _estimated(self),
                "where": self.where.as_dict() if self.where and self.where.text() else None,
                "confidence": self.confidence}


def _estimated(f: Finding) -> str:
    """How the saving was found: a what-if replay of the fix, a rule of thumb, or none (no saving claimed)."""
    if f.what_if is not None:
        return "replay"
    if f.kind == "outlier_steps":
        return "measured"  # the steps' own spread, not a prediction
    if f.saving_us <= 0:
        return "none"
    return f.estimated or "rule of thumb"


def ms(us: float) -> str:
    return f"{us / 1000:.1f} ms" if us >= 1000 else f"{us:.0f} µs"


def times(n: float) -> str:
    """A count (a mean per step may be fractional): "9", "2.5", never "9.0"."""
    return f"{n:,.0f}" if abs(n - round(n)) < 0.05 else f"{n:,.1f}"


def pct(x: float) -> str:
    return f"{100 * x:.0f} %" if x >= 0.1 else f"{100 * x:.1f} %"


# ------------------------------------------------------------------------------------------------ evidence links

def trace_link(facts: Facts, step: int, label: str, q: str | None = None) -> dict[str, Any]:
    """Open the Trace view on one step (device-aware bounds), searching for ``q``."""
    steps = find_steps(facts.model)
    params: dict[str, Any] = {"start_us": float(steps.start[step]), "end_us": float(steps.end[step])}
    if q:
        params["q"] = q
    return {"view": "Trace", "params": params, "label": label}


def operator_link(name: str, label: str | None = None) -> dict[str, Any]:
    return {"view": "Operator", "params": {"q": name}, "label": label or f"{name} in Operators"}


def kernel_link(label: str, q: str | None = None) -> dict[str, Any]:
    return {"view": "Kernel", "params": {"q": q} if q else {}, "label": label}


def gpu_link(card: str, label: str) -> dict[str, Any]:
    """Open the GPU view at one of its cards (``idle``: idle time by stream; ``launch``: launch statistics)."""
    return {"view": "GPU", "params": {"card": card}, "label": label}


def distributed_link(rank: int | None, label: str) -> dict[str, Any]:
    return {"view": "Distributed", "params": {} if rank is None else {"rank": rank}, "label": label}


def worst(values: np.ndarray) -> int:
    return int(np.argmax(values)) if len(values) else 0


def step_label(facts: Facts, step: int) -> str:
    return f"step {find_steps(facts.model).names[step]}"


# ------------------------------------------------------------------------------------------------ rules

def input_bound(f: Facts) -> Finding | None:
    """DataLoader wait ≥ 5 % of the step; saving: all of it (batches ready before they are asked for)."""
    loader = E.dataloader(f.model)
    mean = float(loader.mean()) if len(loader) else 0.0
    if f.share(mean) < 0.05:
        return None
    if f.uses("dataloader_workers"):
        n = f.context["dataloader"]["workers"]
        who = f"{n} workers" if n else "The DataLoader's worker processes"
        advice = (f"{who} still leave {pct(f.share(mean))} of the step waiting for data: raise num_workers "
                  "(e.g. double it), set persistent_workers=True and a larger prefetch_factor, or move the "
                  "transforms to the GPU.")
        suggests = ["more_dataloader_workers", "gpu_transforms"]
    else:
        advice = "Load batches in background processes: DataLoader(num_workers=N), N up to the spare CPU cores"
        suggests = ["dataloader_workers"]
        if f.gpu and not f.uses("pin_memory"):
            advice += ", with pin_memory=True"
            suggests.append("pin_memory")
        advice += "."
    k = worst(loader)
    change = fixes.input_wait(f.model)
    return Finding("input_bound", f"DataLoader waits {ms(mean)} of {ms(f.step_us)} per step ({pct(f.share(mean))})",
                   advice, mean, suggests, DOCS["dataloader"],
                   [trace_link(f, k, f"DataLoader in {step_label(f, k)}", "enumerate(DataLoader)")],
                   where=locate_rows(f.model, getattr(change, "rows", np.zeros(0, np.int64))), change=change)


def cpu_tensor_creation(f: Facts) -> Finding | None:
    """Tensor-creation operators (normal_, randn, …) that ran on the CPU during a GPU run ≥ 5 % of the step;
    saving: their time (created on the GPU they take microseconds)."""
    if not f.gpu:
        return None
    per = E.creation_time(f.model)
    mean = float(per.mean()) if len(per) else 0.0
    if f.share(mean) < 0.05:
        return None
    nodes = E.creation_nodes(f.model)
    tree = host_tree(f.model)
    names = f.model["events"]["name"][tree.rows[nodes]]
    codes, group = np.unique(names, return_inverse=True)
    totals = np.bincount(group.reshape(-1), weights=(tree.end - tree.start)[nodes], minlength=len(codes))
    top = f.model.strings[int(codes[int(np.argmax(totals))])]
    region = E._region(f.model, nodes[names == codes[int(np.argmax(totals))]])
    where = f" inside '{region}'" if region else ""
    k = worst(per)
    return Finding("cpu_tensor_creation",
                   f"{top} creates tensors on the CPU{where}: {ms(mean)} of {ms(f.step_us)} per step "
                   f"({pct(f.share(mean))}) while the GPU waits",
                   "Create them on the GPU (torch.randn(..., device='cuda'), torch.empty(..., device='cuda')"
                   ".normal_()) instead of on the CPU followed by a copy.",
                   mean, ["gpu_tensor_creation"], DOCS["creation"],
                   [operator_link(top), trace_link(f, k, f"{top} in {step_label(f, k)}", top)],
                   where=locate_rows(f.model, tree.rows[nodes]), change=fixes.gpu_creation(f.model))


def _gpu_busy(f: Facts) -> float:
    idle = E.per_step(f.model, E.gpu_idle(f.model))
    return 1.0 - f.share(float(idle.mean())) if len(idle) else 0.0


_ADDRESS = re.compile(r" (?:of (?:[\w.]+ )?object )?at 0x[0-9a-fA-F]+")


def mostly_at(where: Where) -> str:
    """"; mostly at train.py:74 (train_step) → torch._tensor.backward (78 % of it)" for a headline."""
    text = where.text()
    if not text:
        return ""
    share = f" ({pct(where.share)} of it)" if where.frame and 0 < where.share < 0.9 else ""
    return f"; mostly at {text}{share}"


def optimizer_api(where: Where) -> bool:
    """Whether the evidence lives in a ``torch.optim`` optimizer's step (by the API the user's line calls)."""
    return re.match(r"^torch\.optim\.\w+\.step$", where.api() or "") is not None


def _host_advice(f: Facts, where: Where) -> tuple[str, list[str]]:
    """What cuts the host's work, given what the run already does and where the work is: the backward pass
    (autograd launches each kernel from its own thread), the optimizer, or the model's forward."""
    api = where.api() or ""
    if not f.uses("torch_compile"):
        part = ("the backward pass (autograd launches every kernel one by one)" if api.endswith("backward") else
                f"'{where.annotation}'" if where.annotation and where.annotation != "backward" else "the model")
        return (f"Cut the host work per step in {part}: torch.compile the model (fewer, fused kernels, backward "
                "included), use larger batches", ["torch_compile", "larger_batch"])
    if not f.uses("cuda_graphs"):
        return ("The model is compiled, yet the host still leaves the GPU idle: replay the step as a CUDA graph "
                "(torch.compile(mode='reduce-overhead')), use larger batches", ["cuda_graphs", "larger_batch"])
    return ("The run is compiled and replays CUDA graphs: the host work below runs outside them; move it out of "
            "the step or into the captured region", ["more_graph_capture"])


def cpu_bound(f: Facts) -> Finding | None:
    """GPU idle while the host runs operators/Python ≥ 20 % of the step; saving: that time. "CPU-bound" only where
    the GPU is busy < 50 % of the step; above, the same evidence is "GPU idle gaps" (the GPU is mostly busy). The
    finding says where the host is meanwhile (``location.locate`` of the idle time)."""
    if not f.gpu or _launch_bound(f):
        return None
    gap_iv = E.host_gap_intervals(f.model)
    own = own_cause_rows(f)
    if len(own):  # the straggler's own cause is its finding's (the job waits for it), not this one's
        ev = f.model["events"]
        gap_iv = iv.subtract(gap_iv, iv.union(ev["ts"][own], ev["ts"][own] + np.nan_to_num(ev["dur"][own])))
    gap = E.per_step(f.model, gap_iv)
    mean = float(gap.mean()) if len(gap) else 0.0
    if f.share(mean) < 0.2:
        return None
    hot = E.hot_ops_in_gaps(f.model)
    named = ", ".join(f"{h.name} ({ms(h.gap_us)}{f' in {h.region}' if h.region else ''})" for h in hot)
    where = locate(f.model, gap_iv)
    advice, suggests = _host_advice(f, where)
    advice += f". Operators in the GPU-idle gaps: {named}." if named else "."
    k = worst(gap)
    links = [operator_link(h.name) for h in hot] + [trace_link(f, k, f"GPU-idle gaps in {step_label(f, k)}")]
    hw = E.host_wait(f.model)
    split = ""
    if hw is not None and hw.idle > 0:
        at = f"GPU {hw.device} stream {hw.stream}" if hw.device is not None else f"stream {hw.stream}"
        split = (f"; on {at}, {ms(hw.host_wait)} of its {ms(hw.idle)} idle per step is host wait (the next "
                 "kernel not yet launched)")
        links.append(gpu_link("idle", "idle time by stream in GPU insights"))
    kind = "cpu_bound" if _gpu_busy(f) < 0.5 else "gpu_idle_gaps"
    return Finding(kind, f"The GPU is idle {ms(mean)} of {ms(f.step_us)} per step ({pct(f.share(mean))}) "
                   f"while the host runs operators and Python{mostly_at(where)}{split}", advice, mean, suggests,
                   DOCS["compile"], links, where=where, confidence="medium",
                   change=fixes.compiled_step(f.model, kind))


def _launch_bound(f: Facts) -> bool:
    """≥ 100 kernels in the steps, ≥ half of them shorter than their launch call, GPU busy < 80 %, and
    Σ (launch − kernel) over the short ones ≥ 5 % of the step."""
    if not f.gpu:
        return False
    lo = E.launch_overhead(f.model)
    mean = float(lo.overhead.mean()) if len(lo.overhead) else 0.0
    return lo.kernels >= 100 and lo.short >= 0.5 * lo.kernels and _gpu_busy(f) < 0.8 and f.share(mean) >= 0.05


def launch_bound(f: Facts) -> Finding | None:
    """Launch-bound (see ``_launch_bound``): it replaces CPU-bound, whose evidence it explains; saving: the GPU
    idle time while the host runs (as CPU-bound), at least the launch overhead. Kernels a graph launch
    (``cudaGraphLaunch``) replays are not launched one by one: they never count. Says where the short kernels are
    launched from (their launches' location)."""
    if not _launch_bound(f):
        return None
    lo = E.launch_overhead(f.model)
    gap = E.host_gap(f.model)
    per = np.maximum(lo.overhead, gap)
    mean = float(per.mean())
    where = locate_rows(f.model, lo.rows)
    if optimizer_api(where):
        advice, suggests = (f"Most of these launches are the optimizer's step ({where.api()}), one small kernel per "
                            "parameter: construct the optimizer with fused=True (Adam, AdamW, SGD, Adagrad) or "
                            "foreach=True."), ["fused_optimizer"]
    elif not f.uses("torch_compile"):
        advice, suggests = "Fuse the small operations with torch.compile, or batch the work into fewer kernels.", [
            "torch_compile"]
    elif not f.uses("cuda_graphs"):
        advice, suggests = ("The model is compiled; replay it as a CUDA graph (torch.compile(mode='reduce-overhead')) "
                            "so one launch replaces many."), ["cuda_graphs"]
    else:
        advice, suggests = (f"CUDA graphs replay {lo.graphed} kernels in the steps, yet these {lo.kernels} are "
                            "launched one by one outside them: capture this part of the step too."), [
            "more_graph_capture"]
    n = max(find_steps(f.model).count, 1)
    k = worst(per)
    st = E.launch_summary(f.model)
    delay = (f"; launch delay p50 {st['launch_delay_p50_us']:.1f} µs, p95 {st['launch_delay_p95_us']:.1f} µs"
             if st["launch_delay_p50_us"] is not None else "")
    graphed = f", not counting {lo.graphed} that CUDA graphs replay" if lo.graphed else ""
    return Finding("launch_bound", f"{lo.short} of {lo.kernels} kernels ({pct(lo.short / lo.kernels)}; "
                   f"{lo.kernels / n:.0f} per step{graphed}) ran shorter than the CPU call that launched them "
                   f"(median kernel {lo.median_kernel_us:.1f} µs, launch {lo.median_launch_us:.1f} µs"
                   f"{delay}): the GPU idles {ms(mean)} per step ({pct(f.share(mean))}) waiting for launches"
                   f"{mostly_at(where)}", advice, mean, suggests, DOCS["graphs"],
                   [trace_link(f, k, f"launches in {step_label(f, k)}"), kernel_link("Kernels"),
                    gpu_link("launch", "launch statistics in GPU insights")], where=where, confidence="medium",
                   change=fixes.graph_replay(f.model, "launch_bound"))


# what the user wrote, by the API the trace shows at the sync (``Where.api``) or by the operator it ran in
READ_SHARE = 0.05  # reading values back and printing them is a finding from this share of the step on
_SYNC_API = (("item", ".item()"), ("tolist", ".tolist()"), ("print", "print()"), ("__format__", "formatting"),
             ("__repr__", "printing"), ("__str__", "printing"), ("cpu", ".cpu()"), ("numpy", ".numpy()"),
             ("to", ".to('cpu')"), ("synchronize", "torch.cuda.synchronize()"), ("nonzero", ".nonzero()"),
             ("__bool__", "a GPU tensor in an if"), ("is_nonzero", "a GPU tensor in an if"))


def sync_api(where: Where, sources: list[str]) -> str | None:
    """The user's call that syncs: from the API at the user's frame, else from the operator the sync ran in."""
    api = (where.api() or "").rsplit(".", 1)[-1]
    for name, text in _SYNC_API:
        if api == name:
            return text
    if "aten::_local_scalar_dense" in sources:
        return ".item() (or .tolist(), printing a GPU tensor)"
    if {"aten::to", "aten::_to_copy", "aten::copy_"} & set(sources):
        return ".cpu() / .to('cpu')"
    if "aten::nonzero" in sources:
        return ".nonzero() (or boolean-mask indexing)"
    return None


def sync_bound(f: Facts) -> Finding | None:
    """GPU busy < 90 % and the GPU-idle time the host syncs cost (``sync_cost``: a replay of the step with the
    host never blocked) ≥ 2 % of the step; saving: that time. Names the user's call that syncs (``.item()``,
    ``.cpu()``, ``.tolist()``, ``print``) and its line, from the Python frames around the blocked time."""
    if not f.gpu or _gpu_busy(f) >= 0.9:
        return None
    s = E.host_syncs(f.model)
    cost = E.sync_cost(f.model)
    mean = float(cost.saving.mean()) if len(cost.saving) else 0.0
    reads = readbacks(f.model)
    reading = float(reads.time.mean()) if len(reads.time) else 0.0
    if not len(s.calls) or s.calls.sum() == 0 or (f.share(mean) < 0.02 and f.share(reading) < READ_SHARE):
        return None
    where = locate(f.model, iv.union(cost.blocked_start, cost.blocked_end), threads_of(f.model, cost.rows))
    api = sync_api(where, s.sources)
    item = "aten::_local_scalar_dense" in s.sources
    within = f" inside {', '.join(s.sources[:3])}" if s.sources else ""
    why = f": {api}{_at_frame(where)}" if api else ""
    k = worst(cost.saving)
    q = "aten::_local_scalar_dense" if item else s.names[0]
    links = [trace_link(f, k, f"syncs in {step_label(f, k)}", q)]
    if item:
        links.append(operator_link("aten::_local_scalar_dense", ".item() calls in Operators"))
    blocked = float(cost.blocked.mean())
    printed = (f"; reading the values back{' and printing them' if reads.printing else ''} "
               f"({float(reads.reads.sum()) / max(len(reads.time), 1):.0f} reads per step, with the Python between "
               f"them) takes {ms(reading)} of host time per step ({pct(f.share(reading))})"
               if f.share(reading) >= READ_SHARE else "")
    n = times(float(s.calls.mean()))
    return Finding("sync_bound", f"The host waits for the GPU {n} time{'' if n == '1' else 's'} per step "
                   f"({', '.join(s.names)}{within}{why}), blocked {ms(blocked)} per step; each time the GPU's queue "
                   f"runs dry and it then waits for the host's next launches: {ms(mean)} of GPU idle per step "
                   f"({pct(f.share(mean))}) follows the syncs{printed}",
                   f"Keep values on the GPU{f' instead of {api}' if api else ''}: read losses and metrics every N "
                   "steps (accumulate them in a GPU tensor), and avoid .item()/.cpu()/.tolist()/print on GPU tensors "
                   "inside the step.", mean, ["fewer_syncs"], DOCS["sync"], links, where=where,
                   change=fixes.drop_syncs(f.model))


def _at_frame(where: Where) -> str:
    return f" at {short_frame(where.frame)}" if where.frame else ""


def pageable_copies(f: Facts) -> Finding | None:
    """Host-to-device copies from pageable memory ≥ 0.5 % of the step; saving: their time (pinned and
    non-blocking, they overlap with compute)."""
    if not f.gpu:
        return None
    c = E.h2d_copies(f.model)
    mean = float(c.time.mean()) if len(c.time) else 0.0
    if not c.pageable or f.share(mean) < 0.005:
        return None
    size = f" ({c.bytes_per_step / 2**20:,.1f} MiB)" if c.bytes_per_step else ""
    if f.uses("pin_memory"):
        advice = (f"Pinned memory is in use ({c.pinned:,} pinned copies), but these are not: pin those tensors too "
                  "(tensor.pin_memory()) and copy them with non_blocking=True.")
        suggests = ["pin_more"]
    else:
        advice = "Pin the host memory (DataLoader(pin_memory=True)) and copy with .to(device, non_blocking=True)."
        suggests = ["pin_memory"]
    k = worst(c.time)
    change = fixes.pinned_copies(f.model, f.context)
    calls = next((p.rows for p in getattr(change, "parts", ()) if isinstance(p, DropHost)), None)
    n = times(c.per_step)
    return Finding("pageable_copies", f"{n} host-to-device cop{'y' if n == '1' else 'ies'} per step come from pageable "
                   f"memory{size}, taking {ms(mean)} per step ({pct(f.share(mean))}); the host blocks on each",
                   advice, mean, suggests,
                   DOCS["pin_memory"], [trace_link(f, k, f"copies in {step_label(f, k)}", "Memcpy HtoD (Pageable")],
                   where=locate_rows(f.model, calls) if calls is not None else None, change=change)


_DIRECTIONS = (("HtoD", "host to device"), ("DtoH", "device to host"), ("DtoD", "device to device"),
               ("PtoP", "peer to peer"))
_COPY_ADVICE = {
    "HtoD": "Copy the data to the GPU once and keep it there (no per-step .to('cuda') of the same tensors); copy "
            "the rest from pinned memory with non_blocking=True, prefetching the next batch on a side stream.",
    "DtoH": "Keep results on the GPU: a .cpu()/.numpy()/.tolist() per step copies them back (and waits for them); "
            "read them every N steps.",
    "DtoD": "Avoid device copies in the model: .contiguous(), .clone() and layout changes (permute then reshape) "
            "copy whole tensors; keep one layout (e.g. channels_last end to end).",
    "PtoP": "Peer copies between GPUs: keep each tensor on the GPU that uses it, or overlap the copies with compute.",
}


def copy_bound(f: Facts) -> Finding | None:
    """Memcpy ≥ 10 % of the step, pageable copies included (pinning them makes them faster, not hidden: a copy on
    the compute stream still runs between the kernels); saving: the replay of the copies on a side stream. Says
    which direction dominates and where the copies are made (their launches' location)."""
    if not f.gpu:
        return None
    memcpy = breakdown(f.model).per_step["Memcpy"]
    mean = float(memcpy.mean()) if len(memcpy) else 0.0
    if f.share(mean) < 0.1:
        return None
    split, rows, top = E.copy_directions(f.model)
    parts = ", ".join(f"{label} {ms(split[d])}" for d, label in _DIRECTIONS if split.get(d, 0.0) > 0)
    where = locate_rows(f.model, rows) if len(rows) else Where()
    k = worst(memcpy)
    return Finding("copy_bound", f"Memory copies not hidden by kernels take {ms(mean)} of {ms(f.step_us)} per step "
                   f"({pct(f.share(mean))}){f'; by direction, {parts}' if parts else ''}{mostly_at(where)}",
                   _COPY_ADVICE.get(top, _COPY_ADVICE["HtoD"]), mean, ["fewer_copies"], DOCS["tuning"],
                   [trace_link(f, k, f"copies in {step_label(f, k)}", "Memcpy")], where=where,
                   change=fixes.overlap_copies(f.model))


def low_tensor_cores(f: Facts) -> Finding | None:
    """On compute capability ≥ 7.0: kernels of tensor-core-eligible operators (matmul, convolution, attention)
    that use no tensor cores ≥ 10 % of kernel time; saving: half their time (tensor cores at least double it).
    From Ampere on (8.0), fp32 operators whose GEMMs run on the CUDA cores mean TF32 is off: the finding says so
    and names ``allow_tf32``; it says where the operators are (their launches' location)."""
    cc = f.context["compute_capability"]
    if not f.gpu or not cc or float(cc) < 7.0:
        return None
    gap = E.tensor_core_gap(f.model)
    mean = float(gap.eligible.mean()) if len(gap.eligible) else 0.0
    if gap.share < 0.1 or mean <= 0:
        return None
    change = fixes.tensor_cores(f.model, f.context)
    rows = getattr(change, "rows", np.zeros(0, dtype=np.int64))  # the eligible kernels the change speeds up
    where = locate_rows(f.model, causes.host_rows(f.model, rows))
    tf32 = not f.uses("autocast") and float(cc) >= 8.0
    if f.uses("autocast"):
        advice = (f"{f.context['precision']} is in use, yet these operators' kernels use no tensor cores: check "
                  "that they run under autocast and that their sizes are multiples of 8.")
        suggests = ["tensor_core_shapes"]
    elif tf32:
        advice = ("Enable TF32: torch.backends.cuda.matmul.allow_tf32 = True (or "
                  "torch.set_float32_matmul_precision('high')) and torch.backends.cudnn.allow_tf32 = True; bf16 "
                  "mixed precision (torch.autocast(device_type='cuda', dtype=torch.bfloat16)) gains more.")
        suggests = ["tf32", "autocast"]
    else:
        advice = "Enable mixed precision (torch.autocast(device_type='cuda', dtype=torch.float16))."
        suggests = ["autocast"]
    off = "; fp32 matmuls and convolutions run on the CUDA cores: TF32 is off" if tf32 else ""
    return Finding("low_tensor_cores", f"{pct(gap.share)} of the kernel time is in matmul/convolution/attention "
                   f"kernels that use no tensor cores on {f.context['device']} (compute capability {cc}): "
                   f"{ms(mean)} per step{tensor_core_clause(f.model)}{off}{mostly_at(where)}", advice, mean / 2,
                   suggests, DOCS["amp"], [kernel_link("Kernels"), gpu_link("roofline", "roofline in GPU insights")],
                   where=where, change=change)


def _parallel_advice(f: Facts) -> tuple[str, list[str], str]:
    par = f.context["parallelism"]
    if par == "FSDP":
        return ("FSDP: prefetch the next all-gather (forward_prefetch=True, backward_prefetch=BACKWARD_PRE), shard "
                "within a node (HYBRID_SHARD), wrap fewer, larger units, or keep parameters gathered "
                "(reshard_after_forward=False) if memory allows.", ["fsdp_prefetch", "hybrid_shard"], DOCS["fsdp"])
    if par == "DDP":
        return ("DDP: compress gradients with a communication hook (bf16_compress_hook), tune bucket_cap_mb so "
                "all-reduces overlap the backward pass, or accumulate gradients with no_sync().",
                ["ddp_comm_hooks", "gradient_accumulation"], DOCS["ddp"])
    return ("Communicate less often (gradient accumulation, larger batches) and overlap collectives with compute.",
            ["gradient_accumulation"], DOCS["distributed"])


def straggler_wait(f: Facts) -> Finding | None:
    """Multi-rank: another rank is the straggler and this one waits for it (in collectives beyond the fastest
    rank's time, or blocked in host synchronisation: the union, each stall counted once, the Distributed view's
    ``wait_us``) ≥ 5 % of the step. Saving: the time the wait *stalls* this rank (``stalled_us`` of the
    Distributed view: no computation or transfer runs and the host is idle or blocked), not the whole wait: a
    collective that waits on the device while the host works ahead costs nothing until the host has to wait too."""
    job = f.job or {}
    other = job.get("straggler_rank")
    if other is None or other == job.get("rank"):
        return None
    collective, host = float(job["wait_us"]), float(job["host_wait_us"])
    # The host often blocks (cudaStreamSynchronize) on the very collective that waits on the device: one stall
    wait = min(float(job.get("stall_wait_us", max(collective, host))), f.step_us)
    if f.share(wait) < 0.05:
        return None
    stalled = min(float(job.get("stalled_us") or 0.0), wait)
    k = worst(E.communication(f.model))
    hidden = "" if stalled >= 0.9 * wait else (f"; it stalls this rank {ms(stalled)} per step "
                                               f"({pct(f.share(stalled))}), the rest is hidden behind this rank's "
                                               "own work")
    cause = job.get("own_cause") or {}
    why = f"; rank {other} spends {ms(float(cause['us']))} per step in {cause['text']}" if cause else ""
    parts = [p for p in (f"{ms(collective)} in collectives" if collective >= 1 else "",
                         f"{ms(host)} blocked in host synchronisation" if host >= 1 else "") if p]
    split = f" ({' and '.join(parts)}{', overlapping' if len(parts) == 2 else ''})" if parts else ""
    return Finding("straggler_wait", f"This rank waits {ms(wait)} of {ms(f.step_us)} per step ({pct(f.share(wait))}) "
                   f"for rank {other}, the straggler{split}{why}{hidden}", f"Speed up rank {other} (its Overview "
                   "says why it is slow); compressing or reordering this rank's communication would not shorten the "
                   "wait.", stalled,
                   ["fix_straggler"], DOCS["distributed"],
                   [distributed_link(other, f"rank {other} in Distributed"),
                    {"view": "Overview", "params": {"worker": job.get("straggler_worker")},
                     "label": f"rank {other}'s Overview"},
                    trace_link(f, k, f"collectives in {step_label(f, k)}", "nccl")],
                   change=fixes.faster_straggler(job))


def _collective_mix(f: Facts) -> str:
    """"12 allgather, 12 reducescatter (3.2 GB) per step": what the rank communicates, from its collectives."""
    col = collectives(f.model)
    n = max(find_steps(f.model).count, 1)
    if not len(col.name):
        return ""
    names, counts = np.unique(np.asarray(col.name, dtype=object), return_counts=True)
    parts = [f"{c / n:.0f} {name}" for name, c in sorted(zip(names.tolist(), counts.tolist()), key=lambda t: -t[1])[:3]]
    size = float(col.nbytes.sum()) / n
    return f" ({', '.join(parts)}{f', {size / 1e9:.2f} GB' if size >= 1e8 else ''} per step)"


def communication(f: Facts) -> Finding | None:
    """Communication not hidden by kernels ≥ 10 % of the step; saving: that time. On a multi-rank run whose
    collectives are matched across ranks, only the data transfer counts (``exposed_transfer_us``: the fastest
    rank's share of each collective, not overlapped with computation): waiting for a straggler is its own
    finding."""
    comm = E.communication(f.model)
    job = f.job or {}
    exposed = float(comm.mean()) if len(comm) else 0.0
    mean = min(float(job["exposed_transfer_us"]), exposed) if "exposed_transfer_us" in job else exposed
    if f.share(mean) < 0.1:
        return None
    advice, suggests, link = _parallel_advice(f)
    k = worst(comm)
    what = "FSDP's all-gathers and reduce-scatters" if f.context["parallelism"] == "FSDP" else "Communication"
    waits = float(job.get("wait_us") or 0.0)
    also = f"; beyond it, {ms(waits)} waiting for other ranks" if waits >= 0.05 * f.step_us else ""
    return Finding("communication_bound", f"{what}{_collective_mix(f)} move data {ms(mean)} of {ms(f.step_us)} "
                   f"per step ({pct(f.share(mean))}) not hidden by computation{also}", advice, mean, suggests, link,
                   [distributed_link(job.get("rank"), "Distributed view"),
                    trace_link(f, k, f"collectives in {step_label(f, k)}", "nccl")],
                   change=fixes.overlap_comm(f.model))


def own_cause_rows(f: Facts) -> np.ndarray:
    """On the straggler's own trace: the event rows of its own cause (the Python function, operator or kernel that
    the Distributed view found it spends more time in than the other ranks), names compared without addresses."""
    job = f.job or {}
    cause = job.get("own_cause") if job.get("straggler_rank") == job.get("rank") else None
    if not cause:
        return np.zeros(0, dtype=np.int64)
    ev = f.model["events"]
    want = cause["name"]
    match = f.model.codes_where(lambda s: _ADDRESS.sub("", s) == want)
    kinds = {"python": (Kind.PYTHON_FUNCTION,), "operator": (Kind.CPU_OP, Kind.USER_ANNOTATION),
             "kernel": (Kind.KERNEL,)}.get(cause["kind"], ())
    rows: np.ndarray = np.flatnonzero(isin_ints(ev["name"], match) & isin_ints(ev["kind"], kinds))
    return rows


def straggler(f: Facts) -> Finding | None:
    """Multi-rank: this rank is the straggler. Saving (for the job): the time the others' wait stalls them, at most
    what this rank does beyond them: its own cause's extra time (``distributed._own_cause``: the Python call,
    operator or kernel whose self time exceeds the others' the most), else its extra host idle time over theirs
    where that is above 0.5 ms (a sleep, I/O: what evening out removes; the rest of the others' stall, e.g. a
    pipeline's bubbles, is not this rank's extra). Names the cause and the user's frame that makes it."""
    job = f.job or {}
    if job.get("straggler_rank") is None or job.get("straggler_rank") != job.get("rank"):
        return None
    others = float(job["others_wait_us"])
    stalled = min(float(job.get("others_stalled_us") or others), others)
    idle = float(job.get("extra_idle_us") or 0.0)
    cause = job.get("own_cause")
    where = None
    change = fixes.even_out(f.model, idle) if idle > 500 else None
    if cause:
        stalled = min(stalled, float(cause["excess_us"]))
        rows = own_cause_rows(f)
        where = locate_rows(f.model, rows) if len(rows) else None
        change = cause_fixes.own_cause(f.model, rows, cause) if len(rows) else change
        why = (f"; it spends {ms(float(cause['us']))} per step in {cause['text']}, the other ranks "
               f"{ms(float(cause['others_us']))}")
        advice = (f"Take {cause['text']} out of the step, or make it cheaper: every rank waits for it. ")
    elif idle > 500:
        stalled = min(stalled, idle)
        why = (f"; its host has {ms(idle)} per step more time with no recorded activity (sleep, I/O, unprofiled "
               "work) than the others'")
        advice = ""
    else:
        why, advice = "", ""
    cost = "" if stalled >= 0.9 * others else f" (it stalls them {ms(stalled)})"
    return Finding("straggler", f"This rank is the straggler: the other ranks wait {ms(others)} per step for it"
                   f"{cost}{why}", advice + "Find what this rank does that the others do not (data, host work, a "
                   "slower device) and even it out; every rank gains the wait.", stalled, ["fix_straggler"],
                   DOCS["distributed"], [distributed_link(job.get("rank"), "Distributed view")], where=where,
                   change=change)


def diff_link(f: Facts, slow: int, fast: int) -> dict[str, Any]:
    """Open the Diff view on two steps of this trace: the fastest as the baseline, the slowest as the experiment,
    so what the slow step adds reads as a positive Δ."""
    names = find_steps(f.model).names
    return {"view": "Diff", "params": {"step": names[fast], "exp_step": names[slow]},
            "label": f"compare {step_label(f, slow)} (slowest) with {step_label(f, fast)} (fastest)"}


def outlier_steps(f: Facts) -> Finding | None:
    """Slowest step ≥ 1.3 × the median (≥ 3 steps); names the steps that are, by how much; saving:
    Σ (step − median)⁺ / steps (what the step average would lose if every step ran at the median)."""
    d = E.step_times(f.model)
    if len(d) < 3:
        return None
    median = float(np.median(d))
    slow, fast = int(np.argmax(d)), int(np.argmin(d))
    if median <= 0 or d[slow] < 1.3 * median:
        return None
    saving = float((d - median).clip(min=0.0).sum() / len(d))
    outliers = [int(i) for i in np.argsort(-d, kind="stable") if d[i] >= 1.3 * median]
    named = ", ".join(f"{step_label(f, i)} {ms(float(d[i]))} ({d[i] / median:.1f}×)" for i in outliers[:3])
    more = f" and {len(outliers) - 3} more" if len(outliers) > 3 else ""
    c = step_cause(f.model, slow)
    why, where = "", None
    if c is not None:
        where = locate_rows(f.model, c.rows)
        inner, api = api_name(c.name), where.api()
        what = (f"{api} ({inner})" if api and api != inner else inner) + (
            f" called at {short_frame(c.frame)}" if c.frame and c.frame != c.name else "")
        inside = f" inside '{where.annotation}'" if where.annotation else ""
        why = (f"; {step_label(f, slow)} spends {ms(c.slow_us)} in {what}{inside}, the other steps "
               f"{ms(c.usual_us)}")
    return Finding("outlier_steps", f"Step times vary: {len(outliers)} of {len(d)} steps take ≥ 1.3× the median "
                   f"{ms(median)}: {named}{more}; the fastest, {step_label(f, fast)}, {ms(float(d[fast]))}{why}",
                   "Compare the slowest step with the fastest to see what differs (data, synchronisation, a "
                   "collective, garbage collection, a checkpoint or evaluation every N steps).", saving, [],
                   DOCS["tuning"], [diff_link(f, slow, fast), trace_link(f, slow, f"slowest: {step_label(f, slow)}"),
                                    trace_link(f, fast, f"fastest: {step_label(f, fast)}")], cause=False,
                   where=where)


def memory_pressure(f: Facts) -> Finding | None:
    """Peak allocated > 90 % of a GPU's memory, or reserved ≥ 1.5 × allocated at peak while reserved > 50 % of
    it (fragmentation); no time saving (it is a risk and a limit on the batch size)."""
    cap = {f"GPU{d['id']}": d.get("memory_bytes") for d in devices(f.model) if d.get("memory_bytes")}
    for label, dev in memory_curve(f.model)["devices"].items():
        total = cap.get(label)
        if not total:
            continue
        alloc, reserved, t = dev["peak_allocated_bytes"], dev["peak_reserved_bytes"], dev["peak_time_us"]
        link = {"view": "Memory", "params": {"device": label, "start_us": t - 1000.0, "end_us": t + 1000.0},
                "label": f"peak on {label}"}
        gib = 2**30
        if alloc > 0.9 * total:
            ckpt = f.uses("activation_checkpointing")
            return Finding("memory_pressure", f"Memory on {label} peaks at {alloc / gib:.1f} GiB, "
                           f"{pct(alloc / total)} of its {total / gib:.1f} GiB", "Close to out-of-memory: " + (
                               "checkpoint more blocks, or lower precision frees memory." if ckpt else
                               "activation checkpointing or lower precision frees memory."), 0.0,
                           [] if ckpt else ["activation_checkpointing"], DOCS["memory"], [link], cause=False)
        if reserved > 0.5 * total and alloc > 0 and reserved >= 1.5 * alloc and not f.uses("expandable_segments"):
            return Finding("memory_pressure", f"The caching allocator on {label} reserves {reserved / gib:.1f} GiB "
                           f"for a peak of {alloc / gib:.1f} GiB allocated: fragmentation", "Set "
                           "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, or allocate tensors of steady sizes.",
                           0.0, ["expandable_segments"], DOCS["memory"], [link], cause=False)
    return None


def gpu_bound(f: Facts) -> Finding | None:
    """Kernels (the *Kernel* category: computation, collectives not) ≥ 80 % of the step: the kernels set the pace
    (no saving estimate: it depends on the kernels). Copies are not computation (a copy-bound step is *Copy-bound*),
    nor is a collective kernel, which may be waiting for another rank."""
    if not f.gpu:
        return None
    per = breakdown(f.model).per_step
    busy = f.share(float(per["Kernel"].mean()))
    if busy < 0.8:
        return None
    top = kernel_table(f.model)[:3]
    named = ", ".join(r["name"][:60] for r in top)
    waste, worst = waste_clause(f.model, find_steps(f.model).count)
    return Finding("gpu_bound", f"Kernels run {pct(busy)} of the step{waste}", f"The kernels set the pace: make them "
                   f"faster or do less work (top kernels: {named}).", 0.0, [], DOCS["tuning"],
                   [kernel_link("Kernels"), *(kernel_link(p["name"][:60], f'"{p["name"]}"') for p in worst[:1]),
                    gpu_link("roofline", "roofline in GPU insights")], fallback=True)


def cpu_compute(f: Facts) -> Finding | None:
    """CPU-only runs: host operators fill the step (no saving estimate)."""
    if f.gpu:
        return None
    share = E.host_busy_share(f.model)
    hot = E.hot_ops_in_gaps(f.model)
    named = ", ".join(f"{h.name} ({ms(h.gap_us)})" for h in hot)
    suggests = ["threads", "larger_batch"] + ([] if f.uses("torch_compile") else ["torch_compile"])
    advice = "Use more intra-op threads (torch.set_num_threads), larger batches"
    advice += "." if f.uses("torch_compile") else ", or torch.compile the model."
    return Finding("cpu_compute", f"CPU only: operators run {pct(share)} of the step"
                   + (f"; the heaviest: {named}" if named else ""), advice, 0.0, suggests, DOCS["tuning"],
                   [operator_link(h.name) for h in hot], fallback=True)


RULES: tuple[Callable[[Facts], Finding | None], ...] = (
    input_bound, cpu_tensor_creation, cpu_bound, launch_bound, sync_bound, pageable_copies, copy_bound,
    low_tensor_cores, straggler_wait, communication, straggler, outlier_steps, memory_pressure, gpu_bound, cpu_compute)
