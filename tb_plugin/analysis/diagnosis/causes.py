"""Evidence for the root-cause rules (``rules_causes.py``): what in the step produces a symptom, from what the trace
shows. One small function per cause, each returning the event rows it found (what a what-if change would drop,
scale or replace), numbers per step and the GPU-idle time it *claims*: ``claimed`` unions those, and the symptom
measures (``evidence.host_gap``, the launch overhead) leave it out, so each idle microsecond is charged once and the
cause, not its symptom, carries it.

- Caching-allocator churn: ``cudaMalloc``/``cudaFree`` (and their driver, virtual-memory and HIP forms) inside the
  steps. ``cudaFree`` waits for the device like a sync, so a free entered while the GPU works drains its queue.
- Compilation inside steps: TorchDynamo/Inductor compile events (``… (dynamo_timed)``) and the compile ids of
  ``Torch-Compiled Region: <frame>/<compile>`` (a new id is a new graph: a recompile, or a graph break's frame).
- Activation-checkpointing recompute: forward operators (``aten::linear``, ``conv2d``, ``layer_norm``, …, which a
  backward function never calls) running inside autograd's ``evaluate_function`` nodes.
- Optimizer kernels: the device work launched inside ``Optimizer.step#<Class>.step``, and how the optimizer is
  implemented (``_fused_*`` ops: fused; ``_foreach_*``: foreach; else a per-parameter loop).
- Host-side augmentation: host operators that compute on the CPU (no device call in their subtree, tensor creation
  and the DataLoader aside) and Python frames of image/array libraries, on the threads that run the steps.
- CUDA-graph replays: kernels launched by ``cudaGraphLaunch`` (never "launched one by one").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ...model import intervals as iv
from ...model.arrays import isin_ints, take
from ...model.derived import memoized
from ...model.kinds import DEVICE_KINDS, Kind
from ...model.lookups import side_row, tree_node_of_row
from ...model.names import name_mask, step_mask
from ...model.optree import HostTree, host_tree, launch_rows
from ...model.tables import TraceModel
from ..communication import collectives
from ..launches import device_work
from ..python_frames import python_frames
from ..steps import find_steps
from ..whatif.constants import HEURISTIC_PLAN_US
from .gpu_time import gpu_idle, spans
from .host_only import loader_intervals
from .location import main_threads
from .sync_cost import _bubbles, sync_cost

PerStep = np.ndarray

_ALLOC = re.compile(r"^(?:cudaMalloc|cudaFree|cudaMallocAsync|cudaFreeAsync|cuMemAlloc(?:_v2)?|cuMemFree(?:_v2)?|"
                    r"cuMemCreate|cuMemMap|cuMemUnmap|cuMemRelease|cuMemAddressReserve|cuMemAddressFree|"
                    r"hipMalloc|hipFree|hipExtMallocWithFlags|cudaHostAlloc|cudaMallocHost|cudaFreeHost|"
                    r"hipHostMalloc|hipHostFree)$")
_RELEASE = re.compile(r"Free|Unmap|Release")
_COMPILE = re.compile(r" \(dynamo_timed\)$")
_REGION = re.compile(r"^Torch-Compiled Region: \[?(!?\d+)/(\d+)")
_RESUME = re.compile(r"torch_dynamo_resume_in_")
_GRAPH_LAUNCH = re.compile(r"^(?:cudaGraphLaunch|cuGraphLaunch|hipGraphLaunch)")
_BACKWARD = "autograd::engine::evaluate_function: "
# Forward operators: composite ops that user code calls and no backward function does (their gradients call
# mm, convolution_backward, native_layer_norm_backward, threshold_backward, …).
_FORWARD = re.compile(r"^aten::(?:linear|conv[123]d|conv_transpose[123]d|layer_norm|group_norm|batch_norm|"
                      r"instance_norm|rms_norm|embedding|scaled_dot_product_attention|dropout|matmul|gelu|silu|"
                      r"relu|softmax|log_softmax|einsum|bmm|baddbmm|addmm)$")
_CHECKPOINT = re.compile(r"CheckpointFunction|torch/utils/checkpoint\.py")
_OPTIMIZER = re.compile(r"^Optimizer\.step#(\w+)\.step$")
# Python libraries that transform samples on the host (when called outside the DataLoader, on the main thread).
_AUGMENT = re.compile(r"^(?:.*/)?(?:torchvision/transforms|PIL|numpy|cv2|albumentations|skimage|scipy/ndimage|"
                      r"imgaug|torchaudio/transforms)/")
# Not augmentation: tensor creation (its own finding), and what only makes a view or reads a scalar.
_NOT_COMPUTE = re.compile(r"^aten::(?:normal_|uniform_|randn|rand|randint|randperm|random_|bernoulli_|exponential_|"
                          r"multinomial|randn_like|rand_like|arange|linspace|full|ones|zeros|eye|empty|"
                          r"empty_strided|empty_like|zeros_like|ones_like|full_like|resize_|set_|lift_fresh|detach|"
                          r"view|as_strided|_reshape_alias|alias|t|transpose|permute|unsqueeze|squeeze|select|slice|"
                          r"expand|reshape|flatten|unbind|split|chunk|narrow|item|_local_scalar_dense|is_nonzero|"
                          r"pin_memory|_pin_memory)$")


def step_of(model: TraceModel, ts: np.ndarray) -> np.ndarray:
    """The step each time lies in, -1 outside every step."""
    steps = find_steps(model)
    k = np.searchsorted(steps.start, ts, side="right") - 1
    inside = (k >= 0) & (ts < take(steps.end, k, -np.inf))
    return np.where(inside, k, -1)


def per_step(model: TraceModel, intervals: iv.Intervals) -> PerStep:
    steps = find_steps(model)
    return iv.lengths_within(intervals, steps.start, steps.end)


def _rows_spans(model: TraceModel, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    ev = model["events"]
    start = ev["ts"][rows].astype(np.float64)
    return start, start + np.nan_to_num(ev["dur"][rows], nan=0.0).clip(min=0.0)


def below(tree: HostTree, mask: np.ndarray) -> np.ndarray:
    """Per host-tree node: is it, or one of its ancestors, in ``mask`` (one pass per tree level)."""
    out: np.ndarray = np.asarray(mask, dtype=bool).copy()
    for at in tree.levels[1:]:
        out[at] |= out[tree.parent[at]]
    return out


# ------------------------------------------------------------------------------------------- caching allocator

@dataclass(frozen=True)
class Allocator:
    rows: np.ndarray  # allocator calls inside steps
    releases: np.ndarray  # of them, the frees (cudaFree, cuMemUnmap, …)
    outside_ops: int  # frees made outside any operator (torch.cuda.empty_cache(), gc of a memory limit)
    time: PerStep  # host time in the calls
    steps_with: int  # steps that make any
    claimed: iv.Intervals  # GPU idle during the calls and after a free that drained the queue


@memoized
def allocator_calls(model: TraceModel) -> Allocator:
    ev = model["events"]
    tree = host_tree(model)
    nodes = np.flatnonzero(isin_ints(tree.kind, (Kind.RUNTIME, Kind.DRIVER))
                           & name_mask(model, ev["name"][tree.rows], lambda s: _ALLOC.match(s) is not None))
    step = step_of(model, tree.start[nodes])
    nodes, step = nodes[step >= 0], step[step >= 0]
    rows = tree.rows[nodes]
    release = name_mask(model, ev["name"][rows], lambda s: _RELEASE.search(s) is not None)
    start, end = _rows_spans(model, rows)
    calls = iv.union(start, end)
    drained = _bubbles(model, rows[release], start[release], end[release])
    claimed = iv.intersect(iv.union(np.concatenate([calls[0], drained[0]]), np.concatenate([calls[1], drained[1]])),
                           gpu_idle(model))
    return Allocator(rows=rows, releases=rows[release], outside_ops=int((tree.op_of[nodes][release] < 0).sum()),
                     time=per_step(model, calls), steps_with=len(np.unique(step)), claimed=claimed)


def allocator_shapes(model: TraceModel, rows: np.ndarray) -> tuple[str | None, int, int]:
    """The operator that allocates most often, how many distinct input shapes its allocating calls have, and how
    many such calls there are (shapes that change every step allocate new blocks every step)."""
    tree = host_tree(model)
    op = take(tree.op_of, tree_node_of_row(model)[rows], -1)
    op = op[op >= 0]
    if not len(op):
        return None, 0, 0
    names = model["events"]["name"][tree.rows[op]]
    codes, counts = np.unique(names, return_counts=True)
    top = int(codes[np.argmax(counts)])
    mine = np.unique(op[names == top])
    dims = take(model["ops"]["input_dims"], side_row(model, "ops")[tree.rows[mine]], -1)
    return model.strings[top], len(np.unique(dims[dims >= 0])), len(mine)


# ------------------------------------------------------------------------------------ gradient accumulation

_DDP_FORWARD = "DistributedDataParallel.forward"
# The DDP reducer's own work in a syncing backward: scaling each gradient into its bucket before the all-reduce
# (``reducer::mul_out``) and copying the reduced bucket back into the gradients (``copy_bucket_to_grad``). Under
# ``no_sync()`` neither runs: the gradients accumulate in place.
_DDP_REDUCER = re.compile(r"^torch(?:::|\.)distributed(?:::|\.)(?:ddp\.)?reducer::")


@dataclass(frozen=True)
class AccumulationSyncs:
    passes: np.ndarray  # per step: DDP forward passes (micro-batches)
    syncing: np.ndarray  # per step: of them, those whose backward all-reduces
    rows: np.ndarray  # the all-reduce kernels of every syncing pass but the step's last: what no_sync() removes
    reducer: np.ndarray  # the DDP reducer's operators (bucket scaling, copy-back) of those passes: no_sync() skips them
    nbytes: float  # their bytes per step
    time: PerStep  # their device time


@memoized
def accumulation_syncs(model: TraceModel) -> AccumulationSyncs:
    """Gradient accumulation under DistributedDataParallel without ``no_sync()``: a step runs several DDP forward
    passes (``DistributedDataParallel.forward``: the micro-batches), and the backward of more than one of them
    all-reduces (each all-reduce is counted to the last DDP forward issued before it). Only the last micro-batch's
    gradients need reducing: the all-reduces of the others are what ``no_sync()`` removes."""
    ev = model["events"]
    n = find_steps(model).count
    fwd = np.flatnonzero((ev["kind"] == Kind.USER_ANNOTATION) & name_mask(model, ev["name"],
                                                                          lambda t: t == _DDP_FORWARD))
    fwd = fwd[_on(ev["pid"][fwd], ev["tid"][fwd], main_threads(model))]
    starts = np.sort(ev["ts"][fwd].astype(np.float64))
    starts = starts[step_of(model, starts) >= 0]
    col = collectives(model)
    ar = np.flatnonzero((np.asarray(col.name, dtype=object) == "allreduce") & ~np.asarray(col.on_host, dtype=bool))
    ar = ar[np.isfinite(col.issued[ar])]
    owner = np.searchsorted(starts, col.issued[ar], side="right") - 1
    step = step_of(model, col.issued[ar])
    ok = (owner >= 0) & (step >= 0)
    ar, owner, step = ar[ok], owner[ok], step[ok]
    passes = np.bincount(step_of(model, starts), minlength=n)[:n] if n else np.zeros(0, np.int64)
    last = np.full(max(n, 1), -1)
    np.maximum.at(last, step, owner)
    distinct = np.unique(np.stack([step, owner], axis=1), axis=0) if len(ar) else np.zeros((0, 2), np.int64)
    syncing = np.bincount(distinct[:, 0], minlength=n)[:n] if n else np.zeros(0, np.int64)
    extra = ar[owner != last[step]]
    rows = np.asarray(col.row)[extra]
    lo, hi = col.start[extra], col.end[extra]
    return AccumulationSyncs(passes=passes, syncing=syncing, rows=rows, reducer=_reducer_ops(model, starts, last),
                             nbytes=float(np.asarray(col.nbytes)[extra].sum()) / max(n, 1),
                             time=per_step(model, iv.union(lo, hi)))


def _reducer_ops(model: TraceModel, starts: np.ndarray, last: np.ndarray) -> np.ndarray:
    """Event rows of the DDP reducer's operators (outermost) counted, like the all-reduces, to the last DDP forward
    issued before them, in every pass of a step but the last syncing one."""
    tree = host_tree(model)
    ev = model["events"]
    names = ev["name"][tree.rows]
    ops = (tree.kind == Kind.CPU_OP) & name_mask(model, names, lambda s: _DDP_REDUCER.match(s) is not None)
    ops &= ~take(ops, tree.parent, False).astype(bool)
    node = np.flatnonzero(ops)
    at = tree.start[node]
    owner = np.searchsorted(starts, at, side="right") - 1
    step = step_of(model, at)
    ok = (owner >= 0) & (step >= 0) & (step < len(last))
    node, owner, step = node[ok], owner[ok], step[ok]
    keep = (last[step] >= 0) & (owner != last[step])
    out: np.ndarray = tree.rows[node[keep]]
    return out


# ------------------------------------------------------------------------------------------- reading values back

# A value read back to the host: the Python calls (with_stack) and the operators that copy a GPU tensor to the host.
_READ_PY = re.compile(r"^<built-in method (?:item|tolist|cpu|numpy) of |^<built-in function print>$")
_READ_OP = ("aten::item", "aten::_local_scalar_dense")


@dataclass(frozen=True)
class ReadBacks:
    start: np.ndarray  # per block: the first read's start (blocks: reads with only Python between them)
    end: np.ndarray  # per block: the last read's end
    reads: np.ndarray  # per block: how many reads (operators and Python calls, outermost)
    time: PerStep  # host time in the blocks
    printing: bool  # a print() is among them


@memoized
def readbacks(model: TraceModel) -> ReadBacks:
    """Blocks of host code that read GPU values back (``.item()``, ``.cpu()``, ``.tolist()``, ``.numpy()``: an
    operator that copies device to host) and print them: consecutive reads on a step's thread with nothing between
    them but Python (no operator starts, no launch: formatting the values, a loop over the samples), at least one a
    device-to-host copy. Keeping the values on the GPU (accumulating them in a device tensor, reading them every N
    steps) removes the whole block, the Python that formats them and the sync in it."""
    ev = model["events"]
    tree = host_tree(model)
    work = device_work(model)
    copies = (work.kind == Kind.MEMCPY) & name_mask(model, work.name, lambda t: "DtoH" in t)
    d2h = np.zeros(tree.size, dtype=bool)
    d2h[tree.device_op[copies & (tree.device_op >= 0)]] = True
    threads = main_threads(model)
    op = (tree.kind == Kind.CPU_OP) & ~tree.merged & _on(ev["pid"][tree.rows], ev["tid"][tree.rows], threads)
    read_op = op & _holds(tree, d2h)
    read_op &= ~take(below(tree, read_op), tree.parent, False).astype(bool)
    py = np.flatnonzero((ev["kind"] == Kind.PYTHON_FUNCTION) & name_mask(
        model, ev["name"], lambda t: _READ_PY.match(t) is not None))
    py = py[_on(ev["pid"][py], ev["tid"][py], threads)]
    py_lo, py_hi = _rows_spans(model, py)
    printing = name_mask(model, ev["name"][py], lambda t: t == "<built-in function print>")
    lo = np.concatenate([tree.start[read_op], py_lo])
    hi = np.concatenate([tree.end[read_op], py_hi])
    lo, hi = iv.union(lo, hi)
    lo, hi = lo[step_of(model, lo) >= 0], hi[step_of(model, lo) >= 0]
    syncs = np.sort(tree.start[read_op])
    syncing = np.searchsorted(syncs, hi, side="left") > np.searchsorted(syncs, lo, side="left")
    # a gap joins two reads when no operator starts in it and no launch (the code between them only formats)
    other = np.sort(np.concatenate([tree.start[op], work.launch_start[np.isfinite(work.launch_start)]]))
    gap_ops = np.searchsorted(other, lo[1:], side="left") - np.searchsorted(other, hi[:-1], side="right")
    step = step_of(model, lo)
    joined = (gap_ops <= 0) & (step[1:] == step[:-1])
    if not len(lo):
        return ReadBacks(start=lo, end=hi, reads=np.zeros(0, np.int64), time=per_step(model, iv.EMPTY),
                         printing=False)
    first = np.flatnonzero(np.concatenate([[True], ~joined]))
    real = np.add.reduceat(syncing.astype(np.int64), first) > 0
    reads = np.diff(np.concatenate([first, [len(lo)]]))
    start, end = lo[first][real], np.maximum.reduceat(hi, first)[real]
    return ReadBacks(start=start, end=end, reads=reads[real], time=per_step(model, iv.union(start, end)),
                     printing=bool(printing.any()))


# ------------------------------------------------------------------------------------------------ compilation

@dataclass(frozen=True)
class Compiles:
    rows: np.ndarray  # outermost compile events inside steps
    time: PerStep  # host time compiling
    steps_with: int
    regions: int  # distinct compiled graphs (``Torch-Compiled Region`` compile ids) run inside the steps
    new_regions: int  # of them, compiled inside the profiled window (first seen inside a step, after the first step)
    frames: int  # distinct compiled frames per step (more than one: graph breaks or several compiled functions)
    resumes: bool  # Python frames of Dynamo's resume functions (``torch_dynamo_resume_in_…``): graph breaks
    claimed: iv.Intervals


@memoized
def compile_events(model: TraceModel) -> Compiles:
    ev = model["events"]
    tree = host_tree(model)
    names = ev["name"][tree.rows]
    is_compile = isin_ints(tree.kind, (Kind.CPU_OP, Kind.USER_ANNOTATION)) & name_mask(
        model, names, lambda s: _COMPILE.search(s) is not None)
    outer = is_compile & ~take(below(tree, is_compile), tree.parent, False).astype(bool)
    nodes = np.flatnonzero(outer)
    step = step_of(model, tree.start[nodes])
    nodes = nodes[step >= 0]
    compiling = iv.union(tree.start[nodes], tree.end[nodes])
    regions, new, frames = _regions(model, tree)
    py_names = np.unique(ev["name"][model["python"]["row"]])
    resumes = any(_RESUME.search(model.strings[int(c)]) for c in py_names.tolist())
    return Compiles(rows=tree.rows[nodes], time=per_step(model, compiling), steps_with=len(np.unique(step[step >= 0])),
                    regions=regions, new_regions=new, frames=frames, resumes=resumes,
                    claimed=iv.intersect(compiling, gpu_idle(model)))


# The compiled code's wrappers: Dynamo's frame conversion, a compiled region, and AOT Autograd's forward and backward
# functions. Where a compile runs inside one, everything in it but the compiled graph's own call is first-call work.
_WRAPPER = re.compile(r"^(?:dynamo|Torch-Compiled Region: .*|CompiledFunction|CompiledFunctionBackward)$")
_GRAPH_CALL = re.compile(r"^## Call CompiledFxGraph ")


def _holds(tree: HostTree, mask: np.ndarray) -> np.ndarray:
    """Per host-tree node: is it, or one of its descendants, in ``mask`` (one pass per tree level, bottom up, over
    the tree's levels as it sorted them once)."""
    out: np.ndarray = np.asarray(mask, dtype=bool).copy()
    for level in reversed(tree.levels):
        out[tree.parent[level[out[level]]]] = True
    return out


@memoized
def compile_overhead(model: TraceModel) -> iv.Intervals:
    """The host time a step that compiles spends on compiling, which a step that reuses its graph does not: the
    compile events (``… (dynamo_timed)``: Dynamo, AOT Autograd, Inductor, Inductor's first-call autotuning) and, in a
    compiled wrapper that compiles (``dynamo``, ``Torch-Compiled Region``, ``CompiledFunction``,
    ``CompiledFunctionBackward``), all but the compiled graph's own call (``## Call CompiledFxGraph``: what a cached
    graph runs). Guard checks of a reused graph cost tens of µs (the wrappers outside their graph's call in a run
    that reuses its graphs), so dropping the whole wrapper misstates little."""
    ev = model["events"]
    tree = host_tree(model)
    names = ev["name"][tree.rows]
    c = compile_events(model)
    compiling = np.isin(tree.rows, c.rows)
    wrapper = isin_ints(tree.kind, (Kind.CPU_OP, Kind.USER_ANNOTATION)) & name_mask(
        model, names, lambda s: _WRAPPER.match(s) is not None) & _holds(tree, compiling)
    wrapper &= step_of(model, tree.start) >= 0
    call = below(tree, wrapper) & name_mask(model, names, lambda s: _GRAPH_CALL.match(s) is not None)
    call &= ~_holds(tree, compiling)  # a graph's first call that autotunes is compile work
    keep = iv.union(tree.start[call], tree.end[call])
    dropped = iv.subtract(iv.union(tree.start[wrapper], tree.end[wrapper]), keep)
    own = iv.union(*_rows_spans(model, c.rows))
    return iv.union(np.concatenate([dropped[0], own[0]]), np.concatenate([dropped[1], own[1]]))


def _regions(model: TraceModel, tree: HostTree) -> tuple[int, int, int]:
    """Distinct compile ids run inside the steps, those first seen after the first step began, and the most
    distinct compiled frames one step runs."""
    ev = model["events"]
    nodes = np.flatnonzero((tree.kind == Kind.CPU_OP) & name_mask(model, ev["name"][tree.rows],
                                                                  lambda s: _REGION.match(s) is not None))
    step = step_of(model, tree.start[nodes])
    if not len(nodes) or not (step >= 0).any():
        return 0, 0, 0
    text = {int(c): _REGION.match(model.strings[int(c)]) for c in np.unique(ev["name"][tree.rows[nodes]]).tolist()}
    ids = [text[int(c)] for c in ev["name"][tree.rows[nodes]].tolist()]
    first: dict[tuple[str, str], int] = {}
    for m, k in zip(ids, step.tolist()):
        assert m is not None
        key = (m.group(1), m.group(2))
        first.setdefault(key, k)
    inside = {key for key, k in first.items() if k >= 0}
    frames_per_step = [len({m.group(1) for m, s in zip(ids, step.tolist()) if s == k and m is not None})
                       for k in sorted(set(step.tolist()) - {-1})]
    return len(inside), sum(1 for k in first.values() if k >= 1), max(frames_per_step, default=0)


# ------------------------------------------------------------------------------------- checkpointing recompute

@dataclass(frozen=True)
class Recompute:
    rows: np.ndarray  # forward operators run inside backward (outermost)
    device_rows: np.ndarray  # the device events they launched
    time: PerStep  # their device time (union)
    explicit: bool  # checkpointing is named in the trace (CheckpointFunctionBackward, torch/utils/checkpoint.py)
    names: list[str]  # the operators, most device time first


@memoized
def recompute(model: TraceModel) -> Recompute:
    ev = model["events"]
    tree = host_tree(model)
    names = ev["name"][tree.rows]
    op = (tree.kind == Kind.CPU_OP) & ~tree.merged
    in_backward = below(tree, op & name_mask(model, names, lambda s: s.startswith(_BACKWARD)))
    forward = op & in_backward & name_mask(model, names, lambda s: _FORWARD.match(s) is not None)
    roots = forward & ~take(below(tree, forward), tree.parent, False).astype(bool)
    under = below(tree, roots)
    dev = model["device_events"]
    launched = take(under, tree.device_op, False).astype(bool) & (tree.device_op >= 0)
    rows = dev["row"][launched]
    explicit = bool(name_mask(model, names, lambda s: _CHECKPOINT.search(s) is not None).any()
                    or name_mask(model, ev["name"][model["python"]["row"]],
                                 lambda s: _CHECKPOINT.search(s) is not None).any())
    start, end = _rows_spans(model, rows)
    time = per_step(model, iv.union(start, end))
    nodes = np.flatnonzero(roots)
    weight = np.zeros(tree.size)
    np.add.at(weight, tree.device_op[launched], end - start)
    by = np.bincount(np.searchsorted(np.unique(names[nodes]), names[nodes]), weights=weight[nodes]) if len(nodes) \
        else np.zeros(0)
    order = np.argsort(-by)
    codes = np.unique(names[nodes])
    return Recompute(rows=tree.rows[nodes], device_rows=rows, time=time, explicit=explicit,
                     names=[model.strings[int(codes[i])] for i in order.tolist()])


_CKPT_FRAME = re.compile(r"^torch/utils/checkpoint\.py\(\d+\): ")
_CKPT_ENTRY = re.compile(r"^torch/utils/checkpoint\.py\(\d+\): checkpoint$")


@memoized
def checkpoint_overhead(model: TraceModel) -> iv.Intervals:
    """The host time of ``torch.utils.checkpoint``'s own machinery, from the Python frames (``with_stack``): the
    outermost ``torch/utils/checkpoint.py`` frames (``checkpoint`` in the forward: device states, RNG state, the
    saved-tensor hooks; ``unpack_hook`` in the backward: the recompute and its bookkeeping) less the checkpointed
    function's own call in the forward (its direct child frames that are not checkpoint.py's: what runs without
    checkpointing too). Empty without Python frames."""
    ev = model["events"]
    py = model["python"]
    rows = py["row"]
    if not len(rows):
        return iv.EMPTY
    names = ev["name"][rows]
    frame = name_mask(model, names, lambda t: _CKPT_FRAME.match(t) is not None)
    ids = py["python_id"]
    parent_frame = np.isin(py["parent_id"], ids[frame])
    outer = frame & ~parent_frame
    entry = frame & name_mask(model, names, lambda t: _CKPT_ENTRY.match(t) is not None)
    kept = np.isin(py["parent_id"], ids[entry]) & ~frame & ~name_mask(
        model, names, lambda t: t == "<built-in function next>")
    lo, hi = _rows_spans(model, rows[outer])
    keep = iv.union(*_rows_spans(model, rows[kept]))
    out: iv.Intervals = iv.subtract(iv.union(lo, hi), keep)
    return out


# ------------------------------------------------------------------------------------------------ optimizer

@dataclass(frozen=True)
class OptimizerWork:
    name: str | None  # the optimizer class (AdamW)
    rows: np.ndarray  # the Optimizer.step annotations inside steps
    op_rows: np.ndarray  # the outermost operators inside them (per-parameter or foreach dispatch)
    device_rows: np.ndarray  # kernels, copies and sets launched inside them
    kernels: float  # per step
    kernel_time: PerStep
    implementation: str  # fused, foreach, compiled, per-parameter
    claimed: iv.Intervals  # GPU idle inside the optimizer's device span (its launch gaps)


@memoized
def optimizer_work(model: TraceModel) -> OptimizerWork:
    ev = model["events"]
    tree = host_tree(model)
    names = ev["name"][tree.rows]
    ann = (tree.kind == Kind.USER_ANNOTATION) & name_mask(model, names, lambda s: _OPTIMIZER.match(s) is not None)
    nodes = np.flatnonzero(ann)
    nodes = nodes[step_of(model, tree.start[nodes]) >= 0]
    under = below(tree, np.isin(np.arange(tree.size), nodes))
    dev = model["device_events"]
    launched = take(under, tree.device_op, False).astype(bool) & (tree.device_op >= 0)
    rows = dev["row"][launched]
    is_op = under & (tree.kind == Kind.CPU_OP) & ~tree.merged
    outer_ops = np.flatnonzero(is_op & ~take(is_op, tree.parent, False).astype(bool))
    ops = np.unique(names[is_op])
    texts = [model.strings[int(c)] for c in ops.tolist()]
    kind = ("fused" if any(t.startswith("aten::_fused_") for t in texts) else
            "compiled" if any(t.startswith("triton_") or t.startswith("Torch-Compiled") for t in texts) else
            "foreach" if any(t.startswith("aten::_foreach_") for t in texts) else "per-parameter")
    start, end = _rows_spans(model, rows)
    kernels = ev["kind"][rows] == Kind.KERNEL
    n = max(find_steps(model).count, 1)
    step = step_of(model, start)
    lo = np.full(n, np.inf)
    hi = np.full(n, -np.inf)
    np.minimum.at(lo, step[step >= 0], start[step >= 0])
    np.maximum.at(hi, step[step >= 0], end[step >= 0])
    span = iv.union(lo[np.isfinite(lo)], hi[np.isfinite(lo)])
    match = _OPTIMIZER.match(model.strings[int(names[nodes[0]])]) if len(nodes) else None
    return OptimizerWork(name=match.group(1) if match else None, rows=tree.rows[nodes],
                         op_rows=tree.rows[outer_ops], device_rows=rows,
                         kernels=float(kernels.sum()) / n, kernel_time=per_step(model, iv.union(start, end)),
                         implementation=kind, claimed=iv.intersect(span, gpu_idle(model)))


# ------------------------------------------------------------------------------------------- host augmentation

@dataclass(frozen=True)
class HostCompute:
    rows: np.ndarray  # host operators computing on the CPU, and Python frames of augmentation libraries
    libraries: bool  # any of them is an augmentation library's frame
    claimed: iv.Intervals  # GPU idle while they run
    time: PerStep


@memoized
def host_compute(model: TraceModel) -> HostCompute:
    ev = model["events"]
    tree = host_tree(model)
    threads = main_threads(model)
    device = below_device(model)
    names = ev["name"][tree.rows]
    parent_op = take(tree.op_of, tree.parent, -1)
    ops = (tree.kind == Kind.CPU_OP) & ~tree.merged & (parent_op < 0) & ~device
    ops &= ~name_mask(model, names, lambda s: _NOT_COMPUTE.match(s) is not None or s.startswith("enumerate(Data"))
    ops &= _on(ev["pid"][tree.rows], ev["tid"][tree.rows], threads)
    op_rows = tree.rows[np.flatnonzero(ops)]
    f = python_frames(model)
    lib = name_mask(model, f.name, lambda s: _AUGMENT.match(s) is not None) & _on(f.pid, f.tid, threads)
    lib &= ~take(lib, f.parent, False).astype(bool)  # outermost library frames
    frame_rows = f.rows[lib]
    rows = np.concatenate([op_rows, frame_rows])
    rows = rows[step_of(model, ev["ts"][rows]) >= 0]
    start, end = _rows_spans(model, rows)
    work = iv.subtract(iv.union(start, end), loader_intervals(model))
    steps = find_steps(model)
    work = iv.intersect(work, iv.union(steps.start, steps.end))
    return HostCompute(rows=rows, libraries=bool(len(frame_rows)), claimed=iv.intersect(work, gpu_idle(model)),
                       time=per_step(model, work))


def _on(pid: np.ndarray, tid: np.ndarray, threads: tuple[tuple[int, int], ...]) -> np.ndarray:
    mask = np.zeros(len(pid), dtype=bool)
    for p, t in threads:
        mask |= (pid == p) & (tid == t)
    return mask


@memoized
def below_device(model: TraceModel) -> np.ndarray:
    """Per host-tree node: does its subtree make a runtime or driver call (launch, copy, sync, allocation)? One pass
    per tree level, the deepest first."""
    tree = host_tree(model)
    device = isin_ints(tree.kind, (Kind.RUNTIME, Kind.DRIVER))
    for at in reversed(tree.levels[1:]):
        device[tree.parent[at[device[at]]]] = True
    return device


# ------------------------------------------------------------------------------------------------ cuDNN

_CONV = re.compile(r"^aten::(?:cudnn_convolution|cudnn_convolution_transpose|miopen_convolution|"
                   r"miopen_convolution_transpose|convolution_backward|cudnn_convolution_relu|"
                   r"cudnn_convolution_add_relu)$")
_SYNC = re.compile(r"^(?:cudaEventSynchronize|cudaStreamSynchronize|cudaDeviceSynchronize|hipEventSynchronize|"
                   r"hipStreamSynchronize|hipDeviceSynchronize)$")
# Autotuning (``torch.backends.cudnn.benchmark``) times candidate algorithms: the convolution call synchronises
# with the device (cudaEventSynchronize between candidates), which a convolution never does in steady state, and
# runs many distinct compute kernels (in steady state at most ~8: a non-fused Winograd backward runs four for the
# weight gradient and up to four for the data gradient; layout conversions, workspace set-up and reductions aside).
TUNE_KERNELS = 10
_HELPER_KERNEL = re.compile(r"nchwToNhwc|nhwcToNchw|init_device_workspace|Memset|memset|[Rr]educe|convert|"
                            r"[Tt]ranspose|fill|Memcpy")


@dataclass(frozen=True)
class Convolutions:
    time: PerStep  # device time of the kernels convolution operators launched
    tuning_rows: np.ndarray  # convolution calls inside steps that try algorithms (cudnn.benchmark autotuning)
    tuning_steps: int  # steps with such calls
    tuning_extra: PerStep  # their device time beyond their last kernel (the algorithm finally used)
    tuning_extra_rows: np.ndarray  # those kernels
    tuning_syncs: np.ndarray  # the syncs inside the tuning calls
    tuned: bool  # autotuning shows anywhere in the trace (so cudnn.benchmark is on)
    shapes: int  # distinct input shapes of the convolution calls inside steps
    calls: int  # convolution calls inside steps


@memoized
def convolutions(model: TraceModel) -> Convolutions:
    ev = model["events"]
    tree = host_tree(model)
    names = ev["name"][tree.rows]
    conv = (tree.kind == Kind.CPU_OP) & ~tree.merged & name_mask(model, names, lambda s: _CONV.match(s) is not None)
    inner = conv & ~np.isin(np.arange(tree.size), tree.parent[conv])  # a conv op calling none
    nodes = np.flatnonzero(inner)
    dev = model["device_events"]
    op = tree.device_op
    under = below(tree, inner)
    # each device event's conv call: its launching operator, or the conv op above it
    conv_of = _nearest(tree, inner)
    owner = take(conv_of, op, -1)
    mine = owner >= 0
    rows = dev["row"][mine]
    start, end = _rows_spans(model, rows)
    compute = mine & ~name_mask(model, ev["name"][dev["row"]], lambda s: _HELPER_KERNEL.search(s) is not None)
    pairs = np.unique(np.stack([owner[compute], ev["name"][dev["row"][compute]]], axis=1), axis=0)
    kernels = np.bincount(pairs[:, 0], minlength=tree.size) if len(pairs) else np.zeros(tree.size, np.int64)
    syncs = np.flatnonzero(isin_ints(tree.kind, (Kind.RUNTIME, Kind.DRIVER)) & under
                           & name_mask(model, names, lambda s: _SYNC.match(s) is not None))
    tuning = (kernels >= TUNE_KERNELS) & inner
    tuning[take(conv_of, syncs, -1)[take(conv_of, syncs, -1) >= 0]] = True
    step = step_of(model, tree.start)
    tune_nodes = np.flatnonzero(tuning & (step >= 0))
    last = np.full(tree.size, -np.inf)
    np.maximum.at(last, owner[mine], start)
    extra = mine.copy()
    extra[mine] = tuning[owner[mine]] & (start < last[owner[mine]])
    e_start, e_end = _rows_spans(model, dev["row"][extra])
    in_steps = nodes[step[nodes] >= 0]
    dims = take(model["ops"]["input_dims"], side_row(model, "ops")[tree.rows[in_steps]], -1)
    in_tuning = take(tuning, take(conv_of, syncs, -1), False).astype(bool) & (step[syncs] >= 0)
    return Convolutions(time=per_step(model, iv.union(start, end)), tuning_rows=tree.rows[tune_nodes],
                        tuning_steps=len(np.unique(step[tune_nodes])),
                        tuning_extra=per_step(model, iv.union(e_start, e_end)),
                        tuning_extra_rows=dev["row"][extra & (step_of(model, ev["ts"][dev["row"]]) >= 0)],
                        tuning_syncs=tree.rows[syncs[in_tuning]], tuned=bool(tuning.any()),
                        shapes=len(np.unique(dims[dims >= 0])), calls=len(in_steps))


@memoized
def tuning_plans(model: TraceModel) -> tuple[np.ndarray, np.ndarray]:
    """Per autotuning convolution call (``convolutions().tuning_rows``): its row, and the host time the same call
    takes without autotuning: cuDNN's heuristics choose one algorithm and build its plan
    (``constants.HEURISTIC_PLAN_US``, forward or backward; never more than the call took). The trace cannot tell
    this itself: benchmark mode builds plans for every engine it considers, many more than the candidates it times,
    before the first timing (a backward call on H200 spent 515 ms so, then timed 20)."""
    ev = model["events"]
    tree = host_tree(model)
    rows = convolutions(model).tuning_rows
    node = np.flatnonzero(np.isin(tree.rows, rows))
    start, end = tree.start[node], tree.end[node]
    backward = name_mask(model, ev["name"][tree.rows[node]], lambda s: "backward" in s)
    plan = np.where(backward, HEURISTIC_PLAN_US["backward"], HEURISTIC_PLAN_US["forward"])
    return tree.rows[node], np.minimum(plan, end - start)


def _nearest(tree: HostTree, mask: np.ndarray) -> np.ndarray:
    """Per node: the nearest node at or above it in ``mask``, -1 if none (one pass per tree level, top down, over
    the tree's levels: a node without a parent has none above it)."""
    out = np.where(mask, np.arange(tree.size), -1)
    for level in tree.levels:
        at = level[out[level] < 0]
        out[at] = out[tree.parent[at]]
    return out


# ------------------------------------------------------------------------------------------------ CUDA graphs

@memoized
def graph_kernels(model: TraceModel) -> np.ndarray:
    """Per ``device_events`` row: launched by a graph launch (``cudaGraphLaunch`` and kin)."""
    tree = host_tree(model)
    ev = model["events"]
    launch = tree.device_launch
    names = take(ev["name"][tree.rows], launch, -1)
    graph: np.ndarray = isin_ints(names, model.codes_where(lambda s: _GRAPH_LAUNCH.match(s) is not None)) & (
        launch >= 0)
    return graph


def host_rows(model: TraceModel, rows: np.ndarray) -> np.ndarray:
    """Event rows with each device event replaced by its launch call (dropped where the launch is unknown)."""
    at = side_row(model, "device_events")[rows]
    launch = take(launch_rows(model), at, -1)
    out = np.where(at >= 0, launch, rows)
    return out[out >= 0]


def device_spans(model: TraceModel, rows: np.ndarray) -> iv.Intervals:
    start, end = _rows_spans(model, rows)
    return iv.union(start, end)


def is_device(model: TraceModel, rows: np.ndarray) -> np.ndarray:
    return isin_ints(model["events"]["kind"][rows], DEVICE_KINDS)


__all__ = ["Allocator", "Compiles", "HostCompute", "OptimizerWork", "Recompute", "allocator_calls",
           "allocator_shapes", "compile_events", "graph_kernels", "host_compute", "optimizer_work", "recompute",
           "spans"]


# ------------------------------------------------------------------------------------------------ claims

CLAIM_SHARE = 0.05  # a cause claims its GPU-idle time (and its rule fires) from this share of the mean step


@memoized
def claims(model: TraceModel) -> dict[str, iv.Intervals]:
    """The GPU-idle time each root cause that holds claims, by finding kind: what the symptom measures (CPU-bound,
    GPU idle gaps, launch-bound) leave to it. A cause holds where its claim is at least ``CLAIM_SHARE`` of the
    mean step (the rules use the same test, so a cause below it leaves its time to the symptom)."""
    steps = find_steps(model)
    mean = float(steps.duration.mean()) if steps.count else 0.0
    if mean <= 0:
        return {}
    found = {"allocator_churn": allocator_calls(model).claimed, "recompilation": compile_events(model).claimed,
             "host_compute": host_compute(model).claimed}
    opt = optimizer_work(model)
    if opt.implementation in ("foreach", "per-parameter"):
        found["unfused_optimizer"] = opt.claimed
    # the GPU idle a host sync's replay charges to it stays the sync's (the sync comes first: without it the host
    # would have run ahead of this work)
    synced = sync_cost(model).charged
    found = {kind: iv.subtract(claim, synced) for kind, claim in found.items()}
    return {kind: claim for kind, claim in found.items()
            if float(per_step(model, claim).mean()) >= CLAIM_SHARE * mean}


def claimed(model: TraceModel) -> iv.Intervals:
    """The union of every holding cause's claim."""
    parts = list(claims(model).values())
    if not parts:
        return iv.EMPTY
    return iv.union(np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]))


# ------------------------------------------------------------------------------------------------ slow steps

_ADDRESS = re.compile(r" (?:of (?:[\w.]+ )?object )?at 0x[0-9a-fA-F]+")


@dataclass(frozen=True)
class StepCause:
    name: str  # the Python function (frame text, no address) or operator
    frame: str | None  # the user's frame that calls it (Python functions)
    slow_us: float  # its self time in the slow step
    usual_us: float  # its median self time in the other steps
    rows: np.ndarray  # its events in the slow step


def step_cause(model: TraceModel, slow: int) -> StepCause | None:
    """What the slow step does that the others do not: of the Python functions (their self time: less the frames
    they call) and host operators (self time), the one whose time in step ``slow`` exceeds its median over the
    other steps by the most (a checkpoint save, an evaluation, logging, a garbage collection the trace shows); None
    where none exceeds it by a third of the step's excess over the median step."""
    steps = find_steps(model)
    if steps.count < 3:
        return None
    f = python_frames(model)
    dur = f.end - f.start
    inner = np.zeros(f.size)
    np.add.at(inner, f.parent[f.parent >= 0], dur[f.parent >= 0])
    tree = host_tree(model)
    ops = np.flatnonzero((tree.kind == Kind.CPU_OP) & ~tree.merged & ~step_mask(
        model, model["events"]["name"][tree.rows]))  # an operator in 1.x
    op_inner = np.zeros(tree.size)
    up = take(tree.op_of, tree.parent[ops], -1)
    np.add.at(op_inner, up[up >= 0], (tree.end - tree.start)[ops][up >= 0])
    names = np.concatenate([f.name, model["events"]["name"][tree.rows[ops]]])
    own = np.concatenate([(dur - inner).clip(min=0.0), ((tree.end - tree.start)[ops] - op_inner[ops]).clip(min=0.0)])
    rows = np.concatenate([f.rows, tree.rows[ops]])
    step = step_of(model, np.concatenate([f.start, tree.start[ops]]))
    keep = step >= 0
    names, own, rows, step = names[keep], own[keep], rows[keep], step[keep]
    text = np.asarray([_ADDRESS.sub("", model.strings[int(c)]) for c in np.unique(names).tolist()], dtype=object)
    labels, label_of = np.unique(text, return_inverse=True)
    key = label_of.reshape(-1)[np.searchsorted(np.unique(names), names)]
    table = np.zeros((len(labels), steps.count))
    np.add.at(table, (key, step), own)
    usual = np.median(np.delete(table, slow, axis=1), axis=1)
    excess = table[:, slow] - usual
    best = int(np.argmax(excess)) if len(excess) else -1
    d = steps.duration
    if best < 0 or excess[best] < max(500.0, (float(d[slow]) - float(np.median(d))) / 3):
        return None
    mine = (key == best) & (step == slow)
    return StepCause(name=str(labels[best]), frame=_caller(model, rows[mine]), slow_us=float(table[best, slow]),
                     usual_us=float(usual[best]), rows=rows[mine])


def _caller(model: TraceModel, rows: np.ndarray) -> str | None:
    """The user's frame around the most of these rows (Python frames: their nearest user frame)."""
    f = python_frames(model)
    pos = np.full(model.n_events, -1, dtype=np.int64)
    pos[f.rows] = np.arange(f.size)
    at = pos[rows]
    at = at[at >= 0]
    user = f.user[at]
    user = user[user >= 0]
    if not len(user):
        return None
    codes, counts = np.unique(f.name[user], return_counts=True)
    return model.strings[int(codes[np.argmax(counts)])]
